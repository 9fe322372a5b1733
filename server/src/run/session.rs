//! An array run on its engine thread (or its shards') without a block device, asked requests directly:
//! what `zapraid selftest` and the tests use to write and read an array's blocks through
//! the path `start` serves them (assemble, recover, the engine thread over the drives).
//!
//! Invariant: every answer comes back on the session's own channel, tagged as sent; a
//! session is stopped cleanly (`stop`) or, dropped, its thread ends when the channel's
//! last sender is gone.

use std::sync::Arc;

use crossbeam_channel::Receiver;
use zapraid_engine::{OpenSegments, Request};

use super::message::{Answer, Message, ReplyTo};
use super::record::FailureRecord;
use super::sharded::{ArrayThreads, ShardedArray};
use super::status::ArrayStatus;
use super::thread::{rebuild_workers, EngineThread};
use crate::assemble::assembly::Assembled;
use crate::assemble::recover::recover;
use crate::error::{Error, Result};

pub struct Session {
    pub thread: ArrayThreads,
    reply: Arc<ReplyTo>,
    answers: Receiver<Answer>,
    pub block_bytes: usize,
    pub open_segments: OpenSegments,
}

impl Session {
    /// Recovers the assembled array and starts its engine thread (one per shard for an
    /// array of several), with the rebuild's worker threads a start gives it by default.
    pub fn start(mut assembled: Assembled) -> Result<Session> {
        let block_bytes = assembled.geometry.block_size_bytes as usize;
        let open_segments = assembled.config.open_segments;
        let thread = if assembled.superblock.shards() > 1 {
            ArrayThreads::Shards(ShardedArray::start(&mut assembled)?.0)
        } else {
            let engine = recover(&mut assembled)?;
            let record = FailureRecord::of(&assembled);
            let rebuild_threads = rebuild_workers::default_threads();
            ArrayThreads::One(EngineThread::spawn(
                engine,
                assembled.drives,
                block_bytes as u32,
                record,
                rebuild_threads,
            )?)
        };
        let (tx, answers) = crossbeam_channel::unbounded();
        let reply = Arc::new(ReplyTo { tx, wake: Box::new(|| {}), counted: true });
        Ok(Session { thread, reply, answers, block_bytes, open_segments })
    }

    /// Sends a request tagged `tag` without waiting for its answer (`recv`).
    pub fn send(&self, tag: u64, request: Request) -> Result<()> {
        let message = Message::Io { tag, request, reply: self.reply.clone() };
        self.thread.tx().send(message).map_err(|_| Error::EngineGone)
    }

    /// The next answer: its tag and result.
    pub fn recv(&self) -> Result<Answer> {
        self.answers.recv().map_err(|_| Error::EngineGone)
    }

    /// The next answer if one comes within `timeout`.
    pub fn recv_timeout(&self, timeout: std::time::Duration) -> Result<Option<Answer>> {
        match self.answers.recv_timeout(timeout) {
            Ok(answer) => Ok(Some(answer)),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => Ok(None),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Err(Error::EngineGone),
        }
    }

    /// The engine's status now.
    pub fn status(&self) -> Result<ArrayStatus> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.thread.tx().send(Message::Status(tx)).map_err(|_| Error::EngineGone)?;
        rx.recv().map_err(|_| Error::EngineGone)
    }

    /// Sends one request and waits for its answer (nothing else in flight).
    pub fn ask(&self, request: Request) -> Result<Vec<u8>> {
        self.send(0, request)?;
        Ok(self.recv()?.1?)
    }

    /// Stops the array cleanly and waits for the thread to end.
    pub fn stop(self) -> Result<()> {
        self.thread.tx().send(Message::Stop).map_err(|_| Error::EngineGone)?;
        self.thread.join()
    }
}
