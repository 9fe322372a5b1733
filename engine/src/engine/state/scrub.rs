//! The scrub: its progress and rate (`Scrub`), the segment being read (`SegmentScrub`) and
//! its stripes in flight, what each scrub command is for (`ScrubRead`), and what it reports
//! (`ScrubReport`, `ScrubStatus`). Scrubbing is `scrub`'s.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::scan::LiveScan;

/// What a scrub found and did. Counts are blocks unless named otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScrubReport {
    pub segments_checked: u64,
    /// Segments still to check (0 once finished).
    pub segments_left: u64,
    pub stripes_checked: u64,
    pub blocks_checked: u64,
    pub bytes_read: u64,
    /// Blocks that failed a check (checksum, segment, stripe, kind, LBA) or could not be
    /// read, in rows holding live data.
    pub blocks_damaged: u64,
    /// Rows whose blocks all passed but whose parity disagreed with their data.
    pub parity_mismatches: u64,
    /// Live blocks rewritten elsewhere (damaged ones reconstructed), persisted.
    pub blocks_rewritten: u64,
    /// Live blocks in rows that lost more than parity covers: they cannot be repaired.
    pub blocks_unrecoverable: u64,
    /// Damaged blocks in rows without live data (nothing to repair; garbage collection
    /// reclaims them).
    pub stale_blocks_damaged: u64,
    /// Stripes read again: their reads completed while a running checkpoint drained.
    pub stripes_read_again: u64,
}

/// The scrub running, if any, and the last one finished.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScrubStatus {
    pub running: Option<ScrubReport>,
    pub last: Option<ScrubReport>,
    /// The running scrub's read rate limit, if it has one.
    pub rate_bytes_per_s: Option<u64>,
    /// Blocks frontend reads had rewritten (a damaged block they rebuilt and every other
    /// live block of its row): added to a stripe, and of those persisted and mapped; and
    /// repair rewrites (scrub's and reads') not yet persisted.
    pub read_repairs_scheduled: u64,
    pub read_repairs_done: u64,
    pub repairs_in_flight: u64,
}

pub(in crate::engine) struct Scrub {
    pub(in crate::engine) zones: VecDeque<u32>,
    pub(in crate::engine) current: Option<SegmentScrub>,
    pub(in crate::engine) report: ScrubReport,
    pub(in crate::engine) rate_bytes_per_s: Option<u64>,
    /// Bytes read since the rate was last set, and when that was.
    pub(in crate::engine) paced_bytes: u64,
    pub(in crate::engine) paced_since_ns: u64,
}

/// The segment being scrubbed.
pub(in crate::engine) struct SegmentScrub {
    pub(in crate::engine) zone: u32,
    /// The drive whose chunk positions enumerate the stripes (each stripe has one chunk
    /// on every drive holding the segment).
    pub(in crate::engine) scan_drive: usize,
    pub(in crate::engine) next_position: u64,
    /// The first position found unwritten: a segment a clean stop closed short ends there.
    pub(in crate::engine) end: u64,
    /// Live blocks: (drive, zone offset) -> LBA, from the L2P table.
    pub(in crate::engine) live: HashMap<(usize, u64), u64>,
    /// The L2P scan that fills `live`, until it is done: no stripe is read before.
    pub(in crate::engine) scan: Option<LiveScan>,
    pub(in crate::engine) reading: BTreeMap<u64, StripeRead>,
    /// Stripes whose reads completed while a running checkpoint drained, read again once
    /// it is written: not checked then (a repair may not begin during one, see
    /// `running_checkpoint`), and otherwise skipped.
    pub(in crate::engine) again: Vec<u64>,
    /// Per position, whether it was dealt with (checked, or deliberately passed over):
    /// every position before `end` is, once the segment is done (asserted).
    pub(in crate::engine) done: Vec<bool>,
    /// Repairs were scheduled: the relocation stripe is padded when the segment is done.
    pub(in crate::engine) repaired: bool,
}

impl SegmentScrub {
    pub(in crate::engine) fn mark_done(&mut self, position: u64) {
        if let Some(done) = self.done.get_mut(position as usize) {
            *done = true;
        }
    }
}

/// A chunk read back: its data and metadata.
pub(in crate::engine) type ChunkRead = (Vec<u8>, Vec<u8>);

pub(in crate::engine) struct StripeRead {
    pub(in crate::engine) stripe_number: u64,
    /// Per drive: the chunk position, and what was read (None: read failed).
    pub(in crate::engine) chunks: Vec<Option<(u64, Option<ChunkRead>)>>,
    pub(in crate::engine) pending: usize,
}

/// What a scrub command was for.
#[derive(Clone, Copy, Debug)]
pub(in crate::engine) struct ScrubRead {
    pub(in crate::engine) zone: u32,
    pub(in crate::engine) position: u64,
}
