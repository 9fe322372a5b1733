//! The checkpoints a reference run keeps, each shard's apart (one for the plain
//! simulator), and what they mean for discards: a discard is not in the log, so a start
//! that replays a shard's segments may bring back the blocks of that shard discarded
//! since the checkpoint it used (or, using none, all of them).

use std::collections::HashSet;

use proptest::prelude::*;
use zapraid_engine::format::CheckpointImage;

use super::{Expected, CRASH_STARTS_REPLAYING, RUNNING_CHECKPOINTS};
use crate::common::array::{Array, Sharding};
use std::sync::atomic::Ordering;

/// Each shard's newest checkpoint (none offered at all: every shard replays its log).
pub(crate) struct Kept {
    sharding: Sharding,
    images: Vec<Option<CheckpointImage>>,
}

impl Kept {
    pub(crate) fn new(sharding: Sharding) -> Self {
        Kept { sharding, images: Vec::new() }
    }

    /// The shard LBA `lba` is in.
    fn shard_of(&self, lba: u64) -> usize {
        (lba / self.sharding.unit_blocks % u64::from(self.sharding.shards)) as usize
    }

    /// What the next start is offered.
    pub(crate) fn offer(&self) -> Vec<Option<CheckpointImage>> {
        self.images.clone()
    }

    /// After a clean stop that left `images` (one per shard; none when the array keeps no
    /// checkpoint): what the start that follows is offered, every shard's or none (a
    /// shard left none, the array full: every shard replays its log, which holds no
    /// discard). Whether every shard left one.
    pub(crate) fn stopped(&mut self, images: Vec<Option<CheckpointImage>>, expected: &mut Expected) -> bool {
        let every = !images.is_empty() && images.iter().all(Option::is_some);
        if every {
            self.images = images;
            expected.discarded_before.extend(expected.discarded_since.drain());
        } else {
            expected.uncertain.extend(expected.discarded_since.drain().chain(expected.discarded_before.drain()));
            self.images = Vec::new();
        }
        every
    }

    /// After the start that follows a clean stop: every shard used the checkpoint its stop
    /// left, replaying nothing (or, offered none, used none).
    pub(crate) fn check_restart<A: Array>(&self, sim: &A, what: &str) -> Result<(), TestCaseError> {
        for (shard, report) in sim.recovery_reports().into_iter().enumerate() {
            let generation = self.images.get(shard).and_then(|i| i.as_ref().map(|i| i.generation));
            prop_assert_eq!(report.checkpoint_generation, generation, "{}: shard {}", what, shard);
            if generation.is_some() {
                prop_assert_eq!(report.segments_replayed, 0, "{}: shard {}", what, shard);
            }
        }
        Ok(())
    }

    /// After the start that follows a power cut: a shard that used its checkpoint replays
    /// the segments after it (its discards since may come back); one that did not replays
    /// everything (its discards before too) and empties it.
    pub(crate) fn crashed<A: Array>(
        &mut self,
        sim: &A,
        expected: &mut Expected,
        what: &str,
    ) -> Result<(), TestCaseError> {
        expected.uncertain.extend(expected.discarded_since.iter().copied());
        for (shard, report) in sim.recovery_reports().into_iter().enumerate() {
            let kept = self.images.get(shard).and_then(|i| i.as_ref().map(|i| i.generation));
            match report.checkpoint_generation {
                Some(used) => {
                    prop_assert_eq!(Some(used), kept, "{}: shard {}", what, shard);
                    CRASH_STARTS_REPLAYING.fetch_add(usize::from(report.segments_replayed > 0), Ordering::Relaxed);
                }
                None => {
                    let before: Vec<u64> =
                        expected.discarded_before.iter().copied().filter(|l| self.shard_of(*l) == shard).collect();
                    expected.uncertain.extend(before);
                    if let Some(image) = self.images.get_mut(shard) {
                        *image = None;
                    }
                }
            }
        }
        Ok(())
    }

    /// After each operation: a checkpoint a shard took while running (during this op or
    /// the writes before it) holds every discard of that shard's of the ops before this
    /// one (`this_op`'s may come after it).
    pub(crate) fn running<A: Array>(&mut self, sim: &mut A, this_op: &HashSet<u64>, expected: &mut Expected) {
        let taken = sim.take_running_checkpoints();
        if self.images.len() < taken.len() {
            self.images.resize(taken.len(), None);
        }
        for (shard, taken) in taken.into_iter().enumerate() {
            let Some((image, _)) = taken else { continue };
            RUNNING_CHECKPOINTS.fetch_add(1, Ordering::Relaxed);
            let moved: Vec<u64> = expected
                .discarded_since
                .iter()
                .copied()
                .filter(|l| self.shard_of(*l) == shard && !this_op.contains(l))
                .collect();
            for lba in moved {
                expected.discarded_since.remove(&lba);
                expected.discarded_before.insert(lba);
            }
            self.images[shard] = Some(image);
        }
    }
}
