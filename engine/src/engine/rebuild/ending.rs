//! When a rebuild ends: once no segment is left to write to the new drive, the drive is
//! whole only if it holds every segment and no segment with holes waits to be reclaimed.
//!
//! Segments with holes (chunks the rebuild could not reconstruct among them) are waited for
//! until garbage collection has reclaimed them, recording their lost blocks: until then
//! the drive counts as being rebuilt, so that a start after a crash, which could not tell
//! which LBAs the holes held, refuses to run with one more drive down rather than serve
//! older versions. A segment the rebuild does not write to the new drive (one open when
//! it started, or recovered open, or closed short by a stop: its stripes end short of the
//! footer region) is reclaimed by garbage collection instead; when garbage collection
//! cannot reclaim it because its blocks cannot be written elsewhere (too many drives down),
//! the rebuild waits, after one more try, and says so
//! (`RebuildStatus::segments_unreclaimable`).
//!
//! Invariant: the rebuild never ends while a segment whose blocks could not be written
//! elsewhere is off the new drive: a start takes a segment's empty zone on a drive marked
//! whole for unwritten and drops the segment, resetting its zones on the others. Not right
//! yet: a segment kept for a mapping block that cannot be read (and is still its page's
//! copy) is ended over, as before; waiting for it would hold the rebuild, and with it the
//! replacement of another failed drive, until a restart.

use crate::engine::machine::Engine;
use crate::engine::state::segment::Segment;

impl Engine {
    /// No segment is left to write to the new drive: ends the rebuild, or waits for the
    /// segments garbage collection is to reclaim.
    pub(in crate::engine) fn end_or_wait(&mut self, drive: usize) {
        let whole = |s: &Segment| s.absent != Some(drive) && (!s.holes || s.unreclaimable);
        if self.segments.iter().flatten().all(whole) {
            return self.end_drive_rebuild();
        }
        let stuck = |s: &Segment| (s.absent != Some(drive) && !s.holes) || s.unreclaimable;
        if !self.segments.iter().flatten().all(stuck) {
            return; // the rest are open, being sealed or relocated, or to be reclaimed
        }
        if self.retry_unreclaimable(drive) {
            return;
        }
        let off: Vec<&Segment> = self.segments.iter().flatten().filter(|s| s.absent == Some(drive)).collect();
        if off.iter().any(|s| s.write_failed) {
            let r = self.drive_rebuild.as_mut().expect("a rebuild");
            if !std::mem::replace(&mut r.stuck_reported, true) {
                tracing::error!(
                    drive,
                    segments = off.len(),
                    "rebuild: segments garbage collection cannot write elsewhere (too many drives down) are not \
                     on the new drive; the rebuild waits for them"
                );
            }
            return;
        }
        if !off.is_empty() {
            // Not right yet: kept for a mapping block that cannot be read, they stay off
            // the drive (docs/manual/reliability.md, "Lost blocks").
            tracing::error!(
                drive,
                segments = off.len(),
                "rebuild: segments kept for an unreadable mapping block stay off the new drive"
            );
        }
        self.end_drive_rebuild();
    }

    /// Every segment is on the new drive and none has holes left to reclaim: the drive is
    /// whole again.
    fn end_drive_rebuild(&mut self) {
        let r = self.drive_rebuild.take().expect("a rebuild");
        let drive = r.drive;
        debug_assert!(
            self.segments.iter().flatten().all(|s| s.absent != Some(drive) || (s.unreclaimable && !s.write_failed)),
            "a segment is off the drive"
        );
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
