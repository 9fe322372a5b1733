//! `zapraid bench cpu`: the engine's own CPU cost, one core, over instant drives (see
//! `zapraid_experiments::cpu`): 4 KiB random writes, reads and degraded reads per
//! second for (3+1)-RAID-5 and (4+2)-RAID-6 at G = 256, with heap allocations per
//! request counted by the binary's allocator (`alloc_count`) beside them; then the
//! engine's time split into per-event costs, each a fixed part and a part per block, from
//! more runs of larger requests and chunks: the calibration of the simulator's engine core
//! (`zapraid_engine::cpu_cost`), beside the costs the simulator uses.

use anyhow::Result;
use zapraid_engine::cpu_cost::CpuCosts;
use zapraid_engine::RaidLevel;
use zapraid_experiments::cpu::{calibrate, reads, writes, CpuFigure, QUEUE_DEPTH};

use super::{BenchArgs, Out};

const FULL_REQUESTS: u64 = 1_000_000;
const QUICK_REQUESTS: u64 = 100_000;
/// The drive failed for the degraded reads.
const FAILED_DRIVE: usize = 0;
/// The engine's budget on one core, for the comparison printed: enough 4 KiB requests per
/// second that one core keeps several NVMe drives busy, so the engine never limits an array.
const TARGET_WRITES_PER_S: f64 = 1_000_000.0;
const TARGET_READS_PER_S: f64 = 1_500_000.0;

fn cell(figure: &CpuFigure) -> String {
    let allocations = figure.allocations_per_request.map_or("-".to_string(), |a| format!("{a:.1}"));
    format!("{:>12.0} {:>9}", figure.requests_per_s, allocations)
}

pub(super) fn cpu(args: &BenchArgs, out: &mut Out) -> Result<()> {
    let requests = if args.quick { QUICK_REQUESTS } else { FULL_REQUESTS };
    let counter = || Some(crate::alloc_count::allocations());
    say!(
        out,
        "The engine alone, one core: instant in-memory drives, {requests} requests per cell of 4 KiB at queue \
         depth {QUEUE_DEPTH}, ZapRAID G = 256. Per second of the engine thread's time: the wall time less the \
         frontend's part (building each request, with the written blocks' CRC32C, which the server's ublk queue \
         threads do) and the drives' (their copies stand for DMA), each timed apart. Allocations per request \
         counted by the binary's allocator, the frontend's included."
    );
    say!(out);
    say!(
        out,
        "{:<14} {:>12} {:>9} {:>12} {:>9} {:>12} {:>9}",
        "array",
        "writes/s",
        "allocs",
        "reads/s",
        "allocs",
        "degraded/s",
        "allocs"
    );
    let mut raid5 = None;
    let mut walls = Vec::new();
    for level in [RaidLevel::Raid5 { drives: 4 }, RaidLevel::Raid6 { drives: 6 }] {
        let w = writes(level, requests, args.seed, &counter)?;
        let r = reads(level, requests, args.seed, None, &counter)?;
        let d = reads(level, requests, args.seed, Some(FAILED_DRIVE), &counter)?;
        say!(out, "{:<14} {} {} {}", level.to_string(), cell(&w), cell(&r), cell(&d));
        raid5.get_or_insert((w.requests_per_s, r.requests_per_s));
        walls.push((level, w, r, d));
    }
    say!(out);
    say!(
        out,
        "Calibration of the simulator's engine core: each cost a fixed part per event and a part per 4 KiB block, \
         solved from runs of 4 KiB and 64 KiB requests on 4 KiB and 16 KiB chunks (zapraid_experiments::cpu):"
    );
    for (level, w, r, _) in &walls {
        print_calibration(out, args, requests, *level, w, r)?;
    }
    say!(out);
    say!(out, "Wall time (one thread doing all three parts), and the frontend's time per request:");
    for (level, w, r, d) in walls {
        say!(
            out,
            "{:<14} {:>12.0} writes/s ({:.0} ns frontend), {:.0} reads/s, {:.0} degraded/s",
            level.to_string(),
            w.wall_requests_per_s,
            w.frontend_ns_per_request,
            r.wall_requests_per_s,
            d.wall_requests_per_s
        );
    }
    if let Some((w, r)) = raid5 {
        say!(
            out,
            "\nRAID-5: {:.0}% of the engine's budget of 1,000,000 writes/s and {:.0}% of its 1,500,000 reads/s on one core",
            w / TARGET_WRITES_PER_S * 100.0,
            r / TARGET_READS_PER_S * 100.0
        );
    }
    Ok(())
}

/// The per-event costs this run measured for `level` (more runs, of larger requests and
/// chunks, to split each cost), and the ones the simulator uses.
fn print_calibration(
    out: &mut Out,
    args: &BenchArgs,
    requests: u64,
    level: RaidLevel,
    w: &CpuFigure,
    r: &CpuFigure,
) -> Result<()> {
    let calibration = calibrate(level, w, r, requests, args.seed)?;
    say!(out, "{}", calibration.to_string().trim_end());
    say!(out, "  the simulator uses: {}", CpuCosts::calibrated(level));
    Ok(())
}
