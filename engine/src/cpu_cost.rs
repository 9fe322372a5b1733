//! What the engine's work costs in simulated CPU time: the cost model of the one core the
//! simulator (`sim`) gives the engine, and the costs it uses unless told otherwise.
//!
//! The model: every event the engine handles costs time on its core, by kind, per block it
//! carries (at least one). A request submitted costs by its kind (write, read, other:
//! flush, discard, charged as one block); a drive completion by the command it completes (a
//! Zone Write or Zone Append, a read, a zone command: reset, finish, report, one block).
//! The costs are measured with 4 KiB requests on 4 KiB chunks, one block per event, which
//! cannot tell a fixed part from a per-block part: charging per block keeps a 4 KiB request
//! at the measured ceiling whatever the chunk size (small writes packed into a large chunk
//! still cost their copy, parity and mapping work), and charges large requests and chunks
//! in proportion to their bytes, which overstates their fixed part (the safe side: a
//! simulated array never does more than the core could). Timer ticks, checkpoints and
//! recovery from the drives are not charged.
//!
//! Where the figures come from: `zapraid bench cpu` drives the engine alone over instant
//! drives, times its `submit` calls apart from the rest of its work (completion handling,
//! polling its queues) and counts the completions by kind; the cost of a request is its
//! submit time, the cost of a completion the rest of the engine's time over the
//! completions (`zapraid_experiments::cpu`). Zone commands are too rare in that run to be
//! measured apart and are charged as a write completion; other requests as a read request
//! (a flush or a discard does bookkeeping, no data). Write requests carry the frontend's
//! checksums (`Request::WriteWithChecksums`), as the server's do; the simulated requests
//! that make the engine compute them (`Request::Write`) are charged the same. RAID-6 and
//! k+m levels of two or more parity chunks cost more than one parity chunk (Reed-Solomon
//! Q), so they have costs of their own; RAID-0, RAID-1, RAID-01 and RAID-4 are charged as
//! RAID-5.

use std::fmt;

use zapraid_zns::Command;

use crate::engine::Request;
use crate::layout::RaidLevel;

/// What one event costs the engine's core per block it carries, in nanoseconds
/// (`Default`: nothing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuCosts {
    pub write_request_ns_per_block: u64,
    pub read_request_ns_per_block: u64,
    /// A flush or a discard (one block).
    pub other_request_ns: u64,
    /// A Zone Write or Zone Append completed.
    pub write_completion_ns_per_block: u64,
    pub read_completion_ns_per_block: u64,
    /// A zone reset, finish or report completed (one block).
    pub zone_completion_ns: u64,
}

/// A request's kind, for its cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    Write,
    Read,
    Other,
}

impl RequestKind {
    /// The request's kind and the blocks it is charged for (at least one) on drives of
    /// `block_bytes` blocks.
    pub fn of(request: &Request, block_bytes: u64) -> (RequestKind, u64) {
        let blocks_of = |bytes: usize| (bytes as u64).div_ceil(block_bytes.max(1)).max(1);
        match request {
            Request::Write { data, .. } | Request::WriteWithChecksums { data, .. } => {
                (RequestKind::Write, blocks_of(data.len()))
            }
            Request::Read { blocks, .. } | Request::ReadUnverified { blocks, .. } => {
                (RequestKind::Read, (*blocks).max(1))
            }
            Request::Flush | Request::Discard { .. } => (RequestKind::Other, 1),
        }
    }
}

/// The kind of drive command a completion completes, for its cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionKind {
    Write,
    Read,
    Zone,
}

impl CompletionKind {
    /// The kind of the command's completion and the blocks it is charged for (at least
    /// one) on drives of `block_bytes` blocks.
    pub fn of(command: &Command, block_bytes: u64) -> (CompletionKind, u64) {
        let blocks_of = |bytes: usize| (bytes as u64).div_ceil(block_bytes.max(1)).max(1);
        match command {
            Command::Write { data, .. } | Command::Append { data, .. } => {
                (CompletionKind::Write, blocks_of(data.len()))
            }
            Command::Read { data, .. } => (CompletionKind::Read, blocks_of(data.len())),
            Command::ManageZone { .. } | Command::ReportZones { .. } => (CompletionKind::Zone, 1),
        }
    }
}

/// Measured with `zapraid bench cpu` (release build, 1,000,000 requests per cell, seed 1),
/// the median of three runs, on the project's build machine (2 cores of an AMD EPYC, QEMU
/// guest, shared with other builds), 2026-11-27: (3+1)-RAID-5, ZapRAID G = 256. The three
/// runs: write request 578, 581, 530 ns; write completion 286, 303, 296; read request 337,
/// 339, 416; read completion 301, 265, 259 (1.33 completions per write, 1 per read): at
/// most 1.03 M writes/s of 4 KiB.
pub const RAID5_MEASURED: CpuCosts = CpuCosts {
    write_request_ns_per_block: 578,
    read_request_ns_per_block: 339,
    other_request_ns: 339,
    write_completion_ns_per_block: 296,
    read_completion_ns_per_block: 265,
    zone_completion_ns: 296,
};

/// As `RAID5_MEASURED`, same runs: (4+2)-RAID-6. Write request 1,243, 1,372, 881 ns; write
/// completion 279, 310, 186; read request 196, 345, 354; read completion 157, 249, 199
/// (1.5 completions per write): at most 0.61 M writes/s of 4 KiB.
pub const RAID6_MEASURED: CpuCosts = CpuCosts {
    write_request_ns_per_block: 1243,
    read_request_ns_per_block: 345,
    other_request_ns: 345,
    write_completion_ns_per_block: 279,
    read_completion_ns_per_block: 199,
    zone_completion_ns: 279,
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

    /// From measured figures (nanoseconds per event of one block, as `zapraid bench cpu`
    /// finds them): zone commands charged as a write completion, other requests as a read.
    pub fn from_measured(
        write_request_ns: f64,
        write_completion_ns: f64,
        read_request_ns: f64,
        read_completion_ns: f64,
    ) -> CpuCosts {
        let ns = |x: f64| x.max(0.0).round() as u64;
        CpuCosts {
            write_request_ns_per_block: ns(write_request_ns),
            read_request_ns_per_block: ns(read_request_ns),
            other_request_ns: ns(read_request_ns),
            write_completion_ns_per_block: ns(write_completion_ns),
            read_completion_ns_per_block: ns(read_completion_ns),
            zone_completion_ns: ns(write_completion_ns),
        }
    }

    /// What a request of `kind` costs per block (other requests: in all).
    pub fn request_ns(&self, kind: RequestKind) -> u64 {
        match kind {
            RequestKind::Write => self.write_request_ns_per_block,
            RequestKind::Read => self.read_request_ns_per_block,
            RequestKind::Other => self.other_request_ns,
        }
    }

    /// What a completion of `kind` costs per block (zone commands: in all).
    pub fn completion_ns(&self, kind: CompletionKind) -> u64 {
        match kind {
            CompletionKind::Write => self.write_completion_ns_per_block,
            CompletionKind::Read => self.read_completion_ns_per_block,
            CompletionKind::Zone => self.zone_completion_ns,
        }
    }

    /// The most requests of `kind` and `blocks` blocks one core handles per second when
    /// each takes `completion_blocks_per_request` blocks of drive completions of
    /// `completion` kind: the ceiling the simulated engine core puts on an array.
    pub fn max_requests_per_s(
        &self,
        kind: RequestKind,
        blocks: u64,
        completion_blocks_per_request: f64,
        completion: CompletionKind,
    ) -> f64 {
        let per_request_ns = (blocks * self.request_ns(kind)) as f64
            + completion_blocks_per_request * self.completion_ns(completion) as f64;
        1e9 / per_request_ns.max(f64::MIN_POSITIVE)
    }

    /// The most writes of `blocks` blocks per second on a level of `shape` (k data, m
    /// parity chunks per stripe): each writes at least its blocks and their parity,
    /// (k + m) / k completion blocks per block.
    pub fn max_writes_per_s(&self, blocks: u64, (k, m): (usize, usize)) -> f64 {
        let completion_blocks = blocks as f64 * (k + m) as f64 / k.max(1) as f64;
        self.max_requests_per_s(RequestKind::Write, blocks, completion_blocks, CompletionKind::Write)
    }

    /// The most reads of `blocks` blocks per second: each reads at least its blocks.
    pub fn max_reads_per_s(&self, blocks: u64) -> f64 {
        self.max_requests_per_s(RequestKind::Read, blocks, blocks as f64, CompletionKind::Read)
    }
}

impl fmt::Display for CpuCosts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "per block: write request {} ns, write completion {} ns, read request {} ns, read completion {} ns; \
             other request {} ns, zone command completion {} ns",
            self.write_request_ns_per_block,
            self.write_completion_ns_per_block,
            self.read_request_ns_per_block,
            self.read_completion_ns_per_block,
            self.other_request_ns,
            self.zone_completion_ns
        )
    }
}
