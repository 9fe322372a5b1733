//! The kinds of explored runs a scheme gets (`explore_scheme_on`, `explore_offloaded_on`),
//! over the plain simulator (`crash.rs`) or S shards (`crash_shards.rs`), and what they
//! explored (`Outcome`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{explore_on, run_steps_on, DriveFailure, Scheme, Twists};
use crate::common::array::{Array, Sharding};

/// Power cuts at every step of short runs, at random steps of longer runs, during
/// recovery, while recovery's leftover work runs, during a clean stop, during garbage
/// collection on few zones, combined with a drive failure, and while a failed drive is
/// rebuilt: about `target` crash states of `scheme` over an array of `sharding`.
pub fn explore_scheme_on<A: Array>(sharding: Sharding, scheme: Scheme, target: usize) -> Outcome {
    let mut explored = Outcome::default();
    // Short runs cut at every step of their work, and once after it (at rest).
    let mut seed = 0u64;
    'short: loop {
        for cut in 0..=run_steps_on::<A>(sharding, scheme, seed, 16, Twists::default()) {
            if explored.states >= target / 2 {
                break 'short;
            }
            explored += explore_on::<A>(sharding, scheme, seed, 16, cut, Twists::default());
        }
        seed += 1;
    }
    // Longer runs cut at a random step of their work.
    let mut seed = 0u64;
    while explored.states < target {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xc0ffee);
        let cut = rng.random_range(0..run_steps_on::<A>(sharding, scheme, seed, 120, Twists::default()).max(1));
        explored += explore_on::<A>(sharding, scheme, seed, 120, cut, Twists::default());
        seed += 1;
    }
    // Nested crashes: power cut during recovery, at every completion of it.
    // A small array's recovery takes a few dozen completions: cut at each of the first
    // ones, across seeds and crash points.
    const RECOVERY_CUTS: usize = 16;
    for i in 0..target / 20 {
        let twists = Twists { interrupt_recovery: Some(i % RECOVERY_CUTS), ..Twists::default() };
        explored += explore_on::<A>(sharding, scheme, i as u64, 40, 300 + i, twists);
    }
    // Power cuts while recovery's leftover work runs: the segments that were open are
    // rewritten and their zones reset.
    for i in 0..target / 20 {
        let mut rng = ChaCha8Rng::seed_from_u64(i as u64 ^ 0x5eed);
        let twists = Twists { cut_reclaim_after_steps: Some(rng.random_range(0..120)), ..Twists::default() };
        explored += explore_on::<A>(sharding, scheme, i as u64, 60, rng.random_range(100..1500), twists);
    }
    // Power cuts during a clean stop (padding, draining, stop footers).
    for i in 0..target / 20 {
        let mut rng = ChaCha8Rng::seed_from_u64(i as u64 ^ 0x570b);
        let twists = Twists { stop_then_cut_after_steps: Some(rng.random_range(0..40)), ..Twists::default() };
        explored += explore_on::<A>(sharding, scheme, i as u64, 60, rng.random_range(0..1500), twists);
    }
    // Garbage collection under power cuts: few zones, long runs.
    for i in 0..target / 20 {
        let mut rng = ChaCha8Rng::seed_from_u64(i as u64 ^ 0x6c);
        let twists = Twists {
            zones: scheme.few_zones(),
            cut_reclaim_after_steps: rng.random_bool(0.5).then(|| rng.random_range(0..200)),
            ..Twists::default()
        };
        let cut = rng.random_range(0..run_steps_on::<A>(sharding, scheme, i as u64, 400, twists).max(1));
        explored += explore_on::<A>(sharding, scheme, i as u64, 400, cut, twists);
    }
    // A drive failure combined with a crash: degraded recovery.
    let drives = scheme.level.shape().0 + scheme.level.shape().1;
    for i in 0..target / 10 {
        let mut rng = ChaCha8Rng::seed_from_u64(i as u64 ^ 0xfa11);
        let failure = DriveFailure { drive: rng.random_range(0..drives), before_write: rng.random_range(0..=60) };
        let twists = Twists { failure: Some(failure), ..Twists::default() };
        let cut = rng.random_range(0..run_steps_on::<A>(sharding, scheme, i as u64, 50, twists).max(1));
        explored += explore_on::<A>(sharding, scheme, i as u64, 50, cut, twists);
    }
    // Power cuts while a failed drive is rebuilt onto a new one (or after).
    for i in 0..target / 10 {
        let mut rng = ChaCha8Rng::seed_from_u64(i as u64 ^ 0x4eb1);
        let replace = DriveFailure { drive: rng.random_range(0..drives), before_write: rng.random_range(40..100) };
        let twists = Twists { replace: Some(replace), ..Twists::default() };
        explored += explore_on::<A>(sharding, scheme, i as u64, 120, rng.random_range(0..150), twists);
    }
    explored
}

/// Power cuts with the L2P table offloaded to a budget of one to three small pages: plain
/// runs, garbage collection on few zones, a drive failure (half of them on few zones, some
/// replaced and rebuilt), and a clean stop cut short (some followed by a power cut during
/// recovery). Every clean stop that completes leaves
/// a checkpoint, offered to every later start of its run. Returns the states explored and
/// the starts offered a checkpoint and that used it.
pub fn explore_offloaded_on<A: Array>(sharding: Sharding, scheme: Scheme, target: usize) -> Outcome {
    let mut explored = Outcome::default();
    for i in 0..target / 10 {
        explored += offloaded_run_on::<A>(sharding, scheme, i);
    }
    explored
}

/// Run `i` of `explore_offloaded_on`: its twists and cut drawn from `i`.
pub fn offloaded_run_on<A: Array>(sharding: Sharding, scheme: Scheme, i: usize) -> Outcome {
    let drives = scheme.level.shape().0 + scheme.level.shape().1;
    let mut rng = ChaCha8Rng::seed_from_u64(i as u64 ^ 0x12b);
    let l2p = Some((rng.random_range(2..=16), rng.random_range(1..=3)));
    let twists = match i % 4 {
        0 => Twists { l2p, ..Twists::default() },
        1 => Twists {
            zones: scheme.few_zones(),
            cut_reclaim_after_steps: rng.random_bool(0.5).then(|| rng.random_range(0..200)),
            l2p,
            ..Twists::default()
        },
        // A failed drive replaced, and power cut while (or after) it is rebuilt, in a long
        // run: checkpoints are taken while the rebuild runs, and half the runs stop cleanly
        // during it (the stop leaves one too) before the cut.
        2 if i % 16 == 10 => {
            let replace = DriveFailure { drive: rng.random_range(0..drives), before_write: rng.random_range(20..120) };
            let stop_then_cut_after_steps = (i % 32 == 26).then(|| rng.random_range(0..400));
            Twists { replace: Some(replace), stop_then_cut_after_steps, l2p, ..Twists::default() }
        }
        // Half of the other failures on few zones, in longer runs: garbage collection's
        // resets wait for checkpoints taken while the drive is failed.
        2 => {
            let failure = DriveFailure { drive: rng.random_range(0..drives), before_write: rng.random_range(0..=60) };
            let zones = if i % 8 == 6 { scheme.few_zones() } else { Twists::default().zones };
            Twists { failure: Some(failure), zones, l2p, ..Twists::default() }
        }
        // A clean stop begins while writes are in flight, some waiting for their pages,
        // and power is cut during it (it takes a few steps: padding, the mapping blocks
        // its checkpoint needs, stop footers) or after it, when the checkpoint it leaves
        // is offered to the next start, which is itself cut short.
        _ => {
            let steps = rng.random_range(0..400);
            let (stop_steps, interrupt) = if i % 8 == 3 { (steps % 4, None) } else { (steps, Some(i / 8 % 16)) };
            Twists {
                stop_then_cut_after_steps: Some(stop_steps),
                interrupt_recovery: interrupt,
                l2p,
                ..Twists::default()
            }
        }
    };
    let writes = if i % 4 == 1 || i % 8 == 6 || i % 16 == 10 { 400 } else { 80 };
    let short_cut = i % 4 == 3 || i % 16 == 10;
    // A cut at a random step of the run's work; during a rebuild, counted from the
    // replacement (its work is the rebuild's too).
    let cut_after_steps = match (short_cut, twists.replace) {
        (true, _) => rng.random_range(0..300),
        (false, Some(_)) => rng.random_range(0..4000),
        (false, None) => rng.random_range(0..run_steps_on::<A>(sharding, scheme, i as u64, writes, twists).max(1)),
    };
    explore_on::<A>(sharding, scheme, i as u64, writes, cut_after_steps, twists)
}

/// What one explored run explored.
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcome {
    /// Crash states: power cuts whose aftermath the run checked.
    pub states: usize,
    /// Of those, the cuts that caught work in flight: drive commands submitted and not
    /// complete or not reaped (`Simulator::commands_in_flight`), or a start cut short. The
    /// others found the drives at rest (the run's work done, or only a timer pending): a
    /// short run cut at a step past its end is such a state.
    pub cuts_in_flight: usize,
    /// Starts offered a checkpoint, those that used it, and those of them that replayed
    /// segments written after it (a crash after a start from it).
    pub checkpoints_offered: usize,
    pub checkpoints_used: usize,
    pub checkpoints_replayed: usize,
    /// Checkpoints the engine took while running that were offered to a later start.
    pub checkpoints_running: usize,
    /// Checkpoints that became the newest and were incremental (resolved from their base).
    pub checkpoints_incremental: usize,
    /// Starts with a drive failed that used a checkpoint taken while running.
    pub checkpoints_degraded: usize,
    /// Starts that used a checkpoint taken while a rebuild ran.
    pub checkpoints_during_rebuild: usize,
    /// Power cuts during a clean stop (before it completed), and of those, the ones after
    /// it had issued mapping blocks (the write-back a checkpoint needs, or evictions).
    pub stops_cut: usize,
    pub stops_cut_writing_mappings: usize,
    /// Clean stops that left no checkpoint (the array full).
    pub stops_without_checkpoint: usize,
}

impl std::ops::AddAssign for Outcome {
    fn add_assign(&mut self, other: Outcome) {
        self.states += other.states;
        self.cuts_in_flight += other.cuts_in_flight;
        self.checkpoints_offered += other.checkpoints_offered;
        self.checkpoints_used += other.checkpoints_used;
        self.checkpoints_replayed += other.checkpoints_replayed;
        self.checkpoints_running += other.checkpoints_running;
        self.checkpoints_incremental += other.checkpoints_incremental;
        self.checkpoints_degraded += other.checkpoints_degraded;
        self.checkpoints_during_rebuild += other.checkpoints_during_rebuild;
        self.stops_cut += other.stops_cut;
        self.stops_cut_writing_mappings += other.stops_cut_writing_mappings;
        self.stops_without_checkpoint += other.stops_without_checkpoint;
    }
}

impl Outcome {
    /// Crash states whose cut found the drives at rest.
    pub fn cuts_at_rest(&self) -> usize {
        self.states - self.cuts_in_flight
    }
}
