//! The engine's own CPU cost (`zapraid bench cpu`): the engine driven directly, one core,
//! over instant drives (every command completes as soon as the engine emits it; data kept
//! in memory allocated before the clock starts, or not kept at all for the write runs), so
//! that only the engine's work is timed: 4 KiB random writes, 4 KiB random reads, and the
//! same reads with a drive failed (a quarter rebuilt from their stripe).
//!
//! One thread plays three parts, each timed apart: the frontend (it builds each request:
//! the data buffer and, for writes, the blocks' CRC32C, which the ublk queue threads
//! compute in the server), the drives (their copies stand for DMA), and the engine. The
//! engine's figure is requests over the wall time less the other two, i.e. what one core
//! running only the engine thread does; the wall figure and the frontend's cost per request
//! are reported beside it. Requests are built and commands executed in batches, so the
//! clock is read a few times per batch, not per request (its cost counts as the engine's).
//!
//! For the simulator's cost model (`zapraid_engine::cpu_cost`), the engine's time is split
//! further: its `submit` calls are timed apart (per batch of requests), the rest is its
//! completion handling and answers, beside the commands and blocks of the completions,
//! counted by kind (the commands the instant drives executed). Runs of other request and
//! chunk sizes (`Shape`) separate each cost's fixed part from its part per block
//! (`calibrate`).
//!
//! A caller may pass a counter of heap allocations (the CLI counts them with its global
//! allocator) to report allocations per request beside the rate.

use std::time::{Duration, Instant};

use zapraid_zns::{Command, Completion, Done, Geometry, ZoneAction, ZoneTarget};

mod calibrate;
mod rebuild;

pub use self::calibrate::{calibrate, Calibration, Solved};
pub use self::rebuild::{
    calibrate_rebuild, median_rebuild, rebuild_cpu, Parity, RebuildCalibration, RebuildCpuFigure, RebuildShape,
    AT_ONCE_IN_SEGMENTS,
};

use super::{config, XorShift};
use zapraid_engine::checksum::BlockChecksums;
use zapraid_engine::cpu_cost::CompletionKind;
use zapraid_engine::engine::{Config, Engine, Request, RequestId, Response};
use zapraid_engine::error::{Error, Result};
use zapraid_engine::layout::{Mode, RaidLevel, DEFAULT_GROUP_SIZE};

/// Requests in flight, as the paper's write experiments.
pub const QUEUE_DEPTH: u64 = 64;
const BLOCK_BYTES: u64 = 4096;
/// Logical blocks the requests spread over (256 MiB).
const LOGICAL_BLOCKS: u64 = 1 << 16;
/// Blocks per request while filling the array before reads.
const FILL_REQUEST_BLOCKS: u64 = 64;

/// What one run measured.
#[derive(Clone, Copy, Debug)]
pub struct CpuFigure {
    /// Requests per second of the engine's own time (wall time less the frontend's and
    /// the drives'): one core running the engine thread.
    pub requests_per_s: f64,
    /// Requests per second of wall time, the frontend's and drives' work included.
    pub wall_requests_per_s: f64,
    /// The frontend's time per request (building it, with the write's checksums), which
    /// the server spends on the ublk queue threads.
    pub frontend_ns_per_request: f64,
    /// Heap allocations per request (None without a counter).
    pub allocations_per_request: Option<f64>,
    /// The engine's `submit` time per request.
    pub submit_ns_per_request: f64,
    /// The rest of the engine's time (completion handling, answers, polling its queues)
    /// per request.
    pub rest_ns_per_request: f64,
    /// Drive completions per request, by kind.
    pub completions_per_request: CompletionsPerRequest,
}

/// Drive completions per request, by the kind of command completed: commands and the
/// blocks they carried.
#[derive(Clone, Copy, Debug, Default)]
pub struct CompletionsPerRequest {
    /// Zone Writes and Zone Appends.
    pub write_commands: f64,
    pub write_blocks: f64,
    pub read_commands: f64,
    pub read_blocks: f64,
    /// Zone resets, finishes, reports.
    pub zone_commands: f64,
}

/// The size of a run's requests and chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub request_blocks: u64,
    pub chunk_bytes: u64,
}

impl Shape {
    /// 4 KiB requests on 4 KiB chunks: the runs `zapraid bench cpu` reports rates of.
    pub const ONE_BLOCK: Shape = Shape { request_blocks: 1, chunk_bytes: BLOCK_BYTES };
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (request_kib, chunk_kib) = (self.request_blocks * BLOCK_BYTES / 1024, self.chunk_bytes / 1024);
        write!(f, "{request_kib} KiB requests on {chunk_kib} KiB chunks")
    }
}

/// A drive that completes every command at once, in order (a failed one fails them).
struct InstantDrive {
    geometry: Geometry,
    /// Block data and metadata by LBA, or nothing kept (reads return zeros).
    data: Option<(Vec<u8>, Vec<u8>)>,
    write_pointers: Vec<u64>,
    failed: bool,
}

impl InstantDrive {
    fn new(geometry: Geometry, keep_data: bool) -> InstantDrive {
        let blocks = (u64::from(geometry.zone_count) * geometry.zone_size_blocks) as usize;
        let data = keep_data.then(|| {
            (
                vec![0u8; blocks * geometry.block_size_bytes as usize],
                vec![0u8; blocks * geometry.metadata_bytes_per_block as usize],
            )
        });
        let write_pointers = (0..geometry.zone_count).map(|z| geometry.zone_start_lba(z)).collect();
        InstantDrive { geometry, data, write_pointers, failed: false }
    }

    fn store(&mut self, lba: u64, data: &[u8], metadata: &[u8]) {
        if let Some((blocks, oob)) = self.data.as_mut() {
            let (bs, ms) = (self.geometry.block_size_bytes as usize, self.geometry.metadata_bytes_per_block as usize);
            let at = lba as usize;
            blocks[at * bs..at * bs + data.len()].copy_from_slice(data);
            oob[at * ms..at * ms + metadata.len()].copy_from_slice(metadata);
        }
    }

    fn execute(&mut self, tag: u64, command: Command) -> Completion {
        if self.failed {
            let result = Err(zapraid_zns::Error::DeviceFailed);
            return Completion { tag, result, data: Vec::new(), metadata: Vec::new() };
        }
        let bs = u64::from(self.geometry.block_size_bytes);
        let zone_size_blocks = self.geometry.zone_size_blocks;
        let zone_of = |lba: u64| (lba / zone_size_blocks) as usize;
        let (result, data, metadata) = match command {
            Command::Read { lba, mut data, mut metadata } => {
                if let Some((blocks, oob)) = &self.data {
                    let (b, m) = (bs as usize, self.geometry.metadata_bytes_per_block as usize);
                    let at = lba as usize;
                    let data_len = data.len();
                    data.copy_from_slice(&blocks[at * b..at * b + data_len]);
                    let meta_len = metadata.len();
                    metadata.copy_from_slice(&oob[at * m..at * m + meta_len]);
                }
                (Ok(Done::Read), data, metadata)
            }
            Command::Write { lba, data, metadata } => {
                let blocks = data.len() as u64 / bs;
                self.store(lba, &data, &metadata);
                self.write_pointers[zone_of(lba)] = lba + blocks;
                (Ok(Done::Written { lba, blocks }), data, metadata)
            }
            Command::Append { zone_start_lba, data, metadata } => {
                let blocks = data.len() as u64 / bs;
                let zone = zone_of(zone_start_lba);
                let lba = self.write_pointers[zone];
                self.store(lba, &data, &metadata);
                self.write_pointers[zone] = lba + blocks;
                (Ok(Done::Written { lba, blocks }), data, metadata)
            }
            Command::ManageZone { action, target } => {
                if let (ZoneAction::Reset, ZoneTarget::Zone { start_lba: start }) = (action, target) {
                    self.write_pointers[zone_of(start)] = start;
                }
                (Ok(Done::ZoneManaged), Vec::new(), Vec::new())
            }
            Command::ReportZones { .. } => (Ok(Done::Zones(Vec::new())), Vec::new(), Vec::new()),
        };
        Completion { tag, result, data, metadata }
    }
}

/// The engine over instant drives, driven in a loop on this thread.
struct Bench {
    engine: Engine,
    drives: Vec<InstantDrive>,
    completed: Vec<RequestId>,
    /// Write buffers the engine gave back with their responses, for the next writes (as
    /// the server's ublk queues reuse them).
    recycled: Vec<Vec<u8>>,
    /// Reused batches: commands the engine emitted, their completions, requests built.
    commands: Vec<(usize, u64, Command)>,
    /// With the kind (index of `executed_commands`) of each the rebuild's.
    completions: Vec<(usize, Completion, Option<usize>)>,
    requests: Vec<Request>,
    responses: Vec<Response>,
    /// Time spent in the drives' and the frontend's parts (`figure` takes it off).
    drive_time: Duration,
    frontend_time: Duration,
    /// Time in the engine's `submit` (part of the engine's time).
    submit_time: Duration,
    /// The commands executed and their blocks, by kind: writes, reads, zone commands.
    executed_commands: [u64; 3],
    executed_blocks: [u64; 3],
    /// Of those, the drive rebuild's (`Engine::is_rebuild_command`).
    rebuild_commands: [u64; 3],
    rebuild_blocks: [u64; 3],
    /// Whole chunks the rebuild's writes carried (`CpuCosts::rebuild_chunk_ns`).
    rebuild_write_chunks: u64,
    /// Whether each completion of the rebuild's is timed, by kind, into
    /// `rebuild_completion_time` (two clock reads per completion: the rebuild runs only).
    time_rebuild_completions: bool,
    rebuild_completion_time: [Duration; 3],
    /// The rebuild's jobs (`RebuildJob`, run here as the server's engine thread runs
    /// them), the blocks of their sources, and the time they took (timed apart from the
    /// engine's: the simulator charges them on their own, `CpuCosts::rebuild_job`).
    rebuild_jobs: u64,
    rebuild_job_blocks: u64,
    rebuild_job_time: Duration,
}

impl Bench {
    fn new(level: RaidLevel, keep_data: bool, chunk_bytes: u64) -> Result<Bench> {
        let geometry = cpu_geometry(keep_data);
        let config: Config = config(Mode::ZapRaid { group_size: DEFAULT_GROUP_SIZE }, chunk_bytes, LOGICAL_BLOCKS);
        Bench::over(geometry, Config { level, ..config }, keep_data)
    }

    /// An engine formatted over instant drives of `geometry`, one per drive of the array.
    fn over(geometry: Geometry, config: Config, keep_data: bool) -> Result<Bench> {
        let mut engine = Engine::format(geometry, config)?;
        engine.set_rebuild_jobs_offloaded(true);
        let drives = (0..engine.drive_count()).map(|_| InstantDrive::new(geometry, keep_data)).collect();
        Ok(Bench {
            engine,
            drives,
            completed: Vec::new(),
            recycled: Vec::new(),
            commands: Vec::new(),
            completions: Vec::new(),
            requests: Vec::new(),
            responses: Vec::new(),
            drive_time: Duration::ZERO,
            frontend_time: Duration::ZERO,
            submit_time: Duration::ZERO,
            executed_commands: [0; 3],
            executed_blocks: [0; 3],
            rebuild_commands: [0; 3],
            rebuild_blocks: [0; 3],
            rebuild_write_chunks: 0,
            time_rebuild_completions: false,
            rebuild_completion_time: [Duration::ZERO; 3],
            rebuild_jobs: 0,
            rebuild_job_blocks: 0,
            rebuild_job_time: Duration::ZERO,
        })
    }

    /// Runs commands and completions until the engine has nothing more to do now: the
    /// commands emitted are executed as a batch (drive time), then their completions go
    /// back to the engine in order.
    fn run(&mut self) -> Result<()> {
        self.run_until(&mut |_| false).map(|_| ())
    }

    /// As `run`, but stops after the round of completions after which `done` holds of the
    /// engine (whether it did); `done` is timed with the drives' part, not the engine's.
    fn run_until(&mut self, done: &mut dyn FnMut(&Engine) -> bool) -> Result<bool> {
        loop {
            while let Some(command) = self.engine.poll_command() {
                self.commands.push((command.drive, command.tag, command.command));
            }
            if self.commands.is_empty() {
                break;
            }
            let started = Instant::now();
            for (drive, tag, command) in self.commands.drain(..) {
                let (kind, blocks) = CompletionKind::of(&command, BLOCK_BYTES);
                let kind = match kind {
                    CompletionKind::Write | CompletionKind::RebuildWrite => 0,
                    CompletionKind::Read | CompletionKind::RebuildRead => 1,
                    CompletionKind::Zone | CompletionKind::RebuildZone => 2,
                };
                self.executed_commands[kind] += 1;
                self.executed_blocks[kind] += blocks;
                let rebuild = self.engine.rebuild_command_chunk_blocks(tag);
                if let Some(chunk_blocks) = rebuild {
                    self.rebuild_commands[kind] += 1;
                    self.rebuild_blocks[kind] += blocks;
                    if kind == 0 {
                        self.rebuild_write_chunks += blocks / chunk_blocks.max(1);
                    }
                }
                let rebuild = rebuild.is_some();
                let timed = (rebuild && self.time_rebuild_completions).then_some(kind);
                self.completions.push((drive, self.drives[drive].execute(tag, command), timed));
            }
            self.drive_time += started.elapsed();
            let mut completions = std::mem::take(&mut self.completions);
            for (drive, completion, timed) in completions.drain(..) {
                let started = timed.map(|_| Instant::now());
                self.engine.on_completion(drive, completion, 0);
                let job_time = self.run_rebuild_jobs();
                if let (Some(kind), Some(started)) = (timed, started) {
                    self.rebuild_completion_time[kind] += started.elapsed().saturating_sub(job_time);
                }
            }
            self.completions = completions;
            let started = Instant::now();
            let stop = done(&self.engine);
            self.drive_time += started.elapsed();
            if stop {
                return Ok(true);
            }
        }
        while let Some(response) = self.engine.poll_response() {
            self.responses.push(response);
        }
        // The frontend's part, as a batch: the read checks the server's ublk queue
        // threads verify, and the buffers kept for the next requests.
        let started = Instant::now();
        for response in self.responses.drain(..) {
            let data = response.result?;
            if let Some(checks) = response.checks {
                if let Err(block) = checks.verify(&data, BLOCK_BYTES as usize) {
                    let reason = format!("block {block} of a read failed its checksum");
                    return Err(Error::InvalidConfig { reason });
                }
            }
            // Write buffers and read answers alike go back out with the next requests.
            if !data.is_empty() && self.recycled.len() < QUEUE_DEPTH as usize {
                self.recycled.push(data);
            }
            self.completed.push(response.id);
        }
        self.frontend_time += started.elapsed();
        Ok(false)
    }

    /// Keeps `QUEUE_DEPTH` requests from `next` in flight until `requests` completed;
    /// `next` is the frontend's part, timed apart, given a buffer to reuse if there is one.
    fn closed_loop(&mut self, requests: u64, mut next: impl FnMut(Option<Vec<u8>>) -> Request) -> Result<()> {
        let mut submitted = 0;
        let mut done = 0;
        while done < requests {
            let batch = (requests - submitted).min(QUEUE_DEPTH - (submitted - done));
            let started = Instant::now();
            for _ in 0..batch {
                self.requests.push(next(self.recycled.pop()));
            }
            self.frontend_time += started.elapsed();
            let started = Instant::now();
            for request in self.requests.drain(..) {
                self.engine.submit(submitted, request, 0);
                submitted += 1;
            }
            self.submit_time += started.elapsed();
            self.run()?;
            let finished = self.completed.len() as u64;
            self.completed.clear();
            if finished == 0 {
                // Partial stripes wait for their timeout: flush them.
                let started = Instant::now();
                self.engine.submit(u64::MAX, Request::Flush, 0);
                self.submit_time += started.elapsed();
                self.run()?;
                let flushed = self.completed.iter().filter(|id| **id != u64::MAX).count() as u64;
                if flushed == 0 {
                    return Err(Error::InvalidConfig { reason: "the CPU benchmark stalled".into() });
                }
                done += flushed;
                self.completed.clear();
                continue;
            }
            done += finished;
        }
        Ok(())
    }

    /// Runs the rebuild's jobs the engine set off and hands it their results (which is the
    /// engine's work, timed with the completion that set them off); the jobs' own time,
    /// counted apart (two clock reads per job), is returned.
    fn run_rebuild_jobs(&mut self) -> Duration {
        let (mut job_time, mut done) = (Duration::ZERO, Vec::new());
        while let Some(job) = self.engine.poll_rebuild_job() {
            self.rebuild_jobs += 1;
            self.rebuild_job_blocks += job.source_blocks();
            let started = Instant::now();
            done.push(job.run());
            job_time += started.elapsed();
        }
        if !done.is_empty() {
            self.engine.on_rebuild_jobs_done(done, 0);
        }
        self.rebuild_job_time += job_time;
        job_time
    }

    /// Starts the timed part: the clocks of the frontend and drives from zero.
    fn start_clock(&mut self) -> Instant {
        self.drive_time = Duration::ZERO;
        self.frontend_time = Duration::ZERO;
        self.submit_time = Duration::ZERO;
        self.executed_commands = [0; 3];
        self.executed_blocks = [0; 3];
        self.rebuild_commands = [0; 3];
        self.rebuild_blocks = [0; 3];
        self.rebuild_write_chunks = 0;
        self.rebuild_completion_time = [Duration::ZERO; 3];
        self.rebuild_jobs = 0;
        self.rebuild_job_blocks = 0;
        self.rebuild_job_time = Duration::ZERO;
        Instant::now()
    }

    fn figure(
        &self,
        requests: u64,
        started: Instant,
        allocations: &dyn Fn() -> Option<u64>,
        before: Option<u64>,
    ) -> CpuFigure {
        let wall = started.elapsed();
        let engine = wall.saturating_sub(self.drive_time + self.frontend_time);
        let allocations_per_request =
            allocations().zip(before).map(|(after, before)| (after - before) as f64 / requests as f64);
        let per_request = |n: u64| n as f64 / requests as f64;
        CpuFigure {
            requests_per_s: requests as f64 / engine.as_secs_f64().max(f64::MIN_POSITIVE),
            wall_requests_per_s: requests as f64 / wall.as_secs_f64(),
            frontend_ns_per_request: self.frontend_time.as_nanos() as f64 / requests as f64,
            allocations_per_request,
            submit_ns_per_request: self.submit_time.as_nanos() as f64 / requests as f64,
            rest_ns_per_request: engine.saturating_sub(self.submit_time).as_nanos() as f64 / requests as f64,
            completions_per_request: CompletionsPerRequest {
                write_commands: per_request(self.executed_commands[0]),
                write_blocks: per_request(self.executed_blocks[0]),
                read_commands: per_request(self.executed_commands[1]),
                read_blocks: per_request(self.executed_blocks[1]),
                zone_commands: per_request(self.executed_commands[2]),
            },
        }
    }
}

/// Zones enough for a run's writes without garbage collection (data not kept), or a
/// small array whose data is kept for reads.
fn cpu_geometry(keep_data: bool) -> Geometry {
    const WRITE_ZONES: u32 = 32;
    const READ_ZONES: u32 = 8;
    const READ_ZONE_BLOCKS: u64 = 32_768;
    if keep_data {
        Geometry {
            zone_count: READ_ZONES,
            zone_size_blocks: READ_ZONE_BLOCKS,
            zone_capacity_blocks: READ_ZONE_BLOCKS,
            ..Geometry::zn540()
        }
    } else {
        Geometry { zone_count: WRITE_ZONES, ..Geometry::zn540() }
    }
}

/// 4 KiB random writes per second through the engine, each with the CRC32C the frontend
/// computed (`Request::WriteWithChecksums`, as the server's ublk queues send them).
pub fn writes(level: RaidLevel, requests: u64, seed: u64, allocations: &dyn Fn() -> Option<u64>) -> Result<CpuFigure> {
    writes_of(level, Shape::ONE_BLOCK, requests, seed, allocations)
}

/// As `writes`, of `shape`'s requests (at random places aligned to their size) and chunks.
pub fn writes_of(
    level: RaidLevel,
    shape: Shape,
    requests: u64,
    seed: u64,
    allocations: &dyn Fn() -> Option<u64>,
) -> Result<CpuFigure> {
    let mut bench = Bench::new(level, false, shape.chunk_bytes)?;
    let mut rng = XorShift(seed | 1);
    let request_blocks = shape.request_blocks.max(1);
    let block = vec![0x11u8; (request_blocks * BLOCK_BYTES) as usize];
    // The frontend copies each write's data into a buffer (one given back by an earlier
    // write's response, else a new one) and computes its checksums.
    let mut next = |recycled: Option<Vec<u8>>| {
        let data = match recycled {
            Some(mut buffer) if buffer.len() == block.len() => {
                buffer.copy_from_slice(&block);
                buffer
            }
            _ => block.clone(),
        };
        let checksums = BlockChecksums::of(&data, BLOCK_BYTES as usize);
        let lba = rng.below(LOGICAL_BLOCKS / request_blocks) * request_blocks;
        Request::WriteWithChecksums { lba, data, checksums }
    };
    // Warm up (the first segments, the engine's maps), untimed.
    bench.closed_loop(requests / 10, &mut next)?;
    let before = allocations();
    let started = bench.start_clock();
    bench.closed_loop(requests, &mut next)?;
    Ok(bench.figure(requests, started, allocations, before))
}

/// 4 KiB random reads per second through the engine, their checksums verified by the
/// frontend (`Request::ReadUnverified`, as the server's ublk queues send them), after
/// every block was written;
/// with `failed_drive`, that drive failed first (its blocks rebuilt from their stripes).
pub fn reads(
    level: RaidLevel,
    requests: u64,
    seed: u64,
    failed_drive: Option<usize>,
    allocations: &dyn Fn() -> Option<u64>,
) -> Result<CpuFigure> {
    reads_of(level, Shape::ONE_BLOCK, requests, seed, failed_drive, allocations)
}

/// As `reads`, of `shape`'s requests (at random places aligned to their size) and chunks.
pub fn reads_of(
    level: RaidLevel,
    shape: Shape,
    requests: u64,
    seed: u64,
    failed_drive: Option<usize>,
    allocations: &dyn Fn() -> Option<u64>,
) -> Result<CpuFigure> {
    let mut bench = Bench::new(level, true, shape.chunk_bytes)?;
    let request_blocks = shape.request_blocks.max(1);
    let block = vec![0x22u8; (FILL_REQUEST_BLOCKS * BLOCK_BYTES) as usize];
    let mut next_lba = 0;
    bench.closed_loop(LOGICAL_BLOCKS / FILL_REQUEST_BLOCKS, |_| {
        let lba = next_lba;
        next_lba += FILL_REQUEST_BLOCKS;
        Request::Write { lba, data: block.clone() }
    })?;
    if let Some(drive) = failed_drive {
        bench.engine.fail_drive(drive);
    }
    let mut rng = XorShift(seed | 1);
    let before = allocations();
    let started = bench.start_clock();
    bench.closed_loop(requests, |recycled| Request::ReadUnverified {
        lba: rng.below(LOGICAL_BLOCKS / request_blocks) * request_blocks,
        blocks: request_blocks,
        buffer: recycled.unwrap_or_default(),
    })?;
    Ok(bench.figure(requests, started, allocations, before))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_completes() {
        let none = || None;
        let raid5 = RaidLevel::Raid5 { drives: 4 };
        let w = writes(raid5, 2_000, 1, &none).unwrap();
        assert!(w.requests_per_s >= w.wall_requests_per_s && w.wall_requests_per_s > 0.0);
        assert!(w.frontend_ns_per_request > 0.0);
        assert!(reads(raid5, 2_000, 1, None, &none).unwrap().requests_per_s > 0.0);
        assert!(reads(RaidLevel::Raid6 { drives: 6 }, 2_000, 1, Some(0), &none).unwrap().requests_per_s > 0.0);
    }
}
