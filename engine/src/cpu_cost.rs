//! What the engine's work costs in simulated CPU time: the cost model of the one core the
//! simulator (`sim`) gives the engine (and the sharded simulator, `sim_shards`, each
//! shard's engine), and the costs it uses unless told otherwise.
//!
//! The model: every event the engine handles costs time on its core, by kind, a fixed part
//! per event plus a part per block it carries (`Cost`). A request submitted costs by its
//! kind (write, read; a flush or discard its fixed part only); a drive completion by the
//! command it completes (a Zone Write or Zone Append, a read; a zone command: reset,
//! finish, report, its fixed part only). A drive rebuild's commands
//! (`Engine::rebuild_command_chunk_blocks` says which, and their chunks' size) have costs
//! of their own: a read completion (its chunks gathered as their stripes' sources), a
//! write completion, plus a part per chunk the write carries, and a zone command; the
//! rebuild's jobs (`RebuildJob`: every source block checked, the chunk rebuilt) a cost of
//! their own, per job and per block of its sources, charged on the engine's core or on
//! worker cores (`sim::core`); and each job's result taken by the engine (its chunk made
//! ready, its footer entries made, its segment moved on), on the engine's core. Timer
//! ticks, checkpoints and recovery from the drives are not charged.
//!
//! Where the figures come from: `zapraid bench cpu` drives the engine alone over instant
//! drives, with requests of 4 and 16 KiB on chunks of 4 and 16 KiB, times its `submit`
//! calls apart from the rest of its work and counts the drive commands and their blocks by
//! kind; `zapraid_experiments::cpu::calibrate` solves the parts and says how. In short: a
//! write's work per block (copy, checksums, parity, for its blocks and their parity) cannot
//! be told apart from its completions' (they always move together) and is charged with the
//! request, where the engine does it; a write completion costs a fixed part (garbage
//! collection's and rebuild's writes, which are no requests, pay only that). A read sends
//! one command per block, so its completion is charged per block. A fixed part solved
//! below zero (the engine's one-block shortcuts: a one-block read answers with the drive's
//! buffer, a one-block write into one-block chunks gives its buffer to the chunk) is charged
//! as zero, which overcharges those shortcuts a little. Zone commands are too rare in those
//! runs to be measured apart and are charged as a write completion; other requests as a
//! read request's fixed part (a flush or a discard does bookkeeping, no data). Write
//! requests carry the frontend's checksums (`Request::WriteWithChecksums`), as the
//! server's do; the simulated requests that make the engine compute them
//! (`Request::Write`) are charged the same. RAID-6 and k+m levels of two or more parity
//! chunks cost more than one parity chunk (Reed-Solomon Q), so they have costs of their
//! own; RAID-0, RAID-1, RAID-01 and RAID-4 are charged as RAID-5.
//!
//! The rebuild's costs come from `zapraid bench cpu` too (its rebuild part,
//! `zapraid_experiments::cpu::calibrate_rebuild`): a filled array over instant drives loses
//! a drive and the engine rebuilds it; each completion of the rebuild's is timed by kind,
//! so a read's cost is solved from the reads' time and a write's from the writes' (blocks
//! read and written always move together, k read per one written: solving over stripe
//! widths cannot tell them apart), each as a fixed part, a part per block and a part per
//! chunk position, from three rebuilds of the same array: 4 KiB chunks with 32-block
//! commands, 4 KiB chunks a command per chunk, 16 KiB chunks with 32-block commands. The
//! per-chunk parts of reads and writes are charged together with the write completion
//! carrying the chunks, but for the reads' part since the rebuild's jobs (2026-11-28),
//! which is the work of taking a job's result and is charged per job's result. Until
//! 2026-11-28 a rebuild's completions were charged as the frontend's (289 ns per block
//! read), where the engine took 1,781-2,156 ns per block read (the same harness, the path
//! as it was); the path now takes 750-1,318 ns per block read at the ZN540's transfer
//! (engine and jobs together; 3x less before the jobs were cut loose, a little more since:
//! `RAID5_MEASURED`). The jobs' cost is solved from their own time in the first and the
//! third run. This machine is shared and its figures vary by up to a third from one
//! calibration to the next (the checks `bench cpu` prints: classic RAID-5 rebuilds charged
//! -19% to +25% of what they took); wide arrays' rebuilds (12 drives, 64 segments at once)
//! took 2-32% more per block than charged, and (8+2)-RAID-6 on 4 KiB chunks 33-36% more:
//! charged as measured on classic arrays, their figures are that much optimistic.

use std::fmt;

use zapraid_zns::Command;

use crate::engine::Request;
use crate::layout::RaidLevel;

/// What one kind of event costs: a fixed part per event and a part per block it carries,
/// in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    pub fixed_ns: u64,
    pub per_block_ns: u64,
}

impl Cost {
    pub const fn new(fixed_ns: u64, per_block_ns: u64) -> Cost {
        Cost { fixed_ns, per_block_ns }
    }

    /// What an event of `blocks` blocks costs.
    pub fn ns(&self, blocks: u64) -> u64 {
        self.fixed_ns + self.per_block_ns * blocks
    }
}

impl fmt::Display for Cost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.fixed_ns, self.per_block_ns) {
            (fixed, 0) => write!(f, "{fixed} ns"),
            (0, per_block) => write!(f, "{per_block} ns per block"),
            (fixed, per_block) => write!(f, "{fixed} ns + {per_block} ns per block"),
        }
    }
}

/// What the events the engine handles cost its core, by kind (`Default`: nothing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuCosts {
    /// A write request: its submission and its answer.
    pub write_request: Cost,
    pub read_request: Cost,
    /// A flush or a discard.
    pub other_request_ns: u64,
    /// A Zone Write or Zone Append completed.
    pub write_completion: Cost,
    pub read_completion: Cost,
    /// A zone reset, finish or report completed.
    pub zone_completion_ns: u64,
    /// A drive rebuild's read completed (`Engine::is_rebuild_command`): the chunks it
    /// carries checked and, once a stripe's are all in, the lost chunk reconstructed.
    pub rebuild_read_completion: Cost,
    /// A drive rebuild's write completed (a header, chunks, a footer piece), with the
    /// rebuild's next steps it sets off.
    pub rebuild_write_completion: Cost,
    /// Per chunk a rebuild's write carries, on top of its completion, whatever the chunk's
    /// size (`Engine::rebuild_command_chunk_blocks`).
    pub rebuild_chunk_ns: u64,
    /// A drive rebuild's zone reset or finish completed: a segment's start (its header
    /// read) or end (the next segment started).
    pub rebuild_zone_completion_ns: u64,
    /// A drive rebuild's job (`RebuildJob`): a chunk position's sources checked, block by
    /// block, and its chunk rebuilt; per job and per block of its sources. Run on the
    /// engine's core or on worker cores (`sim::core`).
    pub rebuild_job: Cost,
    /// A rebuild job's result taken by the engine (`Engine::on_rebuild_jobs_done`: its
    /// chunk made ready, its footer entries made, its segment moved on), on the engine's
    /// core, per job.
    pub rebuild_job_result_ns: u64,
}

/// A request's kind, for its cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    Write,
    Read,
    Other,
}

impl RequestKind {
    /// The request's kind and the blocks it carries on drives of `block_bytes` blocks (a
    /// write or read at least one, a flush or discard none).
    pub fn of(request: &Request, block_bytes: u64) -> (RequestKind, u64) {
        match request {
            Request::Write { data, .. } | Request::WriteWithChecksums { data, .. } => {
                (RequestKind::Write, blocks_of(data.len(), block_bytes))
            }
            Request::Read { blocks, .. } | Request::ReadUnverified { blocks, .. } => {
                (RequestKind::Read, (*blocks).max(1))
            }
            Request::Flush | Request::Discard { .. } => (RequestKind::Other, 0),
        }
    }
}

/// The kind of drive command a completion completes, for its cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionKind {
    Write,
    Read,
    Zone,
    /// A drive rebuild's read, write and zone command (`Engine::is_rebuild_command`).
    RebuildRead,
    RebuildWrite,
    RebuildZone,
}

impl CompletionKind {
    /// The kind of the command's completion and the blocks it carries on drives of
    /// `block_bytes` blocks (a write or read at least one, a zone command none).
    pub fn of(command: &Command, block_bytes: u64) -> (CompletionKind, u64) {
        match command {
            Command::Write { data, .. } | Command::Append { data, .. } => {
                (CompletionKind::Write, blocks_of(data.len(), block_bytes))
            }
            Command::Read { data, .. } => (CompletionKind::Read, blocks_of(data.len(), block_bytes)),
            Command::ManageZone { .. } | Command::ReportZones { .. } => (CompletionKind::Zone, 0),
        }
    }

    /// The kind of the same command's completion when the drive rebuild sent it.
    pub fn of_rebuild(self) -> CompletionKind {
        match self {
            CompletionKind::Read | CompletionKind::RebuildRead => CompletionKind::RebuildRead,
            CompletionKind::Write | CompletionKind::RebuildWrite => CompletionKind::RebuildWrite,
            CompletionKind::Zone | CompletionKind::RebuildZone => CompletionKind::RebuildZone,
        }
    }
}

fn blocks_of(bytes: usize, block_bytes: u64) -> u64 {
    (bytes as u64).div_ceil(block_bytes.max(1)).max(1)
}

/// Measured with `zapraid bench cpu` (release build, 1,000,000 4 KiB requests' worth of
/// blocks per run, seed 1; `zapraid_experiments::cpu::calibrate` solves the parts), each
/// part the median of three runs, on the project's build machine (2 cores of an AMD EPYC,
/// QEMU guest, shared with other builds), 2026-11-27: (3+1)-RAID-5, ZapRAID G = 256. The
/// three runs, as charged: write request 0 (solved -82), 119, 0 (-4) ns + 490, 342, 305 ns
/// per block; write completion 48, 114, 188 ns; read request 0 (-120), 0 (-197), 63 ns +
/// 81, 98, 50 ns per block; read completion 289, 317, 273 ns per block. A fixed part
/// below zero is the engine's one-block shortcuts (module doc of `calibrate`), charged as
/// 0. One core: at most 2.0 M writes/s of 4 KiB on 4 KiB chunks.
///
/// The rebuild's costs: `zapraid bench cpu`'s rebuild part (`zapraid_experiments::cpu::
/// calibrate_rebuild`, 48 segments on the failed drive, each run the median of three),
/// each part the median of three calibrations, same machine, 2026-11-28, once the
/// rebuild's jobs (`RebuildJob`: a chunk position's sources checked and its chunk rebuilt)
/// were cut loose from the engine's completions and timed apart: (4+1)-RAID-5. Read
/// completion 599, 389, 365 ns fixed + 133, 101, 146 ns per block; write completion 734,
/// 484, 513 ns fixed + 11, 8, 20 ns per block; per chunk position 397, 606, 633 ns in the
/// reads' time (a job's result taken, its footer entries made, its chunk's write and the
/// reads the window lets out: charged per job's result) and 0 (-12), 9, 4 ns in the
/// writes'; zone command 1,838, 2,160, 2,645 ns; a job 0 (-546), 216, 43 ns fixed + 591,
/// 461, 637 ns per block of its sources (a block's CRC32C, its metadata decoded, the
/// parity). Measured per block read, engine and jobs (the median of the three): 836 ns for
/// a (3+1)-RAID-5 at 4 KiB chunks, 750 for (4+1) at 16 KiB, 882-934 for (4+1) on 12 drives
/// at 16 KiB (a wide array's rebuild touches more memory at once, 64 segments' windows:
/// its jobs' data is colder in the CPU's caches). Before the jobs were cut loose (the same
/// harness, each read's blocks checked as it arrived): read completion 504 ns + 519 ns
/// per block, write completion 394 ns + 230 ns per chunk, 642 ns per block read for 3+1 at
/// 4 KiB chunks: moving the checks to the job, where a stripe's sources are all in, costs
/// some cache locality.
pub const RAID5_MEASURED: CpuCosts = CpuCosts {
    write_request: Cost::new(0, 342),
    read_request: Cost::new(0, 81),
    other_request_ns: 0,
    write_completion: Cost::new(114, 0),
    read_completion: Cost::new(0, 289),
    zone_completion_ns: 114,
    rebuild_read_completion: Cost::new(389, 133),
    rebuild_write_completion: Cost::new(513, 11),
    rebuild_chunk_ns: 4,
    rebuild_zone_completion_ns: 2_160,
    rebuild_job: Cost::new(43, 591),
    rebuild_job_result_ns: 606,
};

/// As `RAID5_MEASURED`, same runs: (4+2)-RAID-6. Write request 51, 37, 0 (-14) ns + 422,
/// 372, 328 ns per block; write completion 233, 278, 411 ns; read request 0 (-157), 0
/// (-130), 0 (-65) ns + 87, 81, 64 ns per block; read completion 300, 282, 302 ns per
/// block. At most 1.2 M writes/s of 4 KiB on 4 KiB chunks. The rebuild's, as
/// `RAID5_MEASURED`'s, (4+2)-RAID-6: read completion 333, 364, 417 ns fixed + 87, 88, 110
/// ns per block; write completion 466, 507, 554 ns fixed + 10, 5, 13 ns per block; per
/// chunk position 783, 748, 625 ns in the reads' time (per job's result) and 9, 10, 1 in
/// the writes'; zone command 2,192, 2,147, 1,985 ns; a job 1,277, 1,579,
/// 638 ns fixed (a Reed-Solomon decoding) + 535, 462, 655 ns per block of its sources.
/// Measured per block read: 1,042 ns for (4+2) at 4 KiB chunks, 1,318 for (8+2) at 4 KiB,
/// 756 at 16 KiB. Before the jobs were cut loose: read completion 542 ns + 506 ns per
/// block, write completion 333 ns + 1,430 ns per chunk.
pub const RAID6_MEASURED: CpuCosts = CpuCosts {
    write_request: Cost::new(37, 372),
    read_request: Cost::new(0, 81),
    other_request_ns: 0,
    write_completion: Cost::new(278, 0),
    read_completion: Cost::new(0, 300),
    zone_completion_ns: 278,
    rebuild_read_completion: Cost::new(364, 88),
    rebuild_write_completion: Cost::new(507, 10),
    rebuild_chunk_ns: 9,
    rebuild_zone_completion_ns: 2_147,
    rebuild_job: Cost::new(1_277, 535),
    rebuild_job_result_ns: 748,
};

impl CpuCosts {
    /// The measured costs for `level`: RAID-6's for Reed-Solomon parity of two or more
    /// chunks (RAID-6, k+m with m >= 2), else RAID-5's (XOR parity, copies, none).
    pub fn calibrated(level: RaidLevel) -> CpuCosts {
        match level {
            RaidLevel::Raid6 { .. } => RAID6_MEASURED,
            RaidLevel::Erasure { m, .. } if m >= 2 => RAID6_MEASURED,
            _ => RAID5_MEASURED,
        }
    }

    /// What a request of `kind` and `blocks` blocks costs (a flush or discard: its fixed
    /// cost).
    pub fn request_ns(&self, kind: RequestKind, blocks: u64) -> u64 {
        match kind {
            RequestKind::Write => self.write_request.ns(blocks),
            RequestKind::Read => self.read_request.ns(blocks),
            RequestKind::Other => self.other_request_ns,
        }
    }

    /// What a rebuild's write of `blocks` blocks of chunks of `chunk_blocks` costs beyond
    /// its completion (`rebuild_chunk_ns` per whole chunk).
    pub fn rebuild_chunks_ns(&self, blocks: u64, chunk_blocks: u64) -> u64 {
        self.rebuild_chunk_ns * (blocks / chunk_blocks.max(1))
    }

    /// What a completion of `kind` and `blocks` blocks costs (a zone command: its fixed
    /// cost).
    pub fn completion_ns(&self, kind: CompletionKind, blocks: u64) -> u64 {
        match kind {
            CompletionKind::Write => self.write_completion.ns(blocks),
            CompletionKind::Read => self.read_completion.ns(blocks),
            CompletionKind::Zone => self.zone_completion_ns,
            CompletionKind::RebuildRead => self.rebuild_read_completion.ns(blocks),
            CompletionKind::RebuildWrite => self.rebuild_write_completion.ns(blocks),
            CompletionKind::RebuildZone => self.rebuild_zone_completion_ns,
        }
    }

    /// The most writes of `blocks` blocks per second one core handles on a level of
    /// `shape` (k data, m parity chunks per stripe) whose drive commands carry at most
    /// `command_blocks` blocks: each write costs at least its request and the completions
    /// of its blocks and their parity, b (k + m) / k blocks, in commands as large as they
    /// come (a Zone Write carries a chunk; Zone Appends carry as many chunks as the drive
    /// takes, `drive_command::chunks_per_append`). The ceiling the simulated engine core
    /// puts on an array; headers, footers and garbage collection only add to the cost.
    pub fn max_writes_per_s(&self, blocks: u64, command_blocks: u64, (k, m): (usize, usize)) -> f64 {
        let completion_blocks = blocks as f64 * (k + m) as f64 / k.max(1) as f64;
        let commands = completion_blocks / command_blocks.max(1) as f64;
        let ns = self.write_request.ns(blocks) as f64
            + commands * self.write_completion.fixed_ns as f64
            + completion_blocks * self.write_completion.per_block_ns as f64;
        1e9 / ns.max(f64::MIN_POSITIVE)
    }

    /// The most reads of `blocks` blocks per second on chunks of `chunk_blocks`: each
    /// costs at least its request and the completions of its blocks, in commands of at
    /// most a chunk.
    pub fn max_reads_per_s(&self, blocks: u64, chunk_blocks: u64) -> f64 {
        let commands = blocks as f64 / chunk_blocks.max(1) as f64;
        let ns = self.read_request.ns(blocks) as f64
            + commands * self.read_completion.fixed_ns as f64
            + blocks as f64 * self.read_completion.per_block_ns as f64;
        1e9 / ns.max(f64::MIN_POSITIVE)
    }
}

impl fmt::Display for CpuCosts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "write request {}, write completion {}, read request {}, read completion {}; other request {} ns, zone \
             command completion {} ns; rebuild read completion {}, rebuild write completion {} + {} ns per chunk, \
             rebuild zone command completion {} ns, rebuild job {}, its result taken {} ns",
            self.write_request,
            self.write_completion,
            self.read_request,
            self.read_completion,
            self.other_request_ns,
            self.zone_completion_ns,
            self.rebuild_read_completion,
            self.rebuild_write_completion,
            self.rebuild_chunk_ns,
            self.rebuild_zone_completion_ns,
            self.rebuild_job,
            self.rebuild_job_result_ns
        )
    }
}
