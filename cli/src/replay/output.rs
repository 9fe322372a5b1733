//! What `zapraid replay` prints: the figures of a replay for people (text) or as JSON,
//! with what was replayed against what, the prefill before the clock started, and what
//! a target cannot count shown as unknown ("unknown" in text, null in JSON), never as 0.

use serde_json::{json, Value};
use zapraid_trace::replay::{LatencySummary, Pacing, Prefill, Report};
use zapraid_trace::{Format, ReadStats};

use super::{Map, ReplayArgs};
use crate::size::format_bytes;

/// The trace's footprint and the share of the array it fills (`--utilization`).
pub struct Fill {
    pub footprint_blocks: u64,
    pub logical_blocks: u64,
}

impl Fill {
    pub fn utilization(&self) -> f64 {
        self.footprint_blocks as f64 / self.logical_blocks.max(1) as f64
    }
}

/// What the output says besides the report.
pub struct Context_<'a> {
    pub args: &'a ReplayArgs,
    pub format: Format,
    pub stats: &'a ReadStats,
    pub array: String,
    /// simulator, drives or device.
    pub target: &'static str,
    pub pacing: Pacing,
    pub map: Map,
    /// None: no prefill (`--no-prefill`, or the wall-time targets' default).
    pub prefill: Option<Prefill>,
    pub fill: Option<Fill>,
    pub block_bytes: u64,
    pub peak: Option<u64>,
    pub wall_s: f64,
}

fn map_name(map: Map) -> &'static str {
    match map {
        Map::Wrap => "wrap",
        Map::Scale => "scale",
        Map::Compact => "compact",
    }
}

pub fn pacing_text(pacing: Pacing) -> String {
    match pacing {
        Pacing::Closed { queue_depth } => format!("closed loop, queue depth {queue_depth}"),
        Pacing::Open { speed, max_in_flight } => {
            format!("open loop at {speed}x the trace's speed, at most {max_in_flight} in flight")
        }
    }
}

fn latency_json(l: &LatencySummary) -> Value {
    json!({
        "count": l.count, "mean_us": l.mean_us, "p50_us": l.p50_us, "p95_us": l.p95_us,
        "p99_us": l.p99_us, "p99_9_us": l.p999_us, "max_us": l.max_us,
    })
}

pub fn to_json(c: &Context_, r: &Report) -> Value {
    let s = c.stats;
    let timeline: Vec<Value> = r
        .timeline
        .iter()
        .enumerate()
        .map(|(i, b)| {
            json!({
                "start_s": (i as u64 * r.timeline_interval_ns) as f64 / 1e9,
                "reads": b.reads, "writes": b.writes, "read_bytes": b.read_bytes, "write_bytes": b.write_bytes,
                "mean_latency_us": b.mean_latency_us(), "max_latency_us": b.latency_max_ns as f64 / 1e3,
            })
        })
        .collect();
    json!({
        "trace": {
            "path": c.args.trace.display().to_string(), "format": c.format.name(), "volume": c.args.volume,
            "lines": s.lines, "records": s.records, "bad_lines_skipped": s.skipped_bad,
            "first_bad_line": s.first_bad, "other_volume_requests": s.other_volumes,
            "non_data_requests": s.non_data,
        },
        "target": c.target,
        "array": c.array,
        "seed": (c.target == "simulator").then_some(c.args.seed),
        "pacing": pacing_text(c.pacing),
        "map": {
            "mode": map_name(c.map),
            "widened": r.map.widened, "wrapped": r.map.wrapped, "moved_from_end": r.map.moved_from_end,
            "clipped": r.map.clipped,
        },
        "requests": r.requests, "reads": r.reads, "writes": r.writes,
        "read_bytes": r.read_bytes, "write_bytes": r.write_bytes, "reads_dropped": r.reads_dropped,
        "reads_of_unwritten_blocks": r.reads_unwritten,
        "prefill": c.prefill.map(|p| json!({
            "blocks": p.blocks, "bytes": p.blocks * c.block_bytes, "requests": p.requests,
            "elapsed_s": p.elapsed_ns as f64 / 1e9, "counted_in_figures": false,
        })),
        "utilization": c.fill.as_ref().map(|f| json!({
            "footprint_blocks": f.footprint_blocks, "logical_blocks": f.logical_blocks,
            "utilization": f.utilization(),
        })),
        "issued_late": r.issued_late, "out_of_order": r.out_of_order,
        "elapsed_s": r.elapsed_s(), "mib_per_s": r.mib_per_s(), "iops": r.iops(),
        "latency": latency_json(&r.latency),
        "read_latency": latency_json(&r.read_latency),
        "write_latency": latency_json(&r.write_latency),
        "gc": r.gc.map(|gc| json!({
            "segments_reclaimed": gc.segments_reclaimed, "blocks_relocated": gc.blocks_relocated,
            "user_blocks_written": gc.user_blocks_written, "write_amplification": gc.write_amplification,
        })),
        "timeline_interval_s": r.timeline_interval_ns as f64 / 1e9,
        "timeline": timeline,
        "peak_resident_bytes": c.peak,
        "wall_s": c.wall_s,
    })
}

/// A virtual duration in the unit that keeps it readable.
fn duration_text(ns: u64) -> String {
    match ns {
        0..1_000_000 => format!("{:.1} us", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.3} ms", ns as f64 / 1e6),
        _ => format!("{:.3} s", ns as f64 / 1e9),
    }
}

/// A rate with as many decimals as it needs to show more than zero.
fn rate_text(rate: f64) -> String {
    if rate >= 100.0 {
        format!("{rate:.0}")
    } else if rate >= 0.1 {
        format!("{rate:.1}")
    } else {
        format!("{rate:.4}")
    }
}

fn latency_line(name: &str, l: &LatencySummary) -> String {
    format!(
        "{name:<7} {:>10} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
        l.count, l.mean_us, l.p50_us, l.p95_us, l.p99_us, l.p999_us, l.max_us
    )
}

pub fn print_text(c: &Context_, r: &Report) {
    let s = c.stats;
    let volume = c.args.volume.as_ref().map_or(String::new(), |v| format!(", volume {v}"));
    println!(
        "trace: {} ({}{volume}): {} lines, {} requests read; {} of other volumes, {} neither read nor write, {} bad lines skipped",
        c.args.trace.display(),
        c.format,
        s.lines,
        s.records,
        s.other_volumes,
        s.non_data,
        s.skipped_bad
    );
    if let Some(first) = &s.first_bad {
        println!("  first bad line: {first}");
    }
    let writes_only = if c.args.writes_only { ", writes only" } else { "" };
    if c.target == "simulator" {
        println!("array: {}", c.array);
        let seed = c.args.seed;
        println!(
            "target: the deterministic simulator (virtual time, seed {seed}); {}{writes_only}",
            pacing_text(c.pacing)
        );
    } else {
        println!("target: {}; {}{writes_only}", c.array, pacing_text(c.pacing));
    }
    let time = if c.target == "simulator" { "virtual time" } else { "wall time" };
    let m = &r.map;
    println!(
        "mapping ({}): {} requests widened to whole blocks, {} wrapped, {} moved back from the array's end, {} cut to the array's size or 8 MiB",
        map_name(c.map),
        m.widened,
        m.wrapped,
        m.moved_from_end,
        m.clipped
    );
    if let Some(f) = &c.fill {
        println!(
            "footprint: {} distinct blocks ({}) fill {:.1}% of the array's {} logical blocks",
            f.footprint_blocks,
            format_bytes(f.footprint_blocks * c.block_bytes),
            f.utilization() * 100.0,
            f.logical_blocks
        );
    }
    match c.prefill {
        Some(p) => println!(
            "prefill: {} blocks ({}) written once in {} requests of at most 1 MiB before the clock started \
             ({} of {time}); not counted in the figures below",
            p.blocks,
            format_bytes(p.blocks * c.block_bytes),
            p.requests,
            duration_text(p.elapsed_ns)
        ),
        None => println!("prefill: none; the figures start on the array as it was"),
    }
    println!(
        "\n{} requests ({} reads of {}, {} writes of {}{}) in {} of {time}: {} IOPS, {} MiB/s",
        r.requests,
        r.reads,
        format_bytes(r.read_bytes),
        r.writes,
        format_bytes(r.write_bytes),
        if r.reads_dropped > 0 { format!("; {} reads left out", r.reads_dropped) } else { String::new() },
        duration_text(r.elapsed_ns),
        rate_text(r.iops()),
        rate_text(r.mib_per_s())
    );
    match r.reads_unwritten {
        Some(0) => println!("reads of blocks never written: 0"),
        Some(n) => println!(
            "reads of blocks never written: {n}: the engine answers those with zeros from its mapping table, \
             without drive I/O (so they are fast); a prefill (the simulator's default) writes them first"
        ),
        None => println!("reads of blocks never written: unknown (this target cannot tell)"),
    }
    if let Pacing::Open { .. } = c.pacing {
        println!(
            "open loop: {} requests issued after their trace time (in-flight cap reached), {} with timestamps out of order",
            r.issued_late, r.out_of_order
        );
    }
    println!(
        "\n{:<7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "latency", "requests", "mean us", "p50 us", "p95 us", "p99 us", "p99.9 us", "max us"
    );
    println!("{}", latency_line("all", &r.latency));
    println!("{}", latency_line("reads", &r.read_latency));
    println!("{}", latency_line("writes", &r.write_latency));
    match &r.gc {
        Some(gc) => println!(
            "\ngarbage collection during the replay: {} segments reclaimed, {} blocks relocated; write \
             amplification {:.3} ((user blocks + relocated) / user blocks, parity not counted)",
            gc.segments_reclaimed, gc.blocks_relocated, gc.write_amplification
        ),
        None => println!("\ngarbage collection: not seen from a block device"),
    }
    if c.args.timeline {
        let interval_s = r.timeline_interval_ns as f64 / 1e9;
        println!("\ntimeline ({interval_s} s intervals, by completion time)");
        println!(
            "{:>10} {:>9} {:>9} {:>10} {:>10} {:>13}",
            "start s", "reads", "writes", "read MiB", "write MiB", "mean lat us"
        );
        for (i, b) in r.timeline.iter().enumerate() {
            println!(
                "{:>10.1} {:>9} {:>9} {:>10.1} {:>10.1} {:>13.1}",
                i as f64 * interval_s,
                b.reads,
                b.writes,
                b.read_bytes as f64 / (1 << 20) as f64,
                b.write_bytes as f64 / (1 << 20) as f64,
                b.mean_latency_us()
            );
        }
    }
    let peak = c.peak.map_or("unknown".to_string(), format_bytes);
    println!("\npeak resident size {peak} (VmHWM); {:.1} s wall time", c.wall_s);
}
