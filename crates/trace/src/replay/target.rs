//! What a trace is replayed against: the deterministic simulator (virtual time, the
//! default), or an array on real drives or drive files, or a block device (wall time; in
//! the CLI, which owns those). The replay sees requests go in and answers come out.
//!
//! A target answers every request it takes exactly once; `step` returns false only when
//! nothing it holds can ever complete (the replay reports a stall).

use zapraid_engine::{Request, RequestId, Simulator};
use zapraid_zns::ZonedDevice;

/// Garbage collection a target saw since it started: (segments reclaimed, blocks moved).
pub type GcCounts = (u64, u64);

pub trait Target {
    /// Its clock: virtual or wall time since some start, in nanoseconds.
    fn now_ns(&self) -> u64;
    fn logical_blocks(&self) -> u64;
    fn block_bytes(&self) -> u64;
    fn submit(&mut self, id: RequestId, request: Request);
    /// Waits until at least one more thing happened (an answer, or time passed); false if
    /// nothing can happen any more.
    fn step(&mut self) -> bool;
    /// Lets time run to `due_ns`, taking what happens until then; false once it is there.
    fn step_until(&mut self, due_ns: u64) -> bool;
    /// The answers since the last call: each request's id and whether it succeeded (the
    /// error said).
    fn take_answers(&mut self) -> Vec<(RequestId, Result<(), String>)>;
    /// Whether none of these blocks was ever written, if the target can tell.
    fn unwritten(&self, lba: u64, blocks: u64) -> Option<bool>;
    /// Garbage collection so far, if the target can tell.
    fn gc(&self) -> Option<GcCounts>;
}

impl Target for Simulator {
    fn now_ns(&self) -> u64 {
        Simulator::now_ns(self)
    }

    fn logical_blocks(&self) -> u64 {
        self.engine.logical_blocks()
    }

    fn block_bytes(&self) -> u64 {
        self.drives.first().map_or(4096, |d| u64::from(d.geometry().block_size_bytes))
    }

    fn submit(&mut self, id: RequestId, request: Request) {
        Simulator::submit(self, id, request);
    }

    fn step(&mut self) -> bool {
        Simulator::step(self)
    }

    fn step_until(&mut self, due_ns: u64) -> bool {
        Simulator::step_until(self, due_ns)
    }

    fn take_answers(&mut self) -> Vec<(RequestId, Result<(), String>)> {
        self.take_responses().into_iter().map(|r| (r.id, r.result.map(|_| ()).map_err(|e| e.to_string()))).collect()
    }

    fn unwritten(&self, lba: u64, blocks: u64) -> Option<bool> {
        Some((lba..lba + blocks).all(|b| self.engine.locate(b).is_none()))
    }

    fn gc(&self) -> Option<GcCounts> {
        let status = self.engine.status();
        Some((status.segments_reclaimed, status.blocks_relocated))
    }
}
