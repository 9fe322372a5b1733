//! One placement of a grown declustered array (an epoch, `lanes::epochs`): the placement,
//! its range of segment numbers, and each row's spare positions under it (the
//! placement's own, then the drives added after it).
//!
//! Invariant: its numbers are `first + r G + g` for row r and group g < G, after every
//! earlier epoch's.

use crate::placement::Placement;

/// One placement of a grown array and its range of segment numbers.
#[derive(Clone, Debug)]
pub(in crate::lanes) struct Epoch {
    pub(in crate::lanes) placement: Placement,
    /// Its first segment number (the earlier epochs' numbers come before).
    pub(in crate::lanes) first: u32,
    /// Segment groups per row (G of this placement).
    pub(in crate::lanes) groups: u32,
    /// Spare positions per row: the placement's own, then the drives added after it.
    pub(in crate::lanes) spares_per_row: usize,
    /// Per row, the drives at its spare positions in that order (rows x spares_per_row).
    spares: Vec<u8>,
}

impl Epoch {
    /// The epoch of `placement`, its numbers from `first`, on an array of `drives` drives
    /// now (its drives and those added since).
    pub(in crate::lanes) fn new(placement: &Placement, first: u32, rows: u32, drives: usize) -> Epoch {
        let added = placement.drives() as usize..drives;
        let spares_per_row = placement.spare_positions_per_row() as usize + added.len();
        let mut spares = Vec::with_capacity(rows as usize * spares_per_row);
        for row in 0..rows {
            spares.extend(placement.spare_drives(u64::from(row)).into_iter().map(|d| d as u8));
            spares.extend(added.clone().map(|d| d as u8));
        }
        Epoch { placement: placement.clone(), first, groups: placement.groups_per_row(), spares_per_row, spares }
    }

    /// Segment numbers of this epoch: one per group of every row.
    pub(in crate::lanes) fn segments(&self, rows: u32) -> u32 {
        rows * self.groups
    }

    /// The drives at row `row`'s spare positions, in order.
    pub(in crate::lanes) fn row_spares(&self, row: u32) -> &[u8] {
        &self.spares[row as usize * self.spares_per_row..(row as usize + 1) * self.spares_per_row]
    }

    /// The number of group `group` of row `row`.
    pub(in crate::lanes) fn segment(&self, row: u32, group: u32) -> u32 {
        debug_assert!(group < self.groups);
        self.first + row * self.groups + group
    }
}
