//! The reference model the engine is checked against, and the harness that runs a
//! sequence of operations on both: a map from LBA to block contents, writes batched
//! (concurrent), reads, flushes, discards, drive failures up to m, and with an offloaded
//! L2P table clean restarts and power cuts, whose starts are offered the newest
//! checkpoint (a clean stop's or one taken while running). LBAs a crash may bring back
//! (discards not in the log) are uncertain until written again. Hostile runs (`faults`)
//! add damage and failures beyond what parity covers, drive replacements and scrubs, let
//! the background work run on across operations, and restart and crash also without a
//! checkpoint (the start replays the log).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use zapraid_engine::{Config, Declustering, L2pConfig, Mode, OpenSegments, RaidLevel, Request, Simulator, Status};
use zapraid_zns::Geometry;

use crate::common::array::{Array, Sharding};
use crate::common::{self, BLOCK};

#[allow(dead_code)] // model.rs's, not every binary's that shares the harness
pub(crate) mod declustered;
pub(crate) mod faults;
pub(crate) mod grow;
mod hostile_end;
mod kept;
use faults::{Faults, Inbox};
use kept::Kept;
// For the pinned cases (lost_cases.rs); model.rs, which shares this module, does not use it.
#[allow(unused_imports)]
pub(crate) use hostile_end::describe;

#[derive(Clone, Debug)]
pub(crate) enum Op {
    Write {
        lba: u64,
        blocks: u64,
        fill: u8,
    },
    Read {
        lba: u64,
        blocks: u64,
    },
    Flush,
    /// Discard: the blocks read as zeros afterwards.
    Discard {
        lba: u64,
        blocks: u64,
    },
    FailDrive {
        drive: usize,
    },
    /// Let time pass so partial stripes are padded and written.
    Settle,
    /// A clean stop and a start: with an offloaded table, from the checkpoint the stop left
    /// (nothing else happens in between); otherwise (or when the stop could leave none)
    /// replaying the log, which holds no discard, so discarded blocks may read their older
    /// data again.
    Restart,
    /// A power cut once every write is acknowledged, and a start: with an offloaded table,
    /// offered the last checkpoint (if the last start used it: a start that does not empties
    /// it), which replays only the segments written after it; otherwise replaying the log.
    Crash,
    /// Hostile runs: damages the row holding `lba` on m+1 drives (`Faults::damage`).
    Damage {
        lba: u64,
        pick: u64,
    },
    /// Hostile runs: fails a drive even beyond tolerance (also the one being rebuilt).
    ForceFail {
        drive: usize,
    },
    /// Hostile runs: replaces a failed drive (the `drive`th of those failed) and starts
    /// its rebuild, paced or not; none while one runs.
    Replace {
        drive: usize,
        paced: bool,
    },
    /// Hostile runs: starts a scrub, paced or not (refused while one runs).
    Scrub {
        paced: bool,
    },
    /// Declustered runs: rebuilds the `drive`th of the failed drives into distributed
    /// spare space (refused while a rebuild runs, or without spare space left).
    IntoSpares {
        drive: usize,
    },
    /// Declustered runs: `added` new empty drives join the running array (`grow`), with
    /// the writes of the batch under way in flight; refused during a drive rebuild and
    /// past the placements the engine records (nothing changes then).
    Grow {
        added: usize,
    },
}

pub(crate) const LOGICAL_BLOCKS: u64 = 96;

/// Steps a declustered `Op::Replace` lets a rebuild under way take to finish first.
const MAX_STEPS_TO_FINISH_A_REBUILD: usize = 1_000_000;

/// The drives of the model tests: 24 zones of 6 blocks' capacity, 8 in size.
pub(crate) fn geometry() -> Geometry {
    common::geometry(24, 6, 8)
}

/// So few zones that a few hundred written blocks fill the array and garbage collection
/// must reclaim segments for writes to go on.
pub(crate) const FEW_ZONES: u32 = 6;

/// Starts after an `Op::Crash`, and those that began from a checkpoint and replayed the
/// segments written after it.
pub(crate) static CRASH_STARTS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static CRASH_STARTS_REPLAYING: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    /// Starts after an `Op::Restart` or `Op::Crash` on this thread (a test runs its cases on
    /// its own thread), for tests that pin that those operations start the array again.
    pub(crate) static STARTS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Checkpoints the engine took while running.
pub(crate) static RUNNING_CHECKPOINTS: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..LOGICAL_BLOCKS, 1..=6u64, any::<u8>()).prop_map(|(lba, blocks, fill)| Op::Write {
            lba: lba.min(LOGICAL_BLOCKS - blocks),
            blocks,
            fill
        }),
        4 => (0..LOGICAL_BLOCKS, 1..=6u64).prop_map(|(lba, blocks)| Op::Read { lba: lba.min(LOGICAL_BLOCKS - blocks), blocks }),
        1 => Just(Op::Flush),
        1 => (0..LOGICAL_BLOCKS, 1..=6u64).prop_map(|(lba, blocks)| Op::Discard { lba: lba.min(LOGICAL_BLOCKS - blocks), blocks }),
        1 => (0..6usize).prop_map(|drive| Op::FailDrive { drive }),
        2 => Just(Op::Settle),
        1 => Just(Op::Restart),
        1 => Just(Op::Crash),
    ]
}

/// The operations of hostile runs: those of `op`, damage beyond parity, failures beyond
/// tolerance (rarer; none unless `beyond`), replacements and scrubs.
pub(crate) fn hostile_op(beyond: bool) -> impl Strategy<Value = Op> {
    prop_oneof![
        14 => op(),
        2 => (0..LOGICAL_BLOCKS, any::<u64>()).prop_map(|(lba, pick)| Op::Damage { lba, pick }),
        u32::from(beyond) => (0..6usize).prop_map(|drive| Op::ForceFail { drive }),
        2 => (0..6usize, any::<bool>()).prop_map(|(drive, paced)| Op::Replace { drive, paced }),
        1 => any::<bool>().prop_map(|paced| Op::Scrub { paced }),
    ]
}

pub(crate) fn config(level: RaidLevel, mode: Mode, chunk_blocks: u64, open: OpenSegments) -> Config {
    Config { open_segments: open, ..common::config(level, mode, chunk_blocks, LOGICAL_BLOCKS) }
}

/// The operations of declustered runs: those of `op` over every drive (up to 31 once
/// grown), rebuilds into distributed spare space, replacements, and grows by 1 to 5
/// drives (about one or two a run; the engine refuses those past its placements).
pub(crate) fn declustered_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        14 => op(),
        1 => (0..64usize).prop_map(|drive| Op::FailDrive { drive }),
        2 => (0..4usize).prop_map(|drive| Op::IntoSpares { drive }),
        // A drive in spare space replaced: its segments move back (the rebalance).
        1 => (0..4usize).prop_map(|drive| Op::Replace { drive, paced: false }),
        1 => (1..=5usize).prop_map(|added| Op::Grow { added }),
    ]
}

pub(crate) fn block_bytes(lba: u64, fill: u8) -> Vec<u8> {
    (0..BLOCK).map(|i| fill ^ (lba as u8).wrapping_mul(31) ^ (i as u8)).collect()
}

pub(crate) fn run(
    level: RaidLevel,
    mode: Mode,
    chunk_blocks: u64,
    ops: &[Op],
    seed: u64,
) -> Result<Status, TestCaseError> {
    run_on(geometry(), level, mode, chunk_blocks, OpenSegments::SINGLE, ops, seed)
}

pub(crate) fn run_on(
    geometry: Geometry,
    level: RaidLevel,
    mode: Mode,
    chunk_blocks: u64,
    open: OpenSegments,
    ops: &[Op],
    seed: u64,
) -> Result<Status, TestCaseError> {
    run_with_l2p(
        Setup {
            geometry,
            level,
            mode,
            chunk_blocks,
            open,
            l2p: None,
            hostile: false,
            declustering: Default::default(),
        },
        ops,
        seed,
    )
}

/// A bounded L2P table: pages of a few entries, a budget of a few pages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SmallL2p {
    pub(crate) page_entries: u64,
    pub(crate) budget_pages: u64,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Setup {
    pub(crate) geometry: Geometry,
    pub(crate) level: RaidLevel,
    pub(crate) mode: Mode,
    pub(crate) chunk_blocks: u64,
    pub(crate) open: OpenSegments,
    pub(crate) l2p: Option<SmallL2p>,
    /// Faults beyond parity, replacements and scrubs (`faults`).
    pub(crate) hostile: bool,
    /// How many drives the array spreads its segments over (classic: k + m).
    pub(crate) declustering: Declustering,
}

impl Setup {
    /// A classic array of one open segment of one-block chunks, not hostile.
    #[allow(dead_code)] // not every binary that includes the harness uses it
    pub(crate) fn one_block_chunks(geometry: Geometry, level: RaidLevel, mode: Mode, l2p: Option<SmallL2p>) -> Setup {
        let open = OpenSegments::SINGLE;
        let declustering = Declustering::CLASSIC;
        Setup { geometry, level, mode, chunk_blocks: 1, open, l2p, hostile: false, declustering }
    }
}

/// A write submitted in the batch under way, and whether the array was beyond tolerance
/// then.
struct Submitted {
    id: u64,
    lba: u64,
    blocks: u64,
    fill: u8,
    beyond: bool,
}

/// What the array must hold as the model sees it.
#[derive(Default)]
struct Expected {
    /// Each LBA's contents (absent: zeros).
    model: HashMap<u64, Vec<u8>>,
    /// LBAs a crash may have brought back, until written or discarded again.
    uncertain: HashSet<u64>,
    /// A discard is not in the log: a crash may bring the block back. Discards since the
    /// kept checkpoint (and, for a start that replays everything, those before it too) make
    /// their LBAs uncertain after a crash.
    discarded_since: HashSet<u64>,
    discarded_before: HashSet<u64>,
}

/// Ends a batch of writes: every write is answered (in a hostile run the background work
/// goes on meanwhile, else everything settles first), each succeeds unless the array was
/// beyond tolerance (hostile runs), and the model takes them in order.
fn end_batch<A: Array>(
    batch: &mut Vec<Submitted>,
    sim: &mut A,
    inbox: &mut Inbox,
    faults: &mut Faults,
    expected: &mut Expected,
    hostile: bool,
    what: &str,
) -> Result<(), TestCaseError> {
    if !hostile {
        inbox.settle(sim, what)?;
    }
    for w in std::mem::take(batch) {
        let r = inbox.wait(sim, w.id, what)?;
        let beyond = w.beyond || faults.beyond(sim);
        prop_assert!(
            r.result.is_ok() || (hostile && beyond),
            "{}: write {} failed within tolerance: {:?}",
            what,
            w.id,
            r.result
        );
        for lba in w.lba..w.lba + w.blocks {
            let data = block_bytes(lba, w.fill);
            faults.written(lba, &data, r.result.is_ok(), beyond);
            if r.result.is_ok() {
                expected.model.insert(lba, data);
                expected.uncertain.remove(&lba);
                expected.discarded_since.remove(&lba);
                expected.discarded_before.remove(&lba);
            }
        }
    }
    Ok(())
}

pub(crate) fn run_with_l2p(setup: Setup, ops: &[Op], seed: u64) -> Result<Status, TestCaseError> {
    run_sharded::<Simulator>(Sharding::PLAIN, setup, ops, seed)
}

/// `run_with_l2p` over an array of `sharding` (`setup.geometry` its whole drives).
pub(crate) fn run_sharded<A: Array>(
    sharding: Sharding,
    setup: Setup,
    ops: &[Op],
    seed: u64,
) -> Result<Status, TestCaseError> {
    let Setup { geometry, level, mode, chunk_blocks, open, l2p, hostile, declustering } = setup;
    let l2p_config = l2p.map_or_else(L2pConfig::default, |small| L2pConfig {
        budget_bytes: Some(small.budget_pages * BLOCK as u64),
        page_entries: Some(small.page_entries),
        checkpoint: true,
    });
    // Grown by `Op::Grow`: every later start is given the grown config.
    let mut config = Config { l2p: l2p_config, declustering, ..config(level, mode, chunk_blocks, open) };
    let mut sim = A::create(sharding, geometry, config, seed).unwrap();
    let m = level.tolerated_failures();
    let mut grown = false;
    let mut faults = Faults::new(hostile, m);
    let mut inbox = Inbox::default();
    let mut kept = Kept::new(sharding);
    let mut expected = Expected::default();
    let mut next_id = 0u64;
    let mut new_id = || {
        next_id += 1;
        next_id - 1
    };
    // Writes are submitted in batches (concurrently); any other operation ends the batch.
    let mut batch: Vec<Submitted> = Vec::new();
    let ctx = |step: usize, op: &Op| {
        format!("{level:?} {mode:?} chunk {chunk_blocks} {open:?} {l2p:?} hostile {hostile} {sharding} seed {seed} step {step}: {op:?}")
    };
    for (step, op) in ops.iter().enumerate() {
        let what = ctx(step, op);
        if let Op::Write { lba, blocks, fill } = op {
            let data: Vec<u8> = (0..*blocks).flat_map(|i| block_bytes(lba + i, *fill)).collect();
            let id = new_id();
            sim.submit(id, Request::Write { lba: *lba, data });
            batch.push(Submitted { id, lba: *lba, blocks: *blocks, fill: *fill, beyond: faults.beyond(&sim) });
            continue;
        }
        if let Op::Grow { added } = op {
            // The batch's writes stay in flight across it.
            grown |= grow::grow(&mut sim, &mut config, *added, seed ^ ((step as u64) << 8), &what)?;
            continue;
        }
        let drives = sim.drives().len();
        end_batch(&mut batch, &mut sim, &mut inbox, &mut faults, &mut expected, hostile, &what)?;
        match op {
            Op::Flush => {
                let id = new_id();
                let r = inbox.call(&mut sim, id, Request::Flush, &what)?;
                prop_assert!(r.result.is_ok() || (hostile && faults.beyond(&sim)), "{}: flush failed", what);
            }
            Op::Settle if hostile => {
                // Time passes (partial stripes are padded), the background work goes on.
                let until = sim.now_ns() + 1_000_000;
                let mut steps = 0;
                while sim.step_until(until) {
                    steps += 1;
                    prop_assert!(steps < faults::STEP_BOUND, "{}: a millisecond never passes", what);
                }
            }
            Op::Settle => {}
            Op::Read { lba, blocks } => {
                let id = new_id();
                let r = inbox.call(&mut sim, id, Request::Read { lba: *lba, blocks: *blocks }, &what)?;
                let range = *lba..lba + blocks;
                match r.result {
                    Err(e) => {
                        let may_fail =
                            range.clone().any(|l| faults.maybe_lost.contains(&l) || expected.uncertain.contains(&l));
                        prop_assert!(hostile && may_fail, "{}: read failed: {}", what, e);
                    }
                    Ok(data) => {
                        for l in range.filter(|l| !expected.uncertain.contains(l)) {
                            let want = expected.model.get(&l).cloned().unwrap_or_else(|| vec![0; BLOCK]);
                            let got = &data[(l - lba) as usize * BLOCK..][..BLOCK];
                            prop_assert!(faults.allowed(l, &want, got), "{}: LBA {} differs from the model", what, l);
                        }
                    }
                }
            }
            Op::Discard { lba, blocks } => {
                let id = new_id();
                let r = inbox.call(&mut sim, id, Request::Discard { lba: *lba, blocks: *blocks }, &what)?;
                prop_assert!(r.result.is_ok(), "{}: discard failed: {:?}", what, r.result);
                for l in *lba..lba + blocks {
                    expected.model.remove(&l);
                    expected.uncertain.remove(&l);
                    faults.discarded(l);
                    expected.discarded_since.insert(l);
                }
            }
            Op::FailDrive { drive } => {
                // At most m drives out, also on a declustered array whose failed drives were
                // rebuilt into spare space (failures beyond that are `declustered.rs`'s).
                let drive = drive % drives;
                let out = Faults::drives_out(&sim);
                if out.len() < m && !out.contains(&drive) {
                    faults.fail(&mut sim, drive);
                }
            }
            Op::IntoSpares { drive } => {
                // A pulled drive no command has found failed yet is failed first, as the
                // server's `fail` does before it rebuilds into spare space.
                let pulled = |d: &usize| sim.is_failed(*d) || sim.drives()[*d].is_failed();
                let failed: Vec<usize> = (0..drives).filter(pulled).collect();
                if let Some(&drive) = failed.get(drive % failed.len().max(1)) {
                    if !sim.is_failed(drive) {
                        sim.fail_drive(drive);
                    }
                    // Refused while a rebuild runs, or where a row has no spare space left.
                    let _ = sim.rebuild_into_spares(drive);
                }
            }
            Op::ForceFail { drive } if hostile => {
                let drive = drive % drives;
                if !sim.drives()[drive].is_failed() {
                    faults.fail(&mut sim, drive);
                }
            }
            Op::Replace { drive, paced } if hostile => {
                faults.replace(&mut sim, *drive, *paced, seed ^ ((step as u64) << 8), &what)?;
            }
            Op::Replace { drive, .. } if declustering != Declustering::CLASSIC => {
                // A drive rebuilt into spare space, replaced by a new one: it holds nothing
                // to rebuild, serves at once, and the segments it held move back to it.
                // A rebuild under way (into spare space) is let finish first.
                let mut steps = 0;
                while sim.status().rebuild.is_some() && steps < MAX_STEPS_TO_FINISH_A_REBUILD && sim.step() {
                    steps += 1;
                }
                let spared = sim.drives_in_spare_space();
                if let Some(&drive) = spared.get(drive % spared.len().max(1)) {
                    if sim.status().rebuild.is_none() {
                        sim.replace_drive(drive, seed ^ ((step as u64) << 8))
                            .map_err(|e| TestCaseError::fail(format!("{what}: replace drive {drive}: {e}")))?;
                    }
                }
            }
            Op::Scrub { paced } if hostile => {
                // Refused while one runs (or the array stops): nothing to check then.
                let _ = sim.start_scrub(paced.then_some(faults::PACED_BYTES_PER_S));
            }
            Op::Damage { lba, pick } if hostile => {
                faults.damage(&mut sim, *lba, *pick);
            }
            Op::Restart => {
                faults::stop(&mut sim, &what)?;
                let images = if l2p.is_some() { sim.stop_checkpoints() } else { Vec::new() };
                let every = kept.stopped(images, &mut expected);
                if !every && l2p.is_some() && !hostile {
                    // No room to write the table back (a nearly full array): the stop left
                    // no checkpoint, and a replay would not keep discards. What the array
                    // holds is checked as it stands, and the case ends.
                    check_all(&mut sim, &mut inbox, &expected.model, &expected.uncertain, new_id(), &what)?;
                    return Ok(sim.status());
                }
                let Some(started) = faults.start(&mut sim, sharding, geometry, config, kept.offer(), false, &what)?
                else {
                    return Ok(sim.status()); // beyond tolerance: the array cannot start
                };
                sim = started;
                STARTS.set(STARTS.get() + 1);
                grow::started(&sim, &config, grown, &what)?;
                kept.check_restart(&sim, &what)?;
                inbox.clear();
                inbox.settle(&mut sim, &what)?;
                faults.resume_rebuild(&mut sim, &what)?;
            }
            Op::Crash if hostile && faults.damage_in_open_segment(&sim) => {
                faults::CRASHES_LEFT_OUT.fetch_add(1, Ordering::Relaxed);
            }
            Op::Crash => {
                faults.crashed();
                let Some(started) = faults.start(&mut sim, sharding, geometry, config, kept.offer(), true, &what)?
                else {
                    return Ok(sim.status());
                };
                sim = started;
                STARTS.set(STARTS.get() + 1);
                grow::started(&sim, &config, grown, &what)?;
                kept.crashed(&sim, &mut expected, &what)?;
                CRASH_STARTS.fetch_add(1, Ordering::Relaxed);
                inbox.clear();
                inbox.settle(&mut sim, &what)?;
                faults.resume_rebuild(&mut sim, &what)?;
            }
            _ => {}
        }
        // A checkpoint taken while running (during this op or the writes before it) holds
        // every discard of the ops before this one; this one's may come after it.
        let this_op: HashSet<u64> = match op {
            Op::Discard { lba, blocks } => (*lba..lba + blocks).collect(),
            _ => HashSet::new(),
        };
        kept.running(&mut sim, &this_op, &mut expected);
        faults.observe(&sim);
    }
    let what =
        format!("{level:?} {mode:?} chunk {chunk_blocks} {l2p:?} hostile {hostile} {sharding} seed {seed}: final");
    end_batch(&mut batch, &mut sim, &mut inbox, &mut faults, &mut expected, hostile, &what)?;
    inbox.settle(&mut sim, &what)?;
    if hostile {
        let discarded: HashSet<u64> = expected
            .discarded_since
            .iter()
            .chain(&expected.discarded_before)
            .chain(&expected.uncertain)
            .copied()
            .collect();
        let end = hostile_end::End {
            sharding,
            geometry,
            config,
            model: &expected.model,
            uncertain: &expected.uncertain,
            discarded: &discarded,
            what: &what,
        };
        return end.check(sim, faults, inbox, new_id());
    }
    // Finally every block reads back as the model says.
    check_all(&mut sim, &mut inbox, &expected.model, &expected.uncertain, new_id(), &what)?;
    Ok(sim.status())
}

/// Every block reads back as the model says (those a crash made uncertain aside).
pub(crate) fn check_all<A: Array>(
    sim: &mut A,
    inbox: &mut Inbox,
    model: &HashMap<u64, Vec<u8>>,
    uncertain: &HashSet<u64>,
    id: u64,
    what: &str,
) -> Result<(), TestCaseError> {
    let r = inbox.call(sim, id, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS }, what)?;
    let data = r.result.map_err(|e| TestCaseError::fail(format!("{what}: read of every block: {e}")))?;
    for lba in (0..LOGICAL_BLOCKS).filter(|lba| !uncertain.contains(lba)) {
        let want = model.get(&lba).cloned().unwrap_or_else(|| vec![0; BLOCK]);
        prop_assert!(data[lba as usize * BLOCK..(lba as usize + 1) * BLOCK] == want[..], "{what}: LBA {lba} differs");
    }
    Ok(())
}
