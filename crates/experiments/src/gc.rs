//! Exp#8 of the ZapRAID paper (garbage collection) in virtual time: a (3+1)-RAID-5 of
//! emulated drives with ZN540 timing, written several times over by one workload (4 KiB
//! random, 64 KiB random, 64 KiB Zipf 0.99, 64 KiB sequential), for reserved space of 20%
//! to 100% of the logical size; throughput and write amplification.
//!
//! The paper writes 1 TiB into 200 GiB of logical space; here the logical space is small
//! (`GcScale`) and the zones small too (2 MiB), so that the array still has many segments
//! for garbage collection to choose from. The engine keeps its own reserve of a few
//! segments (`capacity`), so the smallest reserves come out a little larger than asked:
//! each point reports the reserve it got.
//!
//! This module owns the workloads (with their Zipf sampler), the array's sizing from the
//! reserved space, and one point's measurement.

use zapraid_zns::{Geometry, TimingParams};

use super::{closed_loop, config, XorShift, PAPER_LEVEL};
use zapraid_engine::engine::Request;
use zapraid_engine::error::Result;
use zapraid_engine::layout::{Layout, Mode, DEFAULT_GROUP_SIZE};
use zapraid_engine::sim::Simulator;

/// Reserved space, in percent of the logical size (the paper's 20% to 100%).
pub const RESERVED_PERCENTS: [u64; 5] = [20, 40, 60, 80, 100];

/// Chunk size of the array.
pub const CHUNK_BYTES: u64 = 4096;
/// Requests in flight.
pub const QUEUE_DEPTH: u64 = 64;
/// Zone capacity (and size) of the emulated drives, in 4 KiB blocks: 2 MiB.
const ZONE_BLOCKS: u64 = 512;
/// The Zipf exponent of the skewed workload (the paper's 0.99).
pub const ZIPF_EXPONENT: f64 = 0.99;
const PERCENT: u64 = 100;

/// How addresses are chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    Random,
    Zipf,
    Sequential,
}

/// One workload of Exp#8.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GcWorkload {
    pub name: &'static str,
    pub request_bytes: u64,
    pub pattern: Pattern,
}

/// The paper's Exp#8 workloads.
pub const WORKLOADS: [GcWorkload; 4] = [
    GcWorkload { name: "4 KiB random", request_bytes: 4096, pattern: Pattern::Random },
    GcWorkload { name: "64 KiB random", request_bytes: 65536, pattern: Pattern::Random },
    GcWorkload { name: "64 KiB Zipf 0.99", request_bytes: 65536, pattern: Pattern::Zipf },
    GcWorkload { name: "64 KiB sequential", request_bytes: 65536, pattern: Pattern::Sequential },
];

/// How big a run is: the logical space and how many times it is written over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GcScale {
    pub logical_bytes: u64,
    /// Bytes written = logical bytes times this (the paper: 1 TiB into 200 GiB, 5).
    pub written_times: u64,
}

/// The full run: 512 MiB written five times over, as the paper's ratio.
pub const FULL_SCALE: GcScale = GcScale { logical_bytes: 512 << 20, written_times: 5 };
/// The quick run: 128 MiB written twice over.
pub const QUICK_SCALE: GcScale = GcScale { logical_bytes: 128 << 20, written_times: 2 };

/// One measured point.
#[derive(Clone, Copy, Debug)]
pub struct GcPoint {
    pub reserved_percent: u64,
    /// The reserve the array got: its zones' data space over the logical space, minus one.
    pub actual_reserved_percent: f64,
    pub mib_per_s: f64,
    pub p95_us: f64,
    /// (user blocks written + blocks relocated) / user blocks written (parity not counted).
    pub write_amplification: f64,
    pub segments_reclaimed: u64,
}

/// Addresses drawn from a Zipf distribution over `items` items, the popular ones spread
/// over the space (rank r is item r * stride mod items, stride coprime to items).
struct Zipf {
    cumulative: Vec<f64>,
    stride: u64,
}

impl Zipf {
    fn new(items: u64, exponent: f64) -> Self {
        let mut total = 0.0;
        let cumulative = (1..=items)
            .map(|rank| {
                total += 1.0 / (rank as f64).powf(exponent);
                total
            })
            .collect();
        // About items / golden ratio, moved up to the first number coprime to items.
        const GOLDEN_RATIO: f64 = 1.618_033_988_749_895;
        let mut stride = ((items as f64 / GOLDEN_RATIO) as u64).max(1);
        while gcd(stride, items) != 1 {
            stride += 1;
        }
        Zipf { cumulative, stride }
    }

    fn sample(&self, rng: &mut XorShift) -> u64 {
        const RESOLUTION: u64 = 1 << 53;
        let total = self.cumulative.last().copied().unwrap_or(0.0);
        let u = rng.below(RESOLUTION) as f64 / RESOLUTION as f64 * total;
        let rank = self.cumulative.partition_point(|&c| c <= u) as u64;
        let items = self.cumulative.len() as u64;
        rank.min(items.saturating_sub(1)) * self.stride % items.max(1)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Measures `workload` on an array with `reserved_percent` reserved space at `scale`.
pub fn gc_point(workload: GcWorkload, reserved_percent: u64, scale: GcScale, seed: u64) -> Result<GcPoint> {
    let zones = Geometry::small(1, ZONE_BLOCKS, ZONE_BLOCKS);
    let block = u64::from(zones.block_size_bytes);
    let mode = Mode::ZapRaid { group_size: DEFAULT_GROUP_SIZE };
    let layout = Layout::new(&zones, PAPER_LEVEL, mode, CHUNK_BYTES)?;
    let logical_blocks = scale.logical_bytes / block;
    let per_segment = layout.data_blocks_per_segment();
    let wanted_blocks = logical_blocks * (PERCENT + reserved_percent) / PERCENT;
    let zone_count = layout
        .zones_for_capacity(logical_blocks)
        .max(u32::try_from(wanted_blocks.div_ceil(per_segment)).unwrap_or(u32::MAX));
    let geometry = Geometry { zone_count, ..zones };
    let mut sim =
        Simulator::new(geometry, config(mode, CHUNK_BYTES, logical_blocks), seed, Some(TimingParams::zn540()))?;
    let request_blocks = workload.request_bytes / block;
    let slots = logical_blocks / request_blocks;
    let requests = scale.logical_bytes * scale.written_times / workload.request_bytes;
    let zipf = (workload.pattern == Pattern::Zipf).then(|| Zipf::new(slots, ZIPF_EXPONENT));
    let mut rng = XorShift(seed | 1);
    let mut next_slot = 0;
    let data = vec![0x6b; workload.request_bytes as usize];
    let measured = closed_loop(&mut sim, requests, QUEUE_DEPTH, workload.request_bytes, |_| {
        let slot = match (&zipf, workload.pattern) {
            (Some(z), _) => z.sample(&mut rng),
            (None, Pattern::Sequential) => {
                next_slot = (next_slot + 1) % slots;
                next_slot
            }
            (None, _) => rng.below(slots),
        };
        Request::Write { lba: slot * request_blocks, data: data.clone() }
    })?;
    let status = sim.engine.status();
    let user_blocks = requests * request_blocks;
    Ok(GcPoint {
        reserved_percent,
        actual_reserved_percent: (u64::from(zone_count) * per_segment) as f64 / logical_blocks as f64 * PERCENT as f64
            - PERCENT as f64,
        mib_per_s: measured.mib_per_s,
        p95_us: measured.p95_us,
        write_amplification: (user_blocks + status.blocks_relocated) as f64 / user_blocks as f64,
        segments_reclaimed: status.segments_reclaimed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_favours_few_items_and_reaches_all_ranks() {
        const ITEMS: u64 = 1000;
        const DRAWS: u64 = 20_000;
        let z = Zipf::new(ITEMS, ZIPF_EXPONENT);
        let mut rng = XorShift(9);
        let mut counts = vec![0u64; ITEMS as usize];
        for _ in 0..DRAWS {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        let most = *counts.iter().max().unwrap();
        // Rank 1 of 1,000 at exponent 0.99 takes about 13% of the draws.
        assert!(most > DRAWS / 10, "{most}");
        assert!(counts.iter().filter(|&&c| c > 0).count() > (ITEMS / 2) as usize);
    }

    /// A tiny run overwrites its space: garbage collection runs, more reserve means less
    /// write amplification for random writes, and sequential writes move (almost) nothing.
    #[test]
    fn more_reserve_less_amplification() {
        const SCALE: GcScale = GcScale { logical_bytes: 24 << 20, written_times: 3 };
        let tight = gc_point(WORKLOADS[1], 20, SCALE, 1).unwrap();
        let roomy = gc_point(WORKLOADS[1], 100, SCALE, 1).unwrap();
        assert!(tight.segments_reclaimed > 0, "{tight:?}");
        assert!(tight.write_amplification >= roomy.write_amplification, "{tight:?} {roomy:?}");
        let seq = gc_point(WORKLOADS[3], 20, SCALE, 1).unwrap();
        assert!(seq.write_amplification < tight.write_amplification, "{seq:?} {tight:?}");
    }
}
