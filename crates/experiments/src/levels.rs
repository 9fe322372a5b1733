//! Exp#4 of the ZapRAID paper (RAID schemes): random writes at queue depth 64, request size
//! = chunk size (4, 8, 16 KiB), on four emulated WD ZN540 drives in virtual time, for
//! RAID-0, RAID-01, RAID-4, RAID-5 and RAID-6, ZapRAID (G = 256) against ZoneWrite-Only.
//!
//! This module owns the levels and schemes compared and one cell's measurement; a level
//! whose layout the engine cannot build is reported as such (`Cell::Refused`), not run.

use zapraid_zns::{Geometry, TimingParams};

use super::{config, random_writes, Measured, WRITE_LOGICAL_BLOCKS, WRITE_QUEUE_DEPTH};
use zapraid_engine::engine::Config;
use zapraid_engine::error::Result;
use zapraid_engine::layout::{Layout, Mode, RaidLevel, DEFAULT_GROUP_SIZE};

/// Drives of every Exp#4 array (the paper's four ZN540).
pub const DRIVES: usize = 4;

/// The RAID levels of Exp#4, on `DRIVES` drives.
pub fn levels() -> [RaidLevel; 5] {
    [
        RaidLevel::Raid0 { drives: DRIVES },
        RaidLevel::Raid01 { drives: DRIVES },
        RaidLevel::Raid4 { drives: DRIVES },
        RaidLevel::Raid5 { drives: DRIVES },
        RaidLevel::Raid6 { drives: DRIVES },
    ]
}

/// The schemes Exp#4 compares.
pub fn modes() -> [(&'static str, Mode); 2] {
    [("ZapRAID", Mode::ZapRaid { group_size: DEFAULT_GROUP_SIZE }), ("ZoneWrite-Only", Mode::ZoneWriteOnly)]
}

/// Chunk sizes of Exp#4.
pub const CHUNKS_BYTES: [u64; 3] = [4096, 8192, 16384];

/// One cell of Exp#4: measured, or why the engine cannot run the level.
#[derive(Clone, Debug)]
pub enum Cell {
    Measured(Measured),
    Refused { reason: String },
}

/// The array of one cell.
fn level_config(level: RaidLevel, mode: Mode, chunk_bytes: u64) -> Config {
    Config { level, ..config(mode, chunk_bytes, WRITE_LOGICAL_BLOCKS) }
}

/// Whether the engine builds `level` (on ZN540 zones, 4 KiB chunks): `Err` says why not.
pub fn supported(level: RaidLevel) -> std::result::Result<(), String> {
    Layout::new(&Geometry::zn540(), level, Mode::ZoneWriteOnly, CHUNKS_BYTES[0]).map(|_| ()).map_err(|e| e.to_string())
}

/// One cell: `requests` random writes of one chunk at queue depth 64.
pub fn exp4_cell(level: RaidLevel, mode: Mode, chunk_bytes: u64, requests: u64, seed: u64) -> Result<Cell> {
    if let Err(reason) = supported(level) {
        return Ok(Cell::Refused { reason });
    }
    let config = level_config(level, mode, chunk_bytes);
    let m = random_writes(Geometry::zn540(), TimingParams::zn540(), config, requests, WRITE_QUEUE_DEPTH, seed)?;
    Ok(Cell::Measured(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every level runs with a few requests and gives sane figures; RAID-0 (no parity)
    /// writes at least as fast as RAID-6 (two parity chunks of two data chunks).
    #[test]
    fn every_level_runs() {
        const REQUESTS: u64 = 300;
        let mut raid0 = 0.0;
        for level in levels() {
            let Cell::Measured(m) = exp4_cell(level, modes()[0].1, 4096, REQUESTS, 1).unwrap() else {
                panic!("{level}: layout refused");
            };
            assert!(m.mib_per_s.is_finite() && m.mib_per_s > 0.0, "{level}: {m:?}");
            if level == levels()[0] {
                raid0 = m.mib_per_s;
            }
            if matches!(level, RaidLevel::Raid6 { .. }) {
                assert!(raid0 >= m.mib_per_s, "RAID-0 {raid0} vs RAID-6 {}", m.mib_per_s);
            }
        }
    }
}
