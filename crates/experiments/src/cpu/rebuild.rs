//! The drive rebuild's own CPU cost (`zapraid bench cpu`'s rebuild rows), in `cpu`'s
//! harness: the engine alone, one core, over instant drives that keep their data in
//! memory. An array is filled with whole segments of sequential writes (untimed), a drive
//! fails and is rebuilt, onto an empty drive put in its place (`Engine::rebuild_drive`)
//! or, for a declustered array, into the others' distributed spare space
//! (`Engine::rebuild_into_spares`), to its end. Only the engine's calls are timed (the
//! wall time less the drives' part, timed apart), and the rebuild's commands are counted
//! by kind (`Engine::is_rebuild_command`): the engine's time per block the rebuild read and
//! per block it wrote. `calibrate_rebuild` solves the simulator's rebuild costs from such
//! runs (`zapraid_engine::cpu_cost`).
//!
//! Invariants: the rebuild must complete, rebuild every segment the drive held and send
//! no command besides its own (no garbage collection, no user I/O), else the run is an
//! error; a declustered array must end with no lane on the failed drive.

use std::time::Duration;

use zapraid_zns::Geometry;

mod calibrate;

pub use self::calibrate::{calibrate_rebuild, median_rebuild, Parity, RebuildCalibration};

use super::{config, Bench, BLOCK_BYTES};
use crate::declustered::stamped;
use zapraid_engine::cpu_cost::CpuCosts;
use zapraid_engine::engine::{
    Config, Declustering, Engine, Request, MAX_DECLUSTERED_REBUILD_SEGMENTS_AT_ONCE, MAX_REBUILD_SEGMENTS_AT_ONCE,
};
use zapraid_engine::error::{Error, Result};
use zapraid_engine::layout::{Layout, Mode, RaidLevel, DEFAULT_GROUP_SIZE};

/// The drive that fails.
const FAILED_DRIVE: usize = 0;
/// Distributed spares of a declustered array (as `zapraid bench declustered`'s).
const DISTRIBUTED_SPARES: u32 = 1;
/// Blocks per zone (1 MiB), so that a rebuild runs over many segments (each started,
/// read, written and finished on its own) in little memory: a declustered array's, over
/// three times the 64 it rebuilds at once, holds 2.3 GiB.
const ZONE_BLOCKS: u64 = 256;
/// Seed of the fill's data.
const FILL_SEED: u64 = 1;

/// One rebuild to measure: the array and what the drives take per command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RebuildShape {
    pub level: RaidLevel,
    /// Drives of the array: the stripe's width (classic), or more (declustered, with
    /// `DISTRIBUTED_SPARES` distributed spares).
    pub drives: u32,
    pub chunk_bytes: u64,
    /// Rebuilt into distributed spare space rather than onto a new drive.
    pub into_spares: bool,
    /// The most blocks a drive command carries (the drives' transfer): the ZN540's, or a
    /// chunk's, which makes a command of every chunk the rebuild reads and writes.
    pub transfer_blocks: u32,
}

impl RebuildShape {
    /// The ZN540's transfer (`Geometry::zn540`), 32 blocks.
    pub fn zn540_transfer_blocks() -> u32 {
        Geometry::zn540().max_transfer_blocks
    }

    /// Onto a new drive in the failed one's place, on the ZN540's transfer.
    pub fn onto_new_drive(level: RaidLevel, drives: u32, chunk_bytes: u64) -> RebuildShape {
        let transfer_blocks = Self::zn540_transfer_blocks();
        RebuildShape { level, drives, chunk_bytes, into_spares: false, transfer_blocks }
    }

    /// Into distributed spare space, on the ZN540's transfer.
    pub fn into_spares(level: RaidLevel, drives: u32, chunk_bytes: u64) -> RebuildShape {
        RebuildShape { into_spares: true, ..Self::onto_new_drive(level, drives, chunk_bytes) }
    }

    fn width(&self) -> u32 {
        let (k, m) = self.level.shape();
        (k + m) as u32
    }

    fn declustering(&self) -> Declustering {
        if self.drives == self.width() {
            Declustering::CLASSIC
        } else {
            Declustering::wide(self.drives, DISTRIBUTED_SPARES)
        }
    }
}

impl std::fmt::Display for RebuildShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let width = self.width();
        let array =
            if self.drives == width { self.level.to_string() } else { format!("{} on {}", self.level, self.drives) };
        let target = if self.into_spares { "into spare space" } else { "onto a new drive" };
        let transfer = if u64::from(self.transfer_blocks) * BLOCK_BYTES == self.chunk_bytes {
            ", a command per chunk".to_string()
        } else {
            String::new()
        };
        write!(f, "{array}, {} KiB chunks, {target}{transfer}", self.chunk_bytes / 1024)
    }
}

/// What the middle of one rebuild (`MEASURED_FROM_QUARTER`) cost the engine.
#[derive(Clone, Copy, Debug)]
pub struct RebuildCpuFigure {
    pub shape: RebuildShape,
    /// Segments the whole rebuild wrote.
    pub segments: u64,
    /// The engine's time over the middle of the rebuild (its calls' wall time less the
    /// drives' part and its share of the time the thread waited for a CPU).
    pub engine_ns: f64,
    /// The rebuild's commands and their blocks over that time: reads (headers and chunks),
    /// writes (headers, chunks, footers), zone commands (resets and finishes).
    pub read_commands: u64,
    pub read_blocks: u64,
    pub write_commands: u64,
    pub write_blocks: u64,
    /// Whole chunks the writes carried: the chunk positions rebuilt (and headers).
    pub write_chunks: u64,
    pub zone_commands: u64,
    /// Of `engine_ns`, the share of the rebuild's read, write and zone command completions:
    /// each completion is timed (`on_completion`, and what it sets off), and the engine's
    /// time split in proportion (the rest, its commands polled, with them).
    pub read_ns: f64,
    pub write_ns: f64,
    pub zone_ns: f64,
    /// The rebuild's jobs over that time (`RebuildJob`: a chunk position's sources
    /// checked and its chunk rebuilt), the blocks of their sources, and their own time
    /// (not in `engine_ns`: the simulator charges them apart, on the engine's core or on
    /// worker cores), less their share of the time the thread waited for a CPU.
    pub jobs: u64,
    pub job_blocks: u64,
    pub job_ns: f64,
    /// Heap allocations over the rebuild (None without a counter).
    pub allocations: Option<u64>,
}

impl RebuildCpuFigure {
    /// What the simulator charges for this rebuild at `costs`: every read and write
    /// command its fixed part, every block its part per block, every chunk written its
    /// part, every zone command its cost, every job its cost and its result's.
    pub fn charged_ns(&self, costs: &CpuCosts) -> f64 {
        let (read, write) = (costs.rebuild_read_completion, costs.rebuild_write_completion);
        (read.fixed_ns * self.read_commands
            + read.per_block_ns * self.read_blocks
            + write.fixed_ns * self.write_commands
            + write.per_block_ns * self.write_blocks
            + costs.rebuild_chunk_ns * self.write_chunks
            + costs.rebuild_zone_completion_ns * self.zone_commands
            + costs.rebuild_job.fixed_ns * self.jobs
            + costs.rebuild_job.per_block_ns * self.job_blocks
            + costs.rebuild_job_result_ns * self.jobs) as f64
    }

    /// The engine's and its jobs' time together: what one core does when it runs the jobs
    /// itself.
    pub fn total_ns(&self) -> f64 {
        self.engine_ns + self.job_ns
    }

    /// The engine's and its jobs' time per block the rebuild read: all of it over the
    /// blocks read.
    pub fn ns_per_block_read(&self) -> f64 {
        self.total_ns() / self.read_blocks.max(1) as f64
    }

    /// The engine's and its jobs' time per block the rebuild wrote.
    pub fn ns_per_block_written(&self) -> f64 {
        self.total_ns() / self.write_blocks.max(1) as f64
    }

    /// Heap allocations per block the rebuild wrote.
    pub fn allocations_per_block_written(&self) -> Option<f64> {
        self.allocations.map(|a| a as f64 / self.write_blocks.max(1) as f64)
    }
}

/// The rebuild is measured from the time it has rebuilt this many quarters of its
/// segments to the time it has rebuilt that many: its middle, where it runs as over a
/// whole drive's thousands of segments, not its start (its buffers allocated for the first
/// time, at most `rebuild_segments_at_once` segments in) nor its end (fewer segments at
/// once, its buffers freed).
const MEASURED_FROM_QUARTER: u64 = 1;
/// The failed drive holds at least this many times the segments the rebuild writes at
/// once, so that its middle runs that many at once (`zapraid bench declustered`'s
/// measure too).
pub const AT_ONCE_IN_SEGMENTS: u64 = 3;
const MEASURED_TO_QUARTER: u64 = 3;
const QUARTERS: u64 = 4;

/// Fills an array of `shape` so that the failed drive holds about `failed_drive_segments`
/// segments (whole rows of them), fails it, rebuilds it and measures the middle of the
/// rebuild (`MEASURED_FROM_QUARTER`).
pub fn rebuild_cpu(
    shape: RebuildShape,
    failed_drive_segments: u64,
    allocations: &dyn Fn() -> Option<u64>,
) -> Result<RebuildCpuFigure> {
    let zones = Geometry {
        max_transfer_blocks: shape.transfer_blocks,
        transfer_granule_blocks: 0,
        zone_append_max_blocks: shape.transfer_blocks,
        ..Geometry::small(1, ZONE_BLOCKS, ZONE_BLOCKS)
    };
    let mode = Mode::ZapRaid { group_size: DEFAULT_GROUP_SIZE };
    let layout = Layout::new(&zones, shape.level, mode, shape.chunk_bytes)?;
    let at_once = if shape.drives == shape.width() {
        MAX_REBUILD_SEGMENTS_AT_ONCE as u64
    } else {
        MAX_DECLUSTERED_REBUILD_SEGMENTS_AT_ONCE as u64
    };
    let failed_drive_segments = failed_drive_segments.max(AT_ONCE_IN_SEGMENTS * at_once);
    let (width, declustering) = (u64::from(shape.width()), shape.declustering());
    let per_row = u64::from(declustering.segments_per_zone(width as usize));
    if per_row == 0 {
        return Err(invalid(format!("{shape}: no segment fits a row of the drives")));
    }
    // Each segment has a lane on `width` of the drives; whole rows of segments.
    let segments = (failed_drive_segments * u64::from(shape.drives)).div_ceil(width).div_ceil(per_row) * per_row;
    let blocks = segments * layout.data_blocks_per_segment();
    let rows = u64::from(layout.zones_for_capacity(blocks)).div_ceil(per_row);
    let zone_count = u32::try_from(rows).map_err(|_| invalid(format!("{rows} zones")))?;
    let geometry = Geometry { zone_count, ..zones };
    let config = Config { level: shape.level, declustering, ..config(mode, shape.chunk_bytes, blocks) };
    let mut bench = Bench::over(geometry, config, true)?;
    // One stripe's data per request: whole segments are a whole number of requests.
    let request_blocks = layout.data_chunks as u64 * layout.chunk_blocks;
    let mut next_lba = 0;
    bench.closed_loop(blocks / request_blocks, |_| {
        let lba = next_lba;
        next_lba += request_blocks;
        Request::Write { lba, data: stamped(lba, request_blocks, FILL_SEED, BLOCK_BYTES as usize) }
    })?;
    bench.drives[FAILED_DRIVE].failed = true;
    bench.engine.fail_drive(FAILED_DRIVE);
    if !shape.into_spares {
        bench.drives[FAILED_DRIVE] = super::InstantDrive::new(geometry, true);
    }
    bench.time_rebuild_completions = true;
    if shape.into_spares {
        bench.engine.rebuild_into_spares(FAILED_DRIVE)?;
    } else {
        bench.engine.rebuild_drive(FAILED_DRIVE)?;
    }
    let stalled = || invalid(format!("{shape}: the rebuild stalled (instant drives, nothing left to complete)"));
    let to_rebuild = bench.engine.rebuild_status().ok_or_else(stalled)?.segments_left;
    // Instant drives: every command completes as it goes out, so the rebuild runs on
    // until it has rebuilt each quarter, and to its end.
    let rebuilt_by = |quarters: u64| {
        let segments = to_rebuild * quarters / QUARTERS;
        move |engine: &Engine| engine.rebuild_status().is_none_or(|s| s.segments_rebuilt >= segments)
    };
    if !bench.run_until(&mut rebuilt_by(MEASURED_FROM_QUARTER))? {
        return Err(stalled());
    }
    if bench.engine.rebuild_status().is_none() {
        return Err(invalid(format!("{shape}: the rebuild ended before its middle: too few segments to measure")));
    }
    let before = allocations();
    let waited_before = run_queue_wait_ns();
    let started = bench.start_clock();
    if !bench.run_until(&mut rebuilt_by(MEASURED_TO_QUARTER))? {
        return Err(stalled());
    }
    let wall = started.elapsed();
    let waited_ns = run_queue_wait_ns().zip(waited_before).map_or(0, |(after, before)| after.saturating_sub(before));
    let after = allocations();
    let measured = (bench.rebuild_commands, bench.rebuild_blocks, bench.executed_commands);
    let write_chunks = bench.rebuild_write_chunks;
    let (jobs, job_blocks) = (bench.rebuild_jobs, bench.rebuild_job_blocks);
    let others = bench.drive_time + bench.frontend_time + bench.rebuild_job_time;
    let engine_ns = engine_ns(wall, others, waited_ns);
    let job_ns = bench.rebuild_job_time.as_nanos() as f64 * running_share(wall, waited_ns);
    let timed = bench.rebuild_completion_time.map(|t| t.as_nanos() as f64);
    let share = |kind: usize| engine_ns * timed[kind] / timed.iter().sum::<f64>().max(f64::MIN_POSITIVE);
    bench.run()?;
    finished(&bench, shape)?;
    let last = bench.engine.last_rebuild().ok_or_else(|| invalid(format!("{shape}: no rebuild completed")))?;
    let (commands, blocks, executed) = measured;
    let ((write_commands, write_blocks), (read_commands, read_blocks), zone_commands) =
        ((commands[0], blocks[0]), (commands[1], blocks[1]), commands[2]);
    let others = executed.iter().sum::<u64>() - commands.iter().sum::<u64>();
    if others > 0 {
        return Err(invalid(format!("{shape}: {others} command(s) besides the rebuild's ran during it")));
    }
    Ok(RebuildCpuFigure {
        shape,
        segments: last.segments_rebuilt,
        engine_ns,
        read_commands,
        read_blocks,
        write_commands,
        write_blocks,
        write_chunks,
        zone_commands,
        read_ns: share(1),
        write_ns: share(0),
        zone_ns: share(2),
        jobs,
        job_blocks,
        job_ns,
        allocations: after.zip(before).map(|(after, before)| after - before),
    })
}

/// The engine's part of `wall`, the rest (`others`) timed apart, less its share of
/// `waited_ns`, the time this thread waited for a CPU meanwhile (on a machine others load,
/// taken by them: it falls on each part in proportion to its time).
fn engine_ns(wall: Duration, others: Duration, waited_ns: u64) -> f64 {
    wall.saturating_sub(others).as_nanos() as f64 * running_share(wall, waited_ns)
}

/// The share of `wall` this thread ran, not waiting `waited_ns` for a CPU.
fn running_share(wall: Duration, waited_ns: u64) -> f64 {
    1.0 - (waited_ns as f64 / (wall.as_nanos() as f64).max(1.0)).min(1.0)
}

/// The time this thread has waited for a CPU, runnable (the scheduler's, second field of
/// `/proc/thread-self/schedstat`), if the system says.
fn run_queue_wait_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().nth(1)?.parse().ok()
}

/// Whether the rebuild ran to its end: none under way, one completed, every segment back
/// on its drives (and none on the failed drive, rebuilt into spare space).
fn finished(bench: &Bench, shape: RebuildShape) -> Result<()> {
    let engine = &bench.engine;
    if engine.rebuild_status().is_some() {
        return Err(invalid(format!("{shape}: the rebuild stalled (instant drives, nothing left to complete)")));
    }
    if engine.status().rebuilds_completed != 1 {
        return Err(invalid(format!("{shape}: the rebuild was given up")));
    }
    if shape.into_spares && engine.drives_in_spare_space() != [FAILED_DRIVE] {
        return Err(invalid(format!("{shape}: drive {FAILED_DRIVE} still holds lanes after its rebuild")));
    }
    Ok(())
}

fn invalid(reason: String) -> Error {
    Error::InvalidConfig { reason }
}

impl std::fmt::Display for RebuildCpuFigure {
    /// What the run measured, per block and per completion of each kind.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let per = |ns: f64, n: u64| ns / n.max(1) as f64;
        write!(
            f,
            "{}: {:.0} ns per block read, {:.0} per block written; per read completion {:.0} ns ({} of {:.1} blocks), \
             per write completion {:.0} ns ({} of {:.1} blocks), per zone command {:.0} ns ({}), per job {:.0} ns \
             ({} of {:.1} source blocks)",
            self.shape,
            self.ns_per_block_read(),
            self.ns_per_block_written(),
            per(self.read_ns, self.read_commands),
            self.read_commands,
            per(self.read_blocks as f64, self.read_commands),
            per(self.write_ns, self.write_commands),
            self.write_commands,
            per(self.write_blocks as f64, self.write_commands),
            per(self.zone_ns, self.zone_commands),
            self.zone_commands,
            per(self.job_ns, self.jobs),
            self.jobs,
            per(self.job_blocks as f64, self.jobs)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A classic RAID-5 and RAID-6 rebuild run through, measured over their middle: every
    /// command counted is the rebuild's, more blocks read than written (the stripe's other
    /// chunks), every chunk position written, the engine's time split whole among the
    /// kinds. Never asserts on timings.
    #[test]
    fn rebuilds_run_and_count_their_commands() {
        const SEGMENTS: u64 = 12;
        for level in [RaidLevel::Raid5 { drives: 4 }, RaidLevel::Raid6 { drives: 6 }] {
            let (k, m) = level.shape();
            let shape = RebuildShape::onto_new_drive(level, (k + m) as u32, 4096);
            let f = rebuild_cpu(shape, SEGMENTS, &|| None).unwrap();
            assert_eq!(f.segments, SEGMENTS, "{f}");
            assert!(f.read_blocks >= (k as u64) * (f.write_blocks - f.write_blocks / 8), "{f}");
            assert!(f.write_chunks > 0 && f.write_chunks <= f.write_blocks, "{f}");
            assert!(f.read_commands < f.read_blocks, "{f}: reads of consecutive chunks go as one");
            assert!(f.zone_commands > 0, "{f}");
            let split = f.read_ns + f.write_ns + f.zone_ns;
            assert!((split - f.engine_ns).abs() <= 1e-6 * f.engine_ns.max(1.0), "{f}");
        }
    }
}
