//! The ZapRAID paper's experiments on emulated WD ZN540 drives in virtual time
//! (deterministic: same seed, same figures), and the engine's CPU cost.
//!
//! - Exp#1: random writes, queue depth 64, request size = chunk size (4, 8, 16 KiB), for
//!   ZapRAID (G = 256), ZoneWrite-Only (G = 1) and ZoneAppend-Only (G = S).
//! - Exp#2: random 4 KiB reads at queue depth 1, normal and degraded (one drive failed,
//!   reads of blocks it held), after filling one segment.
//! - CPU cost: 4 KiB random writes through the engine on zero-latency in-memory drives,
//!   in wall-clock time on one core.
//! - Recovery (Exp#5): virtual time to recover after sequential writes, for several
//!   amounts of data. The simulator's work for it (counted in `RecoveryWork`) grows
//!   linearly with the data; the background work after writes or recovery must come to
//!   rest (`settle`), else the measurement fails instead of running forever.
//! - Full-drive recovery (Exp#5): virtual time to rebuild a failed drive onto a new one,
//!   in `rebuild`.
//! - A rebuild under user load, unlimited and rate-limited, in `rebuild_load`.
//! - Exp#4 (RAID levels): random writes on RAID-0, RAID-01, RAID-4, RAID-5, RAID-6, in
//!   `levels`.
//! - Exp#6 (scalability): queue depth sweeps and a (6+1)-RAID-5 on FEMU-like drives, in
//!   `scale`.
//! - Exp#7 (hybrid segment management): random writes of several sizes into four open
//!   segments of small and large chunks, in `hybrid`.
//! - Exp#8 (garbage collection): throughput and write amplification against reserved
//!   space, in `gc`.
//! - Exp#9 (L2P offload): writes with the L2P table's memory budget at 25-100%, in `l2p`.
//! - Declustered arrays (issue 35): a failed drive rebuilt into distributed spare space
//!   against a classic array's rebuild onto a new drive, beside the LANL dRAID study, in
//!   `declustered`.

pub mod cpu;
pub mod declustered;
pub mod gc;
pub mod hybrid;
pub mod l2p;
pub mod levels;
pub mod rebuild;
pub mod rebuild_load;
pub mod scale;

use std::time::Instant;

use zapraid_zns::{Geometry, TimingParams};

use zapraid_engine::cpu_cost::CpuCosts;
use zapraid_engine::engine::{Config, Request, RequestId, DEFAULT_STRIPE_TIMEOUT_NS, PAPER_LOOKUP_PS_PER_ENTRY};
use zapraid_engine::error::{Error, Result};
use zapraid_engine::layout::{Mode, RaidLevel, DEFAULT_GROUP_SIZE};
use zapraid_engine::sim::Simulator;

/// The paper's default array: (3+1)-RAID-5.
pub const PAPER_LEVEL: RaidLevel = RaidLevel::Raid5 { drives: 4 };

/// The line every experiment prints about the engine's simulated core: one core, each
/// event charged with `zapraid bench cpu`'s calibrated costs (`CpuCosts::calibrated`), for
/// the levels the experiment runs (grouped by costs).
pub fn engine_core_line(levels: &[RaidLevel]) -> String {
    let mut groups: Vec<(CpuCosts, Vec<String>)> = Vec::new();
    for level in levels {
        let costs = CpuCosts::calibrated(*level);
        match groups.iter_mut().find(|(c, _)| *c == costs) {
            Some((_, names)) => names.push(level.to_string()),
            None => groups.push((costs, vec![level.to_string()])),
        }
    }
    let costs: Vec<String> = groups.iter().map(|(c, names)| format!("{}: {c}", names.join(", "))).collect();
    format!(
        "Simulated engine core: one per array, every request and drive completion charged (zapraid bench cpu's \
         calibration; a busy core delays events): {}",
        costs.join("; ")
    )
}

/// The three modes compared in the paper.
pub fn paper_modes() -> [(&'static str, Mode); 3] {
    [
        ("ZapRAID", Mode::ZapRaid { group_size: DEFAULT_GROUP_SIZE }),
        ("ZoneWrite-Only", Mode::ZoneWriteOnly),
        ("ZoneAppend-Only", Mode::ZoneAppendOnly),
    ]
}

/// Throughput and latency of a closed-loop run.
#[derive(Clone, Copy, Debug)]
pub struct Measured {
    pub mib_per_s: f64,
    pub p50_us: f64,
    pub p95_us: f64,
}

fn percentile(sorted_ns: &[u64], fraction: f64) -> f64 {
    if sorted_ns.is_empty() {
        return 0.0;
    }
    let at = ((sorted_ns.len() - 1) as f64 * fraction).round() as usize;
    sorted_ns[at] as f64 / 1000.0
}

/// A small deterministic generator for request addresses.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The paper's array ((3+1)-RAID-5, one open segment) in `mode` with `chunk_bytes` chunks,
/// exporting `logical_blocks`.
pub fn config(mode: Mode, chunk_bytes: u64, logical_blocks: u64) -> Config {
    Config {
        level: PAPER_LEVEL,
        mode,
        chunk_bytes,
        open_segments: zapraid_engine::hybrid::OpenSegments::SINGLE,
        stripe_timeout_ns: DEFAULT_STRIPE_TIMEOUT_NS,
        logical_blocks,
        array_uuid: [0x2a; 16],
        lookup_ps_per_entry: PAPER_LOOKUP_PS_PER_ENTRY,
        // The paper's ZapRAID: one Zone Append per chunk (`Config::merge_appends`).
        merge_appends: false,
        declustering: Default::default(),
        l2p: zapraid_engine::L2pConfig::default(),
    }
}

/// Keeps `queue_depth` requests from `next` in flight until `requests` completed;
/// returns MiB/s of `bytes_per_request` and latency percentiles, in virtual time.
fn closed_loop(
    sim: &mut Simulator,
    requests: u64,
    queue_depth: u64,
    bytes_per_request: u64,
    mut next: impl FnMut(&mut Simulator) -> Request,
) -> Result<Measured> {
    closed_loop_sized(sim, requests, queue_depth, |sim| (next(sim), bytes_per_request))
}

/// Like `closed_loop`, for requests of several sizes: `next` gives each request and its
/// bytes, and throughput is the bytes of all requests over the virtual time.
fn closed_loop_sized(
    sim: &mut Simulator,
    requests: u64,
    queue_depth: u64,
    mut next: impl FnMut(&mut Simulator) -> (Request, u64),
) -> Result<Measured> {
    let start_ns = sim.now_ns();
    let mut issued_at = std::collections::HashMap::new();
    let mut latencies = Vec::with_capacity(requests as usize);
    let mut submitted: RequestId = 0;
    let mut bytes = 0;
    while submitted < queue_depth.min(requests) {
        issued_at.insert(submitted, sim.now_ns());
        let (request, request_bytes) = next(sim);
        bytes += request_bytes;
        sim.submit(submitted, request);
        submitted += 1;
    }
    while (latencies.len() as u64) < requests {
        if !sim.step() {
            return Err(Error::InvalidConfig { reason: "the simulation stalled with requests in flight".into() });
        }
        for response in sim.take_responses() {
            response.result?;
            let at = issued_at.remove(&response.id).expect("request issued");
            latencies.push(sim.now_ns() - at);
            if submitted < requests {
                issued_at.insert(submitted, sim.now_ns());
                let (request, request_bytes) = next(sim);
                bytes += request_bytes;
                sim.submit(submitted, request);
                submitted += 1;
            }
        }
    }
    let elapsed_s = (sim.now_ns() - start_ns) as f64 / 1e9;
    latencies.sort_unstable();
    Ok(Measured {
        mib_per_s: bytes as f64 / (1024.0 * 1024.0) / elapsed_s,
        p50_us: percentile(&latencies, 0.5),
        p95_us: percentile(&latencies, 0.95),
    })
}

/// Writes `blocks` blocks (a multiple of `request_blocks`) from LBA 0 on, `request_blocks`
/// per request, 16 requests in flight, and waits until everything is persisted.
fn fill_sequential(sim: &mut Simulator, blocks: u64, request_blocks: u64, block_bytes: u64) -> Result<()> {
    const FILL_QUEUE_DEPTH: u64 = 16;
    let data = vec![0x3c; (request_blocks * block_bytes) as usize];
    let mut next_lba = 0;
    closed_loop(sim, blocks / request_blocks, FILL_QUEUE_DEPTH, request_blocks * block_bytes, |_| {
        let lba = next_lba;
        next_lba += request_blocks;
        Request::Write { lba, data: data.clone() }
    })?;
    settle(sim)?;
    Ok(())
}

/// Runs until nothing is left to happen; returns the steps taken. After writes that
/// overwrote nothing, garbage collection has little to do: relocating more segments than
/// the array has zones means it goes round in circles and would never end (as it once did
/// after recovery in a full array), and is an error instead.
fn settle(sim: &mut Simulator) -> Result<u64> {
    const REST_CHECK_STEPS: u64 = 4096;
    let reclaimed = |sim: &Simulator| sim.engine.status().segments_reclaimed;
    let (before, zones) = (reclaimed(sim), u64::from(sim.engine.status().zones));
    let mut steps = 0;
    while sim.step() {
        steps += 1;
        if steps % REST_CHECK_STEPS == 0 && reclaimed(sim) - before > zones {
            let reason = format!(
                "garbage collection does not come to rest: {} segments relocated in an array of {zones} zones",
                reclaimed(sim) - before
            );
            return Err(Error::InvalidConfig { reason });
        }
    }
    Ok(steps)
}

/// Requests in flight in the paper's write experiments (Exp#1, #4, #7).
pub const WRITE_QUEUE_DEPTH: u64 = 64;
/// Logical blocks the write experiments spread random writes over (4 GiB): no garbage
/// collection runs in them, as in the paper's.
pub const WRITE_LOGICAL_BLOCKS: u64 = 1 << 20;

/// Exp#1: random writes of one chunk each at queue depth 64.
pub fn exp1(mode: Mode, chunk_bytes: u64, requests: u64, seed: u64) -> Result<Measured> {
    let config = config(mode, chunk_bytes, WRITE_LOGICAL_BLOCKS);
    random_writes(Geometry::zn540(), TimingParams::zn540(), config, requests, WRITE_QUEUE_DEPTH, seed)
}

/// Random writes of one chunk each (chunk-aligned, over `config.logical_blocks`) at
/// `queue_depth`, on fresh drives of `geometry` and `timing` that discard data.
pub fn random_writes(
    geometry: Geometry,
    timing: TimingParams,
    config: Config,
    requests: u64,
    queue_depth: u64,
    seed: u64,
) -> Result<Measured> {
    let block = u64::from(geometry.block_size_bytes);
    let chunk_bytes = config.chunk_bytes;
    let logical_blocks = config.logical_blocks;
    let mut sim = Simulator::discarding(geometry, config, seed, Some(timing))?;
    let blocks = (chunk_bytes / block).max(1);
    let mut rng = XorShift(seed | 1);
    let data = vec![0x5a; chunk_bytes as usize];
    closed_loop(&mut sim, requests, queue_depth, chunk_bytes, |_| Request::Write {
        lba: rng.below(logical_blocks / blocks) * blocks,
        data: data.clone(),
    })
}

/// Exp#2: median latency of random 4 KiB reads at queue depth 1, normal and degraded,
/// after writing `fill_blocks` blocks sequentially (one segment's worth in the paper's
/// setting; less for a quick run).
pub fn exp2(mode: Mode, fill_blocks: u64, reads: u64, seed: u64) -> Result<(Measured, Measured)> {
    const CHUNK_BYTES: u64 = 4096;
    const FILL_REQUEST_BLOCKS: u64 = 32;
    let geometry = Geometry::zn540();
    let block = u64::from(geometry.block_size_bytes);
    let fill_blocks = fill_blocks.div_ceil(FILL_REQUEST_BLOCKS) * FILL_REQUEST_BLOCKS;
    let mut sim = Simulator::new(geometry, config(mode, CHUNK_BYTES, fill_blocks), seed, Some(TimingParams::zn540()))?;
    fill_sequential(&mut sim, fill_blocks, FILL_REQUEST_BLOCKS, block)?;
    let mut rng = XorShift(seed | 1);
    let normal = closed_loop(&mut sim, reads, 1, block, |_| Request::Read { lba: rng.below(fill_blocks), blocks: 1 })?;
    const FAILED_DRIVE: usize = 0;
    sim.engine.fail_drive(FAILED_DRIVE);
    let mut rng = XorShift(seed.wrapping_mul(3) | 1);
    let degraded = closed_loop(&mut sim, reads, 1, block, |sim| loop {
        let lba = rng.below(fill_blocks);
        if sim.engine.locate(lba).is_some_and(|p| p.drive == FAILED_DRIVE) {
            break Request::Read { lba, blocks: 1 };
        }
    })?;
    Ok((normal, degraded))
}

/// Exp#3: 4 KiB random-write throughput and degraded read median for stripe group size G.
pub fn exp3(group_size: u32, requests: u64, fill_blocks: u64, reads: u64, seed: u64) -> Result<(Measured, Measured)> {
    let mode = Mode::ZapRaid { group_size };
    let writes = exp1(mode, 4096, requests, seed)?;
    let (_, degraded) = exp2(mode, fill_blocks, reads, seed)?;
    Ok((writes, degraded))
}

/// Data blocks of one full segment in the paper's setting ((3+1)-RAID-5, 4 KiB chunks,
/// ZN540 zones): what Exp#2 writes before reading.
pub fn paper_segment_blocks() -> Result<u64> {
    let layout = zapraid_engine::layout::Layout::new(&Geometry::zn540(), PAPER_LEVEL, Mode::ZoneAppendOnly, 4096)?;
    Ok(layout.data_blocks_per_segment())
}

/// Engine CPU cost: 4 KiB random writes per second through the engine on zero-latency
/// in-memory drives (instant completions), in wall-clock time on this core.
pub fn cpu_cost_iops(requests: u64, seed: u64) -> Result<f64> {
    const LOGICAL_BLOCKS: u64 = 1 << 16;
    let geometry = Geometry { zone_count: 256, ..Geometry::zn540() };
    let mut sim = Simulator::new(
        geometry,
        config(Mode::ZapRaid { group_size: DEFAULT_GROUP_SIZE }, 4096, LOGICAL_BLOCKS),
        seed,
        None,
    )?;
    let mut rng = XorShift(seed | 1);
    let data = vec![0x11; 4096];
    let started = Instant::now();
    closed_loop(&mut sim, requests, 64, 4096, |_| Request::Write {
        lba: rng.below(LOGICAL_BLOCKS),
        data: data.clone(),
    })?;
    Ok(requests as f64 / started.elapsed().as_secs_f64())
}

/// One recovery measurement.
#[derive(Clone, Copy, Debug)]
pub struct RecoveryPoint {
    pub data_bytes: u64,
    pub segments: u64,
    /// Until the array serves I/O again.
    pub recovery_s: f64,
    /// Background work after that: the segment that was open is rewritten into a new one
    /// and its zones reclaimed.
    pub reclaim_s: f64,
    /// What the measurement cost the simulator, counted.
    pub work: RecoveryWork,
}

/// What recovery and the background work after it did, counted: the simulator's cost of a
/// measurement, which should grow linearly with the data (a garbage collection that went
/// round in circles after recovery once made the larger measurements never finish).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryWork {
    /// Blocks recovery read (headers, footers, the open segment's metadata scan), and
    /// zones it scanned block by block.
    pub blocks_read: u64,
    pub zones_scanned: u64,
    /// Segments garbage collection reclaimed after recovery, and live blocks it moved.
    pub segments_reclaimed: u64,
    pub blocks_relocated: u64,
    /// Simulation steps of the background work.
    pub reclaim_steps: u64,
}

/// How the array went down before a recovery measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shutdown {
    PowerCut,
    /// Drive 0 fails together with the power cut (degraded recovery: its blocks'
    /// addresses are rebuilt from parity).
    PowerCutAndFailedDrive,
    /// `zapraid stop`: a stop footer records the open segment.
    Clean,
}

/// Zones of the recovery measurements: QEMU-sized (62 MiB), so that a few GiB make many
/// sealed segments, as a large array has.
fn recovery_zones() -> Geometry {
    const ZONE_SIZE_BLOCKS: u64 = 16384;
    const ZONE_CAPACITY_BLOCKS: u64 = 15872;
    Geometry { max_transfer_blocks: 128, ..Geometry::small(1, ZONE_SIZE_BLOCKS, ZONE_CAPACITY_BLOCKS) }
}

/// Fills an array with `sealed_segments` full segments and half of another (the open
/// one, whose metadata recovery scans block by block) of sequential writes, cuts power,
/// and measures the virtual time recovery takes, on QEMU-sized zones with ZN540 timing.
pub fn recovery_point(sealed_segments: u64, seed: u64) -> Result<RecoveryPoint> {
    recovery_point_with(sealed_segments, seed, Shutdown::PowerCut)
}

/// Like `recovery_point`, after `shutdown`.
pub fn recovery_point_with(sealed_segments: u64, seed: u64, shutdown: Shutdown) -> Result<RecoveryPoint> {
    recovery_point_on(recovery_zones(), sealed_segments, seed, shutdown)
}

/// Like `recovery_point_with`, on drives whose zones are shaped like `zones` (as many as
/// the data needs).
fn recovery_point_on(zones: Geometry, sealed_segments: u64, seed: u64, shutdown: Shutdown) -> Result<RecoveryPoint> {
    const FILL_REQUEST_BLOCKS: u64 = 32;
    let mode = Mode::ZapRaid { group_size: DEFAULT_GROUP_SIZE };
    let layout = zapraid_engine::layout::Layout::new(&zones, PAPER_LEVEL, mode, 4096)?;
    let block = u64::from(zones.block_size_bytes);
    let per_segment = layout.data_blocks_per_segment();
    let blocks = (sealed_segments * per_segment + per_segment / 2) / FILL_REQUEST_BLOCKS * FILL_REQUEST_BLOCKS;
    let segments = blocks.div_ceil(layout.data_blocks_per_segment());
    let geometry = Geometry { zone_count: layout.zones_for_capacity(blocks), ..zones };
    let config = config(mode, 4096, blocks);
    let mut sim = Simulator::new(geometry, config, seed, Some(TimingParams::zn540()))?;
    fill_sequential(&mut sim, blocks, FILL_REQUEST_BLOCKS, block)?;
    if shutdown == Shutdown::Clean {
        sim.stop();
    }
    let mut drives = sim.power_cut()?;
    if shutdown == Shutdown::PowerCutAndFailedDrive {
        drives[0].fail();
    }
    let started_ns = drives.iter().map(zapraid_zns::EmulatedDrive::now_ns).max().unwrap_or(0);
    let mut recovered = Simulator::recover_unsettled(geometry, config, drives)?;
    let recovered_ns = recovered.now_ns();
    let reclaim_steps = settle(&mut recovered)?;
    let recovery_s = (recovered_ns - started_ns) as f64 / 1e9;
    let reclaim_s = (recovered.now_ns() - recovered_ns) as f64 / 1e9;
    let (report, status) = (recovered.recovery_report, recovered.engine.status());
    let work = RecoveryWork {
        blocks_read: report.blocks_read,
        zones_scanned: report.zones_scanned,
        segments_reclaimed: status.segments_reclaimed,
        blocks_relocated: status.blocks_relocated,
        reclaim_steps,
    };
    Ok(RecoveryPoint { data_bytes: blocks * block, segments, recovery_s, reclaim_s, work })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The recovery measurement's work at zones small enough for a test, for every shutdown:
    /// sealed segments cost recovery the same reads each (headers and footers, never their
    /// data), the open segment's scan and the background work after recovery (rewriting
    /// that segment alone) are the same at every size. Counts, not times.
    #[test]
    fn recovery_measurement_work_grows_linearly_with_the_data() {
        const SEALED: [u64; 4] = [1, 2, 4, 8];
        const ZONE_SIZE_BLOCKS: u64 = 256;
        const ZONE_CAPACITY_BLOCKS: u64 = 240;
        let zones = Geometry::small(1, ZONE_SIZE_BLOCKS, ZONE_CAPACITY_BLOCKS);
        let per_segment = zapraid_engine::layout::Layout::new(
            &zones,
            PAPER_LEVEL,
            Mode::ZapRaid { group_size: DEFAULT_GROUP_SIZE },
            4096,
        )
        .unwrap()
        .data_blocks_per_segment();
        let (k, m) = PAPER_LEVEL.shape();
        let one_zone_per_drive = (k + m) as u64 * ZONE_CAPACITY_BLOCKS;
        let work = |shutdown| -> Vec<RecoveryWork> {
            SEALED.iter().map(|&sealed| recovery_point_on(zones, sealed, 1, shutdown).unwrap().work).collect()
        };
        let clean = work(Shutdown::Clean);
        let per_sealed = clean[1].blocks_read - clean[0].blocks_read;
        for (w, sealed) in clean.iter().zip(SEALED) {
            assert_eq!(w.blocks_read, clean[0].blocks_read + (sealed - 1) * per_sealed, "{sealed} sealed: {clean:?}");
            assert_eq!((w.zones_scanned, w.segments_reclaimed), (0, 0), "{sealed} sealed: {clean:?}");
        }
        for shutdown in [Shutdown::PowerCut, Shutdown::PowerCutAndFailedDrive] {
            let cut = work(shutdown);
            let least_steps = cut.iter().map(|w| w.reclaim_steps).min().unwrap_or(0);
            for ((w, c), sealed) in cut.iter().zip(&clean).zip(SEALED) {
                let what = format!("{shutdown:?}, {sealed} sealed: {cut:?}");
                // Beyond a clean stop's reads, the open segment's scan: at most its zones.
                assert!(w.blocks_read.abs_diff(c.blocks_read) <= one_zone_per_drive, "{what}");
                assert_eq!(w.zones_scanned, cut[0].zones_scanned, "{what}");
                assert_eq!(w.segments_reclaimed, 1, "{what}");
                assert!(w.blocks_relocated < per_segment, "{what}");
                assert!(w.reclaim_steps <= 2 * least_steps, "{what}");
            }
        }
    }
}
