//! A chunk of the drive being rebuilt, reconstructed from its stripe's other chunks as read
//! (`rebuild`): the data, and the blocks' (LBA, timestamp) fields from the parity the
//! parity blocks' metadata carries, from which its blocks' metadata and footer entries
//! are made. A source chunk with a damaged block is left out; a stripe that lost more
//! than parity covers gives a chunk whose metadata does not decode (`unrecoverable_chunk`).

use std::sync::Arc;

use crate::engine::machine::Engine;
use crate::engine::state::rebuild::{ChunkSources, SourceChunk, CRC_BYTES};
use crate::format::{decode_fields, field_bytes, BlockKind, BlockMetadata, FooterEntry, FIELD_BYTES, MAX_DRIVES};
use crate::parity::shard_slices_mut;
use crate::pool::BufferPool;

impl Engine {
    /// Rebuilds one chunk of the new drive from the stripe's other chunks: data and the
    /// blocks' (LBA, timestamp) fields, then their metadata and footer entries. The chunk
    /// goes into a pooled buffer, and the sources' buffers back to the pool.
    pub(super) fn reconstruct_chunk(&mut self, zone: u32, position: u64, sources: ChunkSources) {
        let drive = self.rebuild_lane(zone);
        let seg = self.seg(zone);
        let (layout, sequence) = (seg.layout, seg.sequence);
        let (n, k, cb) = (layout.drives(), layout.data_chunks, layout.chunk_blocks as usize);
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let (chunk_bytes, fields_bytes) = (cb * bs, cb * FIELD_BYTES);
        let number = sources.stripe_number;
        let lost = layout.chunk_on(number, drive);
        // By chunk of the stripe: the sources read intact (every block of each was checked
        // as it arrived: `check_source_chunk`).
        let mut by_chunk: [Option<&SourceChunk>; MAX_DRIVES] = [None; MAX_DRIVES];
        for (source, shard) in sources.shards.iter().enumerate() {
            if let Some(shard) = shard {
                by_chunk[layout.chunk_on(number, source)] = Some(shard);
            }
        }
        let by_chunk = &by_chunk[..n];
        debug_assert!(by_chunk[lost].is_none(), "the chunk to rebuild is not a source");
        let stripe_id = by_chunk.iter().flatten().next().map(|s| s.stripe_id);
        // One output per missing chunk, in chunk order (`reconstruct_into`): the lost one,
        // and any whose source was left out (more than one missing: Reed-Solomon only).
        let missing = by_chunk.iter().filter(|s| s.is_none()).count();
        let mut data_out: Vec<Vec<u8>> = (0..missing).map(|_| self.rebuild_buffers().take(chunk_bytes)).collect();
        let mut fields_out: Vec<Vec<u8>> = (0..missing).map(|_| self.rebuild_buffers().take(fields_bytes)).collect();
        let rebuilt = {
            let mut data: [Option<&[u8]>; MAX_DRIVES] = [None; MAX_DRIVES];
            let mut fields: [Option<&[u8]>; MAX_DRIVES] = [None; MAX_DRIVES];
            for ((data, fields), source) in data.iter_mut().zip(fields.iter_mut()).zip(by_chunk) {
                *data = source.map(|s| &s.read[s.offset..s.offset + chunk_bytes]);
                *fields = source.map(SourceChunk::fields);
            }
            let mut data_slices = shard_slices_mut(data_out.iter_mut().map(Vec::as_mut_slice));
            let mut field_slices = shard_slices_mut(fields_out.iter_mut().map(Vec::as_mut_slice));
            self.codec
                .reconstruct_into(&data[..n], &mut data_slices[..missing])
                .and_then(|()| self.codec.reconstruct_into(&fields[..n], &mut field_slices[..missing]))
        };
        let lost_at = by_chunk[..lost].iter().filter(|s| s.is_none()).count();
        let (data, fields) = (data_out.swap_remove(lost_at), fields_out.swap_remove(lost_at));
        for buffer in data_out.into_iter().chain(fields_out) {
            self.rebuild_buffers().give(buffer);
        }
        let (Ok(()), Some(stripe_id)) = (rebuilt, stripe_id) else {
            self.rebuild_buffers().give(data);
            self.rebuild_buffers().give(fields);
            self.give_sources_back(sources);
            return self.unrecoverable_chunk(zone, position);
        };
        let mut metadata = self.rebuild_buffers().take(cb * ms);
        let mut crcs = [None; MAX_DRIVES];
        for o in 0..cb {
            let (lba, timestamp) = decode_fields(&fields[o * FIELD_BYTES..]).expect("a block's fields");
            let kind = if lost < k { BlockKind::of_data_lba(lba) } else { BlockKind::Parity };
            let block = &data[o * bs..(o + 1) * bs];
            for (crc, shard) in crcs.iter_mut().zip(by_chunk) {
                *crc = shard.map(|s| s.data_crc(o));
            }
            // A block rebuilt by XOR or copied has the checksum its sources' give, which
            // were verified as they arrived: its data is not read again for it.
            let data_crc = self
                .codec
                .rebuilt_block_crc(lost, &crcs[..n], self.zero_block_crc)
                .unwrap_or_else(|| crate::crc::crc32c(block));
            debug_assert_eq!(data_crc, crate::crc::crc32c(block), "a rebuilt block's derived checksum");
            BlockMetadata::new(lba, timestamp, stripe_id, sequence, kind)
                .encode_with_data_crc(data_crc, &mut metadata[o * ms..(o + 1) * ms]);
            self.zone_rebuild(zone).footer[position as usize * cb + o] = FooterEntry {
                lba: lba.into(),
                timestamp: timestamp.into(),
                stripe_id: stripe_id.into(),
                reserved: 0.into(),
            };
        }
        self.rebuild_buffers().give(fields);
        self.give_sources_back(sources);
        self.zone_rebuild(zone).ready.insert(position, (data, metadata));
    }

    /// The sources' buffers go back to the pool, their reads' once no chunk uses them.
    fn give_sources_back(&mut self, sources: ChunkSources) {
        for shard in sources.shards.into_iter().flatten() {
            self.rebuild_buffers().give(shard.checked);
            self.give_read_back(shard.read);
        }
    }
}
/// A chunk read back from a source drive, checked: every block's metadata decodes and its
/// checksum covers the block's data (each block's CRC32C computed here, once). The chunk is
/// `chunk_bytes` of `read` from `offset`, with its blocks' `metadata`; what is kept of it
/// goes into a buffer of `pool`'s. None if a block is damaged: the chunk is not used as a
/// source.
pub(super) fn check_source_chunk(
    read: &Arc<Vec<u8>>,
    offset: usize,
    chunk_bytes: usize,
    metadata: &[u8],
    (block_bytes, meta_bytes): (usize, usize),
    pool: &mut BufferPool,
) -> Option<SourceChunk> {
    let data = read.get(offset..offset + chunk_bytes)?;
    let blocks = chunk_bytes / block_bytes.max(1);
    let mut checked = pool.take(blocks * (FIELD_BYTES + CRC_BYTES));
    let (fields, crcs) = checked.split_at_mut(blocks * FIELD_BYTES);
    let mut stripe_id = None;
    let mut decoded = 0;
    let pieces = data.chunks_exact(block_bytes).zip(metadata.chunks_exact(meta_bytes));
    for (((block, meta), field), crc) in
        pieces.zip(fields.chunks_exact_mut(FIELD_BYTES)).zip(crcs.chunks_exact_mut(CRC_BYTES))
    {
        let Ok((m, _, data_crc)) = BlockMetadata::decode_with_data_crc(block, meta) else { break };
        stripe_id.get_or_insert(m.stripe_id.get());
        field.copy_from_slice(&field_bytes(m.lba.get(), m.timestamp.get()));
        crc.copy_from_slice(&data_crc.to_le_bytes());
        decoded += 1;
    }
    match stripe_id.filter(|_| decoded == blocks) {
        Some(stripe_id) => Some(SourceChunk { read: Arc::clone(read), offset, checked, blocks, stripe_id }),
        None => {
            pool.give(checked);
            None
        }
    }
}
