//! The engine thread: the sans-I/O engine driven over real drives (NVMe passthrough rings
//! or emulated drive files) in real time. Frontends send it `Message`s over a bounded
//! channel and get answers on their own channel, with a wake-up call (the ublk queues
//! use an eventfd) so they need not poll.
//!
//! One thread owns the engine and every drive (or, as one shard of several, its engine
//! and its parts of every drive: `shard`): no locks on the I/O path. Over NVMe drives
//! it sleeps on one eventfd that every drive's ring signals, and every sender rings as a
//! `Doorbell` (a signal only while the thread sleeps), so a message or any drive's
//! completion wakes it. Over emulated drives (which complete commands only
//! when asked) it blocks on the channel when nothing is in flight, and on a drive when
//! commands are in flight and no message waits.
//!
//! The thread may lend its engine to a thread that serves requests (a ublk queue,
//! `hosted`): it hands the loop over at its next turn, waits, and carries on where the
//! host left off once the loop comes back (`lease`).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use zapraid_engine::{Engine, Request};
use zapraid_zns::{Completion, ReservedZones, ZonedDevice};

use super::failures::{check_declustered_fail, check_fail, FailOutcome};
use super::message::{EngineSender, Message, ReplyTo, ThreadSender, Way, MESSAGE_QUEUE_CAPACITY};
use super::status::ArrayStatus;
use super::wake::Doorbell;
use crate::drives::Drive;
use crate::error::{Error, Result};
use crate::records::checkpoint;
use lease::Lease;
use rebuild_workers::RebuildWorkers;

/// Tag of superblock writes the engine thread makes itself (no engine tag is this one:
/// their slot index, the low 32 bits, is never all ones).
const RECORD_TAG: u64 = u64::MAX;

pub use super::record::FailureRecord;

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

/// A running engine thread.
pub struct EngineThread {
    pub tx: EngineSender,
    /// The thread's own channel (`tx` may be a sharded array's, over several).
    own: ThreadSender,
    handle: JoinHandle<Result<()>>,
    lease: Lease<EngineLoop>,
}

impl EngineThread {
    /// Starts the thread with a recovered (or new) engine over the array's drives, and
    /// `rebuild_threads` threads besides that run the drive rebuild's jobs with it
    /// (`rebuild_workers`; 0: the engine thread runs them alone).
    pub fn spawn(
        engine: Engine,
        drives: Vec<ReservedZones<Drive>>,
        block_size_bytes: u32,
        record: FailureRecord,
        rebuild_threads: usize,
    ) -> Result<Self> {
        Self::spawn_with(engine, drives, block_size_bytes, record, None, rebuild_threads)
    }

    /// Starts the thread of shard `link.index` of an array of several, with its recovered
    /// engine over its parts of the drives (numbered from its first zone: no zone
    /// reserved); `record`'s checkpoint place is the shard's.
    pub fn spawn_shard(
        engine: Engine,
        drives: Vec<ReservedZones<Drive>>,
        block_size_bytes: u32,
        record: FailureRecord,
        link: ShardLink,
    ) -> Result<Self> {
        // Each shard's thread is a core of its own: its rebuild's jobs stay on it.
        Self::spawn_with(engine, drives, block_size_bytes, record, Some(link), 0)
    }

    fn spawn_with(
        engine: Engine,
        drives: Vec<ReservedZones<Drive>>,
        block_size_bytes: u32,
        record: FailureRecord,
        shard: Option<ShardLink>,
        rebuild_threads: usize,
    ) -> Result<Self> {
        let name = shard.as_ref().map_or("zapraid-engine".to_string(), |link| format!("zapraid-shard{}", link.index));
        let (tx, rx) = crossbeam_channel::bounded(MESSAGE_QUEUE_CAPACITY);
        let wake = Arc::new(Doorbell::new().map_err(|error| Error::Io {
            path: "eventfd".into(),
            context: "cannot create",
            error,
        })?);
        let workers = match rebuild_threads.min(rebuild_workers::MAX_REBUILD_THREADS) {
            0 => None,
            threads => Some(RebuildWorkers::spawn(threads, wake.clone())?),
        };
        let lease = Lease::new(wake.clone());
        let thread_lease = lease.clone();
        let handle = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                let mut this = EngineLoop::new(engine, drives, block_size_bytes, record, rx, thread_lease, shard);
                this.rebuild_workers = workers;
                this.run()
            })
            .map_err(|error| Error::Io { path: "engine thread".into(), context: "cannot start", error })?;
        let own = ThreadSender { tx, wake };
        Ok(EngineThread { tx: EngineSender(Way::One(own.clone())), own, handle, lease })
    }

    /// The thread's own channel (a shard's, for the array's way in).
    pub(in crate::run) fn own_sender(&self) -> ThreadSender {
        self.own.clone()
    }

    /// Waits for the thread to end (after `Message::Stop`, or when every sender is gone).
    pub fn join(self) -> Result<()> {
        let wake = self.own.wake.clone();
        drop(self.tx);
        drop(self.own);
        // Let the thread see at once if that was the last sender.
        wake.signal();
        self.handle.join().map_err(|_| Error::EngineGone)?
    }
}

struct EngineLoop {
    engine: Engine,
    drives: Vec<ReservedZones<Drive>>,
    rx: Receiver<Message>,
    started: Instant,
    next_id: u64,
    pending: HashMap<u64, Pending>,
    status: ArrayStatus,
    read_latencies: VecDeque<u32>,
    write_latencies: VecDeque<u32>,
    stopping: bool,
    record: FailureRecord,
    /// Whether every drive signals `wake` on completions (a drive swapped in must too).
    notified: bool,
    /// Drives being rebuilt (`replace`), bit per drive: recorded failed and rebuilding in
    /// the superblock until the rebuild ends (`rebuild`: `watch_rebuild`).
    rebuilding: u64,
    /// When the running rebuild started, for its rate.
    rebuild_started: Option<Instant>,
    /// A declustered array's rebuilds into distributed spare space (`spares`).
    spares: spares::SpareRebuilds,
    /// When the last scrub started, for its rate while it runs.
    scrub_started: Option<Instant>,
    /// Told of every superblock generation recorded (`Message::WatchGenerations`).
    watchers: Vec<Sender<()>>,
    /// The engine's drive-changing commands sent so far (`checkpoint::changes_drive`).
    engine_writes: u64,
    /// Set when the thread is one shard of several (`shard`).
    shard: Option<ShardLink>,
    /// How a queue thread borrows the engine to run it itself (`lease`); its doorbell is
    /// the one the thread sleeps on, which its drives and senders signal.
    lease: Lease<EngineLoop>,
    /// Threads that run the rebuild's jobs with this one (`rebuild_workers`), if any.
    rebuild_workers: Option<RebuildWorkers>,
    /// What ends the thread at its next turn: a rebuild worker that died.
    fatal: Option<Error>,
}

impl EngineLoop {
    fn new(
        engine: Engine,
        drives: Vec<ReservedZones<Drive>>,
        block_size_bytes: u32,
        record: FailureRecord,
        rx: Receiver<Message>,
        lease: Lease<EngineLoop>,
        shard: Option<ShardLink>,
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
            spares: Default::default(),
            scrub_started: None,
            watchers: Vec::new(),
            engine_writes: 0,
            shard,
            lease,
            rebuild_workers: None,
            fatal: None,
        }
    }

    fn now_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// Drive commands in flight, and rebuild jobs out (`rebuild_workers`).
    fn in_flight(&self) -> usize {
        let jobs = self.rebuild_workers.as_ref().map_or(0, RebuildWorkers::out);
        self.drives.iter().map(|d| d.in_flight()).sum::<usize>() + jobs
    }

    /// Gives the engine the rebuild jobs' results the workers sent (waiting up to `wait`
    /// for one); returns how many.
    fn take_rebuild_results(&mut self, wait: Option<Duration>) -> usize {
        let now = self.now_ns();
        let Some(workers) = self.rebuild_workers.as_mut() else { return 0 };
        match workers.take(&mut self.engine, now, wait) {
            Ok(taken) => taken,
            Err(error) => {
                self.fatal.get_or_insert(error);
                0
            }
        }
    }

    fn run(self) -> Result<()> {
        let mut this = Box::new(self);
        // Sleep on one eventfd for messages and every drive's completions when all drives
        // can signal it; otherwise block on the channel or on one busy drive.
        this.notified = {
            let fd = this.lease.bell().raw();
            this.drives.iter_mut().all(|d| d.notify_completions(fd))
        };
        let notified = this.notified;
        // A host never blocks on a drive: it sleeps only where every drive's completion
        // wakes it, or where none is ever left in flight (`hosted`).
        let lendable = notified || this.drives.iter().all(|d| d.completes_on_reap());
        this.lease.set_lendable(lendable);
        let rebuild_threads = this.rebuild_workers.as_ref().map_or(0, RebuildWorkers::threads);
        this.engine.set_rebuild_jobs_offloaded(rebuild_threads > 0);
        tracing::info!(completion_eventfd = notified, rebuild_threads, "engine thread running");
        // A failed drive of a declustered array still holding chunks (a rebuild into spare
        // space cut short) starts again now, not at the first request.
        this.rebuild_into_spares_when_needed();
        this.dispatch();
        loop {
            if this.lease.wanted() {
                // A host runs the engine until it gives it back (`lease`).
                let lease = this.lease.clone();
                this = lease.lend(this, !lendable).ok_or(Error::EngineGone)?;
                continue;
            }
            let progressed = if notified { this.turn_notified() } else { this.turn_blocking() };
            if let Some(error) = this.fatal.take() {
                return Err(error);
            }
            if this.stopping && this.engine.is_stopped() && this.in_flight() == 0 {
                this.leave_checkpoint();
                this.answer();
                tracing::info!("engine stopped cleanly");
                return Ok(());
            }
            if notified && !progressed {
                let timer =
                    this.engine.next_timer_ns().map(|at| Duration::from_nanos(at.saturating_sub(this.now_ns())));
                // Bounded, so that a channel whose senders are all gone is noticed.
                let timeout = timer.map_or(IDLE_WAKE_INTERVAL, |t| t.min(IDLE_WAKE_INTERVAL));
                let (rx, lease, workers) = (&this.rx, &this.lease, this.rebuild_workers.as_ref());
                let results = || workers.is_some_and(RebuildWorkers::has_results);
                lease.bell().sleep(timeout, || !rx.is_empty() || lease.wanted() || results());
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
        let reaped = reaped + self.take_rebuild_results(None);
        let now = self.now_ns();
        self.engine.tick(now);
        // Commands dispatched after the reap are handed to the kernel by the next turn's.
        dispatched += self.dispatch();
        self.watch_rebuild();
        self.rebuild_into_spares_when_needed();
        self.record_failures();
        dispatched += self.dispatch(); // a running checkpoint that waited for the records
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
        let (reaped, _) = self.poll_drives(messages == 0);
        // Only rebuild jobs out: wait for their results, not for a drive.
        let idle = messages == 0 && reaped == 0 && self.drives.iter().all(|d| d.in_flight() == 0);
        self.take_rebuild_results(idle.then_some(IDLE_WAKE_INTERVAL));
        let now = self.now_ns();
        self.engine.tick(now);
        self.dispatch();
        self.watch_rebuild();
        self.rebuild_into_spares_when_needed();
        self.record_failures();
        self.dispatch(); // a running checkpoint that waited for the records
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
                    Request::Read { .. } | Request::ReadUnverified { .. } => Kind::Read,
                    Request::Write { .. } | Request::WriteWithChecksums { .. } => Kind::Write,
                    Request::Flush => Kind::Flush,
                    Request::Discard { .. } => Kind::Discard,
                };
                if let Request::Write { data, .. } | Request::WriteWithChecksums { data, .. } = &request {
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
                let rebuilding = self.engine.rebuild_status().map(|r| r.drive);
                let level = self.engine.layout().level;
                let result = if self.drives.len() > self.engine.layout().drives() {
                    let beyond = self.engine.segments_beyond_parity(Some(drive));
                    check_declustered_fail(level, self.drives.len(), &failed, drive, beyond, force)
                } else {
                    check_fail(level, &failed, rebuilding, drive, force)
                };
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
            Message::ReplaceDrive { drive, device, checkpoint_part, rebuild_rate_bytes_per_s, done, .. } => {
                let result = match self.shard.is_some() {
                    true => self.replace_shard_drive(drive, device, checkpoint_part, rebuild_rate_bytes_per_s),
                    false => self.replace_drive(drive, device, rebuild_rate_bytes_per_s),
                };
                let _ = done.send(result);
            }
            Message::SetRebuildRate { rate_bytes_per_s, done } => {
                self.engine.set_rebuild_rate(Some(rate_bytes_per_s).filter(|r| *r > 0));
                tracing::warn!(rate_bytes_per_s, "rebuild rate limit set (0: unlimited)");
                let _ = done.send(self.engine.rebuild_rate_bytes_per_s());
            }
            Message::Scrub { request, done } => {
                let _ = done.send(self.scrub(request));
            }
            Message::Grow { devices, done } => {
                let _ = done.send(self.grow(devices));
            }
            Message::WatchGenerations(tx) => self.watchers.push(tx),
            Message::Look => {}
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

    /// Takes every drive's completions: the engine's to the engine, the engine thread's
    /// own superblock writes counted apart. With `block` and nothing reaped, waits for a
    /// drive with commands in flight. Returns (completions reaped, superblock writes).
    fn poll_drives(&mut self, block: bool) -> (usize, usize) {
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
        // The rebuild's jobs those completions set off go to the workers.
        if let Some(workers) = self.rebuild_workers.as_mut() {
            if let Err(error) = workers.hand_out(&mut self.engine) {
                self.fatal.get_or_insert(error);
            }
        }
        records
    }

    /// Hands the engine's commands to the drives; returns how many.
    fn dispatch(&mut self) -> usize {
        let mut n = 0;
        loop {
            while let Some(cmd) = self.engine.poll_command() {
                self.engine_writes += u64::from(checkpoint::changes_drive(&cmd.command));
                self.drives[cmd.drive].submit(cmd.tag, cmd.command);
                n += 1;
            }
            // Written only once the drives are idle: the engine has nothing in flight
            // then, but the thread's own superblock writes may be (`record`); the turn's
            // last dispatch comes after them. And only once every drive the engine counts
            // failed, and every rebuild that ended, is recorded (`watch_rebuild` and
            // `record_failures` run later in the turn): the image describes the array with
            // those drives failed or being rebuilt (their chunks placed where only its
            // tables say), and goes with the superblock generation that records them, so
            // that a start with any other failed drives refuses it.
            let ready = self.engine.checkpoint_ready() && self.in_flight() == 0;
            if !ready || !self.recorded() || !self.rebuilds_noticed() {
                return n;
            }
            self.write_running_checkpoint(); // the engine goes on: its commands follow
            n += 1;
        }
    }
}

impl Drop for EngineLoop {
    fn drop(&mut self) {
        for (_, p) in self.pending.drain() {
            let reason = "the engine thread stopped before answering".to_string();
            if p.reply.tx.send((p.tag, Err(zapraid_engine::Error::Unavailable { reason }), None)).is_ok() {
                (p.reply.wake)();
            }
        }
    }
}

mod answers;
mod checkpoint_writes;
mod grow;
pub mod hosted;
mod lease;
mod rebuild;
pub mod rebuild_workers;
mod record;
mod scrub;
mod shard;
mod shard_link;
mod spares;

pub use shard_link::ShardLink;
#[cfg(test)]
mod tests;
