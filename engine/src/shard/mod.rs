//! Engine shards: an array run as S whole engines side by side, each owning a run of every
//! drive's zones and a share of the logical space (docs/internals/shards.md). This module
//! is the map alone, with no I/O: which shard an LBA is in and where, each shard's zones,
//! logical blocks and configuration, whether S shards fit the drives' open and active
//! zone limits and their zones the logical space; `split` cuts a request into per-shard
//! requests and joins their responses; `status` sums the shards' status.
//!
//! The logical space is interleaved in units of U blocks: LBA l is in shard (l / U) % S at
//! shard-local LBA (l / (U * S)) * U + l % U, so a request of up to U blocks touches at
//! most two shards, and the units a request covers on one shard are contiguous there
//! (every shard gets one request per array request). Shard s owns zones
//! [s * Z / S, (s + 1) * Z / S) of the Z zones the engine would have, numbered from 0 in
//! its own engine (`zapraid_zns::ZoneSpan`). With S = 1 every LBA and zone maps to itself
//! and the shard's configuration is the array's: the array of one engine, unchanged.
//!
//! Each shard's engine is given the array's UUID with its last two bytes mixed with S and
//! the shard's index (unchanged for S = 1): a start with the wrong S, whose shards would
//! cover other shards' zones, finds segment headers of "another array" and refuses, instead
//! of mapping one shard's local LBAs as another's.

mod map;
mod split;
mod status;
#[cfg(test)]
mod tests;

pub use map::*;
pub use split::{Join, Part, Split};
pub use status::ShardedStatus;
