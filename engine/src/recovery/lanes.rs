//! Where a declustered array's lanes are (`crate::lanes`), read back at a start: the
//! placement says where each segment's lanes start out, but a rebuild into distributed
//! spare space (`engine::rebuild::spares`) moves a failed drive's lanes to drives at spare
//! positions of their rows, and segments opened since write them there. Each zone of each
//! drive that holds anything starts with a segment header naming its segment number
//! and lane (its drive index): this phase reads them all and moves a lane where a header
//! says it is, then hands the other phases each lane's zone report in the engine's
//! numbering, so that they read a declustered array as a classic one.
//!
//! A lane is taken as moved only where its header's sequence is the one most of the
//! segment's headers give, and either another of the segment's headers names that drive
//! for the lane (the segment was opened with the lane there: written as its others were)
//! or its own zone is finished (a rebuild wrote it, and a rebuild finishes a zone once
//! all of it is written; it rebuilds a segment only once the segment's zones are
//! finished). A zone a rebuild had only begun, or one of an older segment, leaves the
//! lane where it was (on the failed drive: read from the others), and its zone is reset
//! as holding no lane; a rebuild into spare space started again then moves and rebuilds
//! it once more.
//!
//! Invariants: a lane moves only to a working drive holding no lane of its row; no more
//! lanes of a segment are on failed drives than its level tolerates, or the start fails.

use std::collections::HashMap;

use zapraid_zns::{Command, ZoneAction, ZoneDescriptor, ZoneState, ZoneTarget};

use super::machine::{Op, Phase, Recovery};
use crate::error::{Error, Result};
use crate::format::{SegmentHeader, SegmentLanes};

impl Recovery {
    /// Reads the first block of every written zone of every working drive.
    pub(super) fn read_placement_headers(&mut self) {
        self.phase = Phase::Placement;
        let (bs, ms) = self.block_and_metadata_bytes();
        let geometry = self.drive_geometry;
        for drive in self.working_drives() {
            for row in 0..geometry.zone_count {
                if self.drive_reports[drive][row as usize].state == ZoneState::Empty {
                    continue;
                }
                let lba = geometry.zone_start_lba(row);
                let command = Command::Read { lba, data: vec![0; bs], metadata: vec![0; ms] };
                self.issue_to_drive(drive, Op::PlacementHeader { row }, command);
            }
        }
        self.advance();
    }

    /// A zone's first block: kept if it is a segment header of this array.
    pub(super) fn take_placement_header(&mut self, drive: usize, row: u32, data: &[u8]) {
        match SegmentHeader::decode_with_lanes(data) {
            Ok((h, lanes)) if h.array_uuid == self.config.array_uuid => {
                self.placement_headers.push((drive, row, h, lanes))
            }
            // Damaged or foreign headers are judged with the segment's others later, at the
            // lane the placement gives.
            _ => {}
        }
    }

    /// Moves the lanes that headers show moved, checks the failures each segment can
    /// take, and goes on as for a classic array with each lane's zone report.
    pub(super) fn adopt_lanes_and_read_headers(&mut self) {
        self.adopt_moved_lanes();
        self.reports = self.lane_reports();
        self.read_headers();
    }

    fn adopt_moved_lanes(&mut self) {
        let headers = std::mem::take(&mut self.placement_headers);
        self.adopt_row_epochs(&headers);
        let width = self.layout.drives();
        // Per segment, how many of its headers name each sequence.
        let mut sequences: HashMap<u32, HashMap<u64, usize>> = HashMap::new();
        let mut moved = Vec::new();
        for (at, &(drive, row, h, lanes)) in headers.iter().enumerate() {
            let (segment, lane) = (lanes.segment_number.get(), h.drive_index.get() as usize);
            let usable = segment < self.lanes.segments() && self.lanes.is_usable(segment);
            if !usable || self.lanes.row(segment) != row || lane >= width {
                continue; // not a lane of this row: its zone is reset as holding none
            }
            *sequences.entry(segment).or_default().entry(h.segment_sequence.get()).or_default() += 1;
            if self.lanes.drive(segment, lane) != drive {
                let full = self.drive_reports[drive][row as usize].state == ZoneState::Full;
                moved.push((segment, lane, drive, h.segment_sequence.get(), full, at));
            }
        }
        moved.sort_unstable();
        for (segment, lane, drive, sequence, full, at) in moved {
            // The sequence most of the segment's headers give (the newest of a tie).
            let agreed = sequences[&segment].iter().max_by_key(|(seq, n)| (**n, **seq)).map(|(seq, _)| *seq);
            let free = self.lanes.at(self.lanes.row(segment), drive).is_none();
            // Opened with the lane there already: another of its headers names that drive
            // for it, and the lane was written as the others were. Else a rebuild wrote it,
            // and it counts once the rebuild finished its zone.
            let opened_there = headers.iter().enumerate().any(|(other, (d, _, h, lanes))| {
                other != at
                    && *d != drive
                    && lanes.segment_number.get() == segment
                    && h.segment_sequence.get() == sequence
                    && lanes.drive_of_lane(lane) == Some(drive as u32)
            });
            if agreed == Some(sequence) && free && (full || opened_there) && !self.failed[drive] {
                tracing::info!(segment, lane, drive, "a lane found moved into spare space");
                self.lanes.move_lane(segment, lane, drive);
            }
        }
    }

    /// A grown array's rows (`lanes::epochs`): each in the newest epoch whose number a
    /// header of the row names (a row moves to a newer epoch only once no zone of it holds
    /// an older one's segment), the newest placement where none does.
    fn adopt_row_epochs(&mut self, headers: &[(usize, u32, SegmentHeader, SegmentLanes)]) {
        if self.lanes.epochs() < 2 {
            return;
        }
        let mut newest_named: HashMap<u32, usize> = HashMap::new();
        for &(_, row, _, lanes) in headers {
            let segment = lanes.segment_number.get();
            let Some(epoch) = self.lanes.epoch_of_number(segment) else { continue };
            if self.lanes.row_segments_in(row, epoch).contains(&segment) {
                let e = newest_named.entry(row).or_insert(epoch);
                *e = (*e).max(epoch);
            }
        }
        for (row, epoch) in newest_named {
            if epoch != self.lanes.row_epoch(row) {
                tracing::debug!(row, epoch, "a row found in an earlier placement of the grown array");
                self.lanes.set_row_epoch(row, epoch);
            }
        }
    }

    /// Per lane, per segment: the zone report of the drive holding it, in the engine's
    /// numbering (a failed drive's: empty, never read; a grown array's number of another
    /// epoch than its row's: empty).
    pub(super) fn lane_reports(&self) -> Vec<Vec<ZoneDescriptor>> {
        let zone_size = self.geometry.zone_size_blocks;
        (0..self.layout.drives())
            .map(|lane| {
                (0..self.lanes.segments())
                    .map(|segment| {
                        let (drive, row) = (self.lanes.drive(segment, lane), self.lanes.row(segment));
                        let report = match self.lanes.is_usable(segment) {
                            true => self.drive_reports[drive].get(row as usize),
                            false => None,
                        };
                        let start_lba = self.geometry.zone_start_lba(segment);
                        let capacity_blocks = self.geometry.zone_capacity_blocks;
                        match report {
                            Some(z) => ZoneDescriptor {
                                zone: segment,
                                start_lba,
                                write_pointer: start_lba + (z.write_pointer - z.start_lba).min(zone_size),
                                ..*z
                            },
                            None => ZoneDescriptor {
                                zone: segment,
                                state: ZoneState::Empty,
                                start_lba,
                                capacity_blocks,
                                write_pointer: start_lba,
                            },
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// Resets the zones of working drives that hold something but no segment's lane (a
    /// declustered array's spare positions: a rebuild into spare space cut short).
    pub(super) fn reset_zones_of_no_lane(&mut self) {
        if self.lanes.is_classic() {
            return;
        }
        let geometry = self.drive_geometry;
        for drive in self.working_drives() {
            for row in 0..geometry.zone_count {
                let empty = self.drive_reports[drive][row as usize].state == ZoneState::Empty;
                if empty || self.lanes.at(row, drive).is_some() {
                    continue;
                }
                let target = ZoneTarget::Zone { start_lba: geometry.zone_start_lba(row) };
                self.issue_to_drive(drive, Op::Reset, Command::ManageZone { action: ZoneAction::Reset, target });
            }
        }
    }

    /// Whether the failed drives leave every segment within what its level tolerates: a
    /// classic array's drives are every segment's; a declustered array's segment counts
    /// the failed drives among its own (none, for a drive rebuilt into spare space), which
    /// are known only once the lanes that moved are (`adopt_lanes_and_read_headers`), and
    /// only segments found on the drives count (an empty segment number's lanes move at
    /// the start).
    pub(super) fn check_failures(&self) -> Result<()> {
        let tolerated = self.config.level.tolerated_failures();
        let width = self.layout.drives();
        let worst = if self.lanes.is_classic() {
            self.failed.iter().filter(|f| **f).count()
        } else if self.phase == Phase::Reports || self.phase == Phase::Placement {
            return Ok(());
        } else {
            self.segments
                .keys()
                .map(|&segment| (0..width).filter(|&lane| self.lane_failed(segment, lane)).count())
                .max()
                .unwrap_or(0)
        };
        if worst > tolerated {
            return Err(Error::TooManyErasures { lost: worst, total: width, tolerated });
        }
        Ok(())
    }
}
