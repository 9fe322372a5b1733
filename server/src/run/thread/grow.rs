//! The engine thread's side of `zapraid grow` (`Message::Grow`): new drives added to a
//! running declustered array. The engine is asked first (`Engine::check_grow`: nothing is
//! written for a grow it would refuse); then the grown shape (N, the drives before, each
//! placement's CRC) is recorded, on the new drives first and then on every working drive,
//! and only then does the engine grow and write under the new placement.
//!
//! Invariant: no segment is written under a placement the superblock in force does not
//! record. A crash after the new drives took the new generation but before the others did
//! starts grown (the newest generation on any drive is in force) with every drive found; a
//! crash before leaves new drives with no superblock, which a start does not take (grow
//! again: they are empty).

use std::path::PathBuf;

use zapraid_engine::format::MAX_ARRAY_DRIVES;

use super::*;

impl EngineLoop {
    /// Adds `devices` (checked and emptied: `ops::grow`) after the array's drives;
    /// returns how many drives the array has now.
    pub(super) fn grow(&mut self, mut devices: Vec<(ReservedZones<Drive>, PathBuf)>) -> Result<usize> {
        debug_assert!(self.shard.is_none(), "an array of shards is never declustered");
        let before = self.drives.len();
        let drives = before + devices.len();
        if devices.is_empty() {
            return Err(Error::Config { reason: "growing takes at least one new drive".into() });
        }
        if drives > MAX_ARRAY_DRIVES {
            return Err(Error::Config {
                reason: format!(
                    "{before} drives and {} new ones: an array has at most {MAX_ARRAY_DRIVES}",
                    devices.len()
                ),
            });
        }
        let placement = self.engine.check_grow(drives as u32)?;
        for (device, path) in &mut devices {
            if self.notified && !device.notify_completions(self.lease.bell().raw()) {
                return Err(Error::Config {
                    reason: format!(
                        "{} cannot signal its completions as the array's drives do (an NVMe namespace and a drive file \
                         cannot be mixed)",
                        path.display()
                    ),
                });
            }
        }
        let sb = &mut self.record.superblock;
        let slot = sb.grown_from();
        let slot = slot.len();
        debug_assert!(slot < sb.grown_placement_crc32c.len(), "check_grow counts the placements");
        sb.grown_from[slot] = before as u8;
        sb.grown_placement_crc32c[slot] = sb.placement_crc32c;
        sb.placement_crc32c = placement.bases_crc32c().into();
        sb.drive_count = (drives as u32).into();
        for (device, path) in devices {
            tracing::info!(drive = self.drives.len(), path = %path.display(), "a new drive joins the array");
            self.drives.push(device);
            self.record.next_lba.push(0);
        }
        // The new drives first: whichever generation a crash leaves in force, a start
        // finds every drive it names.
        let old_drives = (1u64 << before) - 1;
        self.record_generation(old_drives);
        self.record_generation(self.engine_failed_mask() & !self.rebuilding);
        self.engine.grow(drives as u32).map_err(|e| {
            tracing::error!(error = %e, "the engine refused a grow it had allowed; the superblock records it");
            e
        })?;
        self.status.drives = drives;
        tracing::warn!(
            before,
            drives,
            "the array grew: new segments use the new drives, garbage collection moves the rest"
        );
        Ok(drives)
    }
}
