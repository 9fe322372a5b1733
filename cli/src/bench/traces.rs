//! `zapraid bench exp10` (Exp#10, trace replay): the writes of an Alibaba 2020 block trace
//! replayed in closed loop against a (3+1)-RAID-5 of emulated ZN540 drives in virtual
//! time, ZapRAID against ZoneWrite-Only and ZoneAppend-Only, in the paper's four open
//! segment settings: one open segment of 4 KiB and of 16 KiB chunks, and (Ns, Nl) = (2, 2)
//! and (1, 3) hybrid segments with Cs = 8 KiB and Cl = 16 KiB. Each array is first
//! prefilled with every block the replay writes (as `zapraid replay` prefills), so that
//! each write overwrites live data as on a volume in use; the prefill is not measured.
//!
//! The trace is `--trace FILE` or, by default, a synthetic trace in the Alibaba format made
//! in memory by the generator of scripts/gen-alibaba-trace.py (same lines), read through
//! the same parser as `zapraid replay`.

use std::io::Cursor;
use std::path::Path;

use anyhow::{Context, Result};
use zapraid_engine::{Config, Mode, OpenSegments, Simulator};
use zapraid_experiments::hybrid::{open_segments, LARGE_CHUNK_BYTES, SMALL_CHUNK_BYTES};
use zapraid_experiments::{config, paper_modes, WRITE_LOGICAL_BLOCKS};
use zapraid_trace::replay::{
    array_footprint, prefill, replay, AddressMap, Footprint, MapMode, Pacing, Prefill, ReplayConfig, Report,
};
use zapraid_trace::{Format, ReadOptions, TraceReader};
use zapraid_zns::{Geometry, TimingParams};

use super::{kib, BenchArgs, Out};
use crate::plot::{BarSeries, Bars, Figure, Panel};

/// Lines of the synthetic trace.
const TRACE_LINES: u64 = 200_000;
const QUICK_TRACE_LINES: u64 = 20_000;
const BLOCK_BYTES: u64 = 4096;
/// The synthetic trace's largest request, 32 KiB.
const MAX_REQUEST_BLOCKS: u64 = 8;
/// Requests in flight during the replay (as the paper's write experiments).
const QUEUE_DEPTH: u64 = 64;
/// The paper's ZapRAID gain over ZoneWrite-Only in its four settings: one open segment at
/// 4 and 16 KiB chunks, (2,2) ("similar": no figure given) and (1,3) hybrid segments.
const PAPER_GAIN_4K: f64 = 0.694;
const PAPER_GAIN_16K: f64 = 0.064;
const PAPER_GAIN_1_3: f64 = 0.253;

/// The paper's ZapRAID gain over ZoneWrite-Only in one setting.
#[derive(Clone, Copy)]
enum PaperGain {
    Percent(f64),
    /// The paper says the two perform similarly, without a figure.
    Similar,
}

impl PaperGain {
    fn text(self) -> String {
        match self {
            PaperGain::Percent(g) => format!("{:+.1}%", g * 100.0),
            PaperGain::Similar => "similar".into(),
        }
    }
}

/// One array configuration of Exp#10.
struct Setup {
    name: String,
    chunk_bytes: u64,
    open: OpenSegments,
    paper_gain: PaperGain,
}

fn setups() -> Vec<Setup> {
    let single = |chunk_bytes: u64, gain: f64| Setup {
        name: format!("1 segment, {}", kib(chunk_bytes)),
        chunk_bytes,
        open: OpenSegments::SINGLE,
        paper_gain: PaperGain::Percent(gain),
    };
    let hybrid = |split: (u32, u32), paper_gain| Setup {
        name: format!("({},{}) hybrid", split.0, split.1),
        chunk_bytes: SMALL_CHUNK_BYTES,
        open: open_segments(split),
        paper_gain,
    };
    vec![
        single(4096, PAPER_GAIN_4K),
        single(16384, PAPER_GAIN_16K),
        hybrid((2, 2), PaperGain::Similar),
        hybrid((1, 3), PaperGain::Percent(PAPER_GAIN_1_3)),
    ]
}

/// The synthetic Alibaba trace of scripts/gen-alibaba-trace.py, `lines` lines: a mix of
/// reads (1 in 3) and writes of 4 to 32 KiB over 100 devices, about 1% unaligned, 10 us
/// apart.
fn synthetic_trace(lines: u64) -> String {
    const DEVICES: u64 = 100;
    const FIRST_TIMESTAMP_US: u64 = 1_577_808_000_000_000;
    const GAP_US: u64 = 10;
    const OFFSET_BLOCKS: u64 = 1 << 24;
    const UNALIGNED_ONE_IN: u64 = 97;
    const UNALIGNED_BYTES: u64 = 512;
    const READ_ONE_IN: u64 = 3;
    const GENERATOR_SEED: u64 = 0x2545_F491_4F6C_DD1D;
    let mut x = GENERATOR_SEED;
    let mut text = String::new();
    for i in 0..lines {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let op = if x.is_multiple_of(READ_ONE_IN) { "R" } else { "W" };
        let length = BLOCK_BYTES * (1 + (x >> 8) % MAX_REQUEST_BLOCKS);
        let unaligned = if x.is_multiple_of(UNALIGNED_ONE_IN) { UNALIGNED_BYTES } else { 0 };
        let offset = ((x >> 16) % OFFSET_BLOCKS) * BLOCK_BYTES + unaligned;
        text += &format!("{},{op},{offset},{length},{}\n", i % DEVICES, FIRST_TIMESTAMP_US + i * GAP_US);
    }
    text
}

/// The trace to replay: a file, or the synthetic trace's text.
enum Trace<'a> {
    File(&'a Path),
    Text(String),
}

impl Trace<'_> {
    fn reader(&self) -> Result<TraceReader> {
        let options = ReadOptions { format: Some(Format::Alibaba), volume: None, skip_bad: false };
        Ok(match self {
            Trace::File(path) => {
                TraceReader::open(path, options).with_context(|| format!("reading {}", path.display()))?
            }
            Trace::Text(text) => TraceReader::from_reader(Cursor::new(text.clone().into_bytes()), options)?,
        })
    }
}

/// How Exp#10 replays: the writes, closed loop, addresses wrapped into the array.
const REPLAY: ReplayConfig = ReplayConfig {
    pacing: Pacing::Closed { queue_depth: QUEUE_DEPTH },
    writes_only: true,
    map: MapMode::Wrap,
    limit: None,
};

/// The array blocks the replay writes (the same for every setup: they all export
/// `WRITE_LOGICAL_BLOCKS`): what each array is prefilled with.
fn written_blocks(trace: &Trace) -> Result<Footprint> {
    let block_bytes = u64::from(Geometry::zn540().block_size_bytes);
    let map = AddressMap::new(REPLAY.map, WRITE_LOGICAL_BLOCKS, block_bytes);
    Ok(array_footprint(trace.reader()?, &REPLAY, &map)?)
}

/// Prefills a fresh array of `setup` in `mode` with `footprint`, then replays the trace's
/// writes on it.
fn replay_one(trace: &Trace, footprint: &Footprint, setup: &Setup, mode: Mode, seed: u64) -> Result<(Prefill, Report)> {
    let config = Config { open_segments: setup.open, ..config(mode, setup.chunk_bytes, WRITE_LOGICAL_BLOCKS) };
    let mut sim = Simulator::discarding(Geometry::zn540(), config, seed, Some(TimingParams::zn540()))?;
    let prefilled = prefill(&mut sim, footprint, &mut |_| {})?;
    Ok((prefilled, replay(&mut sim, trace.reader()?, &REPLAY, &mut |_| {})?))
}

pub(super) fn exp10(args: &BenchArgs, out: &mut Out) -> Result<()> {
    let trace = match &args.trace {
        Some(path) => Trace::File(path),
        None => Trace::Text(synthetic_trace(if args.quick { QUICK_TRACE_LINES } else { TRACE_LINES })),
    };
    let source = match &args.trace {
        Some(path) => format!("{} (Alibaba 2020 format, every volume)", path.display()),
        None => format!(
            "a synthetic Alibaba-format trace ({} lines, scripts/gen-alibaba-trace.py's: 4-32 KiB requests, \
             1 in 3 reads)",
            if args.quick { QUICK_TRACE_LINES } else { TRACE_LINES }
        ),
    };
    let footprint = written_blocks(&trace)?;
    say!(
        out,
        "Exp#10: trace replay. {source}; its writes replayed in closed loop at queue depth {QUEUE_DEPTH}, addresses \
         wrapped into 4 GiB; (3+1)-RAID-5 on four emulated WD ZN540 drives (ZN540 timing model), virtual time, seed {}",
        args.seed
    );
    say!(
        out,
        "each array prefilled first with the {} blocks ({}) the replay writes, in 1 MiB writes, not measured",
        footprint.blocks(),
        crate::size::format_bytes(footprint.blocks() * u64::from(Geometry::zn540().block_size_bytes))
    );
    say!(
        out,
        "hybrid: Ns small-chunk ({}) and Nl large-chunk ({}) open segments",
        kib(SMALL_CHUNK_BYTES),
        kib(LARGE_CHUNK_BYTES)
    );
    say!(out);
    let names: Vec<&str> = paper_modes().iter().map(|(n, _)| *n).collect();
    let mut header = format!("{:<20} {:>8}", "array", "writes");
    for name in &names {
        header += &format!(" {:>16}", format!("{name} MiB/s"));
    }
    say!(out, "{header} {:>13} {:>13}", "ZapRAID gain", "paper gain");
    let setups = setups();
    let mut values: Vec<Vec<Option<f64>>> = vec![Vec::new(); names.len()];
    for setup in &setups {
        let mut row = Vec::new();
        let mut writes = 0;
        for (s, (_, mode)) in paper_modes().into_iter().enumerate() {
            let (prefilled, report) = replay_one(&trace, &footprint, setup, mode, args.seed)?;
            debug_assert_eq!(prefilled.blocks, footprint.blocks());
            writes = report.writes;
            values[s].push(Some(report.mib_per_s()));
            row.push(report.mib_per_s());
        }
        let mut line = format!("{:<20} {writes:>8}", setup.name);
        for v in &row {
            line += &format!(" {v:>16.1}");
        }
        let gain = format!("{:+.1}%", (row[0] / row[1] - 1.0) * 100.0);
        let paper = setup.paper_gain.text();
        say!(out, "{line} {gain:>13} {paper:>13}");
    }
    say!(
        out,
        "(ZapRAID gain: over ZoneWrite-Only. paper: 20 Alibaba volumes of 200-240 GiB of writes each on real ZN540 \
         drives, +{:.1}% at 4 KiB chunks and +{:.1}% at 16 KiB on one open segment, similar at (2,2), +{:.1}% at (1,3))",
        PAPER_GAIN_4K * 100.0,
        PAPER_GAIN_16K * 100.0,
        PAPER_GAIN_1_3 * 100.0
    );
    let series = names.iter().zip(values).map(|(name, v)| BarSeries::new(*name, v)).collect();
    out.figure(Figure {
        name: "exp10".into(),
        title: format!("Exp#10: trace replay (writes), (3+1)-RAID-5, QD {QUEUE_DEPTH}"),
        panels: vec![Panel::Bars(Bars {
            caption: "throughput by array configuration".into(),
            y_label: "MiB/s".into(),
            groups: setups.iter().map(|s| s.name.clone()).collect(),
            series,
        })],
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The synthetic trace is the generator script's: its first line, and it parses.
    #[test]
    fn synthetic_trace_parses() {
        let text = synthetic_trace(50);
        assert_eq!(text.lines().count(), 50);
        let records: Vec<_> = Trace::Text(text).reader().unwrap().collect::<Result<Vec<_>, _>>().unwrap();
        assert_eq!(records.len(), 50);
    }

    /// No setup's replay reports more than the simulated engine core allows
    /// (`zapraid_engine::cpu_cost`), at the quick run's size: writes of the trace's largest
    /// requests on the setup's largest chunks, the highest ceiling in MiB/s any of its
    /// writes has. Under the measured costs the drives, not the core, limit every setup:
    /// a regression guard (as crates/experiments/tests/engine_core.rs).
    #[test]
    fn exp10_stays_under_the_engine_core() {
        use zapraid_engine::cpu_cost::CpuCosts;
        use zapraid_experiments::PAPER_LEVEL;

        let trace = Trace::Text(synthetic_trace(QUICK_TRACE_LINES));
        let footprint = written_blocks(&trace).unwrap();
        let costs = CpuCosts::calibrated(PAPER_LEVEL);
        let mut failures = Vec::new();
        for setup in setups() {
            let large_chunk_bytes = if setup.open.large > 0 { setup.open.large_chunk_bytes } else { 0 };
            let chunk_blocks = setup.chunk_bytes.max(large_chunk_bytes) / BLOCK_BYTES;
            let requests_per_s = costs.max_writes_per_s(MAX_REQUEST_BLOCKS, chunk_blocks, PAPER_LEVEL.shape());
            let ceiling_mib_per_s = requests_per_s * (MAX_REQUEST_BLOCKS * BLOCK_BYTES) as f64 / (1u64 << 20) as f64;
            for (name, mode) in paper_modes() {
                let (_, report) = replay_one(&trace, &footprint, &setup, mode, 1).unwrap();
                if report.mib_per_s() > ceiling_mib_per_s {
                    failures.push(format!(
                        "{} {name}: {:.1} MiB/s, over the engine core's {ceiling_mib_per_s:.1}",
                        setup.name,
                        report.mib_per_s()
                    ));
                }
            }
        }
        assert!(failures.is_empty(), "over what one simulated engine core can do:\n{}", failures.join("\n"));
    }
}
