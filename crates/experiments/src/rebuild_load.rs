//! What a drive rebuild costs the array's users, and what a rate limit
//! (`Engine::set_rebuild_rate`) gives back: on the full-drive recovery setup of `rebuild`
//! ((3+1)-RAID-5, emulated WD ZN540 drives in virtual time, 62 MiB zones, 16 KiB chunks,
//! filled with sealed segments of sequential writes), a user workload of 4 KiB random
//! reads and writes over the whole array at a fixed queue depth runs
//! - on the healthy array (no rebuild), for `BASELINE_REQUESTS`;
//! - with drive 0 failed and not replaced (degraded reads, no rebuild), as many;
//! - while drive 0 is rebuilt onto a new drive, unlimited and at each of `RATES_MIB_PER_S`:
//!   from the replacement until the rebuild is done.
//!
//! Each gives the users' IOPS and read and write latency (p50, p99) and, with a rebuild,
//! its virtual time (per 100 GiB of data, as `rebuild`) and the rate it wrote the new
//! drive at. 16 KiB chunks, because there the unlimited rebuild is fastest (it writes the
//! new drive at about 1 GB/s), so every rate of `RATES_MIB_PER_S` limits it.
//!
//! Invariants: deterministic (same seed, same figures); the workload's requests must all
//! succeed, and the rebuild must finish, else the measurement is an error.

use std::collections::HashMap;

use super::rebuild::{
    fill_block, filled, rebuild_zones, Progress, FAILED_DRIVE, HUNDRED_GIB_BYTES, REPLACEMENT_SEED_OFFSET,
};
use super::{percentile, XorShift};
use zapraid_engine::engine::{Request, RequestId};
use zapraid_engine::error::{Error, Result};
use zapraid_engine::layout::{Mode, DEFAULT_GROUP_SIZE};
use zapraid_engine::sim::Simulator;

/// The chunk size of the measurement.
pub const LOAD_CHUNK_BYTES: u64 = 16384;
/// The rate limits measured, in MiB/s written to the new drive.
pub const RATES_MIB_PER_S: [u64; 3] = [400, 200, 100];
/// User requests in flight at once.
pub const USER_QUEUE_DEPTH: u64 = 16;
/// Percent of the user requests that are reads (the rest are writes).
pub const USER_READ_PERCENT: u64 = 70;
/// User requests measured without a rebuild.
pub const BASELINE_REQUESTS: u64 = 50_000;
/// Blocks of each user request (4 KiB on the 4 KiB blocks of the ZN540 model).
const USER_REQUEST_BLOCKS: u64 = 1;
/// Empty zones beyond what the data needs, for the segments user writes fill during the
/// measurement (garbage collection reclaims the overwritten ones).
const EXTRA_ZONES: u32 = 8;
/// The first user request's id: past the fill's.
const FIRST_USER_ID: RequestId = 1 << 40;

const MIB: f64 = (1u64 << 20) as f64;

/// What runs beside the user workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    Healthy,
    /// Drive 0 failed, not replaced.
    Degraded,
    /// Drive 0 rebuilt onto a new drive, at most at this many bytes per second (`None`:
    /// unlimited).
    Rebuild(Option<u64>),
}

impl Case {
    /// The cases of the table, in its order.
    pub fn all() -> Vec<Case> {
        let mut cases = vec![Case::Healthy, Case::Degraded, Case::Rebuild(None)];
        cases.extend(RATES_MIB_PER_S.iter().map(|r| Case::Rebuild(Some(r << 20))));
        cases
    }

    pub fn label(&self) -> String {
        match self {
            Case::Healthy => "no rebuild (healthy)".into(),
            Case::Degraded => "no rebuild (degraded)".into(),
            Case::Rebuild(None) => "rebuild, unlimited".into(),
            Case::Rebuild(Some(rate)) => format!("rebuild, {} MiB/s", rate >> 20),
        }
    }
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub struct LoadPoint {
    pub case: Case,
    pub data_bytes: u64,
    pub user_requests: u64,
    pub user_iops: f64,
    pub read_p50_us: f64,
    pub read_p99_us: f64,
    pub write_p50_us: f64,
    pub write_p99_us: f64,
    /// With a rebuild: its virtual time, and what it wrote to the new drive.
    pub rebuild_s: Option<f64>,
    pub new_drive_bytes: u64,
}

impl LoadPoint {
    /// The rebuild's time per 100 GiB of data written to the array.
    pub fn rebuild_s_per_100_gib(&self) -> Option<f64> {
        self.rebuild_s.map(|s| s * HUNDRED_GIB_BYTES / self.data_bytes as f64)
    }

    /// MiB/s the rebuild wrote the new drive at.
    pub fn new_drive_mib_per_s(&self) -> Option<f64> {
        self.rebuild_s.map(|s| self.new_drive_bytes as f64 / MIB / s)
    }
}

/// Measures `case` on an array of `sealed_segments` full segments; `progress` hears how
/// far it is.
pub fn load_point(
    case: Case,
    sealed_segments: u64,
    seed: u64,
    mut progress: impl FnMut(Progress),
) -> Result<LoadPoint> {
    load_point_on(rebuild_zones(), case, sealed_segments, seed, BASELINE_REQUESTS, &mut progress)
}

fn load_point_on(
    zones: zapraid_zns::Geometry,
    case: Case,
    sealed_segments: u64,
    seed: u64,
    baseline_requests: u64,
    progress: &mut impl FnMut(Progress),
) -> Result<LoadPoint> {
    let mode = Mode::ZapRaid { group_size: DEFAULT_GROUP_SIZE };
    let (mut sim, blocks) = filled(zones, mode, LOAD_CHUNK_BYTES, sealed_segments, EXTRA_ZONES, seed, progress)?;
    let block_bytes = u64::from(zones.block_size_bytes);
    let mut segments = 0;
    if case != Case::Healthy {
        sim.drives[FAILED_DRIVE].fail();
        sim.engine.fail_drive(FAILED_DRIVE);
    }
    let started_ns = sim.now_ns();
    if let Case::Rebuild(rate) = case {
        sim.set_rebuild_rate(rate);
        sim.replace_drive(FAILED_DRIVE, seed.wrapping_add(REPLACEMENT_SEED_OFFSET))?;
        segments = sim.engine.rebuild_status().map_or(0, |r| r.segments_left);
    }
    let mut workload = Workload::new(blocks, block_bytes, seed);
    let mut new_drive_blocks = 0;
    let mut rebuild_ns = None;
    let mut steps = 0u64;
    workload.keep_full(&mut sim);
    loop {
        let done = match case {
            Case::Rebuild(_) => match sim.engine.rebuild_status() {
                Some(r) => {
                    new_drive_blocks = r.blocks_written;
                    if steps.is_multiple_of(super::rebuild::PROGRESS_STEPS) {
                        progress(Progress::Rebuilding { segments_rebuilt: r.segments_rebuilt, segments });
                    }
                    false
                }
                None => {
                    rebuild_ns = Some(sim.now_ns() - started_ns);
                    true
                }
            },
            _ => workload.completed() >= baseline_requests,
        };
        if done {
            break;
        }
        if !sim.step() {
            return Err(Error::InvalidConfig { reason: format!("{}: the simulation stalled", case.label()) });
        }
        steps += 1;
        workload.take(&mut sim)?;
        workload.keep_full(&mut sim);
    }
    if case != Case::Healthy && case != Case::Degraded && sim.engine.status().rebuilds_completed != 1 {
        return Err(Error::InvalidConfig { reason: format!("{}: the rebuild was given up", case.label()) });
    }
    let elapsed_s = (sim.now_ns() - started_ns) as f64 / 1e9;
    let user_requests = workload.completed();
    let (reads, writes) = workload.latencies();
    Ok(LoadPoint {
        case,
        data_bytes: blocks * block_bytes,
        user_requests,
        user_iops: user_requests as f64 / elapsed_s,
        read_p50_us: percentile(&reads, 0.5),
        read_p99_us: percentile(&reads, 0.99),
        write_p50_us: percentile(&writes, 0.5),
        write_p99_us: percentile(&writes, 0.99),
        rebuild_s: rebuild_ns.map(|ns| ns as f64 / 1e9),
        new_drive_bytes: new_drive_blocks * block_bytes,
    })
}

/// The user workload: `USER_QUEUE_DEPTH` random 4 KiB reads and writes in flight (also
/// `declustered`'s users during a rebuild).
pub(crate) struct Workload {
    blocks: u64,
    block_bytes: u64,
    seed: u64,
    random: XorShift,
    next_id: RequestId,
    /// Per request in flight: when it was issued and whether it reads.
    in_flight: HashMap<RequestId, (u64, bool)>,
    pub(crate) read_ns: Vec<u64>,
    pub(crate) write_ns: Vec<u64>,
}

impl Workload {
    pub(crate) fn new(blocks: u64, block_bytes: u64, seed: u64) -> Self {
        Workload {
            blocks,
            block_bytes,
            seed,
            random: XorShift(seed | 1),
            next_id: FIRST_USER_ID,
            in_flight: HashMap::new(),
            read_ns: Vec::new(),
            write_ns: Vec::new(),
        }
    }

    fn completed(&self) -> u64 {
        (self.read_ns.len() + self.write_ns.len()) as u64
    }

    pub(crate) fn keep_full(&mut self, sim: &mut Simulator) {
        while (self.in_flight.len() as u64) < USER_QUEUE_DEPTH {
            let lba = self.random.below(self.blocks - USER_REQUEST_BLOCKS + 1);
            let read = self.random.below(100) < USER_READ_PERCENT;
            let request = if read {
                Request::Read { lba, blocks: USER_REQUEST_BLOCKS }
            } else {
                let data = (lba..lba + USER_REQUEST_BLOCKS)
                    .flat_map(|l| fill_block(l, self.seed ^ self.next_id, self.block_bytes as usize))
                    .collect();
                Request::Write { lba, data }
            };
            self.in_flight.insert(self.next_id, (sim.now_ns(), read));
            sim.submit(self.next_id, request);
            self.next_id += 1;
        }
    }

    /// Takes the answers of the last step.
    pub(crate) fn take(&mut self, sim: &mut Simulator) -> Result<()> {
        for response in sim.take_responses() {
            let Some((issued_ns, read)) = self.in_flight.remove(&response.id) else { continue };
            response.result?;
            let latency_ns = sim.now_ns() - issued_ns;
            if read {
                self.read_ns.push(latency_ns);
            } else {
                self.write_ns.push(latency_ns);
            }
        }
        Ok(())
    }

    /// Read and write latencies, sorted.
    fn latencies(&mut self) -> (Vec<u64>, Vec<u64>) {
        self.read_ns.sort_unstable();
        self.write_ns.sort_unstable();
        (std::mem::take(&mut self.read_ns), std::mem::take(&mut self.write_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case runs on zones small enough for a test and gives positive figures; the
    /// rebuild cases finish. Never asserts on timings.
    #[test]
    fn every_case_runs() {
        let zones = zapraid_zns::Geometry::small(1, 256, 240);
        for case in Case::all() {
            let point = load_point_on(zones, case, 2, 3, 500, &mut |_| {}).unwrap();
            assert!(point.user_requests > 0 && point.user_iops > 0.0, "{point:?}");
            assert!(point.read_p99_us >= point.read_p50_us && point.read_p50_us > 0.0, "{point:?}");
            assert!(point.write_p99_us >= point.write_p50_us && point.write_p50_us > 0.0, "{point:?}");
            match case {
                Case::Rebuild(_) => {
                    assert!(point.rebuild_s_per_100_gib().is_some_and(|s| s > 0.0), "{point:?}");
                    assert!(point.new_drive_bytes > 0, "{point:?}");
                }
                _ => assert!(point.rebuild_s.is_none(), "{point:?}"),
            }
        }
    }
}
