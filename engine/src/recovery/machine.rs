//! The recovery state machine (`Recovery`): its state, what it finds on the drives, what it
//! hands the engine (`Recovered`), and its entry points (`new`, `poll_command`,
//! `on_completion`). Its phases, the reading of headers and footers, the assembly of
//! stripes and the end are the sibling files'.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use zapraid_zns::{Command, Completion, Done, Geometry, Tag, ZoneDescriptor, ZoneState, ZonedDevice};

use crate::config::Config;
use crate::drive_command::DriveCommand;
use crate::error::{Error, Result};
use crate::format::{decode_footer_block, CheckpointImage, SegmentHeader, SegmentLanes};
use crate::hybrid::{ChunkClass, SegmentPlan};
use crate::l2p::Physical;
use crate::lanes::Lanes;
use crate::layout::Layout;
use crate::stripe_table::CompactStripeTable;

/// A segment recovery found.
pub(crate) struct RecoveredSegment {
    pub zone: u32,
    pub sequence: u64,
    /// Its shape, as its header says (one of the array's `SegmentPlan` layouts).
    pub layout: Layout,
    pub class: ChunkClass,
    pub table: Option<CompactStripeTable>,
    /// Sealed or cleanly stopped: complete, not to be rewritten.
    pub complete: bool,
    /// Sealed: every stripe written and the footer (not a clean stop's stop footer).
    pub full: bool,
}

/// What recovery hands the engine.
pub(crate) struct Recovered {
    pub segments: Vec<RecoveredSegment>,
    pub mappings: Vec<(u64, Physical)>,
    /// LBAs whose newest version is a lost-block marker, with its timestamp (`engine::lost`).
    pub lost: Vec<(u64, u64)>,
    pub free_zones: Vec<u32>,
    pub next_sequence: u64,
    pub next_timestamp: u64,
    pub failed_drives: Vec<usize>,
    /// Of those, the drives rebuilt into spare space (`Recovery::set_spared_drives`).
    pub spared_drives: Vec<usize>,
    pub repairs: Repairs,
    pub report: RecoveryReport,
}

/// What a recovery read from the drives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Blocks read: headers, footers, stop footers and scanned data blocks.
    pub blocks_read: u64,
    /// Open segments' zones (per drive) read through a clean stop's stop footer, and read
    /// by scanning every block's metadata.
    pub stop_footers_read: u64,
    pub zones_scanned: u64,
    /// Segment headers (one per zone and drive) that did not decode or could not be read.
    pub damaged_headers: u64,
    /// Footers and stop footers (per zone and drive) that did not decode or could not be
    /// read: that drive's zone was scanned block by block instead.
    pub damaged_footers: u64,
    /// The generation of the checkpoint this start began from (its directory, segments,
    /// live counts and stripe tables; nothing of its segments read past their headers), if
    /// one matched the drives.
    pub checkpoint_generation: Option<u64>,
    /// Of a start from a checkpoint, the segments written after it (after a crash): read
    /// as without one, their entries newer than the checkpoint's pages.
    pub segments_replayed: u64,
}

/// Damage recovery found in the stripes and what became of it (kept by the engine and
/// shown by `status`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Repairs {
    /// Segment headers and footers that were damaged (see `RecoveryReport`).
    pub damaged_structures: u64,
    /// Blocks a working drive had written but that did not read back intact, whose place
    /// in the array (LBA, timestamp) was rebuilt from the rest of their stripe.
    pub blocks_repaired: u64,
    /// Such blocks of complete segments (sealed, or closed by a clean stop) that could not
    /// be rebuilt: their stripe lost more chunks than the level's parity covers. Their LBAs
    /// keep an older copy, if any.
    pub blocks_lost: u64,
    /// Such blocks of a segment that was open at a crash: a power cut that tore a
    /// stripe's writes leaves the same trace as damage, and such a stripe was never
    /// acknowledged; counted apart from losses.
    pub blocks_dropped: u64,
}

/// A data block found on a drive: where, and what its metadata says.
#[derive(Clone, Copy, Debug)]
pub(super) struct Found {
    pub(super) drive: usize,
    /// Zone-relative block.
    pub(super) offset: u64,
    pub(super) lba: u64,
    pub(super) timestamp: u64,
    pub(super) stripe_id: u32,
}

impl Found {
    /// The block at zone-relative `offset` of `drive`, as its metadata `m` says.
    pub(super) fn of(drive: usize, offset: u64, m: &crate::format::BlockMetadata) -> Found {
        Found { drive, offset, lba: m.lba.get(), timestamp: m.timestamp.get(), stripe_id: m.stripe_id.get() }
    }
}

pub(super) enum Op {
    Report,
    Header {
        zone: u32,
    },
    /// The first footer block (where the segment's layout puts it, known once its headers
    /// are judged): a segment is sealed only if every drive has its footer
    /// (a zone can be full without one: finished after recovery, or cut mid-footer).
    FooterProbe {
        zone: u32,
    },
    /// Footer blocks read from `start` (zone-relative) on.
    Footer {
        zone: u32,
        start: u64,
        first_block: u64,
    },
    /// Where the writes of an open segment's finished zone end (finishing moved its write
    /// pointer to the end): a binary search for the first unwritten block. Block
    /// `last_written` is known written, blocks from `unwritten` on are known unwritten.
    EndProbe {
        zone: u32,
        last_written: u64,
        unwritten: u64,
        probe: u64,
    },
    /// The last written block of an open segment's zone: a stop footer, after a clean stop?
    StopProbe {
        zone: u32,
        written: u64,
    },
    Blocks {
        zone: u32,
        first_offset: u64,
    },
    Reset,
    /// The header block of zone `row` of a drive of a declustered array, read to learn
    /// which segment and lane it holds (`lanes`); sent to the drive as it is.
    PlacementHeader {
        row: u32,
    },
}

#[derive(PartialEq, Eq)]
pub(super) enum Phase {
    Reports,
    /// A declustered array's drives' headers, read to learn where lanes moved (`lanes`).
    Placement,
    Headers,
    FooterProbes,
    StopProbes,
    Contents,
    Rescans,
    Resets,
    Done,
}

/// The recovery state machine. See the module documentation.
pub struct Recovery {
    /// The engine's numbering: segments as zones, lanes as drives (`crate::lanes`); for a
    /// classic array the drives' own geometry.
    pub(super) geometry: Geometry,
    /// Each drive's geometry, as given.
    pub(super) drive_geometry: Geometry,
    /// Where each segment's lanes lie on the array's drives, with the lanes found moved
    /// into spare space (`lanes`).
    pub(super) lanes: Lanes,
    /// Per drive of the array, its zone report.
    pub(super) drive_reports: Vec<Vec<ZoneDescriptor>>,
    /// Commands to whole drives, or to a drive's own zones (`Op::PlacementHeader`), sent
    /// as they are; the others are the engine's numbering, mapped by `lanes`.
    pub(super) drive_commands: VecDeque<DriveCommand>,
    /// What the placement phase read: per drive and row, the header there and the
    /// segment number it names.
    pub(super) placement_headers: Vec<(usize, u32, SegmentHeader, SegmentLanes)>,
    pub(super) config: Config,
    /// The array's open segments and the layouts its segments may have.
    pub(super) plan: SegmentPlan,
    /// The first slot's layout: the drive count and shape every layout shares.
    pub(super) layout: Layout,
    /// Per segment's zone, its layout and chunk class, from its headers.
    pub(super) zone_layouts: HashMap<u32, (Layout, ChunkClass)>,
    pub(super) phase: Phase,
    pub(super) commands: VecDeque<DriveCommand>,
    pub(super) ops: HashMap<Tag, (usize, Op)>,
    pub(super) next_tag: Tag,
    /// Per lane, per segment: the zone report of the drive holding it (`lanes`).
    pub(super) reports: Vec<Vec<ZoneDescriptor>>,
    /// Per zone, the sequence its headers agree on.
    pub(super) segments: BTreeMap<u32, u64>,
    pub(super) headers: HashMap<u32, Vec<Option<SegmentHeader>>>,
    /// Per zone, blocks found (from footers or metadata).
    pub(super) found: HashMap<u32, Vec<Found>>,
    /// Per zone, data blocks of a metadata scan that fail their checksum but whose
    /// metadata still names them (LBA, timestamp, this segment): damaged, not torn.
    pub(super) damaged: HashMap<u32, Vec<Found>>,
    /// Per zone, the other data-region blocks (parity, padding, mapping blocks, markers)
    /// of a metadata scan damaged that way: their fields still help rebuild a row's.
    pub(super) damaged_fields: HashMap<u32, Vec<Found>>,
    /// Per zone, blocks a rebuild could not reconstruct whose footer entry names the LBA
    /// the table mapped there, lost (`engine::lost`): recorded lost like a marker's.
    pub(super) named_lost: HashMap<u32, Vec<Found>>,
    pub(super) sealed: HashMap<u32, bool>,
    /// Per zone and drive, the segment sequence its first footer block names, if it
    /// decoded and names that drive. Compared with the headers only once both are in
    /// (the two reads complete in any order).
    pub(super) footer_probes: HashMap<u32, Vec<Option<u64>>>,
    /// Per open segment's zone and drive: where its data ends, and where a stop footer
    /// recording it starts (if one was found).
    pub(super) open_extents: BTreeMap<(u32, usize), (u64, Option<u64>)>,
    /// Per segment's zone and drive: where its data region ends (the footer of a sealed
    /// segment, the stop footer or write pointer of an open one). Blocks before it that are
    /// not found were damaged; blocks after it were never written.
    pub(super) data_end: HashMap<(u32, usize), u64>,
    /// Zones and drives whose footer or stop footer was damaged: read block by block.
    pub(super) rescan: BTreeSet<(u32, usize)>,
    /// Per drive of the array: failed (recorded so, or it did not answer its zone report).
    pub(super) failed: Vec<bool>,
    /// Per drive of a declustered array: failed and rebuilt into spare space before, so
    /// that no segment has a lane on it (`set_spared_drives`).
    pub(super) spared: Vec<bool>,
    pub(super) report: RecoveryReport,
    pub(super) error: Option<Error>,
    /// A checkpoint offered (`use_checkpoint`); kept once it is found to match the drives.
    pub(super) checkpoint: Option<CheckpointImage>,
    /// The offered checkpoint matched: its segments' contents are not replayed.
    pub(super) from_checkpoint: bool,
    /// The next sequence number and timestamp of a checkpoint of this array offered,
    /// whether or not it matched: the start goes past them, so that no segment written
    /// after this start reuses a (zone, sequence) the checkpoint names, and the checkpoint
    /// can never match the drives again once they differed from it.
    pub(super) checkpoint_floor: (u64, u64),
    /// Reading the log of segments the running engine names (`scan`), not a start: no
    /// headers read, no zone reset, nothing built.
    pub(super) scan_only: bool,
    /// Of a scan, the engine's stripe tables of appending segments (`ScanSegment::table`):
    /// the places of chunks no drive read can give, ahead of any a checkpoint recorded.
    pub(super) known_places: HashMap<u32, CompactStripeTable>,
    /// Of a scan of a declustered array, per segment the lane a rebuild has not written
    /// yet (`ScanSegment::absent`): read like a failed drive's.
    pub(super) absent_lanes: HashMap<u32, usize>,
    /// A scan's segment commands are in the engine's numbering (lane, segment): the
    /// running engine's map translates them, and its completions come back translated.
    pub(super) engine_numbering: bool,
}

impl Recovery {
    /// Starts recovering an array of `config` on drives of `geometry`.
    pub fn new(geometry: Geometry, config: Config) -> Result<Self> {
        Self::with_failed_drives(geometry, config, &[])
    }

    /// Like `new`, with drives known to have failed (the array superblock records drives
    /// failed while it ran): nothing is read from them, their blocks are rebuilt.
    pub fn with_failed_drives(geometry: Geometry, config: Config, failed_drives: &[usize]) -> Result<Self> {
        let plan = SegmentPlan::new(&geometry, config.level, config.mode, config.chunk_bytes, config.open_segments)?;
        let layout = *plan.primary();
        let lanes = Lanes::for_array(layout.drives(), config.declustering, &geometry)?;
        let drive_geometry = geometry;
        let geometry = Geometry { zone_count: lanes.segments(), ..geometry };
        let drives = lanes.drives();
        let mut recovery = Recovery {
            geometry,
            drive_geometry,
            lanes,
            drive_reports: vec![Vec::new(); drives],
            drive_commands: VecDeque::new(),
            placement_headers: Vec::new(),
            config,
            plan,
            layout,
            zone_layouts: HashMap::new(),
            phase: Phase::Reports,
            commands: VecDeque::new(),
            ops: HashMap::new(),
            next_tag: 0,
            reports: vec![Vec::new(); layout.drives()],
            segments: BTreeMap::new(),
            headers: HashMap::new(),
            found: HashMap::new(),
            damaged: HashMap::new(),
            damaged_fields: HashMap::new(),
            named_lost: HashMap::new(),
            sealed: HashMap::new(),
            footer_probes: HashMap::new(),
            open_extents: BTreeMap::new(),
            data_end: HashMap::new(),
            rescan: BTreeSet::new(),
            failed: vec![false; drives],
            spared: vec![false; drives],
            report: RecoveryReport::default(),
            error: None,
            checkpoint: None,
            from_checkpoint: false,
            checkpoint_floor: (0, 0),
            scan_only: false,
            known_places: HashMap::new(),
            absent_lanes: HashMap::new(),
            engine_numbering: false,
        };
        for &drive in failed_drives {
            if drive >= drives {
                return Err(Error::InvalidConfig { reason: format!("failed drive {drive} of {drives}") });
            }
            recovery.failed[drive] = true;
        }
        recovery.check_failures()?;
        let rows = drive_geometry.zone_count;
        for drive in recovery.working_drives() {
            recovery.issue_to_drive(drive, Op::Report, Command::ReportZones { start_lba: 0, max_zones: rows });
        }
        Ok(recovery)
    }

    /// Says which failed drives of a declustered array were rebuilt into distributed spare
    /// space (a real array records them in its superblock): a segment number with a lane
    /// on one of them holds no segment (its lanes all moved off before), so one whose
    /// other lanes are all on failed drives too is empty, not lost. Before any completion.
    pub fn set_spared_drives(&mut self, spared: &[usize]) -> Result<()> {
        for &drive in spared {
            if drive >= self.spared.len() || !self.failed[drive] || self.lanes.is_classic() {
                return Err(Error::InvalidConfig {
                    reason: format!("drive {drive} is not a failed drive of a declustered array"),
                });
            }
            self.spared[drive] = true;
        }
        Ok(())
    }

    /// The next command for a drive: its drive and zone the array's (`crate::lanes`).
    pub fn poll_command(&mut self) -> Option<DriveCommand> {
        if let Some(command) = self.drive_commands.pop_front() {
            return Some(command);
        }
        let command = self.commands.pop_front()?;
        if self.engine_numbering {
            return Some(command);
        }
        Some(self.lanes.outbound(command))
    }

    /// Drives recovery one round on real or emulated drives: submits what it asks for,
    /// then waits on every drive with commands in flight and feeds it the completions.
    /// Returns how many completions it took; a round that takes none while recovery is
    /// not done means recovery waits for commands no drive has (an error).
    pub fn run_round<D: ZonedDevice>(&mut self, drives: &mut [D]) -> Result<usize> {
        while let Some(cmd) = self.poll_command() {
            drives[cmd.drive].submit(cmd.tag, cmd.command);
        }
        if self.is_done() {
            return Ok(0);
        }
        let mut taken = 0;
        let mut out = Vec::new();
        for (i, drive) in drives.iter_mut().enumerate() {
            if drive.in_flight() == 0 {
                continue;
            }
            drive.wait(&mut out);
            for completion in out.drain(..) {
                taken += 1;
                self.on_completion(i, completion);
            }
        }
        if taken == 0 && !self.is_done() {
            return Err(Error::Unavailable { reason: "recovery is waiting for commands no drive has".into() });
        }
        Ok(taken)
    }

    /// Whether recovery has finished (then call `finish`).
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done || (self.error.is_some() && self.ops.is_empty())
    }

    /// What this recovery read so far.
    pub fn report(&self) -> RecoveryReport {
        self.report
    }

    pub(super) fn issue(&mut self, drive: usize, op: Op, command: Command) {
        if let Command::Read { data, .. } = &command {
            self.report.blocks_read += (data.len() / self.geometry.block_size_bytes as usize) as u64;
        }
        let tag = self.next_tag;
        self.next_tag += 1;
        self.ops.insert(tag, (drive, op));
        self.commands.push_back(DriveCommand { drive, tag, command, delay_ns: 0 });
    }

    /// Like `issue`, to drive `drive` of the array and its own zones, not mapped by lane.
    pub(super) fn issue_to_drive(&mut self, drive: usize, op: Op, command: Command) {
        if let Command::Read { data, .. } = &command {
            self.report.blocks_read += (data.len() / self.geometry.block_size_bytes as usize) as u64;
        }
        let tag = self.next_tag;
        self.next_tag += 1;
        self.ops.insert(tag, (drive, op));
        self.drive_commands.push_back(DriveCommand { drive, tag, command, delay_ns: 0 });
    }

    pub(super) fn fail(&mut self, error: Error) {
        self.error.get_or_insert(error);
    }

    pub(super) fn corrupt(
        &self,
        drive: usize,
        zone: u32,
        offset_blocks: u64,
        structure: &'static str,
        reason: String,
    ) -> Error {
        Error::Corrupt { drive, zone, offset_blocks, structure, reason }
    }

    /// Takes a completion from drive `drive` of the array.
    pub fn on_completion(&mut self, drive: usize, mut completion: Completion) {
        // From here on, `drive` is the lane of a command in the engine's numbering.
        let drive = match self.engine_numbering {
            true => drive,
            false => self.lanes.inbound(drive, &mut completion).0,
        };
        let Some((_, op)) = self.ops.remove(&completion.tag) else { return };
        let result = match completion.result {
            Ok(done) => done,
            Err(_) if matches!(op, Op::Report) => {
                // A drive that cannot report its zones is gone; the stripes rebuild it.
                self.failed[drive] = true;
                if let Err(e) = self.check_failures() {
                    self.fail(e);
                }
                return self.advance();
            }
            Err(zapraid_zns::Error::DeviceFailed) => {
                self.fail(Error::Device { drive, error: zapraid_zns::Error::DeviceFailed });
                return self.advance();
            }
            Err(error) => {
                // A media error on one read is damage like a bad checksum: the structure
                // or blocks it covers are treated as unreadable and rebuilt from the others.
                tracing::warn!(drive, "recovery read failed: {error}");
                self.take_unreadable(drive, op);
                return self.advance();
            }
        };
        match op {
            Op::Report => match result {
                Done::Zones(zones) if zones.len() == self.drive_geometry.zone_count as usize => {
                    self.drive_reports[drive] = zones
                }
                other => self.fail(self.corrupt(drive, 0, 0, "zone report", format!("{other:?}"))),
            },
            Op::PlacementHeader { row } => self.take_placement_header(drive, row, &completion.data),
            Op::Header { zone } => match SegmentHeader::decode(&completion.data) {
                Ok(header) => self.headers.entry(zone).or_default()[drive] = Some(header),
                // Checked against the other drives' headers once all are in.
                Err(e) => tracing::warn!(drive, zone, "segment header damaged: {e}"),
            },
            Op::FooterProbe { zone } => {
                if let Ok((header, _)) = decode_footer_block(&completion.data) {
                    if header.drive_index.get() as usize == drive {
                        self.footer_probes.entry(zone).or_default()[drive] = Some(header.segment_sequence.get());
                    }
                }
            }
            Op::Footer { zone, start, first_block } => {
                if let Err(reason) = self.take_footer(drive, zone, start + first_block, &completion.data) {
                    tracing::warn!(drive, zone, "footer damaged, reading the zone's blocks instead: {reason}");
                    self.rescan.insert((zone, drive));
                }
            }
            Op::EndProbe { zone, last_written, unwritten, probe } => {
                // A block never written reads as zeros, data and metadata; anything else
                // (also a damaged block) was written.
                let blank = completion.data.iter().chain(&completion.metadata).all(|b| *b == 0);
                let (last_written, unwritten) = if blank { (last_written, probe) } else { (probe, unwritten) };
                self.search_end(drive, zone, last_written, unwritten);
            }
            Op::StopProbe { zone, written } => {
                self.take_stop_probe(drive, zone, written, &completion.data, &completion.metadata)
            }
            Op::Blocks { zone, first_offset } => {
                self.take_blocks(drive, zone, first_offset, &completion.data, &completion.metadata)
            }
            Op::Reset => {}
        }
        self.advance();
    }

    /// Moves to the next phase when the current one has no command left in flight.
    pub(super) fn advance(&mut self) {
        if !self.ops.is_empty() || self.error.is_some() {
            return;
        }
        match self.phase {
            Phase::Reports if self.lanes.is_classic() => {
                self.reports = std::mem::take(&mut self.drive_reports);
                if self.scan_only {
                    self.probe_footers()
                } else {
                    self.read_headers()
                }
            }
            // A scan takes the running engine's lanes as they are (`scan_segments`).
            Phase::Reports if self.scan_only => {
                self.reports = self.lane_reports();
                self.probe_footers()
            }
            Phase::Reports => self.read_placement_headers(),
            Phase::Placement => self.adopt_lanes_and_read_headers(),
            Phase::Headers => self.judge_headers_and_probe_footers(),
            Phase::FooterProbes => self.judge_segments_and_read_contents(),
            Phase::StopProbes => self.read_open_segments(),
            Phase::Contents => self.rescan_damaged_footers(),
            Phase::Rescans if self.scan_only => self.phase = Phase::Done,
            Phase::Rescans => self.reset_unused_zones(),
            Phase::Resets => self.phase = Phase::Done,
            Phase::Done => {}
        }
    }

    /// The array's drives that work.
    pub(super) fn working_drives(&self) -> Vec<usize> {
        (0..self.failed.len()).filter(|d| !self.failed[*d]).collect()
    }

    /// The lanes of the segment in `zone` whose drives work.
    pub(super) fn live_drives(&self, zone: u32) -> Vec<usize> {
        (0..self.layout.drives()).filter(|&lane| !self.lane_failed(zone, lane)).collect()
    }

    /// Whether the drive holding lane `lane` of the segment in `zone` failed.
    pub(super) fn lane_failed(&self, zone: u32, lane: usize) -> bool {
        self.failed[self.lanes.drive(zone, lane)] || self.absent_lanes.get(&zone) == Some(&lane)
    }

    /// Per lane of the segment in `zone`: its drive failed.
    pub(super) fn failed_lanes(&self, zone: u32) -> Vec<bool> {
        (0..self.layout.drives()).map(|lane| self.lane_failed(zone, lane)).collect()
    }

    pub(super) fn written(&self, drive: usize, zone: u32) -> u64 {
        let z = &self.reports[drive][zone as usize];
        if z.state == ZoneState::Empty {
            0
        } else {
            z.written_blocks()
        }
    }
}
