//! The space and zone budget of an array: how many logical blocks it may export so that
//! garbage collection can always make room, and how many zones per drive it keeps active.
//!
//! Zones of a drive (every segment takes the same zone on all drives) are, at any moment:
//! empty (free), an open segment (one per slot, `hybrid`), a segment being sealed (footer
//! in flight, zones being finished; at most one per slot), the segment being relocated, or
//! sealed segments (candidates for garbage collection; recovered open segments waiting to
//! be reclaimed are among them).
//!
//! The engine keeps these rules (`engine.rs`):
//! - garbage collection looks for a victim when `GC_START_FREE_ZONES` empty zones are left
//!   (checked whenever a segment opens or is sealed, a block dies or a relocation ends);
//! - a victim is worth relocating only if its live blocks fit in fewer stripes than a
//!   segment has (`Layout::gc_victim_max_live_blocks`): moving it frees at least a stripe;
//! - while a relocation runs, user stripes leave `GC_RESERVED_ZONES` empty zones to it
//!   beyond the recovery reserve, and when it may open no zone, the rest of the open
//!   segment: its live blocks fit in one segment, so it always finishes;
//! - nobody opens the last `RECOVERY_RESERVED_ZONES` empty zones in normal running. After a
//!   crash, the segments that were open (the open one and one being sealed: the zones
//!   recovery holds, counted in the reserve as such) are closed for good, and rewriting
//!   their live blocks needs an empty zone. After a restart, relocations may use the
//!   reserve until those segments are reclaimed and `GC_START_FREE_ZONES` zones are empty
//!   again. (A second power cut in that window may find no empty zone.)
//!
//! Invariant (why `capacity_blocks` is what it is): when garbage collection must pick a
//! victim, at most `GC_START_FREE_ZONES` zones are empty, and each slot holds an open
//! segment and at most one being sealed, so at least `zones - reserved_segments()` zones
//! hold candidates.
//! Every live block is in one of them (or in the open segment), and there are at most
//! `capacity_blocks` live blocks; if every candidate held more than
//! `gc_victim_max_live_blocks`, there would be more live blocks than that. So a victim
//! worth relocating always exists (pigeonhole), each relocation frees space, and data
//! written within the capacity can be overwritten forever. The level enters through the
//! segment's data blocks (k data chunks per stripe) and the stripe the victim must spare;
//! with segments of several chunk sizes, the smallest segment and the largest stripe.

use crate::hybrid::SegmentPlan;
use crate::layout::Layout;

/// Full segments whose footers are being written and zones finished while the next one is
/// open, per open segment (a slot opens its next segment as soon as its last is full).
pub const SEALING_SEGMENTS_PER_OPEN: u32 = 1;

/// While a segment is being relocated, user stripes leave this many empty zones to the
/// relocation (beyond `RECOVERY_RESERVED_ZONES`), so that it always has room to finish:
/// its live blocks fit in one segment.
pub const GC_RESERVED_ZONES: usize = 1;

/// Empty zones kept for after a crash: the segments that were open are closed for good and
/// their live blocks are rewritten into an empty zone before they can be reset.
pub const RECOVERY_RESERVED_ZONES: usize = 1;

/// Garbage collection starts when this few empty zones are left: the relocation's own zone
/// and the recovery reserve.
pub const GC_START_FREE_ZONES: usize = GC_RESERVED_ZONES + RECOVERY_RESERVED_ZONES;

/// Beyond what correctness needs, one zone in this many (rounded down) stays unexported, as
/// before the reserve was derived: on large arrays filled to their size, garbage collection
/// then moves segments about 90% live at worst instead of nearly full ones (it would make
/// room, but write each block many times over).
pub const GC_HEADROOM_ZONES_PER_ZONE: u32 = 10;

impl SegmentPlan {
    /// Zones per drive the engine has written into and not finished at once (the open
    /// segments and one being sealed per open segment): drives must allow this many open
    /// and active zones (the array's superblock zones come on top of it for active zones).
    pub fn active_zones_needed(&self) -> u32 {
        self.open_segments() * (1 + SEALING_SEGMENTS_PER_OPEN)
    }

    /// Segments' worth of zones the exported capacity leaves out: the open segments, one
    /// being sealed per open segment, the relocation's zone and the recovery reserve (see
    /// the module documentation).
    pub fn reserved_segments(&self) -> u32 {
        self.active_zones_needed() + GC_START_FREE_ZONES as u32
    }

    /// User data blocks of the largest stripe any slot writes.
    pub fn max_stripe_data_blocks(&self) -> u64 {
        self.slots.iter().map(|s| s.layout.stripe_data_blocks()).max().expect("at least one slot")
    }

    /// The most live blocks a segment of `victim`'s layout may hold for relocating it to
    /// free space: its blocks (and the padding of the last stripe) then take less room
    /// than the segment had, whichever slot they are rewritten into.
    pub fn gc_victim_max_live_blocks(&self, victim: &Layout) -> u64 {
        victim.data_blocks_per_segment().saturating_sub(self.max_stripe_data_blocks())
    }

    /// Logical blocks an array of `zone_count` zones per drive may export: every candidate
    /// segment at most `gc_victim_max_live_blocks` live (so garbage collection always finds
    /// a victim), and one zone in `GC_HEADROOM_ZONES_PER_ZONE` left out. 0 if the drives
    /// have too few zones for an array.
    pub fn capacity_blocks(&self, zone_count: u32) -> u64 {
        let Some(candidates) = zone_count.checked_sub(self.reserved_segments()) else { return 0 };
        let layouts = self.layouts();
        let per_candidate = layouts.iter().map(|l| self.gc_victim_max_live_blocks(l)).min().expect("a layout");
        let per_segment = layouts.iter().map(Layout::data_blocks_per_segment).min().expect("a layout");
        let guaranteed = u64::from(candidates) * per_candidate;
        let headroom = zone_count / GC_HEADROOM_ZONES_PER_ZONE;
        let efficient = u64::from(zone_count - headroom) * per_segment;
        guaranteed.min(efficient)
    }

    /// The fewest zones per drive whose capacity holds `logical_blocks`.
    pub fn zones_for_capacity(&self, logical_blocks: u64) -> u32 {
        let per_segment = self.layouts().iter().map(|l| self.gc_victim_max_live_blocks(l)).min().unwrap_or(0).max(1);
        let mut zones = u32::try_from(logical_blocks.div_ceil(per_segment)).unwrap_or(u32::MAX);
        zones = zones.saturating_add(self.reserved_segments());
        while self.capacity_blocks(zones) < logical_blocks && zones < u32::MAX {
            zones += 1;
        }
        zones
    }
}

/// Zones per drive an array with one open segment keeps active (see
/// `SegmentPlan::active_zones_needed`).
pub fn active_zones_needed() -> u32 {
    1 + SEALING_SEGMENTS_PER_OPEN
}

impl Layout {
    /// Segments' worth of zones an array with one open segment of this layout leaves out
    /// (`SegmentPlan::reserved_segments`).
    pub fn reserved_segments() -> u32 {
        active_zones_needed() + GC_START_FREE_ZONES as u32
    }

    /// User data blocks of one stripe.
    pub fn stripe_data_blocks(&self) -> u64 {
        self.data_chunks as u64 * self.chunk_blocks
    }

    /// `SegmentPlan::gc_victim_max_live_blocks` for one open segment of this layout.
    pub fn gc_victim_max_live_blocks(&self) -> u64 {
        SegmentPlan::single(*self).gc_victim_max_live_blocks(self)
    }

    /// `SegmentPlan::capacity_blocks` for one open segment of this layout.
    pub fn capacity_blocks(&self, zone_count: u32) -> u64 {
        SegmentPlan::single(*self).capacity_blocks(zone_count)
    }

    /// `SegmentPlan::zones_for_capacity` for one open segment of this layout.
    pub fn zones_for_capacity(&self, logical_blocks: u64) -> u32 {
        SegmentPlan::single(*self).zones_for_capacity(logical_blocks)
    }
}

#[cfg(test)]
mod tests {
    use zapraid_zns::Geometry;

    use super::*;
    use crate::layout::{Mode, RaidLevel};

    fn layout(zones: u32, level: RaidLevel) -> Layout {
        let g = Geometry { zone_count: zones, ..Geometry::small(zones, 256, 240) };
        Layout::new(&g, level, Mode::ZapRaid { group_size: 256 }, 4096).unwrap()
    }

    #[test]
    fn the_reserve_leaves_a_victim_worth_relocating() {
        for zones in [5, 16, 64, 1000] {
            for level in
                [RaidLevel::Raid5 { drives: 3 }, RaidLevel::Raid1 { drives: 2 }, RaidLevel::Raid0 { drives: 4 }]
            {
                let l = layout(zones, level);
                let capacity = l.capacity_blocks(zones);
                // Candidates when garbage collection must choose, each one live block over
                // the limit: more than the capacity.
                let candidates = u64::from(zones - Layout::reserved_segments());
                assert!(candidates * (l.gc_victim_max_live_blocks() + 1) > capacity, "{level:?} {zones}");
                assert!(capacity < u64::from(zones) * l.data_blocks_per_segment());
                assert!(l.capacity_blocks(l.zones_for_capacity(capacity)) >= capacity);
                assert!(l.zones_for_capacity(capacity) <= zones);
            }
        }
    }

    #[test]
    fn too_few_zones_export_nothing() {
        let l = layout(4, RaidLevel::Raid5 { drives: 3 });
        assert_eq!(l.capacity_blocks(Layout::reserved_segments()), 0);
        assert_eq!(l.capacity_blocks(1), 0);
        assert!(l.capacity_blocks(Layout::reserved_segments() + 1) > 0);
    }

    #[test]
    fn large_arrays_keep_a_tenth_for_garbage_collection() {
        let l = layout(1000, RaidLevel::Raid5 { drives: 3 });
        assert_eq!(l.capacity_blocks(1000), 900 * l.data_blocks_per_segment());
    }
}
