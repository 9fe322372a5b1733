//! The zapraid RAID engine: a single-threaded, sans-I/O state machine over zoned devices
//! (group-based layout, write path, compact stripe table, L2P table, degraded reads,
//! garbage collection, recovery).
//!
//! Drivers connect it to drives: `sim` (deterministic simulation over emulated drives),
//! `sim_shards` (the same for an array of engine shards, `shard`); `recovery` rebuilds it
//! from the drives after a stop or a crash.
//!
//! No unsafe code but one CPU cache hint (`l2p::prefetch_line`), allowed where it is.
#![deny(unsafe_code)]

pub mod capacity;
pub mod checksum;
pub mod engine;
pub mod error;
pub mod format;
pub mod hybrid;
pub mod l2p;
pub mod layout;
pub mod parity;
mod pool;
pub mod recovery;
pub mod shard;
pub mod sim;
pub mod sim_shards;
pub mod stripe_table;

pub use checksum::{BlockChecksums, ReadChecks};
pub use engine::{
    Config, DriveCommand, Engine, L2pConfig, L2pStatus, RebuildStatus, Request, RequestId, Response, ScrubReport,
    ScrubStatus, Status, DEFAULT_STRIPE_TIMEOUT_NS, PAPER_LOOKUP_PS_PER_ENTRY,
};
pub use error::{Error, Result};
pub use hybrid::{ChunkClass, OpenSegments, SegmentPlan};
pub use layout::{Layout, Mode, RaidLevel};
pub use parity::ParityCodec;
pub use recovery::{RecoveryReport, Repairs};
pub use sim::Simulator;
pub use zapraid_zns as zns;
