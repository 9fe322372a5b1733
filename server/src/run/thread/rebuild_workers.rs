//! The drive rebuild's worker threads: the rebuild's jobs (`RebuildJob`: a chunk
//! position's sources checked block by block and its chunk rebuilt, most of a rebuild's
//! CPU time) run on them as well as on the engine thread, so that a rebuild is not held
//! to one core (ScalaRAID's point: every core serves the array).
//!
//! Fork-join, once per batch of completions (`run`): the engine thread hands the jobs
//! those completions set off to the workers' queue, takes jobs from the same queue itself
//! until it is empty, then waits for the workers' results and gives them all to the engine
//! in one call. The engine never sees another event while a job is out (its contract:
//! `Engine::poll_rebuild_job`), and no job outlives the turn that made it, so a stop, a
//! drive failure or a checkpoint finds none in flight. Jobs own their buffers and share
//! only read-only data, so workers take no lock but the queue's.
//!
//! The simulator charges the same scheme (`zapraid_engine::sim`, `rebuild_worker_cores`).
//!
//! Invariants: every job handed out comes back before `run` returns; the workers end when
//! the pool is dropped (their queue closes).

use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use zapraid_engine::{Engine, RebuildJob, RebuildJobDone};

use crate::error::{Error, Result};

/// The most rebuild worker threads an engine thread starts (the default being one fewer
/// than the CPUs, `default_threads`): past the drives' speed more only wait.
pub const MAX_REBUILD_THREADS: usize = 16;

/// How often the engine thread, waiting for the workers' results, checks that they run.
const WORKER_CHECK_INTERVAL: Duration = Duration::from_millis(100);

/// Worker threads besides the engine thread by default: one per CPU but the engine
/// thread's, at most `MAX_REBUILD_THREADS`.
pub fn default_threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus - 1).min(MAX_REBUILD_THREADS)
}

pub(super) struct RebuildWorkers {
    jobs: Option<Sender<RebuildJob>>,
    /// The same queue, for the engine thread to take jobs from while the workers do.
    queue: Receiver<RebuildJob>,
    done: Receiver<RebuildJobDone>,
    handles: Vec<JoinHandle<()>>,
}

impl RebuildWorkers {
    /// Starts `threads` workers (at least one), named after the engine thread `name`.
    pub(super) fn spawn(threads: usize, name: &str) -> Result<RebuildWorkers> {
        debug_assert!((1..=MAX_REBUILD_THREADS).contains(&threads), "{threads} rebuild workers");
        let (jobs, queue) = crossbeam_channel::unbounded::<RebuildJob>();
        let (done_tx, done) = crossbeam_channel::unbounded();
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let (queue, done_tx) = (queue.clone(), done_tx.clone());
            let handle = std::thread::Builder::new()
                .name(format!("{name}-rebuild{i}"))
                .spawn(move || {
                    for job in queue.iter() {
                        if done_tx.send(job.run()).is_err() {
                            return; // the engine thread is gone
                        }
                    }
                })
                .map_err(|error| Error::Io { path: "rebuild worker thread".into(), context: "cannot start", error })?;
            handles.push(handle);
        }
        Ok(RebuildWorkers { jobs: Some(jobs), queue, done, handles })
    }

    /// Runs the jobs `engine` has set off (module doc) and gives it their results.
    /// Returns how many ran; an error if a worker died (a bug: its job cannot come back).
    pub(super) fn run(&self, engine: &mut Engine, now_ns: u64) -> Result<usize> {
        let jobs = self.jobs.as_ref().expect("the queue is open until drop");
        let mut handed = 0;
        while let Some(job) = engine.poll_rebuild_job() {
            // The workers hold the queue's other end while the pool lives.
            jobs.send(job).map_err(|_| Error::EngineGone)?;
            handed += 1;
        }
        if handed == 0 {
            return Ok(0);
        }
        let mut done = Vec::with_capacity(handed);
        while let Ok(job) = self.queue.try_recv() {
            done.push(job.run());
        }
        while done.len() < handed {
            match self.done.recv_timeout(WORKER_CHECK_INTERVAL) {
                Ok(result) => done.push(result),
                Err(RecvTimeoutError::Timeout) if self.handles.iter().all(|h| !h.is_finished()) => {}
                Err(_) => {
                    tracing::error!("a rebuild worker thread ended with jobs out: the engine thread stops");
                    return Err(Error::EngineGone);
                }
            }
        }
        engine.on_rebuild_jobs_done(done, now_ns);
        Ok(handed)
    }

    /// Worker threads running.
    pub(super) fn threads(&self) -> usize {
        self.handles.len()
    }
}

impl Drop for RebuildWorkers {
    fn drop(&mut self) {
        drop(self.jobs.take()); // the queue closes: each worker ends after its job
        for handle in self.handles.drain(..) {
            let _ = handle.join();
        }
    }
}
