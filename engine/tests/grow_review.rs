//! A review of growing a declustered array (`engine/src/engine/grow.rs`,
//! `engine/src/lanes/epochs.rs`, `engine/src/recovery/lanes.rs`): cases `grow.rs` leaves
//! out, each pinned once found.

mod common;

use common::declustered::{geometry, schemes, Run, Scheme};
use zapraid_engine::{Config, Simulator};

/// Drives the schemes grow by.
const ADDED_DRIVES: u32 = 5;

/// `scheme`'s config once grown by `ADDED_DRIVES`.
fn grown(scheme: Scheme) -> Config {
    let mut config = scheme.config();
    config.declustering.grown_from[0] = scheme.drives as u8;
    config.declustering.drives = scheme.drives + ADDED_DRIVES;
    config
}

/// The declustered part of the engine's status.
fn spread(run: &Run) -> zapraid_engine::engine::DeclusteredStatus {
    run.sim.engine.status().declustered.expect("declustered")
}

/// `Run::new` with drives that take time, so that a power cut finds commands in flight.
fn timed_run(scheme: Scheme) -> Run {
    let timing = Some(zapraid_zns::TimingParams::zn540());
    let sim = Simulator::new(geometry(), scheme.config(), 11, timing).expect("the array");
    Run { sim, model: Default::default(), next_id: 0, round: 0, what: format!("{scheme:?}") }
}

/// Power cut, and a start with `config` from the drives as they are.
fn cut_and_start(run: &mut Run, config: Config) {
    let placeholder = Simulator::new(geometry(), config, 0, None).unwrap();
    let drives = std::mem::replace(&mut run.sim, placeholder).power_cut().unwrap();
    run.sim =
        Simulator::recover_unsettled(geometry(), config, drives).unwrap_or_else(|e| panic!("{}: start: {e}", run.what));
}

/// A grow while running moves every row to the new placement with nothing else written:
/// the rebalance's own relocations must not open segments in rows still in the old one
/// (unmarked, they would stay there for ever).
#[test]
fn a_grow_ends_with_nothing_written() {
    for scheme in schemes() {
        let mut run = Run::new(scheme);
        run.fill(6);
        run.sim.grow(ADDED_DRIVES as usize, 200).unwrap_or_else(|e| panic!("{}: grow: {e}", run.what));
        for _ in 0..20 {
            run.sim.run_until_idle();
        }
        let s = spread(&run);
        assert_eq!((s.rows_to_grow, s.segments_to_rebalance), (0, 0), "{}: the grow stopped: {s:?}", run.what);
        run.verify("once grown with nothing written");
    }
}

/// Power cuts while the rows move (the relocations' resets, the new segments' headers cut
/// part way): each start, left idle, still moves every row to the new placement.
#[test]
fn a_grow_cut_by_power_still_ends() {
    for scheme in schemes() {
        for steps in (0..700u64).step_by(7) {
            let mut run = timed_run(scheme);
            run.fill(6);
            run.sim.grow(ADDED_DRIVES as usize, 200).unwrap_or_else(|e| panic!("{}: grow: {e}", run.what));
            for _ in 0..steps {
                if !run.sim.step() {
                    break;
                }
            }
            cut_and_start(&mut run, grown(scheme));
            for _ in 0..20 {
                run.sim.run_until_idle();
            }
            let s = spread(&run);
            assert_eq!(
                (s.rows_to_grow, s.segments_to_rebalance),
                (0, 0),
                "{}: cut after {steps} steps, the grow stopped: {s:?}",
                run.what
            );
            run.verify("once grown after a power cut");
        }
    }
}

/// `status`'s zones are the segment numbers the array may use now (`free of zones`): each
/// free or holding a segment, before, during and after a grow, not the numbers of every
/// placement (a row uses its own placement's only).
#[test]
fn status_counts_the_zones_in_use_after_a_grow() {
    for scheme in schemes() {
        let mut run = Run::new(scheme);
        run.fill(6);
        let numbers = |run: &Run| {
            let s = run.sim.engine.status();
            (s.zones, s.free_zones + s.segments)
        };
        let (zones, counted) = numbers(&run);
        assert_eq!(zones, counted, "{}: before the grow", run.what);
        run.sim.grow(ADDED_DRIVES as usize, 200).unwrap();
        run.sim.run_until_idle();
        let (zones, counted) = numbers(&run);
        assert_eq!(zones, counted, "{}: during the grow", run.what);
        for _ in 0..10 {
            run.sim.run_until_idle();
        }
        let s = spread(&run);
        assert_eq!(s.rows_to_grow, 0, "{}: {s:?}", run.what);
        let (zones, counted) = numbers(&run);
        assert_eq!(zones, counted, "{}: once grown", run.what);
        assert_eq!(zones, common::declustered::ZONES * s.segments_per_row, "{}: once grown", run.what);
    }
}
