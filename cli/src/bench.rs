//! `zapraid bench`: the ZapRAID paper's experiments on emulated ZN540 drives in virtual
//! time, with the paper's figures and the ratios that matter beside ours.

use anyhow::Result;
use clap::{Args, ValueEnum};
use zapraid_engine::bench::hybrid::{
    self, exp7, findings, Exp7Row, LARGE_CHUNK_BYTES, OPEN_SEGMENTS, SMALL_CHUNK_BYTES, WITHIN_BEST,
};
use zapraid_engine::bench::rebuild::{
    self as full_drive, rebuild_point, RebuildPoint, CHUNKS_BYTES, FAILED_DRIVE, PAPER_4K_S_PER_100_GIB,
    PAPER_LARGER_CHUNKS_LESS,
};
use zapraid_engine::bench::{
    cpu_cost_iops, exp1, exp2, exp3, paper_modes, paper_segment_blocks, recovery_point, recovery_point_with, Measured,
    Shutdown,
};

use crate::size::format_bytes;

#[derive(Clone, Copy, Default, ValueEnum)]
enum Experiment {
    /// Exp#1 (writes), Exp#2 (reads), Exp#3 (group size), Exp#7 (hybrid segments) and the
    /// engine's CPU cost.
    #[default]
    Paper,
    /// Crash recovery time for several amounts of written data (Exp#5).
    Recovery,
    /// Hybrid segment management (Exp#7): four open segments of small and large chunks
    /// under random writes of 4, 8, 16 KiB and a 4/16 KiB mix.
    Hybrid,
    /// Full-drive recovery (Exp#5): drive 0 fails and is rebuilt onto a new drive, for 4,
    /// 8, 16 KiB chunks.
    Rebuild,
    /// A rebuild under user load: 4 KiB random reads and writes while drive 0 is rebuilt,
    /// unlimited and at rate limits of 400, 200, 100 MiB/s, beside no rebuild.
    RebuildLoad,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Which experiments.
    #[arg(value_enum, default_value = "paper")]
    experiment: Experiment,
    /// Smaller runs (an eighth of a segment before reading, fewer requests): seconds,
    /// not a minute. The read figures of ZoneAppend-Only depend on the fill.
    #[arg(long)]
    quick: bool,
    /// Seed of addresses and of the drives' landing order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only Exp#1 (writes) and the CPU cost (with `paper`).
    #[arg(long)]
    writes_only: bool,
    /// Requests per Exp#7 cell (default: 200000, 50000 with --quick).
    #[arg(long)]
    requests: Option<u64>,
}

const CHUNKS: [u64; 3] = [4096, 8192, 16384];

/// The paper's Exp#1 throughput (MiB/s) where it states one.
fn paper_exp1(mode: &str, chunk: u64) -> Option<f64> {
    match (mode, chunk) {
        ("ZapRAID", 4096) => Some(1574.2),
        ("ZapRAID", 8192) => Some(2961.2),
        ("ZoneWrite-Only", 4096) => Some(910.8),
        _ => None,
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "NO"
    }
}

pub fn run(args: BenchArgs) -> Result<()> {
    match args.experiment {
        Experiment::Paper => paper(args),
        Experiment::Recovery => recovery(args),
        Experiment::Hybrid => hybrid(&args),
        Experiment::Rebuild => rebuild(&args),
        Experiment::RebuildLoad => rebuild_load(&args),
    }
}

/// Requests per Exp#7 cell: each cell's figures differ by under 1% from a run of twice as
/// many (README), and the whole table runs in about two minutes in a release build.
const EXP7_REQUESTS: u64 = 200_000;
const EXP7_QUICK_REQUESTS: u64 = 50_000;

fn hybrid(args: &BenchArgs) -> Result<()> {
    let requests = args.requests.unwrap_or(if args.quick { EXP7_QUICK_REQUESTS } else { EXP7_REQUESTS });
    println!(
        "Exp#7: hybrid segment management. (3+1)-RAID-5 on four emulated WD ZN540 drives (ZN540 timing model), \
         {OPEN_SEGMENTS} open segments: Ns of small chunks (Cs = {} KiB), Nl of large chunks (Cl = {} KiB)",
        SMALL_CHUNK_BYTES / 1024,
        LARGE_CHUNK_BYTES / 1024
    );
    println!(
        "random writes (4/16 KiB: 75% 4 KiB, 25% 16 KiB), queue depth {}, {requests} requests per cell, \
         virtual time, seed {}",
        hybrid::QUEUE_DEPTH,
        args.seed
    );
    println!("ZapRAID: G = 256 on small-chunk segment 0 (Zone Append), Zone Write elsewhere\n");
    let names: Vec<&str> = paper_modes().iter().map(|(n, _)| *n).collect();
    let mut header = format!("{:<9} {:>2} {:>2}", "workload", "Ns", "Nl");
    let mut units = format!("{:<15}", "");
    for name in &names {
        header += &format!("  {name:>18}");
        units += &format!("  {:>8} {:>9}", "MiB/s", "p95 us");
    }
    println!("{header}  {:>12}", "ZapRAID");
    println!("{units}  {:>12}", "vs best");
    let rows = exp7(requests, args.seed, |row| println!("{}", exp7_line(row)))?;
    let f = findings(&rows);
    let percent = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{:+.1}%", x * 100.0));
    println!("\nThe paper's findings beside ours:");
    println!(
        "  {:<54} paper {:+.1}%, ours {}",
        "ZoneAppend-Only over ZoneWrite-Only at 4 KiB, Ns = 1:",
        hybrid::PAPER_APPEND_OVER_WRITE_4K * 100.0,
        percent(f.append_over_write_4k_one_small)
    );
    println!(
        "  {:<54} paper {:+.1}%, ours {}",
        "ZoneWrite-Only over ZoneAppend-Only at 16 KiB, Ns = 1:",
        hybrid::PAPER_WRITE_OVER_APPEND_16K * 100.0,
        percent(f.write_over_append_16k_one_small)
    );
    println!(
        "  {:<54} paper: in every cell (\"within a few %\"), ours: {} of {} cells",
        format!("ZapRAID best or within {:.0}% of the best:", WITHIN_BEST * 100.0),
        f.zapraid_within_best,
        f.cells
    );
    for row in rows.iter().filter(|r| r.zapraid_gap().is_some_and(|g| g < -WITHIN_BEST)) {
        let (best, _) = row.best().expect("measured");
        println!(
            "    ZapRAID {} below {best} at {}, Ns = {}, Nl = {}",
            percent(row.zapraid_gap()),
            row.workload.name,
            row.small,
            row.large
        );
    }
    Ok(())
}

/// One table line of Exp#7: the workload, the split, each scheme's MiB/s and p95, and
/// ZapRAID's gap to the best ("best" when it is the best).
fn exp7_line(row: &Exp7Row) -> String {
    let mut line = format!("{:<9} {:>2} {:>2}", row.workload.name, row.small, row.large);
    for (_, m) in &row.schemes {
        line += &format!("  {:>8.1} {:>9.1}", m.mib_per_s, m.p95_us);
    }
    let gap = match row.zapraid_gap() {
        Some(g) if g >= 0.0 => "best".to_string(),
        Some(g) => format!("{:+.1}%", g * 100.0),
        None => "-".to_string(),
    };
    line + &format!("  {gap:>12}")
}

/// Sealed segments of data before drive 0 fails in `bench rebuild` (62 MiB zones: a
/// segment holds 186 MiB of data at 4 KiB chunks).
const REBUILD_SEGMENTS: u64 = 8;
const REBUILD_QUICK_SEGMENTS: u64 = 2;

/// Exp#5 full-drive recovery: per chunk size and scheme, the rebuild's virtual time per
/// 100 GiB of data beside the paper's and the bound the new drive's write bandwidth sets.
fn rebuild(args: &BenchArgs) -> Result<()> {
    use std::io::Write;
    let segments = if args.quick { REBUILD_QUICK_SEGMENTS } else { REBUILD_SEGMENTS };
    println!(
        "Exp#5 full-drive recovery: (3+1)-RAID-5 on emulated WD ZN540 drives (ZN540 timing model, 62 MiB zones), \
         {segments} full segments of sequential writes, drive {FAILED_DRIVE} fails and is rebuilt onto an empty \
         drive (online, nothing else running); virtual time, seed {}",
        args.seed
    );
    println!(
        "write bound: what the new drive receives over its Zone Write bandwidth for chunk-sized writes in the \
         timing model, one zone at QD 1 (how the rebuild writes) and the best of 1-8 open zones\n"
    );
    println!(
        "{:<7} {:<15} {:>10} {:>8} {:>11} {:>9} {:>9} {:>11} {:>8} {:>13} {:>12} {:>12}",
        "chunk",
        "mode",
        "data",
        "segments",
        "new drive",
        "rebuild",
        "written",
        "rebuild",
        "vs 4 KiB",
        "paper",
        "bound 1 zone",
        "bound drive"
    );
    let per_100 = "s/100 GiB";
    println!(
        "{:<7} {:<15} {:>10} {:>8} {:>11} {:>9} {:>9} {:>11} {:>8} {:>13} {:>12} {:>12}",
        "", "", "", "", "got", "s", "MiB/s", per_100, "", per_100, per_100, per_100
    );
    let mut rows: Vec<(&str, RebuildPoint)> = Vec::new();
    // Progress on a terminal only: in a log or a pipe it would be a line of clutter.
    let show_progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    for chunk in CHUNKS_BYTES {
        for (name, mode) in full_drive::modes() {
            let label = format!("{} KiB {name}", chunk / 1024);
            let point = rebuild_point(mode, chunk, segments, args.seed, |p| {
                let status = match p {
                    full_drive::Progress::Filling { bytes_written, bytes } => {
                        format!("filling {} of {}", format_bytes(bytes_written), format_bytes(bytes))
                    }
                    full_drive::Progress::Rebuilding { segments_rebuilt, segments } => {
                        format!("rebuilding: {segments_rebuilt} of {segments} segments")
                    }
                };
                if show_progress {
                    eprint!("\r{label}: {status:<40}");
                    let _ = std::io::stderr().flush();
                }
            })?;
            if show_progress {
                eprint!("\r{:<80}\r", "");
            }
            let at_4k = rows.iter().find(|(n, p)| *n == name && p.chunk_bytes == CHUNKS_BYTES[0]);
            let vs_4k = match at_4k {
                Some((_, p)) if chunk != CHUNKS_BYTES[0] => {
                    format!("{:+.1}%", (point.s_per_100_gib() / p.s_per_100_gib() - 1.0) * 100.0)
                }
                _ => "-".to_string(),
            };
            let paper = if chunk == CHUNKS_BYTES[0] {
                format!("{PAPER_4K_S_PER_100_GIB:.1}")
            } else {
                let (least, most) = PAPER_LARGER_CHUNKS_LESS;
                format!("{:.1}-{:.1}", PAPER_4K_S_PER_100_GIB * (1.0 - most), PAPER_4K_S_PER_100_GIB * (1.0 - least))
            };
            println!(
                "{:<7} {:<15} {:>10} {:>8} {:>11} {:>9.2} {:>9.1} {:>11.1} {:>8} {:>13} {:>12.1} {:>12.1}",
                format!("{} KiB", chunk / 1024),
                name,
                format_bytes(point.data_bytes),
                point.segments,
                format_bytes(point.new_drive_bytes),
                point.rebuild_s,
                point.new_drive_mib_per_s(),
                point.s_per_100_gib(),
                vs_4k,
                paper,
                point.one_zone_bound_s_per_100_gib(),
                point.drive_bound_s_per_100_gib()
            );
            rows.push((name, point));
        }
    }
    println!(
        "\npaper: {PAPER_4K_S_PER_100_GIB} s per 100 GiB at 4 KiB chunks on real ZN540 drives (drive 0, offline), \
         {:.0}-{:.0}% less at 8/16 KiB; \"vs 4 KiB\" is ours against the same scheme at 4 KiB",
        PAPER_LARGER_CHUNKS_LESS.0 * 100.0,
        PAPER_LARGER_CHUNKS_LESS.1 * 100.0
    );
    for chunk in CHUNKS_BYTES {
        let (one_zone, drive) = rows
            .iter()
            .find(|(_, p)| p.chunk_bytes == chunk)
            .map(|(_, p)| (p.one_zone_write_mib_per_s, p.drive_write_mib_per_s))
            .expect("measured");
        println!(
            "  timing model, {:>2} KiB Zone Writes at QD 1: {one_zone:>7.1} MiB/s on one zone, {drive:>7.1} MiB/s with the best of 1-8 open zones",
            chunk / 1024
        );
    }
    Ok(())
}

/// Sealed segments of data in `bench rebuild-load` (16 KiB chunks, 62 MiB zones: a segment
/// holds 186 MiB of data).
const LOAD_SEGMENTS: u64 = 4;
const LOAD_QUICK_SEGMENTS: u64 = 1;

/// A rebuild's cost to user I/O: user IOPS and latency with no rebuild, a rebuild
/// unlimited and rate-limited, and each rebuild's time.
fn rebuild_load(args: &BenchArgs) -> Result<()> {
    use std::io::Write;
    use zapraid_engine::bench::rebuild_load::{
        load_point, Case, BASELINE_REQUESTS, LOAD_CHUNK_BYTES, USER_QUEUE_DEPTH, USER_READ_PERCENT,
    };
    let segments = if args.quick { LOAD_QUICK_SEGMENTS } else { LOAD_SEGMENTS };
    println!(
        "rebuild under user load: (3+1)-RAID-5 on emulated WD ZN540 drives (ZN540 timing model, 62 MiB zones), \
         {} KiB chunks, {segments} full segments of sequential writes; users: 4 KiB random requests, \
         {USER_READ_PERCENT}% reads, queue depth {USER_QUEUE_DEPTH}, over the whole array; without a rebuild \
         {BASELINE_REQUESTS} requests, with one from drive {FAILED_DRIVE}'s replacement until it is rebuilt; \
         virtual time, seed {}\n",
        LOAD_CHUNK_BYTES / 1024,
        args.seed
    );
    println!(
        "{:<24} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "", "requests", "user IOPS", "read p50", "read p99", "write p50", "write p99", "rebuild", "new drive"
    );
    println!(
        "{:<24} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "", "", "", "us", "us", "us", "us", "s/100 GiB", "MiB/s"
    );
    let show_progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    for case in Case::all() {
        let label = case.label();
        let point = load_point(case, segments, args.seed, |p| {
            if show_progress {
                let status = match p {
                    full_drive::Progress::Filling { bytes_written, bytes } => {
                        format!("filling {} of {}", format_bytes(bytes_written), format_bytes(bytes))
                    }
                    full_drive::Progress::Rebuilding { segments_rebuilt, segments } => {
                        format!("rebuilding: {segments_rebuilt} of {segments} segments")
                    }
                };
                eprint!("\r{label}: {status:<40}");
                let _ = std::io::stderr().flush();
            }
        })?;
        if show_progress {
            eprint!("\r{:<80}\r", "");
        }
        let or_dash = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        println!(
            "{:<24} {:>9} {:>10.0} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10} {:>12}",
            label,
            point.user_requests,
            point.user_iops,
            point.read_p50_us,
            point.read_p99_us,
            point.write_p50_us,
            point.write_p99_us,
            or_dash(point.rebuild_s_per_100_gib()),
            or_dash(point.new_drive_mib_per_s())
        );
    }
    Ok(())
}

fn recovery(args: BenchArgs) -> Result<()> {
    const MIB: u64 = 1 << 20;
    // Whole sealed segments plus a half-full open one, so the slope is the cost of data
    // in sealed segments and the open segment's scan is the same at every size.
    let sealed_segments: &[u64] = if args.quick { &[1, 4] } else { &[1, 4, 8, 16] };
    println!(
        "Crash recovery (power cut after sequential writes): (3+1)-RAID-5, 4 KiB chunks, G = 256, 62 MiB zones, \
         ZN540 timing, virtual time, seed {}",
        args.seed
    );
    println!(
        "{:>12} {:>9} {:>15} {:>17} {:>24}",
        "data", "segments", "recovery ms", "recovery MiB/s", "open-segment reclaim ms"
    );
    let mut points = Vec::new();
    for &sealed in sealed_segments {
        let p = recovery_point(sealed, args.seed)?;
        println!(
            "{:>12} {:>9} {:>15.2} {:>17.0} {:>24.2}",
            format_bytes(p.data_bytes),
            p.segments,
            p.recovery_s * 1e3,
            p.data_bytes as f64 / MIB as f64 / p.recovery_s,
            p.reclaim_s * 1e3
        );
        points.push(p);
    }
    let (first, last) = (points[0], points[points.len() - 1]);
    let largest = *sealed_segments.last().expect("sizes");
    for (shutdown, what) in [
        (Shutdown::PowerCutAndFailedDrive, "with drive 0 failed (degraded recovery)"),
        (Shutdown::Clean, "after a clean stop (stop footer instead of a metadata scan)"),
    ] {
        let p = recovery_point_with(largest, args.seed, shutdown)?;
        println!(
            "{:>12} {:>9} {:>15.2} {:>17.0} {:>24.2}   {what}",
            format_bytes(p.data_bytes),
            p.segments,
            p.recovery_s * 1e3,
            p.data_bytes as f64 / MIB as f64 / p.recovery_s,
            p.reclaim_s * 1e3
        );
    }
    let per_byte = (last.recovery_s - first.recovery_s) / (last.data_bytes - first.data_bytes) as f64;
    const HUNDRED_GIB: f64 = 100.0 * (1u64 << 30) as f64;
    println!(
        "recovery time per 100 GiB of written data (slope): {:.2} s (paper: about 1.5 s per extra 100 GiB on real drives)",
        per_byte * HUNDRED_GIB
    );
    println!(
        "the array serves I/O once recovery ends; rewriting the open segment's live blocks into a new segment \
         and resetting its zones runs after that, beside user I/O (open-segment reclaim)"
    );
    Ok(())
}

fn paper(args: BenchArgs) -> Result<()> {
    let requests = if args.quick { 20_000 } else { 60_000 };
    println!("(3+1)-RAID-5 on four emulated WD ZN540 drives (ZN540 timing model), virtual time, seed {}", args.seed);
    println!("\nExp#1: random writes, queue depth 64, request size = chunk size, {requests} requests");
    println!("{:<8} {:<16} {:>9} {:>9} {:>9} {:>12}", "chunk", "mode", "MiB/s", "p50 us", "p95 us", "paper MiB/s");
    let mut results: Vec<(&str, u64, Measured)> = Vec::new();
    for chunk in CHUNKS {
        for (name, mode) in paper_modes() {
            let m = exp1(mode, chunk, requests, args.seed)?;
            let paper = paper_exp1(name, chunk).map_or("-".to_string(), |p| format!("{p:.1}"));
            println!(
                "{:<8} {:<16} {:>9.1} {:>9.1} {:>9.1} {:>12}",
                format!("{} KiB", chunk / 1024),
                name,
                m.mib_per_s,
                m.p50_us,
                m.p95_us,
                paper
            );
            results.push((name, chunk, m));
        }
    }
    let get = |name: &str, chunk: u64| results.iter().find(|r| r.0 == name && r.1 == chunk).expect("measured").2;
    println!("\nZapRAID / ZoneWrite-Only throughput (paper: +72.8% at 4 KiB, +77.2% at 8 KiB, similar at 16 KiB):");
    for (chunk, paper, want) in
        [(4096, "1.73x", "at least 1.5x"), (8192, "1.77x", "at least 1.5x"), (16384, "~1x", "within 10%")]
    {
        let r = get("ZapRAID", chunk).mib_per_s / get("ZoneWrite-Only", chunk).mib_per_s;
        let ok = if chunk == 16384 { (r - 1.0).abs() <= 0.10 } else { r >= 1.5 };
        println!("  {:>2} KiB: {r:.2}x (paper {paper}); {want}: {}", chunk / 1024, verdict(ok));
    }
    println!("ZoneAppend-Only / ZapRAID throughput (paper: about the same):");
    for chunk in CHUNKS {
        let r = get("ZoneAppend-Only", chunk).mib_per_s / get("ZapRAID", chunk).mib_per_s;
        println!("  {:>2} KiB: {r:.2}x; within 10%: {}", chunk / 1024, verdict((r - 1.0).abs() <= 0.10));
    }
    println!("ZapRAID vs ZoneWrite-Only latency (paper: median -43.8% / -44.5%, p95 -36.4% / -34.1% at 4 / 8 KiB):");
    for chunk in [4096, 8192] {
        let (z, w) = (get("ZapRAID", chunk), get("ZoneWrite-Only", chunk));
        println!(
            "  {:>2} KiB: median {:+.1}%, p95 {:+.1}%",
            chunk / 1024,
            (z.p50_us / w.p50_us - 1.0) * 100.0,
            (z.p95_us / w.p95_us - 1.0) * 100.0
        );
    }

    if !args.writes_only {
        let segment = paper_segment_blocks()?;
        let fill = if args.quick { segment / 8 } else { segment };
        let reads = if args.quick { 500 } else { 2000 };
        println!(
            "\nExp#2: random 4 KiB reads, queue depth 1, after writing {fill} blocks ({}); degraded: drive 0 failed, reads of its blocks",
            if args.quick { "an eighth of a segment" } else { "one full segment" }
        );
        println!("{:<16} {:>14} {:>16} {:>10}", "mode", "normal p50 us", "degraded p50 us", "degraded/normal");
        let mut degraded = Vec::new();
        for (name, mode) in paper_modes() {
            let (n, d) = exp2(mode, fill, reads, args.seed)?;
            println!("{:<16} {:>14.1} {:>16.1} {:>9.2}x", name, n.p50_us, d.p50_us, d.p50_us / n.p50_us);
            degraded.push((name, n, d));
        }
        let zap = degraded.iter().find(|d| d.0 == "ZapRAID").expect("measured");
        let za = degraded.iter().find(|d| d.0 == "ZoneAppend-Only").expect("measured");
        let within = (zap.2.p50_us / zap.1.p50_us - 1.0).abs();
        println!(
            "ZapRAID degraded vs normal median: {:+.1}% (paper: < 6% apart); within 10%: {}",
            (zap.2.p50_us / zap.1.p50_us - 1.0) * 100.0,
            verdict(within <= 0.10)
        );
        println!(
            "ZoneAppend-Only degraded median: {:.2}x ZapRAID's (paper: 21.6x, 1.84 ms); clearly slower: {}",
            za.2.p50_us / zap.2.p50_us,
            verdict(za.2.p50_us > 1.5 * zap.2.p50_us)
        );

        println!("\nExp#3: stripe group size G (4 KiB chunks): random-write throughput and degraded read median");
        println!("{:>6} {:>9} {:>16}", "G", "MiB/s", "degraded p50 us");
        for g in [4u32, 16, 64, 256, 1024, 4096] {
            let (w, d) = exp3(g, requests / 2, fill, reads / 2, args.seed)?;
            println!("{g:>6} {:>9.1} {:>16.1}", w.mib_per_s, d.p50_us);
        }
        println!("(paper: throughput grows with G up to 256, then flat; degraded reads at G = 4096 are 13.2-24.7% above G = 256)");
    }

    if !args.writes_only {
        println!();
        hybrid(&args)?;
    }

    let cpu_requests = if args.quick { 50_000 } else { 200_000 };
    let iops = cpu_cost_iops(cpu_requests, args.seed)?;
    println!(
        "\nEngine CPU cost: {iops:.0} 4 KiB random writes per second on one core \
         (zero-latency in-memory drives, (3+1)-RAID-5, G = 256, {cpu_requests} requests, wall clock)"
    );
    Ok(())
}
