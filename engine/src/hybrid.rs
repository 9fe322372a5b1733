//! Hybrid segment management (the paper's section 3.3): which segments an array writes
//! into at once, the shape of each, and where a stripe goes.
//!
//! An array has Ns open segments of small chunks (Cs, `Config::chunk_bytes`) and Nl open
//! segments of large chunks (Cl). A write smaller than Cl fills small-chunk stripes, any
//! other write large-chunk stripes; garbage collection rewrites into large-chunk segments
//! (small-chunk ones when Nl = 0). Under ZapRAID, small-chunk segment 0 is written with
//! Zone Append in stripe groups (the group layout) and every other segment with Zone
//! Write, one stripe at a time at fixed offsets: a small stripe goes to an idle Zone Write
//! segment (round robin) and to the Zone Append one when none is idle. ZoneWrite-Only and
//! ZoneAppend-Only write every segment their one way. Ns = 1, Nl = 0 is one open segment.
//!
//! Each open segment is a "slot": when its segment fills and is sealed, the slot opens the
//! next one of the same shape. A segment's shape (chunk size, how it is written) is in its
//! header, so recovery knows every segment's layout from the drives alone.
//!
//! The array superblock records the open segments (`ArraySuperblock::open_segments`,
//! `set_open_segments`, defined here: the on-disk record knows nothing of slots).
//!
//! Invariants: at least one slot; every slot's layout has the same level and drives;
//! Cl > Cs when large-chunk slots exist.

use zapraid_zns::Geometry;

use crate::error::{Error, Result};
use crate::format::ArraySuperblock;
pub use crate::format::MAX_OPEN_SEGMENTS;
use crate::layout::{Layout, Mode};

/// How many segments of each chunk size are open at once, chosen at format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenSegments {
    /// Ns: segments of small chunks (`Config::chunk_bytes`).
    pub small: u32,
    /// Nl: segments of large chunks.
    pub large: u32,
    /// Cl: the large chunk size; unused when `large` is 0.
    pub large_chunk_bytes: u64,
}

impl OpenSegments {
    /// One open segment of the array's chunk size (no hybrid management).
    pub const SINGLE: OpenSegments = OpenSegments { small: 1, large: 0, large_chunk_bytes: 0 };

    /// Whether this is more than the single open segment.
    pub fn is_hybrid(&self) -> bool {
        *self != Self::SINGLE
    }

    pub fn total(&self) -> u32 {
        self.small + self.large
    }
}

impl ArraySuperblock {
    /// The open segments the array writes into (`hybrid`).
    pub fn open_segments(&self) -> OpenSegments {
        if self.small_segments == 0 && self.large_segments == 0 {
            return OpenSegments::SINGLE;
        }
        OpenSegments {
            small: u32::from(self.small_segments),
            large: u32::from(self.large_segments),
            large_chunk_bytes: u64::from(self.large_chunk_bytes.get()),
        }
    }

    /// Records the open segments (the caller checked them with `SegmentPlan::new`, which
    /// keeps them within `MAX_OPEN_SEGMENTS`).
    pub fn set_open_segments(&mut self, open: OpenSegments) {
        debug_assert!(open.total() <= MAX_OPEN_SEGMENTS);
        self.small_segments = open.small.min(u32::from(u8::MAX)) as u8;
        self.large_segments = open.large.min(u32::from(u8::MAX)) as u8;
        self.large_chunk_bytes = u32::try_from(open.large_chunk_bytes).unwrap_or(u32::MAX).into();
    }
}

/// Which stripes a slot takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChunkClass {
    Small,
    Large,
}

impl ChunkClass {
    /// Index into per-class arrays.
    pub fn index(self) -> usize {
        match self {
            ChunkClass::Small => 0,
            ChunkClass::Large => 1,
        }
    }

    /// The code stored in segment headers.
    pub fn code(self) -> u8 {
        self.index() as u8
    }

    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(ChunkClass::Small),
            1 => Some(ChunkClass::Large),
            _ => None,
        }
    }
}

/// One open segment's place: its chunk class and the layout of its segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub class: ChunkClass,
    pub layout: Layout,
}

/// Every slot of an array, derived from the drives' geometry and the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentPlan {
    pub slots: Vec<Slot>,
    /// The chunk size (bytes) from which a write goes to large-chunk stripes.
    large_from_bytes: u64,
}

impl SegmentPlan {
    /// The slots of an array of `mode` with small chunks of `chunk_bytes` and `open`
    /// segments, on drives of `geometry`.
    pub fn new(
        geometry: &Geometry,
        level: crate::layout::RaidLevel,
        mode: Mode,
        chunk_bytes: u64,
        open: OpenSegments,
    ) -> Result<Self> {
        let bad = |reason: String| Err(Error::InvalidConfig { reason });
        if open.total() == 0 {
            return bad("an array needs at least one open segment".into());
        }
        if open.total() > MAX_OPEN_SEGMENTS {
            return bad(format!("{} open segments, at most {MAX_OPEN_SEGMENTS}", open.total()));
        }
        if open.large > 0 && open.large_chunk_bytes <= chunk_bytes {
            return bad(format!(
                "the large chunk ({} B) must be larger than the small chunk ({chunk_bytes} B)",
                open.large_chunk_bytes
            ));
        }
        // Under ZapRAID only small-chunk segment 0 takes stripe groups; the others are
        // written with Zone Write. The comparison modes write every segment their way.
        let other_mode = match mode {
            Mode::ZapRaid { .. } => Mode::ZoneWriteOnly,
            other => other,
        };
        let mut slots = Vec::new();
        for i in 0..open.small {
            let slot_mode = if i == 0 { mode } else { other_mode };
            slots
                .push(Slot { class: ChunkClass::Small, layout: Layout::new(geometry, level, slot_mode, chunk_bytes)? });
        }
        for _ in 0..open.large {
            let layout = Layout::new(geometry, level, other_mode, open.large_chunk_bytes)?;
            slots.push(Slot { class: ChunkClass::Large, layout });
        }
        let large_from_bytes = if open.large > 0 { open.large_chunk_bytes } else { u64::MAX };
        Ok(SegmentPlan { slots, large_from_bytes })
    }

    /// A plan of one slot of `layout` (an array without hybrid management).
    pub fn single(layout: Layout) -> Self {
        SegmentPlan { slots: vec![Slot { class: ChunkClass::Small, layout }], large_from_bytes: u64::MAX }
    }

    /// The first slot's layout: the array's main shape (what `Engine::layout` reports).
    pub fn primary(&self) -> &Layout {
        &self.slots[0].layout
    }

    pub fn open_segments(&self) -> u32 {
        self.slots.len() as u32
    }

    pub fn has_class(&self, class: ChunkClass) -> bool {
        self.slots.iter().any(|s| s.class == class)
    }

    /// The chunk class a write of `bytes` fills.
    pub fn class_of_write(&self, bytes: u64) -> ChunkClass {
        let wanted = if bytes < self.large_from_bytes { ChunkClass::Small } else { ChunkClass::Large };
        if self.has_class(wanted) {
            wanted
        } else {
            self.slots[0].class
        }
    }

    /// The chunk class garbage collection rewrites into: large chunks when there are any.
    pub fn gc_class(&self) -> ChunkClass {
        if self.has_class(ChunkClass::Large) {
            ChunkClass::Large
        } else {
            ChunkClass::Small
        }
    }

    /// The layout of stripes of `class` (every slot of a class has the same chunk size).
    pub fn class_layout(&self, class: ChunkClass) -> &Layout {
        &self.slots.iter().find(|s| s.class == class).expect("a slot of the class").layout
    }

    /// The slot layout a segment header describes (chunk class, chunk size and group
    /// size), if the array has such segments.
    pub fn layout_for(&self, class: ChunkClass, chunk_blocks: u64, group_size: u64) -> Option<Layout> {
        self.slots
            .iter()
            .find(|s| s.class == class && s.layout.chunk_blocks == chunk_blocks && s.layout.group_size == group_size)
            .map(|s| s.layout)
    }

    /// Every distinct segment layout of the array.
    pub fn layouts(&self) -> Vec<Layout> {
        let mut layouts: Vec<Layout> = Vec::new();
        for slot in &self.slots {
            if !layouts.contains(&slot.layout) {
                layouts.push(slot.layout);
            }
        }
        layouts
    }

    /// The fewest blocks any segment's header region takes (recovery reads a zone's
    /// header only once every drive wrote that far).
    pub fn min_header_blocks(&self) -> u64 {
        self.slots.iter().map(|s| s.layout.header_blocks).min().expect("at least one slot")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::RaidLevel;

    fn plan(mode: Mode, small: u32, large: u32) -> Result<SegmentPlan> {
        let g = Geometry::small(16, 256, 240);
        let open = OpenSegments { small, large, large_chunk_bytes: 16384 };
        SegmentPlan::new(&g, RaidLevel::Raid5 { drives: 4 }, mode, 8192, open)
    }

    #[test]
    fn zapraid_appends_to_one_small_segment_and_writes_the_others() {
        let p = plan(Mode::ZapRaid { group_size: 4 }, 2, 2).unwrap();
        let appending: Vec<bool> = p.slots.iter().map(|s| s.layout.uses_append()).collect();
        assert_eq!(appending, [true, false, false, false]);
        assert_eq!(p.class_of_write(4096), ChunkClass::Small);
        assert_eq!(p.class_of_write(8192), ChunkClass::Small);
        assert_eq!(p.class_of_write(16384), ChunkClass::Large);
        assert_eq!(p.gc_class(), ChunkClass::Large);
        assert_eq!(p.layouts().len(), 3);
    }

    #[test]
    fn without_one_class_every_write_goes_to_the_other() {
        let p = plan(Mode::ZoneWriteOnly, 0, 4).unwrap();
        assert_eq!(p.class_of_write(4096), ChunkClass::Large);
        let p = plan(Mode::ZoneAppendOnly, 4, 0).unwrap();
        assert_eq!(p.class_of_write(65536), ChunkClass::Small);
        assert_eq!(p.gc_class(), ChunkClass::Small);
        assert!(p.slots.iter().all(|s| s.layout.uses_append()));
    }

    #[test]
    fn bad_plans_are_refused() {
        assert!(plan(Mode::ZoneWriteOnly, 0, 0).is_err());
        assert!(plan(Mode::ZoneWriteOnly, MAX_OPEN_SEGMENTS, 1).is_err());
        let g = Geometry::small(16, 256, 240);
        let open = OpenSegments { small: 1, large: 1, large_chunk_bytes: 8192 };
        assert!(SegmentPlan::new(&g, RaidLevel::Raid5 { drives: 4 }, Mode::ZoneWriteOnly, 8192, open).is_err());
    }
}
