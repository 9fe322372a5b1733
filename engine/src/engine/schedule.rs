//! Group scheduling and persistence: queued stripes go into the open segments (one per
//! slot, `hybrid`) a group at a time. Every stripe of a segment's current group is in
//! flight at once (Zone Append: chunks land where the drive puts them and the compact
//! stripe table records it); the next group starts only when the previous one is
//! persisted, and the first waits for the header. With G = 1 (Zone Write segments) a
//! stripe is a group of its own, written at its fixed offset. A stripe goes to a slot of
//! its chunk class: an idle Zone Write segment first (round robin), else the Zone Append
//! one; each slot opens its next segment as soon as its class has stripes waiting.
//! Relocated stripes go before frontend stripes in the slots they share.
//!
//! A persisted stripe records its blocks in the segment's footer entries, updates the L2P
//! table (newest timestamp wins) and acknowledges writes whose blocks are all persisted.
//!
//! The loop (`settle`: `pump`, then L2P write-back) runs after every event that can have
//! given it work; `nothing_to_schedule` and `background_idle` say which cannot.
//!
//! Invariants: every chunk of a group lands inside the group's region (Zone Writes go one
//! at a time per drive's zone: `zone_writes`).

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, VecDeque};

use zapraid_zns::{Command, Completion, Done};

use crate::error::Error;
use crate::format::{BlockKind, BlockMetadata, FooterEntry};
use crate::hybrid::ChunkClass;
use crate::l2p::Physical;

use super::machine::{Engine, Op};
use super::request::Response;
use super::state::segment::SegmentState;
use super::state::stop::StopState;
use super::state::stripe::{ChunkBuffers, Fill, Stripe};

/// Stripes a Zone Append segment has in flight at most when its chunk class also has Zone
/// Write segments (hybrid management): a drive gains nothing from more than four appends
/// in flight to one zone (the paper's Figure 2).
const HYBRID_APPEND_STRIPES_IN_FLIGHT: u64 = 4;

impl Engine {
    /// No garbage collection, rebuild, scrub (even one pausing for its rate) or stop under
    /// way, nor a segment waiting to be closed, nor pages to read after a start from a
    /// checkpoint: nothing that waits for commands to finish.
    pub(super) fn background_idle(&self) -> bool {
        self.stop == StopState::Running
            && self.relocation.is_none()
            && self.drive_rebuild.is_none()
            && self.scrub.is_none()
            && self.retiring.is_empty()
            && self.overlay_drained()
    }

    /// Whether a read or write just taken gave the scheduling loop no work: it sealed no
    /// stripe (none is queued), parked for no L2P page, and cached none past the budget.
    /// Everything else the loop does waits on completions, ticks or other requests, which
    /// run it. (The loop does not always finish its own work in one pass: a rebuild's
    /// next reads, a collection a retired segment made due. That waits for the next event
    /// that runs it, the rebuild's own completions or the zone commands', and the server
    /// ticks every turn.)
    pub(super) fn nothing_to_schedule(&self) -> bool {
        self.queued.iter().all(VecDeque::is_empty)
            && self.gc_queued.is_empty()
            && self.mapping_idle()
            && self.overlay_drained()
            && !self.l2p.over_budget()
    }

    /// Runs what an event made possible, then evicts L2P pages past the budget (writing
    /// the dirty ones) and runs again for them, and for a garbage collection scan that
    /// stopped to let pages be evicted (each round moves the scan on by a page at least).
    pub(super) fn settle(&mut self) {
        let failed_before = self.mapping.write_backs_failed;
        loop {
            self.pump();
            if self.mapping.write_backs_failed > failed_before {
                // Mapping blocks failed (no room: the array full): their pages came back
                // dirty, and writing them again now would fail again, for ever. The next
                // event tries again.
                break;
            }
            let evictions = self.l2p.stats().evictions;
            let written = self.write_back_evicted();
            let room_made = self.l2p.stats().evictions > evictions && self.scan_waits_for_room();
            if !written && !room_made {
                break;
            }
        }
        debug_assert!(self.appends_flushed(), "every chunk a pass gathered went out");
    }

    /// Moves queued stripes into open segments while they have room (relocated stripes
    /// first), starts groups and segments as they free up.
    pub(super) fn pump(&mut self) {
        // The rebuild and the rebalance (`advance_drive_rebuild`, `advance_relocation`)
        // look again at what waits for the rate limit's bucket: each refusal notes anew
        // when to wake.
        self.rebuild_pace.clear_wake();
        // Retired segments closed now are garbage collection's to reclaim in this pass: an
        // idle array has no later pass to wait for.
        self.retire_idle_segments();
        loop {
            if self.advance_groups() {
                continue;
            }
            self.advance_relocation();
            // Before any slot opens a segment: with several slots, one pass may open more
            // than one, and garbage collection must start while an empty zone is left
            // for it (`capacity`).
            let mut progressed = self.maybe_start_gc();
            for fill in [Fill::Relocation, Fill::Frontend(ChunkClass::Small), Fill::Frontend(ChunkClass::Large)] {
                progressed |= self.pump_step(fill);
            }
            if !progressed {
                break;
            }
        }
        self.flush_appends();
        if self.maybe_start_gc() {
            self.pump();
        }
        self.advance_drive_rebuild();
        self.advance_scrub();
        // A scrub done with a segment hands it back to garbage collection, which passed
        // over it (a segment to reclaim first, one with holes, a rebuild waiting for it):
        // an idle array has no later pass to take it in.
        if self.maybe_start_gc() {
            return self.pump();
        }
        if self.stop == StopState::Running && !self.overlay_drained() {
            self.drain_overlay(self.l2p.room_pages());
        }
        if self.flush_repairs() {
            return self.pump(); // the padded repair stripe goes out
        }
        self.advance_stop();
        if self.maybe_begin_periodic_checkpoint() {
            // The frontend stripes it padded are queued: the last completion may have
            // come, and no later event would issue them (the checkpoint would wait for
            // them, and the requests it holds for it, forever).
            return self.pump();
        }
        self.advance_running_checkpoint();
    }

    /// Starts the next group of an open segment whose group is done: all of its stripes
    /// were issued and persisted. The last group of a segment is followed by the footer,
    /// whether or not more is queued. Whether a group moved on.
    fn advance_groups(&mut self) -> bool {
        for slot in 0..self.slots.len() {
            let Some(zone) = self.slots[slot] else { continue };
            let seg = self.seg(zone);
            let group_done = seg.header_pending == 0
                && seg.group_in_flight == 0
                && seg.group_issued == seg.layout.group_stripes(seg.group);
            if group_done {
                let seg = self.seg_mut(zone);
                seg.group += 1;
                seg.group_issued = 0;
                seg.group_virtual.iter_mut().for_each(|v| *v = 0);
                if seg.group == seg.layout.groups() {
                    self.start_footer(zone);
                }
                return true;
            }
        }
        false
    }

    /// One step for the stripes `fill` queues: the first one goes into a slot that takes
    /// it, or a slot of its class opens a segment, or garbage collection starts. Whether
    /// anything happened.
    fn pump_step(&mut self, fill: Fill) -> bool {
        let class = self.class_of(fill);
        let gc = fill == Fill::Relocation;
        let queue = if gc { &self.gc_queued } else { &self.queued[class.index()] };
        let Some(&number) = queue.front() else { return false };
        let relocating = self.relocation.is_some();
        if !gc && class == self.plan.gc_class() {
            if !self.gc_queued.is_empty() {
                return false; // relocated stripes go first into the slots they share
            }
            if relocating && self.free_zones.len() <= self.zones_to_leave(true) {
                return false; // the relocation may open no other zone: the rest of these is its
            }
        }
        // A slot of the class without a segment opens one first, while the stripe goes
        // where there is room: every slot takes part (an idle Zone Write segment is
        // preferred to the Zone Append one, so it must be open), not only when the others
        // are full.
        let in_class = |s: &usize| self.plan.slots[*s].class == class;
        let empty_slot = (0..self.slots.len()).filter(in_class).find(|s| self.slots[*s].is_none());
        // A slot that may not open its segment yet waits for a sealed segment's Zone
        // Finish, which frees an active zone: the array is not full.
        let mut waiting_for_finish = false;
        if let Some(slot) = empty_slot {
            if self.free_zones.len() > self.zones_to_leave(gc) {
                if self.room_to_open_segment() {
                    return self.open_new_segment(slot);
                }
                waiting_for_finish = true;
            }
        }
        if let Some(slot) = self.accepting_slot(class) {
            if gc {
                self.gc_queued.pop_front();
            } else {
                self.queued[class.index()].pop_front();
            }
            let zone = self.slots[slot].expect("an accepting slot has a segment");
            self.issue_stripe(zone, number);
            return true;
        }
        let open_in_class = (0..self.slots.len()).any(|s| self.plan.slots[s].class == class && self.slots[s].is_some());
        if open_in_class || relocating || waiting_for_finish {
            return false; // a segment of the class takes it later, or the relocation frees a zone
        }
        if self.maybe_start_gc() {
            return true;
        }
        self.fail_queued_stripes(class);
        false
    }

    /// The slot of `class` that takes a stripe now: an idle Zone Write slot (round robin),
    /// else a Zone Append slot whose current group has room (the paper's hybrid rule);
    /// never one waiting for its header. Where the class also has Zone Write slots, a Zone
    /// Append slot takes at most `HYBRID_APPEND_STRIPES_IN_FLIGHT`: more appends to one
    /// zone go no faster, and the stripes would queue on the drives ahead of the Zone
    /// Write segments' instead of waiting for the first segment free.
    fn accepting_slot(&mut self, class: ChunkClass) -> Option<usize> {
        let slots = self.slots.len();
        let first = self.next_slot[class.index()];
        let has_zone_write =
            self.plan.slots.iter().any(|planned| planned.class == class && !planned.layout.uses_append());
        for append in [false, true] {
            for i in 0..slots {
                let slot = (first + i) % slots;
                let planned = &self.plan.slots[slot];
                if planned.class != class || planned.layout.uses_append() != append {
                    continue;
                }
                let Some(zone) = self.slots[slot] else { continue };
                let seg = self.seg(zone);
                let capped = append && has_zone_write && seg.group_in_flight as u64 >= HYBRID_APPEND_STRIPES_IN_FLIGHT;
                if seg.header_pending == 0 && seg.group_issued < seg.layout.group_stripes(seg.group) && !capped {
                    self.next_slot[class.index()] = (slot + 1) % slots;
                    return Some(slot);
                }
            }
        }
        None
    }

    pub(super) fn issue_stripe(&mut self, seg_index: u32, number: u64) {
        let layout = self.seg(seg_index).layout;
        let (k, cb, bs, ms) = (layout.data_chunks, layout.chunk_blocks as usize, self.block_bytes(), self.meta_bytes());
        let n = layout.drives();
        let group_size = layout.group_size;
        let seg = self.seg_mut(seg_index);
        let id = seg.group_issued as u32;
        let stripe_number = seg.group * group_size + u64::from(id);
        seg.group_issued += 1;
        seg.group_in_flight += 1;
        let (zone, sequence) = (seg.zone, seg.sequence);
        let zone_start = self.geometry.zone_start_lba(zone);
        let mut stripe = self.stripes.remove(&number).expect("queued stripe exists");
        debug_assert_eq!(stripe.class, self.seg(seg_index).class, "a stripe goes to a slot of its class");
        debug_assert_eq!(stripe.infos.len() as u64, layout.stripe_data_blocks());
        stripe.segment = Some(seg_index);
        stripe.id = id;
        stripe.number = stripe_number;
        let mut chunks = std::mem::take(&mut stripe.chunks);
        let mut pending = 0;
        for (c, chunk) in chunks.drain(..).enumerate() {
            let ChunkBuffers { data, mut metadata } = chunk;
            let drive = layout.drive_of(stripe_number, c);
            for o in 0..cb {
                let block = &data[o * bs..(o + 1) * bs];
                // The data blocks' CRC32C came with them; XOR and copied parity's follows
                // from theirs, Reed-Solomon's is computed.
                let (lba, timestamp, kind, data_crc) = if c < k {
                    let info = stripe.infos[c * cb + o];
                    (info.lba, info.timestamp, BlockKind::of_data_lba(info.lba), info.data_crc)
                } else {
                    let (lba, timestamp) = stripe.parity_field(c - k, o, cb);
                    let data_crcs = (0..k).map(|d| stripe.infos[d * cb + o].data_crc);
                    let derived = self.codec.parity_block_crc(c - k, data_crcs, self.zero_block_crc);
                    (lba, timestamp, BlockKind::Parity, derived.unwrap_or_else(|| crate::crc::crc32c(block)))
                };
                debug_assert_eq!(data_crc, crate::crc::crc32c(block), "block {o} of chunk {c}: its data's CRC32C");
                BlockMetadata::new(lba, timestamp, id, sequence, kind)
                    .encode_with_data_crc(data_crc, &mut metadata[o * ms..(o + 1) * ms]);
            }
            if !self.holds(seg_index, drive) {
                self.buffers.give(data);
                self.buffers.give(metadata);
                continue;
            }
            pending += 1;
            if layout.uses_append() {
                self.batch_append(seg_index, drive, number, ChunkBuffers { data, metadata });
            } else {
                let op = Op::Chunk { stripe: number, drive };
                let lba = zone_start + layout.data_start_blocks() + stripe_number * layout.chunk_blocks;
                self.zone_write(drive, zone, op, Command::Write { lba, data, metadata });
            }
        }
        // The emptied vector goes back with the stripe when it is done.
        stripe.chunks = chunks;
        stripe.pending_chunks = pending;
        self.stripes.insert(number, stripe);
        if pending == 0 {
            // Every drive of this stripe has failed: nothing can hold it. It is no longer in
            // flight in its group, as one whose chunks failed (`chunk_done`): else the group
            // is never done and the stripes queued after it are never answered.
            self.seg_mut(seg_index).group_in_flight -= 1;
            self.stripe_failed(number, Error::TooManyErasures { lost: n, total: n, tolerated: layout.parity_chunks });
        }
    }

    /// Fails the frontend stripes of `class` waiting for room (the array is full).
    pub(super) fn fail_queued_stripes(&mut self, class: ChunkClass) {
        while let Some(number) = self.queued[class.index()].pop_front() {
            let reason = "no empty zone left beyond what garbage collection and recovery need, and no segment \
                          worth reclaiming (nearly every block is live)"
                .to_string();
            self.stripe_failed(number, Error::ArrayFull { reason });
        }
    }

    pub(super) fn stripe_failed(&mut self, number: u64, error: Error) {
        let Some(stripe) = self.stripes.remove(&number) else { return };
        let mut failed_requests = BTreeSet::new();
        for &info in &stripe.infos {
            if let Some(request) = info.request {
                self.release_lba(info.lba, None);
                failed_requests.insert(request);
            }
            if let (Some(from), true) = (info.relocated_from, info.repair) {
                self.repair_done(info.lba, from, None);
            } else if info.relocated_from.is_some() {
                self.relocation_unpin(info.lba);
                let r = self.relocation.as_mut().expect("relocated blocks belong to a relocation");
                r.writes_in_flight -= 1;
                r.failed = true;
            } else if info.request.is_none() {
                self.mapping_write_failed(info.lba, info.timestamp);
            }
        }
        self.spare_stripe(stripe);
        for request in failed_requests {
            if let Some(write) = self.write_blocks_left.remove(&request) {
                self.outstanding_writes.answered(write.seq);
                self.responses.push_back(Response::new(request, Err(error.duplicate())));
            }
        }
        self.complete_flushes();
    }

    /// A block of a frontend write of `lba` is done with: it no longer counts as in flight
    /// and its L2P page is unpinned. One that persisted (`persisted`: its timestamp and
    /// place) maps the LBA unless a newer write of it persisted first; one lookup of the
    /// LBA serves both.
    pub(super) fn release_lba(&mut self, lba: u64, persisted: Option<(u64, Physical)>) {
        let newer = match self.in_flight_lbas.entry(lba) {
            Entry::Occupied(mut entry) => {
                let (newest, blocks_in_flight) = entry.get_mut();
                let newer = match persisted {
                    Some((timestamp, _)) if timestamp > *newest => {
                        *newest = timestamp;
                        true
                    }
                    _ => false,
                };
                *blocks_in_flight -= 1;
                if *blocks_in_flight == 0 {
                    entry.remove();
                }
                newer
            }
            Entry::Vacant(_) => {
                assert!(persisted.is_none(), "a persisted block of LBA {lba} was in flight");
                false
            }
        };
        if let (true, Some((_, at))) = (newer, persisted) {
            self.map_lba(lba, at);
        }
        self.l2p.unpin(self.l2p.page_of(lba));
    }

    /// A chunk write completed. Whether it can have made anything else possible: a chunk
    /// that landed while others of its stripe are still out changes no count or queue the
    /// scheduling loop reads, so `on_completion` skips that loop for it (three of four
    /// completions in RAID-5 (3+1); see `nothing_to_schedule` for work a pass leaves).
    pub(super) fn chunk_done(&mut self, number: u64, drive: usize, completion: Completion) -> bool {
        let Completion { result, data, metadata, .. } = completion;
        self.buffers.give(data);
        self.buffers.give(metadata);
        self.chunk_landed(number, drive, landed_at(result))
    }

    /// Stripe `number`'s chunk on `drive` landed at `landed_at`, or failed (`None`).
    /// Whether it can have made anything else possible (`chunk_done`).
    pub(super) fn chunk_landed(&mut self, number: u64, drive: usize, landed_at: Option<u64>) -> bool {
        // One lookup of the stripe for the whole completion (fields apart, not `seg_mut`).
        // Stripes in flight belong to an open segment (a segment seals only when its last
        // group is persisted).
        let stripe = self.stripes.get_mut(&number).expect("stripe in flight");
        let seg_index = stripe.segment.expect("a stripe in flight was issued into a segment");
        let seg = self.segments[seg_index as usize].as_mut().expect("a segment in this zone");
        debug_assert_eq!(seg.state, SegmentState::Open, "stripes in flight are in open segments");
        let layout = seg.layout;
        if let Some(lba) = landed_at {
            let zone_start = self.geometry.zone_start_lba(seg.zone);
            let position = (lba - zone_start - layout.data_start_blocks()) / layout.chunk_blocks;
            let group_start = seg.group * layout.group_size;
            assert!(
                (group_start..group_start + layout.group_size).contains(&position),
                "a chunk of group {} landed at position {position}",
                seg.group,
            );
            stripe.positions[drive] = Some(position);
            if let Some(table) = seg.table.as_mut() {
                table.set(drive, position, stripe.id);
            }
        }
        stripe.pending_chunks -= 1;
        let finished = stripe.pending_chunks == 0;
        if !layout.uses_append() {
            self.zone_write_done(drive, seg_index);
        }
        let failed = landed_at.is_none();
        if failed {
            self.fail_lane(seg_index, drive);
        }
        if !finished {
            return failed;
        }
        let stripe = self.stripes.remove(&number).expect("stripe in flight");
        let live = stripe.positions.iter().filter(|p| p.is_some()).count();
        if layout.drives() - live > layout.parity_chunks {
            self.seg_mut(seg_index).group_in_flight -= 1;
            let n = layout.drives();
            let tolerated = layout.parity_chunks;
            self.stripes.insert(number, stripe);
            self.stripe_failed(number, Error::TooManyErasures { lost: n - live, total: n, tolerated });
            return true;
        }
        self.stripe_persisted(seg_index, stripe);
        true
    }

    pub(super) fn stripe_persisted(&mut self, seg_index: u32, mut stripe: Stripe) {
        debug_assert_eq!(self.seg(seg_index).state, SegmentState::Open, "stripes persist into open segments");
        let layout = self.seg(seg_index).layout;
        let (k, cb) = (layout.data_chunks, layout.chunk_blocks as usize);
        let zone = self.seg(seg_index).zone;
        let data_start = layout.data_start_blocks();
        self.seg_mut(seg_index).group_in_flight -= 1;
        // Chunks that never landed (their drive failed) still need a place in the stripe
        // table, so that reads find the stripe and rebuild them: Zone Write puts them at
        // the stripe's offset; for appends they take positions from the end of the group's
        // region, which landed chunks (filling it from the start) never reach.
        let group = self.seg(seg_index).group;
        let group_end = group * layout.group_size + layout.group_stripes(group);
        for drive in 0..layout.drives() {
            if stripe.positions[drive].is_some() {
                continue;
            }
            let position = if layout.uses_append() {
                let seg = self.seg_mut(seg_index);
                seg.group_virtual[drive] += 1;
                group_end - seg.group_virtual[drive]
            } else {
                stripe.number
            };
            stripe.positions[drive] = Some(position);
            if let Some(table) = self.seg_mut(seg_index).table.as_mut() {
                table.set(drive, position, stripe.id);
            }
        }
        let mut acked = std::mem::take(&mut self.spare.acked);
        for c in 0..layout.drives() {
            let drive = layout.drive_of(stripe.number, c);
            let position = stripe.positions[drive].expect("every chunk has a position");
            for o in 0..cb {
                let footer_index = (position * layout.chunk_blocks) as usize + o;
                let (lba, timestamp) = if c < k {
                    let info = stripe.infos[c * cb + o];
                    (info.lba, info.timestamp)
                } else {
                    // Parity blocks record the parity of the data blocks' fields, so a
                    // lost data chunk's LBAs can be rebuilt from footers alone.
                    stripe.parity_field(c - k, o, cb)
                };
                self.seg_mut(seg_index).footer[drive][footer_index] = FooterEntry {
                    lba: lba.into(),
                    timestamp: timestamp.into(),
                    stripe_id: stripe.id.into(),
                    reserved: 0.into(),
                };
            }
        }
        for c in 0..k {
            let drive = layout.drive_of(stripe.number, c);
            let position = stripe.positions[drive].expect("every chunk has a position");
            for o in 0..cb {
                let info = stripe.infos[c * cb + o];
                let offset = data_start + position * layout.chunk_blocks + o as u64;
                let Some(request) = info.request else {
                    match info.relocated_from {
                        Some(from) if info.repair => {
                            self.repair_done(info.lba, from, Some(Physical { zone, drive, offset }))
                        }
                        Some(from) => self.relocated(info.lba, info.timestamp, from, Physical { zone, drive, offset }),
                        None => self.mapping_persisted(info.lba, info.timestamp, Physical { zone, drive, offset }),
                    }
                    continue;
                };
                self.release_lba(info.lba, Some((info.timestamp, Physical { zone, drive, offset })));
                // A write with a block in a stripe that failed (`stripe_failed`) was
                // answered with that error already; its other stripes still land.
                let Entry::Occupied(mut write) = self.write_blocks_left.entry(request) else { continue };
                write.get_mut().blocks_left -= 1;
                if write.get().blocks_left == 0 {
                    acked.push((request, write.remove()));
                }
            }
        }
        self.spare_stripe(stripe);
        for (request, write) in acked.drain(..) {
            let data = match write.give_back_bytes {
                0 => Vec::new(),
                _ if !write.buffer.is_empty() => write.buffer,
                bytes => self.buffers.take(bytes),
            };
            self.outstanding_writes.answered(write.seq);
            self.responses.push_back(Response::new(request, Ok(data)));
        }
        self.spare.acked = acked;
        self.complete_flushes();
    }

    pub(super) fn complete_flushes(&mut self) {
        while let Some(&(id, last_before)) = self.flushes.front() {
            let done = match last_before {
                None => true,
                Some(last) => self.outstanding_writes.answered_through(last),
            };
            if !done {
                break;
            }
            self.flushes.pop_front();
            self.responses.push_back(Response::new(id, Ok(Vec::new())));
        }
    }
}

/// Where a chunk write's completion says its first block landed; `None`: it failed.
pub(super) fn landed_at(result: zapraid_zns::Result<Done>) -> Option<u64> {
    match result {
        Ok(Done::Written { lba, .. }) => Some(lba),
        Ok(other) => unreachable!("a chunk write completed as {other:?}"),
        Err(_) => None,
    }
}
