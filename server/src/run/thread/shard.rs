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
