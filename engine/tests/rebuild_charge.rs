//! The simulators charge a drive rebuild's completions the rebuild's own costs
//! (`CpuCosts::rebuild_*`, the commands told by `Engine::rebuild_command_chunk_blocks`),
//! not a frontend read's or write's: with only the rebuild's costs set, a rebuild keeps the
//! engine's core busy; with every cost but the rebuild's, it does not. Both the plain
//! simulator and the sharded one. The rebuild's jobs are charged on the engine's core, or
//! on worker cores when it has some, and the rebuild ends the same. Never asserts on
//! timings: core time is virtual and deterministic.

use zapraid_engine::cpu_cost::{Cost, CpuCosts};
use zapraid_engine::sim_shards::ShardedSimulator;
use zapraid_engine::{Config, Layout, Mode, RaidLevel, Request, Simulator};
use zapraid_zns::Geometry;

mod common;
use common::BLOCK;

const LEVEL: RaidLevel = RaidLevel::Raid5 { drives: 4 };
const SEGMENTS: u64 = 4;
const ZONES: u32 = 12;
/// Two shards each keep zones of their own for their open segments and reserve.
const SHARDED_ZONES: u32 = 2 * ZONES;
const FAILED: usize = 1;
/// A cost no other event is charged in these runs.
const CHARGE_NS: u64 = 1_000;
const UNIT_BLOCKS: u64 = 3;

fn geometry() -> Geometry {
    common::geometry(ZONES, 8, 10)
}

/// Whole segments of data: none is left open when the drive fails, so garbage collection
/// has nothing to reclaim and the rebuild's are the only commands.
fn config() -> Config {
    let layout = Layout::new(&geometry(), LEVEL, Mode::ZoneWriteOnly, BLOCK as u64).unwrap();
    common::config(LEVEL, Mode::ZoneWriteOnly, 1, SEGMENTS * layout.data_blocks_per_segment())
}

fn only_rebuild() -> CpuCosts {
    CpuCosts {
        rebuild_read_completion: Cost::new(CHARGE_NS, CHARGE_NS),
        rebuild_write_completion: Cost::new(CHARGE_NS, CHARGE_NS),
        rebuild_chunk_ns: CHARGE_NS,
        rebuild_zone_completion_ns: CHARGE_NS,
        ..CpuCosts::default()
    }
}

fn all_but_rebuild() -> CpuCosts {
    let cost = Cost::new(CHARGE_NS, CHARGE_NS);
    CpuCosts {
        write_request: cost,
        read_request: cost,
        other_request_ns: CHARGE_NS,
        write_completion: cost,
        read_completion: cost,
        zone_completion_ns: CHARGE_NS,
        ..CpuCosts::default()
    }
}

/// Every block of the array, one stripe's data per write.
fn fill(mut submit: impl FnMut(u64, Request)) {
    let stripe_blocks = LEVEL.shape().0 as u64;
    for (id, lba) in (0..config().logical_blocks).step_by(stripe_blocks as usize).enumerate() {
        submit(id as u64, Request::Write { lba, data: vec![lba as u8; (stripe_blocks * BLOCK as u64) as usize] });
    }
}

/// The plain simulator's core time over a rebuild charged `costs`, and the segments
/// garbage collection reclaimed meanwhile.
fn plain_rebuild(costs: CpuCosts) -> (u64, u64) {
    let (busy_ns, reclaimed, _) = plain_rebuild_on(costs, 0);
    (busy_ns, reclaimed)
}

/// As `plain_rebuild`, the rebuild's jobs on `worker_cores` cores besides the engine's;
/// also the jobs' time. Every block reads back as written, the new drive in place of
/// the failed one and then another drive failed (so what the rebuild wrote is read).
fn plain_rebuild_on(costs: CpuCosts, worker_cores: u32) -> (u64, u64, u64) {
    let mut sim = Simulator::new(geometry(), config(), 3, None).unwrap();
    fill(|id, request| {
        sim.submit(id, request);
        sim.run_until_response(id).expect("answered").result.unwrap();
    });
    while sim.step() {}
    sim.drives[FAILED].fail();
    sim.engine.fail_drive(FAILED);
    sim.set_cpu_costs(Some(costs));
    sim.set_rebuild_worker_cores(worker_cores);
    let reclaimed = sim.engine.status().segments_reclaimed;
    sim.replace_drive(FAILED, 7).unwrap();
    while sim.engine.rebuild_status().is_some() {
        assert!(sim.step(), "the rebuild stalled");
    }
    assert_eq!(sim.engine.status().rebuilds_completed, 1);
    let charged = (sim.cpu_busy_ns(), sim.engine.status().segments_reclaimed - reclaimed, sim.rebuild_jobs_ns());
    let other = (FAILED + 1) % sim.drives.len();
    sim.drives[other].fail();
    sim.engine.fail_drive(other);
    let stripe_blocks = LEVEL.shape().0 as u64;
    for (id, lba) in (0..config().logical_blocks).step_by(stripe_blocks as usize).enumerate() {
        let id = 1_000_000 + id as u64;
        sim.submit(id, Request::Read { lba, blocks: stripe_blocks });
        let data = sim.run_until_response(id).expect("answered").result.expect("read");
        assert!(data.iter().all(|b| *b == lba as u8), "LBA {lba} reads back other data");
    }
    charged
}

/// As `plain_rebuild`, on two engine shards: the sum of their cores' time.
fn sharded_rebuild(costs: CpuCosts) -> u64 {
    let geometry = Geometry { zone_count: SHARDED_ZONES, ..geometry() };
    let mut sim = ShardedSimulator::new(geometry, config(), 2, UNIT_BLOCKS, 3, None).unwrap();
    sim.set_cpu_costs(None);
    fill(|id, request| {
        sim.submit(id, request);
        sim.run_until_response(id).expect("answered").result.unwrap();
    });
    sim.run_until_idle();
    sim.fail_drive(FAILED);
    sim.set_cpu_costs(Some(costs));
    sim.replace_drive(FAILED, 7).unwrap();
    while sim.shards.iter().any(|s| s.engine.rebuild_status().is_some()) {
        assert!(sim.step(), "the rebuild stalled");
    }
    sim.cpu_busy_ns().iter().sum()
}

#[test]
fn the_plain_simulator_charges_a_rebuild_its_own_costs() {
    let (busy_ns, reclaimed) = plain_rebuild(only_rebuild());
    assert_eq!(reclaimed, 0, "garbage collection ran: not the rebuild's commands alone");
    assert!(busy_ns > 0, "the rebuild's completions were not charged its costs");
    assert_eq!(plain_rebuild(all_but_rebuild()), (0, 0), "the rebuild's completions were charged as others");
}

#[test]
fn the_sharded_simulator_charges_a_rebuild_its_own_costs() {
    assert!(sharded_rebuild(only_rebuild()) > 0, "the rebuild's completions were not charged its costs");
    assert_eq!(sharded_rebuild(all_but_rebuild()), 0, "the rebuild's completions were charged as others");
}

/// The rebuild's jobs (each chunk position's sources checked, its chunk rebuilt) on the
/// engine's core: it is busy exactly their time. On worker cores: the engine's core is
/// not busy at all (their results are charged nothing, only the jobs), the jobs take as
/// long in all, and the rebuild writes what reads back the same.
#[test]
fn the_rebuild_s_jobs_run_on_the_engine_s_core_or_on_worker_cores() {
    let only_jobs = CpuCosts { rebuild_job: Cost::new(CHARGE_NS, CHARGE_NS), ..CpuCosts::default() };
    let (busy_ns, reclaimed, jobs_ns) = plain_rebuild_on(only_jobs, 0);
    assert_eq!(reclaimed, 0, "garbage collection ran: not the rebuild's commands alone");
    assert!(jobs_ns > 0 && busy_ns == jobs_ns, "one core: busy {busy_ns} ns, jobs {jobs_ns} ns");
    let (busy_ns, _, worker_jobs_ns) = plain_rebuild_on(only_jobs, 3);
    assert_eq!((busy_ns, worker_jobs_ns), (0, jobs_ns), "worker cores: the engine's core idle, the jobs as long");
}
