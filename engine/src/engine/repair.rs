//! Repair rewrites, for scrub and for frontend reads that rebuilt a damaged block: the
//! block's contents as they should be are written into a relocation stripe with its
//! timestamp, as garbage collection moves blocks (a zone is written only at its write
//! pointer, so nothing is fixed in place), and the L2P entry follows only if it still
//! points at the damaged place.
//!
//! Invariants: one rewrite per damaged place at a time (`pending`); the page holding a
//! repaired block's entry is pinned from the moment its rewrite is added to a stripe until
//! it is persisted or failed, so the entry can be checked and moved then without reading
//! the page again. With an L2P budget a repair whose page is only on the drives waits,
//! its page being read, before its rewrite is added; none is added while the array stops.

use std::collections::HashMap;

use crate::error::Error;
use crate::l2p::{PageIndex, Physical};

use super::*;
use crate::format::mapping_page_of;

/// Repairs scheduled (scrub's and reads'), keyed by the damaged place.
#[derive(Default)]
pub(super) struct Repairs {
    /// Per damaged place being rewritten (or waiting for its page): whether the scrub (not
    /// a read) asked for it.
    pub(super) pending: HashMap<Physical, bool>,
    /// Rewrites waiting for the page of their entry to be read.
    waiting: Vec<WaitingRepair>,
    /// Read repairs persisted.
    pub(super) read_repairs_done: u64,
    pub(super) read_repairs_scheduled: u64,
    /// Blocks added to the relocation stripe that no relocation will pad.
    pub(super) unpadded: bool,
}

struct WaitingRepair {
    lba: u64,
    timestamp: u64,
    from: Physical,
    data: Vec<u8>,
}

impl Engine {
    /// The page to pin for a repaired block's entry; None for a mapping block (the
    /// directory is always in memory).
    fn repair_page(&self, lba: u64) -> Option<PageIndex> {
        mapping_page_of(lba).is_none().then(|| self.l2p.page_of(lba))
    }

    /// Rewrites a live block (its contents as they should be) into a relocation stripe,
    /// keeping its timestamp; the L2P entry follows if it still points at `from`. Once per
    /// place while one is in flight; none while the array stops.
    pub(super) fn schedule_repair(&mut self, lba: u64, timestamp: u64, from: Physical, data: Vec<u8>, by_scrub: bool) {
        if self.stop != StopState::Running || self.repairs.pending.contains_key(&from) {
            return;
        }
        self.repairs.pending.insert(from, by_scrub);
        self.add_repair(WaitingRepair { lba, timestamp, from, data });
    }

    /// Adds a scheduled repair's rewrite to the relocation stripe once its page is
    /// cached (pinning it), or keeps it waiting for the page.
    fn add_repair(&mut self, repair: WaitingRepair) {
        if let Some(page) = self.repair_page(repair.lba) {
            if !self.page_ready(page) {
                return self.repairs.waiting.push(repair);
            }
            self.l2p.pin(page);
        }
        let WaitingRepair { lba, timestamp, from, data } = repair;
        tracing::debug!(lba = %crate::format::LbaField(lba), zone = from.zone, drive = from.drive, "a damaged block's stripe row is rewritten");
        let data_crc = crc32c::crc32c(&data);
        let info = BlockInfo { lba, timestamp, request: None, relocated_from: Some(from), repair: true, data_crc };
        self.add_block(info, data, Fill::Relocation);
        self.repairs.unpadded = true;
    }

    /// Adds the waiting repairs whose pages are cached now; while the array stops they
    /// are dropped (a later scrub finds the damage again).
    fn add_waiting_repairs(&mut self) {
        for repair in std::mem::take(&mut self.repairs.waiting) {
            if self.stop != StopState::Running {
                self.repairs.pending.remove(&repair.from);
                continue;
            }
            self.add_repair(repair);
        }
    }

    /// The page of waiting repairs cannot be read: they are dropped, the damaged copies
    /// stay (reads rebuild them from parity).
    pub(super) fn drop_repairs_waiting_on(&mut self, page: PageIndex, error: &Error) {
        let waiting = std::mem::take(&mut self.repairs.waiting);
        for repair in waiting {
            if self.repair_page(repair.lba) == Some(page) {
                tracing::error!(lba = %crate::format::LbaField(repair.lba), error = %error, "a repair is dropped: its L2P page cannot be read");
                self.repairs.pending.remove(&repair.from);
            } else {
                self.repairs.waiting.push(repair);
            }
        }
    }

    /// Repairs scheduled and not yet persisted (or failed).
    pub(super) fn repairs_in_flight(&self) -> u64 {
        self.repairs.pending.len() as u64
    }

    /// A frontend read rebuilt a damaged block of a working drive: rewrite it.
    pub(super) fn schedule_read_repair(&mut self, lba: u64, timestamp: u64, from: Physical, data: Vec<u8>) {
        if self.mapped_now(lba) != Some(from) {
            return;
        }
        self.repairs.read_repairs_scheduled += 1;
        self.schedule_repair(lba, timestamp, from, data, false);
    }

    /// Adds waiting repairs whose pages came in, then pads the relocation stripe holding
    /// repairs, unless a relocation runs (it pads it). Whether a stripe was padded.
    pub(super) fn flush_repairs(&mut self) -> bool {
        self.add_waiting_repairs();
        if !self.repairs.unpadded || self.relocation.is_some() {
            return false;
        }
        self.repairs.unpadded = false;
        if self.gc_open_stripe.is_none() {
            return false;
        }
        self.pad_open_stripe(Fill::Relocation);
        true
    }

    /// A repair rewrite was persisted at `to` (or failed: `to` is None).
    pub(super) fn repair_done(&mut self, lba: u64, from: Physical, to: Option<Physical>) {
        let by_scrub = self.repairs.pending.remove(&from);
        debug_assert!(by_scrub.is_some(), "a repair of a place not scheduled");
        let page = self.repair_page(lba);
        let moved = to.filter(|_| self.mapped(lba) == Some(from)); // else overwritten or moved meanwhile
        if let Some(page) = page {
            self.l2p.unpin(page);
        }
        let Some(to) = moved else { return };
        self.map_lba(lba, to);
        if by_scrub == Some(true) {
            self.count_scrub_rewrite();
        } else {
            self.repairs.read_repairs_done += 1;
        }
    }
}
