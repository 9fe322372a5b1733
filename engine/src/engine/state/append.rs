//! Chunk appends gathered while one scheduling pass issues stripes (`append_batch`): per
//! drive, the chunks of consecutive stripes of one Zone Append segment, sent as one Zone
//! Append when the pass ends.
//!
//! Invariants: a batch holds chunks of one segment only, one per stripe, in the order
//! their bytes go into the command; it is empty whenever the engine is between events.

use super::stripe::ChunkBuffers;

/// One drive's chunks waiting to go out as one Zone Append.
#[derive(Default)]
pub(in crate::engine) struct AppendBatch {
    /// The zone of the segment they belong to; `None`: the batch is empty.
    pub(in crate::engine) segment: Option<u32>,
    /// The stripes' numbers, the chunk of `stripes[i]` at chunk `i` of the command.
    pub(in crate::engine) stripes: Vec<u64>,
    pub(in crate::engine) chunks: Vec<ChunkBuffers>,
}

impl AppendBatch {
    pub(in crate::engine) fn is_empty(&self) -> bool {
        debug_assert_eq!(self.segment.is_none(), self.stripes.is_empty());
        debug_assert_eq!(self.stripes.len(), self.chunks.len());
        self.stripes.is_empty()
    }
}
