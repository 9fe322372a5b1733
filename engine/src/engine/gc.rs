//! Garbage collection: when empty zones run low (or a segment recovered open waits to be
//! reclaimed), the sealed segment with the fewest live blocks is relocated: an L2P scan
//! finds its live blocks, they are read (rebuilt if need be) and rewritten, keeping their
//! timestamps, in stripes of their own that go out before frontend stripes; the L2P entry
//! moves only if it still points at the old place. Once every moved block is persisted
//! and nothing is in flight on the old zones, they are reset and free. A crash before the
//! reset leaves two copies with the same timestamp and contents; recovery takes the newer
//! segment's. How many empty zones frontend stripes and relocations leave, and why the
//! exported capacity guarantees a victim worth moving, is in `capacity`.
//!
//! Invariant: a segment is reset only when the L2P table maps nothing into it and nothing
//! is in flight on its zones.

use zapraid_zns::ZoneAction;

use crate::capacity::{GC_RESERVED_ZONES, GC_START_FREE_ZONES, RECOVERY_RESERVED_ZONES};
use crate::error::Result;
use crate::hybrid::ChunkClass;
use crate::l2p::Physical;

use super::machine::Engine;
use super::mapping;
use super::state::read::ReadOrigin;
use super::state::relocation::Relocation;
use super::state::scan::{LiveScan, ScanStep};
use super::state::segment::{Segment, SegmentState};
use super::state::stop::StopState;
use super::state::stripe::{BlockInfo, Fill};

/// Relocation reads in flight at once: bounds the memory garbage collection holds.
pub(super) const GC_MAX_READS_IN_FLIGHT: usize = 64;

impl Engine {
    /// Empty zones that opening a segment must leave (see `capacity`): the recovery reserve
    /// (relocations may use it while `restoring_reserve`), and for user stripes while a
    /// relocation runs, the relocation's zone too.
    pub(super) fn zones_to_leave(&self, gc: bool) -> usize {
        match &self.relocation {
            Some(_) if !gc => RECOVERY_RESERVED_ZONES + GC_RESERVED_ZONES,
            Some(_) => self.relocation_zones_to_leave(),
            None => RECOVERY_RESERVED_ZONES,
        }
    }

    /// Empty zones a relocation must leave: none after a restart until the segments that
    /// were open are reclaimed and the reserve is whole again, else the recovery reserve.
    pub(super) fn relocation_zones_to_leave(&self) -> usize {
        if self.restoring_reserve {
            0
        } else {
            RECOVERY_RESERVED_ZONES
        }
    }

    /// Whether recovered open segments still wait to be reclaimed.
    pub(super) fn reclaim_left(&self) -> bool {
        let waiting = |s: &&Segment| s.reclaim_first && s.state != SegmentState::Relocating && !s.unreclaimable;
        self.segments.iter().flatten().any(|s| waiting(&s))
    }

    /// Whether segments with holes (`lost`) still wait to be reclaimed.
    fn holes_left(&self) -> bool {
        let waiting = |s: &&Segment| s.holes && s.state == SegmentState::Sealed && !s.unreclaimable;
        self.segments.iter().flatten().any(|s| waiting(&s))
    }

    /// Ends the use of the recovery reserve after a restart once the segments that were
    /// open are reclaimed and enough zones are empty.
    pub(super) fn update_restoring_reserve(&mut self) {
        self.restoring_reserve &= self.reclaim_left() || self.free_zones.len() < GC_START_FREE_ZONES;
    }

    /// Data blocks the open segments relocated stripes go to can still take, counted in
    /// whole stripes.
    pub(super) fn relocation_room_blocks(&self) -> u64 {
        self.open_room_blocks(self.plan.gc_class())
    }

    /// Data blocks the open segments of `class` can still take, counted in whole stripes.
    pub(super) fn open_room_blocks(&self, class: ChunkClass) -> u64 {
        let open = (0..self.slots.len()).filter(|s| self.plan.slots[*s].class == class).filter_map(|s| self.slots[s]);
        open.map(|zone| {
            let seg = self.seg(zone);
            let issued = seg.group * seg.layout.group_size + seg.group_issued;
            (seg.layout.stripes - issued) * seg.layout.stripe_data_blocks()
        })
        .sum()
    }

    /// Starts relocating a segment if one is due: a recovered open segment, or, when empty
    /// zones run low, the sealed segment with the fewest live blocks (greedy), if moving it
    /// frees space (`SegmentPlan::gc_victim_max_live_blocks`). Only if the relocation is
    /// sure to find room: an empty zone it may open, or enough of the open segments it
    /// writes into.
    pub(super) fn maybe_start_gc(&mut self) -> bool {
        // A clean stop starts no new work, but writes it took before it began (and the
        // mapping blocks of its checkpoint) still need room: they are written, not failed.
        let waiting_for_room = self.queued.iter().any(|q| !q.is_empty());
        let may_start = self.stop == StopState::Running || (self.stop.is_draining() && waiting_for_room);
        if self.relocation.is_some() || !self.gc_check_needed || !may_start {
            return false;
        }
        let low = self.free_zones.len() <= GC_START_FREE_ZONES;
        if !low && !self.reclaim_pending {
            return false; // nothing due: spare the scan of every segment
        }
        self.gc_check_needed = false;
        self.reclaim_pending = self.reclaim_left() || self.holes_left() || self.segments_to_rebalance() > 0;
        let first = |s: &Segment| s.reclaim_first || s.holes;
        let worth = |s: &Segment| low && s.valid_blocks <= self.plan.gc_victim_max_live_blocks(&s.layout);
        let awaiting = |s: &Segment| s.awaiting_writes.iter().any(|lba| self.in_flight_lbas.contains_key(lba));
        let victim = self
            .segments
            .iter()
            .flatten()
            .filter(|s| s.state == SegmentState::Sealed && !s.unreclaimable && !awaiting(s))
            .filter(|s| !self.kept_for_pages(s.zone))
            .filter(|s| !self.is_being_rebuilt(s.zone) && Some(s.zone) != self.zone_being_scrubbed())
            .filter(|s| first(s) || worth(s) || s.rebalance)
            // Rebalancing (`rebalance`) only when nothing more pressing is due.
            .min_by_key(|s| (!first(s), !worth(s), s.valid_blocks, s.sequence))
            .map(|s| (s.zone, s.valid_blocks));
        let Some((zone, valid_blocks)) = victim else { return false };
        // A victim that maps nothing needs no room when no repair waits in the relocation
        // stripes either: nothing is written, its zones are reset (a crash may leave such
        // segments, e.g. one whose reset waited for a checkpoint).
        let may_open = self.free_zones.len() > self.relocation_zones_to_leave();
        let padding = self.plan.class_layout(self.plan.gc_class()).stripe_data_blocks();
        let writes_nothing = valid_blocks == 0 && self.gc_open_stripe.is_none() && self.gc_queued.is_empty();
        if !writes_nothing && !may_open && self.relocation_room_blocks() < valid_blocks + padding {
            return false;
        }
        tracing::debug!(zone, valid_blocks, "garbage collection: relocating a segment");
        self.seg_mut(zone).state = SegmentState::Relocating;
        self.relocation = Some(Relocation {
            zone,
            scan: LiveScan::new(zone),
            reads_in_flight: 0,
            writes_in_flight: 0,
            resets_pending: 0,
            resetting: false,
            failed: false,
            keep: false,
            unreadable: Vec::new(),
            awaiting_writes: Vec::new(),
            mapping_pages: self.l2p.directory_in_zone(zone),
            awaits_checkpoint: false,
            checkpoint_passed: false,
        });
        true
    }

    /// Moves the relocation on: the mapping blocks in the segment, then a scan of the L2P
    /// table (page by page, pages that map nothing skipped, pages only on the drives read
    /// first) for its live blocks; each is read (a bounded number at a time) and rewritten,
    /// its page pinned until then. When all are rewritten, resets the zones.
    pub(super) fn advance_relocation(&mut self) {
        let Some(zone) = self.relocation.as_ref().map(|r| r.zone) else { return };
        let logical_blocks = self.l2p.logical_blocks();
        let mut scan = self.relocation.as_ref().expect("relocating").scan;
        scan.begin_round();
        loop {
            let r = self.relocation.as_mut().expect("relocating");
            if scan.is_done(logical_blocks) || r.reads_in_flight == GC_MAX_READS_IN_FLIGHT || r.failed {
                break;
            }
            if let Some(page) = r.mapping_pages.pop() {
                if let Some(from) = self.l2p.directory_get(page).filter(|p| p.zone == zone) {
                    self.relocation.as_mut().expect("relocating").reads_in_flight += 1;
                    self.start_read_at(ReadOrigin::Relocation(from), mapping::mapping_lba(page), vec![Some(from)]);
                }
                continue;
            }
            // A rebalance goes at the rebuild's rate (`rebalance`): each block it moves
            // takes its bytes first.
            if !self.rebalance_may_read(zone) {
                break;
            }
            match self.scan_step(&mut scan) {
                ScanStep::Live { lba, at, page } => {
                    self.l2p.pin(page);
                    if let Some(&timestamp) = self.lost.get(&lba) {
                        self.add_lost_marker(lba, timestamp, at); // nothing to read: a marker again
                        continue;
                    }
                    self.relocation.as_mut().expect("relocating").reads_in_flight += 1;
                    self.start_read(ReadOrigin::Relocation(at), lba, 1);
                }
                ScanStep::Wait | ScanStep::Done => break,
            }
        }
        self.relocation.as_mut().expect("relocating").scan = scan;
        let r = self.relocation.as_ref().expect("relocating");
        if (!r.scan.is_done(logical_blocks) && !r.failed) || r.reads_in_flight > 0 || r.resetting {
            return;
        }
        if !r.failed {
            let awaiting = self.mark_unreadable_lost();
            self.relocation.as_mut().expect("relocating").awaiting_writes.extend(awaiting);
        }
        self.pad_open_stripe(Fill::Relocation);
        let r = self.relocation.as_ref().expect("relocating");
        if r.writes_in_flight > 0 || !self.gc_queued.is_empty() {
            return;
        }
        if !r.awaiting_writes.is_empty() && !r.failed {
            let awaiting = std::mem::take(&mut self.relocation.as_mut().expect("relocating").awaiting_writes);
            // Unreadable blocks with a write or repair in flight: that write may wait for
            // the room this relocation holds, so the relocation ends here with the segment
            // kept, and it is chosen again once none of them is in flight.
            tracing::debug!(
                zone,
                blocks = awaiting.len(),
                "garbage collection: the segment waits for writes in flight"
            );
            let seg = self.seg_mut(zone);
            seg.state = SegmentState::Sealed;
            seg.awaiting_writes = awaiting;
            self.relocation = None;
            self.reclaim_pending = true;
            self.gc_check_needed = true;
            return;
        }
        if r.failed {
            for (lba, _) in std::mem::take(&mut self.relocation.as_mut().expect("relocating").unreadable) {
                self.relocation_unpin(lba);
            }
            tracing::warn!(zone, "garbage collection: relocation failed, the segment stays");
            let seg = self.seg_mut(zone);
            seg.state = SegmentState::Sealed;
            seg.unreclaimable = true;
            seg.write_failed = true;
            self.relocation = None;
            self.gc_check_needed = true;
            return;
        }
        // A mapping block it could not move keeps the segment, unless its page was
        // recorded lost or written back meanwhile (the block is no longer its copy). Its
        // page is written back elsewhere (read first: rebuilt from the log, or its LBAs
        // recorded lost), and the segment is taken again once no page's copy is left in it.
        let pages = if r.keep { self.l2p.directory_in_zone(zone) } else { Vec::new() };
        debug_assert!(r.keep || self.l2p.directory_in_zone(zone).is_empty(), "a mapping block was left behind");
        if !pages.is_empty() {
            tracing::warn!(
                zone,
                pages = pages.len(),
                "garbage collection: the segment stays until pages of the L2P table leave it"
            );
            self.seg_mut(zone).state = SegmentState::Sealed;
            self.mapping.moving_out.extend(pages.into_iter().map(|page| (page, zone)));
            self.relocation = None;
            self.reclaim_pending = true;
            self.gc_check_needed = true;
            return;
        }
        if self.seg(zone).commands_in_flight > 0 {
            return; // reads or zone commands still on its zones
        }
        // The scan is the truth here: it looked at every LBA (pages only on the drives read
        // first), and every block it found in the segment is moved and persisted, or
        // overwritten; nothing maps into a sealed segment afterwards (a page recorded lost
        // whose mapping block is in it sends the scan back, `lost::page_lost`). A count
        // left is of blocks nothing maps: a page recorded lost (`lost::page_lost`) took its
        // LBAs from segments it could not name, and their counts stay too high, also in the
        // checkpoints taken since, so a start from one inherits them.
        debug_assert!(
            (0..logical_blocks).all(|lba| !matches!(self.l2p.peek(lba), Some(Some(at)) if at.zone == zone)),
            "a relocated segment maps nothing"
        );
        if self.seg(zone).valid_blocks > 0 {
            tracing::debug!(zone, count = self.seg(zone).valid_blocks, "garbage collection: a live count too high");
            self.seg_mut(zone).valid_blocks = 0;
        }
        if self.reset_waits_for_checkpoint(zone) {
            return;
        }
        let live: Vec<usize> = (0..self.layout.drives()).filter(|d| !self.lane_failed(zone, *d)).collect();
        let r = self.relocation.as_mut().expect("relocating");
        r.resetting = true;
        r.resets_pending = live.len();
        for drive in live {
            self.zone_command(drive, zone, ZoneAction::Reset);
        }
        self.reset_done();
    }

    /// One reset of the relocated segment's zones completed (or none was needed).
    pub(super) fn reset_done(&mut self) {
        let r = self.relocation.as_ref().expect("relocating");
        if r.resets_pending > 0 {
            return;
        }
        let zone = r.zone;
        debug_assert_eq!(self.seg(zone).commands_in_flight, 0);
        self.segments[zone as usize] = None;
        self.free_zones.push_back(zone);
        for drive in self.settle_free_lanes(zone) {
            self.note_spared(drive);
        }
        self.move_row_to_newest(self.lanes.row(zone));
        self.update_restoring_reserve();
        self.segments_reclaimed += 1;
        self.relocation = None;
        self.gc_check_needed = true;
    }

    /// A relocation read finished: the block joins a relocation stripe, unless it was
    /// overwritten meanwhile.
    pub(super) fn relocation_read_done(&mut self, from: Physical, lba: u64, timestamp: u64, result: Result<Vec<u8>>) {
        let still_there = self.mapped(lba) == Some(from);
        let r = self.relocation.as_mut().expect("relocation reads belong to a relocation");
        r.reads_in_flight -= 1;
        match result {
            Ok(_) if !still_there => self.relocation_unpin(lba),
            Ok(data) => {
                r.writes_in_flight += 1;
                let data_crc = crate::crc::crc32c(&data);
                let info =
                    BlockInfo { lba, timestamp, request: None, relocated_from: Some(from), repair: false, data_crc };
                self.add_block(info, data, Fill::Relocation);
            }
            Err(e) if still_there && crate::format::mapping_page_of(lba).is_none() && Self::beyond_parity(&e) => {
                tracing::warn!(lba, error = %e, "garbage collection: a live block cannot be read or rebuilt");
                r.unreadable.push((lba, from)); // its page stays pinned until it is marked
            }
            Err(_) if !still_there => self.relocation_unpin(lba),
            Err(e) if crate::format::mapping_page_of(lba).is_some() && Self::beyond_parity(&e) => {
                tracing::warn!(lba = %crate::format::LbaField(lba), error = %e, "garbage collection: a mapping block cannot be read; the segment stays");
                r.keep = true;
            }
            Err(e) => {
                tracing::warn!(lba = %crate::format::LbaField(lba), error = %e, "garbage collection: a live block cannot be read");
                r.failed = true;
                self.relocation_unpin(lba);
            }
        }
    }

    /// A relocated block (or a lost-block marker, its LBA field flagged) is persisted at
    /// `to`: the L2P table follows, unless a newer write got there first.
    pub(super) fn relocated(&mut self, field: u64, timestamp: u64, from: Physical, to: Physical) {
        let (lba, marker) = crate::format::split_lost_lba(field);
        if self.mapped(lba) == Some(from) {
            self.map_lba(lba, to);
            if marker {
                self.lost.insert(lba, timestamp);
            } else {
                self.blocks_relocated += 1; // a marker stands for no block moved
                if self.seg(from.zone).rebalance {
                    self.blocks_rebalanced += 1;
                }
            }
        }
        self.relocation_unpin(lba);
        let r = self.relocation.as_mut().expect("relocated blocks belong to a relocation");
        r.writes_in_flight -= 1;
    }

    /// A relocated logical block is done with: its page may be evicted again.
    pub(super) fn relocation_unpin(&mut self, lba: u64) {
        let (lba, _) = crate::format::split_lost_lba(lba);
        if crate::format::mapping_page_of(lba).is_none() {
            self.l2p.unpin(self.l2p.page_of(lba));
        }
    }
}
