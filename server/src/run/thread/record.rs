//! The engine thread's superblock generations: whenever the drives the engine counts
//! failed, the drives being rebuilt, or the failed drives in distributed spare space
//! (`Engine::drives_in_spare_space`) differ from what the superblock records, a new
//! generation naming them is appended to every working drive (and to a new drive being
//! rebuilt), and the watchers (`Message::WatchGenerations`) are told.
//!
//! Invariant: a drive being rebuilt stays recorded failed until its rebuild completes, so a
//! restart never trusts its zones.

use zapraid_zns::ZonedDevice;

use super::*;
use crate::run::record::RecordedDrives;

impl EngineLoop {
    /// Drives the engine counts failed.
    pub(super) fn engine_failed_mask(&self) -> u64 {
        (0..self.drives.len()).filter(|d| self.engine.is_failed(*d)).fold(0, |mask, d| mask | 1 << d)
    }

    /// Drives failed as the superblock records them: a drive being rebuilt stays failed
    /// there until its rebuild completes (a restart must not trust its zones).
    pub(super) fn failed_mask(&self) -> u64 {
        self.engine_failed_mask() | self.rebuilding
    }

    /// What the superblock is to record of the drives now.
    fn drives_to_record(&self) -> RecordedDrives {
        let spared = self.engine.drives_in_spare_space().into_iter().fold(0, |mask, d| mask | 1 << d);
        RecordedDrives { failed: self.failed_mask(), rebuilding: self.rebuilding, spared }
    }

    pub(super) fn recorded(&self) -> bool {
        if let Some(link) = &self.shard {
            return self.shard_recorded(link);
        }
        self.drives_to_record() == RecordedDrives::of(&self.record.superblock)
    }

    /// Appends a superblock generation naming the failed and rebuilding drives to every
    /// live drive and every drive being rebuilt, if either changed since the last one;
    /// waits for it (feeding the engine the completions of its own commands meanwhile).
    pub(super) fn record_failures(&mut self) {
        if self.shard.is_some() {
            return self.report_to_record();
        }
        // Completions taken while recording may fail another drive: record until stable.
        while !self.recorded() {
            self.record_once();
        }
    }

    fn record_once(&mut self) {
        // Written to the drives not failed, and to a new drive being rebuilt (its first
        // superblock says it is being rebuilt).
        self.record_generation(self.engine_failed_mask() & !self.rebuilding);
    }

    /// Appends the next superblock generation (the record's template, naming the drives
    /// as the engine counts them) to every drive not in `skipped`, and waits for it.
    pub(super) fn record_generation(&mut self, skipped: u64) {
        let drives = self.drives_to_record();
        let g = self.drives[0].geometry();
        let (sb, mut writes) = self.record.next_generation(drives, skipped, &g);
        loop {
            let mut pending = 0;
            for (i, commands) in &mut writes {
                if let Some(command) = commands.pop_front() {
                    self.drives[*i].inner_mut().submit(RECORD_TAG, command);
                    pending += 1;
                }
            }
            if pending == 0 {
                break;
            }
            while pending > 0 {
                pending -= self.poll_drives(true).1;
                self.dispatch();
            }
        }
        tracing::warn!(
            generation = sb.generation.get(),
            failed_drives = drives.failed,
            rebuilding_drives = drives.rebuilding,
            spared_drives = drives.spared,
            "failed, rebuilding and spared drives recorded in the superblock"
        );
        self.record.superblock = sb;
        // A start refuses an incremental checkpoint whose base goes with an older superblock.
        self.engine.forget_checkpoint_base();
        self.watchers.retain(|w| !matches!(w.try_send(()), Err(crossbeam_channel::TrySendError::Disconnected(_))));
    }
}
