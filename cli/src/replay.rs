//! `zapraid replay TRACE`: replays a block I/O trace (Alibaba 2020, Tencent CBS 2018, MSR
//! Cambridge, fio iolog v2/v3; plain or gzip) against an array in the deterministic
//! simulator (virtual time, ZN540 timing model), streaming the trace, and prints
//! throughput, IOPS, latency percentiles, the read/write split, garbage collection and a
//! timeline, for people or as JSON. Other targets, in wall time: an array's drives (the
//! engine in this process; the array stopped) or a block device such as a running
//! array's `/dev/ublkbN` (`replay_targets`).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use zapraid_engine::{Config, Engine, Simulator, DEFAULT_STRIPE_TIMEOUT_NS, PAPER_LOOKUP_PS_PER_ENTRY};
use zapraid_trace::replay::{replay, LatencySummary, MapMode, Pacing, ReplayConfig, Report, Target};
use zapraid_trace::{address_span_bytes, Format, ReadOptions, ReadStats, TraceReader};
use zapraid_zns::{Geometry, TimingParams};

use crate::hybrid::{chunks_text, OpenSegmentArgs};
use crate::replay_targets::{DeviceTarget, DrivesTarget};
use crate::simulate::{raid_level, write_mode, Level, WriteMode};
use crate::size::format_bytes;

#[derive(Clone, Copy, ValueEnum)]
enum TraceFormat {
    /// Alibaba 2020: device_id,opcode(R/W),offset(bytes),length(bytes),timestamp(us).
    Alibaba,
    /// Tencent CBS 2018: timestamp(s),offset(sectors),size(sectors),type(0 read/1 write),volume.
    Tencent,
    /// MSR Cambridge: Timestamp(filetime),Hostname,DiskNumber,Type(Read/Write),Offset,Size,ResponseTime.
    Msr,
    /// fio iolog v2 or v3 (`fio version N iolog` first line).
    Fio,
}

impl From<TraceFormat> for Format {
    fn from(f: TraceFormat) -> Format {
        match f {
            TraceFormat::Alibaba => Format::Alibaba,
            TraceFormat::Tencent => Format::Tencent,
            TraceFormat::Msr => Format::Msr,
            TraceFormat::Fio => Format::Fio,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Map {
    /// Block address modulo the array's size.
    Wrap,
    /// The trace's address range (a first pass finds it) scaled onto the array.
    Scale,
}

#[derive(Clone, Copy, ValueEnum)]
enum DriveGeometry {
    /// QEMU-sized zones (62 MiB of 64 MiB), as `zapraid simulate`.
    Qemu,
    /// WD ZN540 zones (1077 MiB of 2 GiB).
    Zn540,
}

#[derive(Args)]
pub struct ReplayArgs {
    /// The trace file (.gz is read directly; gzip is also recognised by its magic).
    trace: PathBuf,
    /// The trace's format; detected from its first lines when not given.
    #[arg(long, value_enum)]
    format: Option<TraceFormat>,
    /// Only requests of this volume: Alibaba device id, Tencent volume id, MSR
    /// `hostname_disk` (e.g. hm_1), fio file name.
    #[arg(long, value_name = "ID")]
    volume: Option<String>,
    /// Closed loop: keep N requests in flight, as fast as the array goes (the default,
    /// with 32).
    #[arg(long, value_name = "N", conflicts_with = "speed")]
    queue_depth: Option<u64>,
    /// Open loop: issue each request at its trace time divided by X (2 = twice as fast).
    #[arg(long, value_name = "X")]
    speed: Option<f64>,
    /// Open loop: at most N requests in flight; later requests wait (and are counted late).
    #[arg(long, value_name = "N", default_value_t = 256)]
    max_in_flight: u64,
    /// Replay the writes only, as the ZapRAID paper does.
    #[arg(long)]
    writes_only: bool,
    /// How addresses beyond the array are brought into it.
    #[arg(long, value_enum, default_value = "wrap")]
    map: Map,
    /// Count and skip malformed lines instead of stopping at the first.
    #[arg(long)]
    skip_bad: bool,
    /// Stop after N requests.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// Print the figures as JSON (with the timeline).
    #[arg(long)]
    json: bool,
    /// Print the per-interval timeline in the text output too.
    #[arg(long)]
    timeline: bool,
    /// Replay onto these drives of a formatted, stopped array (drive files or NVMe
    /// namespaces), run by the engine in this process, in wall time, instead of the
    /// simulator. What the trace writes overwrites the array's data.
    #[arg(long, value_name = "DRIVE", num_args = 1.., conflicts_with = "device")]
    on_drives: Vec<PathBuf>,
    /// Replay onto a block device (a running array's /dev/ublkbN, not mounted) or a file,
    /// with direct I/O, in wall time, instead of the simulator. What the trace writes
    /// overwrites what the device holds.
    #[arg(long, value_name = "PATH")]
    device: Option<PathBuf>,
    /// Block size of --device.
    #[arg(long, value_name = "BYTES", default_value_t = 4096)]
    device_block_bytes: u64,
    #[arg(long, value_enum, default_value = "raid5")]
    level: Level,
    /// Drives in the array.
    #[arg(long, default_value_t = 4)]
    drives: usize,
    #[arg(long, value_enum, default_value = "zapraid")]
    mode: WriteMode,
    /// Stripe group size for --mode zapraid.
    #[arg(long, default_value_t = 256)]
    group_size: u32,
    /// Zone shape of the emulated drives (ZN540 timing either way).
    #[arg(long, value_enum, default_value = "qemu")]
    geometry: DriveGeometry,
    /// Zones per drive (small by default, so that a replay runs fast and fits in memory:
    /// the simulator keeps the data written).
    #[arg(long, default_value_t = 16)]
    zones: u32,
    /// Seed of the drives' landing order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    segments: OpenSegmentArgs,
}

fn geometry(args: &ReplayArgs) -> Geometry {
    match args.geometry {
        DriveGeometry::Qemu => Geometry {
            zone_append_max_blocks: 32,
            max_transfer_blocks: 128,
            ..Geometry::small(args.zones, 16384, 15872)
        },
        DriveGeometry::Zn540 => Geometry { zone_count: args.zones, ..Geometry::zn540() },
    }
}

/// Peak resident set size of this process (VmHWM), in bytes.
fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.trim_start_matches("VmHWM:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// The target a replay runs against and what the output says of it.
enum Chosen {
    Simulator(Box<Simulator>),
    Drives(Box<DrivesTarget>),
    Device(Box<DeviceTarget>),
}

impl Chosen {
    fn target(&mut self) -> &mut dyn Target {
        match self {
            Chosen::Simulator(sim) => sim.as_mut(),
            Chosen::Drives(drives) => drives.as_mut(),
            Chosen::Device(device) => device.as_mut(),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Chosen::Simulator(_) => "simulator",
            Chosen::Drives(_) => "drives",
            Chosen::Device(_) => "device",
        }
    }
}

/// Requests in flight at most (the device target's I/O threads).
fn in_flight_cap(pacing: Pacing) -> usize {
    /// Threads the device target starts at most.
    const MAX_DEVICE_THREADS: u64 = 128;
    let n = match pacing {
        Pacing::Closed { queue_depth } => queue_depth,
        Pacing::Open { max_in_flight, .. } => max_in_flight,
    };
    n.clamp(1, MAX_DEVICE_THREADS) as usize
}

/// The wall-time target the arguments name, and the text that says what it is.
fn wall_time_target(args: &ReplayArgs, pacing: Pacing) -> Result<Option<(Chosen, String)>> {
    if let Some(device) = &args.device {
        let target = DeviceTarget::open(device, args.device_block_bytes, in_flight_cap(pacing))?;
        let text = format!(
            "{} ({} of {} B blocks), direct I/O, wall time",
            device.display(),
            format_bytes(target.logical_blocks() * args.device_block_bytes),
            args.device_block_bytes
        );
        return Ok(Some((Chosen::Device(Box::new(target)), text)));
    }
    if !args.on_drives.is_empty() {
        let target = DrivesTarget::start(&args.on_drives)
            .with_context(|| "starting the array on the drives given (it must be stopped)".to_string())?;
        let text = format!(
            "the array on {} drives ({} logical), run by the engine in this process, wall time",
            args.on_drives.len(),
            format_bytes(target.logical_blocks() * target.block_bytes())
        );
        return Ok(Some((Chosen::Drives(Box::new(target)), text)));
    }
    Ok(None)
}

pub fn run(args: ReplayArgs) -> Result<()> {
    let wall = Instant::now();
    let pacing = match (args.speed, args.queue_depth) {
        (Some(speed), _) => Pacing::Open { speed, max_in_flight: args.max_in_flight },
        (None, depth) => Pacing::Closed { queue_depth: depth.unwrap_or(32) },
    };
    if matches!(pacing, Pacing::Closed { queue_depth: 0 }) {
        bail!("--queue-depth must be at least 1");
    }
    let (mut chosen, array) = match wall_time_target(&args, pacing)? {
        Some(chosen) => chosen,
        None => simulator_target(&args)?,
    };
    let options =
        ReadOptions { format: args.format.map(Format::from), volume: args.volume.clone(), skip_bad: args.skip_bad };
    let map = match args.map {
        Map::Wrap => MapMode::Wrap,
        Map::Scale => MapMode::Scale {
            span_bytes: address_span_bytes(&args.trace, options.clone())
                .with_context(|| format!("finding the address range of {}", args.trace.display()))?,
        },
    };
    let mut reader = TraceReader::open(&args.trace, options)?;
    let format = reader.format();
    let (bytes_read, file_bytes) = (reader.bytes_read(), reader.file_bytes().unwrap_or(0));
    let bar = if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(file_bytes);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} replaying [{bar:30}] {bytes}/{total_bytes} of the trace, {msg}, ETA {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_message("0 requests");
        Some(bar)
    } else {
        None
    };
    let replay_config = ReplayConfig { pacing, writes_only: args.writes_only, map, limit: args.limit };
    let result = replay(chosen.target(), reader.by_ref(), &replay_config, &mut |issued| {
        if let Some(bar) = &bar {
            bar.set_position(bytes_read.load(Ordering::Relaxed));
            bar.set_message(format!("{issued} requests"));
        }
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let target_name = chosen.name();
    if let Chosen::Drives(drives) = chosen {
        drives.stop().context("stopping the array after the replay")?;
    }
    let report = result.with_context(|| format!("replaying {}", args.trace.display()))?;
    let stats = reader.stats().clone();
    let peak = peak_resident_bytes();
    let wall_s = wall.elapsed().as_secs_f64();
    let context = Context_ { args: &args, format, stats: &stats, array, target: target_name, pacing, peak, wall_s };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&context, &report))?);
    } else {
        print_text(&context, &report);
    }
    Ok(())
}

/// The simulator the arguments describe, and the text that says what array it runs.
fn simulator_target(args: &ReplayArgs) -> Result<(Chosen, String)> {
    let level = raid_level(args.level, args.drives);
    level.validate()?;
    let mode = write_mode(args.mode, args.group_size);
    let open_segments = args.segments.open_segments(mode)?;
    let g = geometry(args);
    let mut config = Config {
        level,
        mode,
        chunk_bytes: args.segments.small_chunk_bytes,
        open_segments,
        stripe_timeout_ns: DEFAULT_STRIPE_TIMEOUT_NS,
        logical_blocks: 1,
        array_uuid: [0x7e; 16],
        lookup_ps_per_entry: PAPER_LOOKUP_PS_PER_ENTRY,
        l2p: zapraid_engine::L2pConfig::default(),
    };
    config.logical_blocks = Engine::format(g, config)?.plan().capacity_blocks(g.zone_count);
    if config.logical_blocks == 0 {
        bail!("{} zones per drive leave no room for data; give more with --zones", args.zones);
    }
    let sim = Simulator::new(g, config, args.seed, Some(TimingParams::zn540()))?;
    let array = format!(
        "{level}, {mode}, {}, {} drives x {} zones of {} (emulated, ZN540 timing), {} logical",
        chunks_text(args.segments.small_chunk_bytes, &open_segments),
        args.drives,
        g.zone_count,
        format_bytes(g.zone_capacity_blocks * u64::from(g.block_size_bytes)),
        format_bytes(config.logical_blocks * u64::from(g.block_size_bytes)),
    );
    Ok((Chosen::Simulator(Box::new(sim)), array))
}

/// What the output says besides the report.
struct Context_<'a> {
    args: &'a ReplayArgs,
    format: Format,
    stats: &'a ReadStats,
    array: String,
    /// simulator, drives or device.
    target: &'static str,
    pacing: Pacing,
    peak: Option<u64>,
    wall_s: f64,
}

fn pacing_text(pacing: Pacing) -> String {
    match pacing {
        Pacing::Closed { queue_depth } => format!("closed loop, queue depth {queue_depth}"),
        Pacing::Open { speed, max_in_flight } => {
            format!("open loop at {speed}x the trace's speed, at most {max_in_flight} in flight")
        }
    }
}

fn latency_json(l: &LatencySummary) -> Value {
    json!({
        "count": l.count, "mean_us": l.mean_us, "p50_us": l.p50_us, "p95_us": l.p95_us,
        "p99_us": l.p99_us, "p99_9_us": l.p999_us, "max_us": l.max_us,
    })
}

fn to_json(c: &Context_, r: &Report) -> Value {
    let s = c.stats;
    let timeline: Vec<Value> = r
        .timeline
        .iter()
        .enumerate()
        .map(|(i, b)| {
            json!({
                "start_s": (i as u64 * r.timeline_interval_ns) as f64 / 1e9,
                "reads": b.reads, "writes": b.writes, "read_bytes": b.read_bytes, "write_bytes": b.write_bytes,
                "mean_latency_us": b.mean_latency_us(), "max_latency_us": b.latency_max_ns as f64 / 1e3,
            })
        })
        .collect();
    json!({
        "trace": {
            "path": c.args.trace.display().to_string(), "format": c.format.name(), "volume": c.args.volume,
            "lines": s.lines, "records": s.records, "bad_lines_skipped": s.skipped_bad,
            "first_bad_line": s.first_bad, "other_volume_requests": s.other_volumes,
            "non_data_requests": s.non_data,
        },
        "target": c.target,
        "array": c.array,
        "seed": (c.target == "simulator").then_some(c.args.seed),
        "pacing": pacing_text(c.pacing),
        "map": {
            "mode": match c.args.map { Map::Wrap => "wrap", Map::Scale => "scale" },
            "widened": r.map.widened, "wrapped": r.map.wrapped, "moved_from_end": r.map.moved_from_end,
            "clipped": r.map.clipped,
        },
        "requests": r.requests, "reads": r.reads, "writes": r.writes,
        "read_bytes": r.read_bytes, "write_bytes": r.write_bytes, "reads_dropped": r.reads_dropped,
        "reads_of_unwritten_blocks": r.reads_unwritten,
        "issued_late": r.issued_late, "out_of_order": r.out_of_order,
        "elapsed_s": r.elapsed_s(), "mib_per_s": r.mib_per_s(), "iops": r.iops(),
        "latency": latency_json(&r.latency),
        "read_latency": latency_json(&r.read_latency),
        "write_latency": latency_json(&r.write_latency),
        "gc": r.gc.map(|gc| json!({
            "segments_reclaimed": gc.segments_reclaimed, "blocks_relocated": gc.blocks_relocated,
            "user_blocks_written": gc.user_blocks_written, "write_amplification": gc.write_amplification,
        })),
        "timeline_interval_s": r.timeline_interval_ns as f64 / 1e9,
        "timeline": timeline,
        "peak_resident_bytes": c.peak,
        "wall_s": c.wall_s,
    })
}

/// A virtual duration in the unit that keeps it readable.
fn duration_text(ns: u64) -> String {
    match ns {
        0..1_000_000 => format!("{:.1} us", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.3} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

/// A rate with as many decimals as it needs to show more than zero.
fn rate_text(rate: f64) -> String {
    if rate >= 100.0 {
        format!("{rate:.0}")
    } else if rate >= 0.1 {
        format!("{rate:.1}")
    } else {
        format!("{rate:.4}")
    }
}

fn latency_line(name: &str, l: &LatencySummary) -> String {
    format!(
        "{name:<7} {:>10} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
        l.count, l.mean_us, l.p50_us, l.p95_us, l.p99_us, l.p999_us, l.max_us
    )
}

fn print_text(c: &Context_, r: &Report) {
    let s = c.stats;
    let volume = c.args.volume.as_ref().map_or(String::new(), |v| format!(", volume {v}"));
    println!(
        "trace: {} ({}{volume}): {} lines, {} requests read; {} of other volumes, {} neither read nor write, {} bad lines skipped",
        c.args.trace.display(),
        c.format,
        s.lines,
        s.records,
        s.other_volumes,
        s.non_data,
        s.skipped_bad
    );
    if let Some(first) = &s.first_bad {
        println!("  first bad line: {first}");
    }
    let writes_only = if c.args.writes_only { ", writes only" } else { "" };
    if c.target == "simulator" {
        println!("array: {}", c.array);
        let seed = c.args.seed;
        println!(
            "target: the deterministic simulator (virtual time, seed {seed}); {}{writes_only}",
            pacing_text(c.pacing)
        );
    } else {
        println!("target: {}; {}{writes_only}", c.array, pacing_text(c.pacing));
    }
    let time = if c.target == "simulator" { "virtual time" } else { "wall time" };
    let m = &r.map;
    println!(
        "mapping ({}): {} requests widened to whole blocks, {} wrapped, {} moved back from the array's end, {} cut to the array's size or 8 MiB",
        match c.args.map {
            Map::Wrap => "wrap",
            Map::Scale => "scale",
        },
        m.widened,
        m.wrapped,
        m.moved_from_end,
        m.clipped
    );
    println!(
        "\n{} requests ({} reads of {}, {} writes of {}{}) in {} of {time}: {} IOPS, {} MiB/s",
        r.requests,
        r.reads,
        format_bytes(r.read_bytes),
        r.writes,
        format_bytes(r.write_bytes),
        if r.reads_dropped > 0 { format!("; {} reads left out", r.reads_dropped) } else { String::new() },
        duration_text(r.elapsed_ns),
        rate_text(r.iops()),
        rate_text(r.mib_per_s())
    );
    if r.reads_unwritten > 0 {
        println!(
            "{} reads were of blocks not written before in the replay: the engine answers those with zeros \
             from its mapping table, without drive I/O",
            r.reads_unwritten
        );
    }
    if let Pacing::Open { .. } = c.pacing {
        println!(
            "open loop: {} requests issued after their trace time (in-flight cap reached), {} with timestamps out of order",
            r.issued_late, r.out_of_order
        );
    }
    println!(
        "\n{:<7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "latency", "requests", "mean us", "p50 us", "p95 us", "p99 us", "p99.9 us", "max us"
    );
    println!("{}", latency_line("all", &r.latency));
    println!("{}", latency_line("reads", &r.read_latency));
    println!("{}", latency_line("writes", &r.write_latency));
    match &r.gc {
        Some(gc) => println!(
            "\ngarbage collection: {} segments reclaimed, {} blocks relocated; write amplification {:.3} \
             ((user blocks + relocated) / user blocks, parity not counted)",
            gc.segments_reclaimed, gc.blocks_relocated, gc.write_amplification
        ),
        None => println!("\ngarbage collection: not seen from a block device"),
    }
    if c.args.timeline {
        let interval_s = r.timeline_interval_ns as f64 / 1e9;
        println!("\ntimeline ({interval_s} s intervals, by completion time)");
        println!(
            "{:>10} {:>9} {:>9} {:>10} {:>10} {:>13}",
            "start s", "reads", "writes", "read MiB", "write MiB", "mean lat us"
        );
        for (i, b) in r.timeline.iter().enumerate() {
            println!(
                "{:>10.1} {:>9} {:>9} {:>10.1} {:>10.1} {:>13.1}",
                i as f64 * interval_s,
                b.reads,
                b.writes,
                b.read_bytes as f64 / (1 << 20) as f64,
                b.write_bytes as f64 / (1 << 20) as f64,
                b.mean_latency_us()
            );
        }
    }
    let peak = c.peak.map_or("unknown".to_string(), format_bytes);
    println!("\npeak resident size {peak} (VmHWM); {:.1} s wall time", c.wall_s);
}
