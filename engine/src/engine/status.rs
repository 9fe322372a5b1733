//! What the engine reports of itself (`zapraid status`, tests, benches): space, segments,
//! failed drives, garbage collection, repairs, the rebuild and the scrub. A snapshot taken
//! from the engine's state; nothing here changes it.

use super::*;

/// What the array holds and has done, for `zapraid status` and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    pub zones: u32,
    pub free_zones: u32,
    /// Segments holding data (open, sealing, sealed or being relocated).
    pub segments: u32,
    pub open_segments: u32,
    /// Logical blocks mapped to a place on the drives (written at least once).
    pub mapped_blocks: u64,
    pub failed_drives: Vec<usize>,
    /// Segments garbage collection reclaimed, and live blocks it moved.
    pub segments_reclaimed: u64,
    pub blocks_relocated: u64,
    /// Recovered open segments still waiting to be rewritten and reclaimed.
    pub segments_to_reclaim: u32,
    /// Damage the last start found on the drives and what it rebuilt or lost.
    pub recovery_repairs: crate::recovery::Repairs,
    /// Blocks read from a working drive that were damaged (bad checksum, wrong LBA or
    /// segment, media error) and were rebuilt from their stripe.
    pub read_blocks_repaired: u64,
    /// The drive rebuild running, if any, and rebuilds finished since the start.
    pub rebuild: Option<RebuildStatus>,
    pub rebuilds_completed: u64,
    /// The scrub running, the last one, and repairs of damaged blocks.
    pub scrub: ScrubStatus,
    /// The rebuilds' rate limit in bytes per second written to the new drive (None:
    /// unlimited).
    pub rebuild_rate_bytes_per_s: Option<u64>,
}

impl Engine {
    pub fn status(&self) -> Status {
        let segments = || self.segments.iter().flatten();
        Status {
            zones: self.geometry.zone_count,
            free_zones: self.free_zones.len() as u32,
            segments: segments().count() as u32,
            open_segments: self.slots.iter().flatten().count() as u32,
            mapped_blocks: segments().map(|s| s.valid_blocks).sum(),
            failed_drives: (0..self.failed.len()).filter(|d| self.failed[*d]).collect(),
            segments_reclaimed: self.segments_reclaimed,
            blocks_relocated: self.blocks_relocated,
            segments_to_reclaim: segments().filter(|s| s.reclaim_first).count() as u32,
            recovery_repairs: self.recovery_repairs,
            read_blocks_repaired: self.read_blocks_repaired,
            rebuild: self.rebuild_status(),
            rebuilds_completed: self.rebuilds_completed,
            scrub: self.scrub_status(),
            rebuild_rate_bytes_per_s: self.rebuild_rate_bytes_per_s(),
        }
    }
}
