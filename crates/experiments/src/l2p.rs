//! Exp#9 of the ZapRAID paper (L2P table offload, section 3.1) on emulated WD ZN540 drives
//! in virtual time: a (3+1)-RAID-5 with two open segments of small chunks and two of large
//! (Ns, Nl) = (2, 2), under 4 KiB random, 64 KiB random, 64 KiB Zipf(0.99) and 64 KiB
//! sequential writes, with the L2P memory budget at 25, 50, 75 and 100% of the table.
//! Mapping blocks are read and written through the drives' timing model like any block,
//! so throughput falls as the budget shrinks; the paper's drop at half the table is
//! printed beside ours.
//!
//! Every cell first writes `warmup` requests of its workload (pages are made, evicted and
//! written back), then measures `requests` more. The drives keep data (mapping blocks are
//! read back), so the logical space is kept small enough for memory.

use zapraid_zns::{Geometry, TimingParams};

use super::hybrid::{open_segments, LARGE_CHUNK_BYTES, SMALL_CHUNK_BYTES};
use super::{closed_loop, config, Measured, XorShift};
use zapraid_engine::engine::{Config, L2pConfig, Request};
use zapraid_engine::error::Result;
use zapraid_engine::layout::{Mode, DEFAULT_GROUP_SIZE};
use zapraid_engine::sim::Simulator;

/// Requests in flight, as in the paper's write experiments.
pub const QUEUE_DEPTH: u64 = 64;
/// (Ns, Nl): two open segments of each chunk size.
pub const SPLIT: (u32, u32) = (2, 2);
/// Budgets measured, in percent of the whole table.
pub const BUDGET_PERCENTS: [u64; 4] = [25, 50, 75, 100];
/// Skew of the Zipf workload.
const ZIPF_EXPONENT: f64 = 0.99;
const BLOCK_BYTES: u64 = 4096;
const LARGE_REQUEST_BYTES: u64 = 64 * 1024;
// 64 KiB requests fill whole large chunks.
const _: () = assert!(LARGE_REQUEST_BYTES >= LARGE_CHUNK_BYTES);

/// The paper's throughput change at half the table, per workload (Exp#9).
pub const PAPER_DROP_AT_HALF_PERCENT: [f64; 4] = [-59.2, -16.8, -4.0, -3.6];

/// An Exp#9 workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Random4K,
    Random64K,
    Zipf64K,
    Sequential64K,
}

impl Workload {
    pub const ALL: [Workload; 4] =
        [Workload::Random4K, Workload::Random64K, Workload::Zipf64K, Workload::Sequential64K];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Random4K => "4 KiB random",
            Workload::Random64K => "64 KiB random",
            Workload::Zipf64K => "64 KiB Zipf 0.99",
            Workload::Sequential64K => "64 KiB sequential",
        }
    }

    fn request_bytes(self) -> u64 {
        match self {
            Workload::Random4K => BLOCK_BYTES,
            _ => LARGE_REQUEST_BYTES,
        }
    }
}

/// Zipf-distributed picks of `n` items (item 0 the most popular), by inverse CDF.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: u64, exponent: f64) -> Zipf {
        let mut sum = 0.0;
        let mut cdf: Vec<f64> = (1..=n)
            .map(|i| {
                sum += 1.0 / (i as f64).powf(exponent);
                sum
            })
            .collect();
        for c in &mut cdf {
            *c /= sum;
        }
        Zipf { cdf }
    }

    fn pick(&self, rng: &mut XorShift) -> u64 {
        const RESOLUTION: u64 = 1 << 30;
        let u = rng.below(RESOLUTION) as f64 / RESOLUTION as f64;
        self.cdf.partition_point(|c| *c < u).min(self.cdf.len() - 1) as u64
    }
}

/// One cell: a workload at a budget.
#[derive(Clone, Copy, Debug)]
pub struct Exp9Cell {
    pub workload: Workload,
    pub budget_percent: u64,
    pub measured: Measured,
    /// Page lookups that found the page cached, and mapping blocks read and written,
    /// during the measured requests.
    pub hit_rate_percent: f64,
    pub mapping_reads: u64,
    pub mapping_writes: u64,
}

fn exp9_config(logical_blocks: u64, budget_bytes: Option<u64>) -> Config {
    Config {
        open_segments: open_segments(SPLIT),
        l2p: L2pConfig { budget_bytes, page_entries: None, checkpoint: false },
        ..config(Mode::ZapRaid { group_size: DEFAULT_GROUP_SIZE }, SMALL_CHUNK_BYTES, logical_blocks)
    }
}

/// Bytes of the whole L2P table of `logical_blocks` (its pages, a block each).
pub fn table_bytes(logical_blocks: u64) -> u64 {
    let per_page = zapraid_engine::format::mapping_entries_per_block(BLOCK_BYTES as u32) as u64;
    logical_blocks.div_ceil(per_page) * BLOCK_BYTES
}

/// Measures one cell over `logical_blocks`.
pub fn exp9_cell(
    workload: Workload,
    budget_percent: u64,
    logical_blocks: u64,
    warmup: u64,
    requests: u64,
    seed: u64,
) -> Result<Exp9Cell> {
    let budget = (budget_percent < 100).then(|| table_bytes(logical_blocks) * budget_percent / 100);
    let geometry = Geometry::zn540();
    let mut sim = Simulator::new(geometry, exp9_config(logical_blocks, budget), seed, Some(TimingParams::zn540()))?;
    let request_blocks = workload.request_bytes() / BLOCK_BYTES;
    let slots = logical_blocks / request_blocks;
    let zipf = (workload == Workload::Zipf64K).then(|| Zipf::new(slots, ZIPF_EXPONENT));
    let mut rng = XorShift(seed | 1);
    let mut next_sequential = 0u64;
    let data = vec![0x9e; workload.request_bytes() as usize];
    let mut next = |_: &mut Simulator| {
        let slot = match (workload, &zipf) {
            (Workload::Sequential64K, _) => {
                let slot = next_sequential % slots;
                next_sequential += 1;
                slot
            }
            // Popular items scattered over the space, not packed at its start.
            (_, Some(z)) => z.pick(&mut rng).wrapping_mul(0x9e37_79b9) % slots,
            _ => rng.below(slots),
        };
        Request::Write { lba: slot * request_blocks, data: data.clone() }
    };
    closed_loop(&mut sim, warmup, QUEUE_DEPTH, workload.request_bytes(), &mut next)?;
    let before = sim.engine.status().l2p;
    let measured = closed_loop(&mut sim, requests, QUEUE_DEPTH, workload.request_bytes(), &mut next)?;
    let after = sim.engine.status().l2p;
    let lookups = after.lookups - before.lookups;
    let hits = after.hits - before.hits;
    Ok(Exp9Cell {
        workload,
        budget_percent,
        measured,
        hit_rate_percent: if lookups == 0 { 100.0 } else { hits as f64 * 100.0 / lookups as f64 },
        mapping_reads: after.mapping_reads - before.mapping_reads,
        mapping_writes: after.mapping_writes - before.mapping_writes,
    })
}

/// Every cell of Exp#9, workload by workload; `progress` sees each as it is measured.
pub fn exp9(
    logical_blocks: u64,
    warmup: u64,
    requests: u64,
    seed: u64,
    mut progress: impl FnMut(&Exp9Cell),
) -> Result<Vec<Exp9Cell>> {
    let mut cells = Vec::new();
    for workload in Workload::ALL {
        for percent in BUDGET_PERCENTS {
            let cell = exp9_cell(workload, percent, logical_blocks, warmup, requests, seed)?;
            progress(&cell);
            cells.push(cell);
        }
    }
    Ok(cells)
}

/// A cell's throughput change against the same workload with the whole table, in percent.
pub fn change_percent(cells: &[Exp9Cell], cell: &Exp9Cell) -> Option<f64> {
    let full = cells.iter().find(|c| c.workload == cell.workload && c.budget_percent == 100)?;
    Some((cell.measured.mib_per_s / full.measured.mib_per_s - 1.0) * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_prefers_the_first_items() {
        let z = Zipf::new(1000, ZIPF_EXPONENT);
        let mut rng = XorShift(7);
        let picks: Vec<u64> = (0..10_000).map(|_| z.pick(&mut rng)).collect();
        let head = picks.iter().filter(|p| **p < 10).count();
        assert!(head > 2_000, "{head} of 10,000 picks in the first 1% of items");
        assert!(picks.iter().all(|p| *p < 1000));
    }

    /// A small run: a tighter budget reads and writes mapping blocks, the whole table none.
    #[test]
    fn a_smaller_budget_costs_mapping_traffic() {
        const LOGICAL_BLOCKS: u64 = 1 << 15;
        let full = exp9_cell(Workload::Random4K, 100, LOGICAL_BLOCKS, 2_000, 1_000, 3).unwrap();
        let quarter = exp9_cell(Workload::Random4K, 25, LOGICAL_BLOCKS, 2_000, 1_000, 3).unwrap();
        assert_eq!((full.mapping_reads, full.mapping_writes), (0, 0), "{full:?}");
        assert!(quarter.mapping_reads > 0 && quarter.mapping_writes > 0, "{quarter:?}");
        assert!(quarter.hit_rate_percent < full.hit_rate_percent, "{quarter:?} vs {full:?}");
    }
}
