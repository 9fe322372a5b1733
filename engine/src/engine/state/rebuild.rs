//! A drive rebuild under way (`DriveRebuild`), the segments it is rebuilding and the step
//! of each (`ZoneRebuild`, `Step`), the chunks read to reconstruct one (`ChunkSources`),
//! and what each of its commands is for (`RebuildOp`). The rebuild itself is `rebuild`'s.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use crate::format::FooterEntry;
use crate::pool::BufferPool;

pub(in crate::engine) struct DriveRebuild {
    pub(in crate::engine) drive: usize,
    /// Which rebuild since the engine started: its commands carry it, so that those of a
    /// rebuild that stopped, completing during the next, count for nothing in it.
    pub(in crate::engine) number: u64,
    /// The drive holds what an earlier rebuild wrote: each segment's zone on it is checked
    /// first (`resume`), and kept if that rebuild completed it.
    pub(in crate::engine) resuming: bool,
    /// Segments kept that way.
    pub(in crate::engine) segments_kept: u64,
    /// The segments being rebuilt, by zone: at most `Engine::rebuild_segments_at_once`.
    pub(in crate::engine) zones: BTreeMap<u32, ZoneRebuild>,
    pub(in crate::engine) segments_rebuilt: u64,
    pub(in crate::engine) blocks_written: u64,
    pub(in crate::engine) blocks_unrecoverable: u64,
    /// Whether the segments garbage collection could not reclaim were tried again before
    /// the rebuild ends (`retry_unreclaimable`).
    pub(in crate::engine) retried_unreclaimable: bool,
    /// Whether the rebuild has come to wait for such segments, after that try (and said
    /// so in the log): only then does `status` count them as what it waits for, not while
    /// garbage collection tries them once more.
    pub(in crate::engine) waiting_unreclaimable: bool,
    /// The drive's lanes are rebuilt into distributed spare space on the other drives
    /// (`rebuild::spares`), not onto a new drive in its place: it stays failed.
    pub(in crate::engine) into_spares: bool,
    /// The rebuild's own buffers (its reads, the chunks it rebuilds, its writes), bounded
    /// by what its segments' windows hold at once (`rebuild::chunks`), dropped with it.
    pub(in crate::engine) buffers: BufferPool,
    /// The segments whose commands' completions (or jobs' results) are the event being
    /// taken, if they are the rebuild's and succeeded: only those segments can move on for
    /// it (`rebuild::advance`).
    pub(in crate::engine) focus: Vec<u32>,
    /// An event not the rebuild's came while it could not move on (a stop, a checkpoint
    /// draining): the next one advances every segment under way.
    pub(in crate::engine) advance_all: bool,
    /// The segments under way and at once when the last look for segments to start found
    /// none: until one of them changes, or an event not the rebuild's comes, none is
    /// looked for again (a look goes over every segment).
    pub(in crate::engine) nothing_to_start: Option<(usize, usize)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::engine) enum Step {
    /// Reading the new drive's header and footer of the segment (`resume`).
    Checking,
    Resetting,
    /// Reading another drive's header block.
    Header,
    Chunks,
    Footer,
    Finishing,
}

/// A segment being rebuilt onto the new drive.
pub(in crate::engine) struct ZoneRebuild {
    pub(in crate::engine) step: Step,
    /// Chunks of the segment one read or write carries at most
    /// (`drive_command::chunks_per_transfer`).
    pub(in crate::engine) chunks_per_transfer: u64,
    /// Drives the header may be read from, the next to try first.
    pub(in crate::engine) header_sources: Vec<usize>,
    pub(in crate::engine) next_read: u64,
    pub(in crate::engine) next_write: u64,
    /// Chunk positions being read: the stripe and the other drives' chunks read so far.
    pub(in crate::engine) reading: BTreeMap<u64, ChunkSources>,
    /// Reconstructed chunks (data, metadata) waiting for their turn to be written.
    pub(in crate::engine) ready: BTreeMap<u64, (Vec<u8>, Vec<u8>)>,
    pub(in crate::engine) writes_in_flight: usize,
    /// The new drive's footer entries, one per data-region block, as chunks are rebuilt.
    pub(in crate::engine) footer: Vec<FooterEntry>,
    /// The first footer block not written yet (the footer goes out piece by piece).
    pub(in crate::engine) footer_next: u64,
    /// While `Checking`: reads left, and whether one found the zone incomplete.
    pub(in crate::engine) checks_pending: usize,
    pub(in crate::engine) check_failed: bool,
    /// The stripe table of the group its reads are in, inverted (`rebuild::places`),
    /// once a read needed it.
    pub(in crate::engine) group_places: Option<GroupPlaces>,
    /// Zone-relative offset -> LBA of the blocks on the drive the table maps, looked up
    /// once the first chunk that cannot be reconstructed comes (`lost::unknown_entries`).
    pub(in crate::engine) mapped_here: Option<HashMap<u64, u64>>,
}

pub(in crate::engine) struct ChunkSources {
    pub(in crate::engine) stripe_number: u64,
    /// Per drive, its chunk of the stripe, once read whole (checked by the rebuild job:
    /// `rebuild::job`).
    pub(in crate::engine) shards: Vec<Option<JobSource>>,
    pub(in crate::engine) pending: usize,
}

/// One source of a job: a chunk of the stripe as a drive returned it, unchecked: `chunk
/// bytes` of `data` from `data_offset`, its blocks' metadata in `metadata` from
/// `metadata_offset`. Reads of several chunks are shared by the chunks they carry.
#[derive(Clone, Debug)]
pub(in crate::engine) struct JobSource {
    pub(in crate::engine) data: Arc<Vec<u8>>,
    pub(in crate::engine) data_offset: usize,
    pub(in crate::engine) metadata: Arc<Vec<u8>>,
    pub(in crate::engine) metadata_offset: usize,
}

/// A position within a group that holds no chunk of a stripe (not recorded).
pub(in crate::engine) const NO_POSITION: u32 = u32::MAX;

/// One group's stripe table inverted (`rebuild::places`): per lane and stripe ID of the
/// group, the position within the group of the lane's chunk of that stripe.
pub(in crate::engine) struct GroupPlaces {
    pub(in crate::engine) group: u64,
    pub(in crate::engine) group_size: usize,
    pub(in crate::engine) positions: Vec<u32>,
}

impl GroupPlaces {
    /// Where `lane` holds stripe `stripe_id` of the group, if it does.
    pub(in crate::engine) fn position(&self, lane: usize, stripe_id: u32) -> Option<u64> {
        let at = *self.positions.get(lane * self.group_size + stripe_id as usize)?;
        (at != NO_POSITION).then_some(u64::from(at))
    }
}

/// What a rebuild command was for.
#[derive(Clone, Copy, Debug)]
pub(in crate::engine) enum RebuildOp {
    Reset,
    Header,
    /// `chunks` chunks of `source`, of the positions from `position` on.
    Read {
        position: u64,
        source: usize,
        chunks: u64,
    },
    Write {
        blocks: u64,
    },
    Finish,
    /// Reading the new drive's header block (`None`) or footer blocks from `Some(first)`.
    Check {
        footer_first: Option<u64>,
    },
}
