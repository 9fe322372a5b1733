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
/// `geometry`: what the drive takes in one Zone Append (ZASL), one transfer (MDTS) and
/// its granule, at least one chunk. The engine merges a scheduling pass's chunks for a
/// drive up to this (`engine::append_batch`), and cuts a batch with
/// `append_chunks_at_most`.
pub fn chunks_per_append(geometry: &Geometry, chunk_blocks: u64) -> u64 {
    append_chunks_at_most(geometry, chunk_blocks, u64::from(geometry.zone_append_max_blocks))
}

/// The most chunks of `chunk_blocks` blocks one read or write carries on drives of
/// `geometry` (MDTS and the granule), at least one: what a rebuild puts in one command
/// (`engine::rebuild`).
pub fn chunks_per_transfer(geometry: &Geometry, chunk_blocks: u64) -> u64 {
    transfer_chunks_at_most(geometry, chunk_blocks, u64::from(geometry.max_transfer_blocks))
}

/// The most of `chunks` consecutive chunks (at least one) one Zone Append takes.
pub fn append_chunks_at_most(geometry: &Geometry, chunk_blocks: u64, chunks: u64) -> u64 {
    largest_whole(chunk_blocks, chunks, |blocks| geometry.append_takes(blocks))
}

/// The most of `chunks` consecutive chunks (at least one) one read or write takes.
pub fn transfer_chunks_at_most(geometry: &Geometry, chunk_blocks: u64, chunks: u64) -> u64 {
    largest_whole(chunk_blocks, chunks, |blocks| geometry.transfer_takes(blocks))
}

/// The largest n <= `chunks` whose n chunks of `chunk_blocks` one command `takes`, or
/// one: a layout's chunk is always taken alone (`Layout::new` checks it). A granule
/// makes the counts taken not a prefix of 1, 2, ..., so each is asked, from the top.
fn largest_whole(chunk_blocks: u64, chunks: u64, takes: impl Fn(u64) -> bool) -> u64 {
    let chunk_blocks = chunk_blocks.max(1);
    (1..=chunks).rev().find(|n| n.checked_mul(chunk_blocks).is_some_and(&takes)).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_the_limits_and_the_granule() {
        let any = Geometry { zone_append_max_blocks: 32, max_transfer_blocks: 64, ..Geometry::small(4, 1024, 1000) };
        assert_eq!(chunks_per_append(&any, 1), 32);
        assert_eq!(chunks_per_transfer(&any, 3), 21);
        assert_eq!(transfer_chunks_at_most(&any, 1, 13), 13);
        let granular = Geometry { transfer_granule_blocks: 8, ..any };
        assert_eq!(chunks_per_append(&granular, 1), 32);
        assert_eq!(chunks_per_transfer(&granular, 3), 16, "48 blocks, the largest multiple of 8 and 3 within 64");
        assert_eq!(append_chunks_at_most(&granular, 1, 13), 8);
        assert_eq!(append_chunks_at_most(&granular, 1, 5), 5);
        assert_eq!(transfer_chunks_at_most(&granular, 3, 5), 2);
        assert_eq!(transfer_chunks_at_most(&granular, 16, 5), 4);
        // More blocks than a transfer: one chunk, which the layout refuses before it gets here.
        assert_eq!(transfer_chunks_at_most(&granular, 128, 3), 1);
    }
}
