//! The engine's side of a checkpoint (`format::checkpoint`): a clean stop of an array that
//! keeps one (`L2pConfig::checkpoint`) writes every page of the L2P table back once the
//! rest is written, so that the directory alone describes the table; the stopped engine
//! then hands out the checkpoint (directory, segments, live counts), which the caller
//! stores, and a start that finds it matching the drives installs it instead of replaying
//! every footer (`recovery`), replaying only the segments written after it (after a
//! crash of an engine that started from it).
//!
//! Checkpoints are also taken while the array runs (`running_checkpoint`).
//!
//! Invariants: a checkpoint is taken only from a stopped or drained engine with nothing
//! dirty, nothing being written back and no recovered entry waiting;
//! it names every segment the engine has (one whose reset waits for it with a live count
//! of 0), so a start that finds a segment older than it and not named knows it is stale.

use crate::error::Result;
use crate::format::{CheckpointImage, CheckpointSegment};
use crate::hybrid::ChunkClass;
use crate::stripe_table::CompactStripeTable;

use super::machine::Engine;
use super::state::segment::SegmentState;

/// Dirty pages a stop writes back at a time (and pages of recovered entries it makes
/// resident to write back): each holds its block and its snapshot until persisted (8 MiB
/// of 4 KiB blocks), so a large cache is not doubled at once.
const WRITE_BACK_BATCH_PAGES: usize = 1024;

impl Engine {
    /// During a clean stop, once everything else is written: evicts every page and writes
    /// the dirty ones back, then reads the pages on the drives that recovered entries
    /// replace entries of and makes the other pages with recovered entries resident, and
    /// does the same, a batch at a time. Whether it wrote anything (the stop waits for it and comes
    /// back). Once a mapping block of the stop has failed (the array full), nothing: the
    /// stop ends without a checkpoint (the next start replays the log).
    pub(super) fn write_back_for_checkpoint(&mut self) -> bool {
        debug_assert!(self.stop.is_draining());
        if !self.config.l2p.checkpoint || self.mapping.checkpoint_abandoned || self.l2p.is_checkpointable() {
            return false;
        }
        if !self.overlay_drained() {
            // Pages on the drives that recovered entries replace entries of (a start from a
            // checkpoint replayed what came after it): read a batch, write it back, and so
            // on. Nothing else is in flight here, so a read goes out unless it is done.
            if self.l2p.cached_pages() >= WRITE_BACK_BATCH_PAGES {
                let dirty = self.l2p.evict_all(WRITE_BACK_BATCH_PAGES);
                if !dirty.is_empty() {
                    self.write_back(dirty);
                    self.pad_frontend_stripes();
                    return true;
                }
            }
            let room = WRITE_BACK_BATCH_PAGES.saturating_sub(self.l2p.cached_pages());
            if self.drain_overlay(room) {
                return true; // the stop comes back once they are read
            }
        }
        if self.l2p.dirty_pages() == 0 {
            self.l2p.make_overlaid_pages_resident(WRITE_BACK_BATCH_PAGES);
        }
        let dirty = self.l2p.evict_all(WRITE_BACK_BATCH_PAGES);
        if dirty.is_empty() {
            return false;
        }
        self.write_back(dirty);
        self.pad_frontend_stripes();
        true
    }

    /// The checkpoint of a stopped engine, or of one drained for a running checkpoint
    /// (`checkpoint_ready`), generation `generation` (the superblock generation it goes
    /// with is the caller's to set); None unless the array keeps one and the whole table
    /// was written back. Also while a rebuild runs: a start after a crash counts the drive
    /// being rebuilt failed, and the rebuild then checks what that drive holds of each
    /// segment itself (`rebuild::resume`). It is incremental (`checkpoint_base`) when the
    /// last full one written is in the other copy: the caller keeps that copy and resolves
    /// the image from it at the next start. The next generation is `CheckpointImage::next_generation`.
    pub fn checkpoint(&mut self, generation: u64) -> Option<CheckpointImage> {
        let drained = self.is_stopped() || self.checkpoint_ready();
        if !drained || !self.config.l2p.checkpoint || !self.l2p.is_checkpointable() {
            return None;
        }
        let running = self.checkpoint_ready();
        let open_tables = self.places_only_in_memory();
        let base_generation = self.checkpoint_incremental(generation);
        let mut segments = Vec::new();
        for seg in self.segments.iter().flatten() {
            // As the next start's recovery would judge it: sealed, closed by the stop's
            // footer, or open (its live blocks rewritten first); of a running checkpoint,
            // the open segments are appending (replayed), and a relocated segment whose
            // reset waits for this checkpoint maps nothing (it may be gone at the start).
            let (sealed, open, appending) = match seg.state {
                SegmentState::Sealed => (!seg.stopped_short && !seg.reclaim_first, seg.reclaim_first, false),
                SegmentState::Open if running => (false, false, true),
                SegmentState::Open => (false, !seg.closed_at_stop, false),
                SegmentState::Relocating
                    if self.relocation.as_ref().is_some_and(|r| r.zone == seg.zone && r.awaits_checkpoint) =>
                {
                    debug_assert!(
                        seg.valid_blocks == 0 || self.mapping.pages_lost > 0,
                        "a relocated segment maps nothing"
                    );
                    (!seg.stopped_short && !seg.reclaim_first, seg.reclaim_first, false)
                }
                SegmentState::Sealing | SegmentState::Relocating => return None,
            };
            let table_bytes = CompactStripeTable::encoded_bytes(&seg.layout);
            let (table, base_table_bytes) = match &seg.table {
                Some(_table) if !appending && base_generation.is_some() && self.base_holds(seg, table_bytes as u64) => {
                    #[cfg(debug_assertions)]
                    {
                        let mut bytes = Vec::with_capacity(table_bytes);
                        _table.encode(&mut bytes);
                        self.assert_base_table(seg.zone, &bytes);
                    }
                    (Vec::new(), table_bytes as u64) // the base holds it
                }
                // An appending segment's table as far as it was written, when a drive is
                // failed or being rebuilt (a start counts it failed): the places Zone Append
                // gave its chunks on that drive (which the pages may point at) are known
                // only here (`recovery::assemble`).
                Some(table) if !appending || open_tables => {
                    let mut bytes = Vec::with_capacity(table_bytes);
                    table.encode(&mut bytes);
                    (bytes, 0)
                }
                _ => (Vec::new(), 0), // Zone Write, or replayed (recovery rebuilds it)
            };
            segments.push(CheckpointSegment {
                zone: seg.zone,
                sequence: seg.sequence,
                sealed,
                open,
                appending,
                large: seg.class == ChunkClass::Large,
                live_blocks: seg.valid_blocks,
                table,
                base_table_bytes,
            });
        }
        let image = CheckpointImage {
            array_uuid: self.config.array_uuid,
            generation,
            next_sequence: self.next_sequence,
            next_timestamp: self.next_timestamp,
            superblock_generation: 0,
            entries_per_page: self.l2p.entries_per_page() as u32,
            segments,
            directory: self.l2p.directory_entries().to_vec(),
            base_generation,
            lost: self.lost.iter().map(|(lba, timestamp)| (*lba, *timestamp)).collect(),
        };
        self.note_checkpoint_taken(&image);
        Some(image)
    }

    /// Installs a checkpoint's table side: the directory, and the live count of each
    /// segment it names that is still on the drives (`present`: the segments themselves,
    /// and the entries of those replayed, came in through `install_recovered`; an appending
    /// segment's replayed entries add to the count the checkpoint gives it). Pages on the
    /// drives that recovered entries replace entries of are read in the background
    /// (`MappingIo::drain_from`).
    pub(crate) fn install_checkpoint(
        &mut self,
        image: &CheckpointImage,
        present: impl Fn(u32, u64) -> bool,
    ) -> Result<()> {
        self.l2p.install_directory(&image.directory)?;
        for s in image.segments.iter().filter(|s| present(s.zone, s.sequence)) {
            let seg = self.seg_mut(s.zone);
            debug_assert!(s.appending || seg.valid_blocks == 0, "only appending segments are replayed");
            seg.valid_blocks += s.live_blocks;
        }
        if self.l2p.next_overlaid_page_on_drives(0).is_some() {
            self.mapping.drain_from = Some(0);
        }
        Ok(())
    }
}
