//! Resuming a rebuild cut short (a stop, a crash, a power cut; `Engine::resume_drive_rebuild`):
//! the drive in the failed drive's place holds what the earlier rebuild wrote. Each segment
//! to rebuild is first checked on it: its header block and every footer block are read
//! from the new drive, and the segment is kept (its zone finished, the drive no longer
//! `absent` from it) if they say that rebuild completed it; else its zone is reset and it
//! is rebuilt as onto an empty drive.
//!
//! Invariants: a zone is kept only if its header decodes (magic, CRC) with the segment's
//! sequence number, this drive's index and the array's UUID, every footer block decodes
//! (CRC) with the segment's sequence number and this drive's index, and, with a compact
//! stripe table, the footer names each stripe of each group at exactly one position.
//! Where that differs from the table recovery rebuilt (it places a failed drive's chunks
//! as it can), the footer's placement is adopted, in the table and the L2P entries of the
//! blocks that moved, before the segment stops being `absent`. The rebuild of a segment resets its zone first and writes the footer last, each
//! write at the write pointer once the one before completed: a complete footer means every
//! block before it is that rebuild's. Nothing read from the drive is trusted otherwise, and
//! a read that fails only means the segment is rebuilt. Zones of the drive that hold no
//! segment are the driver's to reset before resuming (`zones_holding_segments`): new
//! segments are written to the drive from the start and need them empty. A segment whose
//! zones garbage collection is resetting when the rebuild resumes still holds its zone
//! then: the reset goes to this drive too (`start_drive_rebuild`), before the zone is free.

use std::collections::HashMap;

use zapraid_zns::{Command, Completion, ZoneAction, ZoneTarget};

use crate::engine::machine::Engine;
use crate::error::Result;
use crate::format::{decode_footer_block, SegmentHeader, NO_LBA};
use crate::l2p::Physical;

use super::{RebuildOp, Step};

impl Engine {
    /// Resumes the rebuild of drive `drive` (counted failed, as recovery leaves a drive
    /// recorded rebuilding) onto the drive in its place, which holds what an earlier
    /// rebuild wrote: segments that rebuild completed are kept, the others rebuilt. The
    /// driver must first reset every zone of the drive not in `zones_holding_segments`.
    pub fn resume_drive_rebuild(&mut self, drive: usize) -> Result<()> {
        self.start_drive_rebuild(drive, true)
    }

    /// The zones (in the engine's numbering, as `locate`) that hold a segment.
    pub fn zones_holding_segments(&self) -> Vec<u32> {
        self.segments.iter().flatten().map(|s| s.zone).collect()
    }

    /// Segments a resumed rebuild kept, finding them completed on the drive.
    pub fn rebuild_segments_kept(&self) -> Option<u64> {
        self.drive_rebuild.as_ref().map(|r| r.segments_kept)
    }

    /// Reads the new drive's header block and footer of the segment in `zone`.
    pub(super) fn check_rebuilt_zone(&mut self, zone: u32) {
        let drive = self.rebuild_lane(zone);
        let layout = self.seg(zone).layout;
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let zone_start = self.geometry.zone_start_lba(zone);
        let mut reads = vec![(None, zone_start, 1)];
        let mut first = 0;
        while first < layout.footer_blocks {
            let blocks = self.geometry.transfer_blocks_at_most(layout.footer_blocks - first);
            reads.push((Some(first), zone_start + layout.footer_start_blocks() + first, blocks));
            first += blocks;
        }
        self.zone_rebuild(zone).checks_pending = reads.len();
        tracing::debug!(drive, zone, "checking what an earlier rebuild wrote of a segment");
        for (footer_first, lba, blocks) in reads {
            let n = blocks as usize;
            let command = Command::Read { lba, data: vec![0; n * bs], metadata: vec![0; n * ms] };
            self.rebuild_command(zone, drive, RebuildOp::Check { footer_first }, command);
        }
    }

    /// A check read completed: once all have, the segment is kept or rebuilt.
    pub(super) fn zone_check_done(&mut self, zone: u32, footer_first: Option<u64>, completion: Completion) {
        let Some(r) = self.drive_rebuild.as_ref() else { return };
        if r.zones.get(&zone).is_none_or(|z| z.step != Step::Checking) {
            return; // abandoned meanwhile
        }
        let drive = self.rebuild_lane(zone);
        let intact = completion.result.is_ok()
            && match footer_first {
                None => self.header_is_this_drives(zone, drive, &completion.data),
                Some(_) => self.footer_blocks_are_this_drives(zone, drive, &completion.data),
            };
        let z = self.zone_rebuild(zone);
        z.checks_pending -= 1;
        z.check_failed |= !intact;
        if z.checks_pending > 0 {
            return;
        }
        if z.check_failed || !self.adopt_footer_placement(zone, drive) {
            tracing::debug!(drive, zone, "the segment was not rebuilt completely: it is rebuilt");
            return self.reset_rebuilt_zone(zone);
        }
        tracing::debug!(drive, zone, "the segment was rebuilt before: kept");
        self.drive_rebuild.as_mut().expect("a rebuild").segments_kept += 1;
        let z = self.zone_rebuild(zone);
        z.step = Step::Finishing;
        z.footer = Vec::new();
        let target = ZoneTarget::Zone { start_lba: self.geometry.zone_start_lba(zone) };
        let command = Command::ManageZone { action: ZoneAction::Finish, target };
        self.rebuild_command(zone, drive, RebuildOp::Finish, command);
    }

    fn header_is_this_drives(&self, zone: u32, drive: usize, data: &[u8]) -> bool {
        let Ok(header) = SegmentHeader::decode(data) else { return false };
        header.segment_sequence.get() == self.seg(zone).sequence
            && header.drive_index.get() as usize == drive
            && header.array_uuid == self.config.array_uuid
    }

    /// Whether the footer blocks read decode as this drive's footer of the segment; their
    /// entries are kept to check against the stripe table.
    fn footer_blocks_are_this_drives(&mut self, zone: u32, drive: usize, data: &[u8]) -> bool {
        let sequence = self.seg(zone).sequence;
        let bs = self.block_bytes();
        for block in data.chunks_exact(bs) {
            let Ok((header, entries)) = decode_footer_block(block) else { return false };
            if header.segment_sequence.get() != sequence || header.drive_index.get() as usize != drive {
                return false;
            }
            let footer = &mut self.zone_rebuild(zone).footer;
            let from = header.first_block.get() as usize;
            let Some(slots) = from.checked_add(entries.len()).and_then(|to| footer.get_mut(from..to)) else {
                return false;
            };
            slots.copy_from_slice(&entries);
        }
        true
    }

    /// With a compact stripe table (Zone Append): the earlier rebuild put each stripe's
    /// chunk where the table said then, and recovery, counting the drive failed, may have
    /// placed the drive's chunks elsewhere in each group: the footer read says where each
    /// one is. Adopts it: the table and the L2P entries of the blocks moved say so. Whether
    /// the footer names every stripe of each group at exactly one position (else nothing
    /// changes and the segment is rebuilt).
    fn adopt_footer_placement(&mut self, zone: u32, drive: usize) -> bool {
        let seg = self.seg(zone);
        let (layout, Some(table)) = (seg.layout, seg.table.as_ref()) else { return true };
        let footer = self.drive_rebuild.as_ref().and_then(|r| r.zones.get(&zone)).expect("checking").footer.clone();
        let cb = layout.chunk_blocks;
        // Per position: where its stripe (as the table has it) is in the footer, and its id.
        let mut placement = Vec::new();
        for group in 0..layout.groups() {
            let first = group * layout.group_size;
            let count = layout.group_stripes(group);
            let mut in_footer = HashMap::new();
            for position in first..first + count {
                let id = footer[(position * cb) as usize].stripe_id.get();
                if u64::from(id) >= count || in_footer.insert(id, position).is_some() {
                    return false;
                }
            }
            for position in first..first + count {
                let Some(id) = table.get(drive, position) else { return false };
                let Some(&to) = in_footer.get(&id) else { return false };
                placement.push((position, to, id));
            }
        }
        let data_start = layout.data_start_blocks();
        let mut moves = Vec::new();
        for &(from, to, id) in placement.iter().filter(|(from, to, _)| from != to) {
            let number = from / layout.group_size * layout.group_size + u64::from(id);
            if layout.chunk_on(number, drive) >= layout.data_chunks {
                continue; // parity: no LBA maps to it
            }
            for o in 0..cb {
                let lba = footer[(to * cb + o) as usize].lba.get();
                let mapping = crate::format::mapping_page_of(lba).is_some();
                if lba == NO_LBA || (lba >= self.l2p.logical_blocks() && !mapping) {
                    continue;
                }
                // A page of the table only on the drives cannot be checked now: the zone
                // is rebuilt instead of kept.
                if !mapping && self.l2p.ensure(self.l2p.page_of(lba)) != crate::l2p::Residency::Cached {
                    return false;
                }
                let old = Physical { zone, drive, offset: data_start + from * cb + o };
                if self.mapped(lba) == Some(old) {
                    moves.push((lba, Physical { offset: data_start + to * cb + o, ..old }));
                }
            }
        }
        for (lba, at) in moves {
            match crate::format::mapping_page_of(lba) {
                Some(page) => self.l2p.directory_set(page as crate::l2p::PageIndex, at),
                None => self.l2p.set(lba, at),
            }
        }
        self.forget_checkpoint_base(); // the table changes under it
        let table = self.seg_mut(zone).table.as_mut().expect("a stripe table");
        for (_, to, id) in placement {
            table.set(drive, to, id);
        }
        true
    }
}
