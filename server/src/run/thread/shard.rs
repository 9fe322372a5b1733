//! An engine thread as one shard of an array of S (`run::sharded`): its engine owns a run
//! of every drive's zones (the parts it drives) and an interleaved share of the logical
//! space, and it answers requests in the array's terms (an LBA or zone an error names is
//! the array's, `ShardMap::array_error`). The drives it counts failed go to the array's
//! one record (`SharedRecord::report`), which writes the generation; the drives another
//! shard counts failed it fails too. Its checkpoint goes to its own area, through the
//! parts of the drives that hold it.
//!
//! Invariant: the shard answers nothing that depends on a failure its engine saw before
//! the record holds it (`recorded` is false until reported, and the turn reports before
//! it answers), as one engine thread does with its own record.

use zapraid_zns::ZonedDevice;

use super::shard_link::ShardLink;
use super::EngineLoop;

impl EngineLoop {
    /// Whether the record holds what this shard's engine counts failed and rebuilds, and
    /// this shard has taken every failure the record holds and the generation in force.
    pub(super) fn shard_recorded(&self, link: &ShardLink) -> bool {
        let failed = self.engine_failed_mask();
        (failed, self.rebuilding) == link.reported
            && link.record.failed() & !failed == 0
            && link.record.generation() == self.record.superblock.generation.get()
    }

    /// Fails the drives another shard counts failed, reports this shard's, and takes the
    /// generation in force.
    pub(super) fn report_to_record(&mut self) {
        let Some(record) = self.shard.as_ref().map(|link| link.record.clone()) else { return };
        let adopt = record.failed() & !self.engine_failed_mask();
        for drive in (0..self.drives.len()).filter(|d| adopt >> d & 1 == 1) {
            tracing::warn!(drive, "drive failed in another shard: failed here too");
            self.engine.fail_drive(drive);
        }
        let mine = (self.engine_failed_mask(), self.rebuilding);
        let link = self.shard.as_mut().expect("a shard");
        let superblock = if mine != link.reported {
            link.reported = mine;
            record.report(link.index, mine.0, mine.1)
        } else if record.generation() != self.record.superblock.generation.get() {
            record.superblock()
        } else {
            return;
        };
        if superblock.generation != self.record.superblock.generation {
            self.record.superblock = superblock;
            // A start refuses an incremental checkpoint whose base goes with an older superblock.
            self.engine.forget_checkpoint_base();
        }
    }
}

impl EngineLoop {
    /// Swaps this shard's parts of a new drive (`device`, its zones; `checkpoint_part`,
    /// its checkpoint area) into failed drive `drive`'s place and starts this shard's
    /// rebuild onto them. The array's way in recorded the drive rebuilding first, for
    /// every shard (`SharedRecord::start_rebuild`); a shard that cannot start its
    /// rebuild takes that back for itself.
    pub(super) fn replace_shard_drive(
        &mut self,
        drive: usize,
        device: zapraid_zns::ReservedZones<crate::drives::Drive>,
        checkpoint_part: Option<crate::drives::Drive>,
        rebuild_rate_bytes_per_s: Option<u64>,
    ) -> crate::error::Result<()> {
        let (index, record) = self.shard.as_ref().map(|l| (l.index, l.record.clone())).expect("a shard");
        let refuse = |reason: String| {
            record.cancel_rebuild(index, drive);
            Err(crate::error::Error::Config { reason })
        };
        if drive >= self.drives.len() || self.drives[drive].in_flight() > 0 {
            return refuse(format!("shard {index}: drive {drive} has commands in flight; try again in a moment"));
        }
        if let Some(r) = self.engine.rebuild_status() {
            return refuse(format!("shard {index} is rebuilding drive {}: one rebuild runs at a time", r.drive));
        }
        let mut device = device;
        if self.notified && !device.notify_completions(self.lease.bell().raw()) {
            return refuse("the new drive cannot signal its completions as the array's drives do".into());
        }
        // Failed here too, if this shard had not seen it fail: its rebuild needs it so.
        if !self.engine.is_failed(drive) {
            self.engine.fail_drive(drive);
        }
        self.drives[drive] = device;
        let slot = self.shard.as_mut().and_then(|l| l.checkpoint_drives.get_mut(drive));
        if let (Some(part), Some(slot)) = (checkpoint_part, slot) {
            *slot = part;
        }
        if let Err(e) = self.start_rebuild_at(drive, rebuild_rate_bytes_per_s) {
            record.cancel_rebuild(index, drive);
            self.record_failures();
            return Err(e.into());
        }
        self.rebuilding |= 1 << drive;
        self.rebuild_started = Some(std::time::Instant::now());
        // Reported at once: the record holds it pending until then.
        self.record_failures();
        tracing::warn!(drive, shard = index, "drive replaced: this shard's rebuild started");
        Ok(())
    }
}
