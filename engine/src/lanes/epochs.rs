//! A grown array's placements (`zapraid grow`, issue 35): one *epoch* per placement, the
//! drives the array had after format and after each grow, and which epoch each row is in.
//!
//! ```text
//!   4+1, S = 1: formatted on 8 drives (G = 1), grown to 16 (G = 3); rows = zones per drive
//!
//!   numbers:  epoch 0: 0 .. rows            epoch 1: rows .. rows + 3 rows
//!   row r in epoch 0:  segment r on 5 of d0..d7; d8..d15 and the rest spare positions
//!   row r in epoch 1:  segments rows + 3r + g (g < 3) on 15 of d0..d15; one spare
//! ```
//!
//! A row moves from an older epoch to the newest only while none of its numbers holds a
//! segment (after garbage collection has relocated and reset them all), so a zone is
//! never shared by two epochs' segments. Numbers are never reused across epochs: a
//! segment header (and the L2P table) names its epoch by its number alone, which is how a
//! start finds each row's epoch again (`Recovery`, from the headers it reads).
//!
//! Invariants: epochs are oldest first, of one stripe and one S, each of more drives than
//! the one before (so of at least as many groups per row), at most `MAX_PLACEMENT_EPOCHS`;
//! a row's numbers of the epochs it is not in are unusable and have no lane anywhere.

use super::epoch::Epoch;
use super::{Lanes, NO_SEGMENT};
use crate::placement::{Placement, MAX_PLACEMENT_EPOCHS};

impl Lanes {
    /// The epoch whose range holds `segment`.
    fn epoch_of(&self, segment: u32) -> usize {
        self.epochs.iter().rposition(|e| segment >= e.first).unwrap_or(0)
    }

    /// The drives at row `row`'s spare positions, in its placement's order.
    pub(super) fn row_spares(&self, row: u32) -> &[u8] {
        self.epochs[usize::from(self.row_epoch[row as usize])].row_spares(row)
    }

    /// Whether `segment` is a number of its row's epoch (commands may name it): always,
    /// for an array never grown.
    pub fn is_usable(&self, segment: u32) -> bool {
        if self.is_classic() {
            return segment < self.rows;
        }
        segment < self.segments() && usize::from(self.row_epoch[self.row(segment) as usize]) == self.epoch_of(segment)
    }

    /// Segment numbers usable now: each row's in its own epoch (`segments` counts every
    /// epoch's).
    pub fn usable_segments(&self) -> u32 {
        if self.is_classic() {
            return self.rows;
        }
        self.row_epoch.iter().map(|&e| self.epochs[usize::from(e)].groups).sum()
    }

    /// The epochs: 1 for an array never grown (0 for a classic one).
    pub fn epochs(&self) -> usize {
        self.epochs.len()
    }

    /// The epoch row `row` is in (0 for a classic array).
    pub fn row_epoch(&self, row: u32) -> usize {
        self.row_epoch.get(row as usize).map_or(0, |&e| usize::from(e))
    }

    /// Whether row `row` is in an older placement than the newest.
    pub fn row_is_old(&self, row: u32) -> bool {
        self.row_epoch(row) + 1 < self.epochs.len()
    }

    /// The segment numbers of row `row` in its epoch.
    pub fn row_segments(&self, row: u32) -> std::ops::Range<u32> {
        if self.is_classic() {
            return row..row + 1;
        }
        let epoch = &self.epochs[self.row_epoch(row)];
        let first = epoch.segment(row, 0);
        first..first + epoch.groups
    }

    /// The segment numbers of row `row` in epoch `epoch`.
    pub fn row_segments_in(&self, row: u32, epoch: usize) -> std::ops::Range<u32> {
        let e = &self.epochs[epoch];
        let first = e.segment(row, 0);
        first..first + e.groups
    }

    /// The epoch whose numbers hold `segment`, if it is a number of a grown or declustered
    /// array (a header read from a drive is untrusted: None for a number beyond them).
    pub fn epoch_of_number(&self, segment: u32) -> Option<usize> {
        (!self.is_classic() && segment < self.segments()).then(|| self.epoch_of(segment))
    }

    /// Puts row `row`, which holds no segment of its epoch (the caller knows), in epoch
    /// `epoch`: its numbers there take their home drives, the others become unusable.
    pub fn set_row_epoch(&mut self, row: u32, epoch: usize) {
        assert!(epoch < self.epochs.len(), "epoch {epoch} of {}", self.epochs.len());
        let was = self.row_segments(row);
        for segment in was {
            let at = segment as usize * self.width;
            self.segment_drives[at..at + self.width].copy_from_slice(&self.home_drives[at..at + self.width]);
        }
        self.row_epoch[row as usize] = epoch as u8;
        self.fill_row(row);
    }

    /// Adds `placement` (of more drives, the same stripe) as the newest epoch while the
    /// array runs: its numbers come after every earlier one's, every row stays in the
    /// epoch it is in (the drives added are spare positions of the rows in older ones),
    /// and commands in flight keep mapping back as they were sent.
    pub fn add_epoch(&mut self, placement: &Placement) {
        let (drives, old_drives) = (placement.drives() as usize, self.drives);
        assert!(!self.is_classic() && drives > old_drives, "an array grows by drives");
        assert_eq!(placement.width() as usize, self.width, "the array's stripe");
        assert!(self.epochs.len() < MAX_PLACEMENT_EPOCHS, "at most {MAX_PLACEMENT_EPOCHS} placements");
        let rows = self.rows;
        let mut at_drive = vec![NO_SEGMENT; rows as usize * drives];
        for row in 0..rows as usize {
            at_drive[row * drives..row * drives + old_drives]
                .copy_from_slice(&self.at_drive[row * old_drives..(row + 1) * old_drives]);
        }
        self.at_drive = at_drive;
        self.drives = drives;
        for epoch in &mut self.epochs {
            *epoch = Epoch::new(&epoch.placement, epoch.first, rows, drives);
        }
        let epoch = Epoch::new(placement, self.segments(), rows, drives);
        for row in 0..rows {
            for group in 0..epoch.groups {
                let drives = placement.segment_drives(u64::from(row), group);
                self.home_drives.extend(drives.iter().map(|&d| d as u8));
                self.segment_drives.extend(drives.iter().map(|&d| d as u8));
            }
        }
        self.epochs.push(epoch);
        debug_assert_eq!(self.segment_drives.len(), self.segments() as usize * self.width);
    }

    /// Fills row `row`'s drives with the lanes of its epoch's numbers where they lie.
    pub(super) fn fill_row(&mut self, row: u32) {
        let drives = self.drives;
        self.at_drive[row as usize * drives..(row as usize + 1) * drives].fill(NO_SEGMENT);
        for segment in self.row_segments(row) {
            for lane in 0..self.width {
                let drive = usize::from(self.segment_drives[segment as usize * self.width + lane]);
                let at = &mut self.at_drive[row as usize * drives + drive];
                debug_assert_eq!(*at, NO_SEGMENT, "a drive holds one segment of a row");
                *at = segment * self.width as u32 + lane as u32;
            }
        }
    }
}
