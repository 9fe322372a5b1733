//! What the state machines (the engine, recovery) ask of the drives: one command for one
//! drive, handed to the driver that owns the drives (the simulator, the io_uring driver).

use zapraid_zns::{Command, Geometry, Tag};

/// A command for one drive of the array.
#[derive(Debug)]
pub struct DriveCommand {
    pub drive: usize,
    pub tag: Tag,
    pub command: Command,
    /// Modelled engine CPU time spent before this command could be issued (stripe table
    /// lookups); the simulator holds the command back this long. 0 for most commands.
    pub delay_ns: u64,
}

/// The most chunks of `chunk_blocks` blocks one Zone Append carries on drives of
/// `geometry`: what the drive takes in one Zone Append (ZASL) and one transfer (MDTS), at
/// least one chunk. The engine merges a scheduling pass's chunks for a drive up to this
/// (`engine::append_batch`).
pub fn chunks_per_append(geometry: &Geometry, chunk_blocks: u64) -> u64 {
    chunks_in(geometry.zone_append_max_blocks.min(geometry.max_transfer_blocks), chunk_blocks)
}

/// The most chunks of `chunk_blocks` blocks one read or write carries on drives of
/// `geometry` (MDTS), at least one: what a rebuild puts in one command (`engine::rebuild`).
pub fn chunks_per_transfer(geometry: &Geometry, chunk_blocks: u64) -> u64 {
    chunks_in(geometry.max_transfer_blocks, chunk_blocks)
}

/// Whole chunks of `chunk_blocks` in a command of `command_blocks`, at least one.
fn chunks_in(command_blocks: u32, chunk_blocks: u64) -> u64 {
    (u64::from(command_blocks) / chunk_blocks.max(1)).max(1)
}
