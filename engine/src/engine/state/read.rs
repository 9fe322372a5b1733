//! Reads in flight (`ReadRequest`, who asked: `ReadOrigin`) and blocks being rebuilt from
//! the rest of their stripe (`BlockRebuild`; the stripe's chunks: `StripePlaces`). Reading
//! is `read`'s.

use crate::engine::request::RequestId;
use crate::error::Error;
use crate::format::{BlockMetadata, FIELD_BYTES};
use crate::l2p::Physical;

/// Who asked for a read.
#[derive(Clone, Copy, Debug)]
pub(in crate::engine) enum ReadOrigin {
    Frontend(RequestId),
    /// A frontend read whose checksums the frontend verifies (`Request::ReadUnverified`).
    FrontendUnverified(RequestId),
    /// Garbage collection, moving the block that was at this place.
    Relocation(Physical),
    /// A page of the L2P table, read back from its mapping block (`mapping`).
    Mapping(crate::l2p::PageIndex),
}

pub(in crate::engine) struct ReadRequest {
    pub(in crate::engine) origin: ReadOrigin,
    pub(in crate::engine) lba: u64,
    pub(in crate::engine) blocks: Vec<Option<Vec<u8>>>,
    /// Timestamp of each block read (garbage collection keeps it).
    pub(in crate::engine) timestamps: Vec<u64>,
    /// For a `FrontendUnverified` read, each block's metadata for the frontend to check
    /// the block against (None: made here, zeros or rebuilt); empty for other reads.
    pub(in crate::engine) unverified: Vec<Option<BlockMetadata>>,
    pub(in crate::engine) pending: usize,
    pub(in crate::engine) error: Option<Error>,
}

/// A stripe's chunks as `Engine::stripe_places` finds them.
pub(in crate::engine) struct StripePlaces {
    /// Stripe number within the segment: it says which chunk each drive holds.
    pub(in crate::engine) stripe_number: u64,
    /// The other drives holding the segment and the chunk position of their chunk.
    pub(in crate::engine) others: Vec<(usize, u64)>,
    /// Compact stripe table entries looked at (modelled CPU cost).
    pub(in crate::engine) entries_checked: u64,
}

pub(in crate::engine) struct BlockRebuild {
    pub(in crate::engine) read: u64,
    pub(in crate::engine) block: usize,
    pub(in crate::engine) lba: u64,
    /// Stripe number within the segment: it says which chunk each drive holds.
    pub(in crate::engine) stripe_number: u64,
    pub(in crate::engine) lost_chunk: usize,
    /// Per drive, the block read and its (LBA, timestamp) fields, checked on arrival.
    pub(in crate::engine) shards: Vec<Option<(Vec<u8>, [u8; FIELD_BYTES])>>,
    /// Per drive, the zone offset its shard is read from (None: not read).
    pub(in crate::engine) offsets: Vec<Option<u64>>,
    pub(in crate::engine) pending: usize,
    /// The block's drive is working: the block itself was damaged (a repair, counted).
    pub(in crate::engine) damaged: bool,
    /// Where the block was (a damaged one's row is rewritten after a frontend read).
    pub(in crate::engine) physical: Physical,
}
