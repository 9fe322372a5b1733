//! The two checkpoint copies an engine keeps, as a real driver writes them to its
//! checkpoint area (`sim` keeps the engine's, `sim_shards` each shard's): what a start
//! reads back.

use crate::format::CheckpointImage;

/// An engine's two checkpoint copies as a real driver writes them (copy = generation mod 2),
/// encoded, and the newest taken while running (until taken).
#[derive(Default)]
pub struct CheckpointCopies {
    copies: [Option<Vec<u8>>; 2],
    /// The generation the next checkpoint gets (0: the first, generation 1).
    next_generation: u64,
    pub(crate) running: Option<CheckpointImage>,
}

impl CheckpointCopies {
    pub(crate) fn after(generation: Option<u64>) -> CheckpointCopies {
        CheckpointCopies { next_generation: generation.map_or(1, |g| g + 1), ..Default::default() }
    }

    pub fn next_generation(&self) -> u64 {
        self.next_generation.max(1)
    }

    /// Writes `image` to its copy and returns what a start reads back: the image, resolved
    /// from the other copy when incremental (an engine handing out one its base cannot
    /// resolve is a bug: this panics).
    pub(crate) fn store(&mut self, image: &CheckpointImage, block_size_bytes: u32) -> CheckpointImage {
        self.next_generation = image.next_generation();
        let copy = (image.generation % 2) as usize;
        self.copies[copy] = Some(image.encode(block_size_bytes));
        let read = |bytes: &Option<Vec<u8>>| {
            bytes.as_deref().map(|b| CheckpointImage::decode(b).expect("a checkpoint copy just written decodes"))
        };
        let newest = read(&self.copies[copy]).expect("just written");
        debug_assert!(newest == *image, "the checkpoint changed on its trip through its bytes");
        let base = read(&self.copies[1 - copy]);
        newest.resolve(base.as_ref()).unwrap_or_else(|e| panic!("the checkpoint does not resolve from its base: {e}"))
    }
}
