//! `zapraid bench recovery`, `rebuild` and `rebuild-load` (Exp#5): crash recovery time
//! against the data written, full-drive recovery onto a new drive per chunk size, and a
//! rebuild's cost to user I/O; emulated drives with ZN540 timing, virtual time; with
//! their figures.

use anyhow::Result;
use zapraid_experiments::rebuild::{
    self as full_drive, rebuild_point, RebuildPoint, CHUNKS_BYTES, FAILED_DRIVE, PAPER_4K_S_PER_100_GIB,
    PAPER_LARGER_CHUNKS_LESS,
};
use zapraid_experiments::rebuild_load::LoadPoint;
use zapraid_experiments::{recovery_point, recovery_point_with, RecoveryPoint, Shutdown};

use super::{kib, BenchArgs, Out};
use crate::plot::{BarSeries, Bars, Figure, LineSeries, Lines, Panel};
use crate::size::format_bytes;

/// Sealed segments of data before drive 0 fails in `bench rebuild` (62 MiB zones: a
/// segment holds 186 MiB of data at 4 KiB chunks).
const REBUILD_SEGMENTS: u64 = 8;
const REBUILD_QUICK_SEGMENTS: u64 = 2;

/// Exp#5 full-drive recovery: per chunk size and scheme, the rebuild's virtual time per
/// 100 GiB of data beside the paper's and the bound the new drive's write bandwidth sets.
pub(super) fn rebuild(args: &BenchArgs, out: &mut Out) -> Result<()> {
    use std::io::Write;
    let segments = if args.quick { REBUILD_QUICK_SEGMENTS } else { REBUILD_SEGMENTS };
    say!(
        out,
        "Exp#5 full-drive recovery: (3+1)-RAID-5 on emulated WD ZN540 drives (ZN540 timing model, 62 MiB zones), \
         {segments} full segments of sequential writes, drive {FAILED_DRIVE} fails and is rebuilt onto an empty \
         drive (online, nothing else running); virtual time, seed {}",
        args.seed
    );
    say!(
        out,
        "write bound: what the new drive receives over its Zone Write bandwidth in the timing model for writes of \
         the rebuild's size (consecutive chunks, up to a transfer), one zone at QD 1 (how a rebuild of one segment \
         at a time writes) and the best of 1-8 open zones (what a rebuild of several segments at once, the \
         default, can reach); ZapRAID also rebuilt one segment at a time, side by side\n"
    );
    say!(
        out,
        "{:<7} {:<15} {:>10} {:>8} {:>7} {:>11} {:>9} {:>9} {:>11} {:>8} {:>13} {:>12} {:>12}",
        "chunk",
        "mode",
        "data",
        "segments",
        "at once",
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
    say!(
        out,
        "{:<7} {:<15} {:>10} {:>8} {:>7} {:>11} {:>9} {:>9} {:>11} {:>8} {:>13} {:>12} {:>12}",
        "",
        "",
        "",
        "",
        "",
        "got",
        "s",
        "MiB/s",
        per_100,
        "",
        per_100,
        per_100,
        per_100
    );
    // Per run its series name in the figure, and its point.
    let mut rows: Vec<(String, RebuildPoint)> = Vec::new();
    // The engine's default, for both schemes, then ZapRAID a segment at a time.
    let (zapraid, zapraid_mode) = full_drive::modes()[0];
    let runs = full_drive::modes().into_iter().map(|(name, mode)| (name, mode, None));
    let runs: Vec<_> = runs.chain(std::iter::once((zapraid, zapraid_mode, Some(1)))).collect();
    // Progress on a terminal only: in a log or a pipe it would be a line of clutter.
    let show_progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    for chunk in CHUNKS_BYTES {
        for &(name, mode, at_once) in &runs {
            let label = format!("{} KiB {name}", chunk / 1024);
            let point = rebuild_point(mode, chunk, segments, at_once, args.seed, |p| {
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
            let series = match at_once {
                Some(1) => format!("{name}, a segment at a time"),
                _ => name.to_string(),
            };
            let at_4k = rows.iter().find(|(n, p)| *n == series && p.chunk_bytes == CHUNKS_BYTES[0]);
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
            say!(
                out,
                "{:<7} {:<15} {:>10} {:>8} {:>7} {:>11} {:>9.2} {:>9.1} {:>11.1} {:>8} {:>13} {:>12.1} {:>12.1}",
                format!("{} KiB", chunk / 1024),
                name,
                format_bytes(point.data_bytes),
                point.segments,
                point.segments_at_once,
                format_bytes(point.new_drive_bytes),
                point.rebuild_s,
                point.new_drive_mib_per_s(),
                point.s_per_100_gib(),
                vs_4k,
                paper,
                point.one_zone_bound_s_per_100_gib(),
                point.drive_bound_s_per_100_gib()
            );
            rows.push((series, point));
        }
    }
    say!(
        out,
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
        let write_bytes = zapraid_experiments::rebuild::rebuild_write_bytes(&zapraid_zns::Geometry::zn540(), chunk);
        say!(
            out,
            "  timing model, {:>2} KiB chunks, the rebuild's {} KiB Zone Writes at QD 1: {one_zone:>7.1} MiB/s on one zone, \
             {drive:>7.1} MiB/s with the best of 1-8 open zones",
            chunk / 1024,
            write_bytes / 1024
        );
    }
    out.figure(rebuild_figure(&rows));
    Ok(())
}

/// Sealed segments of data in `bench rebuild-load` (16 KiB chunks, 62 MiB zones: a segment
/// holds 186 MiB of data).
const LOAD_SEGMENTS: u64 = 4;
const LOAD_QUICK_SEGMENTS: u64 = 1;

/// A rebuild's cost to user I/O: user IOPS and latency with no rebuild, a rebuild
/// unlimited and rate-limited, and each rebuild's time.
pub(super) fn rebuild_load(args: &BenchArgs, out: &mut Out) -> Result<()> {
    use std::io::Write;
    use zapraid_experiments::rebuild_load::{
        load_point, Case, BASELINE_REQUESTS, LOAD_CHUNK_BYTES, USER_QUEUE_DEPTH, USER_READ_PERCENT,
    };
    let segments = if args.quick { LOAD_QUICK_SEGMENTS } else { LOAD_SEGMENTS };
    say!(
        out,
        "rebuild under user load: (3+1)-RAID-5 on emulated WD ZN540 drives (ZN540 timing model, 62 MiB zones), \
         {} KiB chunks, {segments} full segments of sequential writes; users: 4 KiB random requests, \
         {USER_READ_PERCENT}% reads, queue depth {USER_QUEUE_DEPTH}, over the whole array; without a rebuild \
         {BASELINE_REQUESTS} requests, with one from drive {FAILED_DRIVE}'s replacement until it is rebuilt; \
         virtual time, seed {}\n",
        LOAD_CHUNK_BYTES / 1024,
        args.seed
    );
    say!(
        out,
        "{:<24} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "",
        "requests",
        "user IOPS",
        "read p50",
        "read p99",
        "write p50",
        "write p99",
        "rebuild",
        "new drive"
    );
    say!(
        out,
        "{:<24} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "",
        "",
        "",
        "us",
        "us",
        "us",
        "us",
        "s/100 GiB",
        "MiB/s"
    );
    let show_progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut measured = Vec::new();
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
        say!(
            out,
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
        measured.push((label, point));
    }
    out.figure(rebuild_load_figure(&measured));
    Ok(())
}

pub(super) fn recovery(args: &BenchArgs, out: &mut Out) -> Result<()> {
    const MIB: u64 = 1 << 20;
    // Whole sealed segments plus a half-full open one, so the slope is the cost of data
    // in sealed segments and the open segment's scan is the same at every size.
    let sealed_segments: &[u64] = if args.quick { &[1, 4] } else { &[1, 4, 8, 16] };
    say!(
        out,
        "Crash recovery (power cut after sequential writes): (3+1)-RAID-5, 4 KiB chunks, G = 256, 62 MiB zones, \
         ZN540 timing, virtual time, seed {}",
        args.seed
    );
    say!(
        out,
        "{:>12} {:>9} {:>15} {:>17} {:>24}",
        "data",
        "segments",
        "recovery ms",
        "recovery MiB/s",
        "open-segment reclaim ms"
    );
    let mut points = Vec::new();
    for &sealed in sealed_segments {
        let p = recovery_point(sealed, args.seed)?;
        say!(
            out,
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
        say!(
            out,
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
    say!(
            out,
        "recovery time per 100 GiB of written data (slope): {:.2} s (paper: about 1.5 s per extra 100 GiB on real drives)",
        per_byte * HUNDRED_GIB
    );
    say!(
        out,
        "the array serves I/O once recovery ends; rewriting the open segment's live blocks into a new segment \
         and resetting its zones runs after that, beside user I/O (open-segment reclaim)"
    );
    out.figure(recovery_figure(&points));
    Ok(())
}

/// Exp#5 full-drive recovery: seconds per 100 GiB by chunk size and scheme, the paper's
/// 4 KiB figure (ZapRAID's) marked.
fn rebuild_figure(rows: &[(String, RebuildPoint)]) -> Figure {
    let mut names: Vec<&str> = Vec::new();
    for (name, _) in rows {
        if !names.contains(&name.as_str()) {
            names.push(name);
        }
    }
    let series = names
        .iter()
        .map(|name| {
            let at = |chunk: u64| rows.iter().find(|(n, p)| n == name && p.chunk_bytes == chunk).map(|(_, p)| p);
            BarSeries {
                name: name.to_string(),
                values: CHUNKS_BYTES.iter().map(|&c| at(c).map(RebuildPoint::s_per_100_gib)).collect(),
                paper: CHUNKS_BYTES
                    .iter()
                    .map(|&c| (c == CHUNKS_BYTES[0] && *name == "ZapRAID").then_some(PAPER_4K_S_PER_100_GIB))
                    .collect(),
            }
        })
        .collect();
    Figure {
        name: "exp5-rebuild".into(),
        title: "Exp#5: full-drive recovery, (3+1)-RAID-5".into(),
        panels: vec![Panel::Bars(Bars {
            caption: "rebuild time per 100 GiB of data".into(),
            y_label: "s / 100 GiB".into(),
            groups: CHUNKS_BYTES.iter().map(|&c| kib(c)).collect(),
            series,
        })],
    }
}

/// A rebuild under load: user IOPS and the rebuild's time, per case.
fn rebuild_load_figure(points: &[(String, LoadPoint)]) -> Figure {
    // "no rebuild (healthy)" -> "healthy", "rebuild, 400 MiB/s" -> "400 MiB/s": room under the bars.
    let short = |label: &str| {
        let label = label.strip_prefix("no rebuild (").and_then(|l| l.strip_suffix(')')).unwrap_or(label);
        label.strip_prefix("rebuild, ").unwrap_or(label).to_string()
    };
    let groups: Vec<String> = points.iter().map(|(l, _)| short(l)).collect();
    let bars = |caption: &str, y_label: &str, name: &str, values: Vec<Option<f64>>| {
        Panel::Bars(Bars {
            caption: caption.into(),
            y_label: y_label.into(),
            groups: groups.clone(),
            series: vec![BarSeries::new(name, values)],
        })
    };
    Figure {
        name: "rebuild-load".into(),
        title: "A rebuild under 4 KiB random user I/O, (3+1)-RAID-5".into(),
        panels: vec![
            bars("user IOPS", "IOPS", "user I/O", points.iter().map(|(_, p)| Some(p.user_iops)).collect()),
            bars(
                "rebuild time",
                "s / 100 GiB",
                "rebuild",
                points.iter().map(|(_, p)| p.rebuild_s_per_100_gib()).collect(),
            ),
        ],
    }
}

/// Exp#5 crash recovery: recovery time against the data written.
fn recovery_figure(points: &[RecoveryPoint]) -> Figure {
    const GIB: f64 = (1u64 << 30) as f64;
    const MS_PER_S: f64 = 1e3;
    Figure {
        name: "exp5-recovery".into(),
        title: "Exp#5: crash recovery after a power cut, (3+1)-RAID-5".into(),
        panels: vec![Panel::Lines(Lines {
            caption: "recovery time against data written".into(),
            x_label: "data written (GiB)".into(),
            y_label: "recovery ms".into(),
            log2_x: false,
            series: vec![LineSeries {
                name: "ZapRAID".into(),
                points: points.iter().map(|p| (p.data_bytes as f64 / GIB, p.recovery_s * MS_PER_S)).collect(),
            }],
            paper: Vec::new(),
        })],
    }
}
