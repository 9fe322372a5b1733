//! `zapraid bench cpu`'s run of the real server path: an array formatted on emulated drive
//! files on tmpfs, assembled, recovered and run on the server's engine thread
//! (`zapraid_server::run`: `EngineThread` and its drive driver), exactly as `zapraid start`
//! runs it, fed by frontend threads that do what the ublk queue threads do
//! (`zapraid_server::export::ublk`): each builds 4 KiB random writes (a copy of the data
//! into a buffer the engine gave back, standing for the queue's `pread` from the ublk
//! device, and the block's CRC32C), sends them through the array's `Blocks` (the engine
//! thread's `EngineSender`, which rings its doorbell) with a `ReplyTo` whose wake-up is an
//! eventfd, keeps a queue depth of its own, and sleeps on the eventfd until answers come.
//! This host has no ublk (no `/dev/ublk-control`): the frontend threads stand in for the
//! ublk queues, and the kernel's part of a block request is not in the figures.
//!
//! Each run: a warm-up, then the measured requests; requests per second over the wall
//! time of the measured part, each request's latency (sent to answered, as a frontend sees
//! it) in an HDR histogram, and the CPU time of every thread of the process over the
//! measured part (`thread_cpu`), each named by its role. Emulated drives complete commands
//! when the engine thread reaps them (they cannot signal an eventfd), so the drives' work
//! (their `pwrite`s to the files) is on the engine thread: there is no drive thread.
//!
//! With S shards the array is formatted with S engine shards (`format --shards`): S
//! engine threads, each over its own part of every drive file, requests within one shard
//! sent straight to its thread and requests across shards split and joined, as `zapraid
//! start` runs them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use hdrhistogram::Histogram;
use zapraid_engine::layout::DEFAULT_GROUP_SIZE;
use zapraid_engine::{BlockChecksums, Mode, OpenSegments, RaidLevel, Request};
use zapraid_experiments::XorShift;
use zapraid_server::assemble::{assemble, format, FormatOptions};
use zapraid_server::export::ublk::DEFAULT_QUEUE_DEPTH;
use zapraid_server::export::Blocks;
use zapraid_server::run::thread::hosted::{EngineLease, HostedEngine, Turns};
use zapraid_server::run::thread::rebuild_workers;
use zapraid_server::run::wake::Doorbell;
use zapraid_server::run::{ArrayStatus, EngineSender, ReplyTo, Session};
use zapraid_zns::{EmulatedDrive, Geometry};

use super::thread_cpu::{self, ThreadTime};

/// Requests each frontend keeps in flight: a ublk queue's default depth.
pub(super) const QUEUE_DEPTH: usize = DEFAULT_QUEUE_DEPTH as usize;
const BLOCK_BYTES: usize = 4096;
/// The logical blocks the writes spread over (256 MiB), as the engine-only runs.
const WINDOW_BLOCKS: u64 = 1 << 16;
/// Zones of 64 MiB: the drives get as many as the run writes (with room), no more.
const ZONE_BLOCKS: u64 = 16_384;
/// Zones beyond those the run's writes fill, so that garbage collection never needs to
/// run (the status's reclaimed segments, printed, say whether it did).
const SPARE_ZONES: u64 = 8;
/// A frontend waiting this long for any answer gives up: the engine is stuck.
const ANSWER_WAIT: Duration = Duration::from_secs(60);
/// How long a frontend waits for an engine thread to lend it its engine.
const BORROW_WAIT: Duration = Duration::from_secs(5);
/// Frontend threads are named this and their index (a `comm` is at most 15 bytes).
const FRONTEND_THREAD: &str = "frontend-";
/// Latencies up to a minute, 3 significant digits.
const LATENCY_MAX_NS: u64 = 60_000_000_000;
const LATENCY_DIGITS: u8 = 3;

/// The server a run writes to (its drive files in the run's directory).
pub(super) struct ServerPath {
    session: Session,
    /// Where frontends send block requests.
    blocks: EngineSender,
    /// Each engine (shard)'s lease, for frontend i to run engine i itself.
    leases: Vec<EngineLease>,
}

impl ServerPath {
    /// The role of a server thread named `name` (its `comm`), if it is one: the engine
    /// thread names itself "zapraid-engine" (`EngineThread::spawn`), its rebuild workers
    /// `rebuild_workers::WORKER_NAME` and their index.
    fn role_of(name: &str) -> Option<String> {
        if name == "zapraid-engine" {
            return Some("engine (and its drives)".to_string());
        }
        if let Some(index) = name.strip_prefix(rebuild_workers::WORKER_NAME) {
            return Some(format!("rebuild worker {index}"));
        }
        name.strip_prefix("zapraid-shard").map(|index| format!("engine shard {index} (and its drive parts)"))
    }

    fn status(&self) -> Result<ArrayStatus> {
        Ok(self.session.status()?)
    }

    fn stop(self) -> Result<()> {
        drop(self.blocks);
        drop(self.leases);
        Ok(self.session.stop()?)
    }
}

/// Starts the real server path with `shards` engine shards for `level` over new emulated
/// drive files in `dir`, big enough for `blocks_to_write` blocks of writes without garbage
/// collection: the files are created, formatted as `zapraid format` does by default
/// (ZapRAID mode, G = 256, 4 KiB chunks, one open segment), assembled, recovered and run on
/// the server's engine thread (`Session::start`, as `zapraid start` without a block device).
/// The server threads are named for `ServerPath::role_of`.
pub(super) fn start_server_path(
    dir: &Path,
    level: RaidLevel,
    shards: usize,
    blocks_to_write: u64,
    seed: u64,
) -> Result<ServerPath> {
    let (k, m) = level.shape();
    // Each drive takes 1/k of the data written (data and parity rotate); half as much
    // again for segment headers and footers; each shard keeps its own spare zones.
    let zones = (blocks_to_write / k as u64 * 3 / 2).div_ceil(ZONE_BLOCKS) + SPARE_ZONES * shards as u64;
    let geometry = Geometry {
        zone_count: u32::try_from(zones).context("too many zones for the drives")?,
        zone_size_blocks: ZONE_BLOCKS,
        zone_capacity_blocks: ZONE_BLOCKS,
        ..Geometry::zn540()
    };
    let paths: Vec<PathBuf> = (0..k + m).map(|i| dir.join(format!("drive{i}.zns"))).collect();
    for (i, path) in paths.iter().enumerate() {
        EmulatedDrive::create_file(path, geometry, seed + i as u64)
            .with_context(|| format!("creating the drive file {}", path.display()))?;
        // Its pages exist before the run: tmpfs would allocate and clear each at its first
        // write, a cost real media does not have (`EmulatedDrive::populate_file`).
        EmulatedDrive::populate_file(path)?;
    }
    let options = FormatOptions {
        level,
        mode: Mode::ZapRaid { group_size: DEFAULT_GROUP_SIZE },
        chunk_bytes: BLOCK_BYTES as u64,
        open_segments: OpenSegments::SINGLE,
        name: "bench-cpu".into(),
        force: false,
        l2p_budget_bytes: None,
        shards: u32::try_from(shards).context("too many shards")?,
        declustering: zapraid_engine::Declustering::CLASSIC,
    };
    format(&paths, &options, |_, _| {})?;
    let session = Session::start(assemble(&paths)?)?;
    let blocks = session.thread.tx().clone();
    let leases = session.thread.leases();
    Ok(ServerPath { session, blocks, leases })
}

/// One thread's part of a run.
#[derive(Clone, Debug)]
pub(super) struct ThreadFigure {
    pub tid: i32,
    pub role: String,
    pub name: String,
    pub cpu_ns: u64,
    /// Time runnable, waiting for a CPU (others' load on a shared machine, or too many
    /// busy threads for the cores).
    pub wait_ns: u64,
    /// The share of its CPU time in the kernel (from clock ticks: coarse), if it ran a
    /// tick at all.
    pub kernel_fraction: Option<f64>,
}

/// What one run of the server path measured.
#[derive(Clone, Debug)]
pub(super) struct RunFigure {
    /// Writes the frontends sent and had answered in the measured part.
    pub requests: u64,
    /// Writes the engine thread counted answering in the measured part (its status).
    pub engine_writes: u64,
    pub wall_s: f64,
    pub latency_us: Latencies,
    /// Every thread of the process over the measured part.
    pub threads: Vec<ThreadFigure>,
    /// Segments garbage collection reclaimed in the measured part.
    pub segments_reclaimed: u64,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Latencies {
    pub p50: f64,
    pub p99: f64,
    pub p99_99: f64,
}

impl RunFigure {
    pub fn requests_per_s(&self) -> f64 {
        self.requests as f64 / self.wall_s
    }

    pub fn cpu_ns(&self) -> u64 {
        self.threads.iter().map(|t| t.cpu_ns).sum()
    }

    pub fn wait_ns(&self) -> u64 {
        self.threads.iter().map(|t| t.wait_ns).sum()
    }

    /// Every thread's CPU time over the requests.
    pub fn cpu_us_per_request(&self) -> f64 {
        self.cpu_ns() as f64 / 1e3 / self.requests as f64
    }
}

/// What each run is given.
#[derive(Clone, Copy, Debug)]
pub(super) struct RunPlan {
    pub level: RaidLevel,
    pub shards: usize,
    pub frontends: usize,
    /// Frontend i runs engine (shard) i itself, as ublk queue i does by default; else
    /// every engine runs on its own thread (`start --engine-threads`).
    pub engine_on_frontends: bool,
    /// Measured writes, over all frontends (a tenth more first, to warm up).
    pub requests: u64,
    pub seed: u64,
}

/// Runs `plan` on the server path in a new directory under `base`.
pub(super) fn run(base: &Path, plan: RunPlan) -> Result<RunFigure> {
    let dir = tempfile::Builder::new()
        .prefix("zapraid-bench-cpu-")
        .tempdir_in(base)
        .with_context(|| format!("making a directory for the drive files in {}", base.display()))?;
    let warmup = plan.requests / 10;
    let server = start_server_path(dir.path(), plan.level, plan.shards, warmup + plan.requests, plan.seed)?;
    let measured = measure(&server, plan, warmup);
    let stopped = server.stop();
    let figure = measured?;
    stopped.context("stopping the array after the run")?;
    Ok(figure)
}

/// The frontends' two phases (warm-up, measured), with the samples between them.
fn measure(server: &ServerPath, plan: RunPlan, warmup: u64) -> Result<RunFigure> {
    let frontends = plan.frontends.max(1);
    // Frontends and this thread meet four times: warmed up; clock started; done; sampled.
    let barrier = Arc::new(Barrier::new(frontends + 1));
    let share = |total: u64, i: usize| total / frontends as u64 + u64::from((i as u64) < total % frontends as u64);
    let mut handles = Vec::new();
    for i in 0..frontends {
        let blocks = server.blocks.clone();
        let lease = server.leases.get(i).filter(|_| plan.engine_on_frontends).cloned();
        let barrier = barrier.clone();
        let (warmup, requests) = (share(warmup, i), share(plan.requests, i));
        let seed = plan.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(i as u64) | 1;
        let handle = std::thread::Builder::new()
            .name(format!("{FRONTEND_THREAD}{i}"))
            .spawn(move || frontend_thread(blocks, lease, &barrier, seed, warmup, requests))
            .context("starting a frontend thread")?;
        handles.push(handle);
    }
    barrier.wait();
    let status_before = server.status();
    let cpu_before = thread_cpu::sample();
    let started = Instant::now();
    barrier.wait();
    barrier.wait();
    let wall = started.elapsed();
    let cpu_after = thread_cpu::sample();
    let status_after = server.status();
    barrier.wait();
    let mut latencies = new_histogram();
    let mut requests = 0;
    for handle in handles {
        let (answered, histogram) = handle.join().map_err(|_| anyhow!("a frontend thread panicked"))??;
        requests += answered;
        latencies.add(&histogram).map_err(|e| anyhow!("merging latencies: {e}"))?;
    }
    let (status_before, status_after) = (status_before?, status_after?);
    let threads = thread_cpu::window(&cpu_before?, &cpu_after?)?;
    let engine_writes = status_after.writes.saturating_sub(status_before.writes);
    if requests != plan.requests || engine_writes != requests {
        bail!(
            "the frontends sent {} writes, had {requests} answered, and the engine thread counted {engine_writes}",
            plan.requests
        );
    }
    let quantile_us = |q: f64| latencies.value_at_quantile(q) as f64 / 1e3;
    Ok(RunFigure {
        requests,
        engine_writes,
        wall_s: wall.as_secs_f64(),
        latency_us: Latencies { p50: quantile_us(0.5), p99: quantile_us(0.99), p99_99: quantile_us(0.9999) },
        threads: name_threads(&threads),
        segments_reclaimed: status_after
            .engine
            .segments_reclaimed
            .saturating_sub(status_before.engine.segments_reclaimed),
    })
}

/// Each thread's role: the server's (`ServerPath::role_of`), a frontend, this thread.
fn name_threads(threads: &[ThreadTime]) -> Vec<ThreadFigure> {
    let pid = std::process::id() as i32;
    threads
        .iter()
        .map(|t| {
            let role = if t.tid == pid {
                "main (starts the run, waits)".to_string()
            } else if let Some(role) = ServerPath::role_of(&t.name) {
                role
            } else if let Some(i) = t.name.strip_prefix(FRONTEND_THREAD) {
                format!("frontend {i}")
            } else {
                format!("other ({})", t.name)
            };
            let ticks = t.user_ticks + t.system_ticks;
            let kernel_fraction = (ticks > 0).then(|| t.system_ticks as f64 / ticks as f64);
            ThreadFigure {
                tid: t.tid,
                role,
                name: t.name.clone(),
                cpu_ns: t.cpu_ns,
                wait_ns: t.wait_ns,
                kernel_fraction,
            }
        })
        .collect()
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_NS, LATENCY_DIGITS).expect("valid histogram bounds")
}

/// A frontend's life: warm-up, the measured writes, meeting the main thread between
/// them. It always meets it, failed or not, so that no thread waits forever; an error is
/// returned at the end. Returns the measured writes answered and their latencies.
fn frontend_thread(
    blocks: EngineSender,
    lease: Option<EngineLease>,
    barrier: &Barrier,
    seed: u64,
    warmup: u64,
    requests: u64,
) -> Result<(u64, Histogram<u64>)> {
    let mut latencies = new_histogram();
    let mut frontend = Frontend::new(blocks, lease, seed);
    let warmed = frontend.as_mut().map_err(|e| anyhow!("{e:#}")).and_then(|f| f.closed_loop(warmup, None));
    barrier.wait();
    barrier.wait();
    let measured = match (&mut frontend, warmed) {
        (Ok(f), Ok(_)) => f.closed_loop(requests, Some(&mut latencies)),
        (_, Err(e)) => Err(e),
        (Err(e), _) => Err(anyhow!("{e:#}")),
    };
    barrier.wait();
    barrier.wait();
    Ok((measured?, latencies))
}

/// What a ublk queue thread keeps: its answer channel and eventfd, the requests it has in
/// flight by tag, and spare buffers the engine gave back; and, running an engine itself,
/// that engine's lease.
struct Frontend<B: Blocks> {
    blocks: B,
    /// Borrowed for each phase (`closed_loop`) and given back at its end: between phases
    /// the frontend waits for the others, which must not wait for its engine meanwhile.
    lease: Option<EngineLease>,
    /// The frontend's own doorbell, when it runs no engine.
    wake: Arc<Doorbell>,
    /// When each tag's request was sent, if it is in flight.
    sent_at: Vec<Option<Instant>>,
    free_tags: Vec<u64>,
    spares: Vec<Vec<u8>>,
    rng: XorShift,
    /// The data every write copies in (as a queue copies it from the ublk device).
    source: Vec<u8>,
}

impl<B: Blocks> Frontend<B> {
    fn new(blocks: B, lease: Option<EngineLease>, seed: u64) -> Result<Self> {
        let wake = Arc::new(Doorbell::new().context("making a frontend's eventfd")?);
        let source = (0..BLOCK_BYTES).map(|i| (i as u64 ^ seed) as u8).collect();
        Ok(Frontend {
            blocks,
            lease,
            wake,
            sent_at: vec![None; QUEUE_DEPTH],
            free_tags: (0..QUEUE_DEPTH as u64).rev().collect(),
            spares: Vec::with_capacity(QUEUE_DEPTH),
            rng: XorShift(seed),
            source,
        })
    }

    /// A 4 KiB write at a random block, as a ublk queue builds it: the data copied into a
    /// spare buffer, its CRC32C computed here.
    fn next_write(&mut self) -> Request {
        let mut data = self.spares.pop().unwrap_or_default();
        data.resize(BLOCK_BYTES, 0);
        data.copy_from_slice(&self.source);
        let lba = self.rng.below(WINDOW_BLOCKS);
        data[..8].copy_from_slice(&lba.to_le_bytes());
        let checksums = BlockChecksums::of(&data, BLOCK_BYTES);
        Request::WriteWithChecksums { lba, data, checksums }
    }

    /// Keeps `QUEUE_DEPTH` writes in flight until `count` are answered; their latencies
    /// into `latencies` if given. Returns how many were answered. A frontend with a lease
    /// runs that engine meanwhile and sleeps on its doorbell, as a ublk queue does.
    fn closed_loop(&mut self, count: u64, mut latencies: Option<&mut Histogram<u64>>) -> Result<u64> {
        let mut hosted = match &self.lease {
            Some(lease) => {
                Some(lease.borrow(BORROW_WAIT).ok_or_else(|| anyhow!("the engine thread did not lend its engine"))?)
            }
            None => None,
        };
        let bell = hosted.as_ref().map_or_else(|| self.wake.clone(), |h| h.bell().clone());
        let ringer = bell.clone();
        let (tx, answers) = crossbeam_channel::bounded(QUEUE_DEPTH * 2);
        let reply = Arc::new(ReplyTo { tx, wake: Box::new(move || ringer.ring()), counted: true });
        let (mut sent, mut answered) = (0u64, 0u64);
        let mut last_answer = Instant::now();
        while answered < count {
            while sent < count {
                let Some(tag) = self.free_tags.pop() else { break };
                let request = self.next_write();
                self.sent_at[tag as usize] = Some(Instant::now());
                self.blocks.submit(tag, request, &reply).context("sending a write to the engine")?;
                sent += 1;
            }
            let turns = hosted.as_mut().map(HostedEngine::turns);
            if turns == Some(Turns::Stopped) {
                bail!("the engine stopped during the run");
            }
            let mut got = 0;
            while let Ok((tag, result, _)) = answers.try_recv() {
                let sent_at = self
                    .sent_at
                    .get_mut(tag as usize)
                    .and_then(Option::take)
                    .ok_or_else(|| anyhow!("an answer to tag {tag}, which is not in flight"))?;
                let data = result.map_err(|e| anyhow!("a write failed: {e}"))?;
                if let Some(latencies) = latencies.as_deref_mut() {
                    latencies.saturating_record(sent_at.elapsed().as_nanos() as u64);
                }
                if self.spares.len() < QUEUE_DEPTH {
                    self.spares.push(data);
                }
                self.free_tags.push(tag);
                got += 1;
            }
            answered += got;
            if got > 0 {
                last_answer = Instant::now();
                continue;
            }
            if answered == count || turns == Some(Turns::Busy) {
                continue;
            }
            if last_answer.elapsed() > ANSWER_WAIT {
                bail!("no answer from the engine in {} s", ANSWER_WAIT.as_secs());
            }
            // A hosted engine's next timer (a stripe waiting to be filled) wakes it too.
            match &hosted {
                Some(engine) => engine.sleep(ANSWER_WAIT, || !answers.is_empty()),
                None => bell.sleep(ANSWER_WAIT, || !answers.is_empty()),
            };
        }
        debug_assert_eq!(self.free_tags.len(), QUEUE_DEPTH, "every tag is back");
        // Every request answered: the engine goes back to its thread (`hosted` dropped).
        Ok(answered)
    }
}

/// Where the drive files go: /dev/shm (tmpfs) if present, else the temporary directory;
/// with words saying which, and whether it is tmpfs.
pub(super) fn drive_base() -> (PathBuf, String) {
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    let kind = if is_tmpfs(&base) { "tmpfs" } else { "not tmpfs: the drive files are on a disk's page cache" };
    let words = format!("{} ({kind})", base.display());
    (base, words)
}

fn is_tmpfs(path: &Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: a NUL-terminated path and a zeroed statfs the call fills.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; both pointers are live for the call.
    let ok = unsafe { libc::statfs(c_path.as_ptr(), &mut stat) } == 0;
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between targets
    let magic = stat.f_type as i64;
    ok && magic == TMPFS_MAGIC
}

/// Latencies in microseconds, by run, for the JSON and tables.
pub(super) fn latency_json(l: &Latencies) -> serde_json::Value {
    serde_json::json!({ "p50": l.p50, "p99": l.p99, "p99_99": l.p99_99 })
}

/// Each thread's CPU time, by role, for the JSON.
pub(super) fn threads_json(figure: &RunFigure) -> serde_json::Value {
    let threads: Vec<serde_json::Value> = figure
        .threads
        .iter()
        .map(|t| {
            serde_json::json!({
                "role": t.role,
                "name": t.name,
                "cpu_ms": t.cpu_ns as f64 / 1e6,
                "busy": t.cpu_ns as f64 / 1e9 / figure.wall_s,
                "waiting_for_a_cpu_ms": t.wait_ns as f64 / 1e6,
                "kernel_fraction": t.kernel_fraction,
                "cpu_us_per_request": t.cpu_ns as f64 / 1e3 / figure.requests as f64,
            })
        })
        .collect();
    serde_json::Value::Array(threads)
}

/// The threads in the order printed: the server's, the frontends, the rest, each by
/// thread id (the order they started in).
pub(super) fn in_print_order(figure: &RunFigure) -> Vec<&ThreadFigure> {
    let rank = |t: &ThreadFigure| {
        if ServerPath::role_of(&t.name).is_some() {
            0
        } else if t.name.starts_with(FRONTEND_THREAD) {
            1
        } else {
            2
        }
    };
    let mut threads: Vec<&ThreadFigure> = figure.threads.iter().collect();
    threads.sort_by_key(|t| (rank(t), t.tid));
    threads
}
