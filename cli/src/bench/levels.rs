//! `zapraid bench exp4` (Exp#4, RAID schemes): random writes at queue depth 64 on four
//! emulated ZN540 drives as RAID-0, RAID-01, RAID-4, RAID-5 and RAID-6, 4/8/16 KiB chunks,
//! ZapRAID against ZoneWrite-Only; a level the engine does not build is said and skipped.

use anyhow::Result;
use zapraid_experiments::levels::{exp4_cell, levels, modes, supported, Cell, CHUNKS_BYTES, DRIVES};
use zapraid_experiments::WRITE_QUEUE_DEPTH;

use super::{kib, BenchArgs, Out};
use crate::plot::{BarSeries, Bars, Figure, Panel};

/// Requests per cell.
const REQUESTS: u64 = 40_000;
const QUICK_REQUESTS: u64 = 8_000;

pub(super) fn exp4(args: &BenchArgs, out: &mut Out) -> Result<()> {
    let requests = super::requests(args, REQUESTS, QUICK_REQUESTS);
    say!(
        out,
        "Exp#4: RAID schemes on {DRIVES} emulated WD ZN540 drives (ZN540 timing model): random writes, queue depth \
         {WRITE_QUEUE_DEPTH}, request size = chunk size, {requests} requests per cell, virtual time, seed {}",
        args.seed
    );
    say!(out, "(the paper gives Exp#4 as a figure without numbers: no paper column)");
    say!(out);
    say!(out, "{:<16} {:<7} {:>16} {:>16} {:>10}", "level", "chunk", "ZapRAID MiB/s", "ZoneWrite MiB/s", "ZapRAID");
    say!(out, "{:<16} {:<7} {:>16} {:>16} {:>10}", "", "", "", "", "gain");
    // A panel per level, as the paper's subfigures: MiB/s per chunk size and scheme.
    let mut panels = Vec::new();
    for level in levels() {
        if let Err(reason) = supported(level) {
            say!(out, "{:<16} layout refused by the engine ({reason}): skipped", level.to_string());
            continue;
        }
        let mut values: Vec<Vec<Option<f64>>> = vec![Vec::new(); modes().len()];
        for chunk in CHUNKS_BYTES {
            let mut row = Vec::new();
            for (_, mode) in modes() {
                row.push(match exp4_cell(level, mode, chunk, requests, args.seed)? {
                    Cell::Measured(m) => Some(m.mib_per_s),
                    Cell::Refused { .. } => None,
                });
            }
            let shown = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
            let gain = match (row[0], row[1]) {
                (Some(z), Some(w)) if w > 0.0 => format!("{:+.1}%", (z / w - 1.0) * 100.0),
                _ => "-".to_string(),
            };
            say!(
                out,
                "{:<16} {:<7} {:>16} {:>16} {:>10}",
                level.to_string(),
                kib(chunk),
                shown(row[0]),
                shown(row[1]),
                gain
            );
            for (s, v) in row.into_iter().enumerate() {
                values[s].push(v);
            }
        }
        let series = modes().iter().zip(values).map(|((name, _), v)| BarSeries::new(*name, v)).collect();
        panels.push(Panel::Bars(Bars {
            caption: level.to_string(),
            y_label: "MiB/s".into(),
            groups: CHUNKS_BYTES.iter().map(|&c| kib(c)).collect(),
            series,
        }));
    }
    say!(out, "(every level has Exp#1's shape: the gain is the Zone Append pipelining, whatever the redundancy)");
    out.figure(Figure {
        name: "exp4".into(),
        title: format!("Exp#4: RAID schemes on {DRIVES} drives, random writes, QD {WRITE_QUEUE_DEPTH}"),
        panels,
    });
    Ok(())
}
