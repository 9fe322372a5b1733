//! Reusable byte buffers for the engine's data path: chunk data and metadata buffers come
//! back with their commands' completions (`zapraid_zns::Completion` returns them) and go
//! out again with the next stripe or read, instead of a heap allocation (and a free) per
//! chunk, block and metadata area.
//!
//! Buffers are kept by length, one free list per length. A buffer taken with `take` holds
//! whatever its last user left in it: every caller overwrites all of it before use (or
//! asks for `take_zeroed`). Invariants: a free list holds buffers of exactly its length;
//! at most `MAX_LENGTHS` lengths and `MAX_POOLED_BYTES_PER_LENGTH` bytes per length are
//! kept, and no buffer of more than twice its length in capacity, so the pool's memory
//! stays bounded whatever the array does (a burst of reads
//! returns at most that much to it; the rest is freed). Merged commands' buffers (`join`),
//! whose length varies, are kept apart by capacity, at most `MAX_JOINED_BYTES` of them.
//! A pool made with bounds of its own (`bounded`: a drive rebuild's, which keeps a window
//! of reads in flight for each of up to 64 segments at once) keeps those instead.

/// Distinct buffer lengths kept: a block, a block's metadata, a chunk and a chunk's
/// metadata per chunk class, and the parity fields of a stripe fit easily.
const MAX_LENGTHS: usize = 16;
/// Bytes of free buffers kept per length: a few groups' worth of 4 KiB-block stripes.
const MAX_POOLED_BYTES_PER_LENGTH: usize = 32 << 20;

/// Capacity of merged commands' buffers kept (`join`), data and metadata each: what a
/// few queue depths of 256 KiB commands hold.
const MAX_JOINED_BYTES: usize = 32 << 20;

/// Free lists of byte buffers by length. See the module documentation.
pub(crate) struct BufferPool {
    lists: Vec<FreeList>,
    /// Bytes of free buffers kept per length (`MAX_POOLED_BYTES_PER_LENGTH`, unless made
    /// with another bound: `bounded`).
    bytes_per_length: usize,
    /// Buffers of merged commands, whose length varies with their parts: kept by
    /// capacity, not length, and grown to the length asked. Else every merged command
    /// allocates and frees a buffer of up to a transfer (256 KiB), which the allocator
    /// may return to the system and fault in again.
    joined_data: Joined,
    joined_metadata: Joined,
}

impl Default for BufferPool {
    fn default() -> Self {
        BufferPool::bounded(MAX_POOLED_BYTES_PER_LENGTH, MAX_JOINED_BYTES)
    }
}

/// Emptied buffers of merged commands and the sum of their capacities, at most
/// `max_bytes`.
struct Joined {
    buffers: Vec<Vec<u8>>,
    capacity_bytes: usize,
    max_bytes: usize,
}

impl Joined {
    /// An empty buffer with room for `len` bytes: the last one kept that has the room, if
    /// any (one too small would be grown, an allocation and the old one freed).
    fn take(&mut self, len: usize) -> Vec<u8> {
        let fits = self.buffers.iter().rposition(|b| b.capacity() >= len);
        let mut buffer = match fits {
            Some(at) => self.buffers.swap_remove(at),
            None => self.buffers.pop().unwrap_or_default(),
        };
        self.capacity_bytes -= buffer.capacity();
        buffer.clear();
        buffer.reserve(len);
        buffer
    }

    fn give(&mut self, buffer: Vec<u8>) {
        let capacity = buffer.capacity();
        if capacity > 0 && self.capacity_bytes + capacity <= self.max_bytes {
            self.capacity_bytes += capacity;
            self.buffers.push(buffer);
        }
    }
}

struct FreeList {
    len: usize,
    /// Buffers kept at most: the pool's bytes per length over `len`, at least one (worked
    /// out once: a division per `give` showed in profiles).
    keep: usize,
    buffers: Vec<Vec<u8>>,
}

impl BufferPool {
    /// A pool keeping at most `bytes_per_length` bytes of free buffers per length and
    /// `joined_bytes` of merged commands' (data and metadata each).
    pub(crate) fn bounded(bytes_per_length: usize, joined_bytes: usize) -> BufferPool {
        let joined = || Joined { buffers: Vec::new(), capacity_bytes: 0, max_bytes: joined_bytes };
        BufferPool { lists: Vec::new(), bytes_per_length, joined_data: joined(), joined_metadata: joined() }
    }

    /// A buffer of `len` bytes with unspecified contents (the caller overwrites them).
    pub(crate) fn take(&mut self, len: usize) -> Vec<u8> {
        match self.lists.iter_mut().find(|l| l.len == len).and_then(|l| l.buffers.pop()) {
            Some(buffer) => {
                debug_assert_eq!(buffer.len(), len, "a free list holds buffers of its length");
                buffer
            }
            None => vec![0; len],
        }
    }

    /// A buffer of `len` zero bytes.
    pub(crate) fn take_zeroed(&mut self, len: usize) -> Vec<u8> {
        let mut buffer = self.take(len);
        buffer.fill(0);
        buffer
    }

    /// One data and one metadata buffer holding `parts`' in order, for a command of
    /// several chunks (`data_bytes`, `metadata_bytes`: their sums); the parts' buffers
    /// come back to the pool. The joined ones come back with `give_joined`.
    pub(crate) fn join(
        &mut self,
        parts: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>,
        data_bytes: usize,
        metadata_bytes: usize,
    ) -> (Vec<u8>, Vec<u8>) {
        let (mut data, mut metadata) = (self.joined_data.take(data_bytes), self.joined_metadata.take(metadata_bytes));
        for (part_data, part_metadata) in parts {
            data.extend_from_slice(&part_data);
            metadata.extend_from_slice(&part_metadata);
            self.give(part_data);
            self.give(part_metadata);
        }
        debug_assert_eq!((data.len(), metadata.len()), (data_bytes, metadata_bytes), "the sums given");
        (data, metadata)
    }

    /// Takes back a merged command's buffers (`join`), kept for the next while the
    /// pool's bound allows.
    pub(crate) fn give_joined(&mut self, data: Vec<u8>, metadata: Vec<u8>) {
        self.joined_data.give(data);
        self.joined_metadata.give(metadata);
    }

    /// Takes back a buffer no longer needed; kept for reuse while the pool has room for
    /// its length, freed otherwise.
    pub(crate) fn give(&mut self, buffer: Vec<u8>) {
        let len = buffer.len();
        // A buffer cut down from a larger one (a frontend's) would keep its capacity
        // behind a small length, outside the per-length bound: freed instead.
        if len == 0 || buffer.capacity() > 2 * len {
            return;
        }
        let index = match self.lists.iter().position(|l| l.len == len) {
            Some(index) => index,
            None if self.lists.len() < MAX_LENGTHS => {
                let keep = (self.bytes_per_length / len).max(1);
                self.lists.push(FreeList { len, keep, buffers: Vec::new() });
                self.lists.len() - 1
            }
            None => return,
        };
        let list = &mut self.lists[index];
        if list.buffers.len() < list.keep {
            list.buffers.push(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_given_back_is_taken_again_at_its_length_only() {
        let mut pool = BufferPool::default();
        let mut buffer = pool.take(4096);
        buffer[0] = 7;
        let address = buffer.as_ptr();
        pool.give(buffer);
        let other = pool.take(64);
        assert_eq!(other.len(), 64);
        assert_ne!(other.as_ptr(), address);
        let again = pool.take(4096);
        assert_eq!((again.as_ptr(), again.len(), again[0]), (address, 4096, 7));
        pool.give(again);
        assert!(pool.take_zeroed(4096).iter().all(|b| *b == 0));
    }

    #[test]
    fn the_pool_keeps_a_bounded_number_of_bytes_and_lengths() {
        let mut pool = BufferPool::default();
        let len = MAX_POOLED_BYTES_PER_LENGTH / 2;
        for _ in 0..3 {
            pool.give(vec![1; len]);
        }
        assert_eq!(pool.lists[0].buffers.len(), 2);
        for extra in 1..=MAX_LENGTHS {
            pool.give(vec![0; extra]);
        }
        assert_eq!(pool.lists.len(), MAX_LENGTHS);
        assert!(pool.lists.iter().all(|l| l.buffers.iter().all(|b| b.len() == l.len)));
    }

    #[test]
    fn a_merged_commands_buffers_are_taken_again_whatever_their_length() {
        let mut pool = BufferPool::default();
        let parts = |n: usize| (0..n).map(|i| (vec![i as u8; 4096], vec![i as u8; 64])).collect::<Vec<_>>();
        let (data, metadata) = pool.join(parts(8), 8 * 4096, 8 * 64);
        assert_eq!((data[4096], metadata[64], data.len()), (1, 1, 8 * 4096));
        let address = data.as_ptr();
        pool.give_joined(data, metadata);
        let (data, metadata) = pool.join(parts(3), 3 * 4096, 3 * 64);
        assert_eq!((data.as_ptr(), data.len(), metadata.len()), (address, 3 * 4096, 3 * 64));
        assert_eq!((data[2 * 4096], metadata[2 * 64]), (2, 2), "the parts, not what was there before");
        // Bounded: buffers beyond MAX_JOINED_BYTES are freed.
        for _ in 0..=MAX_JOINED_BYTES / (1 << 20) {
            pool.give_joined(vec![0; 1 << 20], Vec::new());
        }
        assert!(pool.joined_data.capacity_bytes <= MAX_JOINED_BYTES);
        assert!(pool.joined_metadata.buffers.len() <= 1, "empty buffers are not kept");
    }

    /// A merged command takes a kept buffer large enough for it before a smaller one
    /// (which it would have to grow: an allocation).
    #[test]
    fn a_merged_command_takes_a_buffer_with_room_first() {
        let mut pool = BufferPool::bounded(1 << 20, 1 << 20);
        let large = Vec::with_capacity(8 * 4096);
        let address = large.as_ptr();
        pool.give_joined(large, Vec::new());
        pool.give_joined(Vec::with_capacity(4096), Vec::new());
        let parts = (0..8).map(|i| (vec![i as u8; 4096], Vec::new()));
        let (data, _) = pool.join(parts, 8 * 4096, 0);
        assert_eq!((data.as_ptr(), data.len()), (address, 8 * 4096));
    }

    #[test]
    fn a_buffer_cut_down_from_a_larger_one_is_not_kept() {
        let mut pool = BufferPool::default();
        let mut cut = vec![0u8; 64 * 4096];
        cut.truncate(4096);
        pool.give(cut);
        assert!(pool.lists.iter().all(|l| l.buffers.is_empty()), "its capacity would be outside the bound");
        pool.give(vec![0u8; 4096]);
        assert_eq!(pool.lists.iter().map(|l| l.buffers.len()).sum::<usize>(), 1);
    }
}
