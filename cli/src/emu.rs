//! `zapraid emu`: emulated ZNS drive files and the timing model.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use zapraid_zns::calibrate::{self, Point, WriteKind, MAX_OPEN_ZONES, REQUEST_SIZES_BYTES};
use zapraid_zns::{EmulatedDrive, Geometry, TimingParams, ZonedDevice};

use crate::size::{format_bytes, parse_bytes};

/// File name extension of emulated drive files.
const DRIVE_EXTENSION: &str = "zns";

#[derive(Subcommand)]
pub enum EmuCommand {
    /// Create N emulated ZNS drive files (drive0.zns, drive1.zns, ...) in a directory.
    ///
    /// Files are sparse: they take disk space only as data is written. The default
    /// geometry is that of the QEMU ZNS drives zapraid is tested on (4 KiB blocks, 64 B
    /// per-block metadata, 64 MiB zones of 62 MiB capacity, 14 open/active zones).
    Create(CreateArgs),
    /// Show the geometry and zones of emulated drives (a directory or drive files).
    Info {
        /// A directory of drive files, or drive files.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// List every zone, not only those holding data or resources.
        #[arg(long)]
        all_zones: bool,
    },
    /// Run the ZapRAID paper's Figure 2 experiment on the emulated ZN540 in virtual time.
    ///
    /// Zone Write at queue depth 1 and Zone Append at queue depth 4, with 4, 8 and 16 KiB
    /// requests, one open zone and then 1 to 8 open zones; prints measured vs paper MiB/s.
    Calibrate {
        /// Seed of the emulator's random landing order and jitter.
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Preset {
    /// QEMU NVMe ZNS drive as zapraid's guest tests use: 2 GiB, 64 MiB zones, 62 MiB capacity.
    Qemu,
    /// WD Ultrastar DC ZN540 as in the paper: 3,690 zones of 2 GiB, 1,077 MiB capacity (7.2 TiB sparse).
    Zn540,
}

#[derive(Args)]
pub struct CreateArgs {
    /// Directory for the drive files (created if missing).
    #[arg(long)]
    dir: PathBuf,
    /// Number of drives.
    #[arg(long, default_value_t = 4)]
    drives: u32,
    /// Starting geometry; the options below override parts of it.
    #[arg(long, value_enum, default_value = "qemu")]
    preset: Preset,
    /// Number of zones per drive.
    #[arg(long)]
    zones: Option<u32>,
    /// Zone size (distance between zone starts), e.g. 64M.
    #[arg(long, value_parser = parse_bytes)]
    zone_size: Option<u64>,
    /// Writable bytes per zone (at most the zone size), e.g. 62M.
    #[arg(long, value_parser = parse_bytes)]
    zone_capacity: Option<u64>,
    /// Logical block size, e.g. 4K or 512.
    #[arg(long, value_parser = parse_bytes)]
    block_size: Option<u64>,
    /// Per-block metadata (OOB) bytes: 0, 8, 16, 64, ...
    #[arg(long)]
    metadata: Option<u32>,
    /// Most open zones (0: no limit).
    #[arg(long)]
    max_open: Option<u32>,
    /// Most active zones (0: no limit).
    #[arg(long)]
    max_active: Option<u32>,
    /// Largest Zone Append, e.g. 128K.
    #[arg(long, value_parser = parse_bytes)]
    append_limit: Option<u64>,
    /// Largest read or write, e.g. 256K.
    #[arg(long, value_parser = parse_bytes)]
    max_transfer: Option<u64>,
    /// Seed of each drive's landing order (drive i uses seed + i).
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

pub fn run(command: EmuCommand) -> Result<()> {
    match command {
        EmuCommand::Create(args) => create(args),
        EmuCommand::Info { paths, all_zones } => info(&paths, all_zones),
        EmuCommand::Calibrate { seed } => calibrate_cmd(seed),
    }
}

fn qemu_geometry() -> Geometry {
    const BLOCK: u64 = 4096;
    const ZONE_SIZE: u64 = 64 << 20;
    const ZONE_CAPACITY: u64 = 62 << 20;
    const ZONES: u32 = 31;
    const APPEND_LIMIT: u64 = 128 << 10;
    const MAX_TRANSFER: u64 = 512 << 10;
    Geometry {
        block_size_bytes: BLOCK as u32,
        metadata_bytes_per_block: 64,
        zone_size_blocks: ZONE_SIZE / BLOCK,
        zone_capacity_blocks: ZONE_CAPACITY / BLOCK,
        zone_count: ZONES,
        max_open_zones: Some(14),
        max_active_zones: Some(14),
        zone_append_max_blocks: (APPEND_LIMIT / BLOCK) as u32,
        max_transfer_blocks: (MAX_TRANSFER / BLOCK) as u32,
        transfer_granule_blocks: 0,
    }
}

fn blocks_of(what: &str, bytes: u64, block: u64) -> Result<u64> {
    if bytes == 0 || !bytes.is_multiple_of(block) {
        bail!("{what} of {bytes} bytes is not a whole, non-zero number of {block}-byte blocks");
    }
    Ok(bytes / block)
}

fn geometry_from(args: &CreateArgs) -> Result<Geometry> {
    let mut g = match args.preset {
        Preset::Qemu => qemu_geometry(),
        Preset::Zn540 => Geometry::zn540(),
    };
    let old_block = u64::from(g.block_size_bytes);
    let zone_size = args.zone_size.unwrap_or(g.zone_size_blocks * old_block);
    let zone_capacity = args.zone_capacity.unwrap_or(g.zone_capacity_blocks * old_block);
    let append_limit = args.append_limit.unwrap_or(u64::from(g.zone_append_max_blocks) * old_block);
    let max_transfer = args.max_transfer.unwrap_or(u64::from(g.max_transfer_blocks) * old_block);
    let block = args.block_size.unwrap_or(old_block);
    if block > u64::from(u32::MAX) {
        bail!("block size {block} is too large");
    }
    g.block_size_bytes = block as u32;
    g.zone_size_blocks = blocks_of("zone size", zone_size, block)?;
    g.zone_capacity_blocks = blocks_of("zone capacity", zone_capacity, block)?;
    g.zone_append_max_blocks = u32::try_from(blocks_of("append limit", append_limit, block)?)?;
    g.max_transfer_blocks = u32::try_from(blocks_of("max transfer", max_transfer, block)?)?;
    if let Some(zones) = args.zones {
        g.zone_count = zones;
    }
    if let Some(metadata) = args.metadata {
        g.metadata_bytes_per_block = metadata;
    }
    let limit = |v: u32| if v == 0 { None } else { Some(v) };
    if let Some(v) = args.max_open {
        g.max_open_zones = limit(v);
    }
    if let Some(v) = args.max_active {
        g.max_active_zones = limit(v);
    }
    g.validate()?;
    Ok(g)
}

fn drive_path(dir: &Path, index: u32) -> PathBuf {
    dir.join(format!("drive{index}.{DRIVE_EXTENSION}"))
}

fn create(args: CreateArgs) -> Result<()> {
    let geometry = geometry_from(&args)?;
    if args.drives == 0 {
        bail!("--drives must be at least 1");
    }
    std::fs::create_dir_all(&args.dir).with_context(|| format!("creating directory {}", args.dir.display()))?;
    let paths: Vec<PathBuf> = (0..args.drives).map(|i| drive_path(&args.dir, i)).collect();
    if let Some(existing) = paths.iter().find(|p| p.exists()) {
        bail!(
            "{} already exists; zapraid does not overwrite drives (remove it or choose another --dir)",
            existing.display()
        );
    }
    for (i, path) in paths.iter().enumerate() {
        EmulatedDrive::create_file(path, geometry, args.seed + i as u64)?;
    }
    println!(
        "created {} emulated ZNS drives in {}: {} zones of {} ({} writable), {} B blocks, {} B metadata per block",
        args.drives,
        args.dir.display(),
        geometry.zone_count,
        format_bytes(geometry.zone_size_blocks * u64::from(geometry.block_size_bytes)),
        format_bytes(geometry.zone_capacity_blocks * u64::from(geometry.block_size_bytes)),
        geometry.block_size_bytes,
        geometry.metadata_bytes_per_block,
    );
    Ok(())
}

/// Drive files named by `paths`: directories contribute their `*.zns` files in order.
fn drive_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).with_context(|| format!("{} does not exist", path.display()))?;
        if meta.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("reading directory {}", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == DRIVE_EXTENSION))
                .collect();
            if found.is_empty() {
                bail!(
                    "{} holds no emulated drives (*.{DRIVE_EXTENSION}); create some with `zapraid emu create --dir {}`",
                    path.display(),
                    path.display()
                );
            }
            found.sort_by_key(|p| natural_key(p));
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// Sorts drive10 after drive9.
fn natural_key(path: &Path) -> (String, u64) {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let digits = stem.trim_start_matches(|c: char| !c.is_ascii_digit());
    (stem.trim_end_matches(|c: char| c.is_ascii_digit()).to_string(), digits.parse().unwrap_or(0))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn info(paths: &[PathBuf], all_zones: bool) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for path in drive_files(paths)? {
        let drive = EmulatedDrive::open_file(&path)?;
        writeln!(out, "{}", path.display())?;
        writeln!(out, "  uuid            {}", hex(&drive.drive_uuid()))?;
        crate::device::print_info(&mut out, &drive.geometry(), &drive.zones(), all_zones)?;
    }
    Ok(())
}

fn progress_bar(len: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar
}

fn calibrate_cmd(seed: u64) -> Result<()> {
    let params = TimingParams::zn540();
    let total = 2 * REQUEST_SIZES_BYTES.len() as u64 * u64::from(MAX_OPEN_ZONES);
    let bar = progress_bar(total);
    let points = calibrate::figure2(&params, seed, |p| {
        bar.set_message(format!("{} {} KiB, {} zones", p.kind.name(), p.request_bytes / 1024, p.open_zones));
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    print!("{}", render_calibration(&points));
    Ok(())
}

const SINGLE_ZONE_TOLERANCE: f64 = 0.15;

fn render_calibration(points: &[Point]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let at = |kind, bytes, zones| {
        points
            .iter()
            .find(|p| p.kind == kind && p.request_bytes == bytes && p.open_zones == zones)
            .expect("figure2 measures every point")
    };
    let _ = writeln!(out, "ZapRAID paper Figure 2 on the emulated WD ZN540 (virtual time, MiB/s)\n");
    let _ = writeln!(out, "One open zone              measured     paper  deviation");
    let mut worst: f64 = 0.0;
    for kind in [WriteKind::ZoneWrite, WriteKind::ZoneAppend] {
        for bytes in REQUEST_SIZES_BYTES {
            let p = at(kind, bytes, 1);
            let deviation = p.deviation().expect("the paper gives every single-zone point");
            worst = worst.max(deviation.abs());
            let _ = writeln!(
                out,
                "{:<11} QD {} {:>2} KiB  {:>10.1} {:>9.1} {:>+9.1}%",
                kind.name(),
                kind.paper_queue_depth(),
                bytes / 1024,
                p.mib_per_s,
                p.paper_mib_per_s.expect("paper figure"),
                deviation * 100.0
            );
        }
    }
    let _ = writeln!(out, "\nOpen zones   Zone Write (QD 1 per zone)       Zone Append (QD 4 per zone)");
    let _ = writeln!(out, "               4 KiB    8 KiB   16 KiB            4 KiB    8 KiB   16 KiB");
    for zones in 1..=MAX_OPEN_ZONES {
        let mut line = format!("{zones:>10}  ");
        for kind in [WriteKind::ZoneWrite, WriteKind::ZoneAppend] {
            for bytes in REQUEST_SIZES_BYTES {
                let _ = write!(line, " {:>8.1}", at(kind, bytes, zones).mib_per_s);
            }
            line.push_str("         ");
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let _ = writeln!(
        out,
        "\nPaper, multi-zone: Zone Write 4 KiB 777.1 at 6 zones, 8 KiB 1,430.7 at 8, 16 KiB about 1,750 at 8;"
    );
    let _ = writeln!(out, "                   Zone Append peaks at 2 zones: 577.5 (4 KiB), 1,058.6 (8 KiB).");
    for p in points.iter().filter(|p| p.open_zones > 1) {
        if let (Some(paper), Some(dev)) = (p.paper_mib_per_s, p.deviation()) {
            let _ = writeln!(
                out,
                "  {} {:>2} KiB at {} zones: measured {:.1}, paper {:.1} ({:+.1}%)",
                p.kind.name(),
                p.request_bytes / 1024,
                p.open_zones,
                p.mib_per_s,
                paper,
                dev * 100.0
            );
        }
    }
    let write_grows = REQUEST_SIZES_BYTES
        .iter()
        .all(|b| at(WriteKind::ZoneWrite, *b, MAX_OPEN_ZONES).mib_per_s > at(WriteKind::ZoneWrite, *b, 1).mib_per_s);
    let append_peaks: Vec<u32> = [4096, 8192]
        .iter()
        .map(|b| {
            (1..=MAX_OPEN_ZONES)
                .max_by(|x, y| {
                    at(WriteKind::ZoneAppend, *b, *x).mib_per_s.total_cmp(&at(WriteKind::ZoneAppend, *b, *y).mib_per_s)
                })
                .expect("zones")
        })
        .collect();
    let verdict = |ok: bool| if ok { "yes" } else { "NO" };
    let _ = writeln!(
        out,
        "\nSingle-zone figures within {:.0}% of the paper: {} (worst {:.1}%)",
        SINGLE_ZONE_TOLERANCE * 100.0,
        verdict(worst <= SINGLE_ZONE_TOLERANCE),
        worst * 100.0
    );
    let _ = writeln!(out, "Zone Write grows with open zones: {}", verdict(write_grows));
    let _ = writeln!(
        out,
        "Zone Append peaks at 2 open zones: {} (4 KiB peak at {}, 8 KiB peak at {})",
        verdict(append_peaks.iter().all(|z| *z == 2)),
        append_peaks[0],
        append_peaks[1]
    );
    out
}
