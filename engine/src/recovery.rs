//! Recovery: rebuilding the engine's in-memory state from the drives alone (paper section
//! 3.4), as a sans-I/O state machine like the engine (`poll_command`, `on_completion`).
//!
//! 1. Zone reports of every drive.
//! 2. The header block of every zone written past its header region. Zones some drive
//!    has not written past the header region never received data (the first group waits
//!    for the header) and are reset; headers of another array, of the wrong drive or
//!    inconsistent between drives are errors that name the drive and zone.
//! 3. Sealed segments (every zone written past its footer): the footer blocks, giving
//!    each data block's LBA, timestamp and stripe ID. Open segments: the data and metadata
//!    of every written block of the data region; blocks that fail their checksum or carry
//!    another segment's sequence are not trusted, and stripes without all their chunks are
//!    dropped (they hold no acknowledged write: a write is acknowledged only when its whole
//!    stripe is persisted).
//! 4. The L2P table (newest timestamp wins; a block garbage collection copied keeps its
//!    timestamp, so between equal timestamps the newer segment wins), the compact stripe
//!    tables, the free zones, the next sequence number and timestamp.
//! 5. Recovered open segments are finished and never appended to again: the engine
//!    rewrites their complete stripes' live blocks into a new segment and then resets
//!    their zones (garbage collection, `reclaim_first`), in the background.
//!
//! With a failed drive (one that cannot report its zones, up to the tolerated count), its
//! data blocks' LBAs and timestamps come back per stripe from the parity of those fields
//! that parity blocks carry; reads rebuild their contents.
//!
//! Recovery only reads and resets zones that held nothing acknowledged, so it is
//! idempotent and survives a crash of its own at any point.

use std::collections::{BTreeMap, HashMap, VecDeque};

use zapraid_zns::{
    Command, Completion, Done, Geometry, Tag, ZoneAction, ZoneDescriptor, ZoneState, ZoneTarget, ZonedDevice,
};

use crate::engine::{Config, DriveCommand, Engine};
use crate::error::{Error, Result};
use crate::format::{decode_footer_block, footer_entries_per_block, BlockKind, BlockMetadata, SegmentHeader, NO_LBA};
use crate::l2p::Physical;
use crate::layout::Layout;
use crate::parity::ParityCodec;
use crate::stripe_table::CompactStripeTable;

/// What recovery hands the engine.
pub(crate) struct Recovered {
    /// (zone, sequence, compact stripe table, sealed)
    pub segments: Vec<(u32, u64, Option<CompactStripeTable>, bool)>,
    pub mappings: Vec<(u64, Physical)>,
    pub free_zones: Vec<u32>,
    pub next_sequence: u64,
    pub next_timestamp: u64,
    pub failed_drives: Vec<usize>,
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
}

/// A data block found on a drive: where, and what its metadata says.
#[derive(Clone, Copy, Debug)]
struct Found {
    drive: usize,
    /// Zone-relative block.
    offset: u64,
    lba: u64,
    timestamp: u64,
    stripe_id: u32,
}

/// One chunk of a stripe as found on a drive: its blocks in offset order.
struct FoundChunk {
    drive: usize,
    position: u64,
    blocks: Vec<Found>,
}

enum Op {
    Report,
    Header {
        zone: u32,
    },
    /// The first footer block: a segment is sealed only if every drive has its footer
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
}

#[derive(PartialEq, Eq)]
enum Phase {
    Reports,
    Headers,
    StopProbes,
    Contents,
    Resets,
    Done,
}

/// The recovery state machine. See the module documentation.
pub struct Recovery {
    geometry: Geometry,
    config: Config,
    layout: Layout,
    phase: Phase,
    commands: VecDeque<DriveCommand>,
    ops: HashMap<Tag, (usize, Op)>,
    next_tag: Tag,
    reports: Vec<Vec<ZoneDescriptor>>,
    /// Per zone, the sequence its headers agree on.
    segments: BTreeMap<u32, u64>,
    headers: HashMap<u32, Vec<Option<SegmentHeader>>>,
    /// Per zone, blocks found (from footers or metadata).
    found: HashMap<u32, Vec<Found>>,
    sealed: HashMap<u32, bool>,
    /// Per zone, drives whose first footer block decoded as this segment's.
    footers_found: HashMap<u32, usize>,
    /// Per open segment's zone and drive: where its data ends, and where a stop footer
    /// recording it starts (if one was found).
    open_extents: BTreeMap<(u32, usize), (u64, Option<u64>)>,
    /// Drives that did not answer their zone report.
    failed: Vec<bool>,
    report: RecoveryReport,
    error: Option<Error>,
}

impl Recovery {
    /// Starts recovering an array of `config` on drives of `geometry`.
    pub fn new(geometry: Geometry, config: Config) -> Result<Self> {
        Self::with_failed_drives(geometry, config, &[])
    }

    /// Like `new`, with drives known to have failed (the array superblock records drives
    /// failed while it ran): nothing is read from them, their blocks are rebuilt.
    pub fn with_failed_drives(geometry: Geometry, config: Config, failed_drives: &[usize]) -> Result<Self> {
        let layout = Layout::new(&geometry, config.level, config.mode, config.chunk_bytes)?;
        let mut recovery = Recovery {
            geometry,
            config,
            layout,
            phase: Phase::Reports,
            commands: VecDeque::new(),
            ops: HashMap::new(),
            next_tag: 0,
            reports: vec![Vec::new(); layout.drives()],
            segments: BTreeMap::new(),
            headers: HashMap::new(),
            found: HashMap::new(),
            sealed: HashMap::new(),
            footers_found: HashMap::new(),
            open_extents: BTreeMap::new(),
            failed: vec![false; layout.drives()],
            report: RecoveryReport::default(),
            error: None,
        };
        let tolerated = config.level.tolerated_failures();
        for &drive in failed_drives {
            if drive >= layout.drives() {
                return Err(Error::InvalidConfig { reason: format!("failed drive {drive} of {}", layout.drives()) });
            }
            recovery.failed[drive] = true;
        }
        let failed = recovery.failed.iter().filter(|f| **f).count();
        if failed > tolerated {
            return Err(Error::TooManyErasures { lost: failed, total: layout.drives(), tolerated });
        }
        for drive in recovery.live_drives() {
            recovery.issue(drive, Op::Report, Command::ReportZones { start_lba: 0, max_zones: geometry.zone_count });
        }
        Ok(recovery)
    }

    pub fn poll_command(&mut self) -> Option<DriveCommand> {
        self.commands.pop_front()
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

    fn issue(&mut self, drive: usize, op: Op, command: Command) {
        if let Command::Read { data, .. } = &command {
            self.report.blocks_read += (data.len() / self.geometry.block_size_bytes as usize) as u64;
        }
        let tag = self.next_tag;
        self.next_tag += 1;
        self.ops.insert(tag, (drive, op));
        self.commands.push_back(DriveCommand { drive, tag, command, delay_ns: 0 });
    }

    fn fail(&mut self, error: Error) {
        self.error.get_or_insert(error);
    }

    fn corrupt(&self, drive: usize, zone: u32, offset_blocks: u64, structure: &'static str, reason: String) -> Error {
        Error::Corrupt { drive, zone, offset_blocks, structure, reason }
    }

    pub fn on_completion(&mut self, drive: usize, completion: Completion) {
        let Some((_, op)) = self.ops.remove(&completion.tag) else { return };
        let result = match completion.result {
            Ok(done) => done,
            Err(_) if matches!(op, Op::Report) => {
                // A drive that cannot report its zones is gone; the stripes rebuild it.
                self.failed[drive] = true;
                let failed = self.failed.iter().filter(|f| **f).count();
                let tolerated = self.config.level.tolerated_failures();
                if failed > tolerated {
                    let n = self.layout.drives();
                    self.fail(Error::TooManyErasures { lost: failed, total: n, tolerated });
                }
                return self.advance();
            }
            Err(source) => {
                self.fail(Error::Device { drive, source });
                return self.advance();
            }
        };
        match op {
            Op::Report => match result {
                Done::Zones(zones) if zones.len() == self.geometry.zone_count as usize => self.reports[drive] = zones,
                other => self.fail(self.corrupt(drive, 0, 0, "zone report", format!("{other:?}"))),
            },
            Op::Header { zone } => match SegmentHeader::decode(&completion.data) {
                Ok(header) => self.headers.entry(zone).or_default()[drive] = Some(header),
                Err(e) => self.fail(self.corrupt(drive, zone, 0, "segment header", e.to_string())),
            },
            Op::FooterProbe { zone } => {
                if let Ok((header, _)) = decode_footer_block(&completion.data) {
                    let sequence = self.headers[&zone][drive].map(|h| h.segment_sequence.get());
                    if Some(header.segment_sequence.get()) == sequence && header.drive_index.get() as usize == drive {
                        *self.footers_found.entry(zone).or_default() += 1;
                    }
                }
            }
            Op::Footer { zone, start, first_block } => {
                self.take_footer(drive, zone, start + first_block, &completion.data)
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
    fn advance(&mut self) {
        if !self.ops.is_empty() || self.error.is_some() {
            return;
        }
        match self.phase {
            Phase::Reports => self.read_headers(),
            Phase::Headers => self.check_headers_and_read_contents(),
            Phase::StopProbes => self.read_open_segments(),
            Phase::Contents => self.reset_unused_zones(),
            Phase::Resets => self.phase = Phase::Done,
            Phase::Done => {}
        }
    }

    fn live_drives(&self) -> Vec<usize> {
        (0..self.layout.drives()).filter(|d| !self.failed[*d]).collect()
    }

    fn written(&self, drive: usize, zone: u32) -> u64 {
        let z = &self.reports[drive][zone as usize];
        if z.state == ZoneState::Empty {
            0
        } else {
            z.written_blocks()
        }
    }

    fn read_headers(&mut self) {
        self.phase = Phase::Headers;
        let n = self.layout.drives();
        let live = self.live_drives();
        let (bs, ms) = (self.geometry.block_size_bytes as usize, self.geometry.metadata_bytes_per_block as usize);
        for zone in 0..self.geometry.zone_count {
            let past_header = live.iter().all(|d| self.written(*d, zone) >= self.layout.header_blocks);
            if !past_header {
                continue;
            }
            self.headers.insert(zone, vec![None; n]);
            let footer_end = self.layout.footer_start_blocks() + self.layout.footer_blocks;
            let footer_written = live.iter().all(|d| self.written(*d, zone) >= footer_end);
            for &drive in &live {
                let lba = self.geometry.zone_start_lba(zone);
                self.issue(drive, Op::Header { zone }, Command::Read { lba, data: vec![0; bs], metadata: vec![0; ms] });
                if footer_written {
                    let lba = lba + self.layout.footer_start_blocks();
                    let command = Command::Read { lba, data: vec![0; bs], metadata: vec![0; ms] };
                    self.issue(drive, Op::FooterProbe { zone }, command);
                }
            }
        }
        self.advance();
    }

    fn check_headers_and_read_contents(&mut self) {
        self.phase = Phase::StopProbes;
        let n = self.layout.drives();
        let live = self.live_drives();
        let zones: Vec<u32> = self.headers.keys().copied().collect();
        for zone in zones {
            let headers = &self.headers[&zone];
            let first = headers[live[0]].expect("every live drive's header read or an error recorded");
            for &drive in &live {
                let h = headers[drive].expect("header read");
                let problem = if h.array_uuid != self.config.array_uuid {
                    Some("belongs to another array".to_string())
                } else if h.drive_index.get() as usize != drive {
                    Some(format!("is drive {} of the array, found in position {drive}", h.drive_index.get()))
                } else if h.segment_sequence.get() != first.segment_sequence.get()
                    || h.drive_count.get() as usize != n
                    || u64::from(h.chunk_blocks.get()) != self.layout.chunk_blocks
                {
                    Some("disagrees with the other drives' headers of this segment".to_string())
                } else {
                    None
                };
                if let Some(reason) = problem {
                    return self.fail(self.corrupt(drive, zone, 0, "segment header", reason));
                }
            }
            self.segments.insert(zone, first.segment_sequence.get());
            let footer_end = self.layout.footer_start_blocks() + self.layout.footer_blocks;
            let sealed = self.footers_found.get(&zone).copied().unwrap_or(0) == live.len();
            self.sealed.insert(zone, sealed);
            self.found.insert(zone, Vec::new());
            let max = u64::from(self.geometry.max_transfer_blocks);
            let (bs, ms) = (self.geometry.block_size_bytes as usize, self.geometry.metadata_bytes_per_block as usize);
            let zone_start = self.geometry.zone_start_lba(zone);
            for &drive in &live {
                if !sealed {
                    // An open segment: first see whether a clean stop left a stop footer.
                    let written = self.written(drive, zone).min(self.layout.footer_start_blocks());
                    self.open_extents.insert((zone, drive), (written, None));
                    if written > self.layout.data_start_blocks() {
                        let command =
                            Command::Read { lba: zone_start + written - 1, data: vec![0; bs], metadata: vec![0; ms] };
                        self.issue(drive, Op::StopProbe { zone, written }, command);
                    }
                    continue;
                }
                let from = self.layout.footer_start_blocks();
                let mut at = from;
                while at < footer_end {
                    let blocks = (footer_end - at).min(max);
                    let data = vec![0; blocks as usize * bs];
                    let metadata = vec![0; blocks as usize * ms];
                    let op = Op::Footer { zone, start: from, first_block: at - from };
                    self.issue(drive, op, Command::Read { lba: zone_start + at, data, metadata });
                    at += blocks;
                }
            }
        }
        self.advance();
    }

    /// A stop footer ends exactly at the write pointer, names this segment and drive, and
    /// records one entry per data block before it.
    fn take_stop_probe(&mut self, drive: usize, zone: u32, written: u64, data: &[u8], metadata: &[u8]) {
        let Ok((meta, kind)) = BlockMetadata::decode(data, metadata) else { return };
        let Ok((header, entries)) = decode_footer_block(data) else { return };
        let sequence = self.segments[&zone];
        let per_block = footer_entries_per_block(self.geometry.block_size_bytes) as u64;
        let first_entry = u64::from(header.first_block.get());
        let total_entries = first_entry + entries.len() as u64;
        let blocks = first_entry / per_block + 1;
        let start = written.checked_sub(blocks);
        let consistent = kind == BlockKind::Footer
            && u64::from(meta.segment_sequence_low.get()) == sequence & u64::from(u32::MAX)
            && header.segment_sequence.get() == sequence
            && header.drive_index.get() as usize == drive
            && first_entry.is_multiple_of(per_block)
            && start.is_some_and(|start| start == self.layout.data_start_blocks() + total_entries);
        if consistent {
            self.open_extents.insert((zone, drive), (written, start));
        }
    }

    /// Reads what open segments hold: a stop footer where a clean stop left one, else the
    /// data and metadata of every written block.
    fn read_open_segments(&mut self) {
        self.phase = Phase::Contents;
        let max = u64::from(self.geometry.max_transfer_blocks);
        let (bs, ms) = (self.geometry.block_size_bytes as usize, self.geometry.metadata_bytes_per_block as usize);
        let extents: Vec<_> = self.open_extents.iter().map(|(&k, &v)| (k, v)).collect();
        for ((zone, drive), (written, stop_footer)) in extents {
            match stop_footer {
                Some(_) => self.report.stop_footers_read += 1,
                None => self.report.zones_scanned += 1,
            }
            let zone_start = self.geometry.zone_start_lba(zone);
            let from = stop_footer.unwrap_or(self.layout.data_start_blocks());
            let mut at = from;
            while at < written {
                let blocks = (written - at).min(max);
                let data = vec![0; blocks as usize * bs];
                let metadata = vec![0; blocks as usize * ms];
                let op = match stop_footer {
                    Some(start) => Op::Footer { zone, start, first_block: at - start },
                    None => Op::Blocks { zone, first_offset: at },
                };
                self.issue(drive, op, Command::Read { lba: zone_start + at, data, metadata });
                at += blocks;
            }
        }
        self.advance();
    }

    /// Takes footer blocks read at zone-relative block `at_block` (a sealed segment's footer
    /// region, or a stop footer).
    fn take_footer(&mut self, drive: usize, zone: u32, at_block: u64, data: &[u8]) {
        let bs = self.geometry.block_size_bytes as usize;
        let cb = self.layout.chunk_blocks;
        let sequence = self.segments[&zone];
        for (i, block) in data.chunks_exact(bs).enumerate() {
            let (header, entries) = match decode_footer_block(block) {
                Ok(decoded) => decoded,
                Err(e) => {
                    let offset = at_block + i as u64;
                    return self.fail(self.corrupt(drive, zone, offset, "footer block", e.to_string()));
                }
            };
            if header.segment_sequence.get() != sequence || header.drive_index.get() as usize != drive {
                let offset = at_block + i as u64;
                return self.fail(self.corrupt(
                    drive,
                    zone,
                    offset,
                    "footer block",
                    "of another segment or drive".into(),
                ));
            }
            let first = u64::from(header.first_block.get());
            for (j, e) in entries.iter().enumerate() {
                let index = first + j as u64;
                let found = Found {
                    drive,
                    offset: self.layout.data_start_blocks() + index,
                    lba: e.lba.get(),
                    timestamp: e.timestamp.get(),
                    stripe_id: e.stripe_id.get(),
                };
                if index < self.layout.stripes * cb {
                    self.found.get_mut(&zone).expect("segment").push(found);
                }
            }
        }
    }

    fn take_blocks(&mut self, drive: usize, zone: u32, first_offset: u64, data: &[u8], metadata: &[u8]) {
        let (bs, ms) = (self.geometry.block_size_bytes as usize, self.geometry.metadata_bytes_per_block as usize);
        let sequence_low = self.segments[&zone] & u64::from(u32::MAX);
        for (i, (block, oob)) in data.chunks_exact(bs).zip(metadata.chunks_exact(ms)).enumerate() {
            // Untrusted: torn, stale or corrupt blocks are simply not found.
            let Ok((m, kind)) = BlockMetadata::decode(block, oob) else { continue };
            if !matches!(kind, BlockKind::Data | BlockKind::Parity | BlockKind::Padding) {
                continue; // a stop footer left by a clean stop
            }
            if u64::from(m.segment_sequence_low.get()) != sequence_low {
                continue;
            }
            let found = Found {
                drive,
                offset: first_offset + i as u64,
                lba: m.lba.get(),
                timestamp: m.timestamp.get(),
                stripe_id: m.stripe_id.get(),
            };
            self.found.get_mut(&zone).expect("segment").push(found);
        }
    }

    /// Resets zones some drive wrote into but whose segment never got past its header.
    fn reset_unused_zones(&mut self) {
        self.phase = Phase::Resets;
        for zone in 0..self.geometry.zone_count {
            if self.segments.contains_key(&zone) {
                continue;
            }
            for drive in self.live_drives() {
                if self.written(drive, zone) > 0 || self.reports[drive][zone as usize].state != ZoneState::Empty {
                    let start_lba = self.geometry.zone_start_lba(zone);
                    let target = ZoneTarget::Zone { start_lba };
                    self.issue(drive, Op::Reset, Command::ManageZone { action: ZoneAction::Reset, target });
                }
            }
        }
        self.advance();
    }

    /// The recovered engine, once `is_done`.
    pub fn finish(self) -> Result<Engine> {
        if let Some(e) = self.error {
            return Err(e);
        }
        assert!(self.phase == Phase::Done, "finish() before recovery is done");
        let codec = ParityCodec::for_level(self.config.level)?;
        let (n, k) = (self.layout.drives(), self.layout.data_chunks);
        let cb = self.layout.chunk_blocks;
        let data_start = self.layout.data_start_blocks();
        let live = self.live_drives().len();
        let append = self.layout.uses_append();
        let mut segments = Vec::new();
        // Per LBA the newest copy: highest timestamp, then (for a block garbage collection
        // copied with its timestamp) the newest segment.
        let mut best: HashMap<u64, ((u64, u64), Physical)> = HashMap::new();
        let mut next_timestamp = 1;
        let sequences = self.segments.clone();
        let mut map = |lba: u64, timestamp: u64, physical: Physical, next_timestamp: &mut u64| {
            if lba == NO_LBA || lba >= self.config.logical_blocks {
                return;
            }
            *next_timestamp = (*next_timestamp).max(timestamp + 1);
            let age = (timestamp, sequences[&physical.zone]);
            if best.get(&lba).is_none_or(|(newest, _)| *newest < age) {
                best.insert(lba, (age, physical));
            }
        };
        for (&zone, &sequence) in &self.segments {
            // Chunks: every block found, one stripe ID, ordered by offset.
            let mut chunks: HashMap<(usize, u64), (u32, Vec<Found>)> = HashMap::new();
            for f in &self.found[&zone] {
                let position = (f.offset - data_start) / cb;
                let entry = chunks.entry((f.drive, position)).or_insert((f.stripe_id, Vec::new()));
                if entry.0 == f.stripe_id {
                    entry.1.push(*f);
                }
            }
            chunks.retain(|_, (_, blocks)| blocks.len() as u64 == cb);
            // Stripes: (group, stripe ID within the group; the position for Zone Write).
            let mut stripes: BTreeMap<(u64, u32), Vec<FoundChunk>> = BTreeMap::new();
            for ((drive, position), (id, mut blocks)) in chunks {
                blocks.sort_by_key(|b| b.offset);
                let group = position / self.layout.group_size;
                let key = (group, if append { id } else { position as u32 });
                stripes.entry(key).or_default().push(FoundChunk { drive, position, blocks });
            }
            let mut table = CompactStripeTable::new(&self.layout);
            let mut virtual_positions: HashMap<(usize, u64), u64> = HashMap::new();
            for ((group, key), members) in stripes {
                if members.len() < live {
                    continue; // an incomplete stripe: nothing in it was acknowledged
                }
                let id = if append { key } else { 0 };
                let number = if append { group * self.layout.group_size + u64::from(key) } else { u64::from(key) };
                let mut fields: Vec<Option<Vec<u8>>> = vec![None; n];
                let mut present = vec![false; n];
                for FoundChunk { drive, position, blocks } in &members {
                    present[*drive] = true;
                    if let Some(t) = table.as_mut() {
                        t.set(*drive, *position, id);
                    }
                    let c = self.layout.chunk_on(number, *drive);
                    fields[c] = Some(
                        blocks
                            .iter()
                            .flat_map(|b| b.lba.to_le_bytes().into_iter().chain(b.timestamp.to_le_bytes()))
                            .collect(),
                    );
                    if c < k {
                        for b in blocks {
                            map(
                                b.lba,
                                b.timestamp,
                                Physical { zone, drive: *drive, offset: b.offset },
                                &mut next_timestamp,
                            );
                        }
                    }
                }
                // Chunks of failed drives: their data blocks' LBAs come back from the parity
                // of the fields; the engine rebuilds their contents on read.
                let missing: Vec<usize> = (0..n).filter(|d| !present[*d] && self.failed[*d]).collect();
                if missing.is_empty() || codec.reconstruct(&mut fields).is_err() {
                    continue;
                }
                let group_end = group * self.layout.group_size + self.layout.group_stripes(group);
                for drive in missing {
                    let position = if append {
                        let used = virtual_positions.entry((drive, group)).or_insert(0);
                        *used += 1;
                        group_end - *used
                    } else {
                        u64::from(key)
                    };
                    if let Some(t) = table.as_mut() {
                        t.set(drive, position, id);
                    }
                    let c = self.layout.chunk_on(number, drive);
                    if c >= k {
                        continue;
                    }
                    let f = fields[c].as_ref().expect("reconstructed");
                    for o in 0..cb as usize {
                        let lba = u64::from_le_bytes(f[o * 16..o * 16 + 8].try_into().expect("8 bytes"));
                        let timestamp = u64::from_le_bytes(f[o * 16 + 8..o * 16 + 16].try_into().expect("8 bytes"));
                        let offset = data_start + position * cb + o as u64;
                        map(lba, timestamp, Physical { zone, drive, offset }, &mut next_timestamp);
                    }
                }
            }
            segments.push((zone, sequence, table, self.sealed[&zone]));
        }
        let free_zones: Vec<u32> = (0..self.geometry.zone_count).filter(|z| !self.segments.contains_key(z)).collect();
        let next_sequence = self.segments.values().max().map_or(1, |s| s + 1);
        let failed_drives: Vec<usize> = (0..n).filter(|d| self.failed[*d]).collect();
        let recovered = Recovered {
            segments,
            mappings: best.into_iter().map(|(lba, (_, p))| (lba, p)).collect(),
            free_zones,
            next_sequence,
            next_timestamp,
            failed_drives: failed_drives.clone(),
        };
        let mut engine = Engine::format(self.geometry, self.config)?;
        engine.install_recovered(recovered);
        // Recovered open segments are not appended to again; finishing their zones frees
        // their active resources.
        for (&zone, _) in self.segments.iter().filter(|(z, _)| !self.sealed[z]) {
            for drive in (0..n).filter(|d| !failed_drives.contains(d)) {
                engine.finish_zone(drive, zone);
            }
        }
        Ok(engine)
    }
}
