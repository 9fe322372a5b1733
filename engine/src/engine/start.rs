//! A start: the engine built from what recovery found on the drives (`Recovery::finish`),
//! its segments, L2P entries, lost blocks and failed drives installed, then the checkpoint
//! it began from, and the zones recovery closes finished.

use zapraid_zns::ZoneAction;

use crate::error::Result;
use crate::recovery::{Concluded, Recovered, Recovery};

use super::machine::Engine;
use super::state::segment::{Segment, SegmentState};

impl Recovery {
    /// The recovered engine, once `is_done`.
    pub fn finish(self) -> Result<Engine> {
        let Concluded { geometry, lanes, config, recovered, checkpoint, sequences, zones_to_finish } =
            self.conclude()?;
        let mut engine = Engine::format(geometry, config)?;
        engine.lanes = lanes;
        engine.install_recovered(recovered);
        if let Some(image) = checkpoint {
            engine.install_checkpoint(&image, |zone, sequence| sequences.get(&zone) == Some(&sequence))?;
        }
        for (drive, zone) in zones_to_finish {
            engine.finish_zone(drive, zone);
        }
        Ok(engine)
    }
}

impl Engine {
    /// Installs what recovery found on the drives: sealed segments (with their compact
    /// stripe tables), the L2P entries, the zones still free, and the next sequence number
    /// and timestamp (past everything on the drives).
    fn install_recovered(&mut self, recovered: Recovered) {
        let n = self.layout.drives();
        for found in recovered.segments {
            let (zone, layout) = (found.zone, found.layout);
            let mut segment =
                Segment::new(zone, found.sequence, SegmentState::Sealed, layout, found.class, found.table, n);
            segment.group = layout.groups();
            segment.reclaim_first = !found.complete;
            segment.stopped_short = found.complete && !found.full;
            self.reclaim_pending |= !found.complete;
            self.segments[zone as usize] = Some(segment);
        }
        for (lba, physical) in recovered.mappings {
            // One entry per LBA: nothing to replace. Pages are made when first touched.
            self.l2p.recover(lba, physical);
            self.seg_mut(physical.zone).valid_blocks += 1;
        }
        self.gc_check_needed = true;
        self.free_zones = recovered.free_zones.into();
        self.restoring_reserve = true;
        self.update_restoring_reserve();
        self.next_sequence = recovered.next_sequence;
        self.next_timestamp = recovered.next_timestamp;
        self.recovery_repairs = recovered.repairs;
        self.lost = recovered.lost.into_iter().collect();
        self.start_report = recovered.report;
        // A grown array's rows found in an older placement that hold nothing (the start
        // reset what they held: a relocated segment's zones cut part way through their
        // resets, a header cut short) take the newest, as they would have while running.
        for row in 0..self.lanes.rows() {
            self.move_row_to_newest(row);
        }
        // Drives rebuilt into spare space first: their empty segment numbers' lanes had
        // spare space to move to before, and must again (no segment may land on them).
        let (spared, others): (Vec<usize>, Vec<usize>) =
            recovered.failed_drives.iter().partition(|d| recovered.spared_drives.contains(d));
        for drive in spared.into_iter().chain(others) {
            self.fail_drive(drive);
        }
        // Segments a replaced drive is to take back (marks are not recorded on the drives).
        self.mark_segments_to_rebalance();
        for drive in recovered.spared_drives {
            if !self.spared[drive] {
                tracing::warn!(
                    drive,
                    "a drive rebuilt into spare space holds lanes again: no spare space left for them"
                );
            }
        }
    }

    /// Finishes a zone (recovery closes open segments this way).
    fn finish_zone(&mut self, drive: usize, zone: u32) {
        self.zone_command(drive, zone, ZoneAction::Finish);
    }
}
