//! The RAID engine: a single-threaded, sans-I/O state machine that owns all array state.
//!
//! Inputs: frontend requests (`submit`), device completions (`on_completion`) and time
//! (`tick`). Outputs: device commands (`poll_command`) and frontend responses
//! (`poll_response`). No I/O, no clock, no threads: drivers (the simulator, the real
//! io_uring driver) connect it to the world.
//!
//! Its files go one way down (this file only declares them and re-exports):
//! - `request`: what a frontend asks (`Request`) and is answered (`Response`);
//! - `state/`: the engine's state types, one file per role (`state/mod.rs` lists them);
//! - `machine`: the `Engine` struct that holds them, and what each command tag stands for;
//!
//! and above them an `impl Engine` file per role, taking from `state` and `machine` (and a
//! few from another role's file, never back):
//! - `entry`: the entry points (`format`, `submit`, `on_completion`, `tick`, the polls)
//!   and the L2P bookkeeping every role shares;
//! - `start`: the engine built from what recovery found (`Recovery::finish`);
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
//! - `rebalance`: a declustered array's segments in spare space moved back to their home
//!   drives by garbage collection once those work again;
//! - `scrub`: every segment read and checked, damaged rows' live blocks rewritten,
//!   and the rewrite of damaged blocks frontend reads came across;
//! - `stop`: the clean stop and its stop footers;
//! - `checkpoint`, `checkpoint_base`, `running_checkpoint`: checkpoint images, at a clean
//!   stop and while running, full or incremental;
//! - `status`: what the engine reports of itself.
//!
//! Invariants (asserted where they are kept): a zone has at most one Zone Write in flight;
//! appends of one group land inside the group's region; every persisted data block is in
//! the footer records of its segment; a segment is reset only when the L2P maps nothing
//! into it; the recovery reserve of empty zones is used only after a restart; at most one
//! segment per slot is being sealed when the slot opens its next. A write is acknowledged only when every
//! chunk of its stripes is persisted; only then does the L2P table change, newest timestamp
//! winning.

mod append_batch;
mod checkpoint;
mod checkpoint_base;
mod completion;
mod entry;
mod gc;
mod grow;
mod lost;
mod machine;
mod mapping;
mod page_rebuild;
mod read;
mod rebalance;
mod rebuild;
mod repair;
mod request;
mod running_checkpoint;
mod scan;
mod schedule;
mod scrub;
mod segment;
mod start;
mod state;
mod status;
mod stop;
mod stripe;
mod zone_writes;

pub use crate::config::{Config, Declustering, L2pConfig, DEFAULT_STRIPE_TIMEOUT_NS, PAPER_LOOKUP_PS_PER_ENTRY};
pub use crate::drive_command::DriveCommand;
pub use machine::Engine;
pub use rebuild::{
    rebuild_segments_at_once, RebuildJob, RebuildJobDone, RebuildStatus, MAX_DECLUSTERED_REBUILD_SEGMENTS_AT_ONCE,
    MAX_REBUILD_SEGMENTS_AT_ONCE,
};
pub use request::{Request, RequestId, Response};
pub use state::scrub::{ScrubReport, ScrubStatus};
pub use status::{DeclusteredStatus, L2pStatus, Status};
