//! The drive rebuild's worker threads: the rebuild's jobs (`RebuildJob`: a chunk
//! position's sources checked block by block and its chunk rebuilt, most of a rebuild's
//! CPU time) run on them, so that a rebuild is not held to the engine thread's one core
//! (ScalaRAID's point: every core serves the array).
//!
//! The engine thread hands out the jobs its completions set off (`hand_out`) and goes on
//! with other events; a worker runs a job, sends its result back and rings the engine
//! thread's doorbell, and the engine thread takes the results at its next turn (`take`),
//! as it takes the drives' completions. Jobs own their buffers and share only read-only
//! data, so the workers take no lock but their queues'. A job out counts as work in
//! flight: the engine thread does not end while one is out.
//!
//! The simulator charges the same scheme (`zapraid_engine::sim`, `rebuild_worker_cores`).
//!
//! Invariants: every job handed out comes back once, unless a worker died, which ends the
//! engine thread (`hand_out` and `take` say so; a ublk queue thread running the engine
//! hands it back at once: `hosted`); the workers end when the pool is dropped (their
//! queue closes).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use zapraid_engine::{Engine, RebuildJob, RebuildJobDone};

use crate::error::{Error, Result};
use crate::run::wake::Doorbell;

/// The most rebuild worker threads an engine thread starts (the default being one fewer
/// than the CPUs, `default_threads`): past the drives' speed more only wait.
pub const MAX_REBUILD_THREADS: usize = 16;

/// What a worker thread's name starts with (its index follows): Linux keeps 15 bytes of a
/// thread's name, where `top` and `/proc` show it.
pub const WORKER_NAME: &str = "zapraid-rbld";

/// Worker threads besides the engine thread by default: one per CPU but the engine
/// thread's, at most `MAX_REBUILD_THREADS`.
pub fn default_threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus - 1).min(MAX_REBUILD_THREADS)
}

pub(super) struct RebuildWorkers {
    jobs: Option<Sender<RebuildJob>>,
    done: Receiver<RebuildJobDone>,
    /// Jobs handed out whose results have not been taken.
    out: usize,
    handles: Vec<JoinHandle<()>>,
}

impl RebuildWorkers {
    /// Starts `threads` workers (at least one), named `WORKER_NAME` and their index; each
    /// rings `bell` when it sends a result.
    pub(super) fn spawn(threads: usize, bell: Arc<Doorbell>) -> Result<RebuildWorkers> {
        debug_assert!((1..=MAX_REBUILD_THREADS).contains(&threads), "{threads} rebuild workers");
        let (jobs, queue) = crossbeam_channel::unbounded::<RebuildJob>();
        let (done_tx, done) = crossbeam_channel::unbounded();
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let (queue, done_tx, bell) = (queue.clone(), done_tx.clone(), bell.clone());
            let handle = std::thread::Builder::new()
                .name(format!("{WORKER_NAME}{i}"))
                .spawn(move || {
                    for job in queue.iter() {
                        if done_tx.send(job.run()).is_err() {
                            return; // the engine thread is gone
                        }
                        bell.ring();
                    }
                })
                .map_err(|error| Error::Io { path: "rebuild worker thread".into(), context: "cannot start", error })?;
            handles.push(handle);
        }
        Ok(RebuildWorkers { jobs: Some(jobs), done, out: 0, handles })
    }

    /// Hands the jobs `engine` has set off to the workers; returns how many. An error if
    /// no worker is left to take them (every one died: their results cannot come).
    pub(super) fn hand_out(&mut self, engine: &mut Engine) -> Result<usize> {
        let jobs = self.jobs.as_ref().expect("the queue is open until drop");
        let mut handed = 0;
        while let Some(job) = engine.poll_rebuild_job() {
            jobs.send(job).map_err(|_| self.died())?;
            handed += 1;
            self.out += 1;
        }
        Ok(handed)
    }

    /// Gives `engine` the results the workers sent, waiting up to `wait` for the first if
    /// none is there and jobs are out; returns how many. An error if a worker died with
    /// jobs out (a bug: their results cannot come).
    pub(super) fn take(&mut self, engine: &mut Engine, now_ns: u64, wait: Option<Duration>) -> Result<usize> {
        if self.out == 0 {
            return Ok(0);
        }
        let mut done: Vec<RebuildJobDone> = self.done.try_iter().collect();
        if done.is_empty() {
            if let Some(wait) = wait {
                match self.done.recv_timeout(wait) {
                    Ok(result) => done.push(result),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return Err(self.died()),
                }
            }
        }
        if done.is_empty() && self.handles.iter().any(JoinHandle::is_finished) {
            return Err(self.died());
        }
        let taken = done.len();
        self.out -= taken;
        if taken > 0 {
            engine.on_rebuild_jobs_done(done, now_ns);
        }
        Ok(taken)
    }

    fn died(&self) -> Error {
        tracing::error!(jobs_out = self.out, "a rebuild worker thread ended with jobs out: the engine thread stops");
        Error::EngineGone
    }

    /// Jobs handed out whose results have not been taken.
    pub(super) fn out(&self) -> usize {
        self.out
    }

    /// Whether results wait to be taken.
    pub(super) fn has_results(&self) -> bool {
        !self.done.is_empty()
    }

    /// Worker threads running.
    pub(super) fn threads(&self) -> usize {
        self.handles.len()
    }
}

impl Drop for RebuildWorkers {
    fn drop(&mut self) {
        drop(self.jobs.take()); // the queue closes: each worker ends once it is empty
        for handle in self.handles.drain(..) {
            let _ = handle.join();
        }
    }
}
