//! `zapraid bench declustered` (issue 35): a failed drive rebuilt onto a new drive in a
//! classic array and into distributed spare space in declustered arrays of 5 to 24 drives,
//! stripes 4+1 and 8+2 (`zapraid_experiments::declustered`): the rebuild's time per 100 GiB
//! of the failed drive's contents, its speedup over the classic array against the ideal
//! from the drives' bandwidth, the load imbalance from what the drives served, users' IOPS
//! and p99 at two rate limits, and MTTDL from the LANL study's Markov model, beside the
//! study's figures; the issue's done-when checks as measured; `--json FILE` writes it all.

use std::io::Write;

use anyhow::{Context, Result};
use serde_json::{json, Value};
use zapraid_experiments::declustered::{
    self as d, checks, classic_row, full_drive_contents_bytes, ideal_speedup, measure_row, mttdl, mttdl_years,
    zn540_capacity_bytes, Bandwidths, Charge, Check, Phase, Row, Scale, Shape, Stripe, DRAID_IMBALANCE,
    RATES_MIB_PER_S, STRIPES,
};
use zapraid_experiments::rebuild::Progress;

use super::{verdict, BenchArgs, Out};
use crate::plot::{BarSeries, Bars, Figure, LineSeries, Lines, Panel};
use crate::size::format_bytes;

pub(super) fn declustered(args: &BenchArgs, out: &mut Out) -> Result<()> {
    let scale = if args.quick { Scale::QUICK } else { Scale::FULL };
    let bw = Bandwidths::measure(d::command_bytes(&scale), args.seed)?;
    preamble(out, args, &scale, &bw);
    let show_progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut rows = Vec::new();
    for stripe in STRIPES {
        for drives in stripe.drive_counts() {
            let label = format!("{} on {drives} drives", stripe.name());
            let row = measure_row(stripe, drives, &scale, args.seed, |phase, p| {
                if show_progress {
                    eprint!("\r{label}, {}: {:<40}", phase_name(phase), progress_text(p));
                    let _ = std::io::stderr().flush();
                }
            })?;
            if show_progress {
                eprint!("\r{:<100}\r", "");
            }
            rows.push(row);
        }
    }
    rebuild_table(out, &rows, &bw);
    reliability_table(out, &rows);
    load_table(out, &rows);
    let all_checks: Vec<(Charge, Vec<Check>)> = Charge::ALL.into_iter().map(|c| (c, checks(&rows, &bw, c))).collect();
    print_checks(out, &all_checks);
    study(out);
    out.figure(figure(&rows, &bw));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&to_json(args, &scale, &bw, &rows, &all_checks))?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn preamble(out: &mut Out, args: &BenchArgs, scale: &Scale, bw: &Bandwidths) {
    say!(
        out,
        "Declustered arrays (issue 35): drive {} of each array fails and is rebuilt, onto a new drive in the \
         classic array (N = k + m) and into the other drives' distributed spare space in a declustered one (N > \
         k + m, {} distributed spare); emulated drives with the ZN540 timing model, {} zones (the failed drive \
         holds about {} segments; {} in the runs under load), {} chunks, ZapRAID G = 256, nothing else running; \
         virtual time, seed {}",
        d::FAILED_DRIVE,
        d::DISTRIBUTED_SPARES,
        format_bytes(scale.zone_blocks * 4096),
        scale.failed_drive_segments,
        scale.load_segments,
        super::kib(d::CHUNK_BYTES),
        args.seed
    );
    say!(
        out,
        "s/100 GiB: the rebuild's time, from its start until its last segment is rebuilt, per 100 GiB of the failed \
         drive's contents (what the rebuild writes: the chunks, data and parity, of every segment the drive held, \
         with their headers and footers), so that arrays of different widths compare; vs classic: the classic \
         array of the same stripe's time over this one's, measured in the same run"
    );
    say!(
        out,
        "ideal: the same ratio from the drives' bandwidth alone, in the timing model at the rebuild's {} commands \
         (the best of 1-8 zones): reads {:.1} MiB/s, Zone Writes {:.1} MiB/s. For X of the failed drive's \
         contents the classic array waits for its busiest drive: the new drive writing X, or each of its k + m - 1 \
         survivors reading k X / (k + m - 1); a declustered array for each of its N - 1 survivors reading k X / \
         (N - 1) and writing X / (N - 1) of spare space, one after the other (reads and writes take the same flash \
         chips)",
        super::kib(bw.command_bytes),
        bw.read_mib_per_s,
        bw.write_mib_per_s
    );
    say!(
        out,
        "1 core: the engine's simulated core (one per array, as in every experiment) charged for its events and \
         the rebuild's jobs (each chunk position's sources checked and its chunk rebuilt, `zapraid bench cpu`'s \
         measured costs); {}: the rebuild's jobs on {} worker cores beside the engine's, each job's result \
         coming back to the engine as an event of its own, as the server's --rebuild-threads runs them (the \
         study's servers have 8 cores); core: the share of the \
         rebuild's time the engine's core was busy; drives only: the same rebuild with nothing charged, what the \
         drives allow\n",
        Charge::Cores.label(),
        d::REBUILD_WORKER_CORES
    );
}

fn phase_name(phase: Phase) -> String {
    match phase {
        Phase::Rebuild { charge } => format!("rebuild, {}", charge.label()),
        Phase::Load { rate_mib_per_s } => format!("under load at {rate_mib_per_s} MiB/s"),
    }
}

fn progress_text(p: Progress) -> String {
    match p {
        Progress::Filling { bytes_written, bytes } => {
            format!("filling {} of {}", format_bytes(bytes_written), format_bytes(bytes))
        }
        Progress::Rebuilding { segments_rebuilt, segments } => {
            format!("rebuilding: {segments_rebuilt} of {segments} segments")
        }
    }
}

/// "classic, new drive", "2 groups, 2 spare/row", "cannot be: ...".
fn array_text(shape: &Shape) -> String {
    match shape {
        Shape::Classic => "classic, new drive".into(),
        Shape::Declustered { groups, spare_positions, .. } => {
            format!("{groups} segment{}, {spare_positions} spare/row", if *groups == 1 { "" } else { "s" })
        }
        Shape::Impossible(why) => format!("cannot be: {why}"),
    }
}

fn or_dash(v: Option<f64>, decimals: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.decimals$}"))
}

fn percent(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.0}%", v * 100.0))
}

fn rebuild_table(out: &mut Out, rows: &[Row], bw: &Bandwidths) {
    say!(out, "The rebuild alone");
    let mut head = format!("{:<6} {:>3}  {:<24} {:>9} {:>6}", "stripe", "N", "array", "rebuilt", "ideal");
    let mut units = format!("{:<6} {:>3}  {:<24} {:>9} {:>6}", "", "", "", "", "");
    for charge in Charge::ALL {
        head.push_str(&format!(" | {:<35}", charge.label()));
        units.push_str(&format!(" | {:>10} {:>6} {:>6} {:>5}", "s/100 GiB", "vs cl.", "of id.", "core"));
    }
    say!(out, "{head}");
    say!(out, "{units}");
    for r in rows {
        let Some(m) = &r.measured else {
            say!(out, "{:<6} {:>3}  {}", r.stripe.name(), r.drives, array_text(&r.shape));
            continue;
        };
        let classic = classic_row(rows, r.stripe);
        let mut line = format!(
            "{:<6} {:>3}  {:<24} {:>9} {:>6.2}",
            r.stripe.name(),
            r.drives,
            array_text(&r.shape),
            format_bytes(m.charged.rebuilt_bytes),
            ideal_speedup(r.stripe, r.drives, bw)
        );
        for charge in Charge::ALL {
            let run = m.run(charge);
            let core = (charge != Charge::DrivesOnly).then(|| run.core_busy());
            line.push_str(&format!(
                " | {:>10} {:>6} {:>6} {:>5}",
                or_dash(run.s_per_100_gib(), 1),
                or_dash(classic.and_then(|c| r.speedup(c, charge)), 2),
                percent(classic.and_then(|c| r.share_of_ideal(c, charge, bw))),
                percent(core)
            ));
        }
        say!(out, "{line}");
    }
    say!(out);
}

/// MTTDL in years of `r`'s array and of its stripe's classic array, charged as `charge`,
/// with the rebuild time scaled to a full ZN540's contents.
fn mttdl_pair(rows: &[Row], r: &Row, charge: Charge) -> Option<(f64, f64)> {
    let classic = classic_row(rows, r.stripe)?;
    let years = |row: &Row, of: &Row| {
        let contents = full_drive_contents_bytes(r.stripe, of.drives, &of.shape)?;
        Some(mttdl_years(r.stripe, row.drives, contents, of.measured.as_ref()?.run(charge).s_per_100_gib()?))
    };
    // Both over the same C = N drives, as the study compares (only T_mu differs).
    Some((years(r, r)?, years(r, classic)?))
}

fn reliability_table(out: &mut Out, rows: &[Row]) {
    say!(out, "Load imbalance (most over mean bytes read per survivor during the rebuild) and MTTDL");
    say!(
        out,
        "{:<6} {:>3}  {:>9} {:>9} {:>7} {:>9} | {:>13} {:>13} {:>7} {:>11}",
        "stripe",
        "N",
        "read imb.",
        "placement",
        "dRAID",
        "write imb.",
        "MTTDL years",
        "classic years",
        "ratio",
        "drives only"
    );
    for r in rows.iter().filter(|r| r.measured.is_some()) {
        let m = r.measured.as_ref().expect("measured");
        let placement = match &r.shape {
            Shape::Declustered { imbalance, .. } => format!("{imbalance:.3}"),
            _ => "1.000".into(),
        };
        let draid = DRAID_IMBALANCE.iter().find(|(n, _)| *n == r.drives).map(|(_, i)| *i);
        let (years, classic_years) = mttdl_pair(rows, r, Charge::OneCore).unzip();
        let ratio = mttdl_pair(rows, r, Charge::OneCore).map(|(y, c)| y / c);
        let drives_only = mttdl_pair(rows, r, Charge::DrivesOnly).map(|(y, c)| y / c);
        say!(
            out,
            "{:<6} {:>3}  {:>9} {:>9} {:>7} {:>9} | {:>13} {:>13} {:>7} {:>11}",
            r.stripe.name(),
            r.drives,
            or_dash(m.charged.read_imbalance(), 3),
            placement,
            or_dash(draid, 3),
            or_dash(m.charged.write_imbalance(), 3),
            years.map_or("-".into(), |y| format!("{y:.3e}")),
            classic_years.map_or("-".into(), |y| format!("{y:.3e}")),
            or_dash(ratio, 2),
            or_dash(drives_only, 2)
        );
    }
    let mtbf = mttdl::mean_hours_between_failures(mttdl::STUDY_AFR);
    say!(
        out,
        "read imb.: from the drives' counters (the engine's core charged); placement: Placement::rebuild_imbalance \
         over a whole period of its rows (the fill writes fewer); dRAID: OpenZFS's, as the study reports it; write \
         imb.: most over mean bytes of the rebuild written per drive written"
    );
    say!(
        out,
        "MTTDL: the study's Markov model (section IV) as written, MTTDL_pool = G/C * T_l/G * prod_(i=1..m) 1/(1 - \
         exp(-T_mu (G - i) / T_l)), with C = N drives, G = k + m, m parity chunks for the declustered array and the \
         classic one alike (only T_mu differs, as the study compares); T_l = -8766 / ln(1 - AFR) = {mtbf:.0} hours \
         at AFR {:.2}%; T_mu the rebuild's time (core charged; drives only in the last column) of a full ZN540's \
         contents ({} over {} zones; a declustered drive holds G (k + m) / N of its zones' worth, the rest is spare \
         space). Absolute years mean little (the study's words); the ratio compares\n",
        mttdl::STUDY_AFR * 100.0,
        format_bytes(zn540_capacity_bytes()),
        zapraid_zns::Geometry::zn540().zone_count
    );
}

fn load_table(out: &mut Out, rows: &[Row]) {
    say!(
        out,
        "Users during the rebuild: 4 KiB random requests over the whole array, {}% reads, queue depth {}, from the \
         failure until the rebuild is done, the rebuild paced to write at most the rate (to the new drive, or to \
         every drive's spare space together); p99 of every request; gc: segments garbage collection reclaimed \
         meanwhile (its work, if any, is in the users' figures)",
        zapraid_experiments::rebuild_load::USER_READ_PERCENT,
        zapraid_experiments::rebuild_load::USER_QUEUE_DEPTH
    );
    let mut head = format!("{:<6} {:>3} ", "stripe", "N");
    let mut units = format!("{:<6} {:>3} ", "", "");
    for rate in RATES_MIB_PER_S {
        head.push_str(&format!(" | {:<33}", format!("at {rate} MiB/s")));
        units.push_str(&format!(" | {:>9} {:>9} {:>10} {:>2}", "IOPS", "p99 us", "s/100 GiB", "gc"));
    }
    say!(out, "{head}");
    say!(out, "{units}");
    for r in rows.iter().filter(|r| r.measured.is_some()) {
        let m = r.measured.as_ref().expect("measured");
        let mut line = format!("{:<6} {:>3} ", r.stripe.name(), r.drives);
        for load in &m.loads {
            line.push_str(&format!(
                " | {:>9.0} {:>9.1} {:>10} {:>2}",
                load.user_iops,
                load.p99_us,
                or_dash(load.rebuild.s_per_100_gib(), 1),
                load.segments_reclaimed
            ));
        }
        say!(out, "{line}");
    }
    say!(out);
}

fn print_checks(out: &mut Out, all: &[(Charge, Vec<Check>)]) {
    let labels: Vec<String> = all.iter().map(|(charge, _)| charge.label()).collect();
    say!(out, "The issue's done-when checks, as measured: {}", labels.join(" / "));
    for (i, first) in all[0].1.iter().enumerate() {
        let figure = |c: &Check| {
            let value = match c.figure {
                None => "not measured".to_string(),
                Some(v) if c.what.contains("ideal") => format!("{:.0}%", v * 100.0),
                Some(v) if c.what.contains("imbalance") => format!("{v:.3}"),
                Some(v) => format!("{v:.2}x"),
            };
            format!("{value} {}", verdict(c.holds))
        };
        let figures: Vec<String> = all.iter().filter_map(|(_, checks)| checks.get(i)).map(figure).collect();
        say!(out, "  {}: {}", first.what, figures.join(" / "));
    }
    say!(out);
}

fn study(out: &mut Out) {
    let (least, most) = d::STUDY_THROUGHPUT_SPEEDUP;
    say!(
        out,
        "The study (ZFS dRAID against RAIDZ on 4 TB disks, LANL; cfg = groups x (d + p) + spares): recovery {}x as \
         fast on average (3 x (1+1) + 1); rebuild throughput {least}x to {most}x RAIDZ's from 1 to 6 groups of \
         (5+2) with 2 spares (9 to 44 drives), {:.0}% of the ideal {}x at 44 drives; MTTDL {}x RAIDZ's for 6 x \
         (5+2) + 2 at AFR 0.97%; OpenZFS dRAID's rebuild imbalance {} at 8 drives and {} at 16",
        d::STUDY_RECOVERY_SPEEDUP,
        most / d::STUDY_IDEAL_SPEEDUP * 100.0,
        d::STUDY_IDEAL_SPEEDUP,
        d::STUDY_MTTDL_RATIO,
        DRAID_IMBALANCE[0].1,
        DRAID_IMBALANCE[1].1
    );
}

/// Speedup against drives (measured, drives only, ideal, per stripe, the study's points),
/// the read imbalance, the MTTDL ratio and users' IOPS by drives.
fn figure(rows: &[Row], bw: &Bandwidths) -> Figure {
    let mut speedups = Vec::new();
    for stripe in STRIPES {
        let measured: Vec<&Row> = rows.iter().filter(|r| r.stripe == stripe && r.measured.is_some()).collect();
        let classic = classic_row(rows, stripe);
        let line = |name: String, y: &dyn Fn(&Row) -> Option<f64>| LineSeries {
            name,
            points: measured.iter().filter_map(|r| Some((f64::from(r.drives), y(r)?))).collect(),
        };
        let s = stripe.name();
        for charge in Charge::ALL {
            let name = format!("{s} {}", charge.label());
            speedups.push(line(name, &|r| classic.and_then(|c| r.speedup(c, charge))));
        }
        speedups.push(line(format!("{s} ideal"), &|r| Some(ideal_speedup(r.stripe, r.drives, bw))));
    }
    let (least, most) = d::STUDY_THROUGHPUT_SPEEDUP;
    let groups: Vec<u32> = {
        let mut g: Vec<u32> = rows.iter().filter(|r| r.measured.is_some()).map(|r| r.drives).collect();
        g.sort_unstable();
        g.dedup();
        g
    };
    let by_drives = |stripe: Stripe, y: &dyn Fn(&Row) -> Option<f64>| -> Vec<Option<f64>> {
        groups.iter().map(|n| rows.iter().find(|r| r.stripe == stripe && r.drives == *n).and_then(y)).collect()
    };
    let bars = |caption: &str, y_label: &str, series: Vec<BarSeries>| {
        Panel::Bars(Bars {
            caption: caption.into(),
            y_label: y_label.into(),
            groups: groups.iter().map(|n| n.to_string()).collect(),
            series,
        })
    };
    let imbalance: Vec<BarSeries> = STRIPES
        .iter()
        .map(|&s| {
            let mut series = BarSeries::new(
                s.name(),
                by_drives(s, &|r| r.measured.as_ref().and_then(|m| m.charged.read_imbalance())),
            );
            if s == STRIPES[0] {
                series.paper =
                    groups.iter().map(|n| DRAID_IMBALANCE.iter().find(|(d, _)| d == n).map(|(_, i)| *i)).collect();
            }
            series
        })
        .collect();
    let ratios: Vec<BarSeries> = STRIPES
        .iter()
        .map(|&s| BarSeries::new(s.name(), by_drives(s, &|r| mttdl_pair(rows, r, Charge::OneCore).map(|(y, c)| y / c))))
        .collect();
    let mut users = Vec::new();
    for &s in &STRIPES {
        for (i, rate) in RATES_MIB_PER_S.iter().enumerate() {
            let iops = by_drives(s, &|r| r.measured.as_ref().and_then(|m| m.loads.get(i)).map(|l| l.user_iops));
            users.push(BarSeries::new(format!("{} at {rate} MiB/s", s.name()), iops));
        }
    }
    Figure {
        name: "declustered".into(),
        title: "Declustered arrays: a failed drive rebuilt into spare space".into(),
        panels: vec![
            Panel::Lines(Lines {
                caption: "rebuild speedup over the classic array".into(),
                x_label: "drives".into(),
                y_label: "x classic".into(),
                log2_x: false,
                series: speedups,
                paper: vec![(9.0, least), (44.0, most)],
            }),
            bars("rebuild load imbalance (read)", "most / mean", imbalance),
            bars("MTTDL over the classic array's", "ratio", ratios),
            bars("users' IOPS during the rebuild", "IOPS", users),
        ],
    }
}

fn check_json(c: &Check) -> Value {
    json!({ "check": c.what, "figure": c.figure, "holds": c.holds })
}

fn to_json(args: &BenchArgs, scale: &Scale, bw: &Bandwidths, rows: &[Row], checks: &[(Charge, Vec<Check>)]) -> Value {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            let classic = classic_row(rows, r.stripe);
            let (shape, reason, groups, spares, placement) = match &r.shape {
                Shape::Classic => ("classic", None, Some(1), Some(0), Some(1.0)),
                Shape::Declustered { groups, spare_positions, imbalance } => {
                    ("declustered", None, Some(*groups), Some(*spare_positions), Some(*imbalance))
                }
                Shape::Impossible(why) => ("impossible", Some(why.clone()), None, None, None),
            };
            let measured = r.measured.as_ref().map(|m| {
                let run = |charge: Charge| {
                    let run = m.run(charge);
                    json!({
                        "rebuild_s": run.rebuild_ns as f64 / 1e9,
                        "rebuilt_bytes": run.rebuilt_bytes,
                        "segments": run.segments,
                        "s_per_100_gib": run.s_per_100_gib(),
                        "speedup": classic.and_then(|c| r.speedup(c, charge)),
                        "share_of_ideal": classic.and_then(|c| r.share_of_ideal(c, charge, bw)),
                        "core_busy": (charge != Charge::DrivesOnly).then(|| run.core_busy()),
                        "rebuild_jobs_core_s": (charge != Charge::DrivesOnly).then(|| run.jobs_ns as f64 / 1e9),
                        "read_imbalance": run.read_imbalance(),
                        "write_imbalance": run.write_imbalance(),
                        "mttdl_years": mttdl_pair(rows, r, charge).map(|p| p.0),
                        "classic_mttdl_years": mttdl_pair(rows, r, charge).map(|p| p.1),
                        "bytes_read_per_drive": run.traffic.iter().map(|t| t.bytes_read).collect::<Vec<_>>(),
                        "bytes_written_per_drive": run.traffic.iter().map(|t| t.bytes_written).collect::<Vec<_>>(),
                    })
                };
                let loads: Vec<Value> = m
                    .loads
                    .iter()
                    .map(|l| {
                        json!({
                            "rate_mib_per_s": l.rate_bytes_per_s >> 20,
                            "user_requests": l.user_requests,
                            "user_iops": l.user_iops,
                            "p99_us": l.p99_us,
                            "read_p99_us": l.read_p99_us,
                            "write_p99_us": l.write_p99_us,
                            "rebuild_s_per_100_gib": l.rebuild.s_per_100_gib(),
                            "segments_reclaimed": l.segments_reclaimed,
                        })
                    })
                    .collect();
                json!({
                    "core_charged": run(Charge::OneCore),
                    "worker_cores": run(Charge::Cores),
                    "drives_only": run(Charge::DrivesOnly),
                    "under_load": loads,
                })
            });
            json!({
                "stripe": r.stripe.name(),
                "drives": r.drives,
                "shape": shape,
                "why_not": reason,
                "segments_per_row": groups,
                "spare_positions_per_row": spares,
                "placement_imbalance": placement,
                "ideal_speedup": (r.measured.is_some()).then(|| ideal_speedup(r.stripe, r.drives, bw)),
                "measured": measured,
            })
        })
        .collect();
    json!({
        "seed": args.seed,
        "quick": args.quick,
        "scale": {
            "zone_bytes": scale.zone_blocks * 4096,
            "failed_drive_segments": scale.failed_drive_segments,
            "load_segments": scale.load_segments,
            "chunk_bytes": d::CHUNK_BYTES,
        },
        "bandwidth": {
            "command_bytes": bw.command_bytes,
            "read_mib_per_s": bw.read_mib_per_s,
            "write_mib_per_s": bw.write_mib_per_s,
        },
        "mttdl": {
            "afr": mttdl::STUDY_AFR,
            "mtbf_hours": mttdl::mean_hours_between_failures(mttdl::STUDY_AFR),
            "drive_capacity_bytes": zn540_capacity_bytes(),
        },
        "rows": rows,
        "rebuild_worker_cores": d::REBUILD_WORKER_CORES,
        "checks": checks
            .iter()
            .map(|(charge, checks)| json!({ "charge": charge.label(), "checks": checks.iter().map(check_json).collect::<Vec<_>>() }))
            .collect::<Vec<_>>(),
        "study": {
            "recovery_speedup": d::STUDY_RECOVERY_SPEEDUP,
            "throughput_speedup": [d::STUDY_THROUGHPUT_SPEEDUP.0, d::STUDY_THROUGHPUT_SPEEDUP.1],
            "ideal_speedup_at_44_drives": d::STUDY_IDEAL_SPEEDUP,
            "mttdl_ratio": d::STUDY_MTTDL_RATIO,
            "draid_imbalance": DRAID_IMBALANCE.iter().map(|(n, i)| json!({ "drives": n, "imbalance": i })).collect::<Vec<_>>(),
        },
    })
}
