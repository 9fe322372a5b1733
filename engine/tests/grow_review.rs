//! A review of growing a declustered array (`engine/src/engine/grow.rs`,
//! `engine/src/lanes/epochs.rs`, `engine/src/recovery/lanes.rs`): cases `grow.rs` leaves
//! out, each pinned once found.

mod common;

use common::declustered::{schemes, Run};

/// Drives the schemes grow by.
const ADDED_DRIVES: u32 = 5;

/// The declustered part of the engine's status.
fn spread(run: &Run) -> zapraid_engine::engine::DeclusteredStatus {
    run.sim.engine.status().declustered.expect("declustered")
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
