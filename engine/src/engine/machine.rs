//! The engine's state as one struct (`Engine`, its fields the state types of `state`), and
//! what each command tag in flight stands for (`Op`). Everything that acts on it is an
//! `impl Engine` file of its own, above this one.

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;
use zapraid_zns::{Command, Geometry, Tag};

use crate::config::Config;
use crate::drive_command::DriveCommand;
use crate::hybrid::SegmentPlan;
use crate::l2p::{L2pTable, Physical};
use crate::lanes::Lanes;
use crate::layout::Layout;
use crate::parity::ParityCodec;

use super::request::{RequestId, Response};
use super::state::read::{BlockRebuild, ReadRequest};
use super::state::relocation::Relocation;
use super::state::scrub::ScrubReport;
use super::state::segment::{FooterPlace, Segment};
use super::state::stop::StopState;
use super::state::stripe::{OpenStripe, Stripe};
use super::state::{append, checkpoints, flush, mapping, pace, rebuild, repair, scrub, stripe, tags};

/// Chunk classes (`hybrid::ChunkClass`): per-class state is indexed by `ChunkClass::index`.
pub(super) const CLASSES: usize = 2;

pub(super) enum Op {
    Header {
        segment: u32,
    },
    Chunk {
        stripe: u64,
        drive: usize,
    },
    /// One Zone Append of consecutive stripes' chunks for `drive` (`append_batch`): the
    /// chunk of `stripes[i]` is the command's chunk `i`.
    Chunks {
        stripes: Vec<u64>,
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
    /// A command of drive rebuild number `rebuild` (`DriveRebuild::number`), on the
    /// segment in `zone`.
    Rebuild {
        zone: u32,
        rebuild: u64,
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
    pub(super) layout: Layout,
    pub(super) geometry: Geometry,
    /// Shared with the rebuild's jobs (`rebuild::job`), which may run on other threads.
    pub(super) codec: Arc<ParityCodec>,
    /// CRC32C of a zero block: padding blocks' data CRC, and the term XOR parity's CRC
    /// needs for an even number of blocks (`checksum::xor_of_crcs`).
    pub(super) zero_block_crc: u32,
    pub(super) config: Config,
    pub(super) l2p: L2pTable,
    /// The segment each zone holds (a segment spans the same zone of every drive).
    pub(super) segments: Vec<Option<Segment>>,
    /// The open segments' places (`hybrid`) and the zone of each one's open segment.
    pub(super) plan: SegmentPlan,
    pub(super) slots: Vec<Option<u32>>,
    /// Per chunk class, the slot the round robin looks at first.
    pub(super) next_slot: [usize; CLASSES],
    pub(super) free_zones: VecDeque<u32>,
    pub(super) next_sequence: u64,
    pub(super) next_timestamp: u64,
    pub(super) now_ns: u64,
    /// Per drive of the array (N of them, not lanes): failed.
    pub(super) failed: Vec<bool>,
    /// Where each segment's lanes lie on the drives (`lanes`).
    pub(super) lanes: Lanes,
    /// While a completion of a declustered array is taken: the drive its command was sent
    /// to. A lane may have moved to another drive since (`rebuild::spares`): a failed
    /// command fails the drive it went to, not the lane's drive now.
    pub(super) completing_drive: Option<usize>,
    /// Per drive of a declustered array: failed, and no segment number has a lane on it
    /// (`rebuild::spares`): no segment opens on it while another may open.
    pub(super) spared: Vec<bool>,
    /// Per chunk class, the stripe frontend writes fill, and stripes encoded and waiting.
    pub(super) open_stripes: [Option<OpenStripe>; CLASSES],
    pub(super) queued: [VecDeque<u64>; CLASSES],
    /// Relocated blocks fill stripes of their own (of the plan's `gc_class`), issued
    /// before frontend stripes.
    pub(super) gc_open_stripe: Option<OpenStripe>,
    pub(super) gc_queued: VecDeque<u64>,
    pub(super) relocation: Option<Relocation>,
    /// LBAs recorded lost, with their markers' timestamps (`lost`).
    pub(super) lost: std::collections::BTreeMap<u64, u64>,
    /// The drive being rebuilt onto a new drive, and how far it is.
    pub(super) drive_rebuild: Option<rebuild::DriveRebuild>,
    /// Whether the rebuild's jobs go to the driver (`set_rebuild_jobs_offloaded`), those
    /// waiting for it, and those it took and has not given back (their results may come
    /// back later, between other events, in any order).
    pub(super) rebuild_jobs_offloaded: bool,
    pub(super) rebuild_jobs: VecDeque<super::RebuildJob>,
    pub(super) rebuild_jobs_out: usize,
    /// The rebuilds' rate limit (`set_rebuild_rate`).
    pub(super) rebuild_pace: pace::Pace,
    /// Segments a rebuild writes at once (`rebuild::rebuild_segments_at_once`), and the
    /// most the drives' zone limits leave this engine (`share_drives_with`).
    pub(super) rebuild_segments_at_once: u32,
    pub(super) rebuild_segments_limit: u32,
    pub(super) rebuilds_completed: u64,
    /// Rebuilds started since the engine started: the number of the next one's commands.
    pub(super) rebuilds_started: u64,
    /// The last rebuild completed, as its progress stood at the end (`last_rebuild`).
    pub(super) last_rebuild: Option<super::rebuild::RebuildStatus>,
    /// Blocks rebuilds could not reconstruct since the start (written as holes).
    pub(super) rebuild_blocks_unrecoverable: u64,
    pub(super) scrub: Option<scrub::Scrub>,
    pub(super) last_scrub: Option<ScrubReport>,
    pub(super) repairs: repair::Repairs,
    /// Segments taken from their slots (a rebuild started), until their stripes in flight
    /// are persisted and they can be closed for garbage collection to reclaim.
    pub(super) retiring: Vec<u32>,
    /// Something changed that may give garbage collection a victim.
    pub(super) gc_check_needed: bool,
    /// Segments recovered open may still wait to be reclaimed (none are made later).
    pub(super) reclaim_pending: bool,
    /// Recovered, and the segments that were open not all reclaimed yet or fewer than
    /// `GC_START_FREE_ZONES` zones empty since: relocations may use the recovery reserve
    /// (what it is for) until both are done.
    pub(super) restoring_reserve: bool,
    pub(super) segments_reclaimed: u64,
    pub(super) blocks_relocated: u64,
    /// Of those, blocks of segments moved back to their home drives (`rebalance`).
    pub(super) blocks_rebalanced: u64,
    /// Rows of a grown array moved to its newest placement while it ran.
    pub(super) rows_grown: u64,
    pub(super) recovery_repairs: crate::recovery::Repairs,
    /// What the start read (from a checkpoint, or every segment).
    pub(super) start_report: crate::recovery::RecoveryReport,
    pub(super) read_blocks_repaired: u64,
    pub(super) stop: StopState,
    /// Checkpoints taken while running: when, and the requests held meanwhile.
    pub(super) checkpoints: checkpoints::RunningCheckpoints,
    pub(super) stripes: HashMap<u64, Stripe>,
    /// Chunk, block and metadata buffers reused by the data path (`pool`), and finished
    /// stripes' vectors.
    pub(super) buffers: crate::pool::BufferPool,
    pub(super) spare: stripe::Spare,
    pub(super) next_stripe: u64,
    /// Newest timestamp mapped per LBA with writes in flight, and how many are in flight.
    pub(super) in_flight_lbas: HashMap<u64, (u64, u32)>,
    /// The frontend writes in flight.
    pub(super) write_blocks_left: HashMap<RequestId, stripe::WriteInFlight>,
    pub(super) outstanding_writes: flush::OutstandingWrites,
    /// Flushes waiting, each with the last write (sequence number) it waits for.
    pub(super) flushes: VecDeque<(RequestId, Option<u64>)>,
    pub(super) reads: tags::TagSlab<ReadRequest>,
    pub(super) block_rebuilds: HashMap<u64, BlockRebuild>,
    pub(super) next_read: u64,
    pub(super) ops: tags::TagSlab<Op>,
    /// Requests waiting for L2P pages, and the pages being read.
    pub(super) mapping: mapping::MappingIo,
    pub(super) commands: VecDeque<DriveCommand>,
    pub(super) responses: VecDeque<Response>,
    /// Per drive and zone with a Zone Write in flight, the ones waiting behind it.
    pub(super) zone_writes: HashMap<(usize, u32), VecDeque<(Tag, Command)>>,
    /// Per drive, the chunk appends a scheduling pass gathered (`append_batch`).
    pub(super) append_batches: Vec<append::AppendBatch>,
}
