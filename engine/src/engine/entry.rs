//! The engine's entry points: made (`format`), fed (`submit`, `on_completion`, `tick`),
//! polled (`poll_command`, `poll_response`, `next_timer_ns`), drives failed, and the L2P
//! bookkeeping every role shares (`map_lba`, `unmap_lba`).

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;
use zapraid_zns::{Completion, Geometry, Tag};

use crate::config::Config;
use crate::drive_command::DriveCommand;
use crate::error::{Error, Result};
use crate::format::MAX_DRIVES;
use crate::hybrid::{ChunkClass, SegmentPlan};
use crate::l2p::{L2pTable, Physical};
use crate::lanes::Lanes;
use crate::layout::Layout;
use crate::parity::ParityCodec;

use super::machine::{Engine, Op, CLASSES};
use super::mapping::budget_pages;
use super::request::{Request, RequestId, Response};
use super::state::stop::StopState;
use super::state::stripe::Fill;
use super::state::{flush, tags};
use super::{mapping, rebuild};

impl Engine {
    /// A new, empty array over drives of `geometry` (every zone empty).
    ///
    /// `geometry` is each drive's; an array wider than its stripes (`Config::declustering`)
    /// numbers its segments across the drives' zones (`lanes`), and the engine's geometry
    /// counts those as its zones.
    pub fn format(geometry: Geometry, config: Config) -> Result<Self> {
        let plan = SegmentPlan::new(&geometry, config.level, config.mode, config.chunk_bytes, config.open_segments)?;
        let layout = *plan.primary();
        let codec = ParityCodec::for_level(config.level)?;
        let n = layout.drives();
        if n > MAX_DRIVES {
            return Err(Error::InvalidConfig { reason: format!("{n} drives, at most {MAX_DRIVES}") });
        }
        let lanes = Lanes::for_array(n, config.declustering, &geometry)?;
        let geometry = Geometry { zone_count: lanes.segments(), ..geometry };
        let per_segment = plan.layouts().iter().map(Layout::data_blocks_per_segment).min().unwrap_or(0);
        // A grown array's numbers of other placements than their rows' hold nothing.
        let usable = (0..geometry.zone_count).filter(|&z| lanes.is_usable(z)).count() as u64;
        let capacity = per_segment * usable;
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
        // One engine, and a zone kept active besides (a driver's superblock zone); a driver
        // running several engines over the drives says so (`share_drives_with`).
        let rebuild_segments_at_once = rebuild::rebuild_segments_at_once(&geometry, &plan, 1, 1);
        Ok(Engine {
            layout,
            geometry,
            codec: std::sync::Arc::new(codec),
            zero_block_crc: crate::crc::crc32c(&vec![0; geometry.block_size_bytes as usize]),
            config,
            l2p,
            segments: (0..geometry.zone_count).map(|_| None).collect(),
            slots: vec![None; plan.slots.len()],
            plan,
            next_slot: [0; CLASSES],
            free_zones: (0..geometry.zone_count).filter(|&z| lanes.is_usable(z)).collect(),
            next_sequence: 1,
            next_timestamp: 1,
            now_ns: 0,
            failed: vec![false; lanes.drives()],
            spared: vec![false; lanes.drives()],
            completing_drive: None,
            lanes,
            open_stripes: [None, None],
            queued: [VecDeque::new(), VecDeque::new()],
            gc_open_stripe: None,
            gc_queued: VecDeque::new(),
            relocation: None,
            lost: Default::default(),
            drive_rebuild: None,
            rebuild_jobs_offloaded: false,
            rebuild_jobs: VecDeque::new(),
            rebuild_jobs_out: 0,
            rebuild_pace,
            rebuild_segments_at_once,
            rebuild_segments_limit: rebuild_segments_at_once,
            rebuilds_completed: 0,
            rebuilds_started: 0,
            last_rebuild: None,
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
            blocks_rebalanced: 0,
            rows_grown: 0,
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
            append_batches: std::iter::repeat_with(Default::default).take(n).collect(),
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

    pub(super) fn unmap_lba(&mut self, lba: u64) {
        debug_assert!(mapping::mapping_lba(0) > self.l2p.logical_blocks());
        if let Some(old) = self.l2p.get(lba) {
            self.uncount(old);
            self.l2p.clear(lba);
        }
        self.lost.remove(&lba);
    }

    /// A block at `at` the table mapped is no longer live there.
    pub(super) fn uncount(&mut self, at: Physical) {
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
    pub(super) fn map_lba(&mut self, lba: u64, at: Physical) {
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

    /// The drive and the drive's LBA holding `at` (a segment's lane and block, as `locate`
    /// gives it). For tests and tools.
    pub fn drive_block(&self, at: Physical) -> (usize, u64) {
        let zone_size = self.geometry.zone_size_blocks;
        let row = u64::from(self.lanes.row(at.zone));
        (self.lanes.drive(at.zone, at.drive), row * zone_size + at.offset)
    }

    /// Where the newest mapping block of page `page` of the L2P table is, if the page was
    /// ever written back. For tests and tools.
    pub fn locate_page(&self, page: u32) -> Option<Physical> {
        self.l2p.directory_get(page)
    }

    /// Marks a drive failed: nothing more is sent to it, its chunks are rebuilt on read.
    /// A new drive being rebuilt that fails stops its rebuild; a drive being rebuilt into
    /// spare space failed already (its late completions say so again).
    pub fn fail_drive(&mut self, drive: usize) {
        if drive >= self.failed.len() {
            debug_assert!(false, "drive {drive} of {}", self.failed.len());
            return;
        }
        self.failed[drive] = true;
        self.move_free_lanes_off(drive);
        self.note_spared(drive);
        self.forget_checkpoint_base(); // the failure is recorded: a new superblock generation
        if self.drive_rebuild.as_ref().is_some_and(|r| r.drive == drive && !r.into_spares) {
            tracing::error!(drive, "the drive being rebuilt failed; the rebuild stops");
            self.drive_rebuild = None;
        }
    }

    /// Fails the drive holding lane `lane` of the segment in `zone` (a command of it failed):
    /// while a completion is taken, the drive it came from, where the command went.
    pub(super) fn fail_lane(&mut self, zone: u32, lane: usize) {
        self.fail_drive(self.failing_drive(zone, lane));
    }

    /// The drive a failed command of lane `lane` of the segment in `zone` fails: while a
    /// completion is taken, the drive it was sent to; else the lane's drive now.
    pub(super) fn failing_drive(&self, zone: u32, lane: usize) -> usize {
        self.completing_drive.unwrap_or_else(|| self.lanes.drive(zone, lane))
    }

    /// Whether the drive holding lane `lane` of the segment in `zone` failed.
    pub(super) fn lane_failed(&self, zone: u32, lane: usize) -> bool {
        self.failed[self.lanes.drive(zone, lane)]
    }

    /// The array's drives (N: k + m, or more for a declustered array).
    pub fn drive_count(&self) -> usize {
        self.lanes.drives()
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

    /// The next command for a drive: its drive and zone the array's (`lanes`).
    pub fn poll_command(&mut self) -> Option<DriveCommand> {
        let command = self.commands.pop_front()?;
        Some(self.lanes.outbound(command))
    }

    /// Whether the command of `tag`, emitted and not yet completed, is the drive
    /// rebuild's (its header and chunk reads, its chunk, header and footer writes, its
    /// zone commands, the checks of a resumed one): a simulator charges its completion the
    /// rebuild's cost (`cpu_cost`), asked as the command goes out. Any other tag (another
    /// path's command, or one completed) is not.
    pub fn is_rebuild_command(&self, tag: Tag) -> bool {
        self.rebuild_command_chunk_blocks(tag).is_some()
    }

    /// The chunk size, in blocks, of the segment the rebuild's command of `tag` is for, if
    /// it is the rebuild's (`is_rebuild_command`): the rebuild's work per chunk (a stripe
    /// reconstructed) is charged by the chunks its writes carry.
    pub fn rebuild_command_chunk_blocks(&self, tag: Tag) -> Option<u64> {
        match self.ops.get(tag) {
            Some(Op::Rebuild { zone, .. }) => Some(self.segment_of_zone(*zone).map_or(1, |s| s.layout.chunk_blocks)),
            _ => None,
        }
    }

    pub fn poll_response(&mut self) -> Option<Response> {
        self.responses.pop_front()
    }

    pub(super) fn block_bytes(&self) -> usize {
        self.geometry.block_size_bytes as usize
    }

    pub(super) fn meta_bytes(&self) -> usize {
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

    pub(super) fn check_range(&self, lba: u64, blocks: u64) -> Result<()> {
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

    pub(super) fn new_tag(&mut self, op: Op) -> Tag {
        self.ops.insert(op)
    }

    /// Takes a device completion for `drive` (one of the array's N drives).
    pub fn on_completion(&mut self, drive: usize, mut completion: Completion, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
        // From here on, `drive` is the command's lane in its segment.
        let (drive, sent_to) = self.lanes.inbound(drive, &mut completion);
        let Some(op) = self.ops.remove(completion.tag) else {
            debug_assert!(false, "completion for unknown tag {}", completion.tag);
            return;
        };
        self.completing_drive = sent_to;
        let progress = match op {
            Op::Chunk { stripe, drive } => self.chunk_done(stripe, drive, completion),
            Op::Chunks { stripes, drive } => self.chunks_done(stripes, drive, completion),
            Op::Read { read, block, physical } => {
                self.seg_mut(physical.zone).commands_in_flight -= 1;
                self.read_done(read, block, physical, completion)
            }
            op => {
                self.other_completion(drive, op, completion);
                true
            }
        };
        self.completing_drive = None;
        if progress {
            self.settle();
        }
    }
}
