//! Lanes: where a segment's chunks lie on an array wider than its stripes (issue 35).
//!
//! The engine numbers its segments as if each were a zone of its own (the *segment
//! number*, which the engine calls its zone: a segment's blocks sit at its number times the
//! zone size) and a segment's k + m chunks by *lane* (0..w, the chunk order of
//! `layout`). `Lanes` maps both to the array's N drives through the `Placement`: on the
//! way to the drives (`outbound`) and back on completions (`inbound`).
//!
//! ```text
//!   engine:  segment e, lane l, block b of the segment
//!   G = groups per row, row r = e / G, group g = e % G
//!   drives:  drive placement.segment_drives(r, g)[l], zone r, block b
//!
//!   N = 7, w = 3, S = 1, G = 2:        row r holds segments 2r and 2r + 1
//!   row 0:  d3 d0 d5 | d1 d6 d2 | d4   segment 0 = (d3, d0, d5), segment 1 = (d1, d6, d2)
//! ```
//!
//! A classic array (N = w) maps both ways as the identity (segment = zone, lane = drive),
//! and `outbound` and `inbound` leave commands alone: it behaves exactly as before.
//!
//! Invariants: a segment number maps to one row and group; a drive holds at most one
//! segment of a row (a row's groups are disjoint); a completion maps back through the
//! segment its command was sent for.

use rustc_hash::FxHashMap as HashMap;
use zapraid_zns::{Command, Completion, Done, Geometry, Tag, ZoneTarget};

use crate::config::Declustering;
use crate::drive_command::DriveCommand;
use crate::error::Result;
use crate::placement::Placement;

/// No segment at this place of a row: a spare position.
const NO_SEGMENT: u32 = u32::MAX;

/// The map between (segment, lane) and (drive, zone). See the module documentation.
#[derive(Debug)]
pub struct Lanes {
    /// k + m: lanes per segment.
    width: usize,
    /// N: the array's drives.
    drives: usize,
    /// Segment groups per row (G).
    groups: u32,
    /// Zones each drive gives the segments (rows).
    rows: u32,
    zone_size_blocks: u64,
    /// Per segment, its drives lane by lane (segments x width); empty for a classic array.
    segment_drives: Vec<u8>,
    /// The same as the placement made it, before any lane moved (its *home* drives):
    /// where an empty segment number's lanes go back to once their drives work.
    home_drives: Vec<u8>,
    /// Per (row, drive), the segment and lane there as `segment * width + lane`, or
    /// `NO_SEGMENT` (rows x drives); empty for a classic array.
    at_drive: Vec<u32>,
    /// Per row, the drives at its spare positions in the placement's order (rows x
    /// spare positions): where a failed drive's lanes of that row may move.
    row_spares: Vec<u8>,
    /// The segment, lane and drive of each command sent and not completed (declustered
    /// arrays only): a completion, and an append's LBA, map back through them, also when
    /// the lane has moved to another drive since (`move_lane`).
    in_flight: HashMap<Tag, (u32, usize, usize)>,
}

impl Lanes {
    /// The map of an array placed by `placement` whose drives give the segments `rows`
    /// zones of `zone_size_blocks` blocks each.
    pub fn new(placement: &Placement, rows: u32, zone_size_blocks: u64) -> Lanes {
        let (width, drives, groups) =
            (placement.width() as usize, placement.drives() as usize, placement.groups_per_row());
        let mut lanes = Lanes::classic(width, rows, zone_size_blocks);
        lanes.drives = drives;
        lanes.groups = groups;
        if lanes.is_classic() {
            return lanes;
        }
        for row in 0..rows {
            lanes.row_spares.extend(placement.spare_drives(u64::from(row)).into_iter().map(|d| d as u8));
        }
        lanes.segment_drives = Vec::with_capacity(rows as usize * groups as usize * width);
        lanes.at_drive = vec![NO_SEGMENT; rows as usize * drives];
        for row in 0..rows {
            for group in 0..groups {
                let segment = row * groups + group;
                for (lane, drive) in placement.segment_drives(u64::from(row), group).into_iter().enumerate() {
                    lanes.segment_drives.push(drive as u8);
                    let at = &mut lanes.at_drive[row as usize * drives + drive as usize];
                    debug_assert_eq!(*at, NO_SEGMENT, "a drive holds one segment of a row");
                    *at = segment * width as u32 + lane as u32;
                }
            }
        }
        lanes.home_drives = lanes.segment_drives.clone();
        lanes
    }

    /// The map of an array of stripes of `width` drives spread as `declustering` says,
    /// over drives of `geometry`.
    pub fn for_array(width: usize, declustering: Declustering, geometry: &Geometry) -> Result<Lanes> {
        let drives = declustering.drives_for(width);
        if drives == width && declustering.distributed_spares == 0 {
            return Ok(Lanes::classic(width, geometry.zone_count, geometry.zone_size_blocks));
        }
        let placement = Placement::new(drives as u32, width as u32, declustering.distributed_spares)?;
        Ok(Lanes::new(&placement, geometry.zone_count, geometry.zone_size_blocks))
    }

    /// The map of a classic array of `width` drives: the identity.
    pub fn classic(width: usize, rows: u32, zone_size_blocks: u64) -> Lanes {
        Lanes {
            width,
            drives: width,
            groups: 1,
            rows,
            zone_size_blocks,
            segment_drives: Vec::new(),
            home_drives: Vec::new(),
            at_drive: Vec::new(),
            row_spares: Vec::new(),
            in_flight: HashMap::default(),
        }
    }

    /// The map as it stands (lanes moved included), with no command in flight: for a scan
    /// of the running engine's log (`Recovery::scan_segments`), whose commands the
    /// engine's own map translates.
    pub fn snapshot(&self) -> Lanes {
        Lanes {
            width: self.width,
            drives: self.drives,
            groups: self.groups,
            rows: self.rows,
            zone_size_blocks: self.zone_size_blocks,
            segment_drives: self.segment_drives.clone(),
            home_drives: self.home_drives.clone(),
            at_drive: self.at_drive.clone(),
            row_spares: self.row_spares.clone(),
            in_flight: HashMap::default(),
        }
    }

    /// Whether the array is exactly as wide as its stripes (nothing is translated).
    pub fn is_classic(&self) -> bool {
        self.drives == self.width
    }

    /// The array's drives (N).
    pub fn drives(&self) -> usize {
        self.drives
    }

    /// Segment numbers there are: zones per drive times groups per row.
    pub fn segments(&self) -> u32 {
        self.rows * self.groups
    }

    /// The zone of every drive holding `segment`.
    pub fn row(&self, segment: u32) -> u32 {
        segment / self.groups
    }

    /// The drive holding lane `lane` of `segment`.
    pub fn drive(&self, segment: u32, lane: usize) -> usize {
        debug_assert!(lane < self.width && segment < self.segments());
        if self.is_classic() {
            return lane;
        }
        usize::from(self.segment_drives[segment as usize * self.width + lane])
    }

    /// The lane of `segment` that `drive` holds, if it holds one.
    pub fn lane(&self, segment: u32, drive: usize) -> Option<usize> {
        if self.is_classic() {
            return (drive < self.width).then_some(drive);
        }
        let row = self.row(segment) as usize;
        let at = *self.at_drive.get(row * self.drives + drive)?;
        (at != NO_SEGMENT && at / self.width as u32 == segment).then_some(at as usize % self.width)
    }

    /// The drive the placement put lane `lane` of `segment` on (`drive` until it moves).
    pub fn home(&self, segment: u32, lane: usize) -> usize {
        debug_assert!(lane < self.width && segment < self.segments());
        if self.is_classic() {
            return lane;
        }
        usize::from(self.home_drives[segment as usize * self.width + lane])
    }

    /// Whether no segment has a lane at zone `row` of `drive`.
    pub fn is_free_at(&self, row: u32, drive: usize) -> bool {
        !self.is_classic() && self.at_drive[row as usize * self.drives + drive] == NO_SEGMENT
    }

    /// Every drive of `segment`, lane by lane.
    pub fn drives_of(&self, segment: u32) -> impl Iterator<Item = usize> + '_ {
        (0..self.width).map(move |lane| self.drive(segment, lane))
    }

    /// A command of the engine (lane, segment blocks) as its drive takes it (drive, the
    /// row's zone). The command's segment is kept for its completion. A command of a
    /// whole drive names the array's drive already and goes as it is.
    pub fn outbound(&mut self, mut command: DriveCommand) -> DriveCommand {
        if self.is_classic() {
            return command;
        }
        let zs = self.zone_size_blocks;
        let lba = match &mut command.command {
            Command::Read { lba, .. } | Command::Write { lba, .. } => lba,
            Command::Append { zone_start_lba, .. } => zone_start_lba,
            Command::ManageZone { target: ZoneTarget::Zone { start_lba }, .. } => start_lba,
            // A whole drive's (recovery's zone reports): its drive is the array's already.
            Command::ManageZone { target: ZoneTarget::All, .. } | Command::ReportZones { .. } => return command,
        };
        let segment = (*lba / zs) as u32;
        let row = self.row(segment);
        *lba = *lba - u64::from(segment) * zs + u64::from(row) * zs;
        let lane = command.drive;
        command.drive = self.drive(segment, lane);
        let earlier = self.in_flight.insert(command.tag, (segment, lane, command.drive));
        debug_assert!(earlier.is_none(), "tag {} sent twice", command.tag);
        command
    }

    /// A completion from `drive` as the engine takes it: its lane, and an append's LBA
    /// within the segment's blocks; and the drive its command was sent to (None for a
    /// classic array, whose lanes never move). A tag not sent through `outbound` is left
    /// alone (the caller tells unknown tags). An append's LBA outside its zone stays
    /// outside the segment's blocks (the engine refuses it).
    pub fn inbound(&mut self, drive: usize, completion: &mut Completion) -> (usize, Option<usize>) {
        if self.is_classic() {
            return (drive, None);
        }
        let Some((segment, lane, sent)) = self.in_flight.remove(&completion.tag) else { return (drive, None) };
        let zs = self.zone_size_blocks;
        if let Ok(Done::Written { lba, .. }) = &mut completion.result {
            let row_start = u64::from(self.row(segment)) * zs;
            let within = lba.checked_sub(row_start).unwrap_or(u64::MAX - u64::from(segment) * zs);
            *lba = within.saturating_add(u64::from(segment) * zs);
        }
        (lane, Some(sent))
    }

    /// A drive at one of the spare positions of `segment`'s row that holds no segment of
    /// the row and has not failed (`failed`, per drive): where its lane on a failed drive
    /// may move. The placement's order of the row's spare positions decides among them,
    /// so that the moves spread over the drives as the rows do.
    pub fn spare_for(&self, segment: u32, failed: &[bool]) -> Option<usize> {
        if self.is_classic() {
            return None;
        }
        let row = self.row(segment) as usize;
        let per_row = self.row_spares.len() / self.rows.max(1) as usize;
        self.row_spares[row * per_row..(row + 1) * per_row]
            .iter()
            .map(|&d| usize::from(d))
            .find(|&d| !failed[d] && self.at_drive[row * self.drives + d] == NO_SEGMENT)
    }

    /// Moves lane `lane` of `segment` to `drive`, which holds no segment of its row:
    /// commands of the lane go there from now on.
    pub fn move_lane(&mut self, segment: u32, lane: usize, drive: usize) {
        assert!(!self.is_classic(), "a classic array's lanes are its drives");
        let row = self.row(segment) as usize;
        let from = self.drive(segment, lane);
        debug_assert_eq!(self.at_drive[row * self.drives + drive], NO_SEGMENT, "the drive is free in the row");
        self.at_drive[row * self.drives + from] = NO_SEGMENT;
        self.at_drive[row * self.drives + drive] = segment * self.width as u32 + lane as u32;
        self.segment_drives[segment as usize * self.width + lane] = drive as u8;
    }

    /// The segment and lane at zone `row` of `drive`, if a segment has a lane there (not
    /// a spare position).
    pub fn at(&self, row: u32, drive: usize) -> Option<(u32, usize)> {
        if self.is_classic() {
            return (drive < self.width).then_some((row, drive));
        }
        let at = *self.at_drive.get(row as usize * self.drives + drive)?;
        (at != NO_SEGMENT).then_some((at / self.width as u32, at as usize % self.width))
    }

    /// Segments per row (G).
    pub fn groups(&self) -> u32 {
        self.groups
    }

    /// Spare positions per row.
    pub fn spare_positions_per_row(&self) -> u32 {
        (self.row_spares.len() / self.rows.max(1) as usize) as u32
    }

    /// Zones at spare positions on working drives (`failed`, per drive), and of those,
    /// zones a lane moved to takes.
    pub fn spare_zones(&self, failed: &[bool]) -> (u64, u64) {
        let per_row = self.spare_positions_per_row() as usize;
        let (mut total, mut used) = (0, 0);
        for row in 0..self.rows as usize {
            for &d in &self.row_spares[row * per_row..(row + 1) * per_row] {
                let d = usize::from(d);
                if !failed[d] {
                    total += 1;
                    used += u64::from(self.at_drive[row * self.drives + d] != NO_SEGMENT);
                }
            }
        }
        (total, used)
    }

    /// Zones each drive gives the segments.
    pub fn rows(&self) -> u32 {
        self.rows
    }

    /// Whether any segment has a lane on `drive`.
    pub fn holds_any(&self, drive: usize) -> bool {
        if self.is_classic() {
            return drive < self.width;
        }
        self.at_drive.chunks_exact(self.drives).any(|row| row[drive] != NO_SEGMENT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_classic_array_maps_as_the_identity() {
        let placement = Placement::new(4, 4, 0).unwrap();
        let mut lanes = Lanes::new(&placement, 10, 100);
        assert!(lanes.is_classic());
        assert_eq!(lanes.segments(), 10);
        assert_eq!(lanes.drive(7, 2), 2);
        assert_eq!(lanes.lane(7, 3), Some(3));
        let command = DriveCommand {
            drive: 1,
            tag: 9,
            command: Command::Read { lba: 730, data: vec![], metadata: vec![] },
            delay_ns: 0,
        };
        let out = lanes.outbound(command);
        assert_eq!(out.drive, 1);
        assert!(matches!(out.command, Command::Read { lba: 730, .. }));
    }

    #[test]
    fn commands_and_completions_map_both_ways() {
        let placement = Placement::new(7, 3, 1).unwrap();
        let (rows, zs) = (20, 100);
        let mut lanes = Lanes::new(&placement, rows, zs);
        assert_eq!(lanes.segments(), 40);
        for segment in 0..lanes.segments() {
            let drives: Vec<usize> = lanes.drives_of(segment).collect();
            let mut distinct = drives.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(distinct.len(), 3, "segment {segment}'s drives {drives:?} are distinct");
            for (lane, drive) in drives.iter().enumerate() {
                assert_eq!(lanes.lane(segment, *drive), Some(lane));
            }
            let row = u64::from(lanes.row(segment));
            let group = segment % 2;
            let placed: Vec<usize> = placement.segment_drives(row, group).into_iter().map(|d| d as usize).collect();
            assert_eq!(drives, placed);
        }
        // Segment 13 (row 6, group 1), lane 2, an append of its zone.
        let (segment, lane) = (13u32, 2usize);
        let drive = lanes.drive(segment, lane);
        let start = u64::from(segment) * zs;
        let command = DriveCommand {
            drive: lane,
            tag: 5,
            command: Command::Append { zone_start_lba: start, data: vec![], metadata: vec![] },
            delay_ns: 0,
        };
        let out = lanes.outbound(command);
        assert_eq!(out.drive, drive);
        assert!(matches!(out.command, Command::Append { zone_start_lba: 600, .. }));
        let mut completion =
            Completion { tag: 5, result: Ok(Done::Written { lba: 642, blocks: 1 }), data: vec![], metadata: vec![] };
        assert_eq!(lanes.inbound(drive, &mut completion), (lane, Some(drive)));
        assert!(matches!(completion.result, Ok(Done::Written { lba, .. }) if lba == start + 42));
    }
}
