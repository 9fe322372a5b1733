//! Exp#5 of the ZapRAID paper, full-drive recovery, on emulated WD ZN540 drives in virtual
//! time: a (3+1)-RAID-5 is filled with sequential writes, drive 0 fails, an empty drive
//! takes its place (`Simulator::replace_drive`) and the time until the online rebuild has
//! written every segment onto it is measured, for 4, 8 and 16 KiB chunks, ZapRAID (G = 256)
//! and ZoneWrite-Only.
//!
//! The simulator keeps the data in memory, so runs are of a few GiB, in whole sealed
//! segments (a segment open when the rebuild starts is reclaimed by garbage collection
//! rather than rebuilt), on the recovery measurements' 62 MiB zones so that such sizes
//! make many segments; the figures are given per 100 GiB of data written. Beside them:
//! the bound the new drive's write bandwidth sets, its Zone Write bandwidth for writes of
//! the rebuild's size (consecutive chunks up to a transfer: `rebuild_write_bytes`, 128 KiB
//! on the ZN540) measured on the same timing model (`zapraid_zns::calibrate`), one zone at
//! queue depth 1 (how a rebuild of a segment at a time writes, in order) and the best of 1
//! to 8 open zones (the drive's ceiling, which a rebuild of several segments at once,
//! the engine's default, can come near: `segments_at_once`).

use zapraid_zns::calibrate::{measure, Workload, WriteKind, MAX_OPEN_ZONES, REQUESTS_PER_POINT};
use zapraid_zns::{Geometry, TimingParams};

use super::{closed_loop, config, recovery_zones, settle, PAPER_LEVEL};
use zapraid_engine::chunks_per_transfer;
use zapraid_engine::engine::Request;
use zapraid_engine::error::{Error, Result};
use zapraid_engine::layout::{Layout, Mode, DEFAULT_GROUP_SIZE};
use zapraid_engine::sim::Simulator;

/// Chunk sizes of the paper's full-drive recovery.
pub const CHUNKS_BYTES: [u64; 3] = [4096, 8192, 16384];
/// The paper's full-drive recovery on real ZN540 drives at 4 KiB chunks.
pub const PAPER_4K_S_PER_100_GIB: f64 = 81.9;
/// How much less the paper's full-drive recovery takes at 8 and 16 KiB chunks than at
/// 4 KiB: 18% to 24%.
pub const PAPER_LARGER_CHUNKS_LESS: (f64, f64) = (0.18, 0.24);
/// The drive that fails and is replaced.
pub const FAILED_DRIVE: usize = 0;
/// Bytes in 100 GiB, the unit of the figures.
pub const HUNDRED_GIB_BYTES: f64 = 100.0 * (1u64 << 30) as f64;

/// Requests of the fill in flight at once.
const FILL_QUEUE_DEPTH: u64 = 16;
/// The replacement drive's seed is the array's plus this.
pub(super) const REPLACEMENT_SEED_OFFSET: u64 = 1000;
/// Simulation steps between progress reports.
pub(super) const PROGRESS_STEPS: u64 = 1 << 14;
/// Fill requests between progress reports.
const PROGRESS_REQUESTS: u64 = 1 << 12;

/// The two schemes measured: ZapRAID and ZoneWrite-Only (Zone Append-only rebuilds the
/// same way as ZapRAID's Zone Append groups).
pub fn modes() -> [(&'static str, Mode); 2] {
    [("ZapRAID", Mode::ZapRaid { group_size: DEFAULT_GROUP_SIZE }), ("ZoneWrite-Only", Mode::ZoneWriteOnly)]
}

/// Where a measurement is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Writing the data before the drive fails.
    Filling { bytes_written: u64, bytes: u64 },
    /// Rebuilding onto the new drive.
    Rebuilding { segments_rebuilt: u64, segments: u64 },
}

/// One full-drive recovery measurement.
#[derive(Clone, Copy, Debug)]
pub struct RebuildPoint {
    pub chunk_bytes: u64,
    /// Data written to the array (sequential writes) before the drive failed.
    pub data_bytes: u64,
    /// Segments rebuilt onto the new drive.
    pub segments: u64,
    /// Segments the rebuild wrote at once (`Engine::rebuild_segments_at_once`).
    pub segments_at_once: u32,
    /// What the rebuild wrote to the new drive: its chunks (data and parity), headers and
    /// footers.
    pub new_drive_bytes: u64,
    /// Virtual time from the replacement until the last segment was rebuilt.
    pub rebuild_s: f64,
    /// The new drive's Zone Write bandwidth for writes of the rebuild's size
    /// (`rebuild_write_bytes`) in the timing model: one zone at queue depth 1, and the
    /// best of 1 to `MAX_OPEN_ZONES` open zones.
    pub one_zone_write_mib_per_s: f64,
    pub drive_write_mib_per_s: f64,
}

impl RebuildPoint {
    /// Rebuild time per 100 GiB of data written to the array.
    pub fn s_per_100_gib(&self) -> f64 {
        self.per_100_gib(self.rebuild_s)
    }

    /// The new drive's write bound per 100 GiB of data: what it receives over its Zone
    /// Write bandwidth, one zone at queue depth 1.
    pub fn one_zone_bound_s_per_100_gib(&self) -> f64 {
        self.per_100_gib(self.write_s(self.one_zone_write_mib_per_s))
    }

    /// Like `one_zone_bound_s_per_100_gib`, at the drive's best Zone Write bandwidth.
    pub fn drive_bound_s_per_100_gib(&self) -> f64 {
        self.per_100_gib(self.write_s(self.drive_write_mib_per_s))
    }

    /// MiB/s the new drive was written at during the rebuild.
    pub fn new_drive_mib_per_s(&self) -> f64 {
        self.new_drive_bytes as f64 / MIB / self.rebuild_s
    }

    fn write_s(&self, mib_per_s: f64) -> f64 {
        self.new_drive_bytes as f64 / MIB / mib_per_s
    }

    fn per_100_gib(&self, seconds: f64) -> f64 {
        seconds * HUNDRED_GIB_BYTES / self.data_bytes as f64
    }
}

const MIB: f64 = (1u64 << 20) as f64;

/// Fills a (3+1)-RAID-5 of `mode` and `chunk_bytes` chunks with `sealed_segments` full
/// segments of sequential writes on 62 MiB zones with ZN540 timing, fails drive 0,
/// replaces it and measures the rebuild, of `segments_at_once` segments at once (None:
/// as many as the engine takes by default); `progress` hears how far it is.
pub fn rebuild_point(
    mode: Mode,
    chunk_bytes: u64,
    sealed_segments: u64,
    segments_at_once: Option<u32>,
    seed: u64,
    progress: impl FnMut(Progress),
) -> Result<RebuildPoint> {
    let zones = rebuild_zones();
    Ok(rebuild_on(zones, mode, chunk_bytes, sealed_segments, segments_at_once, seed, progress)?.0)
}

/// The recovery measurements' zones with the ZN540's transfer limits: the rebuild writes
/// as much as one transfer takes, so a larger limit than the drive's would flatter it.
pub(super) fn rebuild_zones() -> Geometry {
    let zn540 = Geometry::zn540();
    Geometry {
        max_transfer_blocks: zn540.max_transfer_blocks,
        transfer_granule_blocks: 0,
        zone_append_max_blocks: zn540.zone_append_max_blocks,
        ..recovery_zones()
    }
}

/// The content of logical block `lba` in the fill: its address and the seed, repeated,
/// so that a block read from the wrong place or rebuilt wrong does not match.
pub(super) fn fill_block(lba: u64, seed: u64, block_bytes: usize) -> Vec<u8> {
    let stamp = [lba.to_le_bytes(), seed.to_le_bytes()].concat();
    stamp.iter().copied().cycle().take(block_bytes).collect()
}

/// A (3+1)-RAID-5 of `mode` and `chunk_bytes` chunks on drives with ZN540 timing whose
/// zones are shaped like `zones` (as many as the data needs, plus `extra_zones`), filled
/// with `sealed_segments` full segments of sequential writes (`fill_block`) and settled;
/// also returns the blocks written (the array's logical blocks).
pub(super) fn filled(
    zones: Geometry,
    mode: Mode,
    chunk_bytes: u64,
    sealed_segments: u64,
    extra_zones: u32,
    seed: u64,
    progress: &mut impl FnMut(Progress),
) -> Result<(Simulator, u64)> {
    let layout = Layout::new(&zones, PAPER_LEVEL, mode, chunk_bytes)?;
    let block = u64::from(zones.block_size_bytes);
    // One stripe's data per request: whole segments are a whole number of requests.
    let request_blocks = layout.data_chunks as u64 * layout.chunk_blocks;
    let blocks = sealed_segments * layout.data_blocks_per_segment();
    let geometry = Geometry { zone_count: layout.zones_for_capacity(blocks) + extra_zones, ..zones };
    let config = config(mode, chunk_bytes, blocks);
    let mut sim = Simulator::new(geometry, config, seed, Some(TimingParams::zn540()))?;
    fill_sequentially(&mut sim, (blocks, block, request_blocks), PROGRESS_REQUESTS, progress, |lba| {
        (lba..lba + request_blocks).flat_map(|l| fill_block(l, seed, block as usize)).collect()
    })?;
    Ok((sim, blocks))
}

/// Writes blocks 0..`blocks` of `sim` (blocks of `block` bytes) in order,
/// `request_blocks` per request (the data `data_at` gives for the request at each LBA),
/// `FILL_QUEUE_DEPTH` in flight, saying how far it is every `progress_requests` requests,
/// and lets the array settle.
pub(super) fn fill_sequentially(
    sim: &mut Simulator,
    (blocks, block, request_blocks): (u64, u64, u64),
    progress_requests: u64,
    progress: &mut impl FnMut(Progress),
    mut data_at: impl FnMut(u64) -> Vec<u8>,
) -> Result<()> {
    let data_bytes = blocks * block;
    let mut next_lba = 0;
    closed_loop(sim, blocks / request_blocks, FILL_QUEUE_DEPTH, request_blocks * block, |_| {
        let lba = next_lba;
        next_lba += request_blocks;
        if (lba / request_blocks).is_multiple_of(progress_requests) {
            progress(Progress::Filling { bytes_written: lba * block, bytes: data_bytes });
        }
        Request::Write { lba, data: data_at(lba) }
    })?;
    settle(sim)?;
    Ok(())
}

/// Like `rebuild_point`, on drives whose zones are shaped like `zones` (as many as the data
/// needs); also returns the simulator after the rebuild and the blocks written.
fn rebuild_on(
    zones: Geometry,
    mode: Mode,
    chunk_bytes: u64,
    sealed_segments: u64,
    segments_at_once: Option<u32>,
    seed: u64,
    mut progress: impl FnMut(Progress),
) -> Result<(RebuildPoint, Simulator, u64)> {
    let (mut sim, blocks) = filled(zones, mode, chunk_bytes, sealed_segments, 0, seed, &mut progress)?;
    if let Some(segments) = segments_at_once {
        sim.engine.set_rebuild_segments_at_once(segments);
    }
    let block = u64::from(zones.block_size_bytes);
    let data_bytes = blocks * block;
    sim.drives[FAILED_DRIVE].fail();
    sim.engine.fail_drive(FAILED_DRIVE);
    let started_ns = sim.now_ns();
    sim.replace_drive(FAILED_DRIVE, seed.wrapping_add(REPLACEMENT_SEED_OFFSET))?;
    let stalled = |what: &str| Error::InvalidConfig { reason: format!("the rebuild {what}") };
    let mut last = sim.engine.rebuild_status().ok_or_else(|| stalled("did not start"))?;
    let segments = last.segments_left;
    let mut steps = 0u64;
    while let Some(status) = sim.engine.rebuild_status() {
        last = status;
        if !sim.step() {
            return Err(stalled("stalled with segments left to rebuild"));
        }
        steps += 1;
        if steps.is_multiple_of(PROGRESS_STEPS) {
            progress(Progress::Rebuilding { segments_rebuilt: last.segments_rebuilt, segments });
        }
    }
    let rebuild_ns = sim.now_ns() - started_ns;
    if sim.engine.status().rebuilds_completed != 1 {
        return Err(stalled("was given up"));
    }
    // Measured on the ZN540's timing model, which takes no more than its own transfer.
    let zn540_transfer_bytes = u64::from(Geometry::zn540().max_transfer_blocks) * block;
    let write_bytes = rebuild_write_bytes(&zones, chunk_bytes).min(zn540_transfer_bytes.max(chunk_bytes));
    let (one_zone_write_mib_per_s, drive_write_mib_per_s) = zone_write_bandwidth(write_bytes, seed)?;
    let point = RebuildPoint {
        chunk_bytes,
        data_bytes,
        segments,
        segments_at_once: sim.engine.rebuild_segments_at_once(),
        new_drive_bytes: last.blocks_written * block,
        rebuild_s: rebuild_ns as f64 / 1e9,
        one_zone_write_mib_per_s,
        drive_write_mib_per_s,
    };
    Ok((point, sim, blocks))
}

/// The ZN540 timing model's Zone Write bandwidth (MiB/s) for `request_bytes` writes at
/// queue depth 1 per zone: on one zone, and the best of 1 to `MAX_OPEN_ZONES` zones.
/// The largest write a rebuild makes of chunks of `chunk_bytes` on drives of `geometry`:
/// as many consecutive chunks as one transfer takes (`engine::rebuild`), at least one.
pub fn rebuild_write_bytes(geometry: &Geometry, chunk_bytes: u64) -> u64 {
    let chunk_blocks = chunk_bytes / u64::from(geometry.block_size_bytes);
    chunks_per_transfer(geometry, chunk_blocks) * chunk_bytes
}

pub fn zone_write_bandwidth(request_bytes: u64, seed: u64) -> Result<(f64, f64)> {
    let device = |error| Error::Device { drive: FAILED_DRIVE, error };
    let request_bytes = u32::try_from(request_bytes)
        .map_err(|_| Error::InvalidConfig { reason: format!("{request_bytes} B requests") })?;
    let at = |open_zones| {
        let workload = Workload {
            kind: WriteKind::ZoneWrite,
            request_bytes,
            open_zones,
            queue_depth: 1,
            requests: REQUESTS_PER_POINT,
        };
        measure(&TimingParams::zn540(), Geometry::zn540(), workload, seed).map_err(device)
    };
    let one_zone = at(1)?;
    let mut best = one_zone;
    for open_zones in 2..=MAX_OPEN_ZONES {
        best = best.max(at(open_zones)?);
    }
    Ok((one_zone, best))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The measurement runs on zones small enough for a test and gives positive figures,
    /// and the rebuilt drive holds the right data: with another drive failed afterwards,
    /// every block still reads back as written. Never asserts on timings.
    #[test]
    fn rebuild_measurement_runs_and_the_rebuilt_array_verifies() {
        const SEALED: u64 = 2;
        const SEED: u64 = 5;
        const OTHER_DRIVE: usize = 2;
        const READ_BLOCKS: u64 = 64;
        // Request ids of the reads: past the fill's.
        const READ_IDS: u64 = 1 << 40;
        let zones = Geometry::small(1, 256, 240);
        for (name, mode) in modes() {
            for chunk_bytes in [4096, 16384] {
                let what = format!("{name}, {chunk_bytes} B chunks");
                let mut reports = 0;
                let (point, mut sim, blocks) =
                    rebuild_on(zones, mode, chunk_bytes, SEALED, None, SEED, |_| reports += 1).unwrap();
                assert!(reports > 0, "{what}: no progress reported");
                assert_eq!(point.segments, SEALED, "{what}: {point:?}");
                assert!(point.new_drive_bytes >= point.data_bytes / 3, "{what}: {point:?}");
                for figure in [
                    point.s_per_100_gib(),
                    point.one_zone_bound_s_per_100_gib(),
                    point.drive_bound_s_per_100_gib(),
                    point.new_drive_mib_per_s(),
                ] {
                    assert!(figure.is_finite() && figure > 0.0, "{what}: {point:?}");
                }
                settle(&mut sim).unwrap();
                sim.drives[OTHER_DRIVE].fail();
                sim.engine.fail_drive(OTHER_DRIVE);
                for (i, lba) in (0..blocks).step_by(READ_BLOCKS as usize).enumerate() {
                    let (id, count) = (READ_IDS + i as u64, READ_BLOCKS.min(blocks - lba));
                    sim.submit(id, Request::Read { lba, blocks: count });
                    let got = sim.run_until_response(id).expect("answered").result;
                    let got = got.unwrap_or_else(|e| panic!("{what}: read of LBA {lba} failed: {e}"));
                    let want: Vec<u8> = (lba..lba + count).flat_map(|l| fill_block(l, SEED, 4096)).collect();
                    assert!(got == want, "{what}: LBAs {lba}..{} differ after the rebuild", lba + count);
                }
            }
        }
    }

    /// Same seed, same measurement (virtual time is deterministic).
    #[test]
    fn same_seed_same_figures() {
        let zones = Geometry::small(1, 256, 240);
        let run = || {
            let (point, _, _) = rebuild_on(zones, Mode::ZoneWriteOnly, 8192, 1, None, 9, |_| {}).unwrap();
            (point.rebuild_s.to_bits(), point.new_drive_bytes, point.segments)
        };
        assert_eq!(run(), run());
    }
}
