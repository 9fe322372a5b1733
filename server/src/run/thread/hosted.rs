//! A ublk queue thread running an engine itself (`HostedEngine`), borrowed from the
//! engine's thread through its `EngineLease` (`lease`): the thread that takes a request
//! from the kernel runs the engine for it, with no hop to the engine thread and back and
//! no wake-up of a second thread per request.
//!
//! The host runs the engine between batches of its own work (`turns`) and sleeps on the
//! engine's doorbell, whose eventfd the engine's drives signal on every completion and
//! every other sender rings once the host has said it is about to sleep; it wakes for the
//! engine's timers itself (`next_timer`). Only an engine whose every drive signals that
//! eventfd is lent, because a host cannot block on a drive. When the host ends (or
//! unwinds) the engine goes back to its thread, which carries on where the host left
//! off: a clean stop, a checkpoint, answers to what is still in flight.

use std::sync::Arc;
use std::time::Duration;

use super::lease::{Lease, Lent};
use super::{EngineLoop, EngineThread};
use crate::run::wake::Doorbell;

/// A way to borrow one engine thread's engine (cloned for whichever thread may host it).
#[derive(Clone)]
pub struct EngineLease(Lease<EngineLoop>);

impl EngineThread {
    /// A way for another thread to run this thread's engine itself.
    pub fn lease(&self) -> EngineLease {
        EngineLease(self.lease.clone())
    }
}

impl EngineLease {
    /// Asks the engine thread for its engine, waiting at most `wait`. None when it will
    /// not lend (drives that cannot signal), has ended, or did not answer in time: then
    /// the caller sends to it as any frontend does.
    pub fn borrow(&self, wait: Duration) -> Option<HostedEngine> {
        self.0.borrow(wait).map(HostedEngine)
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
            if !engine.turn_notified() {
                return match engine.stopping && engine.engine.is_stopped() && engine.in_flight() == 0 {
                    true => Turns::Stopped,
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
    /// for: messages are rung for only once the host has announced its sleep.
    pub fn has_messages(&self) -> bool {
        !self.0.get().rx.is_empty()
    }

    /// When the engine's next timer is due, from now (None: no timer).
    pub fn next_timer(&self) -> Option<Duration> {
        let engine = self.0.get();
        let now = engine.now_ns();
        engine.engine.next_timer_ns().map(|at| Duration::from_nanos(at.saturating_sub(now)))
    }
}
