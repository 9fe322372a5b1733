//! The way into an array of engine shards (`Shards`, behind `EngineSender`): a block
//! request goes to the one shard it falls in (its LBA made the shard's), answered by that
//! shard's thread straight to the frontend; one that spans shards is split
//! (`ShardMap::split`), each part sent to its shard, and the last part's answer, on
//! whichever shard thread gives it, joins them and answers the frontend. Nothing shared is
//! written for a request within one shard; a split request's parts share its join alone.
//!
//! Other messages concern the whole array: sent to every shard and their answers merged
//! before `send` returns (status summed, each shard's kept; a failure checked against the
//! record once, then carried out by every shard; a scrub started by every shard; rebuild
//! and scrub rate limits shared among them; a stop to every one).

use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender};
use zapraid_engine::layout::RaidLevel;
use zapraid_engine::shard::{Join, ShardMap, ShardedStatus};
use zapraid_engine::{Request, Response};

use super::parts::PartLayout;
use crate::error::{Error, Result};
use crate::run::failures::check_fail;
use crate::run::message::{Answer, Fanout, Message, ReplyTo, ScrubRequest, ThreadSender, ANSWER_TIMEOUT};
use crate::run::record::SharedRecord;
use crate::run::status::{percentiles, ArrayStatus};

/// The shards' threads, and what is needed to route to them.
pub struct Shards {
    pub(super) map: ShardMap,
    pub(super) layout: PartLayout,
    pub(super) level: RaidLevel,
    pub(super) threads: Vec<ThreadSender>,
    pub(super) record: Arc<SharedRecord>,
}

/// A split request being answered: its parts' answers come on `rx` (tagged with the
/// part's index); the part that completes the join answers the frontend.
struct PartJoin {
    rx: Receiver<Answer>,
    join: Mutex<Option<Join>>,
    tag: u64,
    reply: Arc<ReplyTo>,
}

impl PartJoin {
    /// Called after a part's answer was sent (on the answering shard's thread).
    fn take_answers(&self) {
        let mut slot = self.join.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(join) = slot.as_mut() else { return };
        let mut done = false;
        while let Ok((part, result, checks)) = self.rx.try_recv() {
            done = join.answer(part as usize, Response { id: 0, result, checks });
        }
        if !done {
            return;
        }
        let response = slot.take().expect("a join").finish(0);
        drop(slot);
        if self.reply.tx.send((self.tag, response.result, response.checks)).is_ok() {
            (self.reply.wake)();
        }
    }
}

impl Shards {
    fn io(&self, tag: u64, request: Request, reply: Arc<ReplyTo>) -> Result<()> {
        let split = match self.map.split(request) {
            Ok(split) => split,
            Err(e) => {
                // A request no shard can take: answered here, as an engine would.
                if reply.tx.send((tag, Err(e), None)).is_ok() {
                    (reply.wake)();
                }
                return Ok(());
            }
        };
        let mut parts = split.parts;
        if parts.len() == 1 {
            let part = parts.pop().expect("one part");
            return self.threads[part.shard].send(Message::Io { tag, request: part.request, reply }).map_err(gone);
        }
        let (tx, rx) = crossbeam_channel::bounded(parts.len());
        let mut join = split.join;
        join.errors_in_array_terms(); // each shard's thread says its errors in the array's terms
        let joined = Arc::new(PartJoin { rx, join: Mutex::new(Some(join)), tag, reply });
        for (index, part) in parts.into_iter().enumerate() {
            let joined = joined.clone();
            let wake = Box::new(move || joined.take_answers());
            let part_reply = Arc::new(ReplyTo { tx: tx.clone(), wake, counted: index == 0 });
            let message = Message::Io { tag: index as u64, request: part.request, reply: part_reply };
            self.threads[part.shard].send(message).map_err(gone)?;
        }
        Ok(())
    }

    /// Every shard's answer to the message `ask` makes with a one-answer channel.
    fn ask_all<T>(&self, mut ask: impl FnMut(Sender<T>) -> Message) -> Result<Vec<T>> {
        let mut waiting = Vec::new();
        for thread in &self.threads {
            let (tx, rx) = crossbeam_channel::bounded(1);
            thread.send(ask(tx)).map_err(gone)?;
            waiting.push(rx);
        }
        waiting.into_iter().map(|rx| rx.recv_timeout(ANSWER_TIMEOUT).map_err(|_| Error::EngineGone)).collect()
    }

    fn status(&self) -> Result<ArrayStatus> {
        let each = self.ask_all(Message::Status)?;
        let mut sharded = ShardedStatus::of(each.iter().map(|s| s.engine.clone()).collect());
        // The rate limits were shared among the shards: the array's is their sum (none
        // while any shard has none).
        let sum = |rates: Vec<Option<u64>>| rates.into_iter().sum::<Option<u64>>();
        sharded.total.rebuild_rate_bytes_per_s = sum(each.iter().map(|s| s.engine.rebuild_rate_bytes_per_s).collect());
        sharded.total.scrub.rate_bytes_per_s = sum(each.iter().map(|s| s.engine.scrub.rate_bytes_per_s).collect());
        let first = each.first().cloned().unwrap_or_default();
        let add = |f: fn(&ArrayStatus) -> u64| each.iter().map(f).sum::<u64>();
        let gather = |f: fn(&ArrayStatus) -> &Vec<u32>| each.iter().flat_map(|s| f(s).iter().copied()).collect();
        let longest = |f: fn(&ArrayStatus) -> Option<f64>| each.iter().filter_map(f).reduce(f64::max);
        Ok(ArrayStatus {
            engine: sharded.total,
            shards: sharded.shards,
            logical_blocks: self.map.logical_blocks(),
            reads: add(|s| s.reads),
            writes: add(|s| s.writes),
            flushes: add(|s| s.flushes),
            discards: add(|s| s.discards),
            bytes_read: add(|s| s.bytes_read),
            bytes_written: add(|s| s.bytes_written),
            errors: add(|s| s.errors),
            read_latency_us: percentiles(gather(|s| &s.latency_samples_us.0)),
            write_latency_us: percentiles(gather(|s| &s.latency_samples_us.1)),
            stopping: each.iter().any(|s| s.stopping),
            rebuild_elapsed_s: longest(|s| s.rebuild_elapsed_s),
            scrub_elapsed_s: longest(|s| s.scrub_elapsed_s),
            latency_samples_us: Default::default(),
            ..first
        })
    }

    fn fail(&self, drive: usize, force: bool) -> Result<crate::run::failures::FailOutcome> {
        let recorded = self.record.superblock();
        let drives = self.level.shape().0 + self.level.shape().1;
        let failed_mask = self.record.failed();
        let failed: Vec<usize> = (0..drives).filter(|d| failed_mask >> d & 1 == 1).collect();
        let rebuilding = (0..drives).find(|d| recorded.rebuilding_drives.get() >> d & 1 == 1);
        let outcome = check_fail(self.level, &failed, rebuilding, drive, force)?;
        // Checked once, for the array: every shard carries it out (a shard that saw the
        // drive fail by itself meanwhile says so, which changes nothing).
        let answers = self.ask_all(|done| Message::FailDrive { drive, force: true, done })?;
        if let Some(e) = answers.into_iter().find_map(|a| a.err().filter(|e| !matches!(e, Error::AlreadyFailed { .. })))
        {
            return Err(e);
        }
        Ok(outcome)
    }
}

impl Shards {
    /// Replaces failed drive `drive` by the new drive `device` (checked and emptied, at
    /// `path`): opened again as parts, recorded rebuilding for every shard, then each
    /// shard's parts swapped in and its rebuild started, all at once. The rate is shared
    /// among the shards, as `SetRebuildRate` does.
    fn replace(
        &self,
        drive: usize,
        device: zapraid_zns::ReservedZones<crate::drives::Drive>,
        path: &std::path::Path,
        rebuild_rate_bytes_per_s: Option<u64>,
    ) -> Result<()> {
        drop(device); // the parts open it again
        let parts = self.layout.open(Some(path))?;
        self.record.start_rebuild(drive, parts.zone0)?;
        let each = rebuild_rate_bytes_per_s.map(|rate| self.share(rate));
        let devices = parts.shards.into_iter().map(|part| {
            zapraid_zns::ReservedZones::new(part, 0)
                .map_err(|e| Error::Config { reason: format!("a part of the new drive has no zones: {e}") })
        });
        let mut devices = devices.collect::<Result<Vec<_>>>()?.into_iter();
        let mut checkpoint_parts = parts.checkpoint.into_iter();
        let answers = self.ask_all(|done| Message::ReplaceDrive {
            drive,
            device: devices.next().expect("a part of the new drive per shard"),
            path: path.to_path_buf(),
            checkpoint_part: checkpoint_parts.next(),
            rebuild_rate_bytes_per_s: each,
            done,
        })?;
        answers.into_iter().collect()
    }

    /// A shard's share of a rate limit the array was given: every shard works on its own
    /// zones at once, so the array keeps to it.
    fn share(&self, rate_bytes_per_s: u64) -> u64 {
        rate_bytes_per_s.div_ceil(self.threads.len() as u64)
    }
}

impl Fanout for Shards {
    fn send(&self, message: Message) -> Result<()> {
        match message {
            Message::Io { tag, request, reply } => self.io(tag, request, reply),
            Message::Status(tx) => {
                let _ = tx.send(self.status()?);
                Ok(())
            }
            Message::FailDrive { drive, force, done } => {
                let _ = done.send(self.fail(drive, force));
                Ok(())
            }
            Message::ReplaceDrive { drive, device, path, rebuild_rate_bytes_per_s, done, .. } => {
                let _ = done.send(self.replace(drive, device, &path, rebuild_rate_bytes_per_s));
                Ok(())
            }
            Message::Scrub { request, done } => {
                let share = |rate: Option<u64>| rate.map(|r| self.share(r));
                let each = match request {
                    ScrubRequest::Start { rate_bytes_per_s } => {
                        ScrubRequest::Start { rate_bytes_per_s: share(rate_bytes_per_s) }
                    }
                    ScrubRequest::SetRate { rate_bytes_per_s } => {
                        ScrubRequest::SetRate { rate_bytes_per_s: share(rate_bytes_per_s) }
                    }
                };
                let answers = self.ask_all(|tx| Message::Scrub { request: each.clone(), done: tx })?;
                let _ = done.send(answers.into_iter().collect::<std::result::Result<Vec<()>, String>>().map(|_| ()));
                Ok(())
            }
            Message::SetRebuildRate { rate_bytes_per_s, done } => {
                let each = self.share(rate_bytes_per_s); // 0, unlimited, stays 0
                let limits = self.ask_all(|tx| Message::SetRebuildRate { rate_bytes_per_s: each, done: tx })?;
                let _ = done.send(limits.into_iter().sum::<Option<u64>>());
                Ok(())
            }
            Message::WatchGenerations(tx) => {
                self.record.watch(tx);
                Ok(())
            }
            Message::Stop => {
                for thread in &self.threads {
                    let _ = thread.send(Message::Stop);
                }
                Ok(())
            }
            Message::Grow { done, .. } => {
                let reason = "an array of engine shards is never declustered: it does not grow".to_string();
                let _ = done.send(Err(Error::Config { reason }));
                Ok(())
            }
            Message::Look => {
                for thread in &self.threads {
                    let _ = thread.send(Message::Look);
                }
                Ok(())
            }
        }
    }
}

fn gone<T>(_: T) -> Error {
    Error::EngineGone
}
