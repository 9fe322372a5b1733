//! Arrays of S = 1 to 4 engine shards (`sim_shards`) against the reference model, with the
//! reference harness of `model.rs` (`reference`): random writes, reads and discards of 1 to
//! 6 blocks over logical blocks interleaved in units of 4 (most requests cross shards),
//! flushes, drive failures up to m (failed in every shard), clean restarts (each shard
//! offered the checkpoint its stop left, with the L2P table offloaded) and power cuts
//! (each shard offered its newest), for every RAID scheme and write mode. The hostile
//! property adds damage beyond parity, replaced drives rebuilt by every shard (resumed
//! by every shard after a restart or crash) and scrubs. Every read must match the model.

use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use zapraid_engine::sim_shards::ShardedSimulator;
use zapraid_engine::{Mode, OpenSegments, RaidLevel};

mod common;
use common::array::Sharding;
#[allow(dead_code)] // this binary uses part of the harness model.rs drives
#[path = "common/reference/mod.rs"]
mod reference;
use reference::*;

/// Interleave unit: most requests of 1 to 6 blocks cross into the next shard.
const UNIT: u64 = 4;

fn levels() -> Vec<RaidLevel> {
    vec![
        RaidLevel::Raid0 { drives: 3 },
        RaidLevel::Raid1 { drives: 3 },
        RaidLevel::Raid5 { drives: 4 },
        RaidLevel::Raid6 { drives: 5 },
        RaidLevel::Erasure { k: 3, m: 3 },
    ]
}

fn modes() -> Vec<Mode> {
    vec![Mode::ZapRaid { group_size: 4 }, Mode::ZoneWriteOnly, Mode::ZoneAppendOnly]
}

/// An array of S shards and a workload for it.
#[derive(Debug)]
struct Case {
    shards: u32,
    level: RaidLevel,
    mode: Mode,
    chunk_blocks: u64,
    ops: Vec<Op>,
    seed: u64,
    /// Zones of each shard.
    zones: u32,
}

impl Case {
    /// Its setup: S times the zones and the zone limits of `model.rs`'s drives.
    fn setup(&self, l2p: Option<SmallL2p>, hostile: bool) -> (Sharding, Setup) {
        let sharding = Sharding { shards: self.shards, unit_blocks: UNIT };
        let geometry = common::geometry(sharding.zones(self.zones), 6 * self.shards, 8 * self.shards);
        let Case { level, mode, chunk_blocks, .. } = *self;
        (
            sharding,
            Setup {
                geometry,
                level,
                mode,
                chunk_blocks,
                open: OpenSegments::SINGLE,
                l2p,
                hostile,
                declustering: Default::default(),
            },
        )
    }
}

prop_compose! {
    fn sharded_case(op: BoxedStrategy<Op>)(
        shards in 1..=4u32,
        level in proptest::sample::select(levels()),
        mode in proptest::sample::select(modes()),
        chunk_blocks in 1..=2u64,
        ops in proptest::collection::vec(op, 1..60),
        seed in any::<u64>(),
        zones in proptest::sample::select(vec![FEW_ZONES, 24]),
    ) -> Case {
        Case { shards, level, mode, chunk_blocks, ops, seed, zones }
    }
}

/// Cases per property `cargo test` runs (`PROPTEST_CASES` sets another count).
const CASES: u32 = 1024;

/// Cases run, by shard count (index S).
static CASES_RUN: [AtomicUsize; 5] = [const { AtomicUsize::new(0) }; 5];

/// Runs `property` on cases of `strategy` (the plain, offloaded and hostile properties).
fn check<T: std::fmt::Debug>(
    name: &str,
    strategy: impl Strategy<Value = T>,
    property: impl Fn(T) -> Result<(), TestCaseError>,
) {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES);
    let config = ProptestConfig { cases, ..ProptestConfig::default() };
    if let Err(e) = proptest::test_runner::TestRunner::new(config).run(&strategy, property) {
        panic!("{name}: {e}");
    }
}

fn run_case(case: &Case, l2p: Option<SmallL2p>, hostile: bool) -> Result<(), TestCaseError> {
    CASES_RUN[case.shards as usize].fetch_add(1, Ordering::Relaxed);
    let (sharding, setup) = case.setup(l2p, hostile);
    run_sharded::<ShardedSimulator>(sharding, setup, &case.ops, case.seed).map(|_| ())
}

/// The reference model's properties over 1 to 4 shards: plain; with the L2P table
/// offloaded to one to three pages of a few entries (restarts start every shard from the
/// checkpoint its stop left, crashes from each shard's newest); hostile (damage beyond
/// parity, replacements rebuilt by every shard, scrubs; no failure beyond tolerance:
/// `model.rs` explores those on the plain array). Prints the cases run per S.
#[test]
fn shards_match_reference_model() {
    let crashes = CRASH_STARTS.load(Ordering::Relaxed);
    let rebuilds = faults::REBUILDS_STARTED.load(Ordering::Relaxed);
    check("plain", sharded_case(op().boxed()), |case| run_case(&case, None, false));
    let small = (proptest::sample::select(vec![4u64, 8, 32]), 1..=3u64);
    check("offloaded table", (sharded_case(op().boxed()), small), |(case, (page_entries, budget_pages))| {
        run_case(&case, Some(SmallL2p { page_entries, budget_pages }), false)
    });
    check("hostile", sharded_case(hostile_op(false).boxed()), |case| run_case(&case, None, true));
    let per_s: Vec<usize> = CASES_RUN.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let crashes = CRASH_STARTS.load(Ordering::Relaxed) - crashes;
    let rebuilds = faults::REBUILDS_STARTED.load(Ordering::Relaxed) - rebuilds;
    eprintln!(
        "reference model over shards: cases run with S = 1, 2, 3, 4: {:?}, 0 violations; {crashes} starts after a \
         power cut, {rebuilds} rebuilds started",
        &per_s[1..]
    );
    assert!(per_s[1..].iter().all(|n| *n > 0), "every shard count ran: {per_s:?}");
    assert!(crashes > 0 && rebuilds > 0);
}

/// A fixed run over each S: writes crossing shards, a discard, a drive failed, a clean
/// restart from every shard's checkpoint and a crash, with the table offloaded; prints
/// how many starts it made and how many began from checkpoints and replayed after them.
#[test]
fn restarts_and_crashes_over_one_to_four_shards() {
    let replaying = CRASH_STARTS_REPLAYING.load(Ordering::Relaxed);
    let before = STARTS.get();
    for shards in 1..=4 {
        let mut ops: Vec<Op> = (0..40)
            .map(|i| Op::Write { lba: (i * 13) % (LOGICAL_BLOCKS - 6), blocks: 1 + i % 6, fill: i as u8 })
            .collect();
        ops.extend([Op::Discard { lba: 5, blocks: 6 }, Op::Restart, Op::Read { lba: 0, blocks: 12 }]);
        ops.extend((0..30).map(|i| Op::Write { lba: (i * 7) % (LOGICAL_BLOCKS - 5), blocks: 5, fill: 100 + i as u8 }));
        ops.extend([Op::FailDrive { drive: 1 }, Op::Flush, Op::Crash, Op::Read { lba: 0, blocks: 24 }]);
        ops.extend((0..20).map(|i| Op::Write { lba: (i * 5) % (LOGICAL_BLOCKS - 3), blocks: 3, fill: 200 + i as u8 }));
        ops.extend([Op::Restart, Op::Crash]);
        let case = Case {
            shards,
            level: RaidLevel::Raid5 { drives: 4 },
            mode: Mode::ZapRaid { group_size: 4 },
            chunk_blocks: 1,
            ops,
            seed: 5,
            zones: FEW_ZONES + 2,
        };
        let (sharding, setup) = case.setup(Some(SmallL2p { page_entries: 8, budget_pages: 2 }), false);
        run_sharded::<ShardedSimulator>(sharding, setup, &case.ops, case.seed)
            .unwrap_or_else(|e| panic!("{sharding}: {e}"));
    }
    let (starts, replaying) = (STARTS.get() - before, CRASH_STARTS_REPLAYING.load(Ordering::Relaxed) - replaying);
    eprintln!("1 to 4 shards: {starts} starts after restarts and crashes, {replaying} shards' starts replayed what came after their checkpoint");
    assert_eq!(starts, 4 * 4, "every restart and crash starts the array again");
    assert!(replaying > 0);
}
