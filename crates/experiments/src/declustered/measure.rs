//! One array of `declustered`'s table, measured: built on the measurement's zones with
//! ZN540 timing, filled with whole segments of sequential writes, drive 0 failed, and
//! rebuilt, onto a new drive (a classic array) or into distributed spare space (a
//! declustered one), while `on_step` runs beside it (users' I/O, or nothing). What each
//! drive served during the rebuild comes from the simulator's counters
//! (`Simulator::drive_traffic`), the engine core's busy time from its simulated core.
//!
//! Invariants: deterministic (same seed, same figures); the rebuild must complete, and a
//! declustered array must end with no lane on the failed drive, else the measurement is an
//! error.

use zapraid_zns::{Geometry, TimingParams, ZonedDevice};

use super::{Scale, Stripe, CHUNK_BYTES, FAILED_DRIVE};
use crate::config;
use crate::rebuild::{fill_sequentially, Progress, PROGRESS_STEPS, REPLACEMENT_SEED_OFFSET};
use zapraid_engine::engine::{Config, Declustering};
use zapraid_engine::error::{Error, Result};
use zapraid_engine::layout::{Layout, Mode, DEFAULT_GROUP_SIZE};
use zapraid_engine::sim::{DriveTraffic, Simulator};

/// Fill requests between progress reports.
const PROGRESS_REQUESTS: u64 = 1 << 10;

/// The scheme every array of the table runs: the paper's ZapRAID, G = 256.
pub(super) fn mode() -> Mode {
    Mode::ZapRaid { group_size: DEFAULT_GROUP_SIZE }
}

/// The measurement's zones: `zone_blocks` blocks of capacity, the ZN540's transfer limits
/// (the rebuild's commands are as large as one transfer: a larger limit would flatter it).
pub fn zones(zone_blocks: u64) -> Geometry {
    let zn540 = Geometry::zn540();
    Geometry {
        max_transfer_blocks: zn540.max_transfer_blocks,
        transfer_granule_blocks: 0,
        zone_append_max_blocks: zn540.zone_append_max_blocks,
        ..Geometry::small(1, zone_blocks, zone_blocks)
    }
}

/// The array's declustering: classic at N = k + m, else one distributed spare.
pub(super) fn declustering(stripe: Stripe, drives: u32) -> Declustering {
    if drives == stripe.width() {
        Declustering::CLASSIC
    } else {
        Declustering::wide(drives, super::DISTRIBUTED_SPARES)
    }
}

/// An array of `drives` drives and stripes of `stripe`, filled so that drive 0 holds
/// about `failed_drive_segments` segments (whole segments of sequential writes, rows
/// whole), with `extra_rows` empty zones per drive beyond what the data needs, settled;
/// also returns the logical blocks written.
pub(super) fn filled(
    stripe: Stripe,
    drives: u32,
    scale: &Scale,
    failed_drive_segments: u64,
    extra_rows: u32,
    seed: u64,
    progress: &mut impl FnMut(Progress),
) -> Result<(Simulator, u64)> {
    let zones = zones(scale.zone_blocks);
    let level = stripe.level();
    let layout = Layout::new(&zones, level, mode(), CHUNK_BYTES)?;
    let declustering = declustering(stripe, drives);
    let per_row = u64::from(declustering.segments_per_zone(stripe.width() as usize));
    // Each segment has a lane on `width` of the `drives` drives.
    let segments = (failed_drive_segments * u64::from(drives)).div_ceil(u64::from(stripe.width()));
    let segments = segments.div_ceil(per_row) * per_row;
    let blocks = segments * layout.data_blocks_per_segment();
    let rows = u64::from(layout.zones_for_capacity(blocks)).div_ceil(per_row);
    let zone_count = u32::try_from(rows).map_err(|_| invalid(format!("{rows} zones")))? + extra_rows;
    let geometry = Geometry { zone_count, ..zones };
    let config = Config { level, declustering, ..config(mode(), CHUNK_BYTES, blocks) };
    let mut sim = Simulator::new(geometry, config, seed, Some(TimingParams::zn540()))?;
    let block = u64::from(zones.block_size_bytes);
    // One stripe's data per request: whole segments are a whole number of requests.
    let request_blocks = layout.data_chunks as u64 * layout.chunk_blocks;
    fill_sequentially(&mut sim, (blocks, block, request_blocks), PROGRESS_REQUESTS, progress, |lba| {
        stamped(lba, request_blocks, seed, block as usize)
    })?;
    Ok((sim, blocks))
}

/// Blocks `lba..lba + blocks` as the fill writes them: each its address and the seed,
/// repeated (`rebuild::fill_block`'s content, made without an iterator per byte).
pub fn stamped(lba: u64, blocks: u64, seed: u64, block_bytes: usize) -> Vec<u8> {
    let mut data = vec![0u8; blocks as usize * block_bytes];
    for (i, block) in data.chunks_exact_mut(block_bytes).enumerate() {
        let mut stamp = [0u8; 16];
        stamp[..8].copy_from_slice(&(lba + i as u64).to_le_bytes());
        stamp[8..].copy_from_slice(&seed.to_le_bytes());
        for piece in block.chunks_mut(stamp.len()) {
            piece.copy_from_slice(&stamp[..piece.len()]);
        }
    }
    data
}

/// A rebuild as it ran.
#[derive(Clone, Debug, PartialEq)]
pub struct RebuildRun {
    /// Virtual time from the start until the last segment was rebuilt.
    pub rebuild_ns: u64,
    /// What the rebuild wrote: the failed drive's segments' chunks (data and parity), with
    /// their headers and footers.
    pub rebuilt_bytes: u64,
    /// Segments it rebuilt.
    pub segments: u64,
    /// What each drive served during the rebuild (drive 0's replacement in a classic
    /// array; nothing for drive 0 of a declustered one, which stays failed).
    pub traffic: Vec<DriveTraffic>,
    /// Time the engine's simulated core was busy (0 if not charged), the rebuild's jobs it
    /// ran or waited for included.
    pub core_busy_ns: u64,
    /// Time the rebuild's jobs took, on every core together (0 if not charged).
    pub jobs_ns: u64,
}

/// Fails drive 0 of `sim` and rebuilds it, onto a new drive (a classic array) or into
/// distributed spare space, at most at `rate` bytes per second written; `on_step` runs
/// after every simulation step (users' I/O) and `progress` hears how far it is.
pub(super) fn fail_and_rebuild(
    sim: &mut Simulator,
    classic: bool,
    rate: Option<u64>,
    seed: u64,
    mut on_step: impl FnMut(&mut Simulator) -> Result<()>,
    progress: &mut impl FnMut(Progress),
) -> Result<RebuildRun> {
    sim.drives[FAILED_DRIVE].fail();
    sim.engine.fail_drive(FAILED_DRIVE);
    sim.set_rebuild_rate(rate);
    let before = sim.drive_traffic().to_vec();
    let (started_ns, busy_before, jobs_before) = (sim.now_ns(), sim.cpu_busy_ns(), sim.rebuild_jobs_ns());
    if classic {
        sim.replace_drive(FAILED_DRIVE, seed.wrapping_add(REPLACEMENT_SEED_OFFSET))?;
    } else {
        sim.rebuild_into_spares(FAILED_DRIVE)?;
    }
    let first = sim.engine.rebuild_status().ok_or_else(|| invalid("the rebuild did not start".into()))?;
    let segments = first.segments_left;
    let mut steps = 0u64;
    on_step(sim)?;
    while let Some(status) = sim.engine.rebuild_status() {
        if steps.is_multiple_of(PROGRESS_STEPS) {
            progress(Progress::Rebuilding { segments_rebuilt: status.segments_rebuilt, segments });
        }
        if !sim.step() {
            return Err(invalid("the rebuild stalled with segments left".into()));
        }
        steps += 1;
        on_step(sim)?;
    }
    let rebuild_ns = sim.now_ns() - started_ns;
    let last = sim.engine.last_rebuild().filter(|_| sim.engine.status().rebuilds_completed == 1);
    let last = last.ok_or_else(|| invalid("the rebuild was given up".into()))?;
    if !classic && sim.engine.drives_in_spare_space() != [FAILED_DRIVE] {
        return Err(invalid(format!("drive {FAILED_DRIVE} still holds lanes after its rebuild into spare space")));
    }
    let block = u64::from(sim.drives[1].geometry().block_size_bytes);
    let traffic = sim.drive_traffic().iter().zip(&before).map(|(now, then)| now.since(then)).collect();
    Ok(RebuildRun {
        rebuild_ns,
        rebuilt_bytes: last.blocks_written * block,
        segments,
        traffic,
        core_busy_ns: sim.cpu_busy_ns() - busy_before,
        jobs_ns: sim.rebuild_jobs_ns() - jobs_before,
    })
}

fn invalid(reason: String) -> Error {
    Error::InvalidConfig { reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamped_blocks_are_the_fill_s() {
        let data = stamped(40, 3, 9, 4096);
        let want: Vec<u8> = (40..43).flat_map(|l| crate::rebuild::fill_block(l, 9, 4096)).collect();
        assert!(data == want);
    }
}
