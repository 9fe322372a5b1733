//! The engine thread: the sans-I/O engine driven over real drives (NVMe passthrough rings
//! or emulated drive files) in real time. Frontends send it `Message`s over a bounded
//! channel and get answers on their own channel, with a wake-up call (the ublk queues
//! use an eventfd) so they need not poll.
//!
//! One thread owns the engine and every drive: no locks on the I/O path. Over NVMe drives
//! it sleeps on one eventfd that every drive's ring and every sender signal, so a message
//! or any drive's completion wakes it. Over emulated drives (which complete commands only
//! when asked) it blocks on the channel when nothing is in flight, and on a drive when
//! commands are in flight and no message waits.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, SendError, Sender, TryRecvError};
use zapraid_engine::{Engine, Request, Status};
use zapraid_zns::{Completion, ReservedZones, ZonedDevice};

use zapraid_engine::format::ArraySuperblock;

use crate::array::Drive;
use crate::error::{Error, Result};
use crate::failures::{check_fail, FailOutcome};
use crate::superblock::{superblock_writes, SUPERBLOCK_COPIES};
use crate::wake::EventFd;

/// Messages waiting for the engine thread at most: senders block beyond this.
pub const MESSAGE_QUEUE_CAPACITY: usize = 1024;

/// Tag of superblock writes the engine thread makes itself (the engine's tags count up
/// from 0 and never get here).
const RECORD_TAG: u64 = u64::MAX;

/// Where the engine thread records drive failures: a new superblock generation (every
/// copy) appended to zone 0 of every live drive, before any answer that depends on the
/// failure is given (a degraded write is acknowledged only once the failure is on the
/// drives, so a restart knows the failed drive missed it).
pub struct FailureRecord {
    pub superblock: ArraySuperblock,
    /// Per drive, the raw LBA of the next free block in zone 0.
    pub next_lba: Vec<u64>,
    /// Blocks zone 0 can take.
    pub zone_capacity_blocks: u64,
}

/// Latencies kept for percentiles: the newest this many requests of each kind.
const LATENCY_SAMPLES: usize = 65_536;

/// An answer: the request's tag and its result (read data, or nothing).
pub type Answer = (u64, zapraid_engine::Result<Vec<u8>>);

/// Where a frontend wants its answers.
pub struct ReplyTo {
    pub tx: Sender<Answer>,
    /// Called after each answer is sent.
    pub wake: Box<dyn Fn() + Send + Sync>,
}

pub enum Message {
    /// A block request; `tag` comes back with the answer.
    Io {
        tag: u64,
        request: Request,
        reply: Arc<ReplyTo>,
    },
    Status(Sender<ArrayStatus>),
    /// Mark a drive failed (by array index): nothing more is sent to it. Refused for a
    /// drive failed already, and beyond what the level survives unless `force`
    /// (`failures::check_fail`).
    FailDrive {
        drive: usize,
        force: bool,
        done: Sender<Result<FailOutcome>>,
    },
    /// Put `device` (every zone of it reset) in failed drive `drive`'s place and rebuild
    /// the drive onto it (`replace`).
    ReplaceDrive {
        drive: usize,
        device: ReservedZones<Drive>,
        done: Sender<Result<()>>,
    },
    /// Clean stop: finish what was sent, write the stop footer, end the thread.
    Stop,
}

/// What `zapraid status` shows of a running array.
#[derive(Clone, Debug, Default)]
pub struct ArrayStatus {
    pub engine: Status,
    pub drives: usize,
    pub logical_blocks: u64,
    pub block_size_bytes: u32,
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub discards: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub errors: u64,
    /// p50, p99, p99.9 in microseconds, over the newest requests.
    pub read_latency_us: [f64; 3],
    pub write_latency_us: [f64; 3],
    pub uptime_s: f64,
    pub stopping: bool,
    /// Seconds since the running rebuild started (on this server), if one runs.
    pub rebuild_elapsed_s: Option<f64>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    Flush,
    Discard,
}

struct Pending {
    reply: Arc<ReplyTo>,
    tag: u64,
    started: Instant,
    kind: Kind,
}

/// How long the engine thread sleeps at most with nothing to do: it looks for a channel
/// with no sender left (a frontend gone without `Stop`) this often.
const IDLE_WAKE_INTERVAL: Duration = Duration::from_millis(100);

/// The frontends' way to the engine thread: the bounded channel, and the eventfd the
/// thread sleeps on (signalled after each message).
#[derive(Clone)]
pub struct EngineSender {
    tx: Sender<Message>,
    wake: Arc<EventFd>,
}

impl EngineSender {
    /// Sends a message (blocks while the channel is full) and wakes the thread.
    pub fn send(&self, message: Message) -> std::result::Result<(), SendError<Message>> {
        self.tx.send(message)?;
        self.wake.signal();
        Ok(())
    }
}

/// A running engine thread.
pub struct EngineThread {
    pub tx: EngineSender,
    handle: JoinHandle<Result<()>>,
}

impl EngineThread {
    /// Starts the thread with a recovered (or new) engine over the array's drives.
    pub fn spawn(
        engine: Engine,
        drives: Vec<ReservedZones<Drive>>,
        block_size_bytes: u32,
        record: FailureRecord,
    ) -> Result<Self> {
        let (tx, rx) = crossbeam_channel::bounded(MESSAGE_QUEUE_CAPACITY);
        let wake = Arc::new(EventFd::new().map_err(|error| Error::Io {
            path: "eventfd".into(),
            context: "cannot create",
            error,
        })?);
        let thread_wake = wake.clone();
        let handle = std::thread::Builder::new()
            .name("zapraid-engine".into())
            .spawn(move || EngineLoop::new(engine, drives, block_size_bytes, record, rx, thread_wake).run())
            .map_err(|error| Error::Io { path: "engine thread".into(), context: "cannot start", error })?;
        Ok(EngineThread { tx: EngineSender { tx, wake }, handle })
    }

    /// Waits for the thread to end (after `Message::Stop`, or when every sender is gone).
    pub fn join(self) -> Result<()> {
        let wake = self.tx.wake.clone();
        drop(self.tx);
        // Let the thread see at once if that was the last sender.
        wake.signal();
        self.handle.join().map_err(|_| Error::EngineGone)?
    }
}

pub(crate) struct EngineLoop {
    pub(crate) engine: Engine,
    pub(crate) drives: Vec<ReservedZones<Drive>>,
    rx: Receiver<Message>,
    pub(crate) wake: Arc<EventFd>,
    started: Instant,
    next_id: u64,
    pending: HashMap<u64, Pending>,
    status: ArrayStatus,
    read_latencies: VecDeque<u32>,
    write_latencies: VecDeque<u32>,
    stopping: bool,
    pub(crate) record: FailureRecord,
    /// Whether every drive signals `wake` on completions (a drive swapped in must too).
    pub(crate) notified: bool,
    /// Drives being rebuilt (`replace`), bit per drive: recorded failed and rebuilding in
    /// the superblock until the rebuild ends (`replace::watch_rebuild`).
    pub(crate) rebuilding: u64,
    /// When the running rebuild started, for its rate.
    pub(crate) rebuild_started: Option<Instant>,
}

impl EngineLoop {
    fn new(
        engine: Engine,
        drives: Vec<ReservedZones<Drive>>,
        block_size_bytes: u32,
        record: FailureRecord,
        rx: Receiver<Message>,
        wake: Arc<EventFd>,
    ) -> Self {
        let engine_rebuilding = engine.rebuild_status().map_or(0, |r| 1u64 << r.drive);
        let status = ArrayStatus {
            drives: drives.len(),
            logical_blocks: engine.logical_blocks(),
            block_size_bytes,
            ..ArrayStatus::default()
        };
        EngineLoop {
            engine,
            drives,
            rx,
            wake,
            started: Instant::now(),
            next_id: 0,
            pending: HashMap::new(),
            status,
            read_latencies: VecDeque::new(),
            write_latencies: VecDeque::new(),
            stopping: false,
            record,
            notified: false,
            // A rebuild resumed at start (`service::run`) runs already.
            rebuilding: engine_rebuilding,
            rebuild_started: (engine_rebuilding != 0).then(Instant::now),
        }
    }

    fn now_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    fn in_flight(&self) -> usize {
        self.drives.iter().map(|d| d.in_flight()).sum()
    }

    fn run(mut self) -> Result<()> {
        // Sleep on one eventfd for messages and every drive's completions when all drives
        // can signal it; otherwise block on the channel or on one busy drive.
        let notified = {
            let fd = self.wake.raw();
            self.drives.iter_mut().all(|d| d.notify_completions(fd))
        };
        self.notified = notified;
        tracing::info!(completion_eventfd = notified, "engine thread running");
        loop {
            let progressed = if notified { self.turn_notified() } else { self.turn_blocking() };
            if self.stopping && self.engine.is_stopped() && self.in_flight() == 0 {
                self.answer();
                tracing::info!("engine stopped cleanly");
                return Ok(());
            }
            if notified && !progressed {
                let timer =
                    self.engine.next_timer_ns().map(|at| Duration::from_nanos(at.saturating_sub(self.now_ns())));
                // Bounded, so that a channel whose senders are all gone is noticed.
                self.wake.wait(timer.map_or(IDLE_WAKE_INTERVAL, |t| t.min(IDLE_WAKE_INTERVAL)));
            }
        }
    }

    /// One turn when every drive signals the eventfd: take what is there, never block
    /// (the caller sleeps on the eventfd when the turn moved nothing). Returns whether
    /// anything moved.
    fn turn_notified(&mut self) -> bool {
        let messages = self.take_waiting_messages();
        let mut dispatched = self.dispatch();
        let (reaped, _) = self.poll_drives(false);
        let now = self.now_ns();
        self.engine.tick(now);
        // Commands dispatched after the reap are handed to the kernel by the next turn's.
        dispatched += self.dispatch();
        self.watch_rebuild();
        self.record_failures();
        let answered = self.answer();
        messages + dispatched + reaped + answered > 0
    }

    /// One turn over drives that complete commands only when asked (emulated drives):
    /// wait for a message only when nothing is in flight, and on a busy drive when no
    /// message came.
    fn turn_blocking(&mut self) -> bool {
        let mut messages = 0;
        if self.in_flight() == 0 {
            let message = match self.engine.next_timer_ns() {
                Some(at) => {
                    let wait = Duration::from_nanos(at.saturating_sub(self.now_ns()));
                    match self.rx.recv_timeout(wait) {
                        Ok(m) => Some(m),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => Some(Message::Stop),
                    }
                }
                None if self.stopping => None,
                None => Some(self.rx.recv().unwrap_or(Message::Stop)),
            };
            if let Some(m) = message {
                messages += 1;
                self.take(m);
            }
        }
        messages += self.take_waiting_messages();
        self.dispatch();
        self.poll_drives(messages == 0);
        let now = self.now_ns();
        self.engine.tick(now);
        self.dispatch();
        self.watch_rebuild();
        self.record_failures();
        self.answer();
        true
    }

    /// Takes the messages already in the channel (a bounded number); a channel with no
    /// sender left is a stop. Returns how many it took.
    fn take_waiting_messages(&mut self) -> usize {
        let mut taken = 0;
        while taken < MESSAGE_QUEUE_CAPACITY {
            match self.rx.try_recv() {
                Ok(m) => {
                    taken += 1;
                    self.take(m);
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    if !self.stopping {
                        self.take(Message::Stop);
                    }
                    break;
                }
            }
        }
        taken
    }

    fn take(&mut self, message: Message) {
        match message {
            Message::Io { tag, request, reply } => {
                let kind = match &request {
                    Request::Read { .. } => Kind::Read,
                    Request::Write { .. } => Kind::Write,
                    Request::Flush => Kind::Flush,
                    Request::Discard { .. } => Kind::Discard,
                };
                if let Request::Write { data, .. } = &request {
                    self.status.bytes_written += data.len() as u64;
                }
                let id = self.next_id;
                self.next_id += 1;
                self.pending.insert(id, Pending { reply, tag, started: Instant::now(), kind });
                let now = self.now_ns();
                self.engine.submit(id, request, now);
            }
            Message::Status(tx) => {
                let _ = tx.send(self.snapshot());
            }
            Message::FailDrive { drive, force, done } => {
                let failed: Vec<usize> = (0..self.drives.len()).filter(|d| self.engine.is_failed(*d)).collect();
                let result = check_fail(self.engine.layout().level, &failed, drive, force);
                if let Ok(outcome) = &result {
                    match outcome {
                        FailOutcome::Degraded => tracing::warn!(drive, "drive marked failed"),
                        FailOutcome::DataLost => {
                            tracing::error!(drive, "drive marked failed (forced): the array's data is lost")
                        }
                    }
                    self.engine.fail_drive(drive);
                }
                let _ = done.send(result);
            }
            Message::ReplaceDrive { drive, device, done } => {
                let _ = done.send(self.replace_drive(drive, device));
            }
            Message::Stop => {
                if !self.stopping {
                    tracing::info!("clean stop requested");
                    self.stopping = true;
                    let now = self.now_ns();
                    self.engine.stop(now);
                }
            }
        }
    }

    /// Drives the engine counts failed.
    fn engine_failed_mask(&self) -> u64 {
        (0..self.drives.len()).filter(|d| self.engine.is_failed(*d)).fold(0, |mask, d| mask | 1 << d)
    }

    /// Drives failed as the superblock records them: a drive being rebuilt stays failed
    /// there until its rebuild completes (a restart must not trust its zones).
    fn failed_mask(&self) -> u64 {
        self.engine_failed_mask() | self.rebuilding
    }

    fn recorded(&self) -> bool {
        self.failed_mask() == self.record.superblock.failed_drives.get()
            && self.rebuilding == self.record.superblock.rebuilding_drives.get()
    }

    /// Appends a superblock generation naming the failed and rebuilding drives to every
    /// live drive and every drive being rebuilt, if either changed since the last one;
    /// waits for it (feeding the engine the completions of its own commands meanwhile).
    pub(crate) fn record_failures(&mut self) {
        // Completions taken while recording may fail another drive: record until stable.
        while !self.recorded() {
            self.record_once();
        }
    }

    fn record_once(&mut self) {
        let failed = self.failed_mask();
        // Written to the drives not failed, and to a new drive being rebuilt (its first
        // superblock says it is being rebuilt).
        let skipped = self.engine_failed_mask() & !self.rebuilding;
        let mut sb = self.record.superblock;
        sb.generation = (sb.generation.get() + 1).into();
        sb.failed_drives = failed.into();
        sb.rebuilding_drives = self.rebuilding.into();
        let sb = sb.seal();
        let g = self.drives[0].geometry();
        // Per live drive, the writes of every copy, issued in order: a drive's next write
        // goes out once its previous one completed (zone 0 takes them at its write pointer).
        let mut writes: Vec<(usize, VecDeque<zapraid_zns::Command>)> = Vec::new();
        for i in 0..self.drives.len() {
            if skipped >> i & 1 == 1 {
                continue;
            }
            let lba = self.record.next_lba[i];
            if lba + SUPERBLOCK_COPIES > self.record.zone_capacity_blocks {
                tracing::error!(drive = i, "zone 0 is full: cannot record the failed drives on it");
                continue;
            }
            self.record.next_lba[i] += SUPERBLOCK_COPIES;
            let mut own = sb;
            own.drive_index = (i as u32).into();
            writes.push((i, superblock_writes(&own.seal(), &g, lba).into()));
        }
        loop {
            let mut pending = 0;
            for (i, commands) in &mut writes {
                if let Some(command) = commands.pop_front() {
                    self.drives[*i].inner_mut().submit(RECORD_TAG, command);
                    pending += 1;
                }
            }
            if pending == 0 {
                break;
            }
            while pending > 0 {
                pending -= self.poll_drives(true).1;
                self.dispatch();
            }
        }
        tracing::warn!(
            generation = sb.generation.get(),
            failed_drives = failed,
            rebuilding_drives = self.rebuilding,
            "failed and rebuilding drives recorded in the superblock"
        );
        self.record.superblock = sb;
    }

    /// Takes every drive's completions: the engine's to the engine, the engine thread's
    /// own superblock writes counted apart. With `block` and nothing reaped, waits for a
    /// drive with commands in flight. Returns (completions reaped, superblock writes).
    pub(crate) fn poll_drives(&mut self, block: bool) -> (usize, usize) {
        let mut completions = Vec::new();
        let mut reaped = 0;
        let mut records = 0;
        for i in 0..self.drives.len() {
            reaped += self.drives[i].reap(&mut completions);
            records += self.route(i, &mut completions);
        }
        if reaped == 0 && block {
            if let Some(i) = (0..self.drives.len()).find(|i| self.drives[*i].in_flight() > 0) {
                reaped += self.drives[i].wait(&mut completions);
                records += self.route(i, &mut completions);
            }
        }
        (reaped, records)
    }

    fn route(&mut self, drive: usize, completions: &mut Vec<Completion>) -> usize {
        let now = self.now_ns();
        let mut records = 0;
        for c in completions.drain(..) {
            if c.tag == RECORD_TAG {
                records += 1;
                if let Err(e) = c.result {
                    tracing::error!(drive, error = %e, "recording the failed drives failed");
                }
            } else {
                self.engine.on_completion(drive, c, now);
            }
        }
        records
    }

    /// Hands the engine's commands to the drives; returns how many.
    pub(crate) fn dispatch(&mut self) -> usize {
        let mut n = 0;
        while let Some(cmd) = self.engine.poll_command() {
            self.drives[cmd.drive].submit(cmd.tag, cmd.command);
            n += 1;
        }
        n
    }

    /// Sends the engine's answers to their frontends; returns how many.
    fn answer(&mut self) -> usize {
        let mut n = 0;
        let mut to_wake: Vec<Arc<ReplyTo>> = Vec::new();
        while let Some(response) = self.engine.poll_response() {
            n += 1;
            let Some(p) = self.pending.remove(&response.id) else { continue };
            let micros = p.started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
            match p.kind {
                Kind::Read => {
                    self.status.reads += 1;
                    if let Ok(data) = &response.result {
                        self.status.bytes_read += data.len() as u64;
                    }
                    push_sample(&mut self.read_latencies, micros);
                }
                Kind::Write => {
                    self.status.writes += 1;
                    push_sample(&mut self.write_latencies, micros);
                }
                Kind::Flush => self.status.flushes += 1,
                Kind::Discard => self.status.discards += 1,
            }
            if let Err(e) = &response.result {
                self.status.errors += 1;
                tracing::warn!(error = %e, "request failed");
            }
            if p.reply.tx.send((p.tag, response.result)).is_ok() && !to_wake.iter().any(|r| Arc::ptr_eq(r, &p.reply)) {
                to_wake.push(p.reply);
            }
        }
        // One wake-up per frontend for the whole batch.
        for reply in to_wake {
            (reply.wake)();
        }
        n
    }

    fn snapshot(&self) -> ArrayStatus {
        ArrayStatus {
            engine: self.engine.status(),
            read_latency_us: percentiles(&self.read_latencies),
            write_latency_us: percentiles(&self.write_latencies),
            uptime_s: self.started.elapsed().as_secs_f64(),
            stopping: self.stopping,
            rebuild_elapsed_s: self.rebuild_started.map(|t| t.elapsed().as_secs_f64()),
            ..self.status.clone()
        }
    }
}

/// However the engine thread ends (a clean stop, or a panic unwinding), every request
/// still waiting is answered, so no frontend waits forever.
impl Drop for EngineLoop {
    fn drop(&mut self) {
        for (_, p) in self.pending.drain() {
            let reason = "the engine thread stopped before answering".to_string();
            if p.reply.tx.send((p.tag, Err(zapraid_engine::Error::Unavailable { reason }))).is_ok() {
                (p.reply.wake)();
            }
        }
    }
}

fn push_sample(samples: &mut VecDeque<u32>, micros: u32) {
    if samples.len() == LATENCY_SAMPLES {
        samples.pop_front();
    }
    samples.push_back(micros);
}

fn percentiles(samples: &VecDeque<u32>) -> [f64; 3] {
    if samples.is_empty() {
        return [0.0; 3];
    }
    let mut sorted: Vec<u32> = samples.iter().copied().collect();
    sorted.sort_unstable();
    let at = |q: f64| f64::from(sorted[((sorted.len() - 1) as f64 * q).round() as usize]);
    [at(0.5), at(0.99), at(0.999)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::{assemble, format, recover, FormatOptions};
    use std::path::PathBuf;
    use zapraid_engine::{Mode, RaidLevel};
    use zapraid_zns::{EmulatedDrive, Geometry};

    /// Four small emulated drive files in a temporary directory, and RAID-5 format options.
    fn drive_files() -> (tempfile::TempDir, Geometry, Vec<PathBuf>, FormatOptions) {
        drive_files_of(Geometry::small(12, 256, 240), 4)
    }

    /// Four emulated drive files of zones shaped like `zones` (64 B metadata), and RAID-5
    /// format options with groups of `group_size` stripes.
    fn drive_files_of(zones: Geometry, group_size: u32) -> (tempfile::TempDir, Geometry, Vec<PathBuf>, FormatOptions) {
        let dir = tempfile::tempdir().unwrap();
        let g = Geometry { metadata_bytes_per_block: 64, ..zones };
        let paths: Vec<_> = (0..4).map(|i| dir.path().join(format!("d{i}.zns"))).collect();
        for (i, p) in paths.iter().enumerate() {
            EmulatedDrive::create_file(p, g, i as u64).unwrap();
        }
        let options = FormatOptions {
            level: RaidLevel::Raid5 { drives: 4 },
            mode: Mode::ZapRaid { group_size },
            chunk_bytes: 4096,
            open_segments: zapraid_engine::OpenSegments::SINGLE,
            name: "t".into(),
            force: false,
        };
        (dir, g, paths, options)
    }

    /// A drive that completes commands on a thread of its own and signals the registered
    /// eventfd, as an NVMe ring does: the engine thread's eventfd loop without NVMe drives.
    struct Threaded {
        geometry: Geometry,
        queue_depth: usize,
        to_worker: Option<Sender<(u64, zapraid_zns::Command)>>,
        completions: Receiver<Completion>,
        in_flight: usize,
        eventfd: Arc<std::sync::atomic::AtomicI32>,
        worker: Option<JoinHandle<()>>,
    }

    impl Threaded {
        fn new(mut inner: Drive) -> Self {
            let (geometry, queue_depth) = (inner.geometry(), inner.queue_depth());
            let (to_worker, commands) = crossbeam_channel::unbounded::<(u64, zapraid_zns::Command)>();
            let (done, completions) = crossbeam_channel::unbounded();
            let eventfd = Arc::new(std::sync::atomic::AtomicI32::new(-1));
            let fd = eventfd.clone();
            let worker = std::thread::spawn(move || {
                let mut out = Vec::new();
                for (tag, command) in commands {
                    // Completions come a little later, while the engine thread may sleep.
                    std::thread::sleep(Duration::from_micros(200));
                    inner.submit(tag, command);
                    while inner.in_flight() > 0 {
                        inner.wait(&mut out);
                    }
                    for c in out.drain(..) {
                        let _ = done.send(c);
                    }
                    let fd = fd.load(std::sync::atomic::Ordering::SeqCst);
                    if fd >= 0 {
                        let one = 1u64;
                        // SAFETY: 8 bytes from a live u64 to the eventfd the engine thread owns
                        // (it outlives the drives, which are dropped first).
                        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
                    }
                }
            });
            Threaded {
                geometry,
                queue_depth,
                to_worker: Some(to_worker),
                completions,
                in_flight: 0,
                eventfd,
                worker: Some(worker),
            }
        }
    }

    impl ZonedDevice for Threaded {
        fn geometry(&self) -> Geometry {
            self.geometry
        }
        fn queue_depth(&self) -> usize {
            self.queue_depth
        }
        fn submit(&mut self, tag: u64, command: zapraid_zns::Command) {
            self.in_flight += 1;
            self.to_worker.as_ref().unwrap().send((tag, command)).unwrap();
        }
        fn reap(&mut self, out: &mut Vec<Completion>) -> usize {
            let before = out.len();
            out.extend(self.completions.try_iter());
            self.in_flight -= out.len() - before;
            out.len() - before
        }
        fn wait(&mut self, out: &mut Vec<Completion>) -> usize {
            if self.in_flight == 0 {
                return 0;
            }
            out.push(self.completions.recv().unwrap());
            self.in_flight -= 1;
            1 + self.reap(out)
        }
        fn in_flight(&self) -> usize {
            self.in_flight
        }
        fn notify_completions(&mut self, eventfd: std::os::fd::RawFd) -> bool {
            self.eventfd.store(eventfd, std::sync::atomic::Ordering::SeqCst);
            true
        }
    }

    impl Drop for Threaded {
        fn drop(&mut self) {
            self.to_worker = None;
            if let Some(w) = self.worker.take() {
                let _ = w.join();
            }
        }
    }

    /// Starts the engine thread over assembled drives, as they are or behind `Threaded`.
    fn spawn(mut assembled: crate::array::Assembled, threaded: bool) -> Result<(EngineThread, Vec<usize>)> {
        let engine = recover(&mut assembled)?;
        let record = FailureRecord {
            superblock: assembled.superblock,
            next_lba: assembled.superblock_next_lba.clone(),
            zone_capacity_blocks: assembled.geometry.zone_capacity_blocks,
        };
        let block_size_bytes = assembled.superblock.block_size_bytes.get();
        let drives = if threaded {
            assembled.drives.into_iter().map(|d| d.map_inner(|inner| Box::new(Threaded::new(inner)) as Drive)).collect()
        } else {
            assembled.drives
        };
        Ok((EngineThread::spawn(engine, drives, block_size_bytes, record)?, assembled.failed))
    }

    fn reply() -> (Arc<ReplyTo>, Receiver<Answer>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        (Arc::new(ReplyTo { tx, wake: Box::new(|| {}) }), rx)
    }

    /// Format drive files, start, write, stop cleanly, start again (drives named in
    /// another order), read back; the second run ends by dropping every sender, which
    /// stops cleanly too; a third start reads back once more.
    fn format_start_write_stop_start_read(threaded: bool) {
        let (_dir, _, paths, options) = drive_files();
        let formatted = format(&paths, &options, |_, _| {}).unwrap();
        assert!(format(&paths, &options, |_, _| {}).is_err(), "formatting a member again needs --force");
        let block = formatted.block_size_bytes as usize;
        let data: Vec<u8> = (0..64 * block).map(|i| (i * 7 % 251) as u8).collect();
        let run = |order: Vec<PathBuf>, write: bool, stop: bool| -> Vec<u8> {
            let (thread, _) = spawn(assemble(&order).unwrap(), threaded).unwrap();
            let (to, answers) = reply();
            if write {
                thread
                    .tx
                    .send(Message::Io {
                        tag: 1,
                        request: Request::Write { lba: 10, data: data.clone() },
                        reply: to.clone(),
                    })
                    .unwrap();
                thread.tx.send(Message::Io { tag: 2, request: Request::Flush, reply: to.clone() }).unwrap();
                for _ in 0..2 {
                    assert!(answers.recv().unwrap().1.is_ok());
                }
            }
            thread.tx.send(Message::Io { tag: 3, request: Request::Read { lba: 10, blocks: 64 }, reply: to }).unwrap();
            let got = answers.recv().unwrap().1.unwrap();
            if stop {
                thread.tx.send(Message::Stop).unwrap();
            }
            thread.join().unwrap();
            got
        };
        assert!(run(paths.clone(), true, true) == data);
        let reversed: Vec<_> = paths.iter().rev().cloned().collect();
        assert!(run(reversed, false, false) == data, "after a clean stop, drives in another order");
        assert!(run(paths.clone(), false, true) == data, "after the senders went away");
    }

    #[test]
    fn format_start_write_stop_start_read_over_drives_completing_on_request() {
        format_start_write_stop_start_read(false);
    }

    #[test]
    fn format_start_write_stop_start_read_over_drives_signalling_an_eventfd() {
        format_start_write_stop_start_read(true);
    }

    /// A drive failed while the array runs is recorded in the superblock before any
    /// degraded write is acknowledged, and stays failed after a restart.
    fn a_failed_drive_is_recorded_and_stays_failed(threaded: bool) {
        let (_dir, _, paths, options) = drive_files();
        let formatted = format(&paths, &options, |_, _| {}).unwrap();
        let block = formatted.block_size_bytes as usize;
        let (thread, failed) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
        assert!(failed.is_empty());
        let (to, answers) = reply();
        let (done, result) = crossbeam_channel::bounded(1);
        thread.tx.send(Message::FailDrive { drive: 1, force: false, done }).unwrap();
        result.recv().unwrap().unwrap();
        let data: Vec<u8> = (0..40 * block).map(|i| (i % 253) as u8).collect();
        thread
            .tx
            .send(Message::Io { tag: 1, request: Request::Write { lba: 0, data: data.clone() }, reply: to.clone() })
            .unwrap();
        thread.tx.send(Message::Io { tag: 2, request: Request::Flush, reply: to }).unwrap();
        for _ in 0..2 {
            assert!(answers.recv().unwrap().1.is_ok());
        }
        thread.tx.send(Message::Stop).unwrap();
        thread.join().unwrap();
        let (thread, failed) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
        assert_eq!(failed, vec![1], "the failure was recorded");
        let (to, answers) = reply();
        thread.tx.send(Message::Io { tag: 3, request: Request::Read { lba: 0, blocks: 40 }, reply: to }).unwrap();
        assert!(answers.recv().unwrap().1.unwrap() == data);
        thread.tx.send(Message::Stop).unwrap();
        thread.join().unwrap();
    }

    #[test]
    fn a_failed_drive_is_recorded_and_stays_failed_over_drives_completing_on_request() {
        a_failed_drive_is_recorded_and_stays_failed(false);
    }

    #[test]
    fn a_failed_drive_is_recorded_and_stays_failed_over_drives_signalling_an_eventfd() {
        a_failed_drive_is_recorded_and_stays_failed(true);
    }

    /// Contents that name their write: (LBA, version).
    fn pattern(lba: u64, version: u64, block: usize) -> Vec<u8> {
        let mut b = vec![0u8; block];
        b[..8].copy_from_slice(&lba.to_le_bytes());
        b[8..16].copy_from_slice(&version.to_le_bytes());
        for (i, x) in b[16..].iter_mut().enumerate() {
            *x = (lba as u8).wrapping_mul(31) ^ (version as u8) ^ (i as u8);
        }
        b
    }

    /// Batches of concurrent requests (writes on disjoint ranges, reads of ranges no write
    /// of the batch touches) against a reference of acknowledged contents.
    struct Load {
        rng: rand_chacha::ChaCha8Rng,
        reference: HashMap<u64, u64>,
        version: u64,
        span_blocks: u64,
        block: usize,
    }

    impl Load {
        fn expected(&self, lba: u64) -> Vec<u8> {
            self.reference.get(&lba).map_or_else(|| vec![0; self.block], |v| pattern(lba, *v, self.block))
        }

        /// One batch of up to `depth` requests; `between(i)` runs after the i-th is sent.
        fn batch(&mut self, thread: &EngineThread, depth: usize, mut between: impl FnMut(usize)) {
            use rand::Rng;
            let (to, answers) = reply();
            let mut busy: Vec<(u64, u64)> = Vec::new();
            let mut sent: HashMap<u64, (bool, u64, u64, u64)> = HashMap::new();
            for i in 0..depth {
                let blocks = if self.rng.random_bool(0.1) {
                    self.rng.random_range(17..=128u64)
                } else {
                    self.rng.random_range(1..=16u64)
                };
                let lba = self.rng.random_range(0..self.span_blocks - blocks);
                if busy.iter().any(|(s, n)| lba < s + n && *s < lba + blocks) {
                    continue;
                }
                busy.push((lba, blocks));
                let tag = i as u64;
                if self.rng.random_bool(0.05) {
                    sent.insert(tag, (false, 0, 0, 0));
                    thread.tx.send(Message::Io { tag, request: Request::Flush, reply: to.clone() }).unwrap();
                    between(i);
                    continue;
                }
                let request = if self.rng.random_bool(0.7) {
                    self.version += 1;
                    let data = (lba..lba + blocks).flat_map(|l| pattern(l, self.version, self.block)).collect();
                    sent.insert(tag, (true, lba, blocks, self.version));
                    Request::Write { lba, data }
                } else {
                    sent.insert(tag, (false, lba, blocks, 0));
                    Request::Read { lba, blocks }
                };
                thread.tx.send(Message::Io { tag, request, reply: to.clone() }).unwrap();
                between(i);
            }
            for _ in 0..sent.len() {
                let (tag, result) = answers.recv().unwrap();
                let (write, lba, blocks, version) = sent[&tag];
                let data = result.unwrap_or_else(|e| panic!("request at LBA {lba} (+{blocks}) failed: {e}"));
                if write {
                    for l in lba..lba + blocks {
                        self.reference.insert(l, version);
                    }
                } else {
                    for (j, l) in (lba..lba + blocks).enumerate() {
                        assert!(
                            data[j * self.block..][..self.block] == self.expected(l)[..],
                            "LBA {l} read back wrong"
                        );
                    }
                }
            }
        }

        fn verify_all(&mut self, thread: &EngineThread, what: &str) {
            let (to, answers) = reply();
            let chunk = 256u64;
            for start in (0..self.span_blocks).step_by(chunk as usize) {
                let blocks = chunk.min(self.span_blocks - start);
                thread
                    .tx
                    .send(Message::Io { tag: 0, request: Request::Read { lba: start, blocks }, reply: to.clone() })
                    .unwrap();
                let data = answers.recv().unwrap().1.unwrap();
                for (j, l) in (start..start + blocks).enumerate() {
                    assert!(data[j * self.block..][..self.block] == self.expected(l)[..], "{what}: LBA {l} differs");
                }
            }
        }
    }

    fn stop(thread: EngineThread) {
        thread.tx.send(Message::Stop).unwrap();
        thread.join().unwrap();
    }

    /// What the blockdev scenario does to the engine: run, stop, start (the segment that
    /// was open is rewritten in the background), `zapraid fail` a drive while that and
    /// more I/O runs, stop, start with the drive recorded failed: everything reads back.
    fn drive_failed_during_reclaim_then_degraded_restart(threaded: bool, seed: u64) {
        use rand::SeedableRng;
        let (_dir, _, paths, options) = drive_files_of(Geometry::small(12, 2048, 1984), 256);
        let formatted = format(&paths, &options, |_, _| {}).unwrap();
        let mut load = Load {
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed),
            reference: HashMap::new(),
            version: 0,
            span_blocks: 3000,
            block: formatted.block_size_bytes as usize,
        };
        let (thread, _) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
        for _ in 0..40 {
            load.batch(&thread, 32, |_| {});
        }
        stop(thread);
        let (thread, _) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
        let fail_in_batch = seed as usize % 6;
        for b in 0..12 {
            load.batch(&thread, 32, |i| {
                if b == fail_in_batch && i == 5 {
                    let (done, result) = crossbeam_channel::bounded(1);
                    thread.tx.send(Message::FailDrive { drive: 1 + seed as usize % 3, force: false, done }).unwrap();
                    result.recv().unwrap().unwrap();
                }
            });
        }
        load.verify_all(&thread, "before the stop");
        stop(thread);
        let (thread, failed) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
        assert_eq!(failed, vec![1 + seed as usize % 3]);
        load.verify_all(&thread, "after a restart with the drive failed");
        for _ in 0..10 {
            load.batch(&thread, 32, |_| {});
        }
        stop(thread);
        let (thread, _) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
        load.verify_all(&thread, "after a second degraded restart");
        stop(thread);
    }

    #[test]
    fn drive_failed_during_reclaim_then_degraded_restart_over_drives_completing_on_request() {
        for seed in 0..3 {
            drive_failed_during_reclaim_then_degraded_restart(false, seed);
        }
    }

    #[test]
    fn drive_failed_during_reclaim_then_degraded_restart_over_drives_signalling_an_eventfd() {
        for seed in 3..6 {
            drive_failed_during_reclaim_then_degraded_restart(true, seed);
        }
    }

    /// The blockdev scenario's shape: QEMU-sized zones, a file system's worth of mostly
    /// sequential data in one segment, stop, start (the segment is rewritten in the
    /// background), fail a drive in the middle of that, stop soon after, start degraded.
    fn qemu_sized_drive_failed_during_reclaim(threaded: bool, seed: u64, fail_after_reads: usize) {
        use rand::SeedableRng;
        let (_dir, _, paths, options) = drive_files_of(Geometry::small(8, 16384, 15872), 256);
        let formatted = format(&paths, &options, |_, _| {}).unwrap();
        let block = formatted.block_size_bytes as usize;
        let span_blocks = 21_000u64;
        let mut load = Load {
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed),
            reference: HashMap::new(),
            version: 0,
            span_blocks,
            block,
        };
        let (thread, _) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
        let (to, answers) = reply();
        let mut tag = 0;
        for start in (0..span_blocks).step_by(128) {
            let blocks = 128.min(span_blocks - start);
            load.version += 1;
            let data = (start..start + blocks).flat_map(|l| pattern(l, load.version, block)).collect();
            thread
                .tx
                .send(Message::Io { tag, request: Request::Write { lba: start, data }, reply: to.clone() })
                .unwrap();
            for l in start..start + blocks {
                load.reference.insert(l, load.version);
            }
            tag += 1;
            if tag % 32 == 0 {
                for _ in 0..32 {
                    answers.recv().unwrap().1.unwrap();
                }
            }
        }
        for _ in 0..tag % 32 {
            answers.recv().unwrap().1.unwrap();
        }
        for _ in 0..10 {
            load.batch(&thread, 32, |_| {});
        }
        stop(thread);
        let (thread, _) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
        // Reads while the segment is rewritten; the drive fails partway.
        let (to, answers) = reply();
        for (n, start) in (0..span_blocks).step_by(128).enumerate() {
            // Stop soon after the failure, while the segment may still be rewritten.
            if n == fail_after_reads + 20 {
                break;
            }
            if n == fail_after_reads {
                let (done, result) = crossbeam_channel::bounded(1);
                thread.tx.send(Message::FailDrive { drive: 1, force: false, done }).unwrap();
                result.recv().unwrap().unwrap();
            }
            let blocks = 128.min(span_blocks - start);
            thread
                .tx
                .send(Message::Io { tag: 0, request: Request::Read { lba: start, blocks }, reply: to.clone() })
                .unwrap();
            let data = answers.recv().unwrap().1.unwrap();
            for (j, l) in (start..start + blocks).enumerate() {
                assert!(data[j * block..][..block] == load.expected(l)[..], "LBA {l} read back wrong during reclaim");
            }
        }
        for _ in 0..4 {
            load.batch(&thread, 32, |_| {});
        }
        stop(thread);
        let (thread, failed) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
        assert_eq!(failed, vec![1]);
        load.verify_all(&thread, &format!("seed {seed}, failed after {fail_after_reads} reads: degraded restart"));
        stop(thread);
    }

    #[test]
    fn qemu_sized_drive_failed_during_reclaim_then_degraded_restart() {
        // Drives that complete on their own thread are slow enough that the failure and
        // the stop both come while the segment is still being rewritten.
        for (seed, fail_after_reads) in [(2, 40), (4, 120)] {
            qemu_sized_drive_failed_during_reclaim(true, seed, fail_after_reads);
        }
    }
}
