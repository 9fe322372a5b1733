//! Repair rewrites, for scrub and for frontend reads that rebuilt a damaged block: a
//! damaged row (the same block offset of every chunk of a stripe) is repaired whole, every
//! live block of it rewritten (the damaged ones rebuilt from the others) with its timestamp
//! into a relocation stripe, as garbage collection moves blocks (a zone is written only at
//! its write pointer, so nothing is fixed in place); the L2P entry follows only if it still
//! points at the old place. A row left with one bad chunk and live blocks beside it would
//! lose those blocks to the next drive failure, so a read repairs the row as a scrub does
//! (`rewrite_row` serves both): the scrub knows which places are live from its scan of the
//! L2P table, a read from the LBA each block of the row says, checked against the table.
//!
//! Invariants: one rewrite per damaged place at a time (`pending`); a rewrite is added to a
//! stripe only while the L2P maps its LBA at its place (else nothing is rewritten: a newer
//! write, relocation or discard came first); the page holding a repaired block's entry is
//! pinned from the moment its rewrite is added to a stripe until it is persisted or failed,
//! so the entry can be checked and moved then without reading the page again. With an L2P
//! budget a repair whose page is only on the drives waits, its page being read, before its
//! rewrite is added; none is added while the array stops or a running checkpoint drains.

use crate::error::Error;
use crate::format::{decode_fields, field_bytes, mapping_page_of, NO_LBA};
use crate::l2p::{PageIndex, Physical};

use super::machine::Engine;
use super::state::read::BlockRebuild;
use super::state::repair::{Row, RowLive, RowRewrite, WaitingRepair};
use super::state::stop::StopState;
use super::state::stripe::{BlockInfo, Fill};

impl Engine {
    /// The page to pin for a repaired block's entry; None for a mapping block (the
    /// directory is always in memory).
    fn repair_page(&self, lba: u64) -> Option<PageIndex> {
        mapping_page_of(lba).is_none().then(|| self.l2p.page_of(lba))
    }

    /// Rewrites every live block of a damaged row into a relocation stripe, the damaged
    /// ones rebuilt from the others when parity covers them, as `by_scrub` or a read's
    /// repair.
    pub(super) fn rewrite_row(&mut self, mut row: Row, live: RowLive, by_scrub: bool) -> RowRewrite {
        let parity = self.codec.parity_chunks();
        let damaged = row.places.iter().zip(&row.data).filter(|(p, d)| p.is_some() && d.is_none()).count();
        let missing = row.places.iter().filter(|p| p.is_none()).count();
        if damaged > 0 && damaged + missing <= parity {
            // Within what parity covers: the damaged blocks come back (a failure leaves
            // them None, and they count as unrecoverable below).
            let rebuilt = self.codec.reconstruct(&mut row.data).and_then(|()| self.codec.reconstruct(&mut row.fields));
            if let Err(e) = rebuilt {
                let at = row.places.iter().flatten().next();
                let (zone, offset) = (at.map(|p| p.zone), at.map(|p| p.offset));
                tracing::error!(zone, offset, error = %e, "a damaged row cannot be rebuilt");
            }
        }
        let live = match live {
            RowLive::Known(live) => live,
            RowLive::Said => (0..self.codec.data_chunks())
                .filter(|c| row.places[*c].is_some())
                .filter_map(|c| Some((c, decode_fields(row.fields[c].as_deref()?)?.0)))
                .filter(|(_, lba)| self.names_a_mapped_block(*lba))
                .collect(),
        };
        let mut outcome = RowRewrite::default();
        for (c, lba) in live {
            debug_assert!(row.places[c].is_some(), "a live block of the row has its place");
            let Some(place) = row.places[c] else { continue };
            if self.is_lost(lba) {
                continue; // a lost-block marker: no data to save, it moves with its segment
            }
            let rebuilt = match (row.data[c].take(), row.fields[c].as_deref().and_then(decode_fields)) {
                // Rebuilt, and the block mapped here.
                (Some(data), Some((got_lba, timestamp))) if got_lba == lba => Some((data, timestamp)),
                _ => None, // damaged beyond what parity covers, or not the block mapped here
            };
            let Some((data, timestamp)) = rebuilt else {
                match mapping_page_of(lba).and_then(|page| PageIndex::try_from(page).ok()) {
                    // An index, not data: its page is rebuilt from the log (or its LBAs
                    // recorded lost, `page_rebuild`) and written back elsewhere, as for a
                    // segment garbage collection keeps for it; nothing of the array's
                    // data is lost because its index was.
                    Some(page) => self.move_page_out(page, place.zone),
                    None => {
                        outcome.unrecoverable += 1;
                        self.note_holes(place.zone);
                    }
                }
                continue;
            };
            outcome.scheduled += 1;
            self.schedule_repair(lba, timestamp, place, data, by_scrub);
        }
        outcome
    }

    /// Whether an LBA field read from a drive names something the L2P maps (a logical
    /// block or a mapping page of this array), not padding nor a value out of range.
    fn names_a_mapped_block(&self, lba: u64) -> bool {
        match mapping_page_of(lba) {
            Some(page) => page < self.l2p.page_count() as u64,
            None => lba != NO_LBA && lba < self.l2p.logical_blocks(),
        }
    }

    /// Rewrites a live block (its contents as they should be) into a relocation stripe,
    /// keeping its timestamp; the L2P entry follows if it still points at `from`. Once per
    /// place while one is in flight; none while the array stops.
    fn schedule_repair(&mut self, lba: u64, timestamp: u64, from: Physical, data: Vec<u8>, by_scrub: bool) {
        if self.stop != StopState::Running || self.repairs.pending.contains_key(&from) {
            return;
        }
        self.repairs.pending.insert(from, by_scrub);
        self.add_repair(WaitingRepair { lba, timestamp, from, data });
    }

    /// Adds a scheduled repair's rewrite to the relocation stripe once its page is
    /// cached (pinning it), or keeps it waiting for the page; drops it if the L2P no
    /// longer maps its LBA at its place.
    fn add_repair(&mut self, repair: WaitingRepair) {
        let page = self.repair_page(repair.lba);
        if let Some(page) = page {
            if !self.page_ready(page) {
                return self.repairs.waiting.push(repair);
            }
        }
        if self.mapped(repair.lba) != Some(repair.from) {
            // Overwritten, moved or discarded since it was read: nothing to rewrite, and a
            // copy of it with its old timestamp must not land anywhere.
            self.repairs.pending.remove(&repair.from);
            return self.buffers.give(repair.data);
        }
        if let Some(page) = page {
            self.l2p.pin(page);
        }
        let WaitingRepair { lba, timestamp, from, data } = repair;
        if self.repairs.pending.get(&from) == Some(&false) {
            self.repairs.read_repairs_scheduled += 1;
        }
        tracing::debug!(lba = %crate::format::LbaField(lba), zone = from.zone, drive = from.drive, "a block of a damaged stripe row is rewritten");
        let data_crc = crate::crc::crc32c(&data);
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

    /// A frontend read rebuilt a damaged block of a working drive (`block`, with its
    /// `timestamp`) from the rest of its row, read for that (`r.shards`): the row is
    /// rewritten, that block and every other live block of it, so that none stays in a
    /// row with a bad chunk. The shards the row takes are its to keep.
    pub(super) fn schedule_read_repair(&mut self, r: &mut BlockRebuild, block: Vec<u8>, timestamp: u64) {
        let zone = r.physical.zone;
        let Some(layout) = self.segment_of_zone(zone).map(|s| s.layout).filter(|_| self.stop == StopState::Running)
        else {
            return self.buffers.give(block);
        };
        let n = layout.drives();
        let mut row = Row { places: vec![None; n], data: vec![None; n], fields: vec![None; n] };
        debug_assert_eq!(layout.chunk_on(r.stripe_number, r.physical.drive), r.lost_chunk);
        row.places[r.lost_chunk] = Some(r.physical);
        row.data[r.lost_chunk] = Some(block);
        row.fields[r.lost_chunk] = Some(field_bytes(r.lba, timestamp).to_vec());
        for (drive, offset) in r.offsets.iter().enumerate() {
            let Some(offset) = offset.filter(|_| self.holds(zone, drive)) else { continue };
            let c = layout.chunk_on(r.stripe_number, drive);
            row.places[c] = Some(Physical { zone, drive, offset });
            if let Some((data, fields)) = r.shards[drive].take() {
                row.data[c] = Some(data);
                row.fields[c] = Some(fields.to_vec());
            }
        }
        self.rewrite_row(row, RowLive::Said, false);
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
