//! Replay of a trace against a `Target`: the engine in the deterministic simulator
//! (virtual time, the drives' timing model: the same trace, array and seed give the same
//! figures), or, through the CLI, an array on drives or a block device in wall time.
//!
//! - Closed loop: `queue_depth` requests in flight, the next issued as one completes, as
//!   fast as the array goes.
//! - Open loop: each request is due at its trace time (relative to the first request)
//!   divided by `speed`, and issued then; at most `max_in_flight` requests are in flight
//!   (bounding memory when the array is slower than the trace), so a request may be issued
//!   after it was due (counted). Latency counts from when a request was due, so waiting
//!   for the array shows in it. Timestamps that go backwards are issued in trace order
//!   at the previous request's time (counted).
//!
//! Requests are mapped into the array by `map::AddressMap`; `writes_only` drops reads (as
//! the paper replays). Owns nothing after it returns: the report is plain numbers.
//!
//! `prefill` writes a footprint (`footprint`: the blocks the replay will touch) once, in
//! large requests, before the replay: reads then find data, as on a volume in use, instead
//! of being answered from the mapping table without drive I/O. The replay's figures (and
//! its garbage collection counts) start after it.

pub mod footprint;
pub mod map;
pub mod stats;
pub mod target;

use std::collections::HashMap;

use zapraid_engine::{Request, RequestId};

use crate::error::{Result, TraceError};
use crate::record::{Op, TraceRecord};
pub use footprint::{array_footprint, trace_footprint, Footprint};
pub use map::{trace_blocks, AddressMap, MapMode, MapStats, Mapped};
pub use stats::{LatencySummary, Recorder, TimelineBucket};
pub use target::{GcCounts, Target};

/// How requests are paced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pacing {
    Closed { queue_depth: u64 },
    Open { speed: f64, max_in_flight: u64 },
}

#[derive(Clone, Debug, PartialEq)]
pub struct ReplayConfig {
    pub pacing: Pacing,
    pub writes_only: bool,
    pub map: MapMode,
    /// Stop after issuing this many requests.
    pub limit: Option<u64>,
}

/// Garbage collection over the replay (not over a prefill before it), from the engine's
/// status.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GcStats {
    pub segments_reclaimed: u64,
    pub blocks_relocated: u64,
    /// Blocks the trace's writes wrote (after widening).
    pub user_blocks_written: u64,
    /// (user blocks + blocks relocated) / user blocks; parity is not counted.
    pub write_amplification: f64,
}

/// What a replay measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    /// Virtual time from the first request issued to the last completion.
    pub elapsed_ns: u64,
    pub latency: LatencySummary,
    pub read_latency: LatencySummary,
    pub write_latency: LatencySummary,
    pub map: MapStats,
    /// Reads of the trace left out (`writes_only`).
    pub reads_dropped: u64,
    /// Reads of blocks none of which had been written: the engine answers them with zeros
    /// from its mapping table, without drive I/O (so they are fast). None when the target
    /// cannot tell (drives run by a server, a block device).
    pub reads_unwritten: Option<u64>,
    /// Open loop: requests issued after they were due (the in-flight cap was reached).
    pub issued_late: u64,
    /// Open loop: requests whose trace time is before the previous request's.
    pub out_of_order: u64,
    /// None when the target cannot tell (a block device).
    pub gc: Option<GcStats>,
    pub timeline_interval_ns: u64,
    pub timeline: Vec<TimelineBucket>,
}

impl Report {
    pub fn elapsed_s(&self) -> f64 {
        self.elapsed_ns as f64 / 1e9
    }

    pub fn mib_per_s(&self) -> f64 {
        per_second((self.read_bytes + self.write_bytes) as f64 / (1 << 20) as f64, self.elapsed_ns)
    }

    pub fn iops(&self) -> f64 {
        per_second(self.requests as f64, self.elapsed_ns)
    }
}

fn per_second(amount: f64, elapsed_ns: u64) -> f64 {
    if elapsed_ns == 0 {
        0.0
    } else {
        amount / (elapsed_ns as f64 / 1e9)
    }
}

/// The latest virtual time a request may be due (about 146 years): later, the clock
/// arithmetic of the simulated drives could overflow.
pub const MAX_DUE_NS: u64 = 1 << 62;

/// Requests issued between calls of the progress callback.
pub const PROGRESS_EVERY_REQUESTS: u64 = 1024;

struct InFlight {
    op: Op,
    bytes: u64,
    due_ns: u64,
}

/// The replay's state between requests.
struct Replayer<'a> {
    sim: &'a mut dyn Target,
    in_flight: HashMap<RequestId, InFlight>,
    recorder: Recorder,
}

impl Replayer<'_> {
    /// Takes the responses of the last step, at its time.
    fn collect(&mut self) -> Result<()> {
        let now = self.sim.now_ns();
        for (id, result) in self.sim.take_answers() {
            let Some(request) = self.in_flight.remove(&id) else { continue };
            result.map_err(|reason| TraceError::Target { request: id, reason })?;
            self.recorder.complete(request.op, request.bytes, request.due_ns, now);
        }
        Ok(())
    }

    /// Runs until at least one more event happened.
    fn step(&mut self) -> Result<()> {
        if !self.sim.step() {
            return Err(TraceError::Stalled { in_flight: self.in_flight.len() as u64 });
        }
        self.collect()
    }

    fn wait_below(&mut self, in_flight: u64) -> Result<()> {
        while self.in_flight.len() as u64 >= in_flight.max(1) {
            self.step()?;
        }
        Ok(())
    }
}

/// Replays `records` against `sim` (any `Target`) as `config` says; `progress` is called with the
/// requests issued so far every `PROGRESS_EVERY_REQUESTS`. The first error of the trace
/// (a malformed line, an empty trace) or of the engine stops the replay.
pub fn replay(
    sim: &mut dyn Target,
    records: impl Iterator<Item = Result<TraceRecord>>,
    config: &ReplayConfig,
    progress: &mut dyn FnMut(u64),
) -> Result<Report> {
    if let Pacing::Open { speed, .. } = config.pacing {
        if !(speed.is_finite() && speed > 0.0) {
            return Err(TraceError::Setting(format!("speed {speed} must be a positive number")));
        }
    }
    let block_bytes = sim.block_bytes();
    let map = AddressMap::new(config.map.clone(), sim.logical_blocks(), block_bytes);
    let gc_before = sim.gc().unwrap_or_default();
    let start_ns = sim.now_ns();
    let mut r = Replayer { sim, in_flight: HashMap::new(), recorder: Recorder::new(start_ns) };
    let (mut map_stats, mut reads_dropped, mut issued_late, mut out_of_order) = (MapStats::default(), 0, 0, 0);
    let mut reads_unwritten = Some(0u64);
    let (mut issued, mut reads, mut writes, mut user_blocks) = (0u64, 0u64, 0u64, 0u64);
    let (mut first_trace_ns, mut last_trace_ns, mut last_due_ns) = (None, 0u64, start_ns);
    for record in records {
        if config.limit.is_some_and(|limit| issued >= limit) {
            break;
        }
        let record = record?;
        if config.writes_only && record.op == Op::Read {
            reads_dropped += 1;
            continue;
        }
        let Mapped { lba, blocks } = map.map(record.offset_bytes, record.length_bytes, &mut map_stats);
        let due_ns = match config.pacing {
            Pacing::Closed { queue_depth } => {
                r.wait_below(queue_depth)?;
                r.sim.now_ns()
            }
            Pacing::Open { speed, max_in_flight } => {
                let first = *first_trace_ns.get_or_insert(record.timestamp_ns);
                if record.timestamp_ns < last_trace_ns {
                    out_of_order += 1;
                }
                last_trace_ns = last_trace_ns.max(record.timestamp_ns);
                let offset_ns = (record.timestamp_ns.saturating_sub(first) as f64 / speed) as u64;
                let due_ns = start_ns.saturating_add(offset_ns).max(last_due_ns);
                if due_ns > MAX_DUE_NS {
                    return Err(TraceError::Setting(format!(
                        "at speed {speed} the trace runs past {} years of virtual time; raise --speed",
                        MAX_DUE_NS / 1_000_000_000 / 86_400 / 365
                    )));
                }
                last_due_ns = due_ns;
                r.wait_below(max_in_flight)?;
                while r.sim.step_until(due_ns) {
                    r.collect()?;
                }
                if r.sim.now_ns() > due_ns {
                    issued_late += 1;
                }
                due_ns
            }
        };
        let bytes = blocks * block_bytes;
        let request = match record.op {
            Op::Read => {
                reads += 1;
                reads_unwritten = match (reads_unwritten, r.sim.unwritten(lba, blocks)) {
                    (Some(n), Some(unwritten)) => Some(n + u64::from(unwritten)),
                    _ => None,
                };
                Request::Read { lba, blocks }
            }
            Op::Write => {
                writes += 1;
                user_blocks += blocks;
                Request::Write { lba, data: vec![0; bytes as usize] }
            }
        };
        r.in_flight.insert(issued, InFlight { op: record.op, bytes, due_ns });
        r.sim.submit(issued, request);
        r.collect()?;
        issued += 1;
        if issued.is_multiple_of(PROGRESS_EVERY_REQUESTS) {
            progress(issued);
        }
    }
    if issued == 0 {
        let reason = if reads_dropped > 0 {
            format!("the trace has only reads ({reads_dropped}), and writes only were asked for")
        } else {
            "the trace has no requests to replay".to_string()
        };
        return Err(TraceError::Setting(reason));
    }
    r.wait_below(1)?;
    progress(issued);
    let gc = r.sim.gc().map(|(segments_reclaimed, blocks_relocated)| {
        let (segments_reclaimed, blocks_relocated) =
            (segments_reclaimed.saturating_sub(gc_before.0), blocks_relocated.saturating_sub(gc_before.1));
        GcStats {
            segments_reclaimed,
            blocks_relocated,
            user_blocks_written: user_blocks,
            write_amplification: if user_blocks == 0 {
                0.0
            } else {
                (user_blocks + blocks_relocated) as f64 / user_blocks as f64
            },
        }
    });
    let (timeline_interval_ns, timeline) = r.recorder.timeline();
    Ok(Report {
        requests: issued,
        reads,
        writes,
        read_bytes: r.recorder.read_bytes,
        write_bytes: r.recorder.write_bytes,
        elapsed_ns: r.sim.now_ns() - start_ns,
        latency: r.recorder.latency(),
        read_latency: r.recorder.read_latency(),
        write_latency: r.recorder.write_latency(),
        map: map_stats,
        reads_dropped,
        reads_unwritten,
        issued_late,
        out_of_order,
        gc,
        timeline_interval_ns,
        timeline,
    })
}

/// Blocks a prefill writes per request (1 MiB of 4 KiB blocks): large, sequential writes.
pub const PREFILL_REQUEST_BLOCKS: u64 = 256;

/// Prefill requests kept in flight.
pub const PREFILL_QUEUE_DEPTH: u64 = 32;

/// What a prefill wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prefill {
    pub blocks: u64,
    pub requests: u64,
    /// The target's time it took (virtual in the simulator).
    pub elapsed_ns: u64,
}

/// Writes every block of `footprint` (array blocks) once, in runs of at most
/// `PREFILL_REQUEST_BLOCKS`, `PREFILL_QUEUE_DEPTH` in flight, and waits for all of them;
/// `progress` is called with the blocks written so far every `PROGRESS_EVERY_REQUESTS`
/// requests. The first failed write stops it.
pub fn prefill(sim: &mut dyn Target, footprint: &Footprint, progress: &mut dyn FnMut(u64)) -> Result<Prefill> {
    let logical_blocks = sim.logical_blocks();
    if let Some(&(first, blocks)) = footprint.runs().last() {
        if first + blocks > logical_blocks {
            return Err(TraceError::Setting(format!(
                "the prefill reaches block {} of an array of {logical_blocks} blocks",
                first + blocks - 1
            )));
        }
    }
    let block_bytes = sim.block_bytes();
    let start_ns = sim.now_ns();
    let mut r = Replayer { sim, in_flight: HashMap::new(), recorder: Recorder::new(start_ns) };
    let (mut requests, mut written) = (0u64, 0u64);
    for &(first, run_blocks) in footprint.runs() {
        let mut lba = first;
        while lba < first + run_blocks {
            let blocks = PREFILL_REQUEST_BLOCKS.min(first + run_blocks - lba);
            r.wait_below(PREFILL_QUEUE_DEPTH)?;
            let bytes = blocks * block_bytes;
            let due_ns = r.sim.now_ns();
            r.in_flight.insert(requests, InFlight { op: Op::Write, bytes, due_ns });
            r.sim.submit(requests, Request::Write { lba, data: vec![0; bytes as usize] });
            r.collect()?;
            requests += 1;
            written += blocks;
            lba += blocks;
            if requests.is_multiple_of(PROGRESS_EVERY_REQUESTS) {
                progress(written);
            }
        }
    }
    r.wait_below(1)?;
    progress(written);
    debug_assert_eq!(written, footprint.blocks());
    Ok(Prefill { blocks: written, requests, elapsed_ns: r.sim.now_ns() - start_ns })
}
