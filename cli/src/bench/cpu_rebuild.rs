//! `zapraid bench cpu`'s rebuild part: the drive rebuild's CPU cost, the engine alone over
//! instant drives (`zapraid_experiments::cpu::rebuild_cpu`), per block read and written,
//! beside what the simulator charges its core for the same rebuild
//! (`CpuCosts::calibrated`), and the costs solved from these runs
//! (`zapraid_experiments::cpu::calibrate_rebuild`).

use anyhow::Result;
use zapraid_engine::cpu_cost::CpuCosts;
use zapraid_engine::engine::MAX_DECLUSTERED_REBUILD_SEGMENTS_AT_ONCE;
use zapraid_experiments::cpu::{calibrate_rebuild, Parity, RebuildCpuFigure, AT_ONCE_IN_SEGMENTS};

use super::{BenchArgs, Out};

/// Segments on the failed drive of a classic array (a declustered one's: at least three
/// times the 64 it rebuilds at once, `rebuild_cpu`).
const FULL_SEGMENTS: u64 = 48;
const QUICK_SEGMENTS: u64 = 16;
/// Runs of each rebuild, of which the median counts.
const FULL_REPS: usize = 3;
const QUICK_REPS: usize = 1;

/// Prints the rebuild's costs; returns them as JSON.
pub(super) fn rebuild(args: &BenchArgs, out: &mut Out) -> Result<serde_json::Value> {
    let (segments, reps) = if args.quick { (QUICK_SEGMENTS, QUICK_REPS) } else { (FULL_SEGMENTS, FULL_REPS) };
    let counter = || Some(crate::alloc_count::allocations());
    let declustered = (MAX_DECLUSTERED_REBUILD_SEGMENTS_AT_ONCE as u64 * AT_ONCE_IN_SEGMENTS).max(segments);
    say!(
        out,
        "Rebuild (the engine alone, one core): an array over instant in-memory drives with 1 MiB zones, filled with \
         whole segments of sequential writes, {segments} on drive 0 (a declustered array: {declustered}), loses \
         drive 0, and \
         the engine rebuilds it onto an empty drive in its place (Engine::rebuild_drive) or into the others' \
         distributed spare space (Engine::rebuild_into_spares). Timed: the engine's calls over the middle half of \
         the rebuild (its calls' wall time less the drives' part, less its share of the time the thread waited \
         for a CPU), and apart from them the rebuild's jobs (each chunk position's sources checked and its chunk \
         rebuilt: RebuildJob::run, which the server may run on other cores), the median of {reps} run(s); per \
         block the rebuild read and per block it wrote (engine and jobs together, what one core does), the jobs' \
         share of it, and what the simulator charges for the same commands and jobs (CpuCosts::calibrated). ZN540 \
         transfer: 32 blocks per command (a chunk per command where said)."
    );
    say!(out);
    say!(
        out,
        "{:<62} {:>11} {:>12} {:>5} {:>11} {:>8} {:>8}",
        "rebuild",
        "ns/read blk",
        "ns/write blk",
        "jobs",
        "charged/rd",
        "charged",
        "allocs/w"
    );
    let mut json = Vec::new();
    let mut calibrations = Vec::new();
    for parity in [Parity::Xor, Parity::ReedSolomon] {
        let calibration = calibrate_rebuild(parity, segments, reps, &counter)?;
        for run in calibration.runs.iter().chain(&calibration.checks) {
            row(out, run);
            json.push(run_json(run));
        }
        calibrations.push(calibration);
    }
    say!(out);
    say!(
        out,
        "The rebuild's costs solved from these runs (a read and a write completion's fixed part and part per \
         block, and a part per chunk carried, each kind's from its own completions' time; see \
         zapraid_experiments::cpu::rebuild), and what they would charge the runs not used to solve:"
    );
    for calibration in &calibrations {
        say!(out, "{}", calibration.to_string().trim_end());
        say!(out, "  the simulator uses: {}", CpuCosts::calibrated(calibration.parity.level()));
    }
    say!(out);
    say!(out, "Each run by completion (the engine's time split by the completions that took it):");
    for run in calibrations.iter().flat_map(|c| c.runs.iter().chain(&c.checks)) {
        say!(out, "  {run}");
    }
    say!(out);
    Ok(serde_json::json!({ "failed_drive_segments": segments, "runs_per_figure": reps, "runs": json }))
}

/// One rebuild: measured, and charged by the simulator's calibrated costs.
fn row(out: &mut Out, run: &RebuildCpuFigure) {
    let charged = CpuCosts::calibrated(run.shape.level);
    let charged_per_read = run.charged_ns(&charged) / run.read_blocks.max(1) as f64;
    let allocations = run.allocations_per_block_written().map_or("-".to_string(), |a| format!("{a:.2}"));
    say!(
        out,
        "{:<62} {:>11.0} {:>12.0} {:>4.0}% {:>11.0} {:>+7.0}% {:>8}",
        run.shape.to_string(),
        run.ns_per_block_read(),
        run.ns_per_block_written(),
        run.job_ns / run.total_ns().max(f64::MIN_POSITIVE) * 100.0,
        charged_per_read,
        (charged_per_read / run.ns_per_block_read() - 1.0) * 100.0,
        allocations
    );
}

fn run_json(run: &RebuildCpuFigure) -> serde_json::Value {
    let charged = CpuCosts::calibrated(run.shape.level);
    serde_json::json!({
        "rebuild": run.shape.to_string(),
        "segments": run.segments,
        "ns_per_block_read": run.ns_per_block_read(),
        "ns_per_block_written": run.ns_per_block_written(),
        "charged_ns_per_block_read": run.charged_ns(&charged) / run.read_blocks.max(1) as f64,
        "read_commands": run.read_commands,
        "read_blocks": run.read_blocks,
        "write_commands": run.write_commands,
        "write_blocks": run.write_blocks,
        "zone_commands": run.zone_commands,
        "jobs": run.jobs,
        "job_source_blocks": run.job_blocks,
        "job_ns": run.job_ns,
        "engine_ns": run.engine_ns,
        "allocations_per_block_written": run.allocations_per_block_written(),
    })
}
