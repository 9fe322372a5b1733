//! Blocks lost beyond what parity covers, and how the array lives with them.
//!
//! A live block that cannot be read or rebuilt from its stripe (more of the stripe damaged
//! or on failed drives than parity covers) is not left to hold its segment forever: when
//! garbage collection moves the segment, such a block is replaced by a *lost-block
//! marker*, a zero block whose LBA field is the LBA with `LOST_LBA_FLAG` set, written like
//! any relocated block. The L2P table then points at the marker, and the LBA is *recorded
//! lost*: `lost` maps it to the marker's timestamp. Reads of it answer `Error::Lost` (never
//! zeros, stale or wrong data); a write of it heals it; the segment is reclaimed.
//!
//! Markers persist what is lost the way every block does: recovery's replay takes a
//! marker as the LBA's newest version when its timestamp wins, and a checkpoint carries
//! the list. A marker made for an unreadable block gets a fresh timestamp (the block's own
//! is as unreadable as its data), so it beats every older version of the LBA on the
//! drives; it is made only while no write of the LBA is in flight, since such a write has
//! an older timestamp and must still win when it lands. A marker that is moved again keeps
//! its timestamp, as every relocated block does.
//!
//! Segments found to hold such blocks (a rebuild that could not reconstruct a chunk, a
//! scrub or a read that could not rebuild a block) are marked `holes`: garbage collection
//! takes them first, which records their lost blocks and frees their zones.
//!
//! A start that replays a segment block by block records lost, the same way, the LBA of a
//! block (data or marker) that fails its checksum while its metadata still names the
//! segment (a block is written whole: damaged, not torn), when no newer or readable copy
//! holds it (`recovery::structures`, `recovery::install`).
//!
//! Invariant: an LBA is in `lost` exactly when the L2P table maps it to a marker, or to the
//! damaged block a start found it in (the marker comes when garbage collection moves it).
//! Whether a segment has holes is not recorded on the drives: after a restart, a segment
//! not reclaimed yet is found to have them again when a read, scrub or rebuild comes
//! across one.

use crate::error::Error;
use crate::format::LOST_LBA_FLAG;

use super::*;

impl Engine {
    /// Logical blocks recorded lost: reads of them fail until they are written again.
    pub fn blocks_lost(&self) -> u64 {
        self.lost.len() as u64
    }

    /// Whether `lba` is recorded lost (reads of it fail without touching a drive).
    pub(super) fn is_lost(&self, lba: u64) -> bool {
        !self.lost.is_empty() && self.lost.contains_key(&lba)
    }

    /// Segments known to hold blocks that cannot be read or rebuilt, not reclaimed yet.
    pub fn segments_with_holes(&self) -> u32 {
        self.segments.iter().flatten().filter(|s| s.holes).count() as u32
    }

    /// The segment in `zone` holds a block that cannot be read or rebuilt: garbage
    /// collection reclaims it first, recording such blocks lost. An open one is taken from
    /// its slot and closed once its stripes in flight are persisted (as a rebuild retires
    /// the segments open when it starts), since only closed segments are reclaimed and an
    /// idle array would otherwise keep it open, its lost blocks never counted.
    pub(super) fn note_holes(&mut self, zone: u32) {
        let Some(seg) = self.segments.get_mut(zone as usize).and_then(Option::as_mut) else { return };
        if !seg.holes {
            tracing::error!(zone, "a segment holds blocks that cannot be read or rebuilt; it is reclaimed first");
            seg.holes = true;
        }
        if seg.state == SegmentState::Open {
            if let Some(slot) = self.slots.iter().position(|s| *s == Some(zone)) {
                self.slots[slot] = None;
                self.retiring.push(zone);
            }
        }
        self.reclaim_pending = true;
        self.gc_check_needed = true;
    }

    /// Whether a read failed because the block is gone for good (its stripe lost more
    /// than parity covers, or what parity gave back is not the block), not for a passing
    /// reason (a stop, the array full).
    pub(super) fn beyond_parity(error: &Error) -> bool {
        matches!(error, Error::TooManyErasures { .. } | Error::Corrupt { .. } | Error::Lost { .. })
    }

    /// Bytes the lost-block list adds to a checkpoint image.
    pub(super) fn lost_list_bytes(&self) -> u64 {
        crate::format::checkpoint_lost_list_bytes(self.lost.len())
    }

    /// Adds a lost-block marker for `lba` (which the L2P table maps to `from`) with
    /// `timestamp` to the relocation stripes; `relocated` maps it once persisted.
    pub(super) fn add_lost_marker(&mut self, lba: u64, timestamp: u64, from: Physical) {
        debug_assert!(lba < self.l2p.logical_blocks(), "markers stand for logical blocks");
        self.relocation.as_mut().expect("markers are written by a relocation").writes_in_flight += 1;
        let data = self.buffers.take_zeroed(self.block_bytes());
        let info = BlockInfo {
            lba: LOST_LBA_FLAG | lba,
            timestamp,
            request: None,
            relocated_from: Some(from),
            repair: false,
            data_crc: self.zero_block_crc,
        };
        self.add_block(info, data, Fill::Relocation);
    }

    /// Marks the relocation's unreadable blocks lost: each still mapped where it was, with
    /// no write of it and no repair of its place in flight, gets a marker with a fresh
    /// timestamp; one overwritten meanwhile needs none. The LBAs left waiting for a write
    /// or repair in flight (whose stripes may in turn wait for the room the relocation
    /// holds: it does not wait for them, `gc`).
    pub(super) fn mark_unreadable_lost(&mut self) -> Vec<u64> {
        let unreadable = std::mem::take(&mut self.relocation.as_mut().expect("relocating").unreadable);
        let mut waiting = Vec::new();
        for (lba, from) in unreadable {
            if self.mapped(lba) != Some(from) {
                self.relocation_unpin(lba);
            } else if self.in_flight_lbas.contains_key(&lba) || self.repairs.pending.contains_key(&from) {
                // The write lands first (newer than a fresh marker would be on the drives,
                // it must win), or the repair does (it holds the block's data); if either
                // fails, the next relocation of the segment marks it.
                self.relocation_unpin(lba);
                waiting.push(lba);
            } else {
                let timestamp = self.next_timestamp;
                self.next_timestamp += 1;
                tracing::error!(
                    lba,
                    zone = from.zone,
                    drive = from.drive,
                    "a block cannot be read or rebuilt: recorded lost"
                );
                self.add_lost_marker(lba, timestamp, from);
            }
        }
        waiting
    }
}
