//! Exp#7 of the ZapRAID paper (hybrid segment management, section 3.3) on emulated WD ZN540
//! drives in virtual time: a (3+1)-RAID-5 with four open segments, Ns of small chunks
//! (Cs = 8 KiB) and Nl of large chunks (Cl = 16 KiB), under random writes of 4, 8 and
//! 16 KiB and a mix of 75% 4 KiB and 25% 16 KiB, for ZapRAID (G = 256), ZoneWrite-Only and
//! ZoneAppend-Only.
//!
//! This module owns the experiment's parameters, its workloads, its cells and what the
//! paper's findings are measured as. The closed loop, the array configuration and the
//! modes compared are the parent's (`bench`); printing is the CLI's.

use zapraid_zns::{Geometry, TimingParams};

use super::{closed_loop_sized, config, paper_modes, Measured, XorShift};
use zapraid_engine::engine::{Config, Request};
use zapraid_engine::error::Result;
use zapraid_engine::hybrid::OpenSegments;
use zapraid_engine::layout::Mode;
use zapraid_engine::sim::Simulator;

/// Cs: the chunk size of small-chunk segments.
pub const SMALL_CHUNK_BYTES: u64 = 8192;
/// Cl: the chunk size of large-chunk segments.
pub const LARGE_CHUNK_BYTES: u64 = 16384;
/// Ns + Nl: segments open at once.
pub const OPEN_SEGMENTS: u32 = 4;
/// Requests in flight, as in Exp#1 (the paper's queue depth for its write experiments).
pub const QUEUE_DEPTH: u64 = 64;
/// Logical blocks the random writes spread over (4 GiB, as in Exp#1): no garbage
/// collection runs, as in the paper's write experiments.
const LOGICAL_BLOCKS: u64 = 1 << 20;

/// (Ns, Nl) of the paper's Exp#7: four open segments, from all small to all large.
pub const SPLITS: [(u32, u32); 5] = [(4, 0), (3, 1), (2, 2), (1, 3), (0, 4)];

/// ZapRAID counts as matching the best scheme of a cell when its throughput is at most
/// this fraction below the best's (the paper: "best or within a few %").
pub const WITHIN_BEST: f64 = 0.05;

/// A random-write workload: request sizes and their shares of the requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workload {
    /// What a person reads in the table ("4 KiB", "4/16 KiB").
    pub name: &'static str,
    /// (request bytes, weight): a request has this size with probability weight / sum.
    pub sizes: &'static [(u64, u64)],
}

impl Workload {
    /// Picks a request size with the workload's shares.
    fn pick(&self, rng: &mut XorShift) -> u64 {
        let total: u64 = self.sizes.iter().map(|(_, w)| w).sum();
        let mut at = rng.below(total.max(1));
        for &(bytes, weight) in self.sizes {
            if at < weight {
                return bytes;
            }
            at -= weight;
        }
        self.sizes.last().map_or(0, |s| s.0)
    }

    /// Whether every request of the workload has `bytes`.
    pub fn is_only(&self, bytes: u64) -> bool {
        self.sizes.iter().all(|(b, _)| *b == bytes)
    }
}

/// The paper's Exp#7 workloads.
pub const WORKLOADS: [Workload; 4] = [
    Workload { name: "4 KiB", sizes: &[(4096, 1)] },
    Workload { name: "8 KiB", sizes: &[(8192, 1)] },
    Workload { name: "16 KiB", sizes: &[(16384, 1)] },
    Workload { name: "4/16 KiB", sizes: &[(4096, 3), (16384, 1)] },
];

/// The open segments of one split: Ns small-chunk and Nl large-chunk segments.
pub fn open_segments((small, large): (u32, u32)) -> OpenSegments {
    OpenSegments { small, large, large_chunk_bytes: LARGE_CHUNK_BYTES }
}

/// The array of one cell: the paper's level, Cs-byte small chunks, `split` open segments.
fn hybrid_config(mode: Mode, split: (u32, u32)) -> Config {
    Config { open_segments: open_segments(split), ..config(mode, SMALL_CHUNK_BYTES, LOGICAL_BLOCKS) }
}

/// One cell: `requests` random writes of `workload` at `QUEUE_DEPTH` on an array of
/// `mode` with `split` open segments, on fresh ZN540 drives in virtual time.
pub fn exp7_cell(mode: Mode, split: (u32, u32), workload: &Workload, requests: u64, seed: u64) -> Result<Measured> {
    let geometry = Geometry::zn540();
    let block = u64::from(geometry.block_size_bytes);
    let mut sim = Simulator::discarding(geometry, hybrid_config(mode, split), seed, Some(TimingParams::zn540()))?;
    let mut rng = XorShift(seed | 1);
    let buffers: Vec<(u64, Vec<u8>)> = workload.sizes.iter().map(|&(b, _)| (b, vec![0x5a; b as usize])).collect();
    closed_loop_sized(&mut sim, requests, QUEUE_DEPTH, |_| {
        let bytes = workload.pick(&mut rng);
        let blocks = (bytes / block).max(1);
        let lba = rng.below(LOGICAL_BLOCKS / blocks) * blocks;
        let data = buffers.iter().find(|(b, _)| *b == bytes).map_or_else(Vec::new, |(_, d)| d.clone());
        (Request::Write { lba, data }, bytes)
    })
}

/// One row of the table: a workload on one split, measured for each scheme.
#[derive(Clone, Debug)]
pub struct Exp7Row {
    pub workload: Workload,
    pub small: u32,
    pub large: u32,
    /// The schemes of `paper_modes`, in its order.
    pub schemes: Vec<(&'static str, Measured)>,
}

/// The scheme names of `paper_modes`, for looking figures up.
pub const ZAPRAID: &str = "ZapRAID";
pub const ZONE_WRITE_ONLY: &str = "ZoneWrite-Only";
pub const ZONE_APPEND_ONLY: &str = "ZoneAppend-Only";

impl Exp7Row {
    /// The figures of the scheme called `name`.
    pub fn scheme(&self, name: &str) -> Option<Measured> {
        self.schemes.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
    }

    /// The scheme with the highest throughput, and it.
    pub fn best(&self) -> Option<(&'static str, Measured)> {
        self.schemes.iter().copied().max_by(|a, b| a.1.mib_per_s.total_cmp(&b.1.mib_per_s))
    }

    /// ZapRAID's throughput relative to the best scheme's: 0 when ZapRAID is the best,
    /// -0.07 when it is 7% below.
    pub fn zapraid_gap(&self) -> Option<f64> {
        let zapraid = self.scheme(ZAPRAID)?.mib_per_s;
        let (_, best) = self.best()?;
        Some(zapraid / best.mib_per_s - 1.0)
    }

    /// How much faster scheme `a` is than scheme `b` (0.3 for 30% more MiB/s).
    pub fn gain(&self, a: &str, b: &str) -> Option<f64> {
        Some(self.scheme(a)?.mib_per_s / self.scheme(b)?.mib_per_s - 1.0)
    }
}

/// Runs every cell of Exp#7 (workload by split, each scheme), `requests` requests each;
/// calls `progress` with each row as it is measured.
pub fn exp7(requests: u64, seed: u64, mut progress: impl FnMut(&Exp7Row)) -> Result<Vec<Exp7Row>> {
    let mut rows = Vec::new();
    for workload in WORKLOADS {
        for (small, large) in SPLITS {
            let mut schemes = Vec::new();
            for (name, mode) in paper_modes() {
                schemes.push((name, exp7_cell(mode, (small, large), &workload, requests, seed)?));
            }
            let row = Exp7Row { workload, small, large, schemes };
            progress(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Our figures for the paper's Exp#7 findings.
#[derive(Clone, Debug, PartialEq)]
pub struct Exp7Findings {
    /// ZoneAppend-Only over ZoneWrite-Only at 4 KiB with Ns = 1 (paper: +65.7%).
    pub append_over_write_4k_one_small: Option<f64>,
    /// ZoneWrite-Only over ZoneAppend-Only at 16 KiB with Ns = 1 (paper: +27.2%).
    pub write_over_append_16k_one_small: Option<f64>,
    /// Cells where ZapRAID is the best or within `WITHIN_BEST` of it, of `cells`.
    pub zapraid_within_best: usize,
    pub cells: usize,
}

/// The paper's figure for ZoneAppend-Only over ZoneWrite-Only at 4 KiB with Ns = 1.
pub const PAPER_APPEND_OVER_WRITE_4K: f64 = 0.657;
/// The paper's figure for ZoneWrite-Only over ZoneAppend-Only at 16 KiB with Ns = 1.
pub const PAPER_WRITE_OVER_APPEND_16K: f64 = 0.272;

/// Measures the paper's findings on `rows`.
pub fn findings(rows: &[Exp7Row]) -> Exp7Findings {
    let one_small =
        |bytes: u64| rows.iter().find(|r| r.small == 1 && r.large == OPEN_SEGMENTS - 1 && r.workload.is_only(bytes));
    let within = rows.iter().filter(|r| r.zapraid_gap().is_some_and(|g| g >= -WITHIN_BEST)).count();
    Exp7Findings {
        append_over_write_4k_one_small: one_small(4096).and_then(|r| r.gain(ZONE_APPEND_ONLY, ZONE_WRITE_ONLY)),
        write_over_append_16k_one_small: one_small(16384).and_then(|r| r.gain(ZONE_WRITE_ONLY, ZONE_APPEND_ONLY)),
        zapraid_within_best: within,
        cells: rows.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cell runs and gives sane figures, with a few requests each (no timings
    /// asserted, nor who wins).
    #[test]
    fn every_cell_runs_and_gives_sane_figures() {
        const REQUESTS: u64 = 200;
        let mut seen = 0;
        let rows = exp7(REQUESTS, 1, |_| seen += 1).unwrap();
        assert_eq!(rows.len(), WORKLOADS.len() * SPLITS.len());
        assert_eq!(seen, rows.len());
        for row in &rows {
            assert_eq!(row.small + row.large, OPEN_SEGMENTS);
            assert_eq!(row.schemes.len(), paper_modes().len());
            for (name, m) in &row.schemes {
                let what = format!("{} ({}, {}) {name}: {m:?}", row.workload.name, row.small, row.large);
                assert!(m.mib_per_s.is_finite() && m.mib_per_s > 0.0, "{what}");
                assert!(m.p50_us > 0.0 && m.p95_us >= m.p50_us, "{what}");
            }
            assert!(row.zapraid_gap().is_some_and(|g| g <= 0.0));
        }
        let f = findings(&rows);
        assert_eq!(f.cells, rows.len());
        assert!(f.zapraid_within_best <= f.cells);
        assert!(f.append_over_write_4k_one_small.is_some() && f.write_over_append_16k_one_small.is_some());
    }

    #[test]
    fn the_mix_has_its_shares() {
        const DRAWS: u64 = 40_000;
        let mut rng = XorShift(7);
        let mix = WORKLOADS[3];
        let large = (0..DRAWS).filter(|_| mix.pick(&mut rng) == 16384).count() as f64 / DRAWS as f64;
        assert!((large - 0.25).abs() < 0.01, "{large}");
        assert!(WORKLOADS[0].is_only(4096) && !mix.is_only(4096));
    }

    #[test]
    fn same_seed_same_figures() {
        let run = || exp7_cell(Mode::ZoneWriteOnly, (1, 3), &WORKLOADS[3], 300, 5).unwrap();
        let (a, b) = (run(), run());
        assert_eq!((a.mib_per_s, a.p50_us, a.p95_us), (b.mib_per_s, b.p50_us, b.p95_us));
    }
}
