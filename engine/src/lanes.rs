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
//! A grown array (`zapraid grow`, `lanes/epochs.rs`) has several placements, one per
//! *epoch* (the drives it had after format and after each grow), and each row is in one
//! of them. Each epoch numbers its segments in a range of its own, after the earlier
//! epochs' (`first + r G_e + g`), so a segment's number, recorded in its headers and in
//! the L2P table, never changes and says which placement it is in. A row holding a
//! segment of an older epoch stays in it (the new drives are spare positions there)
//! until garbage collection has emptied it; then it takes the newest placement. The
//! numbers of the epochs a row is not in are *unusable*: no command names them.
//!
//! A classic array (N = w) maps both ways as the identity (segment = zone, lane = drive),
//! and `outbound` and `inbound` leave commands alone: it behaves exactly as before.
//!
//! Invariants: a usable segment number maps to one row and group; a drive holds at most
//! one segment of a row (a row's groups are disjoint); a completion maps back through the
//! segment its command was sent for; no command names an unusable number.

mod epoch;
mod epochs;

use rustc_hash::FxHashMap as HashMap;
use zapraid_zns::{Command, Completion, Done, Geometry, Tag, ZoneTarget};

use crate::config::Declustering;
use crate::drive_command::DriveCommand;
use crate::error::Result;
use crate::placement::Placement;

pub use crate::placement::MAX_PLACEMENT_EPOCHS;
use epoch::Epoch;

/// No segment at this place of a row: a spare position.
const NO_SEGMENT: u32 = u32::MAX;

/// The map between (segment, lane) and (drive, zone). See the module documentation.
#[derive(Debug)]
pub struct Lanes {
    /// k + m: lanes per segment.
    width: usize,
    /// N: the array's drives (the newest epoch's).
    drives: usize,
    /// The placements, oldest first (one for an array never grown; none for a classic
    /// array), each with its range of segment numbers and its rows' spare positions.
    epochs: Vec<Epoch>,
    /// Per row, the epoch it is in (an index of `epochs`); empty for a classic array.
    row_epoch: Vec<u8>,
    /// Zones each drive gives the segments (rows).
    rows: u32,
    zone_size_blocks: u64,
    /// Per segment number, its drives lane by lane (numbers x width); empty for a classic
    /// array. Meaningful for usable numbers only.
    segment_drives: Vec<u8>,
    /// The same as the placement made it, before any lane moved (its *home* drives):
    /// where an empty segment number's lanes go back to once their drives work.
    home_drives: Vec<u8>,
    /// Per (row, drive), the segment and lane there as `segment * width + lane`, or
    /// `NO_SEGMENT` (rows x drives); empty for a classic array.
    at_drive: Vec<u32>,
    /// The segment, lane and drive of each command sent and not completed (declustered
    /// arrays only): a completion, and an append's LBA, map back through them, also when
    /// the lane has moved to another drive since (`move_lane`).
    in_flight: HashMap<Tag, (u32, usize, usize)>,
}

impl Lanes {
    /// The map of an array placed by `placement` whose drives give the segments `rows`
    /// zones of `zone_size_blocks` blocks each.
    pub fn new(placement: &Placement, rows: u32, zone_size_blocks: u64) -> Lanes {
        Lanes::grown(std::slice::from_ref(placement), rows, zone_size_blocks)
    }

    /// The map of an array placed by `placements` in turn (format's, then each grow's,
    /// all of the same stripe and spares): every row in the newest until a start finds one
    /// holding an older epoch's segment (`set_row_epoch`).
    pub fn grown(placements: &[Placement], rows: u32, zone_size_blocks: u64) -> Lanes {
        let newest = placements.last().expect("at least one placement");
        let (width, drives) = (newest.width() as usize, newest.drives() as usize);
        let mut lanes = Lanes::classic(width, rows, zone_size_blocks);
        if drives == width {
            return lanes;
        }
        lanes.drives = drives;
        let mut first = 0u32;
        for placement in placements {
            debug_assert_eq!(placement.width() as usize, width, "every epoch has the array's stripe");
            debug_assert!(placement.drives() as usize <= drives, "an array only grows");
            let epoch = Epoch::new(placement, first, rows, drives);
            first += epoch.segments(rows);
            lanes.epochs.push(epoch);
        }
        let numbers = first as usize;
        lanes.segment_drives = vec![u8::MAX; numbers * width];
        for epoch in &lanes.epochs {
            for row in 0..rows {
                for group in 0..epoch.groups {
                    let segment = epoch.segment(row, group) as usize;
                    let drives = epoch.placement.segment_drives(u64::from(row), group);
                    for (lane, drive) in drives.into_iter().enumerate() {
                        lanes.segment_drives[segment * width + lane] = drive as u8;
                    }
                }
            }
        }
        lanes.home_drives = lanes.segment_drives.clone();
        lanes.at_drive = vec![NO_SEGMENT; rows as usize * drives];
        let newest = (lanes.epochs.len() - 1) as u8;
        lanes.row_epoch = vec![newest; rows as usize];
        for row in 0..rows {
            lanes.fill_row(row);
        }
        lanes
    }

    /// The map of an array of stripes of `width` drives spread as `declustering` says,
    /// over drives of `geometry`.
    pub fn for_array(width: usize, declustering: Declustering, geometry: &Geometry) -> Result<Lanes> {
        let drives = declustering.drives_for(width);
        if drives == width && declustering.distributed_spares == 0 {
            return Ok(Lanes::classic(width, geometry.zone_count, geometry.zone_size_blocks));
        }
        let placements = declustering
            .epoch_drives(width)
            .map(|n| Placement::new(n as u32, width as u32, declustering.distributed_spares))
            .collect::<Result<Vec<_>>>()?;
        Ok(Lanes::grown(&placements, geometry.zone_count, geometry.zone_size_blocks))
    }

    /// The map of a classic array of `width` drives: the identity.
    pub fn classic(width: usize, rows: u32, zone_size_blocks: u64) -> Lanes {
        Lanes {
            width,
            drives: width,
            epochs: Vec::new(),
            row_epoch: Vec::new(),
            rows,
            zone_size_blocks,
            segment_drives: Vec::new(),
            home_drives: Vec::new(),
            at_drive: Vec::new(),
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
            epochs: self.epochs.clone(),
            row_epoch: self.row_epoch.clone(),
            rows: self.rows,
            zone_size_blocks: self.zone_size_blocks,
            segment_drives: self.segment_drives.clone(),
            home_drives: self.home_drives.clone(),
            at_drive: self.at_drive.clone(),
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

    /// Segment numbers there are: zones per drive times groups per row, summed over the
    /// epochs (usable or not).
    pub fn segments(&self) -> u32 {
        match self.epochs.last() {
            None => self.rows,
            Some(newest) => newest.first + newest.segments(self.rows),
        }
    }

    /// The zone of every drive holding `segment`.
    pub fn row(&self, segment: u32) -> u32 {
        match self.epochs.iter().rev().find(|e| segment >= e.first) {
            None => segment,
            Some(epoch) => (segment - epoch.first) / epoch.groups,
        }
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
        let row = self.row(segment);
        self.row_spares(row)
            .iter()
            .map(|&d| usize::from(d))
            .find(|&d| !failed[d] && self.at_drive[row as usize * self.drives + d] == NO_SEGMENT)
    }

    /// Moves lane `lane` of `segment` to `drive`, which holds no segment of its row:
    /// commands of the lane go there from now on.
    pub fn move_lane(&mut self, segment: u32, lane: usize, drive: usize) {
        assert!(!self.is_classic(), "a classic array's lanes are its drives");
        debug_assert!(self.is_usable(segment), "segment {segment} is in its row's placement");
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

    /// Segments per row (G) of the newest placement.
    pub fn groups(&self) -> u32 {
        self.epochs.last().map_or(1, |e| e.groups)
    }

    /// Spare positions per row of the newest placement.
    pub fn spare_positions_per_row(&self) -> u32 {
        self.epochs.last().map_or(0, |e| e.spares_per_row as u32)
    }

    /// Zones at spare positions on working drives (`failed`, per drive), and of those,
    /// zones a lane moved to takes.
    pub fn spare_zones(&self, failed: &[bool]) -> (u64, u64) {
        let (mut total, mut used) = (0, 0);
        for row in 0..self.rows {
            for &d in self.row_spares(row) {
                let d = usize::from(d);
                if !failed[d] {
                    total += 1;
                    used += u64::from(self.at_drive[row as usize * self.drives + d] != NO_SEGMENT);
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
mod tests;
