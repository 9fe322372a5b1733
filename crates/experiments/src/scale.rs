//! Exp#6 of the ZapRAID paper (scalability) in virtual time: random writes of one chunk
//! against the number of requests in flight (queue depth 1 to 128) on the paper's
//! (3+1)-RAID-5 of emulated WD ZN540 drives, and a (6+1)-RAID-5 on seven FEMU-like drives
//! at queue depth 128 (the paper's FEMU setting: 16 chips per zone, 140 us page writes,
//! 446.4 MiB/s per zone).
//!
//! This module owns the sweep's points, the FEMU-like drive's timing and geometry, and
//! the paper's figures for it. The closed loop is the parent's (`bench`).

use zapraid_zns::{Geometry, TimingParams};

use super::{config, random_writes, Measured, WRITE_LOGICAL_BLOCKS};
use zapraid_engine::engine::Config;
use zapraid_engine::error::Result;
use zapraid_engine::layout::{Mode, RaidLevel};

/// Queue depths of the sweep (the paper's 1 to 128, powers of two).
pub const QUEUE_DEPTHS: [u64; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

/// Chunk sizes of both parts.
pub const CHUNKS_BYTES: [u64; 3] = [4096, 8192, 16384];

/// One point of the queue depth sweep on the (3+1)-RAID-5 of ZN540 drives.
pub fn qd_point(mode: Mode, chunk_bytes: u64, queue_depth: u64, requests: u64, seed: u64) -> Result<Measured> {
    let config = config(mode, chunk_bytes, WRITE_LOGICAL_BLOCKS);
    random_writes(Geometry::zn540(), TimingParams::zn540(), config, requests, queue_depth, seed)
}

/// Drives of the FEMU array: (6+1)-RAID-5.
pub const FEMU_DRIVES: usize = 7;
/// Requests in flight on the FEMU array (the paper's figure is at QD 128).
pub const FEMU_QUEUE_DEPTH: u64 = 128;
/// Flash chips one zone of the FEMU-like drive is striped over.
pub const FEMU_CHIPS_PER_ZONE: u32 = 16;
/// Time a chip of the FEMU-like drive programs one page.
pub const FEMU_PAGE_PROGRAM_NS: u64 = 140_000;
/// One 4 KiB block per page: 16 chips x 4 KiB per 140 us is 446.4 MiB/s per zone, the
/// paper's per-zone bandwidth.
pub const FEMU_BLOCKS_PER_PAGE: u32 = 1;
/// Chips of the whole drive (two zones' worth, so that a segment being sealed and the
/// open one do not share chips) and the channels they hang off.
const FEMU_CHIPS: u32 = 2 * FEMU_CHIPS_PER_ZONE;
const FEMU_CHANNELS: u32 = 8;

/// The paper's Exp#6 FEMU throughput (MiB/s) at 4, 8, 16 KiB chunks, QD 128.
pub const PAPER_FEMU_MIB_PER_S: [f64; 3] = [1745.5, 2384.6, 2554.2];
/// The queue depth where the paper's ZN540 array saturates.
pub const PAPER_SATURATION_QUEUE_DEPTH: u64 = 16;

/// The FEMU-like drive: the ZN540 model's controller and append path, with the FEMU
/// setting's flash (16 chips per zone, 140 us per 4 KiB page).
pub fn femu_timing() -> TimingParams {
    TimingParams {
        chips: FEMU_CHIPS,
        channels: FEMU_CHANNELS,
        chips_per_zone: FEMU_CHIPS_PER_ZONE,
        blocks_per_page: FEMU_BLOCKS_PER_PAGE,
        page_program_ns: FEMU_PAGE_PROGRAM_NS,
        ..TimingParams::zn540()
    }
}

/// Bytes per second one zone of the FEMU-like drive programs: chips per zone times a
/// page per page-program time.
pub fn femu_zone_mib_per_s() -> f64 {
    const MIB: f64 = (1 << 20) as f64;
    let t = femu_timing();
    let page_bytes = f64::from(t.blocks_per_page) * f64::from(Geometry::zn540().block_size_bytes);
    f64::from(t.chips_per_zone) * page_bytes / (t.page_program_ns as f64 / 1e9) / MIB
}

/// Zones of each FEMU-like drive (ZN540-shaped zones): seven drives of all 3,690 would
/// address more blocks than the engine's 4-byte L2P entries can name, and the writes
/// need far fewer.
const FEMU_ZONES: u32 = 256;

/// The FEMU-like drive's geometry: ZN540 zones, `FEMU_ZONES` of them.
pub fn femu_geometry() -> Geometry {
    Geometry { zone_count: FEMU_ZONES, ..Geometry::zn540() }
}

/// One point of the FEMU part: (6+1)-RAID-5 in `mode`, `chunk_bytes` chunks, QD 128.
pub fn femu_point(mode: Mode, chunk_bytes: u64, requests: u64, seed: u64) -> Result<Measured> {
    let config =
        Config { level: RaidLevel::Raid5 { drives: FEMU_DRIVES }, ..config(mode, chunk_bytes, WRITE_LOGICAL_BLOCKS) };
    random_writes(femu_geometry(), femu_timing(), config, requests, FEMU_QUEUE_DEPTH, seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_femu_zone_bandwidth_is_the_papers() {
        const PAPER_ZONE_MIB_PER_S: f64 = 446.4;
        assert!((femu_zone_mib_per_s() - PAPER_ZONE_MIB_PER_S).abs() < 0.1, "{}", femu_zone_mib_per_s());
        femu_timing().validate().unwrap();
    }

    /// More requests in flight never make the array much slower, and QD 1 is slower than
    /// QD 64 (a few requests each: shape, not figures).
    #[test]
    fn throughput_grows_with_queue_depth() {
        const REQUESTS: u64 = 400;
        let mode = Mode::ZapRaid { group_size: zapraid_engine::layout::DEFAULT_GROUP_SIZE };
        let one = qd_point(mode, 4096, 1, REQUESTS, 1).unwrap();
        let many = qd_point(mode, 4096, 64, REQUESTS, 1).unwrap();
        assert!(many.mib_per_s > one.mib_per_s, "{one:?} {many:?}");
        let femu = femu_point(mode, 16384, REQUESTS, 1).unwrap();
        assert!(femu.mib_per_s > 0.0);
    }
}
