//! `zapraid bench exp6` (Exp#6, scalability): throughput against queue depth (1-128) on
//! the paper's (3+1)-RAID-5 of ZN540 drives, and a (6+1)-RAID-5 on seven FEMU-like drives
//! at queue depth 128 beside the paper's figures; virtual time.

use anyhow::Result;
use zapraid_engine::Mode;
use zapraid_experiments::paper_modes;
use zapraid_experiments::scale::{
    femu_point, femu_zone_mib_per_s, qd_point, CHUNKS_BYTES, FEMU_CHIPS_PER_ZONE, FEMU_DRIVES, FEMU_PAGE_PROGRAM_NS,
    FEMU_QUEUE_DEPTH, PAPER_FEMU_MIB_PER_S, PAPER_SATURATION_QUEUE_DEPTH, QUEUE_DEPTHS,
};

use super::{kib, BenchArgs, Out};
use crate::plot::{BarSeries, Bars, Figure, LineSeries, Lines, Panel};

/// Requests per point: enough that QD 128 runs many times over.
const REQUESTS: u64 = 30_000;
const QUICK_REQUESTS: u64 = 5_000;
/// A queue depth is where throughput saturates when every deeper one gains less than this.
const SATURATED_GAIN: f64 = 0.05;
const NS_PER_US: u64 = 1_000;

pub(super) fn exp6(args: &BenchArgs, out: &mut Out) -> Result<()> {
    let requests = super::requests(args, REQUESTS, QUICK_REQUESTS);
    say!(
        out,
        "Exp#6 (a): random writes, request size = chunk size, queue depth 1-128, (3+1)-RAID-5 on four emulated WD \
         ZN540 drives (ZN540 timing model), {requests} requests per point, virtual time, seed {}",
        args.seed
    );
    let schemes: Vec<(&str, Mode)> = paper_modes().into_iter().filter(|(name, _)| *name != "ZoneAppend-Only").collect();
    let mut header = format!("{:<24}", "MiB/s at queue depth");
    for qd in QUEUE_DEPTHS {
        header += &format!(" {qd:>7}");
    }
    say!(out, "{header}  {:>9}", "saturates");
    let mut series = Vec::new();
    for (name, mode) in &schemes {
        for chunk in CHUNKS_BYTES {
            let mut points = Vec::new();
            for qd in QUEUE_DEPTHS {
                points.push((qd as f64, qd_point(*mode, chunk, qd, requests, args.seed)?.mib_per_s));
            }
            let label = format!("{name} {}", kib(chunk));
            let mut line = format!("{label:<24}");
            for (_, v) in &points {
                line += &format!(" {v:>7.1}");
            }
            say!(out, "{line}  {:>9}", saturation(&points).map_or("-".into(), |qd| format!("QD {qd:.0}")));
            series.push(LineSeries { name: label, points });
        }
    }
    say!(
        out,
        "(paper: ZapRAID saturates at QD {PAPER_SATURATION_QUEUE_DEPTH} on the real drives; \"saturates\": the \
         smallest queue depth after which throughput grows by less than {:.0}%)",
        SATURATED_GAIN * 100.0
    );

    say!(out);
    say!(
        out,
        "Exp#6 (b): (6+1)-RAID-5 on {FEMU_DRIVES} FEMU-like drives ({FEMU_CHIPS_PER_ZONE} chips per zone, {} us page \
         writes: {:.1} MiB/s per zone; ZN540 controller), queue depth {FEMU_QUEUE_DEPTH}, {requests} requests",
        FEMU_PAGE_PROGRAM_NS / NS_PER_US,
        femu_zone_mib_per_s()
    );
    say!(
        out,
        "{:<8} {:>15} {:>20} {:>12} {:>9}",
        "chunk",
        "ZapRAID MiB/s",
        "ZoneWrite-Only MiB/s",
        "paper MiB/s",
        "ours/paper"
    );
    let mut femu: Vec<Vec<Option<f64>>> = vec![Vec::new(); schemes.len()];
    for (i, chunk) in CHUNKS_BYTES.into_iter().enumerate() {
        let mut row = Vec::new();
        for (s, (_, mode)) in schemes.iter().enumerate() {
            let m = femu_point(*mode, chunk, requests, args.seed)?.mib_per_s;
            femu[s].push(Some(m));
            row.push(m);
        }
        let paper = PAPER_FEMU_MIB_PER_S[i];
        say!(out, "{:<8} {:>15.1} {:>20.1} {:>12.1} {:>8.2}x", kib(chunk), row[0], row[1], paper, row[0] / paper);
    }
    say!(
        out,
        "(bound: 6 data drives x {:.1} MiB/s per zone = {:.1} MiB/s of user data)",
        femu_zone_mib_per_s(),
        femu_zone_mib_per_s() * (FEMU_DRIVES - 1) as f64
    );
    let femu_series = schemes
        .iter()
        .zip(femu)
        .map(|((name, _), values)| {
            let paper =
                if *name == "ZapRAID" { PAPER_FEMU_MIB_PER_S.map(Some).to_vec() } else { vec![None; values.len()] };
            BarSeries { name: name.to_string(), values, paper }
        })
        .collect();
    out.figure(Figure {
        name: "exp6".into(),
        title: "Exp#6: scalability".into(),
        panels: vec![
            Panel::Lines(Lines {
                caption: "(a) (3+1)-RAID-5, ZN540: throughput vs queue depth".into(),
                x_label: "queue depth".into(),
                y_label: "MiB/s".into(),
                log2_x: true,
                series,
                paper: Vec::new(),
            }),
            Panel::Bars(Bars {
                caption: format!("(b) (6+1)-RAID-5, FEMU-like drives, QD {FEMU_QUEUE_DEPTH}"),
                y_label: "MiB/s".into(),
                groups: CHUNKS_BYTES.iter().map(|&c| kib(c)).collect(),
                series: femu_series,
            }),
        ],
    });
    Ok(())
}

/// The smallest queue depth after which every deeper one gains less than
/// `SATURATED_GAIN` over it.
fn saturation(points: &[(f64, f64)]) -> Option<f64> {
    let best = points.iter().map(|p| p.1).fold(0.0, f64::max);
    points.iter().find(|p| p.1 * (1.0 + SATURATED_GAIN) >= best).map(|p| p.0)
}
