//! The engine against a reference model (a map from LBA to block contents): random writes
//! and reads of random sizes and LBAs, flushes, discards, random drive failures up to m,
//! clean restarts and power cuts (each followed by a start), for every RAID scheme and all
//! three write modes, with a seeded landing order of concurrent appends. Every read must
//! match the model. The hostile property adds damage beyond parity and failures beyond m
//! (reads of what is lost must fail, never return wrong data), as does
//! `more_than_m_failures_give_errors_not_wrong_data`. Seeds are printed on failure and
//! reproduce the run.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use proptest::prelude::*;
use zapraid_engine::{Mode, OpenSegments, RaidLevel, Request, SegmentPlan, Simulator};

mod common;
use common::BLOCK;
#[path = "common/reference/mod.rs"]
mod reference;
use reference::declustered::{self, shapes as declustered_shapes};
use reference::*;

/// Zones beyond the reserve (`SegmentPlan::reserved_segments`) in hybrid runs that fill the
/// array many times over.
const FEW_ZONES_BEYOND_RESERVE: u32 = 2;

fn levels() -> Vec<RaidLevel> {
    vec![
        RaidLevel::Raid0 { drives: 3 },
        RaidLevel::Raid1 { drives: 3 },
        RaidLevel::Raid01 { drives: 4 },
        RaidLevel::Raid4 { drives: 4 },
        RaidLevel::Raid5 { drives: 4 },
        RaidLevel::Raid6 { drives: 5 },
        RaidLevel::Erasure { k: 3, m: 3 },
    ]
}

fn modes() -> Vec<Mode> {
    vec![Mode::ZapRaid { group_size: 4 }, Mode::ZoneWriteOnly, Mode::ZoneAppendOnly, Mode::ZapRaid { group_size: 1 }]
}

/// An array of one open segment and a workload for it.
#[derive(Debug)]
struct Case {
    level: RaidLevel,
    mode: Mode,
    chunk_blocks: u64,
    ops: Vec<Op>,
    seed: u64,
    zones: u32,
}

prop_compose! {
    /// What the plain and the offloaded-table properties draw alike.
    fn single_segment_case()(
        level in proptest::sample::select(levels()),
        mode in proptest::sample::select(modes()),
        chunk_blocks in 1..=2u64,
        ops in proptest::collection::vec(op(), 1..60),
        seed in any::<u64>(),
        zones in proptest::sample::select(vec![FEW_ZONES, 24]),
    ) -> Case {
        Case { level, mode, chunk_blocks, ops, seed, zones }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn engine_matches_reference_model(case in single_segment_case()) {
        let Case { level, mode, chunk_blocks, ops, seed, zones } = case;
        run_on(common::geometry(zones, 6, 8), level, mode, chunk_blocks, OpenSegments::SINGLE, &ops, seed)?;
    }

    /// Hybrid open segments: small chunks of one block, large of two (writes of more than
    /// one block), several of each, on drives that allow them (6 open, 8 active zones).
    #[test]
    fn hybrid_engine_matches_reference_model(
        level in proptest::sample::select(levels()),
        mode in proptest::sample::select(modes()),
        (small, large) in proptest::sample::select(vec![(2u32, 0u32), (1, 1), (2, 1), (0, 2), (1, 2)]),
        ops in proptest::collection::vec(op(), 1..60),
        seed in any::<u64>(),
        extra_zones in proptest::sample::select(vec![FEW_ZONES_BEYOND_RESERVE, 16]),
    ) {
        let open = OpenSegments { small, large, large_chunk_bytes: 2 * BLOCK as u64 };
        let geometry = common::geometry(24, 6, 8);
        let plan = SegmentPlan::new(&geometry, level, mode, BLOCK as u64, open).unwrap();
        let zones = plan.reserved_segments() + extra_zones;
        run_on(common::geometry(zones, 6, 8), level, mode, 1, open, &ops, seed)?;
    }

    /// The same with the L2P table offloaded: pages of a few entries, a budget of one to
    /// three pages, so requests wait for page reads and dirty pages are written back and
    /// moved by garbage collection all the time.
    #[test]
    fn engine_with_a_tiny_l2p_budget_matches_reference_model(
        case in single_segment_case(),
        page_entries in proptest::sample::select(vec![4u64, 8, 32]),
        budget_pages in 1..=3u64,
    ) {
        let Case { level, mode, chunk_blocks, ops, seed, zones } = case;
        let l2p = Some(SmallL2p { page_entries, budget_pages });
        let geometry = common::geometry(zones, 6, 8);
        let setup = Setup { geometry, level, mode, chunk_blocks, open: OpenSegments::SINGLE, l2p, hostile: false, declustering: Default::default() };
        let status = run_with_l2p(setup, &ops, seed)?;
        prop_assert!(status.l2p.cached_pages <= budget_pages as usize || status.l2p.pinned_over_budget);
    }
}

/// Declustered arrays against the reference model: the plain property's operations over
/// arrays wider than their stripes, drive failures among all their drives (up to m),
/// rebuilds into distributed spare space, replacements, and grows by 1 to 5 drives while
/// writes are in flight (refused during a rebuild and past the placements the engine
/// records), across clean restarts and power cuts, each start given the array's config as
/// grown (`reference::declustered::property`: `declustered::CASES` cases, or
/// `PROPTEST_CASES`). Prints how many grows there were; some of each kind must come.
#[test]
fn declustered_engine_matches_reference_model() {
    declustered::property(modes(), file!());
}

/// A grow during a rebuild into spare space is refused and changes nothing; once the
/// rebuild is done the array grows (twice), with the drive still in spare space, and
/// starts with the grown config after a power cut and a clean stop: every shape and mode
/// (in most, the failed drive held lanes to rebuild when the grow came).
#[test]
fn a_grow_during_a_rebuild_is_refused_and_one_after_it_grows() {
    let mut refused = 0;
    for (level, drives) in declustered_shapes() {
        for mode in modes() {
            refused += usize::from(declustered::grows_around_a_rebuild(level, drives, mode));
        }
    }
    eprintln!("{refused} grows refused during a rebuild");
    assert!(refused >= declustered_shapes().len(), "only {refused} grows came during a rebuild");
}

proptest! {
    // Half the 128 it had before grows came: with them a case takes about twice as long.
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// The same with the L2P table offloaded (pages of a few entries, a budget of one to
    /// three pages): mapping blocks written, read back and moved through the lanes as they
    /// stand, with drives rebuilt into spare space and replaced, and grows.
    #[test]
    fn declustered_engine_with_a_tiny_l2p_budget_matches_reference_model(
        (level, drives) in proptest::sample::select(declustered_shapes()),
        mode in proptest::sample::select(modes()),
        ops in proptest::collection::vec(declustered_op(), 1..60),
        seed in any::<u64>(),
        page_entries in proptest::sample::select(vec![4u64, 8, 32]),
        budget_pages in 1..=3u64,
    ) {
        let geometry = common::geometry(12, 6, 8);
        let declustering = zapraid_engine::Declustering::wide(drives, 1);
        let l2p = Some(SmallL2p { page_entries, budget_pages });
        let setup = Setup { geometry, level, mode, chunk_blocks: 1, open: OpenSegments::SINGLE, l2p, hostile: false, declustering };
        let status = run_with_l2p(setup, &ops, seed)?;
        prop_assert!(status.l2p.cached_pages <= budget_pages as usize || status.l2p.pinned_over_budget);
    }
}

/// Faults beyond what parity covers at random steps, with the background work running on
/// across operations (garbage collection on few zones, rebuilds paced or not, scrubs):
/// rows damaged on m+1 drives, drive failures beyond tolerance (also while a rebuild
/// runs), replaced drives, scrubs, among the writes, reads, flushes, discards, failures,
/// clean restarts and crashes (starts replaying the log). Every request is answered within
/// a bounded number of steps, every stop and scrub ends, reads return the model's data or
/// (only for LBAs that may be lost) an error, writes within tolerance succeed and heal;
/// at the end, within tolerance, the LBAs whose reads fail are exactly those counted lost,
/// also after a clean stop and start and after a crash and start (`reference::faults`).
/// Prints the counts.
#[test]
fn engine_with_faults_beyond_parity_matches_reference_model() {
    use faults::*;
    let counters = [&CASES, &DAMAGE_OPS, &BLOCKS_LOST, &RUNS_BEYOND_TOLERANCE, &SCRUBS_ENDED, &REBUILDS_STARTED];
    let more = [&FAILURES_DURING_REBUILD, &EXACT_COUNTS];
    let before: Vec<usize> = counters.iter().chain(&more).map(|c| c.load(Ordering::Relaxed)).collect();
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(HOSTILE_CASES);
    let config = ProptestConfig { cases, source_file: Some(file!()), ..ProptestConfig::default() };
    let strategy = (
        proptest::sample::select(levels()),
        proptest::sample::select(modes()),
        1..=2u64,
        proptest::collection::vec(hostile_op(true), 1..80),
        any::<u64>(),
        proptest::sample::select(vec![FEW_ZONES, 24]),
    );
    let result = proptest::test_runner::TestRunner::new(config).run(
        &strategy,
        |(level, mode, chunk_blocks, ops, seed, zones)| {
            let geometry = common::geometry(zones, 6, 8);
            let setup = Setup {
                geometry,
                level,
                mode,
                chunk_blocks,
                open: OpenSegments::SINGLE,
                l2p: None,
                hostile: true,
                declustering: Default::default(),
            };
            run_with_l2p(setup, &ops, seed).map(|_| ())
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    let after: Vec<usize> = counters.iter().chain(&more).map(|c| c.load(Ordering::Relaxed)).collect();
    let n: Vec<usize> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    eprintln!(
        "faults beyond parity: {} cases, {} damage ops, {} blocks lost (counted exactly in {} runs), {} runs beyond \
         tolerance, {} scrubs ended, {} rebuilds started, {} failures during a rebuild; {} crashes left out (a \
         damaged block in an open segment)",
        n[0],
        n[1],
        n[2],
        n[7],
        n[3],
        n[4],
        n[5],
        n[6],
        CRASHES_LEFT_OUT.load(Ordering::Relaxed)
    );
    assert!(n[1] > 0 && n[2] > 0 && n[3] > 0 && n[4] > 0 && n[6] > 0, "a kind of fault never came: {n:?}");
}

/// Cases of the hostile property (each runs up to 80 operations and the end checks);
/// `PROPTEST_CASES` sets another count.
const HOSTILE_CASES: u32 = 512;

/// Garbage collection with the L2P table offloaded to a budget of two pages of eight
/// entries, every scheme and mode: mapping blocks are written back, read again and moved
/// with the segments they are in; every block reads back. Prints the mapping traffic.
#[test]
fn garbage_collection_with_a_tiny_l2p_budget_keeps_every_block() {
    for level in levels() {
        for mode in modes() {
            let geometry = common::geometry(FEW_ZONES, 6, 8);
            let failure = (level.tolerated_failures() > 0).then_some(1);
            let ops = overwrite_workload(600, failure);
            let l2p = Some(SmallL2p { page_entries: 8, budget_pages: 2 });
            let setup = Setup::one_block_chunks(geometry, level, mode, l2p);
            let status = run_with_l2p(setup, &ops, 9).unwrap();
            assert!(status.segments_reclaimed > 0, "{level:?} {mode:?}: nothing reclaimed: {status:?}");
            assert!(status.l2p.mapping_reads > 0 && status.l2p.mapping_writes > 0, "{level:?} {mode:?}: {status:?}");
            eprintln!(
                "{level:?} {mode:?}: {} segments reclaimed, {} blocks moved; L2P: {} mapping reads, {} writes, \
                 hit rate {:.1}%",
                status.segments_reclaimed,
                status.blocks_relocated,
                status.l2p.mapping_reads,
                status.l2p.mapping_writes,
                status.l2p.hit_rate_percent()
            );
        }
    }
}

/// Crashes after a start from a checkpoint, with the L2P table offloaded to two pages of
/// eight entries, every level and mode: a clean stop leaves a checkpoint, writes and
/// discards follow (few zones: garbage collection reclaims segments, the checkpoint's
/// among them, which makes it stale), the power is cut, and the start replays only the
/// segments written after the checkpoint while every one it names is there (else all of
/// them); a crash again after more writes. Every block reads back (discards since the
/// checkpoint may come back: they are not in the log). Prints how many starts replayed
/// only what came after a checkpoint.
#[test]
fn crashes_after_a_start_from_a_checkpoint_keep_every_block() {
    let before = CRASH_STARTS_REPLAYING.load(Ordering::Relaxed);
    let running_before = RUNNING_CHECKPOINTS.load(Ordering::Relaxed);
    for level in levels() {
        for mode in modes() {
            let mut ops = overwrite_workload(40, None);
            ops.push(Op::Restart);
            for round in 0..3u64 {
                let mut more = overwrite_workload(10 + 60 * round, None);
                more.push(Op::Discard { lba: 8 * round, blocks: 3 });
                more.push(Op::Crash);
                ops.extend(more);
            }
            let geometry = common::geometry(FEW_ZONES + 2, 6, 8);
            let l2p = Some(SmallL2p { page_entries: 8, budget_pages: 2 });
            let setup = Setup::one_block_chunks(geometry, level, mode, l2p);
            run_with_l2p(setup, &ops, 3).unwrap();
        }
    }
    let replaying = CRASH_STARTS_REPLAYING.load(Ordering::Relaxed) - before;
    let running = RUNNING_CHECKPOINTS.load(Ordering::Relaxed) - running_before;
    eprintln!(
        "{replaying} starts after a crash began from a checkpoint and replayed only what came after it; \
         {running} checkpoints taken while running"
    );
    assert!(replaying > 0);
    assert!(running > 0, "no checkpoint was taken while running");
}

/// `writes` writes of 1 to 5 blocks spread over the logical space, reads and settles along
/// the way, and `failed_drive` failing halfway.
fn overwrite_workload(writes: u64, failed_drive: Option<usize>) -> Vec<Op> {
    let mut ops = Vec::new();
    for i in 0..writes {
        let blocks = 1 + i % 5;
        ops.push(Op::Write { lba: (i * 37) % (LOGICAL_BLOCKS - blocks), blocks, fill: i as u8 });
        if i % 50 == 49 {
            ops.push(Op::Read { lba: (i * 11) % (LOGICAL_BLOCKS - 6), blocks: 6 });
        }
        if i % 13 == 0 {
            ops.push(Op::Settle);
        }
        if let Some(drive) = failed_drive.filter(|_| i == writes / 2) {
            ops.push(Op::FailDrive { drive });
        }
    }
    ops
}

/// Many times the array's capacity written over a small logical space, with reads and
/// drive failures up to m along the way: garbage collection reclaims segments (moving
/// their live blocks) and every read still matches the model.
#[test]
fn garbage_collection_keeps_every_block_while_reclaiming_segments() {
    for level in levels() {
        for mode in modes() {
            let geometry = common::geometry(FEW_ZONES, 6, 8);
            let failure = (level.tolerated_failures() > 0).then_some(1);
            let ops = overwrite_workload(600, failure);
            let status = run_on(geometry, level, mode, 1, OpenSegments::SINGLE, &ops, 9).unwrap();
            assert!(status.segments_reclaimed > 0, "{level:?} {mode:?}: nothing reclaimed: {status:?}");
            eprintln!(
                "{level:?} {mode:?}: {} segments reclaimed, {} live blocks moved",
                status.segments_reclaimed, status.blocks_relocated
            );
        }
    }
}

/// The same with hybrid open segments (small chunks of one block, large of two): garbage
/// collection rewrites into large-chunk segments (small ones without any) and reclaims
/// segments of both sizes.
#[test]
fn garbage_collection_with_hybrid_segments_keeps_every_block() {
    for (small, large) in [(2, 1), (1, 2), (3, 0), (0, 2)] {
        for mode in modes() {
            let level = RaidLevel::Raid5 { drives: 4 };
            let open = OpenSegments { small, large, large_chunk_bytes: 2 * BLOCK as u64 };
            let plan = SegmentPlan::new(&geometry(), level, mode, BLOCK as u64, open).unwrap();
            let geometry = common::geometry(plan.reserved_segments() + FEW_ZONES_BEYOND_RESERVE, 6, 8);
            let ops = overwrite_workload(800, Some(2));
            let status = run_on(geometry, level, mode, 1, open, &ops, 9).unwrap();
            assert!(status.segments_reclaimed > 0, "Ns={small} Nl={large} {mode}: nothing reclaimed: {status:?}");
        }
    }
}

#[test]
fn every_scheme_and_mode_round_trips_with_m_failures() {
    for level in levels() {
        for mode in modes() {
            let m = level.tolerated_failures();
            let mut ops: Vec<Op> = (0..30).map(|i| Op::Write { lba: (i * 7) % 90, blocks: 3, fill: i as u8 }).collect();
            ops.push(Op::Settle);
            ops.extend((0..m).map(|d| Op::FailDrive { drive: d * 2 + 1 }));
            ops.extend((0..10).map(|i| Op::Read { lba: i * 9, blocks: 6 }));
            run(level, mode, 1, &ops, 42).unwrap();
        }
    }
}

/// A declustered array's drive rebuilt into spare space, then replaced while writes go on
/// (its segments move back: the rebalance), then a crash and a clean restart, against the
/// model: every level's shape, every mode. At the end no drive is failed or in spare space.
#[test]
fn a_declustered_drive_in_spare_space_replaced_matches_the_model() {
    for (level, drives) in declustered_shapes() {
        for mode in modes() {
            let mut ops: Vec<Op> = (0..40).map(|i| Op::Write { lba: (i * 7) % 90, blocks: 3, fill: i as u8 }).collect();
            ops.extend([Op::Settle, Op::FailDrive { drive: 2 }, Op::IntoSpares { drive: 0 }, Op::Settle]);
            ops.extend((40..60).map(|i| Op::Write { lba: (i * 5) % 90, blocks: 2, fill: i as u8 }));
            ops.extend([Op::Settle, Op::Replace { drive: 0, paced: false }]);
            ops.extend((60..90).map(|i| Op::Write { lba: (i * 11) % 90, blocks: 3, fill: i as u8 }));
            ops.extend([Op::Crash, Op::Read { lba: 0, blocks: 90 }, Op::Restart, Op::Read { lba: 0, blocks: 90 }]);
            let geometry = common::geometry(12, 6, 8);
            let declustering = zapraid_engine::Declustering::wide(drives, 1);
            let setup = Setup {
                geometry,
                level,
                mode,
                chunk_blocks: 1,
                open: OpenSegments::SINGLE,
                l2p: None,
                hostile: false,
                declustering,
            };
            let status = run_with_l2p(setup, &ops, 7).unwrap_or_else(|e| panic!("{level} over {drives}, {mode}: {e}"));
            if level.tolerated_failures() == 0 {
                continue; // a failure of RAID-0 loses data: nothing to rebuild or replace
            }
            let spread = status.declustered.clone().expect("declustered");
            assert!(
                status.failed_drives.is_empty() && spread.drives_in_spare_space.is_empty(),
                "{level} over {drives}, {mode}: the drive in spare space was not replaced: {status:?}"
            );
        }
    }
}

/// Without an offloaded table too, `Restart` and `Crash` stop (or cut power to) the array
/// and start it again from its drives, replaying the log: what was written reads back,
/// with a drive failed as well.
#[test]
fn restarts_and_crashes_start_again_from_the_drives() {
    let ops = [
        Op::Write { lba: 0, blocks: 6, fill: 1 },
        Op::Restart,
        Op::Read { lba: 0, blocks: 6 },
        Op::Write { lba: 3, blocks: 6, fill: 2 },
        Op::Crash,
        Op::Read { lba: 0, blocks: 9 },
        Op::FailDrive { drive: 1 },
        Op::Write { lba: 20, blocks: 4, fill: 3 },
        Op::Restart,
        Op::Read { lba: 0, blocks: 24 },
        Op::Crash,
    ];
    for level in levels() {
        for mode in modes() {
            let before = STARTS.get();
            run(level, mode, 1, &ops, 7).unwrap_or_else(|e| panic!("{level:?} {mode:?}: {e}"));
            assert_eq!(STARTS.get() - before, 4, "{level:?} {mode:?}: every restart and crash starts the array again");
        }
    }
}

/// More failures than the code tolerates: reads of blocks on the failed drives fail (never
/// wrong data), blocks on the working drives read back exactly.
#[test]
fn more_than_m_failures_give_errors_not_wrong_data() {
    for level in [RaidLevel::Raid5 { drives: 4 }, RaidLevel::Raid6 { drives: 5 }] {
        for mode in modes() {
            let mut sim = Simulator::new(geometry(), config(level, mode, 1, OpenSegments::SINGLE), 1, None).unwrap();
            let data: Vec<u8> = (0..48).flat_map(|l| block_bytes(l, 9)).collect();
            sim.submit(0, Request::Write { lba: 0, data: data.clone() });
            sim.run_until_idle();
            let (_, m) = level.shape();
            for d in 0..=m {
                sim.drives[d].fail();
            }
            // Block by block: one whose chunk is on a failed drive has lost m + 1 chunks of
            // its stripe, and must fail; one on a working drive reads back exactly.
            let mut errors = 0;
            for lba in 0..48u64 {
                let on_failed = sim.engine.locate(lba).expect("written").drive <= m;
                let id = 1 + lba;
                sim.submit(id, Request::Read { lba, blocks: 1 });
                match sim.run_until_response(id).expect("answered").result {
                    Err(_) => {
                        assert!(on_failed, "{level:?} {mode:?}: LBA {lba} on a working drive failed to read");
                        errors += 1;
                    }
                    Ok(got) => {
                        assert!(!on_failed, "{level:?} {mode:?}: LBA {lba} read back with {} drives failed", m + 1);
                        assert_eq!(got, block_bytes(lba, 9), "{level:?} {mode:?}: wrong data for LBA {lba}");
                    }
                }
            }
            assert!(errors > 0, "{level:?} {mode:?}: no block was on the failed drives");
        }
    }
}

/// Enough writes to fill several segments: every segment but the open one is sealed with
/// a footer that records every data block, its zones are finished, and every block still
/// reads back, also with a failed drive.
#[test]
fn full_segments_are_sealed_with_footers() {
    use zapraid_engine::format::{decode_footer_block, footer_entries_per_block, NO_LBA};
    use zapraid_zns::{execute, Command, ZoneState};
    for mode in modes() {
        let mut sim =
            Simulator::new(geometry(), config(RaidLevel::Raid5 { drives: 4 }, mode, 1, OpenSegments::SINGLE), 3, None)
                .unwrap();
        let layout = *sim.engine.layout();
        let mut model: HashMap<u64, Vec<u8>> = HashMap::new();
        let rounds = 3 * layout.data_blocks_per_segment() / LOGICAL_BLOCKS + 1;
        for round in 0..rounds {
            let data: Vec<u8> = (0..LOGICAL_BLOCKS).flat_map(|l| block_bytes(l, round as u8)).collect();
            (0..LOGICAL_BLOCKS).for_each(|l| {
                model.insert(l, block_bytes(l, round as u8));
            });
            sim.submit(round, Request::Write { lba: 0, data });
            for r in sim.run_until_idle() {
                assert!(r.result.is_ok(), "{mode:?}: write failed: {:?}", r.result);
            }
        }
        // Zone 0 held the first segment: sealed, finished, footer readable and complete.
        let g = geometry();
        let zones = sim.drives[0].zones();
        assert_eq!(zones[0].state, ZoneState::Full, "{mode:?}: first segment's zone not finished");
        let per_block = footer_entries_per_block(g.block_size_bytes) as u64;
        let mut data_entries = 0;
        for b in 0..layout.footer_blocks {
            let lba = layout.footer_start_blocks() + b;
            let c = execute(&mut sim.drives[0], Command::Read { lba, data: vec![0; BLOCK], metadata: vec![] });
            c.result.unwrap();
            let (header, entries) = decode_footer_block(&c.data).unwrap();
            assert_eq!(u64::from(header.first_block.get()), b * per_block);
            data_entries += entries.iter().filter(|e| e.lba.get() != NO_LBA).count();
        }
        // Drive 0 holds a data chunk of 3 of every 4 stripes (RAID-5 rotation).
        assert!(
            data_entries as u64 >= layout.stripes * 3 / 4 - 1,
            "{mode:?}: footer records {data_entries} data blocks"
        );
        sim.drives[2].fail();
        sim.submit(1000, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
        let data = sim.run_until_response(1000).unwrap().result.unwrap();
        for lba in 0..LOGICAL_BLOCKS {
            assert_eq!(&data[lba as usize * BLOCK..][..BLOCK], model[&lba].as_slice(), "{mode:?} LBA {lba}");
        }
    }
}

/// A block whose data was silently corrupted on the drive fails its checksum and is
/// rebuilt from its stripe.
#[test]
fn corrupted_blocks_are_rebuilt() {
    for mode in modes() {
        let mut sim =
            Simulator::new(geometry(), config(RaidLevel::Raid6 { drives: 5 }, mode, 2, OpenSegments::SINGLE), 5, None)
                .unwrap();
        let data: Vec<u8> = (0..LOGICAL_BLOCKS).flat_map(|l| block_bytes(l, 3)).collect();
        sim.submit(0, Request::Write { lba: 0, data: data.clone() });
        sim.run_until_idle();
        // Flip a bit in every written block of drive 1.
        let g = geometry();
        for lba in 0..g.zone_capacity_blocks {
            sim.drives[1].corrupt_block(lba, 100).unwrap();
        }
        sim.submit(1, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
        let got = sim.run_until_response(1).unwrap().result.unwrap();
        assert!(got == data, "{mode:?}: corrupted blocks were not rebuilt");
    }
}

/// Under ZapRAID, small stripes go to an idle Zone Write segment before the Zone Append
/// one (the paper's hybrid rule): with many small writes at once, both kinds hold data.
#[test]
fn small_stripes_use_the_zone_write_segments_too() {
    let level = RaidLevel::Raid5 { drives: 4 };
    let open = OpenSegments { small: 3, large: 0, large_chunk_bytes: 0 };
    // Groups larger than the writes' stripes: the Zone Append segment alone could take
    // them all at once.
    let config = config(level, Mode::ZapRaid { group_size: 64 }, 1, open);
    let mut sim = Simulator::new(geometry(), config, 1, None).unwrap();
    for lba in 0..LOGICAL_BLOCKS {
        sim.submit(lba, Request::Write { lba, data: block_bytes(lba, 1) });
    }
    sim.run_until_idle();
    let (mut appended, mut written) = (0, 0);
    for lba in 0..LOGICAL_BLOCKS {
        let at = sim.engine.locate(lba).expect("written");
        match sim.engine.segment_layout(at.zone).expect("a segment").uses_append() {
            true => appended += 1,
            false => written += 1,
        }
    }
    assert!(appended > 0 && written > 0, "{appended} blocks appended, {written} written with Zone Write");
}
