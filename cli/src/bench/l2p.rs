//! `zapraid bench exp9` (Exp#9, L2P table offload): (3+1)-RAID-5 with (Ns, Nl) = (2, 2)
//! under four write workloads with the L2P memory budget at 25-100% of the table, in
//! virtual time; the throughput change against the whole table beside the paper's at
//! half of it.

use anyhow::Result;
use zapraid_experiments::l2p::{
    change_percent, exp9, table_bytes, Exp9Cell, Workload, BUDGET_PERCENTS, PAPER_DROP_AT_HALF_PERCENT, QUEUE_DEPTH,
    SPLIT,
};

use super::{BenchArgs, Out};
use crate::plot::{BarSeries, Bars, Figure, Panel};
use crate::size::format_bytes;

/// Logical blocks of the array: small enough that the emulated drives keep its data in
/// memory (mapping blocks are read back), and a table of a few hundred pages.
const FULL_LOGICAL_BLOCKS: u64 = 1 << 18;
const QUICK_LOGICAL_BLOCKS: u64 = 1 << 16;
/// Requests per cell before and during the measurement.
const FULL_REQUESTS: (u64, u64) = (8_000, 16_000);
const QUICK_REQUESTS: (u64, u64) = (1_500, 3_000);
/// The budget the paper reports its drop at.
const PAPER_BUDGET_PERCENT: u64 = 50;

pub(super) fn exp9_run(args: &BenchArgs, out: &mut Out) -> Result<()> {
    let logical_blocks = if args.quick { QUICK_LOGICAL_BLOCKS } else { FULL_LOGICAL_BLOCKS };
    let (warmup, requests) = if args.quick { QUICK_REQUESTS } else { FULL_REQUESTS };
    say!(
        out,
        "Exp#9: L2P table offload. (3+1)-RAID-5, ZapRAID G = 256, (Ns, Nl) = ({}, {}) of 8/16 KiB chunks, ZN540 \
         model; {} logical, a table of {}; {warmup} requests to warm up, {requests} measured per cell, queue depth \
         {QUEUE_DEPTH}, virtual time, seed {}",
        SPLIT.0,
        SPLIT.1,
        format_bytes(logical_blocks * 4096),
        format_bytes(table_bytes(logical_blocks)),
        args.seed
    );
    say!(
        out,
        "(paper: a 100 MiB budget for a 200 MiB table; the drop at half the table is beside ours at 50%; mapping \
         blocks are read and written through the drives' timing model like any block)"
    );
    say!(out);
    say!(
        out,
        "{:<18} {:>7} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "workload",
        "budget",
        "MiB/s",
        "change",
        "paper",
        "hit rate",
        "map rd",
        "map wr"
    );
    let cells = exp9(logical_blocks, warmup, requests, args.seed, |_| {})?;
    for (w, workload) in Workload::ALL.iter().enumerate() {
        for cell in cells.iter().filter(|c| c.workload == *workload) {
            let change = change_percent(&cells, cell).map_or("-".to_string(), |c| format!("{c:+.1}%"));
            let paper = if cell.budget_percent == PAPER_BUDGET_PERCENT {
                format!("{:+.1}%", PAPER_DROP_AT_HALF_PERCENT[w])
            } else {
                String::new()
            };
            say!(
                out,
                "{:<18} {:>6}% {:>10.1} {:>9} {:>9} {:>8.1}% {:>9} {:>8}",
                workload.name(),
                cell.budget_percent,
                cell.measured.mib_per_s,
                change,
                paper,
                cell.hit_rate_percent,
                cell.mapping_reads,
                cell.mapping_writes
            );
        }
    }
    out.figure(figure(&cells));
    Ok(())
}

/// Grouped bars: per workload, throughput relative to the whole table at each budget,
/// with the paper's value at half the table.
fn figure(cells: &[Exp9Cell]) -> Figure {
    let groups = Workload::ALL.iter().map(|w| w.name().to_string()).collect();
    let series = BUDGET_PERCENTS
        .iter()
        .map(|&percent| {
            let values = Workload::ALL
                .iter()
                .map(|w| {
                    let cell = cells.iter().find(|c| c.workload == *w && c.budget_percent == percent)?;
                    change_percent(cells, cell).map(|c| 100.0 + c)
                })
                .collect();
            let mut s = BarSeries::new(format!("{percent}% of the table"), values);
            if percent == PAPER_BUDGET_PERCENT {
                s.paper = PAPER_DROP_AT_HALF_PERCENT.iter().map(|d| Some(100.0 + d)).collect();
            }
            s
        })
        .collect();
    Figure {
        name: "exp9".into(),
        title: "Exp#9: L2P table offload, (3+1)-RAID-5, (Ns, Nl) = (2, 2)".into(),
        panels: vec![Panel::Bars(Bars {
            caption: "throughput, % of the whole table in memory".into(),
            y_label: "% of the whole table's throughput".into(),
            groups,
            series,
        })],
    }
}
