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
//! A drive rebuild that cannot reconstruct a chunk (its stripe lost more than parity
//! covers, as with a second failure during the rebuild) writes blocks that do not decode,
//! and flags their footer entries unknown. The only place left on the drives that can say
//! what such a block held is that entry (the array may be beyond tolerance: nothing else
//! can be written then), so the entry of a block the table maps an LBA to names that LBA
//! as a marker would (`LOST_LBA_FLAG`, a fresh timestamp) and the LBA is recorded lost at
//! once (`unknown_entries`); a start takes such an entry as a marker's (`recovery`). A
//! block whose LBA only the drives' mapping blocks know (a page not in memory), or with a
//! write of its LBA in flight, stays unnamed, and so do the blocks of its stripe on drives
//! still failed: the rebuild does not end with them unnamed (`rebuild`): it waits until
//! garbage collection has reclaimed the segments with holes, reading every page of the
//! table (loading offloaded ones) and writing a marker for each unreadable live block.
//! Only segments garbage collection cannot reclaim (it cannot write) are not waited for,
//! and those only after one more try once nothing else is left (`retry_unreclaimable`): a
//! relocation that failed while too many drives were down may succeed with the new drive.
//!
//! A page of the table whose mapping block cannot be read (its stripe lost more than
//! parity covers) and that the log cannot rebuild (blocks of unknown LBA, a drive lost
//! beyond tolerance) cannot say which block is the newest of each of its LBAs: serving an
//! older one, or zeros, would be wrong data, so all of them are recorded lost
//! (`page_lost`), data on the drives or not (the index to it is gone), and mapped to the
//! unreadable mapping block's place, in a segment then flagged `holes`: its relocation
//! writes their markers. Done only while stripes can be written (failed drives within
//! parity), since the page is cached dirty; beyond that, requests on it fail and a later
//! load tries again. Segments' live counts may then count blocks nothing maps (the
//! page's old entries are unknown): they saturate, and a relocated segment counts zero.
//!
//! Invariant: an LBA is in `lost` exactly when the L2P table maps it to a marker, to the
//! damaged block a start found it in, to a block a rebuild could not reconstruct, or to
//! the unreadable mapping block of its page (the marker comes when garbage collection
//! moves it).
//! Whether a segment has holes is not recorded on the drives: after a restart, a segment
//! not reclaimed yet is found to have them again when a read, scrub or rebuild comes
//! across one.

use std::ops::Range;

use rustc_hash::FxHashMap as HashMap;

use crate::error::Error;
use crate::format::{FooterEntry, FOOTER_ENTRY_UNKNOWN, LOST_LBA_FLAG, NO_LBA};
use crate::l2p::{PageIndex, Physical};

use super::machine::Engine;
use super::state::segment::SegmentState;
use super::state::stripe::{BlockInfo, Fill};

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

    /// Zone-relative offset -> LBA of the blocks of `drive` in `zone` that the table maps,
    /// as far as memory holds the table (pages only on the drives are not read). One pass
    /// over the table: taken once per segment a rebuild cannot fully reconstruct.
    pub(super) fn lbas_mapped_on(&self, zone: u32, drive: usize) -> HashMap<u64, u64> {
        (0..self.l2p.logical_blocks())
            .filter_map(|lba| match self.l2p.peek(lba) {
                Some(Some(at)) if at.zone == zone && at.drive == drive => Some((at.offset, lba)),
                _ => None,
            })
            .collect()
    }

    /// The footer entries of blocks `offsets` of `drive` in `zone`, which a rebuild could
    /// not reconstruct: flagged unknown, and naming, as a marker does, the LBA the table
    /// maps there (`mapped`), which is recorded lost with a fresh timestamp (or the one it
    /// was recorded lost with). An LBA with a write in flight is not named: that write,
    /// older than a fresh timestamp, must still win if it lands.
    pub(super) fn unknown_entries(
        &mut self,
        zone: u32,
        drive: usize,
        offsets: Range<u64>,
        mapped: &mut HashMap<u64, u64>,
    ) -> Vec<FooterEntry> {
        let mut entries = Vec::with_capacity((offsets.end - offsets.start) as usize);
        for offset in offsets {
            let unknown = |lba: u64, timestamp: u64| FooterEntry {
                lba: lba.into(),
                timestamp: timestamp.into(),
                stripe_id: 0.into(),
                reserved: FOOTER_ENTRY_UNKNOWN.into(),
            };
            let named = mapped.remove(&offset).filter(|lba| {
                !self.in_flight_lbas.contains_key(lba)
                    && self.l2p.peek(*lba) == Some(Some(Physical { zone, drive, offset }))
            });
            let Some(lba) = named else {
                entries.push(unknown(NO_LBA, 0));
                continue;
            };
            let timestamp = match self.lost.get(&lba) {
                Some(&timestamp) => timestamp,
                None => {
                    let timestamp = self.next_timestamp;
                    self.next_timestamp += 1;
                    self.lost.insert(lba, timestamp);
                    tracing::error!(lba, zone, drive, "a block cannot be rebuilt: recorded lost");
                    timestamp
                }
            };
            entries.push(unknown(LOST_LBA_FLAG | lba, timestamp));
        }
        entries
    }

    /// Whether segments' live counts may be off: a page rebuilt from the log may map a
    /// block discarded since (counted nowhere), a page recorded lost took its LBAs from
    /// segments it could not name (counted there still). Counts then saturate at zero.
    pub(super) fn live_counts_inexact(&self) -> bool {
        self.mapping.pages_rebuilt > 0 || self.mapping.pages_lost > 0
    }

    /// Page `page` of the L2P table can be neither read (its mapping block's stripe lost
    /// more than parity covers) nor rebuilt from the log (`error` says why): which block
    /// holds the newest version of each of its LBAs cannot be known, so each is recorded
    /// lost, with a fresh timestamp, and mapped to the unreadable mapping block's place
    /// (as a block a rebuild could not reconstruct is: reads answer `Error::Lost` without
    /// touching it). Its segment is flagged `holes`: garbage collection moving it writes
    /// a marker for each, so the loss persists (a drive rebuild waits for that). The page
    /// is cached dirty and its copy forgotten, so garbage collection does not keep the
    /// segment for a mapping block it cannot move, and the page is written back anew.
    pub(super) fn page_lost(&mut self, page: PageIndex, error: &Error) {
        let at = self.l2p.directory_get(page).expect("a page read from the drives has a place");
        let per_page = self.l2p.entries_per_page();
        let first = u64::from(page) * per_page;
        let lbas = first..(first + per_page).min(self.l2p.logical_blocks());
        tracing::error!(page, error = %error, blocks = lbas.end - lbas.start, "a page of the L2P table cannot be read nor rebuilt: its blocks are recorded lost");
        let entries = vec![self.l2p.pack(at); (lbas.end - lbas.start) as usize].into_boxed_slice();
        let replaced = self.l2p.install_rebuilt(page, entries);
        debug_assert!(replaced.is_empty(), "a page only on the drives had no recovered entries applied");
        self.l2p.directory_forget(page);
        self.uncount(at); // the mapping block is no longer the page's copy
        self.mapping.loading.remove(&page);
        self.mapping.pages_lost += 1;
        for lba in lbas {
            // Nothing in flight maps into a page only on the drives: no write here is
            // older than a fresh timestamp.
            let timestamp = self.next_timestamp;
            self.next_timestamp += 1;
            self.lost.insert(lba, timestamp);
            self.seg_mut(at.zone).valid_blocks += 1;
        }
        // A relocation of the segment whose scan passed the page would miss the LBAs just
        // mapped into it: its scan goes back to the page.
        if let Some(r) = self.relocation.as_mut().filter(|r| r.zone == at.zone) {
            r.scan.next_lba = r.scan.next_lba.min(first);
        }
        self.note_holes(at.zone);
        self.release_parked();
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

    /// Gives the segments left unreclaimable, which the rebuild waits for, one more try if
    /// their relocation could not write: one under way when the rebuild started, while too
    /// many drives were down, fails after it and is not tried again by the start, though
    /// the new drive now takes writes. True if the rebuild is to wait for them.
    pub(super) fn retry_unreclaimable(&mut self) -> bool {
        let r = self.drive_rebuild.as_mut().expect("a rebuild");
        if r.retried_unreclaimable {
            return false;
        }
        r.retried_unreclaimable = true;
        let mut retried = false;
        for s in self.segments.iter_mut().flatten().filter(|s| s.write_failed && (s.absent.is_some() || s.holes)) {
            retried |= std::mem::take(&mut s.unreclaimable);
        }
        if retried {
            self.reclaim_pending = true;
            self.gc_check_needed = true;
        }
        retried
    }
}
