//! Checkpoints in explored runs: every clean stop that completes leaves one (if the array
//! keeps them), and the engine takes more while it runs (`Simulator::take_running_checkpoint`
//! before each power cut), each taken through its bytes; every later start of the run is
//! offered the newest, and must use it when nothing touched the drives since its stop. Once an engine
//! ran on the drives since, a start may use it, replaying the segments written after it,
//! as long as every segment it names is still there, and refuses it otherwise (garbage
//! collection reset one). A start that does not use it empties it (the server does), so
//! later starts are offered none. Whichever it does, the run's checks of what reads back
//! follow.

use zapraid_engine::capacity::RECOVERY_RESERVED_ZONES;
use zapraid_engine::format::CheckpointImage;
use zapraid_engine::Simulator;

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

/// The newest checkpoint of a run, and what the run's starts did with it.
#[derive(Default)]
pub struct Checkpoints {
    newest: Option<CheckpointImage>,
    /// The newest was left by a clean stop (not taken while running).
    newest_from_a_stop: bool,
    /// Starts (recoveries that ran to the end) offered a checkpoint, those that used it,
    /// and those of them that replayed segments written after it.
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
    /// The newest was taken while a rebuild ran (by a clean stop, or while running).
    newest_during_rebuild: bool,
    /// Starts that used a checkpoint taken while a rebuild ran.
    pub during_rebuild: usize,
}

impl Checkpoints {
    /// After a clean stop has completed: the engine's checkpoint, if the array keeps one
    /// (`keeps`), which it must unless the array is full (no empty zone beyond the
    /// recovery reserve for the mapping blocks), also while a rebuild runs; it replaces the
    /// one kept.
    /// Whether it left one.
    pub fn take(&mut self, sim: &mut Simulator, keeps: bool, what: &str) -> bool {
        assert!(sim.engine.is_stopped(), "{what}: a checkpoint taken before the stop completed");
        self.note_running(sim, what); // one taken while running before the stop is older
        let Some(image) = sim.stop_checkpoint() else {
            let status = sim.engine.status();
            let full = status.free_zones as usize <= RECOVERY_RESERVED_ZONES;
            assert!(!keeps || full, "{what}: a clean stop left no checkpoint: {status:?}");
            self.stops_without += usize::from(keeps);
            return false;
        };
        assert!(keeps, "{what}: an array that keeps no checkpoint handed one out");
        // The simulator wrote it to its copy and read it back (resolved, if incremental).
        self.incremental += usize::from(image.base_generation.is_some());
        self.newest = Some(image);
        self.newest_from_a_stop = true;
        self.newest_during_rebuild = sim.engine.status().rebuild.is_some();
        true
    }

    /// Before a power cut (or a stop): the newest checkpoint the engine took while running
    /// since the last call, if any, becomes the newest (a real driver wrote it).
    pub fn note_running(&mut self, sim: &mut Simulator, what: &str) {
        let during_rebuild = sim.running_checkpoint_during_rebuild();
        let Some(image) = sim.take_running_checkpoint() else { return };
        let decoded = CheckpointImage::decode(&image.encode(BLOCK as u32))
            .unwrap_or_else(|e| panic!("{what}: a running checkpoint does not decode: {e:?}"));
        assert!(decoded == image, "{what}: a running checkpoint changed on its trip through its bytes");
        self.incremental += usize::from(decoded.base_generation.is_some());
        self.newest = Some(decoded);
        self.newest_from_a_stop = false;
        self.newest_during_rebuild = during_rebuild;
        self.running += 1;
    }

    /// Whether the newest checkpoint was left by a clean stop: a start right after it must
    /// use it, replaying nothing.
    pub fn newest_from_a_stop(&self) -> bool {
        self.newest.is_some() && self.newest_from_a_stop
    }

    /// The checkpoint to offer the next start.
    pub fn offer(&self) -> Option<CheckpointImage> {
        self.newest.clone()
    }

    /// Judges what a start offered `offer()` did with it.
    pub fn judge(&mut self, sim: &Simulator, expect: Expect, what: &str) {
        let report = sim.recovery_report;
        let got = report.checkpoint_generation;
        let Some(newest) = self.newest.as_ref().map(|image| image.generation) else {
            assert_eq!(got, None, "{what}: a start offered no checkpoint started from one");
            return;
        };
        self.offered += 1;
        match expect {
            Expect::Used => {
                assert_eq!(got, Some(newest), "{what}: the checkpoint matching the drives was not used: {report:?}")
            }
            Expect::Either => {
                assert!(got.is_none() || got == Some(newest), "{what}: started from generation {got:?}: {report:?}")
            }
        }
        if expect == Expect::Used {
            assert_eq!(report.segments_replayed, 0, "{what}: nothing was written since the stop: {report:?}");
        }
        self.used += usize::from(got.is_some());
        // Taken while a drive was failed: its appending segments carry their tables.
        let tabled = |image: &CheckpointImage| image.segments.iter().any(|s| s.appending && !s.table.is_empty());
        let degraded = self.newest.as_ref().is_some_and(tabled) && !sim.engine.status().failed_drives.is_empty();
        self.degraded += usize::from(got.is_some() && degraded);
        self.during_rebuild += usize::from(got.is_some() && self.newest_during_rebuild);
        self.replayed += usize::from(got.is_some() && report.segments_replayed > 0);
        if got.is_none() {
            // Stale for good: the start empties its zones.
            self.newest = None;
        }
    }
}
