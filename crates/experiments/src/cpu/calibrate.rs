//! Each of the engine's costs as a fixed part per event and a part per block
//! (`zapraid_engine::cpu_cost`), solved from runs of different request and chunk sizes.
//!
//! A run gives, per request, the engine's `submit` time s and the rest of its time r
//! (completion handling and the request's answer), beside the completions' commands c and
//! blocks b. The model: s = F + P x blocks per request; r = A + Fc x c + Pc x b, where A
//! is the request's answer (responses are per request, whatever the commands). Writes run
//! three shapes: 4 KiB requests on 4 KiB chunks (the base), 64 KiB requests on 4 KiB
//! chunks (more blocks per request, one block per command) and 4 KiB requests on 16 KiB
//! chunks (four blocks per command); three equations give A, Fc and Pc, two give F and P.
//! A fourth shape (64 KiB requests on 16 KiB chunks) is not used to solve: the model's
//! prediction of it is printed against what it measured. Reads run the base and 64 KiB
//! requests; the engine reads one block per command (`engine::read`), so a read
//! completion's fixed part cannot be told from its part per block: it is charged per block
//! (the safe side for rebuild and scrub reads of whole chunks, which bench cpu does not
//! run). A part solved below zero is noise: it is charged as zero and said so.

//! Each of the engine's costs as a fixed part per event and a part per block
//! (`zapraid_engine::cpu_cost`), solved from runs of different request and chunk sizes.
//!
//! Writes: the engine's time per request T (its `submit` and the rest) is modelled as
//! F + Fc x c + P x B, with c the drive commands and B the blocks they carry per request:
//! a fixed part per request (F), one per command (Fc: sealing a chunk, its completion) and
//! one per block (P: copy, checksums, parity). Three shapes solve it: 4 KiB requests on 4
//! KiB and on 16 KiB chunks (one and four blocks per command), 16 KiB requests on 16 KiB
//! chunks (more blocks per request); two more (16 KiB requests on 4 KiB chunks, 64 KiB on 16
//! KiB) are not used to solve: the model's prediction of them is printed against what they
//! measured. A write's blocks and their parity always move together (B = b (k + m) / k),
//! so the per-block part cannot be split between the request and its completions; it is
//! charged with the request, where the engine does that work (at submission and sealing),
//! so that a completion costs only its fixed part (a Zone Write waiting for the previous
//! one's completion waits for that alone). Garbage collection's and rebuild's writes,
//! which are no requests, are thus charged per command only.
//!
//! Reads: 4 KiB and 16 KiB requests; the engine reads one block per command
//! (`engine::read`), so a read's completions are its blocks: its `submit` time gives the
//! request's fixed part and part per block, the rest (completions and the answer) an
//! answer per request, added to the request's fixed part, and a cost per completion,
//! charged per block. A part solved below zero is charged as zero and said so: noise, or a
//! cost not linear in the blocks (a one-block read is answered with the drive's buffer, a
//! larger one copies its blocks; a one-block write into one-block chunks gives its buffer
//! to the chunk, others copy).

use std::fmt;

use zapraid_engine::cpu_cost::{Cost, CpuCosts};
use zapraid_engine::error::{Error, Result};
use zapraid_engine::layout::RaidLevel;

use super::{reads_of, writes_of, CpuFigure, Shape, BLOCK_BYTES};

const LARGE_CHUNK_BYTES: u64 = 4 * BLOCK_BYTES;
/// The shapes the write costs are solved from, after the base (4 KiB on 4 KiB).
const WRITE_SHAPES: [Shape; 2] = [
    Shape { request_blocks: 1, chunk_bytes: LARGE_CHUNK_BYTES },
    Shape { request_blocks: 4, chunk_bytes: LARGE_CHUNK_BYTES },
];
/// The shapes of writes only predicted, as a check.
const CHECK_SHAPES: [Shape; 2] = [
    Shape { request_blocks: 4, chunk_bytes: BLOCK_BYTES },
    Shape { request_blocks: 16, chunk_bytes: LARGE_CHUNK_BYTES },
];
const READ_SHAPE: Shape = Shape { request_blocks: 4, chunk_bytes: BLOCK_BYTES };

/// One cost as solved, before rounding (either part may come out negative).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Solved {
    pub fixed_ns: f64,
    pub per_block_ns: f64,
}

/// What one level's runs measured and the costs solved from them.
#[derive(Clone, Debug)]
pub struct Calibration {
    pub level: RaidLevel,
    /// The runs the costs are solved from, by shape: writes, then reads.
    pub write_runs: Vec<(Shape, CpuFigure)>,
    pub read_runs: Vec<(Shape, CpuFigure)>,
    /// A write: fixed per request, and per block of its completions (data and parity).
    pub write: Solved,
    /// A write's part per drive command.
    pub write_command_ns: f64,
    /// Completion blocks per request block: (k + m) / k.
    pub write_blocks_per_block: f64,
    pub read_submit: Solved,
    /// A read's answer, per request.
    pub read_answer_ns: f64,
    /// Per completion, which carries one block.
    pub read_completion_ns: f64,
    /// The writes not used to solve: the engine's time per request the costs predict, and
    /// the one measured.
    pub checks: Vec<(Shape, f64, f64)>,
}

/// The engine's time per request of a run.
fn engine_ns(figure: &CpuFigure) -> f64 {
    1e9 / figure.requests_per_s
}

/// Runs the calibration of `level`'s costs, `requests` 4 KiB requests' worth of blocks per
/// run, given the base runs (4 KiB requests on 4 KiB chunks) already made.
pub fn calibrate(
    level: RaidLevel,
    base_writes: &CpuFigure,
    base_reads: &CpuFigure,
    requests: u64,
    seed: u64,
) -> Result<Calibration> {
    let none = || None;
    let run_writes = |shape: Shape| -> Result<(Shape, CpuFigure)> {
        let n = (requests / shape.request_blocks).max(1);
        Ok((shape, writes_of(level, shape, n, seed, &none)?))
    };
    let mut write_runs = vec![(Shape::ONE_BLOCK, *base_writes)];
    for shape in WRITE_SHAPES {
        write_runs.push(run_writes(shape)?);
    }
    let read_requests = (requests / READ_SHAPE.request_blocks).max(1);
    let read_runs = vec![
        (Shape::ONE_BLOCK, *base_reads),
        (READ_SHAPE, reads_of(level, READ_SHAPE, read_requests, seed, None, &none)?),
    ];
    // Zone commands are charged as a write command: they carry no data.
    let commands = |f: &CpuFigure| f.completions_per_request.write_commands + f.completions_per_request.zone_commands;
    let rows = write_runs
        .iter()
        .map(|(_, f)| vec![1.0, commands(f), f.completions_per_request.write_blocks, engine_ns(f)])
        .collect();
    let [fixed_ns, write_command_ns, per_block_ns] = solve(rows, "write")?;
    let base = base_writes.completions_per_request;
    let write_blocks_per_block = base.write_blocks / Shape::ONE_BLOCK.request_blocks as f64;
    let (small, large) = (&read_runs[0], &read_runs[1]);
    let read_per_block_ns = (large.1.submit_ns_per_request - small.1.submit_ns_per_request)
        / (large.0.request_blocks - small.0.request_blocks) as f64;
    let read_submit =
        Solved { fixed_ns: small.1.submit_ns_per_request - read_per_block_ns, per_block_ns: read_per_block_ns };
    let rows = read_runs
        .iter()
        .map(|(_, f)| vec![1.0, f.completions_per_request.read_commands, f.rest_ns_per_request])
        .collect();
    let [read_answer_ns, read_completion_ns] = solve(rows, "read")?;
    let mut calibration = Calibration {
        level,
        write_runs,
        read_runs,
        write: Solved { fixed_ns, per_block_ns },
        write_command_ns,
        write_blocks_per_block,
        read_submit,
        read_answer_ns,
        read_completion_ns,
        checks: Vec::new(),
    };
    let costs = calibration.costs();
    for shape in CHECK_SHAPES {
        let (_, figure) = run_writes(shape)?;
        let predicted_ns = costs.write_request.ns(shape.request_blocks) as f64
            + commands(&figure) * costs.write_completion.fixed_ns as f64
            + figure.completions_per_request.write_blocks * costs.write_completion.per_block_ns as f64;
        calibration.checks.push((shape, predicted_ns, engine_ns(&figure)));
    }
    Ok(calibration)
}

/// Solves the square system whose rows are [coefficients..., value] by Gaussian elimination
/// with partial pivoting; a system the runs cannot tell apart is an error naming `what`.
pub(in crate::cpu) fn solve<const N: usize>(mut rows: Vec<Vec<f64>>, what: &str) -> Result<[f64; N]> {
    debug_assert!(rows.len() == N && rows.iter().all(|r| r.len() == N + 1), "a square system");
    let singular = || Error::InvalidConfig {
        reason: format!("the {what} calibration runs cannot separate the fixed costs from the per-block ones"),
    };
    for col in 0..N {
        let pivot = (col..N).max_by(|&a, &b| rows[a][col].abs().total_cmp(&rows[b][col].abs())).ok_or_else(singular)?;
        if rows[pivot][col].abs() < 1e-9 {
            return Err(singular());
        }
        rows.swap(col, pivot);
        let (above, below) = rows.split_at_mut(col + 1);
        let pivot_row = &above[col];
        for row in below.iter_mut() {
            let factor = row[col] / pivot_row[col];
            for (x, p) in row[col..=N].iter_mut().zip(&pivot_row[col..=N]) {
                *x -= factor * p;
            }
        }
    }
    let mut x = [0.0; N];
    for col in (0..N).rev() {
        let known: f64 = (col + 1..N).map(|k| rows[col][k] * x[k]).sum();
        x[col] = (rows[col][N] - known) / rows[col][col];
    }
    Ok(x)
}

/// Nanoseconds as charged: a negative part (noise) is charged as zero.
pub(in crate::cpu) fn ns(x: f64) -> u64 {
    x.max(0.0).round() as u64
}

impl Calibration {
    /// The costs for the simulator (module doc): a flush or discard costs a read request's
    /// fixed part, a zone command a write completion's.
    pub fn costs(&self) -> CpuCosts {
        let write_request =
            Cost::new(ns(self.write.fixed_ns), ns(self.write.per_block_ns * self.write_blocks_per_block));
        let read_request =
            Cost::new(ns(self.read_submit.fixed_ns + self.read_answer_ns), ns(self.read_submit.per_block_ns));
        let write_completion = Cost::new(ns(self.write_command_ns), 0);
        CpuCosts {
            write_request,
            read_request,
            other_request_ns: read_request.fixed_ns,
            write_completion,
            read_completion: Cost::new(0, ns(self.read_completion_ns)),
            zone_completion_ns: write_completion.fixed_ns,
            // Solved apart, from rebuilds (`rebuild`).
            rebuild_read_completion: Cost::default(),
            rebuild_write_completion: Cost::default(),
            rebuild_chunk_ns: 0,
            rebuild_zone_completion_ns: write_completion.fixed_ns,
            rebuild_job: Cost::default(),
            rebuild_job_result_ns: 0,
        }
    }

    /// The parts that came out negative, each as a sentence (empty when none did).
    pub fn noise(&self) -> Vec<String> {
        let parts = [
            ("a write's fixed part", self.write.fixed_ns),
            ("a write's part per command", self.write_command_ns),
            ("a write's part per block", self.write.per_block_ns),
            ("a read's submission and answer, fixed part", self.read_submit.fixed_ns + self.read_answer_ns),
            ("a read's submission, per block", self.read_submit.per_block_ns),
            ("a read completion", self.read_completion_ns),
        ];
        parts
            .iter()
            .filter(|(_, x)| *x < 0.0)
            .map(|(name, x)| {
                format!(
                    "{name} came out at {x:.0} ns, below zero: charged as 0 (noise, or a cost not linear in the \
                     blocks: see zapraid_experiments::cpu::calibrate)"
                )
            })
            .collect()
    }
}

impl fmt::Display for Calibration {
    /// The solved costs, the sanity lines, the checks, then the runs they came from.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let costs = self.costs();
        writeln!(
            f,
            "{}: write request: {} (its blocks' and their parity's work, {:.0} ns per block moved); write \
             completion: {}; read request: {} (its submission {:.0} ns + {:.0} ns per block, its answer {:.0} ns); \
             read completion: {} (one point: a read sends one command per block)",
            self.level,
            costs.write_request,
            self.write.per_block_ns,
            costs.write_completion,
            costs.read_request,
            self.read_submit.fixed_ns,
            self.read_submit.per_block_ns,
            self.read_answer_ns,
            costs.read_completion
        )?;
        for line in self.noise() {
            writeln!(f, "  sanity: {line}")?;
        }
        for (shape, predicted_ns, measured_ns) in &self.checks {
            writeln!(
                f,
                "  check, writes of {shape} (not used to solve): the costs say {predicted_ns:.0} ns per request, \
                 measured {measured_ns:.0} ns ({:+.0}%)",
                (predicted_ns / measured_ns - 1.0) * 100.0
            )?;
        }
        let runs = self.write_runs.iter().map(|r| ("writes", r)).chain(self.read_runs.iter().map(|r| ("reads", r)));
        for (kind, (shape, figure)) in runs {
            let c = figure.completions_per_request;
            writeln!(
                f,
                "  {kind} of {shape}: {:.0} ns per request (submit {:.0}, rest {:.0}); per request {:.3} write \
                 commands of {:.3} blocks, {:.3} read commands, {:.4} zone commands",
                engine_ns(figure),
                figure.submit_ns_per_request,
                figure.rest_ns_per_request,
                c.write_commands,
                c.write_blocks,
                c.read_commands,
                c.zone_commands
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solves_a_known_system() {
        // 2a + b = 5, a + 3b = 10: a = 1, b = 3.
        let [a, b] = solve(vec![vec![2.0, 1.0, 5.0], vec![1.0, 3.0, 10.0]], "test").unwrap();
        assert!((a - 1.0).abs() < 1e-9 && (b - 3.0).abs() < 1e-9, "{a} {b}");
        // Rows that cannot be told apart.
        let singular = solve::<2>(vec![vec![1.0, 2.0, 3.0], vec![2.0, 4.0, 6.0]], "test");
        assert!(singular.is_err());
    }

    /// The calibration's runs differ where the solve needs them to: more blocks per
    /// request, and fewer commands per block with the larger chunks; each check run is
    /// reported. How well the costs predict the checks is a timing, printed by `bench cpu`,
    /// not asserted (tests never assert on timings: a shared machine's noise decides them).
    #[test]
    fn the_runs_separate_the_parts() {
        let none = || None;
        let level = RaidLevel::Raid5 { drives: 4 };
        const REQUESTS: u64 = 20_000;
        let w = super::super::writes(level, REQUESTS, 1, &none).unwrap();
        let r = super::super::reads(level, REQUESTS, 1, None, &none).unwrap();
        let calibration = calibrate(level, &w, &r, REQUESTS, 1).unwrap();
        let blocks_per_command = |f: &CpuFigure| {
            let c = f.completions_per_request;
            c.write_blocks / c.write_commands
        };
        let runs = &calibration.write_runs;
        assert!(blocks_per_command(&runs[1].1) > 3.0 * blocks_per_command(&runs[0].1), "{calibration}");
        assert!(runs[2].0.request_blocks > runs[1].0.request_blocks, "{calibration}");
        assert!(!calibration.checks.is_empty(), "{calibration}");
    }
}
