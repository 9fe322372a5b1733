//! The engine thread's checkpoints: one left at a clean stop, and those the engine asks
//! for while running (it drains first, so nothing is in flight while one is written).
//! A checkpoint that cannot be written costs the next start time, never data.

use std::time::Instant;

use super::EngineLoop;
use crate::records::checkpoint::{self, CheckpointMark};

impl EngineLoop {
    /// After a clean stop: writes the engine's checkpoint (if the array keeps one) to
    /// every working drive, so that the next start need not replay every footer. A
    /// checkpoint that cannot be written costs the next start time, never data. None when
    /// the newest one on the drives still describes them (nothing written since).
    pub(super) fn leave_checkpoint(&mut self) {
        let Some(place) = self.record.checkpoint.as_ref() else { return };
        if place.is_current(self.record.superblock.generation.get(), self.engine_writes) {
            tracing::info!("nothing changed since the checkpoint on the drives: it is left as it is");
            return;
        }
        if !self.write_checkpoint() {
            tracing::info!("no checkpoint to leave (the table could not be written back, or no drive took it)");
        }
    }

    /// The engine drained for a checkpoint while running (`Engine::checkpoint_ready`):
    /// writes it (nothing is in flight meanwhile, requests wait in the engine), and lets
    /// the engine go on.
    pub(super) fn write_running_checkpoint(&mut self) {
        debug_assert_eq!(self.in_flight(), 0, "written only once the drives are idle");
        let started = Instant::now();
        let written = self.write_checkpoint();
        tracing::debug!(written, micros = started.elapsed().as_micros() as u64, "running checkpoint");
        self.engine.checkpoint_written(written, self.now_ns());
    }

    /// Writes the engine's checkpoint as the next generation; whether one was written (on
    /// one drive at least: start reads the newest valid copy of any drive).
    fn write_checkpoint(&mut self) -> bool {
        let Some(place) = self.record.checkpoint.as_mut() else { return false };
        let superblock_generation = self.record.superblock.generation.get();
        if place.base_superblock_generation != Some(superblock_generation) {
            // A start would refuse an incremental image on a base of another generation.
            self.engine.forget_checkpoint_base();
        }
        let Some(mut image) = self.engine.checkpoint(place.next_generation) else { return false };
        // Failures and rebuilds recorded after it (a new superblock generation) make it stale.
        image.superblock_generation = superblock_generation;
        let area = place.area;
        // Not to a drive being rebuilt either (the superblock counts it failed): a start
        // never reads its copies, which would be stale by the time it is not.
        let failed_mask = self.failed_mask();
        let failed: Vec<usize> = (0..self.drives.len()).filter(|d| failed_mask >> d & 1 == 1).collect();
        let (copies, result) = match self.shard.as_mut() {
            Some(link) => checkpoint::write(&mut link.checkpoint_drives, &failed, area, &image),
            None => checkpoint::write(&mut self.drives, &failed, area, &image),
        };
        match &result {
            Ok(()) => tracing::info!(
                generation = image.generation,
                segments = image.segments.len(),
                "checkpoint written: the next start reads it instead of every footer"
            ),
            Err(e) => tracing::warn!("the checkpoint was not written everywhere ({e}): the next start may replay"),
        }
        let mark = CheckpointMark { superblock_generation, engine_writes: self.engine_writes };
        // An image written nowhere leaves the generations as they were: the next lands in the
        // same copy (never the base's).
        if let Some(place) = self.record.checkpoint.as_mut().filter(|_| copies > 0) {
            place.next_generation = image.next_generation();
            if image.base_generation.is_none() {
                place.base_superblock_generation = Some(superblock_generation);
            }
            // A drive without it may offer an older copy to the next start.
            place.on_drives = result.is_ok().then_some(mark);
        }
        copies > 0
    }
}
