//! What the engine reports of itself (`zapraid status`, tests, benches): space, segments,
//! failed drives, garbage collection, repairs, the rebuild and the scrub. A snapshot taken
//! from the engine's state; nothing here changes it.

use super::machine::Engine;
use super::rebuild::RebuildStatus;
use super::state::scrub::ScrubStatus;
use super::state::segment::Segment;

/// What the array holds and has done, for `zapraid status` and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    /// Segment numbers the array may use now (free or holding a segment).
    pub zones: u32,
    pub free_zones: u32,
    /// Segments holding data (open, sealing, sealed or being relocated).
    pub segments: u32,
    pub open_segments: u32,
    /// Logical blocks mapped to a place on the drives (written at least once).
    pub mapped_blocks: u64,
    /// The L2P table: its memory budget, cache and traffic with the drives.
    pub l2p: L2pStatus,
    pub failed_drives: Vec<usize>,
    /// Segments garbage collection reclaimed, and live blocks it moved (lost-block markers
    /// it wrote or moved are not counted).
    pub segments_reclaimed: u64,
    pub blocks_relocated: u64,
    /// Recovered open segments still waiting to be rewritten and reclaimed.
    pub segments_to_reclaim: u32,
    /// Damage the last start found on the drives and what it rebuilt or lost.
    pub recovery_repairs: crate::recovery::Repairs,
    /// What the last start read: a checkpoint (its generation) or every segment.
    pub start: crate::recovery::RecoveryReport,
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
    /// Logical blocks recorded lost (`lost`): they read as errors until written again.
    pub blocks_lost: u64,
    /// Segments known to hold blocks that cannot be read or rebuilt, not reclaimed yet
    /// (their lost blocks are recorded as they are).
    pub segments_with_holes: u32,
    /// Blocks rebuilds since the start could not reconstruct.
    pub rebuild_blocks_unrecoverable: u64,
    /// An array wider than its stripes: its placement and where its spare space stands
    /// (None for a classic array).
    pub declustered: Option<DeclusteredStatus>,
}

/// A declustered array's placement and distributed spare space (`lanes`, `placement`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeclusteredStatus {
    /// N, the array's drives, and the k + m each segment takes.
    pub drives: u32,
    pub stripe_drives: u32,
    /// Segments per zone index (groups per row) and zones per drive kept as spare space
    /// (per row: N - groups x stripe).
    pub segments_per_row: u32,
    pub spare_zones_per_row: u32,
    /// Distributed spares the array was formatted with (S drives' worth).
    pub distributed_spares: u32,
    /// Spare zones on working drives, and of those, zones a moved lane takes.
    pub spare_zones: u64,
    pub spare_zones_used: u64,
    /// Failed drives no segment number has a lane on (rebuilt into spare space).
    pub drives_in_spare_space: Vec<usize>,
    /// Segments lacking more lanes than parity covers (`Engine::segments_beyond_parity`):
    /// some of their blocks cannot be read.
    pub segments_beyond_parity: u64,
    /// Segments with a lane in spare space whose home drive works again, waiting to be
    /// moved back by garbage collection (`rebalance`).
    pub segments_to_rebalance: u64,
    /// Live blocks the rebalance moved since the start.
    pub blocks_rebalanced: u64,
    /// Placements the array has had (1 until a grow, `lanes::epochs`), rows of the drives
    /// still in an older one than the newest (moved as garbage collection empties them),
    /// and rows moved to the newest since the start.
    pub placements: u32,
    pub rows_to_grow: u64,
    pub rows_grown: u64,
}

/// The L2P table's cache (`l2p`, `mapping`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct L2pStatus {
    /// The memory budget (None: every page stays in memory).
    pub budget_bytes: Option<u64>,
    /// Pages of the table, entries per page, and how many are cached and dirty.
    pub pages: u64,
    pub entries_per_page: u64,
    pub cached_pages: usize,
    pub dirty_pages: usize,
    /// Pages whose newest copy is a mapping block on the drives.
    pub pages_on_drives: u64,
    /// Bytes the cached pages and the per-page directory take.
    pub memory_bytes: u64,
    /// More pages cached than the budget: requests in flight pin them.
    pub pinned_over_budget: bool,
    /// Page lookups, those that found the page cached, mapping blocks read and written,
    /// and pages evicted, since the start.
    pub lookups: u64,
    pub hits: u64,
    pub mapping_reads: u64,
    pub mapping_writes: u64,
    pub evictions: u64,
    /// Most pages cached at once since the start (the budget, plus pins in flight).
    pub peak_cached_pages: u64,
    /// Pages whose mapping block could not be read, even from parity, rebuilt from the
    /// segments' footers since the start (`page_rebuild`).
    pub pages_rebuilt: u64,
    /// Checkpoints taken while running since the start (`running_checkpoint`), and those
    /// abandoned (no room for the table, or the driver could not write the image).
    pub checkpoints_running: u64,
    pub checkpoints_abandoned: u64,
    /// Of the checkpoints taken while running, those incremental (`checkpoint_base`), and
    /// the bytes of their images (one copy; each is written to every working drive).
    pub checkpoints_incremental: u64,
    pub checkpoint_image_bytes: u64,
}

impl L2pStatus {
    /// Lookups that found their page cached, in percent (100 before any lookup).
    pub fn hit_rate_percent(&self) -> f64 {
        if self.lookups == 0 {
            100.0
        } else {
            self.hits as f64 * 100.0 / self.lookups as f64
        }
    }
}

impl Engine {
    fn l2p_status(&self) -> L2pStatus {
        let stats = self.l2p.stats();
        let budget_pages = self.l2p.budget_pages();
        L2pStatus {
            budget_bytes: self.l2p_budget_bytes(),
            pages: self.l2p.page_count() as u64,
            entries_per_page: self.l2p.entries_per_page(),
            cached_pages: self.l2p.cached_pages(),
            dirty_pages: self.l2p.dirty_pages(),
            pages_on_drives: self.l2p.pages_on_drives(),
            memory_bytes: self.l2p.memory_bytes() as u64,
            pinned_over_budget: budget_pages.is_some_and(|b| self.l2p.cached_pages() > b),
            lookups: stats.lookups,
            hits: stats.hits,
            mapping_reads: stats.mapping_reads,
            mapping_writes: stats.mapping_writes,
            evictions: stats.evictions,
            peak_cached_pages: stats.peak_cached_pages,
            pages_rebuilt: self.mapping.pages_rebuilt,
            checkpoints_running: self.checkpoints.taken,
            checkpoints_abandoned: self.checkpoints.abandoned,
            checkpoints_incremental: self.checkpoints.incremental,
            checkpoint_image_bytes: self.checkpoints.image_bytes_written,
        }
    }

    pub fn status(&self) -> Status {
        let segments = || self.segments.iter().flatten();
        let l2p = self.l2p_status();
        Status {
            // The numbers in use: a grown array's rows use their own placement's only.
            zones: self.lanes.usable_segments(),
            free_zones: self.free_zones.len() as u32,
            segments: segments().count() as u32,
            open_segments: self.slots.iter().flatten().count() as u32,
            // Live blocks counted per segment include the pages' mapping blocks.
            // (Saturating: after a page was rebuilt, counts may be short, `page_rebuild`.)
            mapped_blocks: segments().map(|s| s.valid_blocks).sum::<u64>().saturating_sub(l2p.pages_on_drives),
            l2p,
            failed_drives: (0..self.failed.len()).filter(|d| self.failed[*d]).collect(),
            declustered: self.declustered_status(),
            segments_reclaimed: self.segments_reclaimed,
            blocks_relocated: self.blocks_relocated,
            segments_to_reclaim: segments().filter(|s| s.reclaim_first).count() as u32,
            recovery_repairs: self.recovery_repairs,
            start: self.start_report,
            read_blocks_repaired: self.read_blocks_repaired,
            rebuild: self.rebuild_status(),
            rebuilds_completed: self.rebuilds_completed,
            scrub: self.scrub_status(),
            rebuild_rate_bytes_per_s: self.rebuild_rate_bytes_per_s(),
            blocks_lost: self.blocks_lost(),
            segments_with_holes: self.segments_with_holes(),
            rebuild_blocks_unrecoverable: self.rebuild_blocks_unrecoverable,
        }
    }
}

impl Engine {
    /// Segments that lack more lanes than parity covers (on failed drives, or waiting for
    /// a rebuild to write them), if drive `also_failing` failed too: their blocks cannot
    /// all be read. What a drive failure may be refused by on a declustered array, where
    /// each segment has its own drives.
    pub fn segments_beyond_parity(&self, also_failing: Option<usize>) -> u64 {
        let tolerated = self.config.level.tolerated_failures();
        let lacking = |zone: u32, s: &Segment| {
            (0..self.layout.drives())
                .filter(|&lane| {
                    let drive = self.lanes.drive(zone, lane);
                    self.failed[drive] || Some(drive) == also_failing || s.absent == Some(lane)
                })
                .count()
        };
        let segments = self.segments.iter().enumerate();
        segments
            .filter_map(|(zone, s)| Some((zone as u32, s.as_ref()?)))
            .filter(|(z, s)| lacking(*z, s) > tolerated)
            .count() as u64
    }

    fn declustered_status(&self) -> Option<DeclusteredStatus> {
        if self.lanes.is_classic() {
            return None;
        }
        let (spare_zones, spare_zones_used) = self.lanes.spare_zones(&self.failed);
        Some(DeclusteredStatus {
            drives: self.lanes.drives() as u32,
            stripe_drives: self.layout.drives() as u32,
            segments_per_row: self.lanes.groups(),
            spare_zones_per_row: self.lanes.spare_positions_per_row(),
            distributed_spares: self.config.declustering.distributed_spares,
            spare_zones,
            spare_zones_used,
            drives_in_spare_space: self.drives_in_spare_space(),
            segments_beyond_parity: self.segments_beyond_parity(None),
            segments_to_rebalance: self.segments_to_rebalance(),
            blocks_rebalanced: self.blocks_rebalanced,
            placements: self.lanes.epochs() as u32,
            rows_to_grow: self.rows_to_grow(),
            rows_grown: self.rows_grown,
        })
    }
}
