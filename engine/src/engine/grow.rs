//! Growing a declustered array while it runs (`zapraid grow`, issue 35 item 3): the drives
//! added take a new placement (an epoch, `lanes::epochs`); rows holding no segment take it
//! at once, so new segments use the new drives at once; the others stay in the placement
//! they are in until garbage collection has relocated their segments (marked as the
//! rebalance marks them), and then take it (`move_row_to_newest`). A start finds each
//! row's placement again from the segment headers.
//!
//! Invariants: a row changes placement only while none of its numbers holds a segment (so
//! its zones on working drives are all reset, and no command names its numbers); the
//! driver records the grown shape on the drives before the engine grows (a start must know
//! the new numbers before a segment is written under one).

use super::machine::Engine;
use crate::config::Declustering;
use crate::error::{Error, Result};
use crate::lanes::MAX_PLACEMENT_EPOCHS;
use crate::placement::Placement;

impl Engine {
    /// Whether the array may grow to `drives` drives now, and the placement the drives
    /// added would take: refused for a classic array (its segment headers do not say where
    /// their chunks lie), for no more drives, while a drive rebuild runs, past
    /// `MAX_PLACEMENT_EPOCHS` placements, and for a shape the placement cannot make. A
    /// driver asks before it records the grown shape on the drives.
    pub fn check_grow(&self, drives: u32) -> Result<Placement> {
        let refuse = |reason: String| Err(Error::InvalidConfig { reason });
        let before = self.lanes.drives() as u32;
        if self.lanes.is_classic() {
            return refuse(format!(
                "the array is as wide as its stripes ({before} drives): only a declustered array grows (format with \
                 --stripe-width)"
            ));
        }
        if drives <= before {
            return refuse(format!("the array has {before} drives: growing takes more ({drives} asked)"));
        }
        if let Some(r) = self.drive_rebuild.as_ref() {
            return Err(Error::Unavailable {
                reason: format!("drive {} is being rebuilt: grow the array once it is done", r.drive),
            });
        }
        if self.lanes.epochs() >= MAX_PLACEMENT_EPOCHS {
            return refuse(format!(
                "the array has grown {} times already, the most it records",
                MAX_PLACEMENT_EPOCHS - 1
            ));
        }
        let width = self.layout.drives() as u32;
        let placement = Placement::new(drives, width, self.config.declustering.distributed_spares)?;
        let zones = self.lanes.segments() + self.lanes.rows() * placement.groups_per_row();
        self.l2p.check_zones(zones)?;
        Ok(placement)
    }

    /// Adds drives to a running declustered array, for `drives` drives in all: the drives
    /// past the array's are new and empty (`check_grow` says when it is refused).
    pub fn grow(&mut self, drives: u32) -> Result<()> {
        let placement = self.check_grow(drives)?;
        let before = self.lanes.drives() as u32;
        let grown = grown_declustering(self.config.declustering, before, drives)?;
        self.l2p.set_zones(self.lanes.segments() + self.lanes.rows() * placement.groups_per_row())?;
        self.lanes.add_epoch(&placement);
        self.config.declustering = grown;
        self.geometry.zone_count = self.lanes.segments();
        self.segments.resize_with(self.geometry.zone_count as usize, || None);
        self.failed.resize(drives as usize, false);
        self.spared.resize(drives as usize, false);
        for row in 0..self.lanes.rows() {
            self.move_row_to_newest(row);
        }
        // The open segments (each in a row of the older placement) are closed, to be
        // reclaimed first, as a rebuild closes them: their slots open new ones in the newest,
        // and an idle array's rows need not wait for them to fill.
        for slot in 0..self.slots.len() {
            if let Some(zone) = self.slots[slot].take() {
                self.retiring.push(zone);
            }
        }
        self.mark_segments_to_rebalance();
        self.forget_checkpoint_base(); // the shape changed: a new superblock generation
        tracing::warn!(before, drives, rows_to_grow = self.rows_to_grow(), "the array grew");
        // The rebalance marked starts now, not at the next event (an idle array has none).
        self.settle();
        Ok(())
    }

    /// How the array spreads its segments now (N, S, the drives before each grow): what
    /// its superblock records.
    pub fn declustering(&self) -> Declustering {
        self.config.declustering
    }

    /// Moves row `row` of a grown array to the newest placement if it is in an older one
    /// and none of its numbers holds a segment: its numbers there go first in line of the
    /// free ones (segments opened in it need not move again), its old ones are no longer
    /// used, and its lanes settle off failed drives. Garbage collection calls it as it
    /// frees a number.
    pub(super) fn move_row_to_newest(&mut self, row: u32) {
        if !self.lanes.row_is_old(row) {
            return;
        }
        let old = self.lanes.row_segments(row);
        if old.clone().any(|z| self.segments[z as usize].is_some()) {
            return;
        }
        self.free_zones.retain(|z| !old.contains(z));
        self.lanes.set_row_epoch(row, self.lanes.epochs() - 1);
        let new = self.lanes.row_segments(row);
        for zone in new.clone().rev() {
            self.free_zones.push_front(zone);
        }
        for zone in new {
            for drive in self.settle_free_lanes(zone) {
                self.note_spared(drive);
            }
        }
        self.rows_grown += 1;
        tracing::debug!(row, "a row of the grown array moved to its newest placement");
    }

    /// Rows of a grown array still in an older placement than the newest (0 for an array
    /// never grown).
    pub fn rows_to_grow(&self) -> u64 {
        (0..self.lanes.rows()).filter(|&row| !self.lanes.is_classic() && self.lanes.row_is_old(row)).count() as u64
    }
}

/// `declustering` once grown from `before` to `drives` drives: `before` joins the earlier
/// drive counts.
fn grown_declustering(declustering: Declustering, before: u32, drives: u32) -> Result<Declustering> {
    let mut grown = declustering;
    let slot = grown.grown_from.iter().position(|&n| n == 0).ok_or_else(|| Error::InvalidConfig {
        reason: format!("the array has grown {} times already, the most it records", MAX_PLACEMENT_EPOCHS - 1),
    })?;
    grown.grown_from[slot] =
        u8::try_from(before).map_err(|_| Error::InvalidConfig { reason: format!("{before} drives") })?;
    grown.drives = drives;
    Ok(grown)
}
