//! Power cuts during a grow's row moves (issue 35 item 3, `Engine::grow`): a declustered
//! array is written in its first placement (sealed segments in the rows it used), grows
//! by a few new drives while writes are in flight, and is written on, so that garbage
//! collection relocates the segments of the rows still in the old placement (each row
//! takes the new placement once its zones are reset); power is cut at a chosen step
//! counted from the grow. Every start is given the grown config (the added drives after
//! the others) and offered the newest checkpoint when the L2P table is offloaded. The
//! exploration's checks follow (`Run::check`): every acknowledged write reads back and
//! nothing else appears, after the start, after more writes, and after a second cut;
//! then the array is written until every row is in the newest placement.
#![allow(dead_code)] // crash_declustered.rs's, not every binary's

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zapraid_engine::{Config, Simulator};

use super::checkpoint::{Checkpoints, Expect};
use super::{config, geometry, l2p_config, Run, Scheme, Twists};
use crate::common::array::{Array, Sharding};

/// What a grow run does around the grow.
#[derive(Clone, Copy, Debug)]
pub struct GrowPlan {
    /// Writes before the grow, all let complete: segments sealed in the first placement.
    pub writes_before: usize,
    /// Writes submitted just before the grow, in flight across it.
    pub in_flight: usize,
    /// Drives the grow adds.
    pub added: usize,
    /// Writes after the grow, some let complete before the next.
    pub writes_after: usize,
    /// A second grow by `.1` drives before write `.0` after the first (a third placement).
    pub again: Option<(usize, usize)>,
    /// A drive failed and rebuilt into distributed spare space before the grow: the grown
    /// array starts with it failed and in spare space.
    pub spared: Option<usize>,
    /// The first start is itself cut after this many completions, then run again.
    pub interrupt_recovery: Option<usize>,
    /// Zones per drive (few: garbage collection also relocates under space pressure).
    pub zones: u32,
    /// The L2P table offloaded: (entries per page, pages of budget); checkpoints kept.
    pub l2p: Option<(u64, u64)>,
}

/// What grow runs explored.
#[derive(Clone, Copy, Debug, Default)]
pub struct GrowOutcome {
    /// Crash states checked.
    pub states: usize,
    /// First cuts that found rows of an older placement or segments still to move, of
    /// those the cuts with segments marked to move (relocations due or under way), and
    /// first cuts with drive commands in flight.
    pub during_row_moves: usize,
    pub segments_moving: usize,
    pub in_flight: usize,
    /// Starts offered a checkpoint, and those that used it.
    pub checkpoints_offered: usize,
    pub checkpoints_used: usize,
}

impl std::ops::AddAssign for GrowOutcome {
    fn add_assign(&mut self, o: GrowOutcome) {
        self.states += o.states;
        self.during_row_moves += o.during_row_moves;
        self.segments_moving += o.segments_moving;
        self.in_flight += o.in_flight;
        self.checkpoints_offered += o.checkpoints_offered;
        self.checkpoints_used += o.checkpoints_used;
    }
}

/// The workload of a grow run: the writes before the grow (completed), the grow with
/// writes in flight, the writes after it, then steps until `cut` steps after the grow or
/// until nothing is left to do. Returns the steps run after the grow, and the first of
/// them at which no row was left in an older placement and no segment to move (None if
/// never, within them).
fn workload(run: &mut Run, rng: &mut ChaCha8Rng, seed: u64, plan: GrowPlan, cut: usize) -> (usize, Option<usize>) {
    for _ in 0..plan.writes_before {
        run.write(rng);
        if rng.random_bool(0.3) {
            for _ in 0..rng.random_range(1..20) {
                run.sim.step();
            }
            run.collect_acks();
        }
    }
    if let Some(drive) = plan.spared {
        run.sim.run_until_idle();
        run.sim.fail_drive(drive);
        let label = &run.label;
        run.sim.rebuild_into_spares(drive).unwrap_or_else(|e| panic!("{label}: into spares: {e}"));
    }
    run.sim.run_until_idle();
    run.collect_acks();
    for _ in 0..plan.in_flight {
        run.write(rng);
    }
    let label = &run.label;
    run.sim.grow(plan.added, seed ^ 0x970).unwrap_or_else(|e| panic!("{label}: grow: {e}"));
    let (mut steps, mut moved) = (0, None);
    let step = |run: &mut Run, steps: &mut usize, moved: &mut Option<usize>| {
        if *steps == cut || !run.sim.step() {
            return false;
        }
        *steps += 1;
        if moved.is_none() && cut == usize::MAX && rows_moved(&run.sim) {
            *moved = Some(*steps);
        }
        true
    };
    for i in 0..plan.writes_after {
        if let Some((_, added)) = plan.again.filter(|a| a.0 == i) {
            let label = &run.label;
            run.sim.grow(added, seed ^ 0x971).unwrap_or_else(|e| panic!("{label}: grow again: {e}"));
        }
        run.write(rng);
        if rng.random_bool(0.3) {
            for _ in 0..rng.random_range(1..20) {
                if !step(run, &mut steps, &mut moved) {
                    break;
                }
            }
            run.collect_acks();
        }
    }
    while step(run, &mut steps, &mut moved) {}
    (steps, moved)
}

/// Whether every row is in the newest placement and no segment is left to move.
fn rows_moved(sim: &Simulator) -> bool {
    let spread = sim.engine.status().declustered.expect("declustered");
    spread.rows_to_grow == 0 && spread.segments_to_rebalance == 0
}

/// Steps the workload of `plan` runs after the grow until nothing is left to do, and the
/// first at which its rows had all moved (None: not before the writes ended).
pub fn grow_steps(scheme: Scheme, seed: u64, plan: GrowPlan) -> (usize, Option<usize>) {
    let config = Config { l2p: l2p_config(twists(plan)), ..config(scheme) };
    let sim = Simulator::new(geometry(plan.zones), config, seed, None).unwrap();
    let mut run = Run::new(format!("{scheme} seed {seed} {plan:?}, to the end of its work"), sim);
    workload(&mut run, &mut ChaCha8Rng::seed_from_u64(seed), seed, plan, usize::MAX)
}

/// The exploration's twists that say what `plan` shares with them.
fn twists(plan: GrowPlan) -> Twists {
    Twists { zones: plan.zones, l2p: plan.l2p, ..Twists::default() }
}

/// One explored grow run: the workload of `plan`, power cut `cut` steps after the grow,
/// a start with the grown config (cut short first, if the plan says), checks, more writes,
/// a second cut, a start and checks; then writes until every row has moved. Any violation
/// panics with the run's parameters.
pub fn explore_grow(scheme: Scheme, seed: u64, plan: GrowPlan, cut: usize) -> GrowOutcome {
    let what = format!("{scheme} seed {seed}, {plan:?}, cut {cut} steps after the grow");
    let formatted = Config { l2p: l2p_config(twists(plan)), ..config(scheme) };
    let keeps_checkpoints = formatted.l2p.checkpoint;
    let geometry = geometry(plan.zones);
    let mut checkpoints = Checkpoints::default();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut run = Run::new(what.clone(), Simulator::new(geometry, formatted, seed, None).unwrap());
    workload(&mut run, &mut rng, seed, plan, cut);
    run.collect_acks();
    let grown = Config { declustering: run.sim.engine.declustering(), ..formatted };
    let grows = 1 + usize::from(plan.again.is_some_and(|a| a.0 < plan.writes_after));
    let added = plan.added + plan.again.filter(|_| grows == 2).map_or(0, |a| a.1);
    let drives = scheme.declustering.drives as usize + added;
    assert_eq!(grown.declustering.drives as usize, drives, "{what}: {:?}", grown.declustering);
    let during = !rows_moved(&run.sim);
    let moving = run.sim.engine.status().declustered.is_some_and(|d| d.segments_to_rebalance > 0);
    let in_flight = run.sim.commands_in_flight() > 0;
    let failed: Vec<usize> = plan.spared.into_iter().collect();
    let spared = run.sim.engine.drives_in_spare_space();
    checkpoints.note_running(&mut run.sim, &what);
    let mut drives_now = run.sim.power_cut().unwrap();
    assert_eq!(drives_now.len(), drives, "{what}: the drives at the cut");
    let mut states = 2;
    let plain = Sharding::PLAIN;
    if let Some(after) = plan.interrupt_recovery {
        let offer = checkpoints.offer(1);
        match <Simulator as Array>::recover_interrupted(plain, geometry, grown, drives_now, after, offer) {
            Ok(Err(cut)) => {
                drives_now = cut;
                states += 1;
            }
            Ok(Ok(mut sim)) => {
                checkpoints.judge(&sim, Expect::Either, &format!("{what}, recovery not interrupted"));
                checkpoints.note_running(&mut sim, &what);
                drives_now = sim.power_cut().unwrap();
            }
            Err(e) => panic!("{what}: interrupted recovery: {e}"),
        }
    }
    let start = |drives, failed: &[usize], spared: &[usize], checkpoints: &mut Checkpoints, when: &str| {
        let sim = <Simulator as Array>::recover(plain, geometry, grown, drives, failed, spared, checkpoints.offer(1))
            .unwrap_or_else(|e| panic!("{what}: {when}: {e}"));
        checkpoints.judge(&sim, Expect::Either, &format!("{what}, {when}"));
        assert_eq!(sim.engine.declustering(), grown.declustering, "{what}: {when}: the shape it found");
        let spread = sim.engine.status().declustered.expect("declustered");
        assert_eq!(spread.placements as usize, 1 + grows, "{what}: {when}: {spread:?}");
        sim
    };
    let mut sim = start(drives_now, &failed, &spared, &mut checkpoints, "recovery");
    if let Some(drive) = plan.spared.filter(|d| !spared.contains(d)) {
        // Cut before its rebuild into spare space ended: started again.
        sim.rebuild_into_spares(drive).unwrap_or_else(|e| panic!("{what}: into spares again: {e}"));
    }
    sim.run_until_idle();
    run.sim = sim;
    run.check(&format!("{what}, after recovery"));
    run.settle_history();
    // The array keeps working, and survives a second cut (half the runs with writes in
    // flight).
    for _ in 0..8 {
        run.write(&mut rng);
    }
    if rng.random_bool(0.5) {
        for _ in 0..rng.random_range(0..60) {
            if !run.sim.step() {
                break;
            }
        }
    } else {
        run.sim.run_until_idle();
        run.collect_acks();
        run.check(&format!("{what}, writes after recovery"));
    }
    run.collect_acks();
    checkpoints.note_running(&mut run.sim, &what);
    let spared = run.sim.engine.drives_in_spare_space();
    let placeholder = Simulator::new(geometry, grown, 0, None).unwrap();
    let drives_now = std::mem::replace(&mut run.sim, placeholder).power_cut().unwrap();
    run.sim = start(drives_now, &failed, &spared, &mut checkpoints, "second recovery");
    run.sim.run_until_idle();
    run.check(&format!("{what}, after a second recovery"));
    // Writes until every row is in the newest placement (garbage collection moving the
    // old ones over); a clean stop and a start from its checkpoint, if kept.
    for round in 0.. {
        run.sim.run_until_idle();
        run.collect_acks();
        if rows_moved(&run.sim) {
            break;
        }
        let spread = run.sim.engine.status().declustered;
        assert!(round < 100, "{what}: rows still to move after {round} rounds of writes: {spread:?}");
        for _ in 0..16 {
            run.write(&mut rng);
        }
    }
    run.check(&format!("{what}, once every row moved"));
    if keeps_checkpoints {
        run.sim.stop();
        let taken = checkpoints.take(&mut run.sim, true, &format!("{what}, at the last stop"));
        let expect = if taken { Expect::Used } else { Expect::Either };
        let placeholder = Simulator::new(geometry, grown, 0, None).unwrap();
        let drives_now = std::mem::replace(&mut run.sim, placeholder).power_cut().unwrap();
        let offer = checkpoints.offer(1);
        run.sim = <Simulator as Array>::recover(plain, geometry, grown, drives_now, &failed, &spared, offer)
            .unwrap_or_else(|e| panic!("{what}: start after the last stop: {e}"));
        checkpoints.judge(&run.sim, expect, &format!("{what}, start after the last stop"));
        run.sim.run_until_idle();
        run.check(&format!("{what}, after a start from the last stop's checkpoint"));
    }
    GrowOutcome {
        states,
        during_row_moves: usize::from(during),
        segments_moving: usize::from(moving),
        in_flight: usize::from(in_flight),
        checkpoints_offered: checkpoints.offered,
        checkpoints_used: checkpoints.used,
    }
}
