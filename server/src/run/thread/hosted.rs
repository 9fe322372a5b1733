//! A ublk queue thread running an engine itself (`HostedEngine`), borrowed from the
//! engine's thread through its `EngineLease` (`lease`): the thread that takes a request
//! from the kernel runs the engine for it, with no hop to the engine thread and back and
//! no wake-up of a second thread per request.
//!
//! The host runs the engine between batches of its own work (`turns`) and sleeps on the
//! engine's doorbell, whose eventfd the engine's drives signal on every completion and
//! every other sender rings once the host has said it is about to sleep; it wakes for the
//! engine's timers itself (`next_timer`). Only an engine whose every drive signals that
//! eventfd, or completes every command at the next reap (emulated drives without a
//! timing model), is lent, because a host cannot block on a drive. When the host ends (or
//! unwinds) the engine goes back to its thread, which carries on where the host left
//! off: a clean stop, a checkpoint, answers to what is still in flight.

use std::sync::Arc;
use std::time::Duration;

use super::lease::{Lease, Lent};
use super::{EngineLoop, EngineThread};
use crate::run::message::{Message, ThreadSender};
use crate::run::wake::Doorbell;

/// A way to borrow one engine thread's engine (cloned for whichever thread may host it).
/// It holds a sender of the thread's channel, as any frontend does: the thread ends on
/// its own (every sender gone) only once the leases are dropped too.
#[derive(Clone)]
pub struct EngineLease {
    lease: Lease<EngineLoop>,
    thread: ThreadSender,
}

impl EngineThread {
    /// A way for another thread to run this thread's engine itself.
    pub fn lease(&self) -> EngineLease {
        EngineLease { lease: self.lease.clone(), thread: self.own.clone() }
    }
}

impl EngineLease {
    /// Asks the engine thread for its engine, waiting at most `wait`. None when it will
    /// not lend (drives that cannot signal), has ended, or did not answer in time: then
    /// the caller sends to it as any frontend does.
    pub fn borrow(&self, wait: Duration) -> Option<HostedEngine> {
        // A message wakes the thread wherever it sleeps: over drives that cannot signal
        // it blocks on its channel, not on the doorbell.
        let poke = || {
            let _ = self.thread.tx.try_send(Message::Look);
            self.thread.wake.signal();
        };
        self.lease.borrow(wait, poke).map(HostedEngine)
    }
}

/// An engine run by a host thread; it goes back to its engine thread when dropped.
pub struct HostedEngine(Lent<EngineLoop>);

/// What the engine's turns left.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Turns {
    /// Nothing moves until a message, a completion or a timer comes.
    Idle,
    /// It still has work (`MAX_TURNS` ran out): the host must not sleep.
    Busy,
    /// It stopped (a clean stop, nothing in flight): the host gives it back (drops it),
    /// for its thread to write the checkpoint and end.
    Stopped,
}

/// Turns a host runs at most in one go, so that its own requests wait a bounded time.
const MAX_TURNS: usize = 64;

impl HostedEngine {
    /// Runs the engine until a turn moves nothing (or `MAX_TURNS`): messages taken,
    /// commands handed to the drives, completions reaped, answers sent.
    pub fn turns(&mut self) -> Turns {
        let engine = self.0.get_mut();
        for _ in 0..MAX_TURNS {
            let moved = engine.turn_notified();
            if engine.fatal.is_some() {
                // The engine thread ends with the error once it has its engine back.
                return Turns::Stopped;
            }
            if !moved {
                let in_flight = engine.in_flight();
                return match engine.stopping && engine.engine.is_stopped() && in_flight == 0 {
                    true => Turns::Stopped,
                    // Drives that complete only when reaped (`completes_on_reap`) would
                    // not wake a sleeping host for what is left in flight.
                    false if !engine.notified && in_flight > 0 => Turns::Busy,
                    false => Turns::Idle,
                };
            }
        }
        Turns::Busy
    }

    /// The engine's doorbell, which its host sleeps on.
    pub fn bell(&self) -> &Arc<Doorbell> {
        self.0.bell()
    }

    /// Whether anything waits for the engine that a sleeping host would not be woken
    /// for: messages and the rebuild workers' results are rung for only once the host has
    /// announced its sleep.
    pub fn has_messages(&self) -> bool {
        let engine = self.0.get();
        !engine.rx.is_empty() || engine.rebuild_workers.as_ref().is_some_and(super::RebuildWorkers::has_results)
    }

    /// For a host that sleeps on the doorbell itself (not in io_uring): sleeps until rung
    /// or signalled, or until the engine's next timer is due, `longest` at most, unless
    /// `has_work` or a message for the engine is found once the sleep is announced.
    /// Returns whether it was woken or found work.
    pub fn sleep(&self, longest: Duration, has_work: impl FnOnce() -> bool) -> bool {
        let timeout = self.next_timer().map_or(longest, |t| t.min(longest));
        self.bell().sleep(timeout, || has_work() || self.has_messages())
    }

    /// When the engine's next timer is due, from now (None: no timer).
    pub fn next_timer(&self) -> Option<Duration> {
        let engine = self.0.get();
        let now = engine.now_ns();
        engine.engine.next_timer_ns().map(|at| Duration::from_nanos(at.saturating_sub(now)))
    }
}
