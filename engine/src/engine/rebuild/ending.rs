//! When a rebuild ends: once no segment is left to write to the new drive, the drive is
//! whole only if it holds every segment and no segment with holes waits to be reclaimed.
//!
//! Segments with holes (chunks the rebuild could not reconstruct among them) are waited for
//! until garbage collection has reclaimed them, recording their lost blocks: until then
//! the drive counts as being rebuilt, so that a start after a crash, which could not tell
//! which LBAs the holes held, refuses to run with one more drive down rather than serve
//! older versions. A segment the rebuild does not write to the new drive (one open when
//! it started, or recovered open, or closed short by a stop: its stripes end short of the
//! footer region) is reclaimed by garbage collection instead, and the rebuild waits for it.
//! A segment kept for a mapping block garbage collection cannot read is reclaimed too,
//! once the page is written back elsewhere (`MappingIo::moving_out`). When garbage
//! collection cannot reclaim such a segment because its blocks (or that page) cannot be
//! written elsewhere (too many drives down), the rebuild waits, after one more try, and
//! says so (`RebuildStatus::segments_unreclaimable`).
//!
//! Invariant: the rebuild never ends while a segment is off the new drive (asserted): a
//! start takes a segment's empty zone on a drive marked whole for unwritten and drops the
//! segment, resetting its zones on the others.

use crate::engine::machine::Engine;
use crate::engine::state::segment::Segment;

impl Engine {
    /// No segment is left to write to the new drive: ends the rebuild, or waits for the
    /// segments garbage collection is to reclaim.
    pub(in crate::engine) fn end_or_wait(&mut self, drive: usize) {
        let whole = |s: &Segment| s.absent.is_none() && (!s.holes || s.unreclaimable);
        if self.segments.iter().flatten().all(whole) {
            return self.end_drive_rebuild();
        }
        let stuck = |s: &Segment| (s.absent.is_none() && !s.holes) || s.unreclaimable;
        if !self.segments.iter().flatten().all(stuck) {
            return; // the rest are open, being sealed or relocated, or to be reclaimed
        }
        if self.retry_unreclaimable() {
            return;
        }
        // Every segment left off the drive is one garbage collection could not reclaim:
        // its blocks cannot be written elsewhere (too many drives down), or a page of the
        // table it holds can be neither read nor rebuilt nor written elsewhere. Ending over
        // it would lose it at the next start: the rebuild waits.
        let off = self.segments.iter().flatten().filter(|s| s.absent.is_some()).count();
        debug_assert!(off > 0, "not whole, yet every segment is on the drive");
        let r = self.drive_rebuild.as_mut().expect("a rebuild");
        if !std::mem::replace(&mut r.waiting_unreclaimable, true) {
            tracing::error!(
                drive,
                segments = off,
                "rebuild: segments garbage collection cannot write elsewhere (too many drives down) are not on \
                 the new drive; the rebuild waits for them"
            );
        }
    }

    /// Every segment is on the new drive and none has holes left to reclaim: the drive is
    /// whole again.
    fn end_drive_rebuild(&mut self) {
        self.last_rebuild = self.rebuild_status();
        let r = self.drive_rebuild.take().expect("a rebuild");
        let drive = r.drive;
        if r.into_spares {
            self.note_spared(drive);
        }
        debug_assert!(self.segments.iter().flatten().all(|s| s.absent.is_none()), "a segment is off the drive");
        // Segments whole again may have a lane in spare space whose home works now.
        self.mark_segments_to_rebalance();
        self.rebuilds_completed += 1;
        if r.blocks_unrecoverable > 0 {
            // The drive is in service, with holes where its stripes lost too much: their
            // segments were reclaimed, their blocks recorded lost (`lost`).
            tracing::error!(
                drive,
                segments = r.segments_rebuilt,
                blocks = r.blocks_written,
                unrecoverable = r.blocks_unrecoverable,
                "rebuild finished with blocks it could not reconstruct: data is lost"
            );
        } else {
            tracing::info!(drive, segments = r.segments_rebuilt, blocks = r.blocks_written, "rebuild finished");
        }
    }
}
