//! Each shard's simulated engine core (`sim::core`), driven as `sim` drives its one: the
//! events waiting for a shard's core handed to its engine while the core is free, the
//! responses it holds released when their time comes, the costs set or the cores turned
//! off, and what they spent.

use super::ShardedSimulator;
use crate::cpu_cost::CpuCosts;
use crate::sim::core::{Core, Input};

impl ShardedSimulator {
    /// The costs each shard's core is charged, if they are (module doc; every shard's are
    /// the same).
    pub fn cpu_costs(&self) -> Option<CpuCosts> {
        self.shards.first()?.core.as_ref().map(|core| core.costs)
    }

    /// Charges every shard's core `costs` from now on, or nothing (`None`): events waiting
    /// for a core are then handed over and held responses released at once
    /// (`Simulator::set_cpu_costs`).
    pub fn set_cpu_costs(&mut self, costs: Option<CpuCosts>) {
        let (now_ns, block_bytes) = (self.now_ns, self.block_size_bytes);
        for shard in 0..self.shards.len() {
            match (costs, self.shards[shard].core.as_mut()) {
                (Some(costs), Some(core)) => core.costs = costs,
                (Some(costs), None) => self.shards[shard].core = Some(Core::new(costs, now_ns, block_bytes)),
                (None, Some(core)) => {
                    let mut released = Vec::new();
                    core.stop_charging(now_ns, &mut released);
                    for response in released {
                        self.answer(response);
                    }
                    self.run_core(shard);
                    self.shards[shard].core = None;
                }
                (None, None) => {}
            }
        }
    }

    /// Virtual time each shard's core has spent on events (0s when not charged).
    pub fn cpu_busy_ns(&self) -> Vec<u64> {
        self.shards.iter().map(|s| s.core.as_ref().map_or(0, |core| core.busy_ns)).collect()
    }

    /// What a person reads about the shards' simulated cores: one line.
    pub fn engine_cores(&self) -> String {
        let shards = self.shards.len();
        match self.cpu_costs() {
            Some(costs) => format!("simulated engine cores: {shards}, one per shard, each event charged ({costs})"),
            None => format!("simulated engine cores: none for {shards} shards (their work takes no virtual time)"),
        }
    }

    /// Hands shard `shard`'s engine the events waiting for its core while the core is free
    /// now (`Simulator::run_core`); whether it took any.
    pub(super) fn run_core(&mut self, shard: usize) -> bool {
        let mut took = false;
        loop {
            let now_ns = self.now_ns;
            let Some((input, release_ns)) = self.shards[shard].core.as_mut().and_then(|core| core.next_input(now_ns))
            else {
                return took;
            };
            let engine = &mut self.shards[shard].engine;
            match input {
                Input::Request(id, request) => engine.submit(id, request, now_ns),
                Input::Completion(drive, completion) => engine.on_completion(drive, completion, now_ns),
                Input::JobsDone(done) => engine.on_rebuild_jobs_done(done, now_ns),
            }
            self.dispatch_at(shard, release_ns);
            took = true;
        }
    }

    /// Shard `shard`'s responses its core released by now, to their joins.
    pub(super) fn release_responses(&mut self, shard: usize) {
        let Some(core) = self.shards[shard].core.as_mut() else { return };
        let mut released = Vec::new();
        core.release_responses(self.now_ns, &mut released);
        core.release_jobs(self.now_ns);
        for response in released {
            self.answer(response);
        }
    }
}
