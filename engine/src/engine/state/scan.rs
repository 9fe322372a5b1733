//! Where a scan of the L2P table for one segment's live blocks stands (`LiveScan`) and what
//! one step finds (`ScanStep`). Scanning is `scan`'s.

use crate::l2p::{PageIndex, Physical};

/// Where a scan of the table for one segment's live blocks stands.
#[derive(Clone, Copy, Debug)]
pub(in crate::engine) struct LiveScan {
    pub(in crate::engine) zone: u32,
    /// The next LBA to look at.
    pub(in crate::engine) next_lba: u64,
    /// It stopped to let pages be evicted: `settle` runs it again after evicting.
    pub(in crate::engine) waiting_room: bool,
    /// An LBA was scanned in this round (since `begin_round`).
    pub(in crate::engine) scanned_in_round: bool,
}

/// What one step of a scan found.
pub(in crate::engine) enum ScanStep {
    /// `lba` is live in the segment, at `at`; its page is cached.
    Live { lba: u64, at: Physical, page: PageIndex },
    /// A page is being read, or pages must be evicted first: run the scan again later.
    Wait,
    /// Every LBA was looked at.
    Done,
}

impl LiveScan {
    pub(in crate::engine) fn new(zone: u32) -> Self {
        LiveScan { zone, next_lba: 0, waiting_room: false, scanned_in_round: false }
    }

    /// Starts a round of steps (one call of the scan's owner from `pump`).
    pub(in crate::engine) fn begin_round(&mut self) {
        self.scanned_in_round = false;
    }

    pub(in crate::engine) fn is_done(&self, logical_blocks: u64) -> bool {
        self.next_lba == logical_blocks
    }
}
