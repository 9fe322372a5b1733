//! The zapraid RAID engine: a single-threaded, sans-I/O state machine over zoned devices
//! (group-based layout, write path, compact stripe table, L2P table, degraded reads,
//! garbage collection, recovery).
//!
//! Not built yet: this crate holds no engine code so far, and nothing in zapraid claims
//! otherwise. It exists so the workspace has its final shape; see the README's status
//! section for what is built.

pub use zapraid_zns as zns;
