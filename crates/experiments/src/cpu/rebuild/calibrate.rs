//! The simulator's costs of a drive rebuild's completions
//! (`CpuCosts::rebuild_read_completion`, `rebuild_write_completion`), each a fixed part per
//! command and a part per block, solved from rebuilds measured by `rebuild_cpu`.
//!
//! Each completion of the rebuild's is timed by its kind (`RebuildCpuFigure::read_ns`,
//! `write_ns`: what the engine does for it, the reconstruction a read's completion sets off
//! and the next commands included), so a kind's cost is solved from its own time,
//! T = F C + P B + S N over its commands C, their blocks B and the chunk positions N the rebuild
//! went through (each a stripe found, reconstructed, its metadata and footer entries made,
//! joined into a write: the same work for a chunk of 4 KiB as of 16 KiB, and counted by
//! the chunks the writes carry). Blocks read and blocks written always move together (k
//! or k + m - 1 read per one written), so splitting the time by completion, not by solving
//! over stripe widths, is what tells a read's cost from a write's. Three rebuilds of the
//! same array separate the parts: 4 KiB chunks on drives taking the ZN540's transfer (32
//! blocks per command, so that consecutive chunks go as one read or write) and one chunk
//! per command, and 16 KiB chunks on the ZN540's transfer (four times fewer positions per
//! block). The simulator charges the writes' per-chunk part with the write completion
//! carrying the chunks (`CpuCosts::rebuild_chunk_ns`) and the reads' with each job's
//! result (`CpuCosts::rebuild_job_result_ns`): taking a position's job's result is what the
//! read completion that brings its last source does per position. XOR parity (RAID-5, 4+1) and Reed-Solomon (RAID-6, 4+2:
//! its reconstruction costs more per stripe and per block, and its rebuilt blocks'
//! checksums are computed, not derived from the sources') are solved apart. Each run's
//! time is the median of `reps`. Other rebuilds (another width, 16 KiB chunks a chunk per
//! command, a declustered array into spare space) are not used to solve: what the costs
//! charge for them is printed against what they measured. The rebuild's zone commands
//! (a reset and a finish per segment) are charged what they took in the first run, per
//! command. A part solved below zero is charged as zero and said so.
//!
//! The rebuild's jobs (`RebuildJob`: a chunk position's sources checked block by block,
//! its chunk rebuilt, its metadata made) are timed apart from the engine's completions,
//! and their cost (`CpuCosts::rebuild_job`), a fixed part per job and a part per block of
//! its sources, is solved from the first and the third run (4 and 16 KiB chunks: four
//! times the blocks per job; the second run's jobs are the first's).

use std::fmt;

use super::{rebuild_cpu, RebuildCpuFigure, RebuildShape};
use crate::cpu::calibrate::{ns, solve, Solved};
use zapraid_engine::cpu_cost::{Cost, CpuCosts};
use zapraid_engine::error::Result;
use zapraid_engine::layout::RaidLevel;

const SOLVE_CHUNK_BYTES: u64 = 4096;
/// A drive command of one 4 KiB chunk.
const ONE_CHUNK_TRANSFER_BLOCKS: u32 = 1;
/// The larger chunks: `zapraid bench declustered`'s, and Exp#5's largest.
const LARGE_CHUNK_BYTES: u64 = 16384;
const BLOCK_BYTES: u64 = 4096;
/// Drives of the declustered checks: `zapraid bench declustered`'s row the issue checks.
const DECLUSTERED_DRIVES: u32 = 12;

/// Which parity the costs are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parity {
    /// One XOR parity chunk (RAID-5): the simulator's costs of every level but RAID-6's.
    Xor,
    /// Reed-Solomon, two parity chunks (RAID-6, k + m with m >= 2).
    ReedSolomon,
}

impl Parity {
    /// The level the costs are solved from, and another width, checked.
    fn levels(self) -> (RaidLevel, RaidLevel) {
        match self {
            Parity::Xor => (RaidLevel::Raid5 { drives: 5 }, RaidLevel::Raid5 { drives: 4 }),
            Parity::ReedSolomon => (RaidLevel::Raid6 { drives: 6 }, RaidLevel::Raid6 { drives: 10 }),
        }
    }

    /// The rebuilds only predicted, as a check.
    fn check_shapes(self) -> Vec<RebuildShape> {
        let (solved, other) = self.levels();
        let large = RebuildShape::onto_new_drive(solved, width(solved), LARGE_CHUNK_BYTES);
        vec![
            RebuildShape::onto_new_drive(other, width(other), SOLVE_CHUNK_BYTES),
            RebuildShape { transfer_blocks: (LARGE_CHUNK_BYTES / BLOCK_BYTES) as u32, ..large },
            RebuildShape::onto_new_drive(other, width(other), LARGE_CHUNK_BYTES),
            RebuildShape::into_spares(solved, DECLUSTERED_DRIVES, LARGE_CHUNK_BYTES),
            RebuildShape::onto_new_drive(solved, DECLUSTERED_DRIVES, LARGE_CHUNK_BYTES),
        ]
    }

    /// The rebuilds the costs are solved from (module doc).
    fn solve_shapes(self) -> [RebuildShape; 3] {
        let level = self.level();
        let small = RebuildShape::onto_new_drive(level, width(level), SOLVE_CHUNK_BYTES);
        [
            small,
            RebuildShape { transfer_blocks: ONE_CHUNK_TRANSFER_BLOCKS, ..small },
            RebuildShape::onto_new_drive(level, width(level), LARGE_CHUNK_BYTES),
        ]
    }

    /// The level whose simulator costs these are (`CpuCosts::calibrated`).
    pub fn level(self) -> RaidLevel {
        self.levels().0
    }
}

/// Drives of a classic array of `level`: its stripe's width.
fn width(level: RaidLevel) -> u32 {
    let (k, m) = level.shape();
    (k + m) as u32
}

impl fmt::Display for Parity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Parity::Xor => write!(f, "XOR parity (RAID-5)"),
            Parity::ReedSolomon => write!(f, "Reed-Solomon parity (RAID-6)"),
        }
    }
}

/// The rebuild costs of one parity and the runs they came from.
#[derive(Clone, Debug)]
pub struct RebuildCalibration {
    pub parity: Parity,
    /// The runs solved from (the ZN540's transfer, then a chunk per command), and the
    /// checks, each its median run.
    pub runs: Vec<RebuildCpuFigure>,
    pub checks: Vec<RebuildCpuFigure>,
    /// A rebuild read completion and a write completion: fixed per command, per block;
    /// and per chunk position, the reads' and the writes' parts.
    pub read: Solved,
    pub write: Solved,
    pub read_chunk_ns: f64,
    pub write_chunk_ns: f64,
    /// A rebuild's zone command (reset or finish) completion, as the first run measured
    /// it: its time over its count.
    pub zone_command_ns: f64,
    /// A rebuild job: fixed per job, per block of its sources.
    pub job: Solved,
}

/// The median of `reps` rebuilds of `shape` (by the engine's time).
pub fn median_rebuild(
    shape: RebuildShape,
    failed_drive_segments: u64,
    reps: usize,
    allocations: &dyn Fn() -> Option<u64>,
) -> Result<RebuildCpuFigure> {
    let mut runs =
        (0..reps.max(1)).map(|_| rebuild_cpu(shape, failed_drive_segments, allocations)).collect::<Result<Vec<_>>>()?;
    runs.sort_by(|a, b| a.engine_ns.total_cmp(&b.engine_ns));
    Ok(runs[runs.len() / 2])
}

/// Solves the rebuild costs of `parity` from rebuilds of `failed_drive_segments` segments
/// on the failed drive (at least three times what the rebuild writes at once), each shape
/// run `reps` times, counting heap allocations with `allocations` if it can.
pub fn calibrate_rebuild(
    parity: Parity,
    failed_drive_segments: u64,
    reps: usize,
    allocations: &dyn Fn() -> Option<u64>,
) -> Result<RebuildCalibration> {
    let runs = parity
        .solve_shapes()
        .into_iter()
        .map(|shape| median_rebuild(shape, failed_drive_segments, reps, allocations))
        .collect::<Result<Vec<_>>>()?;
    let (read, read_chunk_ns, write, write_chunk_ns) = solve_kinds(&runs)?;
    let checks = parity
        .check_shapes()
        .into_iter()
        .map(|shape| median_rebuild(shape, failed_drive_segments, reps, allocations))
        .collect::<Result<Vec<_>>>()?;
    let zone_command_ns = runs[0].zone_ns / runs[0].zone_commands.max(1) as f64;
    let job = solve_jobs(&runs)?;
    Ok(RebuildCalibration { parity, runs, checks, read, write, read_chunk_ns, write_chunk_ns, zone_command_ns, job })
}

/// A job's parts from the jobs' time in the first and the third run (module doc): per
/// block of their sources, T / B = F (J / B) + P.
fn solve_jobs(runs: &[RebuildCpuFigure]) -> Result<Solved> {
    let row = |f: &RebuildCpuFigure| {
        let blocks = f.job_blocks.max(1) as f64;
        vec![f.jobs as f64 / blocks, 1.0, f.job_ns / blocks]
    };
    let [fixed_ns, per_block_ns] = solve(vec![row(&runs[0]), row(&runs[2])], "rebuild job")?;
    Ok(Solved { fixed_ns, per_block_ns })
}

/// Each kind's parts from its own completions' time in three runs: a read's and a
/// write's fixed part and part per block, and each one's part per chunk position.
fn solve_kinds(runs: &[RebuildCpuFigure]) -> Result<(Solved, f64, Solved, f64)> {
    // Per block, so that the runs weigh alike: T / B = F (C / B) + P + S (N / B).
    let solve_kind = |what: &str, time: fn(&RebuildCpuFigure) -> (f64, u64, u64)| -> Result<(Solved, f64)> {
        let rows = runs
            .iter()
            .map(|f| {
                let (ns, commands, blocks) = time(f);
                let blocks = blocks.max(1) as f64;
                vec![commands as f64 / blocks, 1.0, f.write_chunks as f64 / blocks, ns / blocks]
            })
            .collect();
        let [fixed_ns, per_block_ns, chunk_ns] = solve(rows, what)?;
        Ok((Solved { fixed_ns, per_block_ns }, chunk_ns))
    };
    let (read, read_chunk_ns) = solve_kind("rebuild read", |f| (f.read_ns, f.read_commands, f.read_blocks))?;
    let (write, write_chunk_ns) = solve_kind("rebuild write", |f| (f.write_ns, f.write_commands, f.write_blocks))?;
    Ok((read, read_chunk_ns, write, write_chunk_ns))
}

impl RebuildCalibration {
    /// The costs solved, as charged (a part below zero as zero), with the rest of `base`
    /// (the frontend's, `calibrate`).
    pub fn with(&self, base: CpuCosts) -> CpuCosts {
        let cost = |s: &Solved| Cost::new(ns(s.fixed_ns), ns(s.per_block_ns));
        CpuCosts {
            rebuild_read_completion: cost(&self.read),
            rebuild_write_completion: cost(&self.write),
            rebuild_chunk_ns: ns(self.write_chunk_ns),
            rebuild_zone_completion_ns: ns(self.zone_command_ns),
            rebuild_job: cost(&self.job),
            // The reads' part per chunk position is the taking of each position's job's
            // result (the completion that brings a stripe's last source does it).
            rebuild_job_result_ns: ns(self.read_chunk_ns),
            ..base
        }
    }

    /// The parts that came out negative, each as a sentence (empty when none did).
    pub fn noise(&self) -> Vec<String> {
        let parts = [
            ("a rebuild read's fixed part", self.read.fixed_ns),
            ("a rebuild read's part per block", self.read.per_block_ns),
            ("a rebuild write's fixed part", self.write.fixed_ns),
            ("a rebuild write's part per block", self.write.per_block_ns),
            ("a rebuild read's part per chunk position", self.read_chunk_ns),
            ("a rebuild write's part per chunk position", self.write_chunk_ns),
            ("a rebuild job's fixed part", self.job.fixed_ns),
            ("a rebuild job's part per block", self.job.per_block_ns),
        ];
        parts
            .iter()
            .filter(|(_, x)| *x < 0.0)
            .map(|(name, x)| format!("{name} came out at {x:.0} ns, below zero: charged as 0 (noise)"))
            .collect()
    }
}

impl fmt::Display for RebuildCalibration {
    /// The solved costs, the sanity lines and the checks (the runs: `RebuildCpuFigure`'s).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let costs = self.with(CpuCosts::default());
        writeln!(
            f,
            "{}: rebuild read completion: {}; rebuild write completion: {} + {} ns per chunk carried; a job's result \
             taken {} ns; rebuild zone command completion: {} ns; rebuild job: {}",
            self.parity,
            costs.rebuild_read_completion,
            costs.rebuild_write_completion,
            costs.rebuild_chunk_ns,
            costs.rebuild_job_result_ns,
            costs.rebuild_zone_completion_ns,
            costs.rebuild_job
        )?;
        for line in self.noise() {
            writeln!(f, "  sanity: {line}")?;
        }
        for run in &self.checks {
            let (measured, charged) = (run.ns_per_block_read(), run.charged_ns(&costs) / run.read_blocks.max(1) as f64);
            let jobs = run.job_ns / run.total_ns().max(f64::MIN_POSITIVE) * 100.0;
            writeln!(
                f,
                "  check, {} (not used to solve): the costs charge {charged:.0} ns per block read, measured \
                 {measured:.0} ({:+.0}%; the jobs {jobs:.0}% of it)",
                run.shape,
                (charged / measured - 1.0) * 100.0
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs made up from known parts give those parts back.
    #[test]
    fn solves_each_kinds_parts_from_its_own_time() {
        let (read, read_chunk) = (Solved { fixed_ns: 500.0, per_block_ns: 300.0 }, 100.0);
        let (write, write_chunk) = (Solved { fixed_ns: 400.0, per_block_ns: 20.0 }, 150.0);
        let shape = RebuildShape::onto_new_drive(RaidLevel::Raid5 { drives: 5 }, 5, SOLVE_CHUNK_BYTES);
        // (read commands, read blocks, write commands, write blocks, chunks written)
        let counts =
            [(800, 24_000, 240, 6_000, 6_000), (24_000, 24_000, 6_000, 6_000, 6_000), (800, 24_000, 240, 6_000, 1_500)];
        let runs: Vec<RebuildCpuFigure> = counts
            .iter()
            .map(|&(read_commands, read_blocks, write_commands, write_blocks, write_chunks)| {
                let time = |s: &Solved, chunk: f64, commands: u64, blocks: u64| {
                    s.fixed_ns * commands as f64 + s.per_block_ns * blocks as f64 + chunk * write_chunks as f64
                };
                let read_ns = time(&read, read_chunk, read_commands, read_blocks);
                let write_ns = time(&write, write_chunk, write_commands, write_blocks);
                RebuildCpuFigure {
                    shape,
                    segments: 1,
                    engine_ns: read_ns + write_ns,
                    read_commands,
                    read_blocks,
                    write_commands,
                    write_blocks,
                    write_chunks,
                    zone_commands: 0,
                    read_ns,
                    write_ns,
                    zone_ns: 0.0,
                    jobs: 0,
                    job_blocks: 0,
                    job_ns: 0.0,
                    allocations: None,
                }
            })
            .collect();
        let (r, rc, w, wc) = solve_kinds(&runs).unwrap();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(close(r.fixed_ns, read.fixed_ns) && close(r.per_block_ns, read.per_block_ns), "{r:?}");
        assert!(close(w.fixed_ns, write.fixed_ns) && close(w.per_block_ns, write.per_block_ns), "{w:?}");
        assert!(close(rc, read_chunk) && close(wc, write_chunk), "{rc} {wc}");
    }
}
