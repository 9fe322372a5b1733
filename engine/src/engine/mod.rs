//! The RAID engine: a single-threaded, sans-I/O state machine that owns all array state.
//!
//! Inputs: frontend requests (`submit`), device completions (`on_completion`) and time
//! (`tick`). Outputs: device commands (`poll_command`) and frontend responses
//! (`poll_response`). No I/O, no clock, no threads: drivers (the simulator, the real
//! io_uring driver) connect it to the world.
//!
//! This module holds the entry points, the engine's state and the L2P bookkeeping; each
//! role has a room of its own:
//! - `stripe`: blocks fill open stripes, which are encoded (data and parity chunks, their
//!   metadata) and queued;
//! - `schedule`: queued stripes go out a group at a time into the open segments (Zone
//!   Append groups, or Zone Write stripes at fixed offsets), are persisted, acknowledged;
//! - `segment`: a segment's lifecycle: header, footer, sealing, finishing and resetting;
//! - `read`: reads, and degraded reads that rebuild a block from its stripe;
//! - `mapping`: requests waiting for pages of the L2P table, their reads, and the
//!   write-back of pages past the memory budget as mapping blocks;
//! - `page_rebuild`: a page whose mapping block cannot be read rebuilt from the log;
//! - `gc`: garbage collection, relocating the live blocks of a victim segment;
//! - `lost`: blocks lost beyond parity, their markers and the segments holding them;
//! - `completion`: completions of commands other than chunks and reads, routed to their
//!   role;
//! - `rebuild`: a failed drive rebuilt onto a new one, online;
//! - `scrub`: every segment read and checked, damaged rows' live blocks rewritten,
//!   and the rewrite of damaged blocks frontend reads came across;
//! - `stop`: the clean stop and its stop footers;
//! - `status`: what the engine reports of itself.
//!
//! Invariants (asserted where they are kept): a zone has at most one Zone Write in flight;
//! appends of one group land inside the group's region; every persisted data block is in
//! the footer records of its segment; a segment is reset only when the L2P maps nothing
//! into it; the recovery reserve of empty zones is used only after a restart; at most one
//! segment per slot is being sealed when the slot opens its next. A write is acknowledged only when every
//! chunk of its stripes is persisted; only then does the L2P table change, newest timestamp
//! winning.

mod checkpoint;
mod checkpoint_base;
mod completion;
mod config;
mod flush;
mod gc;
mod lost;
mod mapping;
mod page_rebuild;
mod read;
mod rebuild;
mod repair;
mod request;
mod running_checkpoint;
mod scan;
mod schedule;
mod scrub;
mod segment;
mod status;
mod stop;
mod stripe;
mod tags;

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;

use zapraid_zns::{Command, Completion, Geometry, Tag, ZoneAction};

use crate::error::{Error, Result};
use crate::format::MAX_DRIVES;
use crate::hybrid::{ChunkClass, SegmentPlan};
use crate::l2p::{L2pTable, Physical};
use crate::layout::Layout;
use crate::parity::ParityCodec;

pub use config::{Config, L2pConfig, DEFAULT_STRIPE_TIMEOUT_NS, PAPER_LOOKUP_PS_PER_ENTRY};
use gc::Relocation;
use mapping::budget_pages;
pub use rebuild::RebuildStatus;
pub use request::{Request, RequestId, Response};
use scan::{LiveScan, ScanStep};
pub use scrub::{ScrubReport, ScrubStatus};
pub use status::{L2pStatus, Status};

/// Chunk classes (`hybrid::ChunkClass`): per-class state is indexed by `ChunkClass::index`.
const CLASSES: usize = 2;
use read::{BlockRebuild, ReadOrigin, ReadRequest};
use segment::{FooterPlace, Segment, SegmentState};
use stop::StopState;
use stripe::{BlockInfo, Fill, OpenStripe, Stripe};

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
    /// One other chunk's block, read to rebuild a block a read could not use.
    DegradedShard {
        rebuild: u64,
        drive: usize,
        zone: u32,
    },
    /// A chunk read by the scrub.
    Scrub(scrub::ScrubRead),
    /// A command of the drive rebuild, on the segment in `zone`.
    Rebuild {
        zone: u32,
        op: rebuild::RebuildOp,
    },
    /// Resetting a reclaimed segment's zone on one drive.
    Reset {
        segment: u32,
    },
    /// A read of the scan rebuilding an L2P page from the log (`page_rebuild`): the scan's
    /// own tag, and the segment's zone it reads, if the engine holds one there.
    PageRebuild {
        tag: Tag,
        zone: Option<u32>,
    },
}

/// The engine. See the module documentation.
pub struct Engine {
    layout: Layout,
    geometry: Geometry,
    codec: ParityCodec,
    /// CRC32C of a zero block: padding blocks' data CRC, and the term XOR parity's CRC
    /// needs for an even number of blocks (`checksum::xor_of_crcs`).
    zero_block_crc: u32,
    config: Config,
    l2p: L2pTable,
    /// The segment each zone holds (a segment spans the same zone of every drive).
    segments: Vec<Option<Segment>>,
    /// The open segments' places (`hybrid`) and the zone of each one's open segment.
    plan: SegmentPlan,
    slots: Vec<Option<u32>>,
    /// Per chunk class, the slot the round robin looks at first.
    next_slot: [usize; CLASSES],
    free_zones: VecDeque<u32>,
    next_sequence: u64,
    next_timestamp: u64,
    now_ns: u64,
    failed: Vec<bool>,
    /// Per chunk class, the stripe frontend writes fill, and stripes encoded and waiting.
    open_stripes: [Option<OpenStripe>; CLASSES],
    queued: [VecDeque<u64>; CLASSES],
    /// Relocated blocks fill stripes of their own (of the plan's `gc_class`), issued
    /// before frontend stripes.
    gc_open_stripe: Option<OpenStripe>,
    gc_queued: VecDeque<u64>,
    relocation: Option<Relocation>,
    /// LBAs recorded lost, with their markers' timestamps (`lost`).
    lost: std::collections::BTreeMap<u64, u64>,
    /// The drive being rebuilt onto a new drive, and how far it is.
    drive_rebuild: Option<rebuild::DriveRebuild>,
    /// The rebuilds' rate limit (`set_rebuild_rate`).
    rebuild_pace: rebuild::Pace,
    rebuilds_completed: u64,
    /// Blocks rebuilds could not reconstruct since the start (written as holes).
    rebuild_blocks_unrecoverable: u64,
    scrub: Option<scrub::Scrub>,
    last_scrub: Option<ScrubReport>,
    repairs: repair::Repairs,
    /// Segments taken from their slots (a rebuild started), until their stripes in flight
    /// are persisted and they can be closed for garbage collection to reclaim.
    retiring: Vec<u32>,
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
    /// What the start read (from a checkpoint, or every segment).
    start_report: crate::recovery::RecoveryReport,
    read_blocks_repaired: u64,
    stop: StopState,
    /// Checkpoints taken while running: when, and the requests held meanwhile.
    checkpoints: running_checkpoint::RunningCheckpoints,
    stripes: HashMap<u64, Stripe>,
    /// Chunk, block and metadata buffers reused by the data path (`pool`), and finished
    /// stripes' vectors.
    buffers: crate::pool::BufferPool,
    spare: stripe::Spare,
    next_stripe: u64,
    /// Newest timestamp mapped per LBA with writes in flight, and how many are in flight.
    in_flight_lbas: HashMap<u64, (u64, u32)>,
    /// The frontend writes in flight.
    write_blocks_left: HashMap<RequestId, stripe::WriteInFlight>,
    outstanding_writes: flush::OutstandingWrites,
    /// Flushes waiting, each with the last write (sequence number) it waits for.
    flushes: VecDeque<(RequestId, Option<u64>)>,
    reads: tags::TagSlab<ReadRequest>,
    block_rebuilds: HashMap<u64, BlockRebuild>,
    next_read: u64,
    ops: tags::TagSlab<Op>,
    /// Requests waiting for L2P pages, and the pages being read.
    mapping: mapping::MappingIo,
    commands: VecDeque<DriveCommand>,
    responses: VecDeque<Response>,
    /// Per drive and zone with a Zone Write in flight, the ones waiting behind it.
    zone_writes: HashMap<(usize, u32), VecDeque<(Tag, Command)>>,
}

impl Engine {
    /// A new, empty array over drives of `geometry` (every zone empty).
    pub fn format(geometry: Geometry, config: Config) -> Result<Self> {
        let plan = SegmentPlan::new(&geometry, config.level, config.mode, config.chunk_bytes, config.open_segments)?;
        let layout = *plan.primary();
        let codec = ParityCodec::for_level(config.level)?;
        let n = layout.drives();
        if n > MAX_DRIVES {
            return Err(Error::InvalidConfig { reason: format!("{n} drives, at most {MAX_DRIVES}") });
        }
        let per_segment = plan.layouts().iter().map(Layout::data_blocks_per_segment).min().unwrap_or(0);
        let capacity = per_segment * u64::from(geometry.zone_count);
        if config.logical_blocks == 0 || config.logical_blocks > capacity {
            return Err(Error::InvalidConfig {
                reason: format!("{} logical blocks, the drives hold at most {capacity}", config.logical_blocks),
            });
        }
        let mut l2p = L2pTable::new(
            config.logical_blocks,
            n,
            geometry.zone_count,
            geometry.zone_capacity_blocks,
            geometry.block_size_bytes,
        )?;
        if let Some(entries) = config.l2p.page_entries {
            l2p.set_page_entries(entries)?;
        }
        l2p.set_budget_pages(config.l2p.budget_bytes.map(|b| budget_pages(b, geometry.block_size_bytes)));
        let rebuild_pace = rebuild::rebuild_pace(&geometry, &plan.layouts());
        Ok(Engine {
            layout,
            geometry,
            codec,
            zero_block_crc: crc32c::crc32c(&vec![0; geometry.block_size_bytes as usize]),
            config,
            l2p,
            segments: (0..geometry.zone_count).map(|_| None).collect(),
            slots: vec![None; plan.slots.len()],
            plan,
            next_slot: [0; CLASSES],
            free_zones: (0..geometry.zone_count).collect(),
            next_sequence: 1,
            next_timestamp: 1,
            now_ns: 0,
            failed: vec![false; n],
            open_stripes: [None, None],
            queued: [VecDeque::new(), VecDeque::new()],
            gc_open_stripe: None,
            gc_queued: VecDeque::new(),
            relocation: None,
            lost: Default::default(),
            drive_rebuild: None,
            rebuild_pace,
            rebuilds_completed: 0,
            rebuild_blocks_unrecoverable: 0,
            scrub: None,
            last_scrub: None,
            repairs: Default::default(),
            retiring: Vec::new(),
            gc_check_needed: false,
            reclaim_pending: false,
            restoring_reserve: false,
            segments_reclaimed: 0,
            recovery_repairs: Default::default(),
            start_report: Default::default(),
            read_blocks_repaired: 0,
            blocks_relocated: 0,
            stop: StopState::Running,
            checkpoints: Default::default(),
            stripes: HashMap::default(),
            buffers: Default::default(),
            spare: Default::default(),
            next_stripe: 0,
            in_flight_lbas: HashMap::default(),
            write_blocks_left: HashMap::default(),
            outstanding_writes: flush::OutstandingWrites::default(),
            flushes: VecDeque::new(),
            reads: tags::TagSlab::default(),
            block_rebuilds: HashMap::default(),
            next_read: 0,
            ops: tags::TagSlab::default(),
            mapping: Default::default(),
            commands: VecDeque::new(),
            responses: VecDeque::new(),
            zone_writes: HashMap::default(),
        })
    }

    /// The layout of the first open segment's segments (the only one without hybrid
    /// management).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Every open segment's place and the layout of its segments.
    pub fn plan(&self) -> &SegmentPlan {
        &self.plan
    }

    /// Installs what recovery found on the drives: sealed segments (with their compact
    /// stripe tables), the L2P entries, the zones still free, and the next sequence number
    /// and timestamp (past everything on the drives).
    pub(crate) fn install_recovered(&mut self, recovered: crate::recovery::Recovered) {
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
        for drive in recovered.failed_drives {
            self.fail_drive(drive);
        }
    }

    /// Finishes a zone (recovery closes open segments this way).
    pub(crate) fn finish_zone(&mut self, drive: usize, zone: u32) {
        self.zone_command(drive, zone, ZoneAction::Finish);
    }

    fn unmap_lba(&mut self, lba: u64) {
        debug_assert!(mapping::mapping_lba(0) > self.l2p.logical_blocks());
        if let Some(old) = self.l2p.get(lba) {
            self.uncount(old);
            self.l2p.clear(lba);
        }
        self.lost.remove(&lba);
    }

    /// A block at `at` the table mapped is no longer live there.
    fn uncount(&mut self, at: Physical) {
        // A rebuilt page may map a block discarded since it was written (the log does not
        // record discards) that its segment's live count does not include (`page_rebuild`).
        let rebuilt = self.live_counts_inexact();
        let segment = self.segments[at.zone as usize].as_mut().expect("mapped blocks are in segments");
        debug_assert!(segment.valid_blocks > 0 || rebuilt, "a live block at {at:?} was not counted");
        segment.valid_blocks = segment.valid_blocks.saturating_sub(1);
        self.gc_check_needed = true;
    }

    /// Points `lba` (a logical block, or a mapping block's LBA field: the directory) at
    /// `at`, keeping the segments' live block counts.
    fn map_lba(&mut self, lba: u64, at: Physical) {
        if let Some(old) = self.mapped(lba) {
            self.uncount(old);
        }
        match crate::format::mapping_page_of(lba) {
            Some(page) => self.l2p.directory_set(page as crate::l2p::PageIndex, at),
            None => {
                self.l2p.set(lba, at);
                if !self.lost.is_empty() {
                    self.lost.remove(&lba); // written again (a marker is recorded after)
                }
            }
        }
        self.seg_mut(at.zone).valid_blocks += 1;
    }

    pub fn logical_blocks(&self) -> u64 {
        self.l2p.logical_blocks()
    }

    /// Where a logical block lives now, if it was ever written; None also when only a
    /// mapping block on the drives knows (with an L2P memory budget). For tests and tools.
    pub fn locate(&self, lba: u64) -> Option<Physical> {
        self.l2p.peek(lba).flatten()
    }

    /// Where the newest mapping block of page `page` of the L2P table is, if the page was
    /// ever written back. For tests and tools.
    pub fn locate_page(&self, page: u32) -> Option<Physical> {
        self.l2p.directory_get(page)
    }

    /// Marks a drive failed: nothing more is sent to it, its chunks are rebuilt on read.
    /// A drive being rebuilt that fails stops its rebuild.
    pub fn fail_drive(&mut self, drive: usize) {
        self.failed[drive] = true;
        self.forget_checkpoint_base(); // the failure is recorded: a new superblock generation
        if self.drive_rebuild.as_ref().is_some_and(|r| r.drive == drive) {
            tracing::error!(drive, "the drive being rebuilt failed; the rebuild stops");
            self.drive_rebuild = None;
        }
    }

    pub fn is_failed(&self, drive: usize) -> bool {
        self.failed.get(drive).copied().unwrap_or(false)
    }

    pub fn failed_drives(&self) -> usize {
        self.failed.iter().filter(|f| **f).count()
    }

    /// When the engine next needs `tick` (the partial-stripe timeout, a paced rebuild's
    /// next write), if ever.
    pub fn next_timer_ns(&self) -> Option<u64> {
        let stripes = self.open_stripes.iter().flatten().map(|s| s.started_ns + self.config.stripe_timeout_ns).min();
        [stripes, self.scrub_timer_ns(), self.rebuild_wake_ns()].into_iter().flatten().min()
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

    /// Takes a frontend request at time `now_ns`.
    pub fn submit(&mut self, id: RequestId, request: Request, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
        if self.checkpoint_in_progress() {
            return self.hold(id, request); // taken, in order, once the checkpoint is written
        }
        match request {
            Request::Flush => {
                let last_before = self.outstanding_writes.last_submitted();
                self.flushes.push_back((id, last_before));
                self.pad_frontend_stripes();
                self.complete_flushes();
            }
            request if request.is_write() && self.stop != StopState::Running => {
                // Refused when it comes; a write taken before the stop began (perhaps
                // waiting for its L2P page) is still written.
                let reason = "it is stopping: writes are refused".to_string();
                self.responses.push_back(Response::new(id, Err(Error::Unavailable { reason })));
            }
            request if !matches!(request, Request::Discard { .. }) && self.stop == StopState::Running => {
                self.admit(id, request);
                if self.nothing_to_schedule() {
                    // The common case: a written block joined an open stripe, a read went
                    // to the drives (or was answered).
                    return;
                }
            }
            request => self.admit(id, request),
        }
        self.settle();
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

    /// Advances time: pads and writes incomplete stripes whose timeout has passed.
    pub fn tick(&mut self, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
        for class in [ChunkClass::Small, ChunkClass::Large] {
            let started = self.open_stripes[class.index()].as_ref().map(|s| s.started_ns);
            if started.is_some_and(|t| t + self.config.stripe_timeout_ns <= self.now_ns) {
                self.pad_open_stripe(Fill::Frontend(class));
            }
        }
        self.settle();
    }

    fn new_tag(&mut self, op: Op) -> Tag {
        self.ops.insert(op)
    }

    /// Takes a device completion for `drive`.
    pub fn on_completion(&mut self, drive: usize, completion: Completion, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
        let Some(op) = self.ops.remove(completion.tag) else {
            debug_assert!(false, "completion for unknown tag {}", completion.tag);
            return;
        };
        let progress = match op {
            Op::Chunk { stripe, drive } => self.chunk_done(stripe, drive, completion),
            Op::Read { read, block, physical } => {
                self.seg_mut(physical.zone).commands_in_flight -= 1;
                self.read_done(read, block, physical, completion)
            }
            op => {
                self.other_completion(drive, op, completion);
                true
            }
        };
        if progress {
            self.settle();
        }
    }
}
