//! `zapraid bench exp8` (Exp#8, garbage collection): a (3+1)-RAID-5 written several times
//! over by 4 KiB random, 64 KiB random, 64 KiB Zipf 0.99 and 64 KiB sequential writes,
//! with 20% to 100% reserved space: throughput and write amplification; virtual time.

use anyhow::Result;
use zapraid_experiments::gc::{
    gc_point, GcPoint, CHUNK_BYTES, FULL_SCALE, QUEUE_DEPTH, QUICK_SCALE, RESERVED_PERCENTS, WORKLOADS,
};

use super::{kib, BenchArgs, Out};
use crate::plot::{Figure, LineSeries, Lines, Panel};
use crate::size::format_bytes;

pub(super) fn exp8(args: &BenchArgs, out: &mut Out) -> Result<()> {
    let scale = if args.quick { QUICK_SCALE } else { FULL_SCALE };
    say!(
        out,
        "Exp#8: garbage collection. (3+1)-RAID-5, {} chunks, ZapRAID G = 256, emulated drives of 2 MiB zones with \
         ZN540 timing; {} of logical space written {} times over, queue depth {QUEUE_DEPTH}, virtual time, seed {}",
        kib(CHUNK_BYTES),
        format_bytes(scale.logical_bytes),
        scale.written_times,
        args.seed
    );
    say!(
        out,
        "reserved: asked / got (the engine keeps a few segments of its own, so a small reserve may come out \
         larger); write amplification: (user + relocated blocks) / user blocks, parity not counted"
    );
    say!(out, "(paper: 200 GiB logical, 1 TiB written, greedy victims; it gives Exp#8 as a figure without numbers)");
    say!(out);
    say!(
        out,
        "{:<18} {:>9} {:>9} {:>10} {:>9} {:>9} {:>10}",
        "workload",
        "reserved",
        "got",
        "MiB/s",
        "p95 us",
        "WA",
        "reclaimed"
    );
    let mut throughput = Vec::new();
    let mut amplification = Vec::new();
    for workload in WORKLOADS {
        let mut points: Vec<GcPoint> = Vec::new();
        for reserved in RESERVED_PERCENTS {
            let p = gc_point(workload, reserved, scale, args.seed)?;
            say!(
                out,
                "{:<18} {:>8}% {:>8.0}% {:>10.1} {:>9.1} {:>9.2} {:>10}",
                workload.name,
                p.reserved_percent,
                p.actual_reserved_percent,
                p.mib_per_s,
                p.p95_us,
                p.write_amplification,
                p.segments_reclaimed
            );
            points.push(p);
        }
        let line = |f: fn(&GcPoint) -> f64| LineSeries {
            name: workload.name.into(),
            points: points.iter().map(|p| (p.reserved_percent as f64, f(p))).collect(),
        };
        throughput.push(line(|p| p.mib_per_s));
        amplification.push(line(|p| p.write_amplification));
    }
    let panel = |caption: &str, y_label: &str, series: Vec<LineSeries>| {
        Panel::Lines(Lines {
            caption: caption.into(),
            x_label: "reserved space (%)".into(),
            y_label: y_label.into(),
            log2_x: false,
            series,
            paper: Vec::new(),
        })
    };
    out.figure(Figure {
        name: "exp8".into(),
        title: "Exp#8: garbage collection, (3+1)-RAID-5".into(),
        panels: vec![
            panel("(a) throughput", "MiB/s", throughput),
            panel("(b) write amplification", "write amplification", amplification),
        ],
    });
    Ok(())
}
