//! `zapraid bench cpu`: first the engine alone ("engine only"), one core, over instant
//! drives (see `zapraid_experiments::cpu`): 4 KiB random writes, reads and degraded reads
//! per second for (3+1)-RAID-5 and (4+2)-RAID-6 at G = 256, with heap allocations per
//! request counted by the binary's allocator (`alloc_count`) beside them; then the
//! engine's time split into per-event costs, each a fixed part and a part per block, from
//! more runs of larger requests and chunks: the calibration of the simulator's engine core
//! (`zapraid_engine::cpu_cost`), beside the costs the simulator uses; then the drive
//! rebuild's cost, measured and solved the same way (`cpu_rebuild`). Then the real server
//! path (`server_path`): 4 KiB random writes through the engine thread over drive files
//! on tmpfs from frontend threads standing in for the ublk queues, for each shard count of
//! `--shards`: writes per second, p50/p99/p99.99 latency, the CPU time of every thread,
//! CPU per write, and the scaling against 1 shard. `--json FILE` writes the figures.

use anyhow::{Context, Result};
use zapraid_engine::cpu_cost::CpuCosts;
use zapraid_engine::RaidLevel;
use zapraid_experiments::cpu::{calibrate, reads, writes, CpuFigure, QUEUE_DEPTH};

use super::server_path::{self, in_print_order, RunFigure, RunPlan};
use super::{BenchArgs, Out};

const FULL_REQUESTS: u64 = 1_000_000;
const QUICK_REQUESTS: u64 = 100_000;
/// Measured writes per run of the server path.
const SERVER_FULL_REQUESTS: u64 = 400_000;
const SERVER_QUICK_REQUESTS: u64 = 40_000;
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
    let requests = super::requests(args, FULL_REQUESTS, QUICK_REQUESTS);
    let counter = || Some(crate::alloc_count::allocations());
    say!(out, "{}", load_average());
    say!(
        out,
        "Engine only (the engine alone, one core): instant in-memory drives, {requests} requests per cell of 4 KiB at queue \
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
    let mut engine_json = Vec::new();
    for level in [RaidLevel::Raid5 { drives: 4 }, RaidLevel::Raid6 { drives: 6 }] {
        let w = writes(level, requests, args.seed, &counter)?;
        let r = reads(level, requests, args.seed, None, &counter)?;
        let d = reads(level, requests, args.seed, Some(FAILED_DRIVE), &counter)?;
        say!(out, "{:<14} {} {} {}", level.to_string(), cell(&w), cell(&r), cell(&d));
        raid5.get_or_insert((w.requests_per_s, r.requests_per_s));
        engine_json.push(serde_json::json!({
            "array": level.to_string(),
            "writes_per_s": w.requests_per_s,
            "reads_per_s": r.requests_per_s,
            "degraded_reads_per_s": d.requests_per_s,
            "wall_writes_per_s": w.wall_requests_per_s,
            "allocations_per_write": w.allocations_per_request,
        }));
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
    say!(out, "Engine only, wall time (one thread doing all three parts), and the frontend's time per request:");
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
    say!(out);
    let rebuild = super::cpu_rebuild::rebuild(args, out)?;
    let server = server_path_runs(args, out)?;
    if let Some(path) = &args.json {
        let json = serde_json::json!({
            "requests_per_engine_only_cell": requests,
            "engine_only": engine_json,
            "rebuild": rebuild,
            "server_path": server,
        });
        let text = serde_json::to_string_pretty(&json)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
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

/// The load average now, for readers of figures taken on a shared machine.
fn load_average() -> String {
    let loads = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let loads: Vec<&str> = loads.split_whitespace().take(3).collect();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if loads.len() == 3 {
        format!("{cores} cores, load average {} (1, 5, 15 minutes) before the runs", loads.join(" "))
    } else {
        format!("{cores} cores, load average unknown")
    }
}

/// The shard counts to run, in ascending order: `--shards`, else 1 and the core count.
fn shard_counts(args: &BenchArgs) -> Vec<usize> {
    let mut shards: Vec<usize> = if args.shards.is_empty() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        vec![1, cores]
    } else {
        args.shards.iter().map(|s| *s as usize).collect()
    };
    // Ascending, so that 1 shard, which the others are compared with, runs first.
    shards.sort_unstable();
    shards.dedup();
    shards
}

/// The levels the server path runs.
const SERVER_LEVELS: [RaidLevel; 2] = [RaidLevel::Raid5 { drives: 4 }, RaidLevel::Raid6 { drives: 6 }];

/// The real server path for each level and shard count: a table of the runs, then every
/// thread's CPU time in each. Returns the figures as JSON.
fn server_path_runs(args: &BenchArgs, out: &mut Out) -> Result<serde_json::Value> {
    let requests = super::requests(args, SERVER_FULL_REQUESTS, SERVER_QUICK_REQUESTS);
    let shards = shard_counts(args);
    let frontends = usize::from(zapraid_server::export::ublk::default_queues());
    let (base, place) = server_path::drive_base();
    let ublk = if zapraid_server::export::ublk::available() {
        "ublk is available here, but the frontend threads stand in for its queues all the same"
    } else {
        "this host has no ublk (no /dev/ublk-control), so frontend threads stand in for the ublk queues"
    };
    say!(
        out,
        "The real server path: {requests} 4 KiB random writes per run (a tenth more first, to warm up) over \
         {WINDOW_MIB} MiB, through the server's engine (one per engine shard, each over its own part of every \
         drive; run by a frontend or on its own thread, below) and its drive driver, over emulated drive files in \
         {place} (every page of them populated before the run: tmpfs would allocate and clear each at its first \
         write, which real media does not), fed by {frontends} frontend thread(s) (one per core, as the ublk queues) each keeping \
         {depth} writes in flight: each copies the data into a buffer the engine gave back and computes its \
         CRC32C, sends it as Message::Io through the array's sender (to the shard the block is in), and sleeps \
         on an eventfd until \
         answers come, as a ublk queue thread does; {ublk} (the kernel's part of a request is not counted). \
         Emulated drives run their commands on the thread running the engine when it reaps them: there is no \
         drive thread. \
         Latency from send to answer as the frontend sees it; CPU time per thread from the scheduler \
         (/proc/self/task/N/schedstat) over the measured part, its share in the kernel (system calls: the drive \
         files' writes, wake-ups; from clock ticks, coarse) and its time runnable but waiting for a CPU (taken by \
         other processes, or by more busy threads than cores); CPU per write is every thread's over the writes.",
        WINDOW_MIB = 256,
        depth = server_path::QUEUE_DEPTH,
    );
    say!(out);
    say!(
        out,
        "Each shard count runs twice: with frontend i running engine shard i itself (as ublk queue i does by \
         default: a request for that shard stays on the frontend's thread), and with every engine on a thread of \
         its own (`start --engine-threads`); \"x 1 shard\" compares with 1 shard run the same way."
    );
    say!(out);
    say!(
        out,
        "{:<14} {:>6} {:<10} {:>10} {:>9} {:>9} {:>10} {:>11} {:>9}",
        "array",
        "shards",
        "engine on",
        "writes/s",
        "p50 us",
        "p99 us",
        "p99.99 us",
        "CPU us/w",
        "x 1 shard"
    );
    let mut runs = Vec::new();
    let mut json = Vec::new();
    for level in SERVER_LEVELS {
        for engine_on_frontends in [true, false] {
            let on = if engine_on_frontends { "frontends" } else { "threads" };
            let mut one_shard = None;
            for &s in &shards {
                let plan = RunPlan { level, shards: s, frontends, engine_on_frontends, requests, seed: args.seed };
                let figure = server_path::run(&base, plan)
                    .with_context(|| format!("the server path, {level}, {s} shard(s), engines on {on}"))?;
                if s == 1 {
                    one_shard = Some(figure.requests_per_s());
                }
                let scaling = one_shard.map(|one| figure.requests_per_s() / one);
                let l = figure.latency_us;
                say!(
                    out,
                    "{:<14} {:>6} {:<10} {:>10.0} {:>9.0} {:>9.0} {:>10.0} {:>11.2} {:>9}",
                    level.to_string(),
                    s,
                    on,
                    figure.requests_per_s(),
                    l.p50,
                    l.p99,
                    l.p99_99,
                    figure.cpu_us_per_request(),
                    scaling.map_or("-".to_string(), |x| format!("{x:.2}"))
                );
                json.push(run_json(level, s, on, &figure, scaling));
                runs.push((level, s, on, figure));
            }
        }
    }
    for (level, s, on, figure) in &runs {
        say!(out);
        print_threads(out, *level, *s, on, figure);
    }
    Ok(serde_json::json!({
        "drives_in": place,
        "frontends": frontends,
        "queue_depth_per_frontend": server_path::QUEUE_DEPTH,
        "requests_per_run": requests,
        "runs": json,
    }))
}

/// Every thread's CPU time in one run, by role.
fn print_threads(out: &mut Out, level: RaidLevel, shards: usize, engine_on: &str, figure: &RunFigure) {
    say!(
        out,
        "{level}, {shards} shard(s), engines on {engine_on}: {} writes in {:.2} s; garbage collection reclaimed {} segment(s); CPU time of \
         every thread of the process:",
        figure.requests,
        figure.wall_s,
        figure.segments_reclaimed
    );
    let row = |out: &mut Out, role: &str, cpu_ns: u64, wait_ns: u64, kernel: Option<f64>| {
        let kernel = kernel.map_or("-".to_string(), |k| format!("{:.0}%", k * 100.0));
        say!(
            out,
            "  {:<28} {:>9.1} ms CPU {:>5.0}% busy {:>8.2} us/write {:>5} in the kernel {:>9.1} ms waiting for a CPU",
            role,
            cpu_ns as f64 / 1e6,
            cpu_ns as f64 / 1e9 / figure.wall_s * 100.0,
            cpu_ns as f64 / 1e3 / figure.requests as f64,
            kernel,
            wait_ns as f64 / 1e6
        );
    };
    for t in in_print_order(figure) {
        row(out, &t.role, t.cpu_ns, t.wait_ns, t.kernel_fraction);
    }
    row(out, "all threads", figure.cpu_ns(), figure.wait_ns(), None);
}

fn run_json(
    level: RaidLevel,
    shards: usize,
    engine_on: &str,
    figure: &RunFigure,
    scaling: Option<f64>,
) -> serde_json::Value {
    serde_json::json!({
        "array": level.to_string(),
        "shards": shards,
        "engines_on": engine_on,
        "figure": {
            "requests": figure.requests,
            "engine_counted_writes": figure.engine_writes,
            "wall_s": figure.wall_s,
            "requests_per_s": figure.requests_per_s(),
            "latency_us": server_path::latency_json(&figure.latency_us),
            "cpu_us_per_request": figure.cpu_us_per_request(),
            "threads": server_path::threads_json(figure),
            "segments_reclaimed": figure.segments_reclaimed,
            "scaling_vs_1_shard": scaling,
        },
    })
}
