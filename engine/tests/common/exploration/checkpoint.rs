//! Checkpoints in explored runs, each shard's apart (one for the plain simulator): every
//! clean stop that completes leaves one per shard (if the array keeps them), and the
//! engines take more while they run (`Array::take_running_checkpoints` before each power
//! cut), each taken through its bytes; every later start of the run offers each shard its
//! newest, which it must use when nothing touched the drives since its stop. Once an engine
//! ran on the drives since, a start may use it, replaying the segments written after it,
//! as long as every segment it names is still there, and refuses it otherwise (garbage
//! collection reset one). A shard's start that does not use it empties it (the server
//! does), so later starts offer that shard none. Whichever it does, the run's checks of
//! what reads back follow.

use zapraid_engine::capacity::RECOVERY_RESERVED_ZONES;
use zapraid_engine::format::CheckpointImage;

use crate::common::array::Array;
use crate::common::BLOCK;

/// What a start offered the newest checkpoint must do with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Nothing touched the drives since the clean stop that left it.
    Used,
    /// The drives may or may not have changed since: used (replaying what came after it,
    /// if anything did) or refused.
    Either,
}

/// A shard's newest checkpoint in a run.
#[derive(Clone, Default)]
struct Newest {
    image: Option<CheckpointImage>,
    /// Left by a clean stop (not taken while running).
    from_a_stop: bool,
    /// Taken while a rebuild ran (by a clean stop, or while running).
    during_rebuild: bool,
}

/// Each shard's newest checkpoint of a run, and what the run's starts did with them.
#[derive(Default)]
pub struct Checkpoints {
    newest: Vec<Newest>,
    /// Shards' starts (recoveries that ran to the end) offered a checkpoint, those that
    /// used it, and those of them that replayed segments written after it.
    pub offered: usize,
    pub used: usize,
    pub replayed: usize,
    /// Clean stops of an array that keeps checkpoints that left none: it was full.
    pub stops_without: usize,
    /// Checkpoints the engine took while running that became the newest.
    pub running: usize,
    /// Checkpoints that became the newest and were incremental (resolved from their base).
    pub incremental: usize,
    /// Starts with a drive failed that used a checkpoint taken while running with it failed
    /// (appending segments with their stripe tables: Zone Append schemes only).
    pub degraded: usize,
    /// Starts that used a checkpoint taken while a rebuild ran.
    pub during_rebuild: usize,
}

impl Checkpoints {
    /// Shard `shard`'s newest, made room for.
    fn shard(&mut self, shard: usize) -> &mut Newest {
        if self.newest.len() <= shard {
            self.newest.resize(shard + 1, Newest::default());
        }
        &mut self.newest[shard]
    }

    /// After a clean stop has completed: each shard's checkpoint, if the array keeps one
    /// (`keeps`), which it must unless the shard is full (no empty zone beyond the
    /// recovery reserve for the mapping blocks), also while a rebuild runs; it replaces the
    /// one kept. Whether every shard left one.
    pub fn take<A: Array>(&mut self, sim: &mut A, keeps: bool, what: &str) -> bool {
        assert!(sim.is_stopped(), "{what}: a checkpoint taken before the stop completed");
        self.note_running(sim, what); // one taken while running before the stop is older
        let statuses = sim.shard_statuses();
        let mut every = true;
        for (shard, image) in sim.stop_checkpoints().into_iter().enumerate() {
            let status = &statuses[shard];
            let Some(image) = image else {
                let full = status.free_zones as usize <= RECOVERY_RESERVED_ZONES;
                assert!(!keeps || full, "{what}: shard {shard}'s clean stop left no checkpoint: {status:?}");
                self.stops_without += usize::from(keeps);
                every = false;
                continue;
            };
            assert!(keeps, "{what}: an array that keeps no checkpoint handed one out");
            // The simulator wrote it to its copy and read it back (resolved, if incremental).
            self.incremental += usize::from(image.base_generation.is_some());
            let during_rebuild = status.rebuild.is_some();
            *self.shard(shard) = Newest { image: Some(image), from_a_stop: true, during_rebuild };
        }
        every
    }

    /// Before a power cut (or a stop): each shard's newest checkpoint the engine took while
    /// running since the last call, if any, becomes its newest (a real driver wrote it).
    pub fn note_running<A: Array>(&mut self, sim: &mut A, what: &str) {
        for (shard, taken) in sim.take_running_checkpoints().into_iter().enumerate() {
            let Some((image, during_rebuild)) = taken else { continue };
            let decoded = CheckpointImage::decode(&image.encode(BLOCK as u32))
                .unwrap_or_else(|e| panic!("{what}: a running checkpoint does not decode: {e:?}"));
            assert!(decoded == image, "{what}: a running checkpoint changed on its trip through its bytes");
            self.incremental += usize::from(decoded.base_generation.is_some());
            *self.shard(shard) = Newest { image: Some(decoded), from_a_stop: false, during_rebuild };
            self.running += 1;
        }
    }

    /// Whether every shard's newest checkpoint was left by a clean stop: a start right
    /// after it must use them, replaying nothing.
    pub fn newest_from_a_stop(&self) -> bool {
        !self.newest.is_empty() && self.newest.iter().all(|n| n.image.is_some() && n.from_a_stop)
    }

    /// The checkpoints to offer the next start of an array of `shards` shards.
    pub fn offer(&self, shards: u32) -> Vec<Option<CheckpointImage>> {
        (0..shards as usize).map(|s| self.newest.get(s).and_then(|n| n.image.clone())).collect()
    }

    /// Judges what a start offered `offer()` did with each shard's.
    pub fn judge<A: Array>(&mut self, sim: &A, expect: Expect, what: &str) {
        let failed = !sim.status().failed_drives.is_empty();
        for (shard, report) in sim.recovery_reports().into_iter().enumerate() {
            let got = report.checkpoint_generation;
            let newest = self.shard(shard).clone();
            let Some(image) = newest.image.as_ref() else {
                assert_eq!(got, None, "{what}: shard {shard}'s start, offered no checkpoint, started from one");
                continue;
            };
            let generation = image.generation;
            self.offered += 1;
            match expect {
                Expect::Used => assert_eq!(
                    got,
                    Some(generation),
                    "{what}: shard {shard}'s checkpoint matching the drives was not used: {report:?}"
                ),
                Expect::Either => assert!(
                    got.is_none() || got == Some(generation),
                    "{what}: shard {shard} started from generation {got:?}: {report:?}"
                ),
            }
            if expect == Expect::Used {
                assert_eq!(report.segments_replayed, 0, "{what}: shard {shard}: nothing was written since the stop");
            }
            self.used += usize::from(got.is_some());
            // Taken while a drive was failed: its appending segments carry their tables.
            let tabled = image.segments.iter().any(|s| s.appending && !s.table.is_empty());
            self.degraded += usize::from(got.is_some() && tabled && failed);
            self.during_rebuild += usize::from(got.is_some() && newest.during_rebuild);
            self.replayed += usize::from(got.is_some() && report.segments_replayed > 0);
            if got.is_none() {
                // Stale for good: the start empties its zones.
                self.shard(shard).image = None;
            }
        }
    }
}
