//! The zapraid RAID engine: a single-threaded, sans-I/O state machine over zoned devices
//! (group-based layout, write path, compact stripe table, L2P table, degraded reads,
//! garbage collection, recovery).
//!
//! Drivers connect it to drives: `sim` (deterministic simulation over emulated drives),
//! `sim_shards` (the same for an array of engine shards, `shard`); `recovery` rebuilds it
//! from the drives after a stop or a crash.
//!
//! The crate is in rooms, one way down: a room takes only from the rooms below it, never
//! from one above, and the files within a room take from each other one way (checked by
//! `scripts/rooms.py engine/src --order ...` in `make lint`, with this order). From the
//! bottom up:
//!
//! 1. `error`: the crate's one error type.
//! 2. `crc`: CRC32C, by whichever of two implementations measured faster at first use.
//! 3. `format`: the bytes on the drives (superblock, spare record, segment header, footer
//!    blocks, block metadata, checkpoint image, mapping block), decoded as untrusted.
//! 4. `checksum`: block checksums a frontend computes and checks on its own thread.
//! 5. `parity`: the erasure codes over k data and m parity chunks.
//! 6. `placement`: which drives of an array wider than its stripes each segment takes
//!    (declustered, docs/internals/declustered.md).
//! 7. `layout`: RAID levels, the code each takes, and where every chunk of a segment lives.
//! 8. `hybrid`: the open segments of each chunk size, and where a stripe goes.
//! 9. `capacity`: the space and zone budget (what garbage collection and recovery keep).
//! 10. `stripe_table`: the compact stripe table of a Zone Append segment.
//! 11. `l2p`: the L2P table, its pages and their memory budget.
//! 12. `pool`: byte buffers the data path reuses.
//! 13. `config`: what an array is configured with.
//! 14. `drive_command`: one command for one drive, what the state machines hand their driver.
//! 15. `lanes`: a segment's lanes and number mapped to the drives and zones of an array
//!     wider than its stripes, on commands and their completions.
//! 16. `recovery`: the engine's state read back from the drives (and a lost L2P page's
//!     entries read back from the log).
//! 17. `engine`: the running engine, and its start from what recovery found.
//! 18. `shard`: the shard map: an array as S engines, which shard an LBA and a zone belong
//!     to, requests split and joined (docs/internals/shards.md).
//! 19. `cpu_cost`: what the engine's work costs the simulated core, and where its figures
//!     come from.
//! 20. `sim`: the deterministic simulator over emulated drives.
//! 21. `sim_shards`: the deterministic simulator of S engine shards over one set of drives.
//!
//! No unsafe code but one CPU cache hint (`l2p::prefetch_line`), allowed where it is.
#![deny(unsafe_code)]

pub mod capacity;
pub mod checksum;
mod config;
pub mod cpu_cost;
pub mod crc;
mod drive_command;
pub mod engine;
pub mod error;
pub mod format;
pub mod hybrid;
pub mod l2p;
pub mod lanes;
pub mod layout;
pub mod parity;
pub mod placement;
mod pool;
pub mod recovery;
pub mod shard;
pub mod sim;
pub mod sim_shards;
pub mod stripe_table;

pub use checksum::{BlockChecksums, ReadChecks};
pub use drive_command::{chunks_per_append, chunks_per_transfer};
pub use engine::{
    Config, Declustering, DriveCommand, Engine, L2pConfig, L2pStatus, RebuildJob, RebuildJobDone, RebuildStatus,
    Request, RequestId, Response, ScrubReport, ScrubStatus, Status, DEFAULT_STRIPE_TIMEOUT_NS,
    PAPER_LOOKUP_PS_PER_ENTRY,
};
pub use error::{Error, Result};
pub use hybrid::{ChunkClass, OpenSegments, SegmentPlan};
pub use layout::{Layout, Mode, RaidLevel};
pub use parity::ParityCodec;
pub use recovery::{RecoveryReport, Repairs};
pub use sim::Simulator;
pub use zapraid_zns as zns;
