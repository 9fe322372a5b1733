//! The engine thread's side of a rebuild onto a new drive (`Message::ReplaceDrive`, sent
//! by `ops::replace::swap_in`): the swap, the superblock generation that records the drive
//! rebuilding before the rebuild writes to it, and noticing the rebuild's end.
//!
//! Invariants: the drive replaced is failed and has nothing in flight when swapped out; one
//! rebuild runs at a time; from the swap until the rebuild completes the drive is recorded
//! both failed and rebuilding (`record`), and only once the engine says the rebuild is done
//! (and the drive not failed) does a generation record neither bit.

use super::*;

impl EngineLoop {
    /// Swaps `device` into failed drive `drive`'s place, records the drive rebuilding
    /// (the new drive gets its first superblock), and starts the rebuild, at most at
    /// `rebuild_rate_bytes_per_s` if given (0: unlimited; else the array's limit stays).
    pub(super) fn replace_drive(
        &mut self,
        drive: usize,
        mut device: ReservedZones<Drive>,
        rebuild_rate_bytes_per_s: Option<u64>,
    ) -> Result<()> {
        debug_assert!(self.shard.is_none(), "a shard's drive is replaced by replace_shard_drive");
        let drives = self.drives.len();
        if drive >= drives {
            return Err(Error::NoSuchDrive { drive, drives });
        }
        if let Some(r) = self.engine.rebuild_status() {
            return Err(Error::Config {
                reason: format!("drive {} is being rebuilt: one rebuild runs at a time (see zapraid status)", r.drive),
            });
        }
        if !self.engine.is_failed(drive) {
            return Err(Error::Config {
                reason: format!(
                    "drive {drive} has not failed: only a failed drive is replaced (zapraid fail marks one)"
                ),
            });
        }
        if self.drives[drive].in_flight() > 0 {
            return Err(Error::Config {
                reason: format!("drive {drive} still has commands in flight; try again in a moment"),
            });
        }
        if self.notified && !device.notify_completions(self.lease.bell().raw()) {
            return Err(Error::Config {
                reason: "the new drive cannot signal its completions as the array's drives do (an NVMe namespace \
                         and a drive file cannot be mixed)"
                    .into(),
            });
        }
        self.drives[drive] = device;
        self.record.next_lba[drive] = 0;
        self.rebuilding |= 1 << drive;
        // On the drives before the rebuild writes anything to the new one.
        self.record_failures();
        if let Err(e) = self.start_rebuild_at(drive, rebuild_rate_bytes_per_s) {
            self.rebuilding &= !(1 << drive);
            self.record_failures();
            return Err(e.into());
        }
        self.rebuild_started = Some(Instant::now());
        tracing::warn!(
            drive,
            rate_bytes_per_s = self.engine.rebuild_rate_bytes_per_s(),
            "drive replaced: rebuild started"
        );
        Ok(())
    }

    /// Starts the engine's rebuild of `drive`, at `rebuild_rate_bytes_per_s` if given (0:
    /// unlimited; else the limit in force stays); a rebuild refused leaves the limit as it
    /// was.
    pub(super) fn start_rebuild_at(
        &mut self,
        drive: usize,
        rebuild_rate_bytes_per_s: Option<u64>,
    ) -> zapraid_engine::Result<()> {
        let rate_before = self.engine.rebuild_rate_bytes_per_s();
        if let Some(rate) = rebuild_rate_bytes_per_s {
            self.engine.set_rebuild_rate(Some(rate).filter(|r| *r > 0));
        }
        let started = self.engine.rebuild_drive(drive);
        if started.is_err() {
            self.engine.set_rebuild_rate(rate_before);
        }
        started
    }

    /// Whether every drive recorded as being rebuilt still is in the engine (a rebuild that
    /// ended is noticed by `watch_rebuild`; while a replace records the new drive, its
    /// rebuild is not started yet either).
    pub(super) fn rebuilds_noticed(&self) -> bool {
        let running = self.engine.rebuild_status().map_or(0, |r| 1u64 << r.drive);
        self.rebuilding & !running == 0
    }

    /// Notices a rebuild that ended: completed (the drive serves again), or stopped
    /// because the new drive failed. Either way it is no longer recorded rebuilding.
    pub(super) fn watch_rebuild(&mut self) {
        if self.rebuilding == 0 {
            return;
        }
        let running = self.engine.rebuild_status().map(|r| r.drive);
        for drive in 0..self.drives.len() {
            if self.rebuilding >> drive & 1 == 0 || running == Some(drive) {
                continue;
            }
            self.rebuilding &= !(1 << drive);
            let elapsed_s = self.rebuild_started.take().map(|t| t.elapsed().as_secs_f64());
            if self.engine.is_failed(drive) {
                tracing::error!(drive, "rebuild stopped: the new drive failed");
                continue;
            }
            // What it wrote and how fast, for operators (and the guest's replace scenario).
            let block_bytes = f64::from(self.status.block_size_bytes);
            match (self.engine.last_rebuild().filter(|r| r.drive == drive), elapsed_s) {
                (Some(r), Some(s)) if s > 0.0 => {
                    let mib_per_s = r.blocks_written as f64 * block_bytes / f64::from(1u32 << 20) / s;
                    tracing::warn!(
                        drive,
                        segments = r.segments_rebuilt,
                        blocks_written = r.blocks_written,
                        seconds = %format_args!("{s:.1}"),
                        mib_per_s = %format_args!("{mib_per_s:.2}"),
                        "rebuild complete: the array is optimal again"
                    );
                }
                _ => tracing::warn!(drive, "rebuild complete: the array is optimal again"),
            }
        }
    }
}
