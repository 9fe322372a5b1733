//! The engine's one simulated CPU core: the events waiting for it, when it is free again,
//! and what it emitted that its time has not yet released (responses; held commands live
//! in the simulator's `delayed`). The costs are `cpu_cost`'s.
//!
//! An event (a request submitted, a drive completion reaped) that arrives while the core is
//! busy waits, in arrival order; the engine handles it at max(arrival, core free), and what
//! it emits is released when the event's cost has elapsed. The simulator (`super`) decides
//! when to hand events over; this module keeps the state and does the arithmetic.

use std::collections::{HashMap, VecDeque};

use zapraid_zns::{Command, Completion};

use crate::cpu_cost::{CompletionKind, CpuCosts, RequestKind};
use crate::engine::{Request, RequestId, Response};

/// An event for the engine, waiting for its core.
pub(super) enum Input {
    Request(RequestId, Request),
    Completion(usize, Completion),
}

pub(super) struct Core {
    pub(super) costs: CpuCosts,
    /// When the core is done with the last event it took.
    pub(super) free_at_ns: u64,
    /// Events that arrived while it was busy, oldest first.
    pub(super) waiting: VecDeque<Input>,
    /// Responses emitted, with the time they are released at (never decreasing: the core
    /// takes one event at a time and releases at its end).
    pub(super) responses: VecDeque<(u64, Response)>,
    /// The kind of each command on a drive, by (drive, tag): a completion is charged by
    /// the command it completes (a failed one says nothing of its kind).
    in_flight: HashMap<(usize, u64), (CompletionKind, u64)>,
    block_bytes: u64,
    /// Time the core spent on events, in all.
    pub(super) busy_ns: u64,
}

impl Core {
    /// A core free from `now_ns` on.
    pub(super) fn new(costs: CpuCosts, now_ns: u64, block_bytes: u32) -> Core {
        Core {
            block_bytes: u64::from(block_bytes),
            costs,
            free_at_ns: now_ns,
            waiting: VecDeque::new(),
            responses: VecDeque::new(),
            in_flight: HashMap::new(),
            busy_ns: 0,
        }
    }

    /// Notes a command going to a drive, to charge its completion by kind.
    pub(super) fn submitted(&mut self, drive: usize, tag: u64, command: &Command) {
        self.in_flight.insert((drive, tag), CompletionKind::of(command, self.block_bytes));
    }

    /// What handling `input` costs (a completion of a command the core did not see
    /// submitted is charged as a one-block write's).
    pub(super) fn cost_ns(&mut self, input: &Input) -> u64 {
        match input {
            Input::Request(_, request) => {
                let (kind, blocks) = RequestKind::of(request, self.block_bytes);
                match kind {
                    RequestKind::Other => self.costs.request_ns(kind),
                    _ => blocks * self.costs.request_ns(kind),
                }
            }
            Input::Completion(drive, completion) => {
                let (kind, blocks) =
                    self.in_flight.remove(&(*drive, completion.tag)).unwrap_or((CompletionKind::Write, 1));
                match kind {
                    CompletionKind::Zone => self.costs.completion_ns(kind),
                    _ => blocks * self.costs.completion_ns(kind),
                }
            }
        }
    }

    /// Takes the core at `now_ns` for `cost_ns`; returns when it is free again, which is
    /// when what the event emitted is released.
    pub(super) fn take(&mut self, now_ns: u64, cost_ns: u64) -> u64 {
        debug_assert!(self.free_at_ns <= now_ns, "the core took an event while busy");
        self.free_at_ns = now_ns + cost_ns;
        self.busy_ns += cost_ns;
        self.free_at_ns
    }

    pub(super) fn is_free(&self, now_ns: u64) -> bool {
        self.free_at_ns <= now_ns
    }

    /// When the core next has something to do or release, if anything: the time it is
    /// free again when events wait, and the next response's release.
    pub(super) fn next_event_ns(&self, now_ns: u64) -> Option<u64> {
        let next_input = (!self.waiting.is_empty()).then_some(self.free_at_ns.max(now_ns));
        let next_response = self.responses.front().map(|(at, _)| *at);
        [next_input, next_response].into_iter().flatten().min()
    }

    /// Responses due by `now_ns`, in order.
    pub(super) fn release_responses(&mut self, now_ns: u64, into: &mut Vec<Response>) {
        while self.responses.front().is_some_and(|(at, _)| *at <= now_ns) {
            if let Some((_, response)) = self.responses.pop_front() {
                into.push(response);
            }
        }
    }

    /// Drive completions reaped and not yet handed to the engine.
    pub(super) fn waiting_completions(&self) -> usize {
        self.waiting.iter().filter(|i| matches!(i, Input::Completion(..))).count()
    }
}
