//! `zapraid device`: single zoned devices, real (`/dev/ngXnY`, NVMe passthrough) or
//! emulated (drive files): geometry and zones, the conformance suite, zone resets and a
//! write benchmark.

use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use zapraid_zns::calibrate::{closed_loop, Workload, WriteKind};
use zapraid_zns::{
    conformance, execute, report_all_zones, Command, EmulatedDrive, Geometry, NvmeDrive, ZoneAction, ZoneDescriptor,
    ZoneState, ZoneTarget, ZonedDevice,
};

use crate::size::{format_bytes, parse_bytes};

#[derive(Subcommand)]
pub enum DeviceCommand {
    /// Show a device's geometry (as the device reports it) and its zones.
    Info {
        /// An NVMe ZNS namespace (/dev/ngXnY) or an emulated drive file.
        device: PathBuf,
        /// List every zone, not only those holding data or resources.
        #[arg(long)]
        all_zones: bool,
    },
    /// Run the device conformance suite: what every zoned backend must do. Erases the device.
    Conformance {
        /// NVMe ZNS namespaces (/dev/ngXnY) or emulated drive files.
        #[arg(required = true)]
        devices: Vec<PathBuf>,
        /// Confirm that the devices' contents may be erased.
        #[arg(long)]
        erase: bool,
    },
    /// Reset zones (all, or one), erasing their data.
    Reset {
        device: PathBuf,
        /// Only this zone (index); default: every zone.
        #[arg(long)]
        zone: Option<u32>,
        /// Confirm that the data may be erased.
        #[arg(long)]
        erase: bool,
    },
    /// Measure Zone Write (queue depth 1) and Zone Append (queue depth 4 and 8) throughput
    /// on one zone, in wall-clock time. Erases the device.
    Bench {
        device: PathBuf,
        /// Request size.
        #[arg(long, default_value = "4K", value_parser = parse_bytes)]
        request: u64,
        /// Data written per measurement (at most one zone's capacity).
        #[arg(long, default_value = "32M", value_parser = parse_bytes)]
        size: u64,
        /// Confirm that the device's contents may be erased.
        #[arg(long)]
        erase: bool,
    },
}

/// Opens a real NVMe device (a character device) or an emulated drive file.
pub fn open_device(path: &Path) -> Result<Box<dyn ZonedDevice>> {
    let meta = std::fs::metadata(path).with_context(|| format!("{} does not exist", path.display()))?;
    if meta.file_type().is_char_device() {
        Ok(Box::new(NvmeDrive::open(path)?))
    } else if meta.is_file() {
        Ok(Box::new(EmulatedDrive::open_file(path)?))
    } else {
        bail!("{} is neither an NVMe namespace (/dev/ngXnY) nor an emulated drive file", path.display())
    }
}

pub fn run(command: DeviceCommand) -> Result<()> {
    match command {
        DeviceCommand::Info { device, all_zones } => {
            let mut dev = open_device(&device)?;
            let zones = report_all_zones(&mut *dev)?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", device.display())?;
            print_info(&mut out, &dev.geometry(), &zones, all_zones)
        }
        DeviceCommand::Conformance { devices, erase } => {
            if !erase {
                bail!("the conformance suite erases every zone of {} device(s); add --erase to confirm", devices.len());
            }
            run_conformance(&devices)
        }
        DeviceCommand::Reset { device, zone, erase } => {
            if !erase {
                bail!("resetting zones erases their data; add --erase to confirm");
            }
            let mut dev = open_device(&device)?;
            let geometry = dev.geometry();
            let target = match zone {
                Some(z) if z >= geometry.zone_count => {
                    bail!("zone {z} does not exist ({} zones)", geometry.zone_count)
                }
                Some(z) => ZoneTarget::Zone { start_lba: geometry.zone_start_lba(z) },
                None => ZoneTarget::All,
            };
            execute(&mut *dev, Command::ManageZone { action: ZoneAction::Reset, target }).result?;
            Ok(())
        }
        DeviceCommand::Bench { device, request, size, erase } => {
            if !erase {
                bail!("the benchmark writes over the device; add --erase to confirm");
            }
            bench(&device, request, size)
        }
    }
}

/// Runs the suite on each device; an error if any fails.
pub fn run_conformance(devices: &[PathBuf]) -> Result<()> {
    let mut failed = 0;
    for path in devices {
        let mut dev = open_device(path)?;
        let report = conformance::run(&mut *dev);
        println!("{}:\n{report}", path.display());
        failed += usize::from(!report.passed());
    }
    if failed > 0 {
        bail!("{failed} device(s) failed the conformance suite");
    }
    Ok(())
}

/// Prints geometry, limits and zones.
pub fn print_info(out: &mut impl Write, g: &Geometry, zones: &[ZoneDescriptor], all_zones: bool) -> Result<()> {
    let block = u64::from(g.block_size_bytes);
    let count = |s: ZoneState| zones.iter().filter(|z| z.state == s).count();
    let limit = |l: Option<u32>| l.map_or("none".to_string(), |v| v.to_string());
    writeln!(
        out,
        "  geometry        {} zones x {} (capacity {}), {} B blocks, {} B metadata/block",
        g.zone_count,
        format_bytes(g.zone_size_blocks * block),
        format_bytes(g.zone_capacity_blocks * block),
        g.block_size_bytes,
        g.metadata_bytes_per_block
    )?;
    writeln!(
        out,
        "  limits          open {}, active {}, append {}, transfer {}{}",
        limit(g.max_open_zones),
        limit(g.max_active_zones),
        format_bytes(u64::from(g.zone_append_max_blocks) * block),
        format_bytes(u64::from(g.max_transfer_blocks) * block),
        match g.transfer_granule_blocks {
            0 => String::new(),
            granule => format!(" (above {}: whole multiples of it)", format_bytes(u64::from(granule) * block)),
        }
    )?;
    let written: u64 = zones.iter().map(|z| z.written_blocks().min(z.capacity_blocks)).sum();
    writeln!(
        out,
        "  zones           {} empty, {} open, {} closed, {} full, {} read-only, {} offline; {} written",
        count(ZoneState::Empty),
        count(ZoneState::ImplicitlyOpen) + count(ZoneState::ExplicitlyOpen),
        count(ZoneState::Closed),
        count(ZoneState::Full),
        count(ZoneState::ReadOnly),
        count(ZoneState::Offline),
        format_bytes(written * block)
    )?;
    let shown: Vec<_> = zones.iter().filter(|z| all_zones || z.state != ZoneState::Empty).collect();
    if !shown.is_empty() {
        writeln!(out, "  {:>6}  {:<9}  {:>14}  {:>14}", "zone", "state", "start LBA", "write pointer")?;
        for z in shown {
            writeln!(out, "  {:>6}  {:<9}  {:>14}  {:>14}", z.zone, z.state.name(), z.start_lba, z.write_pointer)?;
        }
    }
    Ok(())
}

fn bench(path: &Path, request_bytes: u64, size: u64) -> Result<()> {
    let mut dev = open_device(path)?;
    let g = dev.geometry();
    let block = u64::from(g.block_size_bytes);
    if request_bytes == 0 || !request_bytes.is_multiple_of(block) {
        bail!("request size {request_bytes} is not a whole number of {block}-byte blocks");
    }
    let capacity = g.zone_capacity_blocks * block;
    let size = size.min(capacity - capacity % request_bytes);
    let requests = size / request_bytes;
    if requests == 0 {
        bail!("nothing to write: --size is below one request");
    }
    let start = Instant::now();
    let clock = move |_: &(dyn ZonedDevice + 'static)| start.elapsed().as_nanos() as u64;
    println!(
        "{}: {} of {} requests per point, one zone",
        path.display(),
        format_bytes(requests * request_bytes),
        format_bytes(request_bytes)
    );
    for (kind, queue_depth) in [(WriteKind::ZoneWrite, 1), (WriteKind::ZoneAppend, 4), (WriteKind::ZoneAppend, 8)] {
        execute(&mut *dev, Command::ManageZone { action: ZoneAction::Reset, target: ZoneTarget::All }).result?;
        let workload = Workload { kind, request_bytes: request_bytes as u32, open_zones: 1, queue_depth, requests };
        let mib_per_s = closed_loop(&mut *dev, workload, &clock)?;
        let iops = mib_per_s * 1024.0 * 1024.0 / request_bytes as f64;
        println!("zapraid {:<11} QD {queue_depth}: {mib_per_s:>9.1} MiB/s {iops:>10.0} IOPS", kind.name());
    }
    execute(&mut *dev, Command::ManageZone { action: ZoneAction::Reset, target: ZoneTarget::All }).result?;
    Ok(())
}
