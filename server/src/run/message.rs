//! What frontends and the engine thread say to each other: the messages sent over the
//! thread's bounded channel (`Message`, through an `EngineSender`), and the answers to
//! block requests, each on the frontend's own channel (`Answer`, `ReplyTo`); the other
//! messages carry their own one-answer channel (`query_status` asks for the status so).

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use zapraid_engine::Request;
use zapraid_zns::ReservedZones;

use super::failures::FailOutcome;
use super::status::ArrayStatus;
use super::wake::Doorbell;
use crate::drives::Drive;
use crate::error::Result;

/// Messages waiting for the engine thread at most: senders block beyond this.
pub const MESSAGE_QUEUE_CAPACITY: usize = 1024;

/// A request's answer: its tag, its result, and for a `Request::ReadUnverified` the
/// checks the frontend runs on the data (`zapraid_engine::ReadChecks`).
pub type Answer = (u64, zapraid_engine::Result<Vec<u8>>, Option<zapraid_engine::ReadChecks>);

/// Where a frontend wants its answers.
pub struct ReplyTo {
    pub tx: Sender<Answer>,
    /// Called after each answer is sent.
    pub wake: Box<dyn Fn() + Send + Sync>,
    /// Whether the thread answering counts the request (and its latency) in its status:
    /// false for all but the first part of a request split among shards, which is one
    /// request of the array.
    pub counted: bool,
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
    /// the drive onto it (`replace`); with `rebuild_rate_bytes_per_s`, the rebuild rate
    /// limit is set to it first (0: unlimited), and left as it was if the replace fails.
    ReplaceDrive {
        drive: usize,
        device: ReservedZones<Drive>,
        /// Where the new drive is: an array of shards opens it again, split among them.
        path: std::path::PathBuf,
        /// For one shard of several: its part of the new drive holding its checkpoint
        /// area (the array's way in splits the drive and sets it).
        checkpoint_part: Option<Drive>,
        rebuild_rate_bytes_per_s: Option<u64>,
        done: Sender<Result<()>>,
    },
    /// Add these new drives (checked and emptied, with their paths) to a declustered
    /// array (`zapraid grow`): the grown shape is recorded on every drive, then the engine
    /// grows. Answers the array's drives now.
    Grow {
        devices: Vec<(ReservedZones<Drive>, std::path::PathBuf)>,
        done: Sender<Result<usize>>,
    },
    /// Start a scrub, or change the running one's rate (`zapraid scrub`).
    Scrub {
        request: ScrubRequest,
        done: ScrubAnswer,
    },
    /// Be told (a `()`, dropped if one waits already) of every superblock generation the
    /// thread records: a drive failed, a rebuild started or ended (`spare_pool::watch`).
    WatchGenerations(Sender<()>),
    /// Limit rebuilds (the running one and later ones) to writing so many bytes per second
    /// to the new drive (0: unlimited); answers the limit now in force.
    SetRebuildRate {
        rate_bytes_per_s: u64,
        done: Sender<Option<u64>>,
    },
    /// Clean stop: finish what was sent, write the stop footer, end the thread.
    Stop,
    /// Nothing to do but wake: a thread blocked on its channel looks at what is asked of
    /// it apart from messages (a queue thread waiting to borrow its engine, `lease`).
    Look,
}

/// What the control socket asks of the engine thread's scrub.
#[derive(Clone, Debug)]
pub enum ScrubRequest {
    /// Start a scrub reading at most this many bytes per second (None: no limit).
    Start { rate_bytes_per_s: Option<u64> },
    /// Change the running scrub's rate limit.
    SetRate { rate_bytes_per_s: Option<u64> },
}

/// The engine thread's answer: an error to show, or nothing.
pub type ScrubAnswer = Sender<std::result::Result<(), String>>;

/// The way to one engine thread: the bounded channel, and the doorbell the thread sleeps
/// on (rung after each message; it signals only a sleeping thread).
#[derive(Clone)]
pub struct ThreadSender {
    pub(super) tx: Sender<Message>,
    pub(super) wake: Arc<Doorbell>,
}

impl ThreadSender {
    /// Sends a message (blocks while the channel is full) and wakes the thread if it
    /// sleeps; an error once the thread is gone.
    pub fn send(&self, message: Message) -> Result<()> {
        self.tx.send(message).map_err(|_| crate::error::Error::EngineGone)?;
        self.wake.ring();
        Ok(())
    }
}

/// The frontends' and the control socket's way to the array: its one engine thread, or
/// its shards' (`sharded`: requests split among them, other messages to every one and
/// their answers merged).
#[derive(Clone)]
pub struct EngineSender(pub(super) Way);

#[derive(Clone)]
pub(super) enum Way {
    One(ThreadSender),
    Shards(Arc<dyn Fanout>),
}

/// An array of several engine threads, as its senders see it (`sharded::Shards`).
pub(super) trait Fanout: Send + Sync {
    /// Carries out `message` over every thread it concerns (a control message's answer
    /// sent before this returns); an error once they are gone.
    fn send(&self, message: Message) -> Result<()>;
}

impl EngineSender {
    /// Sends a message (blocks while a channel is full): an error once the array's threads
    /// are gone. A sharded array answers a control message before this returns.
    pub fn send(&self, message: Message) -> Result<()> {
        match &self.0 {
            Way::One(thread) => thread.send(message),
            Way::Shards(shards) => shards.send(message),
        }
    }
}

/// Longest wait for a running array's answer.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

/// The engine thread's status now (None: it has stopped, or did not answer in time).
pub fn query_status(engine: &EngineSender) -> Option<ArrayStatus> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    engine.send(Message::Status(tx)).ok()?;
    rx.recv_timeout(ANSWER_TIMEOUT).ok()
}
