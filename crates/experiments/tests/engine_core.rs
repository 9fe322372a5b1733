//! No experiment reports more requests per second than the simulated engine core can
//! handle: each experiment's smallest run (`zapraid bench --quick`'s sizes) against the
//! ceiling `zapraid_engine::cpu_cost` puts on one core, from the same constants. A write
//! of b blocks costs the core at least its request (b blocks) and the completions of its
//! blocks and their parity (b (k + m) / k blocks); a read its request and its blocks'
//! completions. Exp#5's recovery and rebuild report times, not request rates; Exp#10 is
//! the CLI's (`zapraid bench exp10`).

use zapraid_engine::cpu_cost::CpuCosts;
use zapraid_engine::layout::RaidLevel;
use zapraid_experiments::{
    exp1, exp2, exp3, gc, hybrid, l2p, levels, paper_modes, paper_segment_blocks, rebuild_load, scale, Measured,
    PAPER_LEVEL,
};

const SEED: u64 = 1;
const BLOCK_BYTES: f64 = 4096.0;
const MIB: f64 = (1u64 << 20) as f64;

/// The most MiB/s of writes the core allows on `level`: the same for every request size,
/// the costs being per block.
fn write_ceiling_mib_per_s(level: RaidLevel) -> f64 {
    CpuCosts::calibrated(level).max_writes_per_s(1, level.shape()) * BLOCK_BYTES / MIB
}

fn read_ceiling_mib_per_s(level: RaidLevel) -> f64 {
    CpuCosts::calibrated(level).max_reads_per_s(1) * BLOCK_BYTES / MIB
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
    let write_ceiling = write_ceiling_mib_per_s(PAPER_LEVEL);
    for (name, mode) in paper_modes() {
        for chunk in [4096, 8192, 16384] {
            let m = exp1(mode, chunk, REQUESTS, SEED).unwrap();
            check(&mut failures, format!("Exp#1 {name} {chunk} B"), m.mib_per_s, write_ceiling);
        }
    }
    let fill = paper_segment_blocks().unwrap() / 8;
    let read_ceiling = read_ceiling_mib_per_s(PAPER_LEVEL);
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
                    check(&mut failures, cell, m.mib_per_s, write_ceiling_mib_per_s(level));
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
    let ns_per_request = read_share * 1e9 / costs.max_reads_per_s(1)
        + (1.0 - read_share) * 1e9 / costs.max_writes_per_s(1, level.shape());
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
    let ceiling = write_ceiling_mib_per_s(PAPER_LEVEL);
    for (name, mode) in [paper_modes()[0], paper_modes()[1]] {
        for chunk in scale::CHUNKS_BYTES {
            for qd in scale::QUEUE_DEPTHS {
                let m = scale::qd_point(mode, chunk, qd, REQUESTS, SEED).unwrap();
                check(&mut failures, format!("Exp#6 {name} {chunk} B QD {qd}"), m.mib_per_s, ceiling);
            }
            let femu = RaidLevel::Raid5 { drives: scale::FEMU_DRIVES };
            let m = scale::femu_point(mode, chunk, REQUESTS, SEED).unwrap();
            check(&mut failures, format!("Exp#6 FEMU {name} {chunk} B"), m.mib_per_s, write_ceiling_mib_per_s(femu));
        }
    }
    assert_none(failures);
}

#[test]
fn exp7_stays_under_the_engine_core() {
    const REQUESTS: u64 = 50_000;
    let mut failures = Vec::new();
    let ceiling = write_ceiling_mib_per_s(PAPER_LEVEL);
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
    let ceiling = write_ceiling_mib_per_s(PAPER_LEVEL);
    for workload in gc::WORKLOADS {
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
    let mut failures = Vec::new();
    let ceiling = write_ceiling_mib_per_s(PAPER_LEVEL);
    l2p::exp9(LOGICAL_BLOCKS, WARMUP, REQUESTS, SEED, |cell| {
        let Measured { mib_per_s, .. } = cell.measured;
        check(&mut failures, format!("Exp#9 {:?} {}%", cell.workload, cell.budget_percent), mib_per_s, ceiling);
    })
    .unwrap();
    assert_none(failures);
}

/// The ceilings themselves: the measured RAID-5 figure of `zapraid bench cpu` (about a
/// million 4 KiB writes per second), RAID-6 below it.
#[test]
fn the_ceilings_are_the_measured_ones() {
    let raid5 = CpuCosts::calibrated(PAPER_LEVEL).max_writes_per_s(1, PAPER_LEVEL.shape());
    let raid6_level = RaidLevel::Raid6 { drives: 6 };
    let raid6 = CpuCosts::calibrated(raid6_level).max_writes_per_s(1, raid6_level.shape());
    assert!((0.9e6..1.2e6).contains(&raid5), "{raid5}");
    assert!(raid6 < raid5, "{raid6} {raid5}");
}
