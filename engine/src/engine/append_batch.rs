//! Merged chunk appends: the chunks one scheduling pass issues into a Zone Append segment
//! go out as one Zone Append per drive, not one per chunk (a 1 MiB write in 4 KiB chunks
//! is then a few commands per drive, not 85).
//!
//! Why this is allowed: a stripe puts one chunk on each drive, and every stripe of a group
//! lands inside the group's region (`schedule`), wherever the drive appends it; a chunk
//! of a merged command lands where the command's first block landed plus its index times
//! the chunk size, and the compact stripe table records it as it would a chunk appended
//! alone. Recovery reads each block's stripe id from its metadata, never the command it
//! came in.
//!
//! A command holds at most what the drive takes in one Zone Append (ZASL) and one
//! transfer (MDTS), in a count of blocks its granule allows (`Geometry::append_takes`). A
//! merged command's data is one buffer the chunks are copied into (the copy is cheaper
//! than a command), which comes back to the pool by capacity (`BufferPool::join`).
//! A merged command that fails fails each of its chunks, as the commands alone would.
//! `Config::merge_appends` off: one chunk per command, the paper's ZapRAID.
//!
//! Invariants: batches are empty between events (`flush_appends` runs at the end of every
//! scheduling pass that issued stripes); a batch never holds two chunks of one stripe.

use zapraid_zns::{Command, Completion};

use crate::drive_command::{append_chunks_at_most, chunks_per_append, DriveCommand};

use super::machine::{Engine, Op};
use super::schedule::landed_at;
use super::state::stripe::ChunkBuffers;

impl Engine {
    /// Stripe `number`'s chunk for `drive` in the Zone Append segment `seg_index` waits
    /// for the end of the pass; a batch of another segment, or a full one, goes first.
    pub(super) fn batch_append(&mut self, seg_index: u32, drive: usize, number: u64, chunk: ChunkBuffers) {
        let limit = match self.config.merge_appends {
            true => chunks_per_append(&self.geometry, self.seg(seg_index).layout.chunk_blocks) as usize,
            false => 1,
        };
        let batch = &self.append_batches[drive];
        if batch.segment.is_some_and(|s| s != seg_index) || batch.stripes.len() >= limit {
            self.flush_append(drive);
        }
        let batch = &mut self.append_batches[drive];
        debug_assert!(!batch.stripes.contains(&number), "one chunk per stripe and drive");
        batch.segment = Some(seg_index);
        batch.stripes.push(number);
        batch.chunks.push(chunk);
    }

    /// Sends every drive's batch.
    pub(super) fn flush_appends(&mut self) {
        for drive in 0..self.append_batches.len() {
            self.flush_append(drive);
        }
    }

    pub(super) fn appends_flushed(&self) -> bool {
        self.append_batches.iter().all(|b| b.is_empty())
    }

    /// Sends `drive`'s batch: as one command when the drive takes its size, else as the
    /// fewest commands it takes (a granule allows 8 or 16 blocks but not 13: 8 and 5).
    fn flush_append(&mut self, drive: usize) {
        let Some(seg_index) = self.append_batches[drive].segment.take() else { return };
        let chunk_blocks = self.seg(seg_index).layout.chunk_blocks;
        let zone_start_lba = self.geometry.zone_start_lba(self.seg(seg_index).zone);
        let mut stripes = std::mem::take(&mut self.append_batches[drive].stripes);
        let mut chunks = std::mem::take(&mut self.append_batches[drive].chunks);
        let mut first = 0;
        while first < stripes.len() {
            let left = (stripes.len() - first) as u64;
            let take = append_chunks_at_most(&self.geometry, chunk_blocks, left) as usize;
            debug_assert!(self.geometry.append_takes(take as u64 * chunk_blocks), "a command the drive takes");
            let (op, data, metadata) = if take == 1 {
                let ChunkBuffers { data, metadata } = &mut chunks[first];
                (Op::Chunk { stripe: stripes[first], drive }, std::mem::take(data), std::mem::take(metadata))
            } else {
                let part = &mut chunks[first..first + take];
                let data_bytes = part.iter().map(|c| c.data.len()).sum();
                let metadata_bytes = part.iter().map(|c| c.metadata.len()).sum();
                let parts = part.iter_mut().map(|c| (std::mem::take(&mut c.data), std::mem::take(&mut c.metadata)));
                let (data, metadata) = self.buffers.join(parts, data_bytes, metadata_bytes);
                (Op::Chunks { stripes: stripes[first..first + take].to_vec(), drive }, data, metadata)
            };
            let tag = self.new_tag(op);
            let command = Command::Append { zone_start_lba, data, metadata };
            self.commands.push_back(DriveCommand { drive, tag, command, delay_ns: 0 });
            first += take;
        }
        // The emptied vectors go back for the next batch (no allocation in steady state).
        stripes.clear();
        chunks.clear();
        let batch = &mut self.append_batches[drive];
        batch.stripes = stripes;
        batch.chunks = chunks;
    }

    /// A merged Zone Append completed: each of its chunks landed (or failed) as it would
    /// have alone. Whether anything else can have become possible (`chunk_done`).
    pub(super) fn chunks_done(&mut self, stripes: Vec<u64>, drive: usize, completion: Completion) -> bool {
        debug_assert!(stripes.len() > 1, "a single chunk goes as Op::Chunk");
        let Completion { result, data, metadata, .. } = completion;
        self.buffers.give_joined(data, metadata);
        let landed = landed_at(result);
        let first = *stripes.first().expect("a merged append holds chunks");
        let seg_index = self.stripes[&first].segment.expect("a stripe in flight was issued into a segment");
        let chunk_blocks = self.seg(seg_index).layout.chunk_blocks;
        let mut progress = false;
        for (i, number) in stripes.into_iter().enumerate() {
            progress |= self.chunk_landed(number, drive, landed.map(|lba| lba + i as u64 * chunk_blocks));
        }
        progress
    }
}
