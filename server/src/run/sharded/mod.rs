//! An array of S engine shards running (`zapraid_engine::shard`): one engine thread per
//! shard, each over its own parts of the drives (`thread::ShardLink`), one superblock
//! record for them all (`record::SharedRecord`), and the way in that splits requests among
//! them and carries other messages to every one (`route`).
//!
//! Invariant: the shards' threads share nothing written per request; only a request that
//! spans shards shares its own join, and a failure the shared record.

mod array;
mod parts;
mod route;
mod start;

pub use array::{ArrayThreads, ShardStart, ShardedArray};
pub use parts::{DriveParts, PartLayout};
pub use route::Shards;
pub use start::{recover_shards, RecoveredShards};
