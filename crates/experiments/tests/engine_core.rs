//! No experiment reports more requests per second than the simulated engine core can
//! handle: each experiment's smallest run (`zapraid bench --quick`'s sizes) against the
//! ceiling `zapraid_engine::cpu_cost` puts on one core, from the same constants
//! (`CpuCosts::max_writes_per_s`, `max_reads_per_s`), for the cell's request and chunk
//! sizes (the largest of them where a cell mixes sizes: the ceiling in MiB/s only rises
//! with them). Exp#5's recovery and rebuild report times, not request rates; Exp#10 is the
//! CLI's (`zapraid bench exp10`, checked in `cli/src/bench/traces.rs`).
//!
//! With the costs split into fixed parts and parts per block, the ceilings (2.0 M 4 KiB
//! writes/s on RAID-5, about 10 GiB/s of 16 KiB writes on 16 KiB chunks) are above what
//! the emulated drives do in every experiment: with a zero-cost core these tests would pass
//! too (by arithmetic against the figures before the core was charged: the highest,
//! Exp#7's 5,409 MiB/s of 16 KiB writes, is under that cell's ceiling of about 10,000).
//! They guard against a simulator that lets the engine do more than its measured core
//! can, not against an old main that did.

use zapraid_engine::cpu_cost::CpuCosts;
use zapraid_engine::layout::RaidLevel;
use zapraid_experiments::{
    exp1, exp2, exp3, gc, hybrid, l2p, levels, paper_modes, paper_segment_blocks, rebuild_load, scale, Measured,
    PAPER_LEVEL,
};

const SEED: u64 = 1;
const BLOCK_BYTES: u64 = 4096;
const MIB: f64 = (1u64 << 20) as f64;

/// The most MiB/s of writes of `request_bytes` on chunks of `chunk_bytes` the core allows
/// on `level`.
fn write_ceiling_mib_per_s(level: RaidLevel, request_bytes: u64, chunk_bytes: u64) -> f64 {
    let (blocks, chunk_blocks) = (request_bytes / BLOCK_BYTES, chunk_bytes / BLOCK_BYTES);
    CpuCosts::calibrated(level).max_writes_per_s(blocks, chunk_blocks, level.shape()) * request_bytes as f64 / MIB
}

/// As `write_ceiling_mib_per_s`, of reads.
fn read_ceiling_mib_per_s(level: RaidLevel, request_bytes: u64, chunk_bytes: u64) -> f64 {
    let (blocks, chunk_blocks) = (request_bytes / BLOCK_BYTES, chunk_bytes / BLOCK_BYTES);
    CpuCosts::calibrated(level).max_reads_per_s(blocks, chunk_blocks) * request_bytes as f64 / MIB
}

/// Checks a figure against its ceiling; a failure names the cell.
fn check(failures: &mut Vec<String>, cell: String, mib_per_s: f64, ceiling_mib_per_s: f64) {
    if mib_per_s > ceiling_mib_per_s {
        failures.push(format!("{cell}: {mib_per_s:.1} MiB/s, over the engine core's {ceiling_mib_per_s:.1}"));
    }
}

fn assert_none(failures: Vec<String>) {
    assert!(failures.is_empty(), "over what one simulated engine core can do:\n{}", failures.join("\n"));
}

#[test]
fn exp1_to_exp3_stay_under_the_engine_core() {
    const REQUESTS: u64 = 20_000;
    const READS: u64 = 500;
    let mut failures = Vec::new();
    for (name, mode) in paper_modes() {
        for chunk in [4096, 8192, 16384] {
            let m = exp1(mode, chunk, REQUESTS, SEED).unwrap();
            let ceiling = write_ceiling_mib_per_s(PAPER_LEVEL, chunk, chunk);
            check(&mut failures, format!("Exp#1 {name} {chunk} B"), m.mib_per_s, ceiling);
        }
    }
    let fill = paper_segment_blocks().unwrap() / 8;
    let read_ceiling = read_ceiling_mib_per_s(PAPER_LEVEL, BLOCK_BYTES, BLOCK_BYTES);
    let write_ceiling = write_ceiling_mib_per_s(PAPER_LEVEL, BLOCK_BYTES, BLOCK_BYTES);
    for (name, mode) in paper_modes() {
        let (normal, degraded) = exp2(mode, fill, READS, SEED).unwrap();
        check(&mut failures, format!("Exp#2 {name} normal"), normal.mib_per_s, read_ceiling);
        check(&mut failures, format!("Exp#2 {name} degraded"), degraded.mib_per_s, read_ceiling);
    }
    for g in [4u32, 256, 4096] {
        let (writes, _) = exp3(g, REQUESTS / 2, fill, READS / 2, SEED).unwrap();
        check(&mut failures, format!("Exp#3 G = {g}"), writes.mib_per_s, write_ceiling);
    }
    assert_none(failures);
}

#[test]
fn exp4_stays_under_the_engine_core() {
    const REQUESTS: u64 = 8_000;
    let mut failures = Vec::new();
    for level in levels::levels() {
        for (name, mode) in levels::modes() {
            for chunk in levels::CHUNKS_BYTES {
                if let levels::Cell::Measured(m) = levels::exp4_cell(level, mode, chunk, REQUESTS, SEED).unwrap() {
                    let cell = format!("Exp#4 {level} {name} {chunk} B");
                    check(&mut failures, cell, m.mib_per_s, write_ceiling_mib_per_s(level, chunk, chunk));
                }
            }
        }
    }
    assert_none(failures);
}

#[test]
fn rebuild_under_load_stays_under_the_engine_core() {
    const SEGMENTS: u64 = 1;
    let level = PAPER_LEVEL;
    let costs = CpuCosts::calibrated(level);
    // 70% reads, 30% writes of one block: the time of each kind, weighted.
    let read_share = rebuild_load::USER_READ_PERCENT as f64 / 100.0;
    let chunk_blocks = rebuild_load::LOAD_CHUNK_BYTES / BLOCK_BYTES;
    let ns_per_request = read_share * 1e9 / costs.max_reads_per_s(1, chunk_blocks)
        + (1.0 - read_share) * 1e9 / costs.max_writes_per_s(1, chunk_blocks, level.shape());
    let ceiling_iops = 1e9 / ns_per_request;
    let mut failures = Vec::new();
    for case in rebuild_load::Case::all() {
        let point = rebuild_load::load_point(case, SEGMENTS, SEED, |_| {}).unwrap();
        if point.user_iops > ceiling_iops {
            failures.push(format!(
                "rebuild under load, {}: {:.0} IOPS over {ceiling_iops:.0}",
                case.label(),
                point.user_iops
            ));
        }
    }
    assert_none(failures);
}

#[test]
fn exp6_stays_under_the_engine_core() {
    const REQUESTS: u64 = 5_000;
    let mut failures = Vec::new();
    for (name, mode) in [paper_modes()[0], paper_modes()[1]] {
        for chunk in scale::CHUNKS_BYTES {
            let ceiling = write_ceiling_mib_per_s(PAPER_LEVEL, chunk, chunk);
            for qd in scale::QUEUE_DEPTHS {
                let m = scale::qd_point(mode, chunk, qd, REQUESTS, SEED).unwrap();
                check(&mut failures, format!("Exp#6 {name} {chunk} B QD {qd}"), m.mib_per_s, ceiling);
            }
            let femu = RaidLevel::Raid5 { drives: scale::FEMU_DRIVES };
            let m = scale::femu_point(mode, chunk, REQUESTS, SEED).unwrap();
            let ceiling = write_ceiling_mib_per_s(femu, chunk, chunk);
            check(&mut failures, format!("Exp#6 FEMU {name} {chunk} B"), m.mib_per_s, ceiling);
        }
    }
    assert_none(failures);
}

#[test]
fn exp7_stays_under_the_engine_core() {
    const REQUESTS: u64 = 50_000;
    /// The largest writes, 16 KiB, on the large chunks.
    const LARGEST_REQUEST_BYTES: u64 = 16384;
    let mut failures = Vec::new();
    let ceiling = write_ceiling_mib_per_s(PAPER_LEVEL, LARGEST_REQUEST_BYTES, hybrid::LARGE_CHUNK_BYTES);
    hybrid::exp7(REQUESTS, SEED, |row| {
        for (name, m) in &row.schemes {
            let cell = format!("Exp#7 {} Ns = {} Nl = {} {name}", row.workload.name, row.small, row.large);
            check(&mut failures, cell, m.mib_per_s, ceiling);
        }
    })
    .unwrap();
    assert_none(failures);
}

#[test]
fn exp8_stays_under_the_engine_core() {
    let mut failures = Vec::new();
    for workload in gc::WORKLOADS {
        let ceiling = write_ceiling_mib_per_s(PAPER_LEVEL, workload.request_bytes, gc::CHUNK_BYTES);
        for reserved in gc::RESERVED_PERCENTS {
            let point = gc::gc_point(workload, reserved, gc::QUICK_SCALE, SEED).unwrap();
            check(&mut failures, format!("Exp#8 {workload:?} {reserved}% reserved"), point.mib_per_s, ceiling);
        }
    }
    assert_none(failures);
}

#[test]
fn exp9_stays_under_the_engine_core() {
    const LOGICAL_BLOCKS: u64 = 1 << 16;
    const WARMUP: u64 = 1_500;
    const REQUESTS: u64 = 3_000;
    /// The largest writes, 64 KiB, on the large chunks.
    const LARGEST_REQUEST_BYTES: u64 = 65536;
    let mut failures = Vec::new();
    let ceiling = write_ceiling_mib_per_s(PAPER_LEVEL, LARGEST_REQUEST_BYTES, hybrid::LARGE_CHUNK_BYTES);
    l2p::exp9(LOGICAL_BLOCKS, WARMUP, REQUESTS, SEED, |cell| {
        let Measured { mib_per_s, .. } = cell.measured;
        check(&mut failures, format!("Exp#9 {:?} {}%", cell.workload, cell.budget_percent), mib_per_s, ceiling);
    })
    .unwrap();
    assert_none(failures);
}

/// The ceilings themselves: the measured RAID-5 figure of `zapraid bench cpu` (its three
/// runs gave 1.0-2.1 M engine-only 4 KiB writes/s), RAID-6 below it, and larger chunks
/// raising the ceiling of 4 KiB writes (their fixed completion cost is shared).
#[test]
fn the_ceilings_are_the_measured_ones() {
    let raid5 = CpuCosts::calibrated(PAPER_LEVEL).max_writes_per_s(1, 1, PAPER_LEVEL.shape());
    let raid6_level = RaidLevel::Raid6 { drives: 6 };
    let raid6 = CpuCosts::calibrated(raid6_level).max_writes_per_s(1, 1, raid6_level.shape());
    assert!((1.0e6..2.1e6).contains(&raid5), "{raid5}");
    assert!(raid6 < raid5, "{raid6} {raid5}");
    let large_chunks = CpuCosts::calibrated(PAPER_LEVEL).max_writes_per_s(1, 4, PAPER_LEVEL.shape());
    assert!(large_chunks > raid5, "{large_chunks} {raid5}");
}
