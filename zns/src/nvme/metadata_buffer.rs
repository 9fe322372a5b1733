//! A passthrough command's separate metadata buffer (`MetadataBuffer`): page-aligned, at
//! most a page, its storage reused from command to command.
//!
//! Invariant: a buffer never crosses a memory page boundary (see `MetadataBuffer`).

use super::command::MEMORY_PAGE_BYTES;
use super::RING_ENTRIES;

/// Storage of every `MetadataBuffer` of at most a page: the page and the room to align it.
/// Reused from command to command (`NvmeDrive::spare_metadata`), so a command allocates
/// no metadata buffer in steady state.
pub(super) const POOLED_METADATA_STORAGE_BYTES: usize = 2 * MEMORY_PAGE_BYTES as usize;

/// A metadata buffer that does not cross a memory page boundary. NVMe PCIe passes
/// metadata as one contiguous region (MPTR), and the kernel maps a passthrough
/// command's metadata as one integrity segment: a user buffer that spans two pages needs
/// two, which the kernel must bounce or refuse. Page-aligned and at most one page long
/// (the transfer limit sees to that), it never does.
pub(super) struct MetadataBuffer {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl MetadataBuffer {
    /// No metadata at all, allocating nothing: for commands that move no blocks.
    pub(super) fn none() -> Self {
        MetadataBuffer { storage: Vec::new(), start: 0, len: 0 }
    }

    /// A buffer of `len` bytes with unspecified contents, in storage from `spare` when it
    /// has some (every buffer of at most a page has storage of `POOLED_METADATA_STORAGE_BYTES`).
    pub(super) fn new(len: usize, spare: &mut Vec<Vec<u8>>) -> Self {
        // Longer than a page only with more metadata per block than a page, which the
        // transfer limit allows as one block: then it cannot help crossing.
        let page = MEMORY_PAGE_BYTES as usize;
        let storage_len = len.max(page) + page;
        let pooled = (storage_len == POOLED_METADATA_STORAGE_BYTES).then(|| spare.pop()).flatten();
        let storage = pooled.unwrap_or_else(|| vec![0u8; storage_len]);
        debug_assert_eq!(storage.len(), storage_len, "spare storage is of the pooled size");
        let start = (page - storage.as_ptr() as usize % page) % page;
        MetadataBuffer { storage, start, len }
    }

    /// The buffer for a data command of `blocks` blocks: a copy of the caller's metadata,
    /// or zeros when the caller gave none (`per_block` bytes a block, maybe 0).
    pub(super) fn for_command(caller: &[u8], blocks: u64, per_block: usize, spare: &mut Vec<Vec<u8>>) -> Self {
        if caller.is_empty() {
            let mut buffer = Self::new(blocks as usize * per_block, spare);
            buffer.as_mut().fill(0);
            return buffer;
        }
        let mut buffer = Self::new(caller.len(), spare);
        buffer.as_mut().copy_from_slice(caller);
        buffer
    }

    /// Gives the storage back to `spare` for the next command, if it is of the pooled
    /// size and the pool has room.
    pub(super) fn recycle(self, spare: &mut Vec<Vec<u8>>) {
        if self.storage.len() == POOLED_METADATA_STORAGE_BYTES && spare.len() < RING_ENTRIES as usize {
            spare.push(self.storage);
        }
    }

    pub(super) fn as_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }

    pub(super) fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }
}
