//! Rebalancing a declustered array (issue 35): once a drive whose chunks were rebuilt into
//! distributed spare space is replaced, the segments that still have a lane in spare space
//! (their home drive, the placement's, works again and its zone of their row is free) are
//! moved back by garbage collection: each is relocated (its live blocks rewritten into new
//! segments, which are placed on their home drives), and when its number is freed its
//! lanes go home (`settle_free_lanes`), which frees the spare zones for the next failure.
//!
//! Relocation rather than a copy of the lane: the segment stays whole (every lane readable)
//! until its blocks are persisted elsewhere, so a failure during the rebalance costs no more
//! redundancy than one before it, and a crash leaves either segment whole (garbage
//! collection's own guarantee). It costs a segment's live blocks rewritten where dRAID
//! copies one chunk per stripe. It runs one segment at a time beside the users' I/O, as
//! garbage collection does, and with a rebuild rate set (`set_rebuild_rate`) at that
//! rate: each live block it moves takes its bytes from the rebuild's token bucket before
//! it is read (a rebuild running at the same time shares the bucket).
//!
//! A grown array (`grow.rs`) moves the same way onto its new drives: every segment in a
//! row of an older placement is marked.
//!
//! Invariant: only a sealed, whole segment (no lane waiting for a rebuild) is marked; the
//! marks are made again at every start and whenever a drive comes back, so none is
//! recorded on the drives.

use super::machine::Engine;
use super::state::segment::SegmentState;
use super::state::stop::StopState;

impl Engine {
    /// Marks for relocation every sealed, whole segment with a lane off its home drive
    /// where that drive works and its zone of the segment's row is free, and every one in a
    /// row of an older placement of a grown array; returns how many are marked (0 for a
    /// classic array).
    pub(super) fn mark_segments_to_rebalance(&mut self) -> u64 {
        if self.lanes.is_classic() {
            return 0;
        }
        let mut marked = 0;
        for zone in 0..self.lanes.segments() {
            let Some(s) = self.segments[zone as usize].as_ref() else { continue };
            if s.state != SegmentState::Sealed || s.absent.is_some() || s.rebalance {
                continue;
            }
            let row = self.lanes.row(zone);
            let away = self.lanes.row_is_old(row)
                || (0..self.layout.drives()).any(|lane| {
                    let home = self.lanes.home(zone, lane);
                    self.lanes.drive(zone, lane) != home && !self.failed[home] && self.lanes.is_free_at(row, home)
                });
            if away {
                self.seg_mut(zone).rebalance = true;
                marked += 1;
            }
        }
        if marked > 0 {
            self.reclaim_pending = true;
            self.gc_check_needed = true;
            tracing::info!(segments = marked, "segments in spare space to move back to their home drives");
        }
        marked
    }

    /// Marks the segment in `zone`, just sealed, if it is in a row of an older placement
    /// than the newest (opened there when the newest had no free number, or open at the
    /// grow): the row moves once garbage collection has relocated it.
    pub(super) fn mark_if_in_old_row(&mut self, zone: u32) {
        let s = self.seg(zone);
        if s.state != SegmentState::Sealed || s.absent.is_some() || s.rebalance {
            return;
        }
        if self.lanes.row_is_old(self.lanes.row(zone)) {
            self.seg_mut(zone).rebalance = true;
            self.reclaim_pending = true;
            self.gc_check_needed = true;
        }
    }

    /// Segments marked to move back to their home drives and not moved yet, the one being
    /// relocated among them (one a relocation failed for is not tried again).
    pub fn segments_to_rebalance(&self) -> u64 {
        let waiting = |s: &&super::state::segment::Segment| {
            s.rebalance && matches!(s.state, SegmentState::Sealed | SegmentState::Relocating) && !s.unreclaimable
        };
        self.segments.iter().flatten().filter(waiting).count() as u64
    }

    /// Whether the relocation of the segment in `zone` may read its next live block now:
    /// always, unless it is a rebalance with a rate set and the bucket lacks the block's
    /// bytes (then a `tick` is asked for when it will hold them).
    pub(super) fn rebalance_may_read(&mut self, zone: u32) -> bool {
        if !self.seg(zone).rebalance {
            return true;
        }
        let bytes = u64::from(self.geometry.block_size_bytes);
        self.rebuild_pace.take(bytes, self.now_ns)
    }

    /// Whether a relocation that moves a segment back (`rebalance`) runs.
    pub(super) fn rebalancing(&self) -> bool {
        self.stop == StopState::Running
            && self
                .relocation
                .as_ref()
                .is_some_and(|r| self.segments[r.zone as usize].as_ref().is_some_and(|s| s.rebalance))
    }
}
