//! Stripes on the write path: blocks filling an open stripe (`OpenStripe`, each block's
//! `BlockInfo`, whose stripe it is: `Fill`), encoded stripes in flight (`Stripe`, their
//! chunk buffers), the frontend writes they carry (`WriteInFlight`), and finished stripes'
//! and reads' vectors kept for reuse (`Spare`). Filling and sealing stripes is `stripe`'s.

use crate::engine::request::RequestId;
use crate::format::{decode_fields, FIELD_BYTES, NO_LBA};
use crate::hybrid::ChunkClass;
use crate::l2p::Physical;

#[derive(Clone, Copy, Debug)]
pub(in crate::engine) struct BlockInfo {
    pub(in crate::engine) lba: u64,
    pub(in crate::engine) timestamp: u64,
    pub(in crate::engine) request: Option<RequestId>,
    /// A block moved by garbage collection: where it was. It keeps its timestamp, so that
    /// a newer write of the same LBA still wins in recovery.
    pub(in crate::engine) relocated_from: Option<Physical>,
    /// Moved by a repair (`scrub`), not by a relocation.
    pub(in crate::engine) repair: bool,
    /// CRC32C of the block's data (the frontend's, or computed when the block came):
    /// its metadata's checksum and XOR parity's are made from it without reading the data.
    pub(in crate::engine) data_crc: u32,
}

impl BlockInfo {
    /// A padding block: zeros, whose CRC32C is the engine's `zero_block_crc`.
    pub(in crate::engine) fn padding(zero_block_crc: u32) -> BlockInfo {
        BlockInfo {
            lba: NO_LBA,
            timestamp: 0,
            request: None,
            relocated_from: None,
            repair: false,
            data_crc: zero_block_crc,
        }
    }
}

/// Which open stripe a block fills: frontend writes by chunk class (`hybrid`), or the
/// relocation's, of the plan's `gc_class`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::engine) enum Fill {
    Frontend(ChunkClass),
    Relocation,
}

/// A chunk's data and its blocks' metadata (buffers of the engine's `BufferPool`).
pub(in crate::engine) struct ChunkBuffers {
    pub(in crate::engine) data: Vec<u8>,
    pub(in crate::engine) metadata: Vec<u8>,
}

impl ChunkBuffers {
    /// The data buffer of an open stripe's chunk, taken from `pool` (`len` bytes of old
    /// contents) when no block has reached the chunk yet.
    pub(in crate::engine) fn data_or_take(&mut self, pool: &mut crate::pool::BufferPool, len: usize) -> &mut [u8] {
        if self.data.is_empty() {
            self.data = pool.take(len);
        }
        &mut self.data
    }
}

pub(in crate::engine) struct OpenStripe {
    pub(in crate::engine) infos: Vec<BlockInfo>,
    /// The k data chunks, block `i` at chunk `i / chunk_blocks`: blocks are copied
    /// straight in as they come (their metadata buffers are taken when it is sealed).
    pub(in crate::engine) chunks: Vec<ChunkBuffers>,
    /// Empty: the stripe's chunk positions once sealed (a reused vector).
    pub(in crate::engine) positions: Vec<Option<u64>>,
    pub(in crate::engine) started_ns: u64,
}

/// A stripe encoded and waiting for (or in) its group.
pub(in crate::engine) struct Stripe {
    /// The chunk class: which slots may take it (its chunk size is theirs).
    pub(in crate::engine) class: ChunkClass,
    /// The zone of the segment it was issued into.
    pub(in crate::engine) segment: Option<u32>,
    pub(in crate::engine) infos: Vec<BlockInfo>,
    /// All k + m chunks (data then parity), with their metadata; taken when issued.
    pub(in crate::engine) chunks: Vec<ChunkBuffers>,
    pub(in crate::engine) pending_chunks: usize,
    /// Stripe ID within the group and stripe number within the segment, once grouped.
    pub(in crate::engine) id: u32,
    pub(in crate::engine) number: u64,
    /// Where each drive's chunk landed (zone-relative chunk position), once persisted.
    pub(in crate::engine) positions: Vec<Option<u64>>,
    /// Per parity chunk, the parity of the data blocks' (LBA, timestamp) fields,
    /// `FIELD_BYTES` per block offset, parity chunk after parity chunk: written into the
    /// parity blocks' metadata and footer entries.
    pub(in crate::engine) parity_fields: Vec<u8>,
}

impl Stripe {
    /// Parity chunk `p`'s fields for block offset `offset`: (LBA, timestamp) parity.
    pub(in crate::engine) fn parity_field(&self, p: usize, offset: usize, chunk_blocks: usize) -> (u64, u64) {
        let at = (p * chunk_blocks + offset) * FIELD_BYTES;
        decode_fields(&self.parity_fields[at..at + FIELD_BYTES]).expect("whole fields")
    }
}

/// The vectors of a finished stripe, emptied and kept (`Spare`) for the next one.
pub(in crate::engine) struct StripeVecs {
    pub(in crate::engine) infos: Vec<BlockInfo>,
    pub(in crate::engine) chunks: Vec<ChunkBuffers>,
    pub(in crate::engine) positions: Vec<Option<u64>>,
}

/// A frontend write in flight.
pub(in crate::engine) struct WriteInFlight {
    /// Its blocks not yet persisted.
    pub(in crate::engine) blocks_left: usize,
    /// Its data buffer, kept to give back (empty if a block's chunk took it).
    pub(in crate::engine) buffer: Vec<u8>,
    /// Bytes of the buffer its response gives back for the frontend to reuse (its own,
    /// else one of the engine's of that length); 0: none.
    pub(in crate::engine) give_back_bytes: usize,
    /// Its sequence number among outstanding writes (`flush`).
    pub(in crate::engine) seq: u64,
}

/// What the data path reuses besides byte buffers: finished stripes' and reads' vectors
/// (emptied), and the scratch list of requests a persisted stripe acknowledges.
#[derive(Default)]
pub(in crate::engine) struct Spare {
    pub(in crate::engine) stripes: Vec<StripeVecs>,
    pub(in crate::engine) reads: Vec<ReadVecs>,
    pub(in crate::engine) acked: Vec<(RequestId, WriteInFlight)>,
}

/// A finished read's block slots, timestamps and metadata for the frontend
/// (`read::ReadRequest`), emptied.
pub(in crate::engine) type ReadVecs = (Vec<Option<Vec<u8>>>, Vec<u64>, Vec<Option<crate::format::BlockMetadata>>);
