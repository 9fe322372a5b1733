//! A segment as the engine holds it (`Segment`): the zone it spans on every drive, where it
//! stands (`SegmentState`: open, sealing, sealed, relocating), its layout and chunk class,
//! its compact stripe table and footer records, its live blocks; and which footer a footer
//! write is (`FooterPlace`). What the engine does with segments is `segment`'s.

use crate::format::FooterEntry;
use crate::hybrid::ChunkClass;
use crate::layout::Layout;
use crate::stripe_table::CompactStripeTable;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::engine) enum SegmentState {
    Open,
    Sealing,
    Sealed,
    /// Its live blocks are being rewritten elsewhere; then its zones are reset.
    Relocating,
}

pub(in crate::engine) struct Segment {
    pub(in crate::engine) zone: u32,
    pub(in crate::engine) sequence: u64,
    pub(in crate::engine) state: SegmentState,
    /// Its shape (chunk size, how it is written): its slot's, or what its header said.
    pub(in crate::engine) layout: Layout,
    /// The chunk class of its slot.
    pub(in crate::engine) class: ChunkClass,
    pub(in crate::engine) header_pending: usize,
    pub(in crate::engine) table: Option<CompactStripeTable>,
    /// Per drive, per data-region block: what the footer will say.
    pub(in crate::engine) footer: Vec<Vec<FooterEntry>>,
    pub(in crate::engine) footer_pending: usize,
    /// Current group, stripes issued in it, stripes of it still in flight.
    pub(in crate::engine) group: u64,
    pub(in crate::engine) group_issued: u64,
    pub(in crate::engine) group_in_flight: usize,
    /// Per drive, chunks of the current group that never landed (failed drive) and got a
    /// position counted from the end of the group's region.
    pub(in crate::engine) group_virtual: Vec<u64>,
    /// Data blocks the L2P table maps into this segment.
    pub(in crate::engine) valid_blocks: u64,
    /// Reads and zone commands in flight on this segment's zones: its zones are reset only
    /// when none are left (drives may reorder commands in flight).
    pub(in crate::engine) commands_in_flight: u32,
    /// Zone Finish commands in flight on this segment's zones: until they complete, its
    /// zones still count against the drives' active zone limit, though it is sealed.
    pub(in crate::engine) finishes_in_flight: u32,
    /// Recovered while open: its live blocks are to be rewritten into a new segment and its
    /// zones reclaimed, whether or not space is short.
    pub(in crate::engine) reclaim_first: bool,
    /// A declustered array's segment with a lane in spare space whose home drive works
    /// again (`rebalance`): relocated when garbage collection has nothing more pressing.
    pub(in crate::engine) rebalance: bool,
    /// A relocation of it failed (its blocks could not be written elsewhere): not chosen
    /// again.
    pub(in crate::engine) unreclaimable: bool,
    /// Its last relocation could not write its blocks elsewhere (too few drives), or a
    /// page of the table whose mapping block it holds could be neither read, rebuilt nor
    /// written elsewhere (`mapping::moving_out_failed`).
    pub(in crate::engine) write_failed: bool,
    /// Holds blocks that cannot be read or rebuilt (`lost`): reclaimed first.
    pub(in crate::engine) holes: bool,
    /// Unreadable blocks of it whose LBAs had a write (or its place a repair) in flight at
    /// its last relocation: not chosen again while one of them still has.
    pub(in crate::engine) awaiting_writes: Vec<u64>,
    /// A drive being rebuilt that does not hold this segment's chunks yet (the segment
    /// was written before the rebuild started): reads rebuild them from the others.
    pub(in crate::engine) absent: Option<usize>,
    /// Recovered complete but not full: a clean stop closed it with a stop footer after
    /// its data. A rebuild does not write it onto a new drive (its stripes end short of
    /// the footer region); garbage collection reclaims it instead.
    pub(in crate::engine) stopped_short: bool,
    /// Open at a clean stop, which wrote its stop footer (a checkpoint records it closed).
    pub(in crate::engine) closed_at_stop: bool,
}

impl Segment {
    pub(in crate::engine) fn new(
        zone: u32,
        sequence: u64,
        state: SegmentState,
        layout: Layout,
        class: ChunkClass,
        table: Option<CompactStripeTable>,
        drives: usize,
    ) -> Self {
        Segment {
            zone,
            sequence,
            state,
            layout,
            class,
            header_pending: 0,
            table,
            footer: Vec::new(),
            footer_pending: 0,
            group: 0,
            group_issued: 0,
            group_in_flight: 0,
            group_virtual: vec![0; drives],
            valid_blocks: 0,
            commands_in_flight: 0,
            finishes_in_flight: 0,
            reclaim_first: false,
            rebalance: false,
            unreclaimable: false,
            write_failed: false,
            holes: false,
            awaiting_writes: Vec::new(),
            absent: None,
            stopped_short: false,
            closed_at_stop: false,
        }
    }
}

/// Where a footer goes: the footer region of a segment being sealed, or, at a clean stop,
/// right after the open segment's data (a stop footer: the next start reads it instead of
/// every block's metadata). `start_blocks` is zone-relative; `entries` are the leading
/// footer entries it records.
#[derive(Clone, Copy, Debug)]
pub(in crate::engine) enum FooterPlace {
    Sealing { start_blocks: u64, blocks: u64, entries: usize },
    Stop { start_blocks: u64, blocks: u64, entries: usize },
}
