//! Arrays of engine shards in the sharded simulator (`sim_shards`): for S = 1 to 4 and
//! both write modes, random runs of writes and reads that cross shard boundaries, flushes,
//! a drive failed at a random step, replaced and rebuilt, a clean stop and start (from
//! each shard's checkpoint), a power cut and start, checked against a model of what each
//! LBA holds; one shard answers as the plain simulator does, response for response.

mod common;

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zapraid_engine::cpu_cost::CpuCosts;
use zapraid_engine::format::CheckpointImage;
use zapraid_engine::sim_shards::ShardedSimulator;
use zapraid_engine::{
    chunks_per_append, Config, L2pConfig, Mode, RaidLevel, Request, Response, SegmentPlan, Simulator,
};
use zapraid_zns::{Geometry, TimingParams};

use common::BLOCK;

/// Interleave unit of the tests: small, so that most requests cross shards.
const UNIT: u64 = 8;
const ZONES_PER_SHARD: u32 = 12;
const LEVEL: RaidLevel = RaidLevel::Raid5 { drives: 4 };
const DRIVES: usize = 4;
const MODES: [Mode; 2] = [Mode::ZoneWriteOnly, Mode::ZapRaid { group_size: 4 }];

fn geometry(shards: u32) -> Geometry {
    common::geometry(ZONES_PER_SHARD * shards, 8, 10)
}

/// The array's config: each shard about half full, a small L2P budget (pages written back
/// and read again), checkpoints at clean stops.
fn config(shards: u32, mode: Mode) -> Config {
    let base = common::config(LEVEL, mode, 1, 1);
    let plan = SegmentPlan::new(&geometry(shards), LEVEL, mode, BLOCK as u64, base.open_segments).unwrap();
    let per_shard = plan.capacity_blocks(ZONES_PER_SHARD) / 2 / UNIT * UNIT;
    let l2p = L2pConfig { budget_bytes: Some(4 * BLOCK as u64), page_entries: Some(16), checkpoint: true };
    Config { logical_blocks: per_shard * u64::from(shards), l2p, ..base }
}

/// What each LBA may read as: one value once a write of it was answered; while a power
/// cut may have caught writes, any of the values written since (the start pins it).
#[derive(Default)]
struct Model {
    blocks: HashMap<u64, Vec<Vec<u8>>>,
}

impl Model {
    fn written(&mut self, lba: u64, data: &[u8]) {
        for (i, block) in data.chunks(BLOCK).enumerate() {
            self.blocks.insert(lba + i as u64, vec![block.to_vec()]);
        }
    }

    fn maybe_written(&mut self, lba: u64, data: &[u8]) {
        for (i, block) in data.chunks(BLOCK).enumerate() {
            let values = self.blocks.entry(lba + i as u64).or_insert_with(|| vec![vec![0; BLOCK]]);
            values.push(block.to_vec());
        }
    }

    /// Checks a read of `data` at `lba`, and pins each block to what it read.
    fn check(&mut self, lba: u64, data: &[u8], context: &str) {
        for (i, block) in data.chunks(BLOCK).enumerate() {
            let at = lba + i as u64;
            let zeros = vec![vec![0; BLOCK]];
            let allowed = self.blocks.get(&at).unwrap_or(&zeros);
            assert!(allowed.iter().any(|v| v == block), "{context}: LBA {at} reads a block never written there");
            if allowed.len() > 1 {
                self.blocks.insert(at, vec![block.to_vec()]);
            }
        }
    }
}

/// One random run: its shape, the step each event comes at.
struct Run {
    shards: u32,
    mode: Mode,
    geometry: Geometry,
    config: Config,
    rng: ChaCha8Rng,
    model: Model,
    next_id: u64,
    writes: u64,
    failed: Option<usize>,
}

impl Run {
    fn new(shards: u32, mode: Mode, seed: u64) -> (Run, ShardedSimulator) {
        let (geometry, config) = (geometry(shards), config(shards, mode));
        let sim = ShardedSimulator::new(geometry, config, shards, UNIT, seed, None).unwrap();
        let rng = ChaCha8Rng::seed_from_u64(seed);
        (Run { shards, mode, geometry, config, rng, model: Model::default(), next_id: 1, writes: 0, failed: None }, sim)
    }

    fn context(&self, step: usize) -> String {
        format!("{} shards, {:?}, step {step}", self.shards, self.mode)
    }

    /// A random extent of 1 to 3 units, anywhere.
    fn extent(&mut self) -> (u64, u64) {
        let blocks = self.rng.random_range(1..=3 * UNIT);
        (self.rng.random_range(0..=self.config.logical_blocks - blocks), blocks)
    }

    /// Up to 4 writes of disjoint extents at once: their ids, LBAs and data.
    fn write_batch(&mut self, sim: &mut ShardedSimulator) -> Vec<(u64, u64, Vec<u8>)> {
        let mut batch: Vec<(u64, u64, Vec<u8>)> = Vec::new();
        for _ in 0..self.rng.random_range(1..=4) {
            let (lba, blocks) = self.extent();
            if batch.iter().any(|(_, l, d)| lba < l + (d.len() / BLOCK) as u64 && *l < lba + blocks) {
                continue;
            }
            self.writes += 1;
            let data: Vec<u8> = (lba..lba + blocks).flat_map(|l| common::named_block(l, self.writes)).collect();
            let id = self.next_id;
            self.next_id += 1;
            sim.submit(id, Request::Write { lba, data: data.clone() });
            batch.push((id, lba, data));
        }
        batch
    }

    /// Runs a write batch to its answers: each must succeed.
    fn write(&mut self, sim: &mut ShardedSimulator, step: usize) {
        for (id, lba, data) in self.write_batch(sim) {
            let response = sim.run_until_response(id).unwrap_or_else(|| panic!("{}: no answer", self.context(step)));
            response.result.unwrap_or_else(|e| panic!("{}: write at {lba}: {e}", self.context(step)));
            self.model.written(lba, &data);
        }
    }

    fn read(&mut self, sim: &mut ShardedSimulator, lba: u64, blocks: u64, step: usize) {
        let id = self.next_id;
        self.next_id += 1;
        sim.submit(id, Request::Read { lba, blocks });
        let response = sim.run_until_response(id).expect("a read is answered");
        let context = format!("{}: read of {blocks} blocks at {lba}", self.context(step));
        let data = response.result.unwrap_or_else(|e| panic!("{context}: {e}"));
        assert_eq!(data.len(), blocks as usize * BLOCK, "{context}");
        self.model.check(lba, &data, &context);
    }

    /// Reads the whole array, a few units at a time.
    fn read_all(&mut self, sim: &mut ShardedSimulator, step: usize) {
        let mut lba = 0;
        while lba < self.config.logical_blocks {
            let blocks = (5 * UNIT - 3).min(self.config.logical_blocks - lba);
            self.read(sim, lba, blocks, step);
            lba += blocks;
        }
    }

    fn flush(&mut self, sim: &mut ShardedSimulator, step: usize) {
        let id = self.next_id;
        self.next_id += 1;
        sim.submit(id, Request::Flush);
        let response = sim.run_until_response(id).expect("a flush is answered");
        response.result.unwrap_or_else(|e| panic!("{}: flush: {e}", self.context(step)));
    }

    /// Starts the array again from `drives` (with each shard's checkpoint, if any).
    fn start(
        &self,
        drives: Vec<zapraid_zns::EmulatedDrive>,
        checkpoints: Vec<Option<CheckpointImage>>,
    ) -> ShardedSimulator {
        let failed: Vec<usize> = self.failed.into_iter().collect();
        ShardedSimulator::recover(self.geometry, self.config, self.shards, UNIT, drives, &failed, checkpoints)
            .unwrap_or_else(|e| panic!("{} shards, {:?}: start: {e}", self.shards, self.mode))
    }
}

/// A run of `steps` random steps over S shards; the events come at random steps, in a
/// random order: a drive fails, is replaced (every shard rebuilds it), the array stops
/// cleanly and starts from its checkpoints, and power is cut with writes in flight.
fn random_run(shards: u32, mode: Mode, seed: u64, steps: usize) {
    let (mut run, mut sim) = Run::new(shards, mode, seed);
    let fail_at = run.rng.random_range(steps / 6..steps / 2);
    let replace_at = fail_at + run.rng.random_range(2..steps / 4);
    let stop_at = run.rng.random_range(steps / 6..steps);
    let cut_at = run.rng.random_range(steps / 6..steps);
    for step in 0..steps {
        if step == fail_at {
            let drive = run.rng.random_range(0..DRIVES);
            sim.fail_drive(drive);
            run.failed = Some(drive);
            assert_eq!(sim.status().total.failed_drives, vec![drive]);
        }
        if step == replace_at {
            let drive = run.failed.expect("failed first");
            sim.replace_drive(drive, seed ^ 0xfeed).unwrap();
            assert!(sim.status().shards.iter().all(|s| s.rebuild.is_some_and(|r| r.drive == drive)));
        }
        if step == stop_at || step == cut_at {
            // A rebuild running is done first (its resumption at a start is not this test's).
            if sim.status().total.rebuild.is_some() {
                sim.run_until_idle();
                assert!(sim.status().total.rebuild.is_none());
                assert_eq!(sim.status().total.rebuilds_completed, 1);
            }
            if step > replace_at {
                run.failed = None; // rebuilt: the start reads it as any other drive
            }
        }
        if step == stop_at {
            sim.stop();
            let checkpoints = sim.stop_checkpoints();
            sim = run.start(sim.power_cut().unwrap(), checkpoints);
            run.read_all(&mut sim, step);
        }
        if step == cut_at {
            let batch = run.write_batch(&mut sim);
            for _ in 0..run.rng.random_range(0..40) {
                sim.step();
            }
            let answered: Vec<Response> = sim.take_responses();
            for (id, lba, data) in batch {
                match answered.iter().find(|r| r.id == id) {
                    Some(r) if r.result.is_ok() => run.model.written(lba, &data),
                    Some(r) => panic!("{}: write at {lba}: {:?}", run.context(step), r.result),
                    None => run.model.maybe_written(lba, &data),
                }
            }
            let checkpoints = sim.take_running_checkpoints();
            let drives = sim.power_cut().unwrap();
            sim = run.start(drives, checkpoints);
            run.read_all(&mut sim, step);
        }
        match run.rng.random_range(0..10) {
            0..6 => run.write(&mut sim, step),
            6..9 => {
                let (lba, blocks) = run.extent();
                run.read(&mut sim, lba, blocks, step);
            }
            _ => run.flush(&mut sim, step),
        }
    }
    sim.run_until_idle();
    run.read_all(&mut sim, steps);
    let status = sim.status();
    assert_eq!(status.shards.len(), shards as usize);
    assert_eq!(status.total.zones, ZONES_PER_SHARD * shards);
    assert!(status.total.failed_drives.is_empty(), "the replaced drive is rebuilt: {:?}", status.total);
    assert_eq!(status.total.mapped_blocks, status.shards.iter().map(|s| s.mapped_blocks).sum::<u64>());
}

#[test]
fn one_to_four_shards_keep_every_acknowledged_write() {
    for shards in 1..=4 {
        for mode in MODES {
            for seed in [11, 29, 47, 63, 88, 101] {
                random_run(shards, mode, seed + u64::from(shards), 400);
            }
        }
    }
}

/// A response as compared: its id, and its data or error text.
fn answer(r: &Response) -> (u64, Result<Vec<u8>, String>) {
    (r.id, r.result.as_ref().map(Clone::clone).map_err(ToString::to_string))
}

/// One shard is the plain simulator: the same responses at the same virtual times, the
/// same status, for a workload of writes, reads, flushes, a failure and a rebuild; with
/// the engine core charged (the default with drive timing, the same core time spent) and
/// with it off.
#[test]
fn one_shard_answers_as_the_plain_simulator() {
    for (mode, core) in MODES.into_iter().flat_map(|mode| [(mode, true), (mode, false)]) {
        let (geometry, config) = (geometry(1), config(1, mode));
        let timing = Some(TimingParams::zn540());
        let mut plain = Simulator::new(geometry, config, 5, timing.clone()).unwrap();
        let mut sharded = ShardedSimulator::new(geometry, config, 1, UNIT, 5, timing).unwrap();
        assert_eq!(sharded.cpu_costs(), Some(CpuCosts::calibrated(LEVEL)));
        assert_eq!(sharded.cpu_costs(), plain.cpu_costs());
        if !core {
            plain.set_cpu_costs(None);
            sharded.set_cpu_costs(None);
        }
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for batch in 0..40u64 {
            if batch == 15 {
                plain.drives[2].fail();
                plain.engine.fail_drive(2);
                sharded.fail_drive(2);
            }
            if batch == 25 {
                plain.replace_drive(2, 99).unwrap();
                sharded.replace_drive(2, 99).unwrap();
            }
            for i in 0..4 {
                let id = batch * 10 + i;
                let blocks = rng.random_range(1..=3 * UNIT);
                let lba = rng.random_range(0..=config.logical_blocks - blocks);
                let request = match rng.random_range(0..5) {
                    0 => Request::Flush,
                    1 | 2 => Request::Read { lba, blocks },
                    _ => Request::Write { lba, data: vec![(id % 251) as u8; blocks as usize * BLOCK] },
                };
                let again = match &request {
                    Request::Flush => Request::Flush,
                    Request::Read { lba, blocks } => Request::Read { lba: *lba, blocks: *blocks },
                    Request::Write { lba, data } => Request::Write { lba: *lba, data: data.clone() },
                    _ => unreachable!(),
                };
                plain.submit(id, request);
                sharded.submit(id, again);
            }
            loop {
                let (a, b) = (plain.step(), sharded.step());
                assert_eq!(a, b, "{mode:?}, core {core}, batch {batch}: one ran out of events first");
                assert_eq!(plain.now_ns(), sharded.now_ns(), "{mode:?}, core {core}, batch {batch}");
                let (p, s) = (plain.take_responses(), sharded.take_responses());
                let context = format!("{mode:?}, core {core}, batch {batch}");
                assert_eq!(
                    p.iter().map(answer).collect::<Vec<_>>(),
                    s.iter().map(answer).collect::<Vec<_>>(),
                    "{context}"
                );
                if !a {
                    break;
                }
            }
        }
        assert_eq!(plain.engine.status(), sharded.status().total, "{mode:?}, core {core}");
        assert_eq!(sharded.status().shards, vec![plain.engine.status()]);
        assert_eq!(sharded.cpu_busy_ns(), vec![plain.cpu_busy_ns()], "{mode:?}, core {core}");
        assert_eq!(plain.cpu_busy_ns() > 0, core, "{mode:?}");
    }
}

/// Drives formatted as S shards started as another S are refused (each shard's segments
/// carry its own UUID), not read as another shard's blocks.
#[test]
fn a_start_with_another_shard_count_is_refused() {
    let mode = MODES[1];
    let (mut run, mut sim) = Run::new(2, mode, 3);
    for step in 0..10 {
        run.write(&mut sim, step);
    }
    sim.stop();
    let drives = sim.power_cut().unwrap();
    let config = Config { logical_blocks: run.config.logical_blocks / 2, ..run.config };
    let result = ShardedSimulator::recover(run.geometry, config, 1, UNIT, drives, &[], Vec::new());
    let error = result.err().expect("a start with 1 shard of drives of 2 is refused").to_string();
    assert!(error.contains("another array"), "{error}");
}

/// S shards must fit the drives' open zone limit: refused with the limit and the shortfall.
#[test]
fn too_many_shards_for_the_open_zone_limit_are_refused() {
    let geometry = Geometry { max_open_zones: Some(7), ..geometry(4) };
    let config = config(4, MODES[0]);
    let error = ShardedSimulator::new(geometry, config, 4, UNIT, 1, None).err().expect("refused").to_string();
    assert!(error.contains("the drives allow 7 open zones; 4 shards of 1 open segment need 8"), "{error}");
    assert!(error.ends_with("1 short"), "{error}");
}

/// Pinned (found by `model_shards.rs`): a drive that fails on its own is counted failed
/// only by the shards that sent it a command since; replacing it must rebuild it in every
/// shard, not be refused by a shard that has not seen it fail ("drive 0 has not failed").
#[test]
fn a_drive_failed_on_its_own_is_replaced_in_every_shard() {
    let (mut run, mut sim) = Run::new(3, MODES[1], 9);
    for step in 0..6 {
        run.write(&mut sim, step);
    }
    sim.drives[0].fail();
    // One block: shard 0's alone, which finds the drive failed.
    let id = run.next_id;
    run.next_id += 1;
    let data = common::named_block(0, 99);
    sim.submit(id, Request::Write { lba: 0, data: data.clone() });
    sim.run_until_response(id).expect("answered").result.expect("written degraded");
    run.model.written(0, &data);
    let seen: Vec<bool> = sim.status().shards.iter().map(|s| s.failed_drives == vec![0]).collect();
    assert!(seen[0] && seen.contains(&false), "a shard sent the drive no command since it failed: {seen:?}");
    sim.replace_drive(0, 77).unwrap_or_else(|e| panic!("replace drive 0: {e}"));
    assert!(sim.status().shards.iter().all(|s| s.rebuild.is_some_and(|r| r.drive == 0)));
    sim.run_until_idle();
    assert!(sim.status().total.failed_drives.is_empty());
    assert_eq!(sim.status().total.rebuilds_completed, 1);
    run.read_all(&mut sim, 6);
}

/// The array of the write-heavy runs: zones for `WRITE_HEAVY_WRITES` writes whatever S.
const WRITE_HEAVY_ZONES: u32 = 48;
/// Writes of one block at random LBAs in the write-heavy runs.
const WRITE_HEAVY_WRITES: u64 = 2_400;

/// `WRITE_HEAVY_WRITES` random 4 KiB writes and a flush over S shards on instant drives,
/// every engine's core charged the calibrated costs, submitted at once: the virtual time
/// the last is answered at, and each shard's core time.
fn write_heavy(shards: u32) -> (u64, Vec<u64>) {
    let mode = MODES[1];
    let geometry = common::geometry(WRITE_HEAVY_ZONES, 16, 20);
    let base = common::config(LEVEL, mode, 1, 1);
    let config = Config { logical_blocks: 1_024, ..base };
    let mut sim = ShardedSimulator::new(geometry, config, shards, UNIT, 7, None).unwrap();
    assert_eq!(sim.cpu_costs(), None, "no drive timing: no cores unless set");
    sim.set_cpu_costs(Some(CpuCosts::calibrated(LEVEL)));
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for id in 0..WRITE_HEAVY_WRITES {
        let lba = rng.random_range(0..config.logical_blocks);
        sim.submit(id, Request::Write { lba, data: common::named_block(lba, id) });
    }
    sim.submit(WRITE_HEAVY_WRITES, Request::Flush);
    let mut answered = 0;
    let mut last_ns = 0;
    while sim.step() {
        for response in sim.take_responses() {
            response.result.unwrap_or_else(|e| panic!("{shards} shards: request {}: {e}", response.id));
            answered += 1;
            last_ns = sim.now_ns();
        }
    }
    assert_eq!(answered, WRITE_HEAVY_WRITES + 1, "{shards} shards: every request answered");
    (last_ns, sim.cpu_busy_ns())
}

/// Write-heavy runs on instant drives are bound by the shards' cores: S shards finish in
/// about 1/S of one shard's virtual time, each core busy most of it and never longer, and
/// never faster than S cores allow (`CpuCosts::max_writes_per_s`).
#[test]
fn shards_cores_bound_a_write_heavy_run() {
    // One-block chunks, merged into Zone Appends as large as the drives take.
    let command_blocks = chunks_per_append(&common::geometry(WRITE_HEAVY_ZONES, 16, 20), 1);
    let ceiling = CpuCosts::calibrated(LEVEL).max_writes_per_s(1, command_blocks, LEVEL.shape());
    let (one_ns, _) = write_heavy(1);
    for shards in [1, 2, 4] {
        let (elapsed_ns, busy_ns) = write_heavy(shards);
        assert!(elapsed_ns > 0, "{shards} shards: the cores took no time");
        let writes_per_s = WRITE_HEAVY_WRITES as f64 * 1e9 / elapsed_ns as f64;
        assert!(
            writes_per_s <= f64::from(shards) * ceiling,
            "{shards} shards: {writes_per_s:.0} writes/s, above {shards} cores' {:.0}",
            f64::from(shards) * ceiling
        );
        assert_eq!(busy_ns.len(), shards as usize);
        for (shard, busy) in busy_ns.iter().enumerate() {
            assert!(*busy <= elapsed_ns, "{shards} shards: shard {shard}'s core busy {busy} ns of {elapsed_ns}");
        }
        let busiest = busy_ns.iter().copied().max().unwrap_or(0);
        assert!(
            busiest as f64 >= 0.9 * elapsed_ns as f64,
            "{shards} shards: the cores are the bottleneck: {busy_ns:?} of {elapsed_ns} ns"
        );
        let ratio = elapsed_ns as f64 * f64::from(shards) / one_ns as f64;
        assert!(
            (0.85..=1.2).contains(&ratio),
            "{shards} shards: {elapsed_ns} ns, {ratio:.2} x 1/{shards} of one shard's {one_ns} ns"
        );
    }
}
