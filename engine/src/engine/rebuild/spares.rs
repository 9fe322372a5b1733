//! Rebuilding a failed drive into distributed spare space (issue 35): an array wider than
//! its stripes keeps, in every row, zones that no segment takes (`placement`'s spare
//! positions). Each segment number with a lane on the failed drive moves that lane to a
//! drive at a spare position of its row that works and holds nothing of the row
//! (`Lanes::spare_for`); segments that exist are marked absent on the lane and rebuilt
//! there by the same machinery as a rebuild onto a new drive (their chunks read from
//! every survivor of their stripes, spread over all the drives), and segments opened from
//! then on write the lane to its new drive at once. The failed drive stays failed: when
//! the rebuild ends no segment has a lane on it, and the array is fully redundant again
//! ("optimal, spare space used").
//!
//! Invariants: a lane moves only to a drive that holds no segment of its row, so a
//! segment's drives stay distinct; either every segment number with a lane on the drive
//! finds spare space or nothing moves.

use crate::engine::machine::Engine;
use crate::error::{Error, Result};

impl Engine {
    /// Starts rebuilding failed drive `drive` into distributed spare space. Refused for a
    /// classic array (no spare space: replace the drive), when a rebuild runs, when the
    /// drive has not failed, and when a row holding a lane of the drive has no working
    /// spare position left (a drive's worth of spare space already used).
    pub fn rebuild_into_spares(&mut self, drive: usize) -> Result<()> {
        self.check_rebuild_can_start(drive)?;
        if self.lanes.is_classic() {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "the array is as wide as its stripes ({} drives): it has no distributed spare space; replace \
                     drive {drive} instead",
                    self.layout.drives()
                ),
            });
        }
        let mut moves = Vec::new();
        for segment in 0..self.lanes.segments() {
            // Its lane on the drive; or a lane an earlier rebuild into spare space left
            // waiting on a drive that failed since (its target): moved again.
            let waiting = self.segments[segment as usize].as_ref().and_then(|s| s.absent);
            let waiting_on_failed = waiting.filter(|&w| self.lane_failed(segment, w));
            let Some(lane) = self.lanes.lane(segment, drive).or(waiting_on_failed) else { continue };
            let Some(spare) = self.lanes.spare_for(segment, &self.failed) else {
                return Err(Error::Unavailable {
                    reason: format!(
                        "zone {} of the drives has no spare space left for drive {drive}'s chunks: replace the \
                         drive instead",
                        self.lanes.row(segment)
                    ),
                });
            };
            moves.push((segment, lane, spare));
        }
        let marks: Vec<(u32, usize)> = moves.iter().map(|&(segment, lane, _)| (segment, lane)).collect();
        self.check_absent_lanes(&marks)?;
        for &(segment, lane, spare) in &moves {
            self.lanes.move_lane(segment, lane, spare);
            if self.segments[segment as usize].is_some() {
                self.mark_absent(segment, lane);
            }
        }
        tracing::info!(drive, segments = moves.len(), "rebuilding into distributed spare space");
        self.begin_drive_rebuild(drive, false, true);
        Ok(())
    }

    /// Refuses marking these (segment, lane) absent where the segment lacks another lane
    /// already, on a working drive (an earlier rebuild stopped short there): a segment is
    /// rebuilt one lane at a time.
    pub(in crate::engine) fn check_absent_lanes(&self, marks: &[(u32, usize)]) -> Result<()> {
        for &(segment, lane) in marks {
            let Some(s) = self.segments[segment as usize].as_ref() else { continue };
            if let Some(waiting) = s.absent.filter(|&w| w != lane && !self.lane_failed(segment, w)) {
                return Err(Error::Unavailable {
                    reason: format!(
                        "a segment still lacks its chunks on drive {} (a rebuild stopped short): rebuild that first",
                        self.lanes.drive(segment, waiting)
                    ),
                });
            }
        }
        Ok(())
    }

    /// Settles the lanes of the empty segment numbers that have one on `drive` (it just
    /// failed, or came back: `settle_free_lanes`). A declustered array does so when a
    /// drive fails, when one is replaced, and at a start (the moves of empty segment
    /// numbers are recorded nowhere: a start finds them where this puts them).
    pub(in crate::engine) fn move_free_lanes_off(&mut self, drive: usize) {
        if self.lanes.is_classic() {
            return;
        }
        let mut moved = 0;
        for segment in 0..self.lanes.segments() {
            let touches = (0..self.layout.drives())
                .any(|lane| self.lanes.drive(segment, lane) == drive || self.lanes.home(segment, lane) == drive);
            if self.segments[segment as usize].is_none() && self.lanes.is_usable(segment) && touches {
                moved += self.settle_free_lanes(segment).len();
            }
        }
        self.note_spared(drive);
        tracing::debug!(drive, moved, "empty segment numbers' lanes settled");
    }

    /// Puts the lanes of empty segment number `segment` where the next segment opened
    /// there is whole: back on its home drive (the placement's) when that works and its
    /// zone of the row is free, else off a failed drive into spare space where the row has
    /// some. Garbage collection calls it as it frees a number, so that the segments moved
    /// into spare space go back to a replaced drive over time. Returns the drives lanes
    /// left.
    pub(in crate::engine) fn settle_free_lanes(&mut self, segment: u32) -> Vec<usize> {
        if self.lanes.is_classic() {
            return Vec::new();
        }
        debug_assert!(self.segments[segment as usize].is_none(), "only an empty segment number's lanes move");
        debug_assert!(self.lanes.is_usable(segment), "a number of its row's placement");
        let row = self.lanes.row(segment);
        let mut left = Vec::new();
        for lane in 0..self.layout.drives() {
            let (now, home) = (self.lanes.drive(segment, lane), self.lanes.home(segment, lane));
            let to = if now != home && !self.failed[home] && self.lanes.is_free_at(row, home) {
                Some(home)
            } else if self.failed[now] {
                self.lanes.spare_for(segment, &self.failed)
            } else {
                None
            };
            if let Some(to) = to {
                self.lanes.move_lane(segment, lane, to);
                left.push(now);
            }
        }
        left
    }

    /// Failed drives no segment number has a lane on any more (rebuilt into spare space,
    /// or failed holding no segment): a start is to be told of them
    /// (`Recovery::set_spared_drives`; a real array records them in its superblock).
    pub fn drives_in_spare_space(&self) -> Vec<usize> {
        (0..self.spared.len()).filter(|&d| self.spared[d]).collect()
    }

    /// Marks failed `drive` spared if no segment number has a lane on it, no rebuild
    /// writes its lanes, and no segment waits for a lane to be rebuilt (one that moved off
    /// it may: a rebuild stopped short).
    pub(in crate::engine) fn note_spared(&mut self, drive: usize) {
        let rebuilding = self.drive_rebuild.as_ref().is_some_and(|r| r.drive == drive);
        let lacking = || self.segments.iter().flatten().any(|s| s.absent.is_some());
        if !self.lanes.is_classic() && self.failed[drive] && !rebuilding && !self.lanes.holds_any(drive) && !lacking() {
            self.spared[drive] = true;
        }
    }

    /// The next empty segment number to open a segment in: the first with no lane on a
    /// spared drive, so that those stay empty; the first of all if every one has (its
    /// drives then hold a lane again, and are spared no more). Of a grown array, one of a
    /// row in the newest placement first: a segment opened in an older one would have to
    /// move again.
    pub(in crate::engine) fn take_free_segment_number(&mut self) -> Option<u32> {
        let growing = self.lanes.epochs() > 1;
        if !growing && !self.spared.iter().any(|s| *s) {
            return self.free_zones.pop_front();
        }
        let clear = |zone: &u32| self.lanes.drives_of(*zone).all(|d| !self.spared[d]);
        let newest = |zone: &u32| !self.lanes.row_is_old(self.lanes.row(*zone));
        let at = self.free_zones.iter().position(|z| clear(z) && newest(z));
        let at = at.or_else(|| self.free_zones.iter().position(clear)).unwrap_or(0);
        let zone = self.free_zones.remove(at)?;
        for drive in self.lanes.drives_of(zone).collect::<Vec<_>>() {
            if std::mem::take(&mut self.spared[drive]) {
                tracing::warn!(drive, zone, "no spare space left for a segment: it holds a lane on a failed drive");
            }
        }
        Some(zone)
    }
}
