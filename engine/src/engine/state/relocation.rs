//! Garbage collection's victim being moved (`Relocation`); the moving is `gc`'s.

use crate::l2p::Physical;

use super::scan::LiveScan;

/// Garbage collection of one segment: its live blocks (found by scanning the L2P table)
/// are read and rewritten with their timestamps; once all are persisted elsewhere, its
/// zones are reset and become free.
pub(in crate::engine) struct Relocation {
    pub(in crate::engine) zone: u32,
    /// The L2P scan for its live blocks.
    pub(in crate::engine) scan: LiveScan,
    pub(in crate::engine) reads_in_flight: usize,
    /// Blocks read and not yet persisted in their new place.
    pub(in crate::engine) writes_in_flight: usize,
    pub(in crate::engine) resets_pending: usize,
    pub(in crate::engine) resetting: bool,
    /// Blocks moved could not be written elsewhere: the segment stays.
    pub(in crate::engine) failed: bool,
    /// A mapping block in it could not be read: every other block is still moved or
    /// recorded lost, and the segment stays, since the directory still points into it,
    /// until the page is written back elsewhere (`MappingIo::moving_out`).
    pub(in crate::engine) keep: bool,
    /// Live blocks that could not be read or rebuilt, and where they are: each gets a
    /// lost-block marker (`lost`) once the scan is done and no write of it is in flight.
    pub(in crate::engine) unreadable: Vec<(u64, Physical)>,
    /// Of those, the LBAs that had a write (or their place a repair) in flight when they
    /// were to be marked: the relocation ends without them, the segment kept.
    pub(in crate::engine) awaiting_writes: Vec<u64>,
    /// Pages of the L2P table whose mapping block is in the segment, still to move.
    pub(in crate::engine) mapping_pages: Vec<crate::l2p::PageIndex>,
    /// Every block moved, the reset waits for a running checkpoint that no longer names
    /// the segment as live (`running_checkpoint`).
    pub(in crate::engine) awaits_checkpoint: bool,
    /// The reset no longer waits: the checkpoint was taken (or abandoned, or not worth it).
    pub(in crate::engine) checkpoint_passed: bool,
}
