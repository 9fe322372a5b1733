//! A drive rebuild under way (`DriveRebuild`), the segments it is rebuilding and the step
//! of each (`ZoneRebuild`, `Step`), the chunks read to reconstruct one (`ChunkSources`),
//! and what each of its commands is for (`RebuildOp`). The rebuild itself is `rebuild`'s.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use crate::format::FooterEntry;

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
    /// Zone-relative offset -> LBA of the blocks on the drive the table maps, looked up
    /// once the first chunk that cannot be reconstructed comes (`lost::unknown_entries`).
    pub(in crate::engine) mapped_here: Option<HashMap<u64, u64>>,
}

pub(in crate::engine) struct ChunkSources {
    pub(in crate::engine) stripe_number: u64,
    /// Per drive, its chunk of the stripe (data, metadata), once read intact.
    pub(in crate::engine) shards: Vec<Option<(Vec<u8>, Vec<u8>)>>,
    pub(in crate::engine) pending: usize,
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
