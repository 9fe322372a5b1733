//! The engine thread's rebuilds into distributed spare space (issue 35): a declustered
//! array (wider than its stripes, formatted with `--distributed-spares`) rebuilds a failed
//! drive's chunks into the spare zones of the other drives at once, without a new drive,
//! as OpenZFS dRAID does with its distributed spares: when a drive fails while the array
//! runs, and at a start for a failed drive that still holds chunks (a rebuild cut short
//! starts again; what it had moved stays moved). It runs online at the array's
//! `--rebuild-rate` and is shown by `zapraid status` like a rebuild onto a new drive.
//!
//! Invariants: one rebuild runs at a time (a replace waits for this one, and this one for
//! a replace); a drive whose rebuild into spare space was refused (no spare space left) is
//! not tried again until the failed drives change; when the rebuild ends the drive is
//! recorded in spare space by the next superblock generation (`record`), never before the
//! engine says no segment has a chunk on it.

use super::*;

/// Rebuilds into spare space started by the engine thread.
#[derive(Default)]
pub(super) struct SpareRebuilds {
    /// The drive being rebuilt into spare space, if this thread started it.
    running: Option<usize>,
    /// Failed drives whose rebuild into spare space was refused, and the failed drives
    /// when it was: refused again only while those stay the same.
    refused: u64,
    refused_with_failed: u64,
}

impl EngineLoop {
    /// Starts rebuilding a failed drive of a declustered array into spare space when one
    /// holds chunks and no rebuild runs; says when one ended.
    pub(super) fn rebuild_into_spares_when_needed(&mut self) {
        if self.drives.len() == self.engine.layout().drives() || self.shard.is_some() || self.stopping {
            return;
        }
        if self.engine.rebuild_status().is_some() {
            return;
        }
        if let Some(drive) = self.spares.running.take() {
            self.say_spare_rebuild_ended(drive);
        }
        if self.rebuilding != 0 {
            return; // a replace is recorded and its rebuild about to start
        }
        let failed = self.engine_failed_mask();
        if failed != self.spares.refused_with_failed {
            self.spares.refused = 0;
        }
        let spared = self.engine.drives_in_spare_space();
        let waiting = (0..self.drives.len())
            .find(|&d| failed >> d & 1 == 1 && !spared.contains(&d) && self.spares.refused >> d & 1 == 0);
        let Some(drive) = waiting else { return };
        match self.engine.rebuild_into_spares(drive) {
            Ok(()) => {
                self.spares.running = Some(drive);
                self.rebuild_started = Some(Instant::now());
                tracing::warn!(
                    drive,
                    rate_bytes_per_s = self.engine.rebuild_rate_bytes_per_s(),
                    "drive failed: rebuilding its chunks into distributed spare space, without a new drive"
                );
            }
            Err(e) => {
                self.spares.refused |= 1 << drive;
                self.spares.refused_with_failed = failed;
                tracing::error!(drive, "cannot rebuild the failed drive into distributed spare space: {e}");
            }
        }
    }

    fn say_spare_rebuild_ended(&mut self, drive: usize) {
        let elapsed_s = self.rebuild_started.take().map(|t| t.elapsed().as_secs_f64());
        let last = self.engine.last_rebuild().filter(|r| r.drive == drive && r.into_spares);
        if !self.engine.drives_in_spare_space().contains(&drive) {
            // Stopped short (a segment it could not write): not tried again until the
            // failed drives change; the next start begins it again.
            self.spares.refused |= 1 << drive;
            self.spares.refused_with_failed = self.engine_failed_mask();
            tracing::error!(drive, "the rebuild into distributed spare space stopped before it ended");
            return;
        }
        let block_bytes = f64::from(self.status.block_size_bytes);
        match (last, elapsed_s) {
            (Some(r), Some(s)) if s > 0.0 => tracing::warn!(
                drive,
                segments = r.segments_rebuilt,
                blocks_written = r.blocks_written,
                seconds = %format_args!("{s:.1}"),
                mib_per_s = %format_args!("{:.2}", r.blocks_written as f64 * block_bytes / f64::from(1u32 << 20) / s),
                "rebuild into distributed spare space complete: the array is fully redundant again (optimal, \
                 spare space used)"
            ),
            _ => tracing::warn!(
                drive,
                "rebuild into distributed spare space complete: the array is fully redundant again (optimal, \
                 spare space used)"
            ),
        }
    }
}
