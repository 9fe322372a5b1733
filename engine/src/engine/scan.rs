//! Scans of the L2P table for the live blocks of one segment, for garbage collection and
//! scrub: page by page, pages that map nothing skipped, pages only on the drives read
//! first (the scan waits for them), and with an L2P memory budget a stop past a page
//! scanned in this round while the cache is over budget (and its dirty pages can be
//! written back: `may_write_back`), so that `settle` evicts before the scan makes more
//! pages resident.
//!
//! Invariant: a round never stops before the page the scan stands at is scanned (it may
//! have waited for that page), so each round moves the scan on by a page at least and a
//! scan over budget cannot livelock evicting the page it just loaded.

use super::machine::Engine;
use super::state::scan::{LiveScan, ScanStep};
use super::state::stop::StopState;

impl Engine {
    /// Moves `scan` on to the next live block of its segment, or says why it cannot.
    pub(super) fn scan_step(&mut self, scan: &mut LiveScan) -> ScanStep {
        let logical_blocks = self.l2p.logical_blocks();
        let per_page = self.l2p.entries_per_page();
        while scan.next_lba < logical_blocks {
            let lba = scan.next_lba;
            let page = self.l2p.page_of(lba);
            let page_start = lba.is_multiple_of(per_page);
            // Nothing is evicted while the array stops, nor dirty pages while they cannot
            // be written back, so a scan then never waits for it.
            scan.waiting_room = scan.scanned_in_round
                && page_start
                && self.stop == StopState::Running
                && self.l2p.over_budget()
                && self.may_write_back();
            if scan.waiting_room {
                return ScanStep::Wait;
            }
            if page_start && !self.l2p.may_map(page) {
                scan.next_lba = (lba + per_page).min(logical_blocks);
                continue;
            }
            if !self.page_ready(page) {
                return ScanStep::Wait;
            }
            scan.next_lba += 1;
            scan.scanned_in_round = true;
            if let Some(at) = self.l2p.get(lba).filter(|p| p.zone == scan.zone) {
                return ScanStep::Live { lba, at, page };
            }
        }
        ScanStep::Done
    }

    /// A scan stopped to let pages be evicted: after evicting, `settle` runs the engine
    /// again for it.
    pub(super) fn scan_waits_for_room(&self) -> bool {
        let relocation = self.relocation.as_ref().is_some_and(|r| r.scan.waiting_room);
        relocation || self.scrub_scan().is_some_and(|s| s.waiting_room)
    }
}
