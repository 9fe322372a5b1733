//! Crash exploration over arrays of S = 1 to 4 engine shards (`sim_shards`), with the
//! plain exploration's harness (`exploration`) and kinds of runs: writes of 1 to 5 blocks
//! over logical blocks interleaved in units of 4, so that most cross shards; power cut at
//! a chosen step (commands in flight land, land partly or are lost, by seed); every
//! shard's start from the drives alone or from the checkpoint it left, also cut short by
//! another power loss; a drive failing mid-run, a failed drive replaced and rebuilt by
//! every shard (the cut landing during the rebuild: resumed by every shard onto the same
//! drive, or onto another new one), clean stops cut short or completed (each shard's
//! checkpoint offered to the next start). Checks, as `crash.rs`: every acknowledged write
//! reads back exactly unless a newer write of the block may have landed, every other block
//! holds its old value or one written later, and the array keeps working after.

use std::sync::atomic::Ordering;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use zapraid_engine::sim_shards::ShardedSimulator;
use zapraid_engine::{Mode, RaidLevel};

mod common;
#[allow(dead_code)] // this binary uses part of the harness crash.rs drives
#[path = "common/exploration/mod.rs"]
mod exploration;
use common::array::Sharding;
use exploration::*;

/// Interleave unit: writes of up to 5 blocks cross into the next shard about half the time.
const UNIT: u64 = 4;

/// Crash states per shard count and scheme `cargo test` explores (about a minute in all);
/// `ZAPRAID_SHARD_CRASH_STATES` sets more.
const CRASH_STATES: usize = 600;

fn crash_states() -> usize {
    std::env::var("ZAPRAID_SHARD_CRASH_STATES").ok().and_then(|v| v.parse().ok()).unwrap_or(CRASH_STATES)
}

/// Schemes of the sharded exploration: Zone Append and Zone Write, RAID-5 and RAID-6,
/// chunks an append may land in part, hybrid open segments (S times theirs must fit the
/// drives' open zone limit, which `sharded_geometry` scales).
fn shard_schemes() -> Vec<Scheme> {
    let (raid5, raid6) = (RaidLevel::Raid5 { drives: 4 }, RaidLevel::Raid6 { drives: 5 });
    vec![
        Scheme::single(raid5, Mode::ZapRaid { group_size: 4 }),
        Scheme::single(raid6, Mode::ZoneWriteOnly),
        Scheme::with_chunk(raid5, Mode::ZapRaid { group_size: 4 }, 2),
        Scheme::hybrid(raid5, Mode::ZoneAppendOnly, 2, 1),
    ]
}

/// Power cuts within the first steps after a failed drive is replaced: every shard's
/// rebuild of its part is small (its share of the logical blocks), so the cuts of the
/// plain exploration's replacements (up to 150 steps after) mostly come after them.
fn cuts_during_rebuilds(sharding: Sharding, scheme: Scheme, target: usize) -> Outcome {
    let drives = scheme.level.shape().0 + scheme.level.shape().1;
    let mut explored = Outcome::default();
    for i in 0..target / 10 {
        let mut rng = ChaCha8Rng::seed_from_u64(i as u64 ^ 0x5ba4d);
        let replace = DriveFailure { drive: rng.random_range(0..drives), before_write: rng.random_range(40..100) };
        let twists = Twists { replace: Some(replace), ..Twists::default() };
        let cut = rng.random_range(0..40);
        explored += explore_on::<ShardedSimulator>(sharding, scheme, i as u64, 120, cut, twists);
    }
    explored
}

#[test]
fn crash_exploration_over_one_to_four_shards() {
    let target = crash_states();
    let counters = [&CUTS_DURING_REBUILD, &RESUMED_REBUILDS, &CHECKPOINTED_STARTS_DURING_REBUILD];
    for shards in 1..=4 {
        let sharding = Sharding { shards, unit_blocks: UNIT };
        let before: Vec<usize> = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let mut total = Outcome::default();
        for scheme in shard_schemes() {
            let explored = explore_scheme_on::<ShardedSimulator>(sharding, scheme, target);
            let offloaded = explore_offloaded_on::<ShardedSimulator>(sharding, scheme, target);
            eprintln!(
                "crash exploration, {sharding}: {scheme}: {} crash states, {} more with the L2P table offloaded \
                 (checkpoints), 0 violations",
                explored.states, offloaded.states
            );
            assert!(explored.states >= target, "{sharding}: {scheme}: {explored:?}");
            total += explored;
            total += offloaded;
            total += cuts_during_rebuilds(sharding, scheme, target);
        }
        let n: Vec<usize> = counters.iter().zip(&before).map(|(c, b)| c.load(Ordering::Relaxed) - b).collect();
        eprintln!(
            "crash exploration, {sharding}: {} crash states, 0 violations ({} cuts caught work in flight, {} found \
             the drives at rest); {} cuts during a rebuild ({} resumed onto the same drive, {} started from \
             checkpoints); {} cuts during a clean stop; each shard's start offered a checkpoint {} times, used it {} \
             ({} replaying segments written after it, {} with a drive failed, {} taken during a rebuild); {} \
             checkpoints taken while running",
            total.states,
            total.cuts_in_flight,
            total.cuts_at_rest(),
            n[0],
            n[1],
            n[2],
            total.stops_cut,
            total.checkpoints_offered,
            total.checkpoints_used,
            total.checkpoints_replayed,
            total.checkpoints_degraded,
            total.checkpoints_during_rebuild,
            total.checkpoints_running
        );
        // Every twist came: cuts at work and at rest, during rebuilds (resumed both ways),
        // during stops, and starts from checkpoints, also after a crash.
        assert!(total.cuts_in_flight > 0 && total.cuts_at_rest() > 0, "{sharding}: {total:?}");
        assert!(n[0] > n[1] && n[1] > 0, "{sharding}: rebuilds cut {n:?}");
        assert!(total.stops_cut > 0, "{sharding}: {total:?}");
        assert!(total.checkpoints_used > 0 && total.checkpoints_replayed > 0, "{sharding}: {total:?}");
        assert!(total.checkpoints_running > 0, "{sharding}: {total:?}");
    }
}
