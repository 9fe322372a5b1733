//! `Op::Grow` in the reference runs (issue 35 item 3, `Engine::grow`): new empty drives
//! added to a running declustered array while the writes of the batch under way are in
//! flight. The engine either grows (one placement more, the drives added after the
//! others, every later start given the grown config) or refuses with nothing changed:
//! for a classic array, while a drive rebuild runs, and with every placement it records
//! used (`MAX_PLACEMENT_EPOCHS`). Anything else fails the case.

use std::cell::Cell;

use proptest::prelude::*;
use zapraid_engine::lanes::MAX_PLACEMENT_EPOCHS;
use zapraid_engine::Config;

use crate::common::array::Array;

/// The most drives an array records (`Declustering::grown_from` holds drive counts in a
/// byte).
pub(crate) const MAX_DRIVES: usize = 255;

/// What the runs on this thread did (a test runs its cases on its own thread).
#[allow(dead_code)] // read by model.rs, not by every binary that shares the harness
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct GrowCounts {
    /// Grows the engine accepted (and of those, with drive commands in flight), and those
    /// it refused during a drive rebuild and with every placement used.
    pub(crate) grown: usize,
    pub(crate) grown_in_flight: usize,
    pub(crate) refused_rebuilding: usize,
    pub(crate) refused_placements: usize,
    /// Clean restarts and power cuts (each with a start) of arrays grown in the same run.
    pub(crate) starts_after: usize,
    /// Of those, starts that found rows still in an older placement (the grow's row
    /// moves not done).
    pub(crate) starts_mid_grow: usize,
}

thread_local! {
    static COUNTS: Cell<GrowCounts> = const { Cell::new(GrowCounts {
        grown: 0,
        grown_in_flight: 0,
        refused_rebuilding: 0,
        refused_placements: 0,
        starts_after: 0,
        starts_mid_grow: 0,
    }) };
}

/// The counts of the runs on this thread so far.
#[allow(dead_code)] // model.rs's
pub(crate) fn counts() -> GrowCounts {
    COUNTS.get()
}

fn count(f: impl FnOnce(&mut GrowCounts)) {
    let mut c = COUNTS.get();
    f(&mut c);
    COUNTS.set(c);
}

/// Grows the array of `sim` by `added` drives (fewer if it would pass `MAX_DRIVES`) and,
/// if it grew, makes `config` the grown one for the starts that follow. Whether it grew.
pub(crate) fn grow<A: Array>(
    sim: &mut A,
    config: &mut Config,
    added: usize,
    seed: u64,
    what: &str,
) -> Result<bool, TestCaseError> {
    let drives = sim.drives().len();
    let added = added.min(MAX_DRIVES.saturating_sub(drives));
    if added == 0 {
        return Ok(false);
    }
    let before = sim.declustering();
    prop_assert_eq!(before, config.declustering, "{}: the engine's declustering is not the run's", what);
    let status = sim.status();
    let placements = status.declustered.as_ref().map(|d| d.placements);
    let rebuilding = status.rebuild.map(|r| r.drive);
    let at_most = placements.is_some_and(|p| p as usize >= MAX_PLACEMENT_EPOCHS);
    let refusal_due = placements.is_none() || rebuilding.is_some() || at_most;
    let in_flight = sim.commands_in_flight() > 0;
    match sim.grow(added, seed) {
        Ok(()) => {
            prop_assert!(
                !refusal_due,
                "{}: grew with {:?} placements, drive {:?} being rebuilt",
                what,
                placements,
                rebuilding
            );
            let grown = sim.declustering();
            prop_assert_eq!(sim.drives().len(), drives + added, "{}: drives after the grow", what);
            prop_assert_eq!(grown.drives as usize, drives + added, "{}: {:?}", what, grown);
            prop_assert_eq!(grown.distributed_spares, before.distributed_spares, "{}: {:?}", what, grown);
            // The drive count it had joins the earlier ones.
            let earlier: Vec<u8> = before.grown_from.into_iter().filter(|&n| n != 0).collect();
            let now: Vec<u8> = grown.grown_from.into_iter().filter(|&n| n != 0).collect();
            prop_assert_eq!(now, [earlier, vec![drives as u8]].concat(), "{}: {:?}", what, grown);
            let spread = sim.status().declustered.expect("declustered");
            prop_assert_eq!(Some(spread.placements), placements.map(|p| p + 1), "{}: {:?}", what, spread);
            prop_assert_eq!(spread.drives as usize, drives + added, "{}: {:?}", what, spread);
            for drive in drives..drives + added {
                prop_assert!(!sim.is_failed(drive), "{}: added drive {} counted failed", what, drive);
            }
            config.declustering = grown;
            count(|c| {
                c.grown += 1;
                c.grown_in_flight += usize::from(in_flight);
            });
            Ok(true)
        }
        Err(e) => {
            prop_assert!(
                refusal_due,
                "{}: grow by {} refused ({}) with {:?} placements, no rebuild",
                what,
                added,
                e,
                placements
            );
            prop_assert_eq!(sim.drives().len(), drives, "{}: a refused grow added drives", what);
            prop_assert_eq!(sim.declustering(), before, "{}: a refused grow changed the declustering", what);
            let after = sim.status().declustered.map(|d| d.placements);
            prop_assert_eq!(after, placements, "{}: a refused grow changed the placements", what);
            count(|c| {
                c.refused_rebuilding += usize::from(rebuilding.is_some());
                c.refused_placements += usize::from(rebuilding.is_none() && at_most);
            });
            Ok(false)
        }
    }
}

/// After a start under `config` (the grown one if the run `grown`): the array has the
/// drives and the placements that config names.
pub(crate) fn started<A: Array>(sim: &A, config: &Config, grown: bool, what: &str) -> Result<(), TestCaseError> {
    let declustering = sim.declustering();
    prop_assert_eq!(declustering, config.declustering, "{}: the start's declustering", what);
    let mut mid_grow = false;
    if let Some(spread) = sim.status().declustered {
        let placements = 1 + declustering.grown_from.iter().filter(|&&n| n != 0).count();
        prop_assert_eq!(spread.placements as usize, placements, "{}: {:?}", what, spread);
        prop_assert_eq!(spread.drives as usize, sim.drives().len(), "{}: {:?}", what, spread);
        mid_grow = spread.rows_to_grow > 0;
    }
    count(|c| {
        c.starts_after += usize::from(grown);
        c.starts_mid_grow += usize::from(mid_grow);
    });
    Ok(())
}
