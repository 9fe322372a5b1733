//! `zapraid replay TRACE`: replays a block I/O trace (Alibaba 2020, Tencent CBS 2018, MSR
//! Cambridge, fio iolog v2/v3; plain or gzip) against an array in the deterministic
//! simulator (virtual time, ZN540 timing model), streaming the trace, and prints
//! throughput, IOPS, latency percentiles, the read/write split, garbage collection and a
//! timeline, for people or as JSON (`output`). Other targets, in wall time: an array's
//! drives (the engine in this process; the array stopped) or a block device such as a
//! running array's `/dev/ublkbN` (`replay_targets`).
//!
//! Before the clock starts, a prefill (the simulator's default, `--prefill` elsewhere)
//! writes every block the replay will touch once, so that reads find data as on a volume
//! in use. `--utilization U` sizes the simulated array (its zones' capacity) so that the
//! trace's footprint, packed onto it (`--map compact`), fills U of its logical blocks:
//! garbage collection then runs as on a full volume.

mod output;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use zapraid_engine::{Config, Engine, Simulator, DEFAULT_STRIPE_TIMEOUT_NS, PAPER_LOOKUP_PS_PER_ENTRY};
use zapraid_trace::replay::{
    array_footprint, prefill, replay, trace_footprint, AddressMap, Footprint, MapMode, Pacing, Prefill, ReplayConfig,
    Target,
};
use zapraid_trace::{address_span_bytes, Format, ReadOptions, TraceReader};
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
    /// The trace's distinct blocks (a first pass finds them) packed onto the array's
    /// first blocks in address order: none collide, requests stay contiguous.
    Compact,
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
    /// How addresses beyond the array are brought into it (default: wrap; compact with
    /// --utilization).
    #[arg(long, value_enum)]
    map: Option<Map>,
    /// Before the clock starts, write every block the replay reads or writes once (in 1 MiB
    /// requests), so that no read is of a block never written (the engine would answer it
    /// from its mapping table in no time). Not counted in the figures. The default for the
    /// simulator; for --on-drives and --device it is real I/O over the trace's footprint
    /// (overwriting what is there), off unless asked for.
    #[arg(long, overrides_with = "no_prefill")]
    prefill: bool,
    /// No prefill: the replay starts on the array as it is (the simulator's: empty).
    #[arg(long)]
    no_prefill: bool,
    /// Simulator only: size the array (the capacity of its zones) so that the trace's
    /// footprint (distinct blocks it reads or writes) fills this share of its logical
    /// blocks, 0 < U <= 1, so that garbage collection runs as on a full volume. Implies
    /// --map compact, and --zones 64 unless given.
    #[arg(long, value_name = "U")]
    utilization: Option<f64>,
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
    /// With --on-drives: start the array without members that are missing, as far as the
    /// RAID level survives their loss (as `start --degraded`): they are recorded failed,
    /// and stay failed even if they come back.
    #[arg(long, requires = "on_drives")]
    degraded: bool,
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
    /// Zones per drive (16 by default, small so that a replay runs fast and fits in
    /// memory: the simulator keeps the data written; 64 with --utilization).
    #[arg(long)]
    zones: Option<u32>,
    /// Seed of the drives' landing order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    segments: OpenSegmentArgs,
}

/// Zones per drive of the simulated array without --zones.
const DEFAULT_ZONES: u32 = 16;
/// ... with --utilization: enough that the zones held back for garbage collection and
/// recovery are a small share of the array, as on a real drive.
const UTILIZATION_ZONES: u32 = 64;

impl ReplayArgs {
    fn zones(&self) -> u32 {
        self.zones.unwrap_or(if self.utilization.is_some() { UTILIZATION_ZONES } else { DEFAULT_ZONES })
    }

    fn map(&self) -> Map {
        self.map.unwrap_or(if self.utilization.is_some() { Map::Compact } else { Map::Wrap })
    }

    fn on_simulator(&self) -> bool {
        self.device.is_none() && self.on_drives.is_empty()
    }

    /// Whether to prefill: asked for, or the simulator's default.
    fn prefill(&self) -> bool {
        !self.no_prefill && (self.prefill || self.on_simulator())
    }

    /// Refuses combinations that cannot mean what they say.
    fn check(&self) -> Result<()> {
        if let Some(u) = self.utilization {
            if !(u > 0.0 && u <= 1.0) {
                bail!("--utilization {u}: the share of the array the trace's footprint fills must be above 0 and at most 1");
            }
            if !self.on_simulator() {
                bail!(
                    "--utilization sizes the simulated array; an array on drives or a block device has its own size \
                     (replay onto it with --map compact to pack the trace's footprint onto it)"
                );
            }
            if !matches!(self.map(), Map::Compact) {
                bail!(
                    "--utilization needs --map compact: wrapping or scaling the trace onto an array sized by its \
                     footprint would fold distinct blocks onto each other"
                );
            }
        }
        Ok(())
    }
}

fn geometry(args: &ReplayArgs) -> Geometry {
    let zones = args.zones();
    match args.geometry {
        DriveGeometry::Qemu => {
            Geometry { zone_append_max_blocks: 32, max_transfer_blocks: 128, ..Geometry::small(zones, 16384, 15872) }
        }
        DriveGeometry::Zn540 => Geometry { zone_count: zones, ..Geometry::zn540() },
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
        let target = DrivesTarget::start(&args.on_drives, args.degraded)
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

/// A progress bar on standard error when it is a terminal.
fn progress_bar(total: u64, template: &str, message: &str) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(template).unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message(message.to_string());
    Some(bar)
}

pub fn run(args: ReplayArgs) -> Result<()> {
    let wall = Instant::now();
    args.check()?;
    let pacing = match (args.speed, args.queue_depth) {
        (Some(speed), _) => Pacing::Open { speed, max_in_flight: args.max_in_flight },
        (None, depth) => Pacing::Closed { queue_depth: depth.unwrap_or(32) },
    };
    if matches!(pacing, Pacing::Closed { queue_depth: 0 }) {
        bail!("--queue-depth must be at least 1");
    }
    let options =
        ReadOptions { format: args.format.map(Format::from), volume: args.volume.clone(), skip_bad: args.skip_bad };
    let mut replay_config =
        ReplayConfig { pacing, writes_only: args.writes_only, map: MapMode::Wrap, limit: args.limit };
    let map = args.map();
    replay_config.map = match map {
        Map::Wrap => MapMode::Wrap,
        Map::Scale => MapMode::Scale {
            span_bytes: address_span_bytes(&args.trace, options.clone())
                .with_context(|| format!("finding the address range of {}", args.trace.display()))?,
        },
        Map::Compact => {
            let block_bytes = u64::from(geometry(&args).block_size_bytes);
            let reader = TraceReader::open(&args.trace, options.clone())?;
            let footprint = trace_footprint(reader, &replay_config, block_bytes)
                .with_context(|| format!("finding the blocks {} touches", args.trace.display()))?;
            MapMode::Compact { footprint: Arc::new(footprint) }
        }
    };
    let trace_blocks = match &replay_config.map {
        MapMode::Compact { footprint } => Some(footprint.blocks()),
        _ => None,
    };
    let (mut chosen, array) = match wall_time_target(&args, pacing)? {
        Some(chosen) => chosen,
        None => simulator_target(&args, trace_blocks)?,
    };
    let target = chosen.target();
    let (logical_blocks, block_bytes) = (target.logical_blocks(), target.block_bytes());
    if let Some(blocks) = trace_blocks.filter(|&b| b > logical_blocks) {
        bail!(
            "the trace touches {blocks} distinct blocks, more than the array's {logical_blocks}: --map compact \
             cannot pack them onto it (give more --zones, or --utilization)"
        );
    }
    let prefilled = if args.prefill() { Some(run_prefill(&args, &options, &replay_config, target)?) } else { None };
    let mut reader = TraceReader::open(&args.trace, options)?;
    let format = reader.format();
    let (bytes_read, file_bytes) = (reader.bytes_read(), reader.file_bytes().unwrap_or(0));
    let bar = progress_bar(
        file_bytes,
        "{spinner} replaying [{bar:30}] {bytes}/{total_bytes} of the trace, {msg}, ETA {eta}",
        "0 requests",
    );
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
    let context = output::Context_ {
        args: &args,
        format,
        stats: &stats,
        array,
        target: target_name,
        pacing,
        map,
        prefill: prefilled,
        fill: args
            .utilization
            .and(trace_blocks)
            .map(|footprint_blocks| output::Fill { footprint_blocks, logical_blocks }),
        block_bytes,
        peak: peak_resident_bytes(),
        wall_s: wall.elapsed().as_secs_f64(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&output::to_json(&context, &report))?);
    } else {
        output::print_text(&context, &report);
    }
    Ok(())
}

/// Writes every array block the replay will touch once (a packed footprint is the array's
/// first blocks; otherwise a pass over the trace maps each request as the replay will).
fn run_prefill(
    args: &ReplayArgs,
    options: &ReadOptions,
    config: &ReplayConfig,
    target: &mut dyn Target,
) -> Result<Prefill> {
    let footprint = match &config.map {
        MapMode::Compact { footprint } => Footprint::from_runs([(0, footprint.blocks())]),
        map => {
            let reader = TraceReader::open(&args.trace, options.clone())?;
            let address_map = AddressMap::new(map.clone(), target.logical_blocks(), target.block_bytes());
            array_footprint(reader, config, &address_map)
                .with_context(|| format!("finding the blocks {} touches", args.trace.display()))?
        }
    };
    let bar = progress_bar(footprint.blocks(), "{spinner} prefilling [{bar:30}] {pos}/{len} blocks, ETA {eta}", "");
    let result = prefill(target, &footprint, &mut |blocks| {
        if let Some(bar) = &bar {
            bar.set_position(blocks);
        }
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    result.context("prefilling the blocks the trace touches")
}

/// The array the arguments describe: `--zones` zones of the chosen geometry, or with
/// `--utilization`, zones whose capacity makes `footprint_blocks` fill that share of the
/// array's logical blocks.
fn simulator_geometry(args: &ReplayArgs, config: &mut Config, footprint_blocks: Option<u64>) -> Result<Geometry> {
    let mut g = geometry(args);
    let Some((u, footprint)) = args.utilization.zip(footprint_blocks) else {
        config.logical_blocks = Engine::format(g, *config)?.plan().capacity_blocks(g.zone_count);
        if config.logical_blocks == 0 {
            bail!("{} zones per drive leave no room for data; give more with --zones", g.zone_count);
        }
        return Ok(g);
    };
    let wanted = ((footprint as f64 / u).ceil() as u64).max(footprint).max(1);
    // The exported capacity grows with the zones' capacity: the smallest one that holds
    // `wanted` blocks leaves garbage collection only the room it always keeps.
    let capacity = |cap: u64| -> u64 {
        let sized = Geometry { zone_capacity_blocks: cap, zone_size_blocks: cap.next_power_of_two(), ..g };
        Engine::format(sized, *config).map_or(0, |e| e.plan().capacity_blocks(sized.zone_count))
    };
    let most = g.zone_capacity_blocks;
    if capacity(most) >= wanted {
        let (mut low, mut high) = (1, most);
        while low < high {
            let mid = low + (high - low) / 2;
            if capacity(mid) >= wanted {
                high = mid;
            } else {
                low = mid + 1;
            }
        }
        g = Geometry { zone_capacity_blocks: low, zone_size_blocks: low.next_power_of_two(), ..g };
    } else {
        // Zones of the drive's full capacity are too few: more of them.
        g.zone_count = Engine::format(g, *config)?.plan().zones_for_capacity(wanted);
    }
    debug_assert!(Engine::format(g, *config)?.plan().capacity_blocks(g.zone_count) >= wanted);
    config.logical_blocks = wanted;
    Ok(g)
}

/// The simulator the arguments describe, and the text that says what array it runs.
fn simulator_target(args: &ReplayArgs, footprint_blocks: Option<u64>) -> Result<(Chosen, String)> {
    let level = raid_level(args.level, args.drives);
    level.validate()?;
    let mode = write_mode(args.mode, args.group_size);
    let open_segments = args.segments.open_segments(mode)?;
    let mut config = Config {
        level,
        mode,
        chunk_bytes: args.segments.small_chunk_bytes,
        open_segments,
        stripe_timeout_ns: DEFAULT_STRIPE_TIMEOUT_NS,
        logical_blocks: 1,
        array_uuid: [0x7e; 16],
        lookup_ps_per_entry: PAPER_LOOKUP_PS_PER_ENTRY,
        merge_appends: true,
        declustering: Default::default(),
        l2p: zapraid_engine::L2pConfig::default(),
    };
    let g = simulator_geometry(args, &mut config, footprint_blocks)?;
    let sim = Simulator::new(g, config, args.seed, Some(TimingParams::zn540()))?;
    let sized = if args.utilization.is_some() { ", sized for --utilization" } else { "" };
    let array = format!(
        "{level}, {mode}, {}, {} drives x {} zones of {}{sized} (emulated, ZN540 timing), {} logical; {}",
        chunks_text(args.segments.small_chunk_bytes, &open_segments),
        args.drives,
        g.zone_count,
        format_bytes(g.zone_capacity_blocks * u64::from(g.block_size_bytes)),
        format_bytes(config.logical_blocks * u64::from(g.block_size_bytes)),
        sim.engine_core(),
    );
    Ok((Chosen::Simulator(Box::new(sim)), array))
}
