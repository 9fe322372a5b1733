//! Crash exploration of declustered arrays (issue 35): the plain exploration's checks
//! (`crash.rs`: every acknowledged write reads back, nothing else appears, the array
//! works on and survives a second crash) over arrays wider than their stripes, with power
//! cut at every step of a window of the workload, and during a rebuild into distributed
//! spare space (the start is told the drive failed, and whether the rebuild had ended;
//! the rebuild is started again after it), and during a grow's row moves (every start
//! given the grown config: `exploration::grow`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zapraid_engine::{Mode, RaidLevel};

mod common;
#[path = "common/exploration/mod.rs"]
#[allow(dead_code)] // this binary uses part of the harness crash.rs drives
mod exploration;
use common::array::Sharding;
use exploration::grow::{explore_grow, grow_steps, GrowOutcome, GrowPlan};
use exploration::*;

/// Declustered schemes: Zone Append and Zone Write, RAID-5 and RAID-6, chunks an append
/// may land in part, hybrid open segments; two segments per row (one spare position).
fn declustered_schemes() -> Vec<Scheme> {
    let (raid5, raid6) = (RaidLevel::Raid5 { drives: 4 }, RaidLevel::Raid6 { drives: 5 });
    vec![
        Scheme::single(raid5, Mode::ZapRaid { group_size: 4 }).declustered(9),
        Scheme::single(raid6, Mode::ZoneWriteOnly).declustered(11),
        Scheme::with_chunk(raid5, Mode::ZoneAppendOnly, 2).declustered(9),
        Scheme::hybrid(raid5, Mode::ZapRaid { group_size: 4 }, 2, 1).declustered(9),
    ]
}

/// Cuts at every step of the first `window` of each scheme's workload (a few seeds).
#[test]
fn power_cuts_of_declustered_arrays_keep_every_acknowledged_write() {
    let mut states = 0;
    for scheme in declustered_schemes() {
        for seed in 0..3u64 {
            let steps = run_steps_on::<zapraid_engine::Simulator>(Sharding::PLAIN, scheme, seed, 40, Twists::default());
            for cut in (0..=steps).step_by(7) {
                states += explore(scheme, seed, 40, cut).states;
            }
        }
    }
    eprintln!("declustered power cuts: {states} states recovered");
}

/// Runs of `power_cuts_during_a_rebuild_into_spare_space...` per scheme.
const ZAPRAID_SPARE_RUNS: u64 = 12;

/// A drive fails and is rebuilt into spare space part way through the writes; power is
/// cut at steps after that (during the rebuild, or after it ended).
#[test]
fn power_cuts_during_a_rebuild_into_spare_space_keep_every_acknowledged_write() {
    let mut explored = 0;
    for scheme in declustered_schemes() {
        let drives = scheme.declustering.drives as usize;
        for i in 0..ZAPRAID_SPARE_RUNS {
            let mut rng = ChaCha8Rng::seed_from_u64(i ^ 0xdec1);
            let into_spares =
                DriveFailure { drive: rng.random_range(0..drives), before_write: rng.random_range(20..60) };
            let twists = Twists { into_spares: Some(into_spares), ..Twists::default() };
            let cut = rng.random_range(0..200);
            explore_with(scheme, i, 80, cut, twists);
            explored += 1;
        }
    }
    eprintln!("{explored} runs cut during or after a rebuild into spare space");
}

/// A drive of a declustered array replaced by a new one part way through the writes (each
/// segment's lane on it rebuilt); power is cut during or after that rebuild, and the start
/// is nested (cut again part way through) in half the runs.
#[test]
fn power_cuts_during_a_declustered_replace_keep_every_acknowledged_write() {
    for scheme in declustered_schemes() {
        let drives = scheme.declustering.drives as usize;
        for i in 0..ZAPRAID_SPARE_RUNS {
            let mut rng = ChaCha8Rng::seed_from_u64(i ^ 0x4e9);
            let replace = DriveFailure { drive: rng.random_range(0..drives), before_write: rng.random_range(20..60) };
            let interrupt_recovery = rng.random_bool(0.5).then(|| rng.random_range(1..40));
            let twists = Twists { replace: Some(replace), interrupt_recovery, ..Twists::default() };
            explore_with(scheme, i, 80, rng.random_range(0..200), twists);
        }
    }
}

/// A drive fails and is rebuilt into spare space part way through the writes, then a new
/// drive takes its place and garbage collection moves the segments in spare space back to
/// it (the rebalance); power is cut during or after that, and the start is nested in half
/// the runs.
#[test]
fn power_cuts_during_a_rebalance_keep_every_acknowledged_write() {
    let mut rebalancing = 0;
    for scheme in declustered_schemes() {
        let drives = scheme.declustering.drives as usize;
        // A relocation of these small segments takes few steps: cuts land within a few of
        // the replacement, over more runs.
        for i in 0..4 * ZAPRAID_SPARE_RUNS {
            let mut rng = ChaCha8Rng::seed_from_u64(i ^ 0xba1a);
            // Late enough that sealed segments go into spare space (open ones are reclaimed).
            let rebalance =
                DriveFailure { drive: rng.random_range(0..drives), before_write: rng.random_range(150..220) };
            let interrupt_recovery = rng.random_bool(0.5).then(|| rng.random_range(1..40));
            let twists = Twists { rebalance: Some(rebalance), interrupt_recovery, ..Twists::default() };
            explore_with(scheme, i, 240, rng.random_range(0..16), twists);
            rebalancing += 1;
        }
    }
    let during = CUTS_DURING_REBALANCE.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("{rebalancing} runs cut during or after a rebalance, {during} of them with segments still to move");
    assert!(during > 0, "no cut caught a rebalance under way");
}

/// A declustered array with its L2P table offloaded (pages of a few entries, a budget of a
/// page or two): power cuts at steps of a workload that writes mapping blocks, during a
/// rebuild into spare space in half the runs; every start is offered the newest checkpoint.
#[test]
fn power_cuts_of_declustered_arrays_with_a_bounded_l2p_table_keep_every_acknowledged_write() {
    let mut used = 0;
    for scheme in declustered_schemes() {
        let drives = scheme.declustering.drives as usize;
        for i in 0..ZAPRAID_SPARE_RUNS {
            let mut rng = ChaCha8Rng::seed_from_u64(i ^ 0x12b);
            let l2p = (rng.random_range(4..16u64), rng.random_range(1..3u64));
            let into_spares = rng
                .random_bool(0.5)
                .then(|| DriveFailure { drive: rng.random_range(0..drives), before_write: rng.random_range(20..60) });
            let twists = Twists { l2p: Some(l2p), into_spares, ..Twists::default() };
            let run = explore_with(scheme, i, 80, rng.random_range(0..300), twists);
            used += run.checkpoints_used;
        }
    }
    eprintln!("declustered runs with a bounded L2P table: {used} starts from a checkpoint");
}

/// Pinned (found by the exploration above): a lane moved into spare space while a command
/// of it was in flight to the failed drive; that command's failure, completing after the
/// move, failed the lane's new drive, which then missed every write of the lanes on it,
/// and a start that was told only of the first failure read LBA 2's older version ("LBA
/// 2 holds what looks like write 163 of LBA 2, neither an allowed write [232]"). A failed
/// command now fails the drive it went to.
#[test]
fn a_command_in_flight_when_its_lane_moves_fails_the_drive_it_went_to() {
    let scheme = Scheme::single(RaidLevel::Raid6 { drives: 5 }, Mode::ZoneWriteOnly).declustered(11);
    let twists = Twists { into_spares: Some(DriveFailure { drive: 9, before_write: 23 }), ..Twists::default() };
    explore_with(scheme, 8, 80, 152, twists);
}

/// Grow runs per scheme of `power_cuts_during_a_grow_keep_every_acknowledged_write`
/// (each some 50 crash states); `ZAPRAID_GROW_RUNS` sets another count.
const GROW_RUNS: u64 = 4;

fn grow_runs() -> u64 {
    std::env::var("ZAPRAID_GROW_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(GROW_RUNS)
}

/// Cuts of each grow run: every `DENSE`th step until the grow's rows have all moved (or
/// the run's work ends), every `SPARSE`th after.
const DENSE: usize = 1;
const SPARSE: usize = 23;

/// A declustered array written in its first placement grows by 1 to 5 drives with writes
/// in flight, and is written on while garbage collection moves the rows of the old
/// placement over; power is cut at many steps after the grow (most of them while rows
/// are still to move), and every start is given the grown config. Some runs grow twice,
/// have a drive in spare space at the grow, have the first start cut short, run on few
/// zones (relocation under space pressure too), or keep checkpoints of an offloaded L2P
/// table.
#[test]
fn power_cuts_during_a_grow_keep_every_acknowledged_write() {
    let mut explored = GrowOutcome::default();
    for scheme in declustered_schemes() {
        let drives = scheme.declustering.drives as usize;
        for seed in 0..grow_runs() {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9407);
            let plan = GrowPlan {
                writes_before: rng.random_range(60..160),
                in_flight: rng.random_range(0..8),
                added: rng.random_range(1..=5),
                writes_after: rng.random_range(20..80),
                again: (seed % 4 == 3).then(|| (rng.random_range(0..20), rng.random_range(1..=5))),
                spared: (seed % 4 == 1).then(|| rng.random_range(0..drives)),
                interrupt_recovery: (seed % 3 == 2).then(|| rng.random_range(1..40)),
                zones: if seed % 2 == 0 { scheme.few_zones() } else { ZONES },
                l2p: (seed % 4 == 2).then(|| (rng.random_range(4..16), rng.random_range(1..3))),
            };
            let (steps, moved) = grow_steps(scheme, seed, plan);
            let moved = moved.unwrap_or(steps).min(steps);
            let cuts = (0..moved).step_by(DENSE).chain((moved..=steps).step_by(SPARSE));
            for cut in cuts {
                explored += explore_grow(scheme, seed, plan, cut);
            }
        }
    }
    eprintln!(
        "grow power cuts: {} crash states, 0 violations; of the first cuts, {} with rows still to move, {} with \
         segments marked to move, {} with drive commands in flight; {} starts offered a checkpoint, {} used it",
        explored.states,
        explored.during_row_moves,
        explored.segments_moving,
        explored.in_flight,
        explored.checkpoints_offered,
        explored.checkpoints_used
    );
    assert!(explored.segments_moving > 0, "no cut caught segments of the old placement to move: {explored:?}");
}
