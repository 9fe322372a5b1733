//! An engine's simulated CPU core: the events waiting for it, when it is free again, and
//! what it emitted that its time has not yet released (responses; held commands live in
//! the simulator's `delayed`). The costs are `cpu_cost`'s. The plain simulator (`super`)
//! gives its engine one; the sharded one (`sim_shards`) gives each shard's engine its own.
//!
//! An event (a request submitted, a drive completion reaped) that arrives while the core is
//! busy waits, in arrival order; the engine handles it at max(arrival, core free), and what
//! it emits is released when the event's cost has elapsed. The simulator decides when to
//! hand events over (`next_input`); this module keeps the state and does the arithmetic.
//!
//! The drive rebuild's jobs (`RebuildJob`: checking a chunk position's sources and
//! rebuilding its chunk) run as the server runs them (`zapraid_server`'s engine thread
//! and its rebuild threads, `run_rebuild_jobs`): with no worker cores the engine's core
//! does the jobs an event sets off, one after the other, before it takes another event;
//! with `rebuild_worker_cores`, each job goes to the worker core free first, and its
//! result comes back to the engine as an event of its own when it is done (`JobsDone`),
//! while the engine's core takes other events. Taking a job's result costs the engine's
//! core `rebuild_job_result_ns` either way.

use std::collections::{BTreeMap, HashMap, VecDeque};

use zapraid_zns::{Command, Completion};

use crate::cpu_cost::{CompletionKind, CpuCosts, RequestKind};
use crate::engine::{Engine, RebuildJobDone, Request, RequestId, Response};

/// An event for the engine, waiting for its core.
pub(crate) enum Input {
    Request(RequestId, Request),
    Completion(usize, Completion),
    /// Rebuild jobs done on worker cores.
    JobsDone(Vec<RebuildJobDone>),
}

pub(crate) struct Core {
    pub(crate) costs: CpuCosts,
    /// When the core is done with the last event it took.
    pub(crate) free_at_ns: u64,
    /// Events that arrived while it was busy, oldest first.
    pub(crate) waiting: VecDeque<Input>,
    /// Responses emitted, with the time they are released at (never decreasing: the core
    /// takes one event at a time and releases at its end).
    pub(crate) responses: VecDeque<(u64, Response)>,
    /// The kind of each command on a drive, its blocks and, the rebuild's, its chunks'
    /// blocks, by (drive, tag): a completion is charged by the command it completes (a
    /// failed one says nothing of its kind).
    in_flight: HashMap<(usize, u64), (CompletionKind, u64, u64)>,
    block_bytes: u64,
    /// Time the core spent on events, in all (waiting for the rebuild's jobs included).
    pub(crate) busy_ns: u64,
    /// Cores besides the engine's that run the rebuild's jobs (module doc), each free from
    /// the time here on.
    worker_free_at_ns: Vec<u64>,
    /// Jobs running on them, by the time they are done (and the order they went out).
    jobs_running: BTreeMap<(u64, u64), RebuildJobDone>,
    jobs_sent: u64,
    /// Time the rebuild's jobs took, on every core together.
    pub(crate) rebuild_jobs_ns: u64,
}

impl Core {
    /// A core free from `now_ns` on.
    pub(crate) fn new(costs: CpuCosts, now_ns: u64, block_bytes: u32) -> Core {
        Core {
            block_bytes: u64::from(block_bytes),
            costs,
            free_at_ns: now_ns,
            waiting: VecDeque::new(),
            responses: VecDeque::new(),
            in_flight: HashMap::new(),
            busy_ns: 0,
            worker_free_at_ns: Vec::new(),
            jobs_running: BTreeMap::new(),
            jobs_sent: 0,
            rebuild_jobs_ns: 0,
        }
    }

    /// Notes a command going to a drive, to charge its completion by kind: the drive
    /// rebuild's (`rebuild_chunk_blocks`, its segment's chunk size, as
    /// `Engine::rebuild_command_chunk_blocks` says) at the rebuild's cost.
    pub(crate) fn submitted(&mut self, drive: usize, tag: u64, command: &Command, rebuild_chunk_blocks: Option<u64>) {
        let (kind, blocks) = CompletionKind::of(command, self.block_bytes);
        let entry = match rebuild_chunk_blocks {
            Some(chunk_blocks) => (kind.of_rebuild(), blocks, chunk_blocks),
            None => (kind, blocks, 0),
        };
        self.in_flight.insert((drive, tag), entry);
    }

    /// What handling `input` costs (a completion of a command the core did not see
    /// submitted is charged as a one-block write's).
    pub(crate) fn cost_ns(&mut self, input: &Input) -> u64 {
        match input {
            Input::Request(_, request) => {
                let (kind, blocks) = RequestKind::of(request, self.block_bytes);
                self.costs.request_ns(kind, blocks)
            }
            Input::Completion(drive, completion) => {
                let (kind, blocks, chunk_blocks) =
                    self.in_flight.remove(&(*drive, completion.tag)).unwrap_or((CompletionKind::Write, 1, 0));
                let chunks_ns = match kind {
                    CompletionKind::RebuildWrite => self.costs.rebuild_chunks_ns(blocks, chunk_blocks),
                    _ => 0,
                };
                self.costs.completion_ns(kind, blocks) + chunks_ns
            }
            Input::JobsDone(done) => self.costs.rebuild_job_result_ns * done.len() as u64,
        }
    }

    /// Cores besides the engine's that run the rebuild's jobs.
    pub(crate) fn rebuild_worker_cores(&self) -> u32 {
        self.worker_free_at_ns.len() as u32
    }

    /// Gives the rebuild's jobs `cores` worker cores, free from `now_ns` on.
    pub(crate) fn set_rebuild_worker_cores(&mut self, cores: u32, now_ns: u64) {
        self.worker_free_at_ns = vec![now_ns; cores as usize];
    }

    /// The results of jobs done by `now_ns` become an event waiting for the engine's core.
    pub(crate) fn release_jobs(&mut self, now_ns: u64) {
        let mut done = Vec::new();
        while let Some(entry) = self.jobs_running.first_entry() {
            if entry.key().0 > now_ns {
                break;
            }
            done.push(entry.remove());
        }
        if !done.is_empty() {
            self.waiting.push_back(Input::JobsDone(done));
        }
    }

    /// Takes the core at `now_ns` for `cost_ns`; returns when it is free again, which is
    /// when what the event emitted is released.
    fn take(&mut self, now_ns: u64, cost_ns: u64) -> u64 {
        debug_assert!(self.free_at_ns <= now_ns, "the core took an event while busy");
        self.free_at_ns = now_ns + cost_ns;
        self.busy_ns += cost_ns;
        self.free_at_ns
    }

    /// The next waiting event, if the core is free at `now_ns` to take it, charged: the
    /// event and when what the engine emits handling it is released.
    pub(crate) fn next_input(&mut self, now_ns: u64) -> Option<(Input, u64)> {
        if !self.is_free(now_ns) {
            return None;
        }
        let input = self.waiting.pop_front()?;
        let cost_ns = self.cost_ns(&input);
        Some((input, self.take(now_ns, cost_ns)))
    }

    /// Stops charging at `now_ns`: what waits costs nothing from now on and the core is free,
    /// and every held response is released into `into` (the simulator then hands the
    /// waiting events over and drops the core).
    pub(crate) fn stop_charging(&mut self, now_ns: u64, into: &mut Vec<Response>) {
        self.costs = CpuCosts::default();
        self.free_at_ns = self.free_at_ns.min(now_ns);
        // Jobs the waiting events set off run at once from now on, not on worker cores.
        self.worker_free_at_ns.clear();
        self.release_jobs(u64::MAX);
        self.release_responses(u64::MAX, into);
    }

    pub(crate) fn is_free(&self, now_ns: u64) -> bool {
        self.free_at_ns <= now_ns
    }

    /// When the core next has something to do or release, if anything: the time it is
    /// free again when events wait, and the next response's release.
    pub(crate) fn next_event_ns(&self, now_ns: u64) -> Option<u64> {
        let next_input = (!self.waiting.is_empty()).then_some(self.free_at_ns.max(now_ns));
        let next_response = self.responses.front().map(|(at, _)| *at);
        let next_job = self.jobs_running.keys().next().map(|(at, _)| *at);
        [next_input, next_response, next_job].into_iter().flatten().min()
    }

    /// Responses due by `now_ns`, in order.
    pub(crate) fn release_responses(&mut self, now_ns: u64, into: &mut Vec<Response>) {
        while self.responses.front().is_some_and(|(at, _)| *at <= now_ns) {
            if let Some((_, response)) = self.responses.pop_front() {
                into.push(response);
            }
        }
    }

    /// Sends a job of `cost_ns` that goes out at `release_ns` to the worker core free
    /// first; its result comes back when it is done (`release_jobs`).
    fn send_job(&mut self, done: RebuildJobDone, cost_ns: u64, release_ns: u64) {
        let worker = self.worker_free_at_ns.iter_mut().min().expect("a worker core");
        let end_ns = (*worker).max(release_ns) + cost_ns;
        *worker = end_ns;
        self.jobs_sent += 1;
        self.jobs_running.insert((end_ns, self.jobs_sent), done);
        self.rebuild_jobs_ns += cost_ns;
    }

    /// Drive completions reaped and not yet handed to the engine.
    pub(crate) fn waiting_completions(&self) -> usize {
        self.waiting.iter().filter(|i| matches!(i, Input::Completion(..))).count()
    }
}

/// Runs the rebuild's jobs `engine` set off (module doc), their output released at
/// `release_ns`: without a `core`, at once, their results handed over; on the engine's
/// core, which is then busy until they are done; on worker cores, their results coming
/// back later. Returns when the event's output is released.
pub(crate) fn run_rebuild_jobs(engine: &mut Engine, mut core: Option<&mut Core>, now_ns: u64, release_ns: u64) -> u64 {
    let (mut done, mut jobs_ns) = (Vec::new(), 0);
    while let Some(job) = engine.poll_rebuild_job() {
        let cost_ns = core.as_deref().map_or(0, |core| core.costs.rebuild_job.ns(job.source_blocks()));
        // The job runs here, now: its result is the same whenever it is taken.
        let result = job.run();
        match core.as_deref_mut() {
            Some(core) if core.rebuild_worker_cores() > 0 => core.send_job(result, cost_ns, release_ns),
            _ => {
                jobs_ns += cost_ns;
                done.push(result);
            }
        }
    }
    if done.is_empty() {
        return release_ns;
    }
    let results_ns = core.as_deref().map_or(0, |core| core.costs.rebuild_job_result_ns * done.len() as u64);
    engine.on_rebuild_jobs_done(done, now_ns);
    let Some(core) = core else { return release_ns };
    core.free_at_ns = core.free_at_ns.max(release_ns) + jobs_ns + results_ns;
    core.busy_ns += jobs_ns + results_ns;
    core.rebuild_jobs_ns += jobs_ns;
    core.free_at_ns
}

#[cfg(test)]
mod tests {
    use zapraid_zns::{Geometry, TimingParams};

    use crate::cpu_cost::{Cost, CpuCosts};
    use crate::engine::{Config, Request, DEFAULT_STRIPE_TIMEOUT_NS};
    use crate::layout::{Mode, RaidLevel};
    use crate::sim::Simulator;

    const BLOCK_BYTES: usize = 4096;
    /// Ten full stripes of a (3+1)-RAID-5 with one-block chunks.
    const WRITES: u64 = 30;

    fn config() -> Config {
        Config {
            level: RaidLevel::Raid5 { drives: 4 },
            mode: Mode::ZapRaid { group_size: 4 },
            chunk_bytes: BLOCK_BYTES as u64,
            open_segments: crate::hybrid::OpenSegments::SINGLE,
            stripe_timeout_ns: DEFAULT_STRIPE_TIMEOUT_NS,
            logical_blocks: 256,
            array_uuid: [3; 16],
            lookup_ps_per_entry: 0,
            merge_appends: true,
            declustering: Default::default(),
            l2p: crate::engine::L2pConfig::default(),
        }
    }

    /// `WRITES` one-block writes submitted at once; each response's id and time.
    fn run(costs: Option<CpuCosts>, timing: Option<TimingParams>) -> Vec<(u64, u64)> {
        const ZONES: u32 = 16;
        const ZONE_BLOCKS: u64 = 1024;
        let mut sim = Simulator::new(Geometry::small(ZONES, ZONE_BLOCKS, ZONE_BLOCKS), config(), 1, timing).unwrap();
        sim.set_cpu_costs(costs);
        for id in 0..WRITES {
            sim.submit(id, Request::Write { lba: id, data: vec![id as u8; BLOCK_BYTES] });
        }
        let mut answered = Vec::new();
        while sim.step() {
            for response in sim.take_responses() {
                response.result.unwrap();
                answered.push((response.id, sim.now_ns()));
            }
        }
        answered
    }

    /// Requests submitted together wait for one another on the core: the last answer
    /// comes no earlier than all their costs; uncharged, instant drives answer at once.
    #[test]
    fn requests_wait_for_a_busy_core() {
        const REQUEST_NS: u64 = 10_000;
        let costs = CpuCosts { write_request: Cost::new(REQUEST_NS, 0), ..CpuCosts::default() };
        let charged = run(Some(costs), None);
        assert_eq!(charged.len(), WRITES as usize, "{charged:?}");
        let last_ns = charged.iter().map(|(_, at)| *at).max().unwrap_or(0);
        assert!(last_ns >= WRITES * REQUEST_NS, "{charged:?}");
        // The first stripe's three writes are answered after the third is handled.
        let first_ns = charged.iter().map(|(_, at)| *at).min().unwrap_or(0);
        assert!(first_ns >= 3 * REQUEST_NS, "{charged:?}");
        let uncharged = run(None, None);
        assert!(uncharged.iter().all(|(_, at)| *at < REQUEST_NS), "{uncharged:?}");
    }

    /// With drive timing the core is on by default, and the same seed gives the same run.
    #[test]
    fn charged_runs_repeat() {
        let timing = Some(TimingParams::zn540());
        let sim = Simulator::new(Geometry::small(16, 1024, 1024), config(), 1, timing.clone()).unwrap();
        assert_eq!(sim.cpu_costs(), Some(CpuCosts::calibrated(config().level)));
        let calibrated = sim.cpu_costs();
        assert_eq!(run(calibrated, timing.clone()), run(calibrated, timing));
    }

    /// An event costs its kind's fixed part plus its part per block: a 16 KiB append's
    /// completion four blocks' worth and one fixed part, a flush and a zone command their
    /// fixed parts only.
    #[test]
    fn events_cost_a_fixed_part_and_a_part_per_block() {
        use zapraid_zns::{Command, Completion, Done, ZoneAction, ZoneTarget};

        use super::{Core, Input};
        use crate::cpu_cost::CompletionKind;

        let costs = CpuCosts {
            write_request: Cost::new(1_000, 10),
            write_completion: Cost::new(500, 7),
            other_request_ns: 300,
            zone_completion_ns: 200,
            ..CpuCosts::default()
        };
        let mut core = Core::new(costs, 0, BLOCK_BYTES as u32);
        let append = Command::Append { zone_start_lba: 0, data: vec![0; 4 * BLOCK_BYTES], metadata: Vec::new() };
        core.submitted(0, 1, &append, None);
        let reset = Command::ManageZone { action: ZoneAction::Reset, target: ZoneTarget::Zone { start_lba: 0 } };
        core.submitted(0, 2, &reset, None);
        let done = |tag| Completion { tag, result: Ok(Done::ZoneManaged), data: Vec::new(), metadata: Vec::new() };
        assert_eq!(core.cost_ns(&Input::Completion(0, done(1))), 500 + 4 * 7);
        assert_eq!(core.cost_ns(&Input::Completion(0, done(2))), 200);
        // The rebuild's read and write of 8 blocks on chunks of 2: their own costs, the
        // write's four chunks each theirs; its zone commands theirs (none here).
        core.costs = CpuCosts {
            rebuild_read_completion: Cost::new(40, 3),
            rebuild_write_completion: Cost::new(60, 5),
            rebuild_chunk_ns: 11,
            ..costs
        };
        let read = Command::Read { lba: 0, data: vec![0; 8 * BLOCK_BYTES], metadata: Vec::new() };
        let write = Command::Write { lba: 0, data: vec![0; 8 * BLOCK_BYTES], metadata: Vec::new() };
        core.submitted(1, 3, &read, Some(2));
        core.submitted(1, 4, &write, Some(2));
        core.submitted(1, 5, &reset, Some(2));
        core.submitted(1, 6, &read, None);
        assert_eq!(core.cost_ns(&Input::Completion(1, done(3))), 40 + 8 * 3);
        assert_eq!(core.cost_ns(&Input::Completion(1, done(4))), 60 + 8 * 5 + 4 * 11);
        assert_eq!(core.cost_ns(&Input::Completion(1, done(5))), 0, "the rebuild's zone command: its own cost");
        assert_eq!(core.cost_ns(&Input::Completion(1, done(6))), 0, "a read completion not the rebuild's");
        let write = Request::Write { lba: 0, data: vec![0; 2 * BLOCK_BYTES] };
        assert_eq!(core.cost_ns(&Input::Request(1, write)), 1_000 + 2 * 10);
        assert_eq!(core.cost_ns(&Input::Request(2, Request::Flush)), 300);
        assert_eq!(costs.completion_ns(CompletionKind::Write, 1), 507);
    }
}
