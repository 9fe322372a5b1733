//! Segment lifecycle: a segment is the same zone on every drive. It opens with a header
//! (one chunk per drive), takes stripes until its data region is full, then gets its
//! footer (every data-region block's LBA, timestamp and stripe ID), its zones are finished
//! and it is sealed. Garbage collection later resets its zones (see `gc`). A segment taken
//! from its slot while open (a rebuild starts, or it is found to hold blocks lost beyond
//! parity) is retired: closed without a footer once its stripes in flight are persisted,
//! for garbage collection to reclaim first.
//!
//! Invariants: a free zone holds no segment; only an open segment gets a footer; at most
//! one segment per slot is being sealed when the slot opens its next (`capacity`).

use zapraid_zns::{Command, ZoneAction, ZoneTarget};

use crate::capacity::RECOVERY_RESERVED_ZONES;
use crate::drive_command::DriveCommand;
use crate::format::{
    encode_footer_block, footer_entries_per_block, BlockKind, BlockMetadata, FooterBlockHeader, FooterEntry,
    SegmentHeader, SegmentLanes, MAX_DRIVES, NO_LBA,
};
use crate::layout::Layout;
use crate::stripe_table::CompactStripeTable;

use super::machine::{Engine, Op};
use super::state::segment::{FooterPlace, Segment, SegmentState};

impl Engine {
    /// Opens a segment for `slot` in the first empty zone and writes its headers.
    pub(super) fn open_new_segment(&mut self, slot: usize) -> bool {
        debug_assert!(self.slots[slot].is_none(), "a slot holds one open segment");
        let Some(zone) = self.take_free_segment_number() else { return false };
        self.gc_check_needed = true; // empty zones may now be low
        debug_assert!(
            self.restoring_reserve || self.free_zones.len() >= RECOVERY_RESERVED_ZONES,
            "the recovery reserve is used only after a restart"
        );
        debug_assert!(self.room_to_open_segment(), "more zones active than drives are asked to keep active");
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        self.checkpoints.segments_opened += 1;
        let (layout, class) = (self.plan.slots[slot].layout, self.plan.slots[slot].class);
        let n = layout.drives();
        let index = zone;
        let entries = (layout.stripes * layout.chunk_blocks) as usize;
        let empty_entry =
            FooterEntry { lba: NO_LBA.into(), timestamp: 0.into(), stripe_id: 0.into(), reserved: 0.into() };
        let table = CompactStripeTable::new(&layout);
        let mut segment = Segment::new(zone, sequence, SegmentState::Open, layout, class, table, n);
        segment.footer = vec![vec![empty_entry; entries]; n];
        debug_assert!(self.segments[zone as usize].is_none(), "a free zone holds no segment");
        self.segments[zone as usize] = Some(segment);
        self.slots[slot] = Some(index);
        // Each lane's drive's zone: the segment's row (its number, for a classic array).
        let mut zones = [0u32.into(); MAX_DRIVES];
        zones.iter_mut().take(n).for_each(|z| *z = self.lanes.row(zone).into());
        let lanes = self.segment_lanes(zone);
        let (mode, _) = layout.mode.code();
        let (bs, cb) = (self.block_bytes(), layout.chunk_blocks as usize);
        for drive in 0..n {
            if self.lane_failed(zone, drive) {
                continue;
            }
            let header = SegmentHeader {
                magic: [0; 8],
                version: 0.into(),
                header_bytes: 0.into(),
                array_uuid: self.config.array_uuid,
                segment_sequence: sequence.into(),
                drive_index: (drive as u32).into(),
                drive_count: (n as u32).into(),
                data_chunks: (layout.data_chunks as u32).into(),
                parity_chunks: (layout.parity_chunks as u32).into(),
                level: layout.level.code(),
                mode,
                segment_class: class.code(),
                reserved0: 0,
                chunk_blocks: (cb as u32).into(),
                group_size: (layout.group_size as u32).into(),
                block_size_bytes: (bs as u32).into(),
                stripes: layout.stripes.into(),
                created_timestamp: self.next_timestamp.into(),
                zones,
                reserved1: 0.into(),
                crc32c: 0.into(),
            }
            .sealed_bytes(&lanes);
            let (data, metadata) = self.header_chunk(&header, sequence, cb);
            let lba = self.geometry.zone_start_lba(zone);
            self.seg_mut(index).header_pending += 1;
            self.zone_write(drive, zone, Op::Header { segment: index }, Command::Write { lba, data, metadata });
        }
        true
    }

    /// A segment's header region on one drive: `header` in the first block of a chunk of
    /// `chunk_blocks` blocks, with their metadata.
    pub(super) fn header_chunk(&self, header: &[u8], sequence: u64, chunk_blocks: usize) -> (Vec<u8>, Vec<u8>) {
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let mut data = vec![0u8; chunk_blocks * bs];
        data[..header.len()].copy_from_slice(header);
        let mut metadata = vec![0u8; chunk_blocks * ms];
        for o in 0..chunk_blocks {
            BlockMetadata::new(NO_LBA, 0, 0, sequence, BlockKind::Header)
                .encode(&data[o * bs..(o + 1) * bs], &mut metadata[o * ms..(o + 1) * ms]);
        }
        (data, metadata)
    }

    /// What the header of the segment in `zone` says of its lanes: its number and each
    /// lane's drive now (a classic array's: the 240-byte header's own, `sealed_bytes`).
    pub(super) fn segment_lanes(&self, zone: u32) -> SegmentLanes {
        let drives: Vec<u32> = self.lanes.drives_of(zone).map(|d| d as u32).collect();
        SegmentLanes::new(zone, self.lanes.drives() as u32, &drives)
    }

    /// Whether a slot may open a segment now and its drives stay within the active zones
    /// the plan asks of them (`SegmentPlan::active_zones_needed`): the open segments, the
    /// new one and those not finished yet. A sealed segment's zones stay active until its
    /// Zone Finish completes, and a drive may run the next segment's header first.
    pub(super) fn room_to_open_segment(&self) -> bool {
        let open = self.slots.iter().flatten().count();
        open + 1 + self.unfinished_segments() <= self.plan.active_zones_needed() as usize
    }

    /// Segments full of data whose zones are still active: sealing, or sealed with a Zone
    /// Finish in flight. (Counted only when a slot would open a segment: a scan of the
    /// segments, not a count kept on every change.)
    fn unfinished_segments(&self) -> usize {
        let unfinished = |s: &&Segment| s.state == SegmentState::Sealing || s.finishes_in_flight > 0;
        self.segments.iter().flatten().filter(unfinished).count()
    }

    /// Finishes or resets a segment's zone on one drive.
    pub(super) fn zone_command(&mut self, drive: usize, zone: u32, action: ZoneAction) {
        let op = match action {
            ZoneAction::Reset => Op::Reset { segment: zone },
            _ => Op::Finish { segment: zone },
        };
        self.seg_mut(zone).commands_in_flight += 1;
        if matches!(op, Op::Finish { .. }) {
            self.seg_mut(zone).finishes_in_flight += 1;
        }
        let tag = self.new_tag(op);
        let target = ZoneTarget::Zone { start_lba: self.geometry.zone_start_lba(zone) };
        let command = Command::ManageZone { action, target };
        self.commands.push_back(DriveCommand { drive, tag, command, delay_ns: 0 });
    }

    pub(super) fn start_footer(&mut self, seg_index: u32) {
        let seg = self.seg_mut(seg_index);
        assert_eq!(seg.state, SegmentState::Open, "only an open segment gets a footer");
        seg.state = SegmentState::Sealing;
        let slot = self.slots.iter().position(|z| *z == Some(seg_index)).expect("an open segment has a slot");
        self.slots[slot] = None;
        let n = self.layout.drives();
        for drive in 0..n {
            if self.holds(seg_index, drive) {
                self.seg_mut(seg_index).footer_pending += 1;
                self.write_footer_piece(seg_index, drive, 0);
            }
        }
        if self.seg_mut(seg_index).footer_pending == 0 {
            self.seg_mut(seg_index).state = SegmentState::Sealed;
            self.gc_check_needed = true;
            self.mark_if_in_old_row(seg_index);
        }
    }

    /// Writes footer blocks from `first` on (as many as one transfer takes).
    pub(super) fn write_footer_piece(&mut self, seg_index: u32, drive: usize, first: u64) {
        let seg = self.seg(seg_index);
        let place = FooterPlace::Sealing {
            start_blocks: seg.layout.footer_start_blocks(),
            blocks: seg.layout.footer_blocks,
            entries: seg.footer[drive].len(),
        };
        self.write_footer_blocks(seg_index, drive, first, place);
    }

    /// Writes blocks `first..` of a footer (as many as one transfer takes) at `place`.
    pub(super) fn write_footer_blocks(&mut self, seg_index: u32, drive: usize, first: u64, place: FooterPlace) {
        let (start_blocks, total, count) = match place {
            FooterPlace::Sealing { start_blocks, blocks, entries }
            | FooterPlace::Stop { start_blocks, blocks, entries } => (start_blocks, blocks, entries),
        };
        let seg = self.seg(seg_index);
        let (zone, sequence) = (seg.zone, seg.sequence);
        let (blocks, data, metadata) = self.footer_piece(sequence, drive, first, total, &seg.footer[drive][..count]);
        let lba = self.geometry.zone_start_lba(zone) + start_blocks + first;
        let op = Op::Footer { segment: seg_index, drive, next_block: first + blocks, place };
        self.zone_write(drive, zone, op, Command::Write { lba, data, metadata });
    }

    /// Blocks `first..` of a footer of `total` blocks recording `entries` (as many as one
    /// transfer takes): how many, their data and metadata.
    pub(super) fn footer_piece(
        &self,
        sequence: u64,
        drive: usize,
        first: u64,
        total: u64,
        entries: &[FooterEntry],
    ) -> (u64, Vec<u8>, Vec<u8>) {
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let per_block = footer_entries_per_block(self.geometry.block_size_bytes) as u64;
        let blocks = self.geometry.transfer_blocks_at_most(total - first);
        let mut data = vec![0u8; blocks as usize * bs];
        let mut metadata = vec![0u8; blocks as usize * ms];
        for b in 0..blocks {
            let block_index = first + b;
            let from = (block_index * per_block) as usize;
            let to = (from + per_block as usize).min(entries.len());
            let header = FooterBlockHeader::new(drive as u32, sequence, from as u32);
            let out = &mut data[b as usize * bs..(b as usize + 1) * bs];
            encode_footer_block(header, &entries[from.min(to)..to], out);
            BlockMetadata::new(NO_LBA, 0, 0, sequence, BlockKind::Footer)
                .encode(out, &mut metadata[b as usize * ms..(b as usize + 1) * ms]);
        }
        (blocks, data, metadata)
    }

    /// The layout of the segment in `zone` (engine zone numbers, as in `locate`), if it
    /// holds one.
    pub fn segment_layout(&self, zone: u32) -> Option<Layout> {
        self.segment_of_zone(zone).map(|s| s.layout)
    }

    /// Whether lane `drive` of the segment in `zone` holds its chunks: its drive works,
    /// and it is not a drive being rebuilt that has not received them yet.
    pub(super) fn holds(&self, zone: u32, drive: usize) -> bool {
        !self.lane_failed(zone, drive) && self.segment_of_zone(zone).is_none_or(|s| s.absent != Some(drive))
    }

    pub(super) fn segment_of_zone(&self, zone: u32) -> Option<&Segment> {
        let segment = self.segments.get(zone as usize)?.as_ref()?;
        debug_assert_eq!(segment.zone, zone);
        Some(segment)
    }

    pub(super) fn seg(&self, zone: u32) -> &Segment {
        self.segments[zone as usize].as_ref().expect("a segment in this zone")
    }

    pub(super) fn seg_mut(&mut self, zone: u32) -> &mut Segment {
        self.segments[zone as usize].as_mut().expect("a segment in this zone")
    }
}

impl Engine {
    /// Closes the retired segments (a rebuild started, or holes found: `lost`) whose
    /// stripes in flight are all persisted: their zones are finished and garbage collection
    /// reclaims them first.
    pub(super) fn retire_idle_segments(&mut self) {
        if self.retiring.is_empty() {
            return; // the common case, on every pass of the engine's loop
        }
        let retiring = std::mem::take(&mut self.retiring);
        let mut waiting = Vec::new();
        for zone in retiring {
            let seg = self.seg(zone);
            if seg.header_pending > 0 || seg.group_in_flight > 0 {
                waiting.push(zone);
                continue;
            }
            debug_assert_eq!(seg.state, SegmentState::Open);
            for drive in 0..self.layout.drives() {
                if self.holds(zone, drive) {
                    self.zone_command(drive, zone, ZoneAction::Finish);
                }
            }
            let seg = self.seg_mut(zone);
            seg.state = SegmentState::Sealed;
            seg.reclaim_first = true;
            // Its footer records stay until it is reclaimed: its stripes end short of the
            // footer region, so the drives never get them, and a page of the L2P table
            // rebuilt from the log (`page_rebuild`) reads them here, where the blocks'
            // metadata alone may not say what a chunk holds (its row lost beyond parity
            // with the drive being rebuilt absent).
            self.reclaim_pending = true;
            self.gc_check_needed = true;
            tracing::debug!(zone, "a retired open segment is closed, to be reclaimed");
        }
        self.retiring = waiting;
    }
}
