//! The reference model the engine is checked against, and the harness that runs a
//! sequence of operations on both: a map from LBA to block contents, writes batched
//! (concurrent), reads, flushes, discards, drive failures up to m, and with an offloaded
//! L2P table clean restarts and power cuts, whose starts are offered the newest
//! checkpoint (a clean stop's or one taken while running). LBAs a crash may bring back
//! (discards not in the log) are uncertain until written again.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use zapraid_engine::{Config, L2pConfig, Mode, OpenSegments, RaidLevel, Request, Simulator, Status};
use zapraid_zns::Geometry;

use crate::common::{self, BLOCK};
use crate::geometry;

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
    /// With an offloaded table: a clean stop, and a start from the checkpoint it left
    /// (nothing else happens in between). A no-op otherwise.
    Restart,
    /// With an offloaded table: a power cut once every write is acknowledged, and a start
    /// offered the last checkpoint (if the last start used it: a start that does not empties
    /// it), which replays only the segments written after it. A no-op otherwise.
    Crash,
}

pub(crate) const LOGICAL_BLOCKS: u64 = 96;

/// Starts after an `Op::Crash`, and those that began from a checkpoint and replayed the
/// segments written after it.
pub(crate) static CRASH_STARTS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static CRASH_STARTS_REPLAYING: AtomicUsize = AtomicUsize::new(0);
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

pub(crate) fn config(level: RaidLevel, mode: Mode, chunk_blocks: u64, open: OpenSegments) -> Config {
    Config { open_segments: open, ..common::config(level, mode, chunk_blocks, LOGICAL_BLOCKS) }
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
    run_with_l2p(Setup { geometry, level, mode, chunk_blocks, open, l2p: None }, ops, seed)
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
}

pub(crate) fn run_with_l2p(setup: Setup, ops: &[Op], seed: u64) -> Result<Status, TestCaseError> {
    let Setup { geometry, level, mode, chunk_blocks, open, l2p } = setup;
    let l2p_config = l2p.map_or_else(L2pConfig::default, |small| L2pConfig {
        budget_bytes: Some(small.budget_pages * BLOCK as u64),
        page_entries: Some(small.page_entries),
        checkpoint: true,
    });
    let config = Config { l2p: l2p_config, ..config(level, mode, chunk_blocks, open) };
    let mut sim = Simulator::new(geometry, config, seed, None).unwrap();
    let m = level.tolerated_failures();
    let drives = sim.engine.layout().drives();
    let mut model: HashMap<u64, Vec<u8>> = HashMap::new();
    // A discard is not in the log: a crash may bring the block back. Discards since the
    // kept checkpoint (and, for a start that replays everything, those before it too) make
    // their LBAs uncertain after a crash, until written or discarded again.
    let mut checkpoint_kept = None;
    let (mut discarded_since, mut discarded_before) = (HashSet::new(), HashSet::new());
    let mut uncertain: HashSet<u64> = HashSet::new();
    let mut failed = std::collections::BTreeSet::new();
    let mut next_id = 0u64;
    // Writes are submitted in batches (concurrently); a read or failure ends the batch.
    let mut batch_writes: Vec<u64> = Vec::new();
    let ctx = |step: usize, op: &Op| {
        format!("{level:?} {mode:?} chunk {chunk_blocks} {open:?} {l2p:?} seed {seed} step {step}: {op:?}")
    };
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Write { lba, blocks, fill } => {
                let data: Vec<u8> = (0..*blocks).flat_map(|i| block_bytes(lba + i, *fill)).collect();
                for i in 0..*blocks {
                    model.insert(lba + i, block_bytes(lba + i, *fill));
                    uncertain.remove(&(lba + i));
                    discarded_since.remove(&(lba + i));
                    discarded_before.remove(&(lba + i));
                }
                sim.submit(next_id, Request::Write { lba: *lba, data });
                batch_writes.push(next_id);
                next_id += 1;
                continue;
            }
            Op::Flush => {
                let id = next_id;
                next_id += 1;
                sim.submit(id, Request::Flush);
                let r = sim.run_until_response(id);
                prop_assert!(r.is_some_and(|r| r.result.is_ok()), "{}: flush failed", ctx(step, op));
            }
            Op::Settle | Op::Read { .. } | Op::FailDrive { .. } | Op::Discard { .. } | Op::Restart | Op::Crash => {}
        }
        // End of a batch: everything written so far must be acknowledged.
        for r in sim.run_until_idle() {
            if batch_writes.contains(&r.id) {
                prop_assert!(r.result.is_ok(), "{}: write {} failed: {:?}", ctx(step, op), r.id, r.result);
            }
        }
        batch_writes.clear();
        match op {
            Op::Read { lba, blocks } => {
                let id = next_id;
                next_id += 1;
                sim.submit(id, Request::Read { lba: *lba, blocks: *blocks });
                let r = sim.run_until_response(id).expect("read answered");
                let data = r.result.map_err(|e| TestCaseError::fail(format!("{}: read failed: {e}", ctx(step, op))))?;
                for i in (0..*blocks).filter(|i| !uncertain.contains(&(lba + i))) {
                    let want = model.get(&(lba + i)).cloned().unwrap_or_else(|| vec![0; BLOCK]);
                    let got = &data[i as usize * BLOCK..(i as usize + 1) * BLOCK];
                    prop_assert!(got == want.as_slice(), "{}: LBA {} differs from the model", ctx(step, op), lba + i);
                }
            }
            Op::Discard { lba, blocks } => {
                let id = next_id;
                next_id += 1;
                sim.submit(id, Request::Discard { lba: *lba, blocks: *blocks });
                let r = sim.run_until_response(id).expect("discard answered");
                prop_assert!(r.result.is_ok(), "{}: discard failed", ctx(step, op));
                for i in 0..*blocks {
                    model.remove(&(lba + i));
                    uncertain.remove(&(lba + i));
                    discarded_since.insert(lba + i);
                }
            }
            Op::FailDrive { drive } => {
                let drive = drive % drives;
                if failed.len() < m && !failed.contains(&drive) {
                    failed.insert(drive);
                    sim.drives[drive].fail();
                }
            }
            Op::Restart if l2p.is_some() => {
                sim.stop();
                let Some(image) = sim.stop_checkpoint() else {
                    // No room to write the table back (a nearly full array): the stop left
                    // no checkpoint, and a replay would not keep discards. What the array
                    // holds is checked as it stands, and the case ends.
                    check_all(&mut sim, &model, &uncertain, next_id, &ctx(step, op))?;
                    return Ok(sim.engine.status());
                };
                let failed_list: Vec<usize> = failed.iter().copied().collect();
                let drives_left = std::mem::take(&mut sim.drives);
                let generation = image.generation;
                checkpoint_kept = Some(image.clone());
                discarded_before.extend(discarded_since.drain());
                sim = Simulator::recover_with_checkpoint(geometry, config, drives_left, &failed_list, Some(image))
                    .map_err(|e| TestCaseError::fail(format!("{}: start: {e}", ctx(step, op))))?;
                prop_assert_eq!(sim.recovery_report.checkpoint_generation, Some(generation), "{}", ctx(step, op));
                prop_assert_eq!(sim.recovery_report.segments_replayed, 0, "{}", ctx(step, op));
                sim.run_until_idle();
            }
            Op::Crash if l2p.is_some() => {
                let failed_list: Vec<usize> = failed.iter().copied().collect();
                let drives_left = std::mem::take(&mut sim.drives);
                let offered = checkpoint_kept.clone();
                sim = Simulator::recover_with_checkpoint(geometry, config, drives_left, &failed_list, offered)
                    .map_err(|e| TestCaseError::fail(format!("{}: start after a crash: {e}", ctx(step, op))))?;
                uncertain.extend(discarded_since.iter().copied());
                match sim.recovery_report.checkpoint_generation {
                    Some(used) => {
                        prop_assert_eq!(
                            Some(used),
                            checkpoint_kept.as_ref().map(|c| c.generation),
                            "{}",
                            ctx(step, op)
                        );
                        CRASH_STARTS_REPLAYING
                            .fetch_add(usize::from(sim.recovery_report.segments_replayed > 0), Ordering::Relaxed);
                    }
                    None => {
                        uncertain.extend(discarded_before.iter().copied());
                        checkpoint_kept = None;
                    }
                }
                CRASH_STARTS.fetch_add(1, Ordering::Relaxed);
                sim.run_until_idle();
            }
            _ => {}
        }
        // A checkpoint taken while running (during this op or the writes before it) holds
        // every discard of the ops before this one; this one's may come after it.
        if let Some(image) = sim.take_running_checkpoint() {
            RUNNING_CHECKPOINTS.fetch_add(1, Ordering::Relaxed);
            let this_op: HashSet<u64> = match op {
                Op::Discard { lba, blocks } => (*lba..lba + blocks).collect(),
                _ => HashSet::new(),
            };
            discarded_before.extend(discarded_since.iter().copied().filter(|lba| !this_op.contains(lba)));
            discarded_since.retain(|lba| this_op.contains(lba));
            checkpoint_kept = Some(image);
        }
    }
    sim.run_until_idle();
    // Finally every block reads back as the model says.
    let what = format!("{level:?} {mode:?} chunk {chunk_blocks} seed {seed}: final");
    check_all(&mut sim, &model, &uncertain, next_id, &what)?;
    Ok(sim.engine.status())
}

/// Every block reads back as the model says.
/// Every block reads back as the model says (those a crash made uncertain aside).
pub(crate) fn check_all(
    sim: &mut Simulator,
    model: &HashMap<u64, Vec<u8>>,
    uncertain: &HashSet<u64>,
    id: u64,
    what: &str,
) -> Result<(), TestCaseError> {
    sim.submit(id, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
    let r = sim.run_until_response(id).expect("read answered");
    let data = r.result.map_err(|e| TestCaseError::fail(format!("{what}: read of every block: {e}")))?;
    for lba in (0..LOGICAL_BLOCKS).filter(|lba| !uncertain.contains(lba)) {
        let want = model.get(&lba).cloned().unwrap_or_else(|| vec![0; BLOCK]);
        prop_assert!(data[lba as usize * BLOCK..(lba as usize + 1) * BLOCK] == want[..], "{what}: LBA {lba} differs");
    }
    Ok(())
}
