//! The RAID engine: a single-threaded, sans-I/O state machine that owns all array state.
//!
//! Inputs: frontend requests (`submit`), device completions (`on_completion`) and time
//! (`tick`). Outputs: device commands (`poll_command`) and frontend responses
//! (`poll_response`). No I/O, no clock, no threads: drivers (the simulator, the real
//! io_uring driver) connect it to the world.
//!
//! Write path: blocks fill an open stripe of k chunks; a full (or timed-out, padded)
//! stripe is encoded and queued. Stripes go out a group at a time: every stripe of the
//! current group is in flight at once (Zone Append, so chunks land where the drive puts
//! them and the compact stripe table records it), and the next group starts only when
//! the previous one is persisted; the first group of a segment waits for the header. With
//! G = 1 (ZoneWrite-Only) each stripe is a group of its own, written with Zone Write at a
//! fixed offset. A write is acknowledged when every chunk of its stripes is persisted;
//! only then does the L2P table change, newest timestamp winning. A full data region gets
//! its footer, the zones are finished and the segment sealed.
//!
//! Read path: L2P lookup, one read per block with its metadata; unwritten blocks are
//! zeros. A block on a failed drive, or that fails its checksum, LBA or sequence check, is
//! rebuilt from the other chunks of its stripe, found by static offset (Zone Write) or the
//! compact stripe table (Zone Append). Losing more than m chunks is an I/O error, never
//! wrong data.
//!
//! Garbage collection: when empty zones run low (or a segment recovered open waits to be
//! reclaimed), the sealed segment with the fewest live blocks is relocated: an L2P scan
//! finds its live blocks, they are read (rebuilt if need be) and rewritten, keeping their
//! timestamps, in stripes of their own that go out before frontend stripes; the L2P entry
//! moves only if it still points at the old place. Once every moved block is persisted
//! and nothing is in flight on the old zones, they are reset and free. A crash before the
//! reset leaves two copies with the same timestamp and contents; recovery takes the newer
//! segment's. How many empty zones frontend stripes and relocations leave, and why the
//! exported capacity guarantees a victim worth moving, is in `capacity`.
//!
//! Invariants (asserted): a zone has at most one Zone Write in flight; appends of one
//! group land inside the group's region; every persisted data block is in the footer
//! records of its segment; a segment is reset only when the L2P maps nothing into it; the
//! recovery reserve of empty zones is used only after a restart; at most one segment is
//! being sealed when the next one opens.

use std::collections::{BTreeSet, HashMap, VecDeque};

use zapraid_zns::{Command, Completion, Done, Geometry, Tag, ZoneAction, ZoneTarget};

use crate::capacity::{GC_RESERVED_ZONES, GC_START_FREE_ZONES, RECOVERY_RESERVED_ZONES, SEALING_SEGMENTS};
use crate::error::{Error, Result};
use crate::format::{
    encode_footer_block, footer_entries_per_block, BlockKind, BlockMetadata, FooterBlockHeader, FooterEntry,
    SegmentHeader, MAX_DRIVES, NO_LBA,
};
use crate::l2p::{L2pTable, Physical};
use crate::layout::{Layout, Mode, RaidLevel};
use crate::parity::ParityCodec;
use crate::stripe_table::CompactStripeTable;

/// Frontend request identifier, chosen by the caller.
pub type RequestId = u64;

/// What a frontend asks of the array. LBAs and lengths are in blocks of the drives' size.
#[derive(Debug)]
pub enum Request {
    Write {
        lba: u64,
        data: Vec<u8>,
    },
    Read {
        lba: u64,
        blocks: u64,
    },
    /// Completes when every write submitted before it is persisted.
    Flush,
    /// The blocks read as zeros from now on (their L2P entries are dropped, so garbage
    /// collection need not move them). Not persisted: after a restart a discarded block
    /// may read as its old contents again, as a drive's discard allows.
    Discard {
        lba: u64,
        blocks: u64,
    },
}

/// The answer to a request: read data, or nothing for writes and flushes.
#[derive(Debug)]
pub struct Response {
    pub id: RequestId,
    pub result: Result<Vec<u8>>,
}

/// A command for one drive of the array.
#[derive(Debug)]
pub struct DriveCommand {
    pub drive: usize,
    pub tag: Tag,
    pub command: Command,
    /// Modelled engine CPU time spent before this command could be issued (stripe table
    /// lookups); the simulator holds the command back this long. 0 for most commands.
    pub delay_ns: u64,
}

/// Array configuration.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub level: RaidLevel,
    pub mode: Mode,
    pub chunk_bytes: u64,
    /// Pad and write an incomplete stripe after this long.
    pub stripe_timeout_ns: u64,
    /// Logical blocks exported (at most the data capacity of all segments).
    pub logical_blocks: u64,
    /// Modelled CPU cost of checking one compact stripe table entry, in picoseconds, charged
    /// to degraded reads in simulation (see `PAPER_LOOKUP_PS_PER_ENTRY`).
    pub lookup_ps_per_entry: u64,
    pub array_uuid: [u8; 16],
}

/// The paper measures a compact stripe table query at G = 256 (768 entries) at about 1 us.
pub const PAPER_LOOKUP_PS_PER_ENTRY: u64 = 1_000_000 / 768;

/// Default partial-stripe timeout (the paper's 100 us).
pub const DEFAULT_STRIPE_TIMEOUT_NS: u64 = 100_000;

/// What the array holds and has done, for `zapraid status` and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Status {
    pub zones: u32,
    pub free_zones: u32,
    /// Segments holding data (open, sealing, sealed or being relocated).
    pub segments: u32,
    pub open_segments: u32,
    /// Logical blocks mapped to a place on the drives (written at least once).
    pub mapped_blocks: u64,
    pub failed_drives: Vec<usize>,
    /// Segments garbage collection reclaimed, and live blocks it moved.
    pub segments_reclaimed: u64,
    pub blocks_relocated: u64,
    /// Recovered open segments still waiting to be rewritten and reclaimed.
    pub segments_to_reclaim: u32,
    /// Damage the last start found on the drives and what it rebuilt or lost.
    pub recovery_repairs: crate::recovery::Repairs,
    /// Blocks read from a working drive that were damaged (bad checksum, wrong LBA or
    /// segment, media error) and were rebuilt from their stripe.
    pub read_blocks_repaired: u64,
}

/// Relocation reads in flight at once: bounds the memory garbage collection holds.
const GC_MAX_READS_IN_FLIGHT: usize = 64;

#[derive(Clone, Copy, Debug)]
struct BlockInfo {
    lba: u64,
    timestamp: u64,
    request: Option<RequestId>,
    /// A block moved by garbage collection: where it was. It keeps its timestamp, so that
    /// a newer write of the same LBA still wins in recovery.
    relocated_from: Option<Physical>,
}

impl BlockInfo {
    const PADDING: BlockInfo = BlockInfo { lba: NO_LBA, timestamp: 0, request: None, relocated_from: None };
}

struct OpenStripe {
    blocks: Vec<(BlockInfo, Vec<u8>)>,
    started_ns: u64,
}

/// A stripe encoded and waiting for (or in) its group.
struct Stripe {
    infos: Vec<BlockInfo>,
    /// All k + m chunks (data then parity), with their metadata; taken when issued.
    chunks: Vec<(Vec<u8>, Vec<u8>)>,
    pending_chunks: usize,
    /// Stripe ID within the group and stripe number within the segment, once grouped.
    id: u32,
    number: u64,
    /// Where each drive's chunk landed (zone-relative chunk position), once persisted.
    positions: Vec<Option<u64>>,
    /// Per parity chunk, the parity of the data blocks' (LBA, timestamp) fields, 16 bytes
    /// per block offset: written into the parity blocks' metadata and footer entries.
    parity_fields: Vec<Vec<u8>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SegmentState {
    Open,
    Sealing,
    Sealed,
    /// Its live blocks are being rewritten elsewhere; then its zones are reset.
    Relocating,
}

struct Segment {
    zone: u32,
    sequence: u64,
    state: SegmentState,
    header_pending: usize,
    table: Option<CompactStripeTable>,
    /// Per drive, per data-region block: what the footer will say.
    footer: Vec<Vec<FooterEntry>>,
    footer_pending: usize,
    /// Current group, stripes issued in it, stripes of it still in flight.
    group: u64,
    group_issued: u64,
    group_in_flight: usize,
    /// Per drive, chunks of the current group that never landed (failed drive) and got a
    /// position counted from the end of the group's region.
    group_virtual: Vec<u64>,
    /// Data blocks the L2P table maps into this segment.
    valid_blocks: u64,
    /// Reads and zone commands in flight on this segment's zones: its zones are reset only
    /// when none are left (drives may reorder commands in flight).
    commands_in_flight: u32,
    /// Recovered while open: its live blocks are to be rewritten into a new segment and its
    /// zones reclaimed, whether or not space is short.
    reclaim_first: bool,
    /// A relocation of it failed (too many drives lost): not chosen again.
    unreclaimable: bool,
}

impl Segment {
    fn new(zone: u32, sequence: u64, state: SegmentState, table: Option<CompactStripeTable>, drives: usize) -> Self {
        Segment {
            zone,
            sequence,
            state,
            header_pending: 0,
            table,
            footer: Vec::new(),
            footer_pending: 0,
            group: 0,
            group_issued: 0,
            group_in_flight: 0,
            group_virtual: vec![0; drives],
            valid_blocks: 0,
            commands_in_flight: 0,
            reclaim_first: false,
            unreclaimable: false,
        }
    }
}

/// Garbage collection of one segment: its live blocks (found by scanning the L2P table)
/// are read and rewritten with their timestamps; once all are persisted elsewhere, its
/// zones are reset and become free.
struct Relocation {
    zone: u32,
    /// Next LBA of the L2P scan.
    scan_lba: u64,
    reads_in_flight: usize,
    /// Blocks read and not yet persisted in their new place.
    writes_in_flight: usize,
    resets_pending: usize,
    resetting: bool,
    failed: bool,
}

enum Op {
    Header {
        segment: u32,
    },
    Chunk {
        stripe: u64,
        drive: usize,
    },
    Footer {
        segment: u32,
        drive: usize,
        next_block: u64,
        place: FooterPlace,
    },
    Finish {
        segment: u32,
    },
    Read {
        read: u64,
        block: usize,
        physical: Physical,
    },
    Rebuild {
        rebuild: u64,
        drive: usize,
        zone: u32,
    },
    /// Resetting a reclaimed segment's zone on one drive.
    Reset {
        segment: u32,
    },
}

/// Where a footer goes: the footer region of a segment being sealed, or, at a clean stop,
/// right after the open segment's data (a stop footer: the next start reads it instead of
/// every block's metadata). `start_blocks` is zone-relative; `entries` are the leading
/// footer entries it records.
#[derive(Clone, Copy, Debug)]
enum FooterPlace {
    Sealing { start_blocks: u64, blocks: u64, entries: usize },
    Stop { start_blocks: u64, blocks: u64, entries: usize },
}

/// Progress of a clean stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StopState {
    Running,
    /// No new writes; waiting for stripes, flushes and garbage collection to finish.
    Draining,
    /// Stop footers in flight, on this many drives.
    WritingFooters(usize),
    Stopped,
}

/// Who asked for a read.
#[derive(Clone, Copy, Debug)]
enum ReadOrigin {
    Frontend(RequestId),
    /// Garbage collection, moving the block that was at this place.
    Relocation(Physical),
}

struct ReadRequest {
    origin: ReadOrigin,
    lba: u64,
    blocks: Vec<Option<Vec<u8>>>,
    /// Timestamp of each block read (garbage collection keeps it).
    timestamps: Vec<u64>,
    pending: usize,
    error: Option<Error>,
}

struct Rebuild {
    read: u64,
    block: usize,
    lba: u64,
    /// Stripe number within the segment: it says which chunk each drive holds.
    stripe_number: u64,
    lost_chunk: usize,
    shards: Vec<Option<(Vec<u8>, Vec<u8>)>>,
    pending: usize,
    /// The block's drive is working: the block itself was damaged (a repair, counted).
    damaged: bool,
}

/// The engine. See the module documentation.
pub struct Engine {
    layout: Layout,
    geometry: Geometry,
    codec: ParityCodec,
    config: Config,
    l2p: L2pTable,
    /// The segment each zone holds (a segment spans the same zone of every drive).
    segments: Vec<Option<Segment>>,
    /// Zone of the segment stripes are written into.
    open_segment: Option<u32>,
    free_zones: VecDeque<u32>,
    next_sequence: u64,
    next_timestamp: u64,
    now_ns: u64,
    failed: Vec<bool>,
    open_stripe: Option<OpenStripe>,
    queued: VecDeque<u64>,
    /// Relocated blocks fill stripes of their own, issued before frontend stripes.
    gc_open_stripe: Option<OpenStripe>,
    gc_queued: VecDeque<u64>,
    relocation: Option<Relocation>,
    /// Something changed that may give garbage collection a victim.
    gc_check_needed: bool,
    /// Segments recovered open may still wait to be reclaimed (none are made later).
    reclaim_pending: bool,
    /// Recovered, and the segments that were open not all reclaimed yet or fewer than
    /// `GC_START_FREE_ZONES` zones empty since: relocations may use the recovery reserve
    /// (what it is for) until both are done.
    restoring_reserve: bool,
    segments_reclaimed: u64,
    blocks_relocated: u64,
    recovery_repairs: crate::recovery::Repairs,
    read_blocks_repaired: u64,
    stop: StopState,
    stripes: HashMap<u64, Stripe>,
    next_stripe: u64,
    /// Newest timestamp mapped per LBA with writes in flight, and how many are in flight.
    in_flight_lbas: HashMap<u64, (u64, u32)>,
    write_blocks_left: HashMap<RequestId, usize>,
    outstanding_writes: BTreeSet<RequestId>,
    flushes: VecDeque<(RequestId, Option<RequestId>)>,
    reads: HashMap<u64, ReadRequest>,
    rebuilds: HashMap<u64, Rebuild>,
    next_read: u64,
    ops: HashMap<Tag, Op>,
    next_tag: Tag,
    commands: VecDeque<DriveCommand>,
    responses: VecDeque<Response>,
    /// Commands per drive waiting because the zone has a Zone Write in flight.
    zone_write_busy: Vec<bool>,
    zone_write_queue: Vec<VecDeque<(Tag, Command)>>,
}

impl Engine {
    /// A new, empty array over drives of `geometry` (every zone empty).
    pub fn format(geometry: Geometry, config: Config) -> Result<Self> {
        let layout = Layout::new(&geometry, config.level, config.mode, config.chunk_bytes)?;
        let codec = ParityCodec::for_level(config.level)?;
        let n = layout.drives();
        if n > MAX_DRIVES {
            return Err(Error::InvalidConfig { reason: format!("{n} drives, at most {MAX_DRIVES}") });
        }
        let capacity = layout.data_blocks_per_segment() * u64::from(geometry.zone_count);
        if config.logical_blocks == 0 || config.logical_blocks > capacity {
            return Err(Error::InvalidConfig {
                reason: format!("{} logical blocks, the drives hold at most {capacity}", config.logical_blocks),
            });
        }
        let l2p = L2pTable::new(config.logical_blocks, n, geometry.zone_count, geometry.zone_capacity_blocks)?;
        Ok(Engine {
            layout,
            geometry,
            codec,
            config,
            l2p,
            segments: (0..geometry.zone_count).map(|_| None).collect(),
            open_segment: None,
            free_zones: (0..geometry.zone_count).collect(),
            next_sequence: 1,
            next_timestamp: 1,
            now_ns: 0,
            failed: vec![false; n],
            open_stripe: None,
            queued: VecDeque::new(),
            gc_open_stripe: None,
            gc_queued: VecDeque::new(),
            relocation: None,
            gc_check_needed: false,
            reclaim_pending: false,
            restoring_reserve: false,
            segments_reclaimed: 0,
            recovery_repairs: Default::default(),
            read_blocks_repaired: 0,
            blocks_relocated: 0,
            stop: StopState::Running,
            stripes: HashMap::new(),
            next_stripe: 0,
            in_flight_lbas: HashMap::new(),
            write_blocks_left: HashMap::new(),
            outstanding_writes: BTreeSet::new(),
            flushes: VecDeque::new(),
            reads: HashMap::new(),
            rebuilds: HashMap::new(),
            next_read: 0,
            ops: HashMap::new(),
            next_tag: 0,
            commands: VecDeque::new(),
            responses: VecDeque::new(),
            zone_write_busy: vec![false; n],
            zone_write_queue: (0..n).map(|_| VecDeque::new()).collect(),
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Installs what recovery found on the drives: sealed segments (with their compact
    /// stripe tables), the L2P entries, the zones still free, and the next sequence number
    /// and timestamp (past everything on the drives).
    pub(crate) fn install_recovered(&mut self, recovered: crate::recovery::Recovered) {
        let n = self.layout.drives();
        for (zone, sequence, table, sealed) in recovered.segments {
            let mut segment = Segment::new(zone, sequence, SegmentState::Sealed, table, n);
            segment.group = self.layout.groups();
            segment.reclaim_first = !sealed;
            self.reclaim_pending |= !sealed;
            self.segments[zone as usize] = Some(segment);
        }
        for (lba, physical) in recovered.mappings {
            self.map_lba(lba, physical);
        }
        self.gc_check_needed = true;
        self.free_zones = recovered.free_zones.into();
        self.restoring_reserve = true;
        self.update_restoring_reserve();
        self.next_sequence = recovered.next_sequence;
        self.next_timestamp = recovered.next_timestamp;
        self.recovery_repairs = recovered.repairs;
        for drive in recovered.failed_drives {
            self.fail_drive(drive);
        }
    }

    /// Finishes a zone (recovery closes open segments this way).
    pub(crate) fn finish_zone(&mut self, drive: usize, zone: u32) {
        self.zone_command(drive, zone, ZoneAction::Finish);
    }

    /// Finishes or resets a segment's zone on one drive.
    fn zone_command(&mut self, drive: usize, zone: u32, action: ZoneAction) {
        let op = match action {
            ZoneAction::Reset => Op::Reset { segment: zone },
            _ => Op::Finish { segment: zone },
        };
        self.seg_mut(zone).commands_in_flight += 1;
        let tag = self.new_tag(op);
        let target = ZoneTarget::Zone { start_lba: self.geometry.zone_start_lba(zone) };
        let command = Command::ManageZone { action, target };
        self.commands.push_back(DriveCommand { drive, tag, command, delay_ns: 0 });
    }

    fn unmap_lba(&mut self, lba: u64) {
        if let Some(old) = self.l2p.get(lba) {
            let segment = self.segments[old.zone as usize].as_mut().expect("mapped blocks are in segments");
            segment.valid_blocks -= 1;
            self.gc_check_needed = true;
            self.l2p.clear(lba);
        }
    }

    /// Points `lba` at `at`, keeping the segments' live block counts.
    fn map_lba(&mut self, lba: u64, at: Physical) {
        if let Some(old) = self.l2p.get(lba) {
            let segment = self.segments[old.zone as usize].as_mut().expect("mapped blocks are in segments");
            segment.valid_blocks -= 1;
            self.gc_check_needed = true;
        }
        self.l2p.set(lba, at);
        self.seg_mut(at.zone).valid_blocks += 1;
    }

    /// Starts a clean stop: new writes are refused, the open stripe is padded and written,
    /// running garbage collection finishes, and then the open segment gets a stop footer
    /// after its data (its blocks' footer entries), so that the next start reads that
    /// instead of every block's metadata. Drive the engine until `is_stopped`.
    pub fn stop(&mut self, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
        if self.stop == StopState::Running {
            self.stop = StopState::Draining;
            self.pad_open_stripe(false);
            self.pump();
        }
    }

    /// Whether a clean stop has finished: everything written is on the drives.
    pub fn is_stopped(&self) -> bool {
        self.stop == StopState::Stopped
    }

    fn advance_stop(&mut self) {
        let idle = self.ops.is_empty()
            && self.open_stripe.is_none()
            && self.gc_open_stripe.is_none()
            && self.queued.is_empty()
            && self.gc_queued.is_empty()
            && self.stripes.is_empty()
            && self.relocation.is_none();
        if self.stop != StopState::Draining || !idle {
            return;
        }
        self.stop = StopState::Stopped;
        let Some(zone) = self.open_segment else { return };
        let seg = self.seg(zone);
        let issued = seg.group * self.layout.group_size + seg.group_issued;
        let entries = issued * self.layout.chunk_blocks;
        let per_block = footer_entries_per_block(self.geometry.block_size_bytes) as u64;
        let blocks = entries.div_ceil(per_block);
        let start_blocks = self.layout.data_start_blocks() + entries;
        if entries == 0 || start_blocks + blocks > self.layout.footer_start_blocks() {
            return; // nothing to record, or no room: the next start reads the metadata
        }
        let live: Vec<usize> = (0..self.layout.drives()).filter(|d| !self.failed[*d]).collect();
        if live.is_empty() {
            return;
        }
        self.stop = StopState::WritingFooters(live.len());
        let place = FooterPlace::Stop { start_blocks, blocks, entries: entries as usize };
        for drive in live {
            self.write_footer_blocks(zone, drive, 0, place);
        }
    }

    pub fn status(&self) -> Status {
        let segments = || self.segments.iter().flatten();
        Status {
            zones: self.geometry.zone_count,
            free_zones: self.free_zones.len() as u32,
            segments: segments().count() as u32,
            open_segments: u32::from(self.open_segment.is_some()),
            mapped_blocks: segments().map(|s| s.valid_blocks).sum(),
            failed_drives: (0..self.failed.len()).filter(|d| self.failed[*d]).collect(),
            segments_reclaimed: self.segments_reclaimed,
            blocks_relocated: self.blocks_relocated,
            segments_to_reclaim: segments().filter(|s| s.reclaim_first).count() as u32,
            recovery_repairs: self.recovery_repairs,
            read_blocks_repaired: self.read_blocks_repaired,
        }
    }

    pub fn logical_blocks(&self) -> u64 {
        self.l2p.logical_blocks()
    }

    /// Where a logical block lives now, if it was ever written.
    pub fn locate(&self, lba: u64) -> Option<Physical> {
        self.l2p.get(lba)
    }

    /// Marks a drive failed: nothing more is sent to it, its chunks are rebuilt on read.
    pub fn fail_drive(&mut self, drive: usize) {
        self.failed[drive] = true;
    }

    pub fn is_failed(&self, drive: usize) -> bool {
        self.failed.get(drive).copied().unwrap_or(false)
    }

    pub fn failed_drives(&self) -> usize {
        self.failed.iter().filter(|f| **f).count()
    }

    /// When the engine next needs `tick` (the partial-stripe timeout), if ever.
    pub fn next_timer_ns(&self) -> Option<u64> {
        self.open_stripe.as_ref().map(|s| s.started_ns + self.config.stripe_timeout_ns)
    }

    pub fn poll_command(&mut self) -> Option<DriveCommand> {
        self.commands.pop_front()
    }

    pub fn poll_response(&mut self) -> Option<Response> {
        self.responses.pop_front()
    }

    fn block_bytes(&self) -> usize {
        self.geometry.block_size_bytes as usize
    }

    fn meta_bytes(&self) -> usize {
        self.geometry.metadata_bytes_per_block as usize
    }

    fn chunk_blocks(&self) -> usize {
        self.layout.chunk_blocks as usize
    }

    // ---- requests ------------------------------------------------------------------

    /// Takes a frontend request at time `now_ns`.
    pub fn submit(&mut self, id: RequestId, request: Request, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
        match request {
            Request::Write { lba, data } => self.write(id, lba, data),
            Request::Read { lba, blocks } => self.read(id, lba, blocks),
            Request::Discard { lba, blocks } => {
                let result = self.check_range(lba, blocks).map(|()| {
                    for lba in lba..lba + blocks {
                        self.unmap_lba(lba);
                    }
                    Vec::new()
                });
                self.responses.push_back(Response { id, result });
            }
            Request::Flush => {
                let last_before = self.outstanding_writes.iter().next_back().copied();
                self.flushes.push_back((id, last_before));
                self.pad_open_stripe(false);
                self.complete_flushes();
            }
        }
        self.pump();
    }

    fn check_range(&self, lba: u64, blocks: u64) -> Result<()> {
        match lba.checked_add(blocks) {
            Some(end) if blocks > 0 && end <= self.l2p.logical_blocks() => Ok(()),
            _ => Err(Error::InvalidConfig {
                reason: format!(
                    "{blocks} blocks at LBA {lba} outside the {} logical blocks",
                    self.l2p.logical_blocks()
                ),
            }),
        }
    }

    fn write(&mut self, id: RequestId, lba: u64, data: Vec<u8>) {
        let bs = self.block_bytes();
        let blocks = (data.len() / bs) as u64;
        if data.is_empty() || !data.len().is_multiple_of(bs) {
            let reason = format!("write of {} bytes is not whole {bs}-byte blocks", data.len());
            return self.responses.push_back(Response { id, result: Err(Error::InvalidConfig { reason }) });
        }
        if let Err(e) = self.check_range(lba, blocks) {
            return self.responses.push_back(Response { id, result: Err(e) });
        }
        if self.stop != StopState::Running {
            let reason = "it is stopping: writes are refused".to_string();
            return self.responses.push_back(Response { id, result: Err(Error::Unavailable { reason }) });
        }
        self.outstanding_writes.insert(id);
        self.write_blocks_left.insert(id, blocks as usize);
        for (i, block) in data.chunks_exact(bs).enumerate() {
            let timestamp = self.next_timestamp;
            self.next_timestamp += 1;
            let lba = lba + i as u64;
            self.in_flight_lbas.entry(lba).or_insert((0, 0)).1 += 1;
            let info = BlockInfo { lba, timestamp, request: Some(id), relocated_from: None };
            self.add_block(info, block.to_vec(), false);
        }
    }

    /// Adds a block to the open frontend (or relocation) stripe; a full stripe is sealed.
    fn add_block(&mut self, info: BlockInfo, block: Vec<u8>, gc: bool) {
        let now = self.now_ns;
        let slot = if gc { &mut self.gc_open_stripe } else { &mut self.open_stripe };
        let open = slot.get_or_insert_with(|| OpenStripe { blocks: Vec::new(), started_ns: now });
        open.blocks.push((info, block));
        if open.blocks.len() == self.layout.data_chunks * self.layout.chunk_blocks as usize {
            let open = slot.take().expect("an open stripe");
            self.seal_stripe(open, gc);
        }
    }

    /// Advances time: pads and writes an incomplete stripe whose timeout has passed.
    pub fn tick(&mut self, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
        if self.next_timer_ns().is_some_and(|t| t <= self.now_ns) {
            self.pad_open_stripe(false);
        }
        self.pump();
    }

    fn pad_open_stripe(&mut self, gc: bool) {
        let slot = if gc { &mut self.gc_open_stripe } else { &mut self.open_stripe };
        let Some(mut open) = slot.take() else { return };
        let want = self.layout.data_chunks * self.layout.chunk_blocks as usize;
        let bs = self.geometry.block_size_bytes as usize;
        while open.blocks.len() < want {
            open.blocks.push((BlockInfo::PADDING, vec![0; bs]));
        }
        self.seal_stripe(open, gc);
    }

    /// Encodes a full stripe and queues it.
    fn seal_stripe(&mut self, open: OpenStripe, gc: bool) {
        let (k, m, cb) = (self.layout.data_chunks, self.layout.parity_chunks, self.chunk_blocks());
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let infos: Vec<BlockInfo> = open.blocks.iter().map(|(i, _)| *i).collect();
        let mut data_chunks: Vec<Vec<u8>> = vec![Vec::with_capacity(cb * bs); k];
        for (i, (_, block)) in open.blocks.into_iter().enumerate() {
            data_chunks[i / cb].extend_from_slice(&block);
        }
        let mut parity_chunks = vec![vec![0u8; cb * bs]; m];
        {
            let refs: Vec<&[u8]> = data_chunks.iter().map(Vec::as_slice).collect();
            let mut prefs: Vec<&mut [u8]> = parity_chunks.iter_mut().map(Vec::as_mut_slice).collect();
            self.codec.encode(&refs, &mut prefs);
        }
        // Parity of the data blocks' (LBA, timestamp) fields, block offset by block offset,
        // so a lost block's identity is rebuilt with it.
        let mut parity_fields = vec![vec![0u8; 16 * cb]; m];
        {
            let fields: Vec<Vec<u8>> = (0..k)
                .map(|c| {
                    (0..cb)
                        .flat_map(|o| {
                            let info = infos[c * cb + o];
                            info.lba.to_le_bytes().into_iter().chain(info.timestamp.to_le_bytes())
                        })
                        .collect()
                })
                .collect();
            let refs: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
            let mut prefs: Vec<&mut [u8]> = parity_fields.iter_mut().map(Vec::as_mut_slice).collect();
            self.codec.encode(&refs, &mut prefs);
        }
        let number = self.next_stripe;
        self.next_stripe += 1;
        let mut chunks = Vec::with_capacity(k + m);
        for data in data_chunks {
            chunks.push((data, vec![0u8; cb * ms]));
        }
        for parity in parity_chunks {
            chunks.push((parity, vec![0u8; cb * ms]));
        }
        // Metadata is written when the stripe joins a group (it needs the stripe ID and
        // segment); keep the parity fields in the parity chunks' metadata buffers for now.
        for (p, fields) in parity_fields.iter().enumerate() {
            let meta = &mut chunks[k + p].1;
            for o in 0..cb {
                meta[o * ms..o * ms + 16].copy_from_slice(&fields[o * 16..o * 16 + 16]);
            }
        }
        let stripe =
            Stripe { infos, chunks, pending_chunks: 0, id: 0, number: 0, positions: vec![None; k + m], parity_fields };
        self.stripes.insert(number, stripe);
        if gc {
            self.gc_queued.push_back(number);
        } else {
            self.queued.push_back(number);
        }
    }

    // ---- segments and groups -------------------------------------------------------

    fn open_new_segment(&mut self) -> bool {
        let Some(zone) = self.free_zones.pop_front() else { return false };
        self.gc_check_needed = true; // empty zones may now be low
        debug_assert!(
            self.restoring_reserve || self.free_zones.len() >= RECOVERY_RESERVED_ZONES,
            "the recovery reserve is used only after a restart"
        );
        debug_assert!(
            self.segments.iter().flatten().filter(|s| s.state == SegmentState::Sealing).count()
                <= SEALING_SEGMENTS as usize,
            "more segments being sealed than drives are asked to keep active"
        );
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        let n = self.layout.drives();
        let index = zone;
        let entries = (self.layout.stripes * self.layout.chunk_blocks) as usize;
        let empty_entry =
            FooterEntry { lba: NO_LBA.into(), timestamp: 0.into(), stripe_id: 0.into(), reserved: 0.into() };
        let mut segment = Segment::new(zone, sequence, SegmentState::Open, CompactStripeTable::new(&self.layout), n);
        segment.footer = vec![vec![empty_entry; entries]; n];
        debug_assert!(self.segments[zone as usize].is_none(), "a free zone holds no segment");
        self.segments[zone as usize] = Some(segment);
        self.open_segment = Some(index);
        let mut zones = [0u32.into(); MAX_DRIVES];
        zones.iter_mut().take(n).for_each(|z| *z = zone.into());
        let mode = match self.layout.mode {
            Mode::ZapRaid { .. } => 0,
            Mode::ZoneWriteOnly => 1,
            Mode::ZoneAppendOnly => 2,
        };
        let (bs, ms, cb) = (self.block_bytes(), self.meta_bytes(), self.chunk_blocks());
        for drive in 0..n {
            if self.failed[drive] {
                continue;
            }
            let header = SegmentHeader {
                magic: [0; 8],
                version: 0.into(),
                header_bytes: 0.into(),
                array_uuid: self.config.array_uuid,
                segment_sequence: sequence.into(),
                drive_index: (drive as u32).into(),
                drive_count: (n as u32).into(),
                data_chunks: (self.layout.data_chunks as u32).into(),
                parity_chunks: (self.layout.parity_chunks as u32).into(),
                level: self.layout.level.code(),
                mode,
                reserved0: 0.into(),
                chunk_blocks: (cb as u32).into(),
                group_size: (self.layout.group_size as u32).into(),
                block_size_bytes: (bs as u32).into(),
                stripes: self.layout.stripes.into(),
                created_timestamp: self.next_timestamp.into(),
                zones,
                reserved1: 0.into(),
                crc32c: 0.into(),
            }
            .seal();
            let mut data = vec![0u8; cb * bs];
            data[..std::mem::size_of::<SegmentHeader>()].copy_from_slice(zerocopy::IntoBytes::as_bytes(&header));
            let mut metadata = vec![0u8; cb * ms];
            for o in 0..cb {
                BlockMetadata::new(NO_LBA, 0, 0, sequence, BlockKind::Header)
                    .encode(&data[o * bs..(o + 1) * bs], &mut metadata[o * ms..(o + 1) * ms]);
            }
            let lba = self.geometry.zone_start_lba(zone);
            self.seg_mut(index).header_pending += 1;
            self.zone_write(drive, Op::Header { segment: index }, Command::Write { lba, data, metadata });
        }
        true
    }

    /// Issues a Zone Write, or queues it behind the one in flight on that drive's zone.
    fn zone_write(&mut self, drive: usize, op: Op, command: Command) {
        let tag = self.new_tag(op);
        if self.zone_write_busy[drive] {
            self.zone_write_queue[drive].push_back((tag, command));
        } else {
            self.zone_write_busy[drive] = true;
            self.commands.push_back(DriveCommand { drive, tag, command, delay_ns: 0 });
        }
    }

    fn zone_write_done(&mut self, drive: usize) {
        match self.zone_write_queue[drive].pop_front() {
            Some((tag, command)) => self.commands.push_back(DriveCommand { drive, tag, command, delay_ns: 0 }),
            None => self.zone_write_busy[drive] = false,
        }
    }

    fn new_tag(&mut self, op: Op) -> Tag {
        let tag = self.next_tag;
        self.next_tag += 1;
        self.ops.insert(tag, op);
        tag
    }

    /// Moves queued stripes into the current group while it has room, starts groups and
    /// segments as they free up.
    fn pump(&mut self) {
        loop {
            // A group is done when all of its stripes were issued and persisted; the last
            // group of a segment is followed by the footer, whether or not more is queued.
            if let Some(seg_index) = self.open_segment {
                let seg = self.seg(seg_index);
                let group_done = seg.header_pending == 0
                    && seg.group_in_flight == 0
                    && seg.group_issued == self.layout.group_stripes(seg.group);
                if group_done {
                    let seg = self.seg_mut(seg_index);
                    seg.group += 1;
                    seg.group_issued = 0;
                    seg.group_virtual.iter_mut().for_each(|v| *v = 0);
                    if seg.group == self.layout.groups() {
                        self.start_footer(seg_index);
                    }
                    continue;
                }
            }
            self.advance_relocation();
            let gc = !self.gc_queued.is_empty();
            let Some(&number) = (if gc { self.gc_queued.front() } else { self.queued.front() }) else { break };
            let relocating = self.relocation.is_some();
            let Some(seg_index) = self.open_segment else {
                if self.free_zones.len() > self.zones_to_leave(gc) {
                    self.open_new_segment();
                    continue;
                }
                if relocating {
                    break; // the relocation frees a zone
                }
                if self.maybe_start_gc() {
                    continue;
                }
                self.fail_queued_stripes();
                break;
            };
            if !gc && relocating && self.free_zones.len() <= self.zones_to_leave(true) {
                break; // the relocation may open no other zone: the rest of this one is its
            }
            let seg = self.seg(seg_index);
            if seg.header_pending > 0 || seg.group_issued == self.layout.group_stripes(seg.group) {
                break; // waiting for the header, or for the group to be persisted
            }
            if gc {
                self.gc_queued.pop_front();
            } else {
                self.queued.pop_front();
            }
            self.issue_stripe(seg_index, number);
        }
        if self.maybe_start_gc() {
            self.pump();
        }
        self.advance_stop();
    }

    // ---- garbage collection --------------------------------------------------------

    /// Empty zones that opening a segment must leave (see `capacity`): the recovery reserve
    /// (relocations may use it while `restoring_reserve`), and for user stripes while a
    /// relocation runs, the relocation's zone too.
    fn zones_to_leave(&self, gc: bool) -> usize {
        match &self.relocation {
            Some(_) if !gc => RECOVERY_RESERVED_ZONES + GC_RESERVED_ZONES,
            Some(_) => self.relocation_zones_to_leave(),
            None => RECOVERY_RESERVED_ZONES,
        }
    }

    /// Empty zones a relocation must leave: none after a restart until the segments that
    /// were open are reclaimed and the reserve is whole again, else the recovery reserve.
    fn relocation_zones_to_leave(&self) -> usize {
        if self.restoring_reserve {
            0
        } else {
            RECOVERY_RESERVED_ZONES
        }
    }

    /// Whether recovered open segments still wait to be reclaimed.
    fn reclaim_left(&self) -> bool {
        let waiting = |s: &&Segment| s.reclaim_first && s.state != SegmentState::Relocating && !s.unreclaimable;
        self.segments.iter().flatten().any(|s| waiting(&s))
    }

    /// Ends the use of the recovery reserve after a restart once the segments that were
    /// open are reclaimed and enough zones are empty.
    fn update_restoring_reserve(&mut self) {
        self.restoring_reserve &= self.reclaim_left() || self.free_zones.len() < GC_START_FREE_ZONES;
    }

    /// Data blocks the open segment can still take, counted in whole stripes.
    fn open_segment_room_blocks(&self) -> u64 {
        let Some(zone) = self.open_segment else { return 0 };
        let seg = self.seg(zone);
        let issued = seg.group * self.layout.group_size + seg.group_issued;
        (self.layout.stripes - issued) * self.layout.data_chunks as u64 * self.layout.chunk_blocks
    }

    /// Starts relocating a segment if one is due: a recovered open segment, or, when empty
    /// zones run low, the sealed segment with the fewest live blocks (greedy), if moving it
    /// frees space (`Layout::gc_victim_max_live_blocks`). Only if the relocation is sure to
    /// find room: an empty zone it may open, or enough of the open segment.
    fn maybe_start_gc(&mut self) -> bool {
        if self.relocation.is_some() || !self.gc_check_needed || self.stop != StopState::Running {
            return false;
        }
        let worth_moving = self.layout.gc_victim_max_live_blocks();
        let low = self.free_zones.len() <= GC_START_FREE_ZONES;
        if !low && !self.reclaim_pending {
            return false; // nothing due: spare the scan of every segment
        }
        self.gc_check_needed = false;
        self.reclaim_pending = self.reclaim_left();
        let victim = self
            .segments
            .iter()
            .flatten()
            .filter(|s| s.state == SegmentState::Sealed && !s.unreclaimable)
            .filter(|s| s.reclaim_first || (low && s.valid_blocks <= worth_moving))
            .min_by_key(|s| (!s.reclaim_first, s.valid_blocks, s.sequence))
            .map(|s| (s.zone, s.valid_blocks));
        let Some((zone, valid_blocks)) = victim else { return false };
        let may_open = self.free_zones.len() > self.relocation_zones_to_leave();
        if !may_open && self.open_segment_room_blocks() < valid_blocks + self.layout.stripe_data_blocks() {
            return false;
        }
        tracing::debug!(zone, valid_blocks, "garbage collection: relocating a segment");
        self.seg_mut(zone).state = SegmentState::Relocating;
        self.relocation = Some(Relocation {
            zone,
            scan_lba: 0,
            reads_in_flight: 0,
            writes_in_flight: 0,
            resets_pending: 0,
            resetting: false,
            failed: false,
        });
        true
    }

    /// Moves the relocation on: scans the L2P table for the segment's live blocks and reads
    /// them (a bounded number at a time); when all are rewritten, resets the zones.
    fn advance_relocation(&mut self) {
        let Some(zone) = self.relocation.as_ref().map(|r| r.zone) else { return };
        let logical_blocks = self.l2p.logical_blocks();
        loop {
            let r = self.relocation.as_mut().expect("relocating");
            if r.scan_lba == logical_blocks || r.reads_in_flight == GC_MAX_READS_IN_FLIGHT {
                break;
            }
            let lba = r.scan_lba;
            r.scan_lba += 1;
            if let Some(physical) = self.l2p.get(lba).filter(|p| p.zone == zone) {
                r.reads_in_flight += 1;
                self.start_read(ReadOrigin::Relocation(physical), lba, 1);
            }
        }
        let r = self.relocation.as_ref().expect("relocating");
        if r.scan_lba < logical_blocks || r.reads_in_flight > 0 || r.resetting {
            return;
        }
        self.pad_open_stripe(true);
        let r = self.relocation.as_ref().expect("relocating");
        if r.writes_in_flight > 0 || !self.gc_queued.is_empty() {
            return;
        }
        if r.failed {
            tracing::warn!(zone, "garbage collection: relocation failed, the segment stays");
            let seg = self.seg_mut(zone);
            seg.state = SegmentState::Sealed;
            seg.unreclaimable = true;
            self.relocation = None;
            self.gc_check_needed = true;
            return;
        }
        if self.seg(zone).commands_in_flight > 0 {
            return; // reads or zone commands still on its zones
        }
        assert_eq!(self.seg(zone).valid_blocks, 0, "a relocated segment maps nothing");
        let live: Vec<usize> = (0..self.layout.drives()).filter(|d| !self.failed[*d]).collect();
        let r = self.relocation.as_mut().expect("relocating");
        r.resetting = true;
        r.resets_pending = live.len();
        for drive in live {
            self.zone_command(drive, zone, ZoneAction::Reset);
        }
        self.reset_done();
    }

    /// One reset of the relocated segment's zones completed (or none was needed).
    fn reset_done(&mut self) {
        let r = self.relocation.as_ref().expect("relocating");
        if r.resets_pending > 0 {
            return;
        }
        let zone = r.zone;
        debug_assert_eq!(self.seg(zone).commands_in_flight, 0);
        self.segments[zone as usize] = None;
        self.free_zones.push_back(zone);
        self.update_restoring_reserve();
        self.segments_reclaimed += 1;
        self.relocation = None;
        self.gc_check_needed = true;
    }

    /// A relocation read finished: the block joins a relocation stripe, unless it was
    /// overwritten meanwhile.
    fn relocation_read_done(&mut self, from: Physical, lba: u64, timestamp: u64, result: Result<Vec<u8>>) {
        let r = self.relocation.as_mut().expect("relocation reads belong to a relocation");
        r.reads_in_flight -= 1;
        match result {
            Ok(_) if self.l2p.get(lba) != Some(from) => {}
            Ok(data) => {
                r.writes_in_flight += 1;
                let info = BlockInfo { lba, timestamp, request: None, relocated_from: Some(from) };
                self.add_block(info, data, true);
            }
            Err(e) => {
                tracing::warn!(lba, error = %e, "garbage collection: a live block cannot be read");
                r.failed = true;
            }
        }
    }

    /// A relocated block is persisted at `to`: the L2P table follows, unless a newer write
    /// got there first.
    fn relocated(&mut self, lba: u64, from: Physical, to: Physical) {
        if self.l2p.get(lba) == Some(from) {
            self.map_lba(lba, to);
            self.blocks_relocated += 1;
        }
        let r = self.relocation.as_mut().expect("relocated blocks belong to a relocation");
        r.writes_in_flight -= 1;
    }

    fn issue_stripe(&mut self, seg_index: u32, number: u64) {
        let (k, cb, bs, ms) = (self.layout.data_chunks, self.chunk_blocks(), self.block_bytes(), self.meta_bytes());
        let n = self.layout.drives();
        let group_size = self.layout.group_size;
        let seg = self.seg_mut(seg_index);
        let id = seg.group_issued as u32;
        let stripe_number = seg.group * group_size + u64::from(id);
        seg.group_issued += 1;
        seg.group_in_flight += 1;
        let (zone, sequence) = (seg.zone, seg.sequence);
        let zone_start = self.geometry.zone_start_lba(zone);
        let mut stripe = self.stripes.remove(&number).expect("queued stripe exists");
        stripe.id = id;
        stripe.number = stripe_number;
        let chunks = std::mem::take(&mut stripe.chunks);
        let mut pending = 0;
        let mut commands = Vec::new();
        for (c, (data, mut metadata)) in chunks.into_iter().enumerate() {
            let drive = self.layout.drive_of(stripe_number, c);
            for o in 0..cb {
                let (lba, timestamp, kind) = if c < k {
                    let info = stripe.infos[c * cb + o];
                    let kind = if info.lba == NO_LBA { BlockKind::Padding } else { BlockKind::Data };
                    (info.lba, info.timestamp, kind)
                } else {
                    let f = &metadata[o * ms..o * ms + 16];
                    (
                        u64::from_le_bytes(f[..8].try_into().expect("8 bytes")),
                        u64::from_le_bytes(f[8..16].try_into().expect("8 bytes")),
                        BlockKind::Parity,
                    )
                };
                BlockMetadata::new(lba, timestamp, id, sequence, kind)
                    .encode(&data[o * bs..(o + 1) * bs], &mut metadata[o * ms..(o + 1) * ms]);
            }
            if self.failed[drive] {
                continue;
            }
            pending += 1;
            commands.push((drive, data, metadata));
        }
        stripe.pending_chunks = pending;
        self.stripes.insert(number, stripe);
        for (drive, data, metadata) in commands {
            let op = Op::Chunk { stripe: number, drive };
            if self.layout.uses_append() {
                let tag = self.new_tag(op);
                self.commands.push_back(DriveCommand {
                    drive,
                    tag,
                    command: Command::Append { zone_start_lba: zone_start, data, metadata },
                    delay_ns: 0,
                });
            } else {
                let lba = zone_start + self.layout.data_start_blocks() + stripe_number * self.layout.chunk_blocks;
                self.zone_write(drive, op, Command::Write { lba, data, metadata });
            }
        }
        if pending == 0 {
            // Every drive of this stripe has failed: nothing can hold it.
            self.stripe_failed(
                number,
                Error::TooManyErasures { lost: n, total: n, tolerated: self.layout.parity_chunks },
            );
        }
    }

    fn fail_queued_stripes(&mut self) {
        while let Some(number) = self.queued.pop_front() {
            let reason = "no empty zone left beyond what garbage collection and recovery need, and no segment \
                          worth reclaiming (nearly every block is live)"
                .to_string();
            self.stripe_failed(number, Error::ArrayFull { reason });
        }
    }

    fn stripe_failed(&mut self, number: u64, error: Error) {
        let Some(stripe) = self.stripes.remove(&number) else { return };
        let mut failed_requests = BTreeSet::new();
        for info in stripe.infos {
            if let Some(request) = info.request {
                self.release_lba(info.lba);
                failed_requests.insert(request);
            }
            if info.relocated_from.is_some() {
                let r = self.relocation.as_mut().expect("relocated blocks belong to a relocation");
                r.writes_in_flight -= 1;
                r.failed = true;
            }
        }
        for request in failed_requests {
            if self.write_blocks_left.remove(&request).is_some() {
                self.outstanding_writes.remove(&request);
                self.responses.push_back(Response { id: request, result: Err(error.duplicate()) });
            }
        }
        self.complete_flushes();
    }

    fn release_lba(&mut self, lba: u64) {
        if let Some(entry) = self.in_flight_lbas.get_mut(&lba) {
            entry.1 -= 1;
            if entry.1 == 0 {
                self.in_flight_lbas.remove(&lba);
            }
        }
    }

    fn start_footer(&mut self, seg_index: u32) {
        let seg = self.seg_mut(seg_index);
        assert_eq!(seg.state, SegmentState::Open, "only an open segment gets a footer");
        seg.state = SegmentState::Sealing;
        self.open_segment = None;
        let n = self.layout.drives();
        for drive in 0..n {
            if !self.failed[drive] {
                self.seg_mut(seg_index).footer_pending += 1;
                self.write_footer_piece(seg_index, drive, 0);
            }
        }
        if self.seg_mut(seg_index).footer_pending == 0 {
            self.seg_mut(seg_index).state = SegmentState::Sealed;
            self.gc_check_needed = true;
        }
    }

    /// Writes footer blocks from `first` on (as many as one transfer takes).
    fn write_footer_piece(&mut self, seg_index: u32, drive: usize, first: u64) {
        let place = FooterPlace::Sealing {
            start_blocks: self.layout.footer_start_blocks(),
            blocks: self.layout.footer_blocks,
            entries: self.seg(seg_index).footer[drive].len(),
        };
        self.write_footer_blocks(seg_index, drive, first, place);
    }

    /// Writes blocks `first..` of a footer (as many as one transfer takes) at `place`.
    fn write_footer_blocks(&mut self, seg_index: u32, drive: usize, first: u64, place: FooterPlace) {
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let per_block = footer_entries_per_block(self.geometry.block_size_bytes) as u64;
        let (start_blocks, total, count) = match place {
            FooterPlace::Sealing { start_blocks, blocks, entries }
            | FooterPlace::Stop { start_blocks, blocks, entries } => (start_blocks, blocks, entries),
        };
        let blocks = (total - first).min(u64::from(self.geometry.max_transfer_blocks));
        let seg = self.seg(seg_index);
        let mut data = vec![0u8; blocks as usize * bs];
        let mut metadata = vec![0u8; blocks as usize * ms];
        let entries = &seg.footer[drive][..count];
        for b in 0..blocks {
            let block_index = first + b;
            let from = (block_index * per_block) as usize;
            let to = (from + per_block as usize).min(entries.len());
            let header = FooterBlockHeader {
                magic: [0; 8],
                version: 0.into(),
                drive_index: (drive as u32).into(),
                segment_sequence: seg.sequence.into(),
                first_block: (from as u32).into(),
                entries: 0.into(),
            };
            let out = &mut data[b as usize * bs..(b as usize + 1) * bs];
            encode_footer_block(header, &entries[from.min(to)..to], out);
            BlockMetadata::new(NO_LBA, 0, 0, seg.sequence, BlockKind::Footer)
                .encode(out, &mut metadata[b as usize * ms..(b as usize + 1) * ms]);
        }
        let lba = self.geometry.zone_start_lba(seg.zone) + start_blocks + first;
        let op = Op::Footer { segment: seg_index, drive, next_block: first + blocks, place };
        self.zone_write(drive, op, Command::Write { lba, data, metadata });
    }

    // ---- completions ---------------------------------------------------------------

    /// Takes a device completion for `drive`.
    pub fn on_completion(&mut self, drive: usize, completion: Completion, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
        let Some(op) = self.ops.remove(&completion.tag) else {
            debug_assert!(false, "completion for unknown tag {}", completion.tag);
            return;
        };
        match op {
            Op::Header { segment } => {
                self.zone_write_done(drive);
                if completion.result.is_err() {
                    self.fail_drive(drive);
                }
                self.seg_mut(segment).header_pending -= 1;
            }
            Op::Chunk { stripe, drive } => self.chunk_done(stripe, drive, completion),
            Op::Footer { segment, drive, next_block, place: place @ FooterPlace::Stop { blocks, .. } } => {
                self.zone_write_done(drive);
                if completion.result.is_err() {
                    self.fail_drive(drive);
                }
                if completion.result.is_ok() && next_block < blocks {
                    self.write_footer_blocks(segment, drive, next_block, place);
                } else if let StopState::WritingFooters(left) = self.stop {
                    self.stop = if left == 1 { StopState::Stopped } else { StopState::WritingFooters(left - 1) };
                }
            }
            Op::Footer { segment, drive, next_block, place: FooterPlace::Sealing { .. } } => {
                self.zone_write_done(drive);
                if completion.result.is_err() {
                    self.fail_drive(drive);
                }
                if completion.result.is_ok() && next_block < self.layout.footer_blocks {
                    self.write_footer_piece(segment, drive, next_block);
                } else {
                    self.seg_mut(segment).footer_pending -= 1;
                    if !self.failed[drive] {
                        self.zone_command(drive, segment, ZoneAction::Finish);
                    }
                    let seg = self.seg_mut(segment);
                    if seg.footer_pending == 0 {
                        seg.state = SegmentState::Sealed;
                        seg.footer = Vec::new(); // on the drives now
                        self.gc_check_needed = true; // a new candidate (if padding left room)
                    }
                }
            }
            Op::Finish { segment } => {
                if completion.result.is_err() {
                    self.fail_drive(drive);
                }
                self.seg_mut(segment).commands_in_flight -= 1;
            }
            Op::Reset { segment } => {
                if completion.result.is_err() {
                    self.fail_drive(drive);
                }
                self.seg_mut(segment).commands_in_flight -= 1;
                self.relocation.as_mut().expect("resets belong to a relocation").resets_pending -= 1;
                self.reset_done();
            }
            Op::Read { read, block, physical } => {
                self.seg_mut(physical.zone).commands_in_flight -= 1;
                self.read_done(read, block, physical, completion);
            }
            Op::Rebuild { rebuild, drive, zone } => {
                self.seg_mut(zone).commands_in_flight -= 1;
                self.rebuild_shard_done(rebuild, drive, completion);
            }
        }
        self.pump();
    }

    fn chunk_done(&mut self, number: u64, drive: usize, completion: Completion) {
        if !self.layout.uses_append() {
            self.zone_write_done(drive);
        }
        let seg_index = self.open_segment_of_stripe();
        let cb = self.layout.chunk_blocks;
        let data_start = self.layout.data_start_blocks();
        let zone_start = self.geometry.zone_start_lba(self.seg(seg_index).zone);
        match completion.result {
            Ok(Done::Written { lba, .. }) => {
                let position = (lba - zone_start - data_start) / cb;
                let group = self.seg(seg_index).group;
                let group_start = group * self.layout.group_size;
                assert!(
                    (group_start..group_start + self.layout.group_size).contains(&position),
                    "a chunk of group {group} landed at position {position}",
                );
                let stripe = self.stripes.get_mut(&number).expect("stripe in flight");
                stripe.positions[drive] = Some(position);
                let id = stripe.id;
                if let Some(table) = self.seg_mut(seg_index).table.as_mut() {
                    table.set(drive, position, id);
                }
            }
            Ok(other) => unreachable!("a chunk write completed as {other:?}"),
            Err(_) => self.fail_drive(drive),
        }
        let stripe = self.stripes.get_mut(&number).expect("stripe in flight");
        stripe.pending_chunks -= 1;
        if stripe.pending_chunks > 0 {
            return;
        }
        let stripe = self.stripes.remove(&number).expect("stripe in flight");
        let live = stripe.positions.iter().filter(|p| p.is_some()).count();
        if self.layout.drives() - live > self.layout.parity_chunks {
            self.seg_mut(seg_index).group_in_flight -= 1;
            let n = self.layout.drives();
            let tolerated = self.layout.parity_chunks;
            self.stripes.insert(number, stripe);
            return self.stripe_failed(number, Error::TooManyErasures { lost: n - live, total: n, tolerated });
        }
        self.stripe_persisted(seg_index, stripe);
    }

    /// Stripes in flight belong to the open segment (a segment seals only when its last
    /// group is persisted).
    fn open_segment_of_stripe(&self) -> u32 {
        self.open_segment.expect("stripes in flight belong to the open segment")
    }

    fn stripe_persisted(&mut self, seg_index: u32, mut stripe: Stripe) {
        debug_assert_eq!(self.seg(seg_index).state, SegmentState::Open, "stripes persist into the open segment");
        let (k, cb) = (self.layout.data_chunks, self.chunk_blocks());
        let zone = self.seg(seg_index).zone;
        let data_start = self.layout.data_start_blocks();
        self.seg_mut(seg_index).group_in_flight -= 1;
        // Chunks that never landed (their drive failed) still need a place in the stripe
        // table, so that reads find the stripe and rebuild them: Zone Write puts them at
        // the stripe's offset; for appends they take positions from the end of the group's
        // region, which landed chunks (filling it from the start) never reach.
        let group = self.seg(seg_index).group;
        let group_end = group * self.layout.group_size + self.layout.group_stripes(group);
        for drive in 0..self.layout.drives() {
            if stripe.positions[drive].is_some() {
                continue;
            }
            let position = if self.layout.uses_append() {
                let seg = self.seg_mut(seg_index);
                seg.group_virtual[drive] += 1;
                group_end - seg.group_virtual[drive]
            } else {
                stripe.number
            };
            stripe.positions[drive] = Some(position);
            if let Some(table) = self.seg_mut(seg_index).table.as_mut() {
                table.set(drive, position, stripe.id);
            }
        }
        let mut acked = Vec::new();
        for c in 0..self.layout.drives() {
            let drive = self.layout.drive_of(stripe.number, c);
            let position = stripe.positions[drive].expect("every chunk has a position");
            for o in 0..cb {
                let footer_index = (position * self.layout.chunk_blocks) as usize + o;
                let (lba, timestamp) = if c < k {
                    let info = stripe.infos[c * cb + o];
                    (info.lba, info.timestamp)
                } else {
                    // Parity blocks record the parity of the data blocks' fields, so a
                    // lost data chunk's LBAs can be rebuilt from footers alone.
                    let f = &stripe.parity_fields[c - k][o * 16..o * 16 + 16];
                    (
                        u64::from_le_bytes(f[..8].try_into().expect("8 bytes")),
                        u64::from_le_bytes(f[8..].try_into().expect("8 bytes")),
                    )
                };
                self.seg_mut(seg_index).footer[drive][footer_index] = FooterEntry {
                    lba: lba.into(),
                    timestamp: timestamp.into(),
                    stripe_id: stripe.id.into(),
                    reserved: 0.into(),
                };
            }
        }
        for c in 0..k {
            let drive = self.layout.drive_of(stripe.number, c);
            let position = stripe.positions[drive].expect("every chunk has a position");
            for o in 0..cb {
                let info = stripe.infos[c * cb + o];
                let offset = data_start + position * self.layout.chunk_blocks + o as u64;
                let Some(request) = info.request else {
                    if let Some(from) = info.relocated_from {
                        self.relocated(info.lba, from, Physical { zone, drive, offset });
                    }
                    continue;
                };
                let entry = self.in_flight_lbas.get_mut(&info.lba).expect("block in flight");
                if info.timestamp > entry.0 {
                    entry.0 = info.timestamp;
                    self.map_lba(info.lba, Physical { zone, drive, offset });
                }
                self.release_lba(info.lba);
                let left = self.write_blocks_left.get_mut(&request).expect("request in flight");
                *left -= 1;
                if *left == 0 {
                    acked.push(request);
                }
            }
        }
        for request in acked {
            self.write_blocks_left.remove(&request);
            self.outstanding_writes.remove(&request);
            self.responses.push_back(Response { id: request, result: Ok(Vec::new()) });
        }
        self.complete_flushes();
    }

    fn complete_flushes(&mut self) {
        while let Some(&(id, last_before)) = self.flushes.front() {
            let done = match last_before {
                None => true,
                Some(last) => self.outstanding_writes.range(..=last).next().is_none(),
            };
            if !done {
                break;
            }
            self.flushes.pop_front();
            self.responses.push_back(Response { id, result: Ok(Vec::new()) });
        }
    }

    // ---- reads ---------------------------------------------------------------------

    fn read(&mut self, id: RequestId, lba: u64, blocks: u64) {
        if let Err(e) = self.check_range(lba, blocks) {
            return self.responses.push_back(Response { id, result: Err(e) });
        }
        self.start_read(ReadOrigin::Frontend(id), lba, blocks);
    }

    fn start_read(&mut self, origin: ReadOrigin, lba: u64, blocks: u64) {
        let read = self.next_read;
        self.next_read += 1;
        let bs = self.block_bytes();
        let mut request = ReadRequest {
            origin,
            lba,
            blocks: vec![None; blocks as usize],
            timestamps: vec![0; blocks as usize],
            pending: 0,
            error: None,
        };
        let mut to_read = Vec::new();
        for i in 0..blocks as usize {
            match self.l2p.get(lba + i as u64) {
                None => request.blocks[i] = Some(vec![0; bs]),
                Some(physical) => to_read.push((i, physical)),
            }
        }
        request.pending = to_read.len();
        self.reads.insert(read, request);
        for (block, physical) in to_read {
            if self.failed[physical.drive] {
                self.start_rebuild(read, block, physical);
            } else {
                let lba = self.geometry.zone_start_lba(physical.zone) + physical.offset;
                self.seg_mut(physical.zone).commands_in_flight += 1;
                let tag = self.new_tag(Op::Read { read, block, physical });
                self.commands.push_back(DriveCommand {
                    drive: physical.drive,
                    tag,
                    command: Command::Read { lba, data: vec![0; bs], metadata: vec![0; self.meta_bytes()] },
                    delay_ns: 0,
                });
            }
        }
        self.finish_read(read);
    }

    fn segment_of_zone(&self, zone: u32) -> Option<&Segment> {
        let segment = self.segments.get(zone as usize)?.as_ref()?;
        debug_assert_eq!(segment.zone, zone);
        Some(segment)
    }

    fn seg(&self, zone: u32) -> &Segment {
        self.segments[zone as usize].as_ref().expect("a segment in this zone")
    }

    fn seg_mut(&mut self, zone: u32) -> &mut Segment {
        self.segments[zone as usize].as_mut().expect("a segment in this zone")
    }

    fn read_done(&mut self, read: u64, block: usize, physical: Physical, completion: Completion) {
        let Some(request) = self.reads.get(&read) else { return };
        let expected_lba = request.lba + block as u64;
        let sequence = self.segment_of_zone(physical.zone).map(|s| s.sequence);
        let intact = match BlockMetadata::decode(&completion.data, &completion.metadata) {
            Ok((m, kind)) if completion.result.is_ok() => {
                let intact = kind == BlockKind::Data
                    && m.lba.get() == expected_lba
                    && Some(u64::from(m.segment_sequence_low.get())) == sequence.map(|s| s & u64::from(u32::MAX));
                intact.then_some(m.timestamp.get())
            }
            _ => None,
        };
        if let Some(timestamp) = intact {
            let request = self.reads.get_mut(&read).expect("read in flight");
            request.blocks[block] = Some(completion.data);
            request.timestamps[block] = timestamp;
            request.pending -= 1;
            self.finish_read(read);
        } else {
            if matches!(completion.result, Err(zapraid_zns::Error::DeviceFailed)) {
                self.fail_drive(physical.drive);
            }
            self.start_rebuild(read, block, physical);
        }
    }

    /// Rebuilds one block from the other chunks of its stripe.
    fn start_rebuild(&mut self, read: u64, block: usize, physical: Physical) {
        let n = self.layout.drives();
        let cb = self.layout.chunk_blocks;
        let data_start = self.layout.data_start_blocks();
        let position = (physical.offset - data_start) / cb;
        let within = (physical.offset - data_start) % cb;
        let lba = self.reads[&read].lba + block as u64;
        let Some(seg) = self.segment_of_zone(physical.zone) else {
            return self.read_block_failed(read, block, Error::InvalidConfig { reason: "no segment for zone".into() });
        };
        let group = position / self.layout.group_size;
        let (stripe_id, stripe_number) = match &seg.table {
            None => (0u32, position),
            Some(table) => match table.get(physical.drive, position) {
                Some(id) => (id, group * self.layout.group_size + u64::from(id)),
                None => {
                    return self.read_block_failed(
                        read,
                        block,
                        Error::InvalidConfig { reason: format!("no stripe recorded for LBA {lba}") },
                    )
                }
            },
        };
        // Where each other drive holds its chunk of the stripe.
        let mut sources = Vec::new();
        let mut entries_checked = 0u64;
        for drive in 0..n {
            if drive == physical.drive || self.failed[drive] {
                continue;
            }
            let other = match &seg.table {
                None => Some(position),
                Some(table) => {
                    let first = group * self.layout.group_size;
                    let found = (first..first + self.layout.group_stripes(group))
                        .find(|p| table.get(drive, *p) == Some(stripe_id));
                    entries_checked += found.map_or(self.layout.group_stripes(group), |p| p - first + 1);
                    found
                }
            };
            if let Some(p) = other {
                sources.push((drive, data_start + p * cb + within));
            }
        }
        let lost_chunk = self.layout.chunk_on(stripe_number, physical.drive);
        let needed = self.layout.data_chunks;
        if sources.len() < needed || self.layout.parity_chunks == 0 {
            let lost = n - sources.len();
            return self.read_block_failed(
                read,
                block,
                Error::TooManyErasures { lost, total: n, tolerated: self.layout.parity_chunks },
            );
        }
        let zone_start = self.geometry.zone_start_lba(physical.zone);
        let rebuild = self.next_read;
        self.next_read += 1;
        self.rebuilds.insert(
            rebuild,
            Rebuild {
                read,
                block,
                lba,
                stripe_number,
                lost_chunk,
                shards: (0..n).map(|_| None).collect(),
                pending: sources.len(),
                damaged: !self.failed[physical.drive],
            },
        );
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let delay_ns = entries_checked * self.config.lookup_ps_per_entry / 1000;
        for (drive, offset) in sources {
            self.seg_mut(physical.zone).commands_in_flight += 1;
            let tag = self.new_tag(Op::Rebuild { rebuild, drive, zone: physical.zone });
            self.commands.push_back(DriveCommand {
                drive,
                tag,
                command: Command::Read { lba: zone_start + offset, data: vec![0; bs], metadata: vec![0; ms] },
                delay_ns,
            });
        }
    }

    fn rebuild_shard_done(&mut self, rebuild: u64, drive: usize, completion: Completion) {
        let Some(r) = self.rebuilds.get_mut(&rebuild) else { return };
        r.pending -= 1;
        if completion.result.is_ok() && BlockMetadata::decode(&completion.data, &completion.metadata).is_ok() {
            r.shards[drive] = Some((completion.data, completion.metadata));
        } else if matches!(completion.result, Err(zapraid_zns::Error::DeviceFailed)) {
            self.failed[drive] = true;
        }
        if self.rebuilds[&rebuild].pending > 0 {
            return;
        }
        let r = self.rebuilds.remove(&rebuild).expect("rebuild in flight");
        let result = self.reconstruct(&r);
        match result {
            Ok((data, timestamp)) => {
                if r.damaged {
                    self.read_blocks_repaired += 1;
                    tracing::warn!(lba = r.lba, "a damaged block was rebuilt from its stripe");
                }
                if let Some(request) = self.reads.get_mut(&r.read) {
                    request.blocks[r.block] = Some(data);
                    request.timestamps[r.block] = timestamp;
                    request.pending -= 1;
                }
                self.finish_read(r.read);
            }
            Err(e) => self.read_block_failed(r.read, r.block, e),
        }
    }

    /// Decodes the lost block (data and its LBA/timestamp fields) from the shards read,
    /// and checks that it is the block asked for.
    fn reconstruct(&self, r: &Rebuild) -> Result<(Vec<u8>, u64)> {
        let n = self.layout.drives();
        // Shards are indexed by chunk (data first, then parity), not by drive.
        let mut data_shards: Vec<Option<Vec<u8>>> = vec![None; n];
        let mut field_shards: Vec<Option<Vec<u8>>> = vec![None; n];
        for (drive, shard) in r.shards.iter().enumerate() {
            let Some((data, meta)) = shard else { continue };
            let (m, _) = BlockMetadata::decode(data, meta).map_err(|e| Error::Corrupt {
                drive,
                zone: 0,
                offset_blocks: 0,
                structure: "block metadata",
                reason: e.to_string(),
            })?;
            let chunk = self.layout.chunk_on(r.stripe_number, drive);
            data_shards[chunk] = Some(data.clone());
            let mut fields = m.lba.get().to_le_bytes().to_vec();
            fields.extend_from_slice(&m.timestamp.get().to_le_bytes());
            field_shards[chunk] = Some(fields);
        }
        self.codec.reconstruct(&mut data_shards)?;
        self.codec.reconstruct(&mut field_shards)?;
        let fields = field_shards[r.lost_chunk].as_ref().expect("reconstructed");
        let lba = u64::from_le_bytes(fields[..8].try_into().expect("8 bytes"));
        if lba != r.lba {
            return Err(Error::Corrupt {
                drive: 0,
                zone: 0,
                offset_blocks: 0,
                structure: "rebuilt block",
                reason: format!("rebuilt block says LBA {lba}, expected {}", r.lba),
            });
        }
        let timestamp = u64::from_le_bytes(fields[8..16].try_into().expect("8 bytes"));
        Ok((data_shards[r.lost_chunk].take().expect("reconstructed"), timestamp))
    }

    fn read_block_failed(&mut self, read: u64, block: usize, error: Error) {
        if let Some(request) = self.reads.get_mut(&read) {
            debug_assert!(request.blocks[block].is_none());
            request.pending -= 1;
            request.error.get_or_insert(error);
        }
        self.finish_read(read);
    }

    fn finish_read(&mut self, read: u64) {
        if self.reads.get(&read).is_none_or(|r| r.pending > 0) {
            return;
        }
        let request = self.reads.remove(&read).expect("read exists");
        let result = match request.error {
            Some(e) => Err(e),
            None => {
                let mut data = Vec::with_capacity(request.blocks.len() * self.block_bytes());
                for block in request.blocks {
                    data.extend_from_slice(&block.expect("every block read"));
                }
                Ok(data)
            }
        };
        match request.origin {
            ReadOrigin::Frontend(id) => self.responses.push_back(Response { id, result }),
            ReadOrigin::Relocation(from) => {
                debug_assert_eq!(request.timestamps.len(), 1, "relocation reads one block at a time");
                self.relocation_read_done(from, request.lba, request.timestamps[0], result);
            }
        }
    }
}
