//! What an array is configured with when the engine is made (`Engine::format`,
//! recovery): its level, mode, chunks, open segments, logical size, stripe timeout, the
//! L2P table's memory budget and how many drives it spreads over. `Engine::format` checks
//! a configuration against the drives' geometry; nothing here reads a drive.

use crate::hybrid::OpenSegments;
use crate::layout::{Mode, RaidLevel};
use crate::placement::MAX_PLACEMENT_EPOCHS;

/// Array configuration.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub level: RaidLevel,
    pub mode: Mode,
    /// The chunk size of every segment, or with hybrid management the small chunk (Cs).
    pub chunk_bytes: u64,
    /// Segments written at once: Ns of small chunks, Nl of large (`hybrid`).
    pub open_segments: OpenSegments,
    /// Pad and write an incomplete stripe after this long.
    pub stripe_timeout_ns: u64,
    /// Logical blocks exported (at most the data capacity of all segments).
    pub logical_blocks: u64,
    /// Modelled CPU cost of checking one compact stripe table entry, in picoseconds, charged
    /// to degraded reads in simulation (see `PAPER_LOOKUP_PS_PER_ENTRY`).
    pub lookup_ps_per_entry: u64,
    /// The L2P table's memory budget (`l2p`).
    pub l2p: L2pConfig,
    pub array_uuid: [u8; 16],
    /// Chunks a scheduling pass issues to one drive of a Zone Append segment go out as one
    /// Zone Append (`engine::append_batch`). Off: one Zone Append per chunk, as the paper's
    /// ZapRAID, which the experiments reproduce (Exp#1-#10); arrays the CLI formats merge.
    /// Nothing on the drives depends on it.
    pub merge_appends: bool,
    /// How many drives the array spreads its segments over (`Declustering`).
    pub declustering: Declustering,
}

/// An array wider than its stripes (issue 35): `drives` N drives, each segment on k + m
/// of them (`placement`), with `distributed_spares` drives' worth of zones kept free
/// across all of them. The default, N = 0, is the classic array of exactly k + m drives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Declustering {
    /// N; 0: k + m (classic).
    pub drives: u32,
    pub distributed_spares: u32,
    /// The drives the array had before each grow (`zapraid grow`), oldest first, 0 past
    /// the last: each an earlier placement some rows may still be in (`lanes`).
    pub grown_from: [u8; MAX_PLACEMENT_EPOCHS - 1],
}

impl Declustering {
    /// The classic array: every segment on all k + m drives.
    pub const CLASSIC: Declustering = Declustering::wide(0, 0);

    /// An array of `drives` drives with `distributed_spares` drives' worth of spare space,
    /// never grown.
    pub const fn wide(drives: u32, distributed_spares: u32) -> Declustering {
        Declustering { drives, distributed_spares, grown_from: [0; MAX_PLACEMENT_EPOCHS - 1] }
    }

    /// The drives of each placement the array has had, oldest first: the earlier ones
    /// (`grown_from`), then N.
    pub fn epoch_drives(self, width: usize) -> impl Iterator<Item = usize> {
        let earlier = self.grown_from.into_iter().take_while(|&n| n != 0).map(usize::from);
        earlier.chain(std::iter::once(self.drives_for(width)))
    }

    /// Segments each zone index of the drives holds for stripes of `width` drives (G: a
    /// row's groups, `placement`); 1 for a classic array, 0 for a shape that cannot be.
    pub fn segments_per_zone(self, width: usize) -> u32 {
        let drives = self.drives_for(width);
        let for_stripes = drives.saturating_sub(self.distributed_spares as usize);
        (for_stripes / width.max(1)) as u32
    }

    /// The array's drives for stripes of `width` drives.
    pub fn drives_for(self, width: usize) -> usize {
        if self.drives == 0 {
            width
        } else {
            self.drives as usize
        }
    }
}

/// How much of the L2P table stays in memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct L2pConfig {
    /// Bytes of pages kept cached, the rest on the drives (None: every page in memory).
    pub budget_bytes: Option<u64>,
    /// Entries per page, fewer than a mapping block holds (None: a whole block's): small
    /// tables then have many pages, so tests exercise eviction.
    pub page_entries: Option<u64>,
    /// A clean stop writes every page back and leaves a checkpoint (`Engine::checkpoint`)
    /// for the next start: set when the array has zones to keep one in.
    pub checkpoint: bool,
}

/// The paper measures a compact stripe table query at G = 256 (768 entries) at about 1 us.
pub const PAPER_LOOKUP_PS_PER_ENTRY: u64 = 1_000_000 / 768;

/// Default partial-stripe timeout (the paper's 100 us).
pub const DEFAULT_STRIPE_TIMEOUT_NS: u64 = 100_000;
