//! A chunk of the drive being rebuilt, reconstructed from its stripe's other chunks as read
//! (`rebuild`): the data, and the blocks' (LBA, timestamp) fields from the parity the
//! parity blocks' metadata carries, from which its blocks' metadata and footer entries
//! are made. A source chunk with a damaged block is left out; a stripe that lost more
//! than parity covers gives a chunk whose metadata does not decode (`unrecoverable_chunk`).

use crate::engine::machine::Engine;
use crate::engine::state::rebuild::ChunkSources;
use crate::format::{BlockKind, BlockMetadata, FooterEntry, FIELD_BYTES};

impl Engine {
    /// Rebuilds one chunk of the new drive from the stripe's other chunks: data and the
    /// blocks' (LBA, timestamp) fields, then their metadata and footer entries.
    pub(super) fn reconstruct_chunk(&mut self, zone: u32, position: u64, sources: ChunkSources) {
        let drive = self.rebuild_lane(zone);
        let seg = self.seg(zone);
        let (layout, sequence) = (seg.layout, seg.sequence);
        let (n, k, cb) = (layout.drives(), layout.data_chunks, layout.chunk_blocks as usize);
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let number = sources.stripe_number;
        let mut data_shards: Vec<Option<Vec<u8>>> = vec![None; n];
        let mut field_shards: Vec<Option<Vec<u8>>> = vec![None; n];
        let mut stripe_id = None;
        for (source, shard) in sources.shards.into_iter().enumerate() {
            let Some((data, metadata)) = shard else { continue };
            // Sources were checked to decode when read; one that does not is left out.
            let decoded: Option<Vec<BlockMetadata>> = (0..cb)
                .map(|o| BlockMetadata::decode(&data[o * bs..(o + 1) * bs], &metadata[o * ms..(o + 1) * ms]).ok())
                .map(|m| m.map(|(m, _)| m))
                .collect();
            let Some(decoded) = decoded else { continue };
            let mut fields = Vec::with_capacity(FIELD_BYTES * cb);
            for m in &decoded {
                stripe_id.get_or_insert(m.stripe_id.get());
                fields.extend_from_slice(&m.lba.get().to_le_bytes());
                fields.extend_from_slice(&m.timestamp.get().to_le_bytes());
            }
            let chunk = layout.chunk_on(number, source);
            data_shards[chunk] = Some(data);
            field_shards[chunk] = Some(fields);
        }
        let lost = layout.chunk_on(number, drive);
        let rebuilt = self.codec.reconstruct(&mut data_shards).and_then(|()| self.codec.reconstruct(&mut field_shards));
        let (Ok(()), Some(stripe_id)) = (rebuilt, stripe_id) else {
            return self.unrecoverable_chunk(zone, position);
        };
        let data = data_shards[lost].take().expect("reconstructed");
        let fields = field_shards[lost].take().expect("reconstructed");
        let mut metadata = vec![0u8; cb * ms];
        for o in 0..cb {
            let field = &fields[o * FIELD_BYTES..(o + 1) * FIELD_BYTES];
            let lba = u64::from_le_bytes(field[..8].try_into().expect("8 bytes"));
            let timestamp = u64::from_le_bytes(field[8..].try_into().expect("8 bytes"));
            let kind = if lost < k { BlockKind::of_data_lba(lba) } else { BlockKind::Parity };
            BlockMetadata::new(lba, timestamp, stripe_id, sequence, kind)
                .encode(&data[o * bs..(o + 1) * bs], &mut metadata[o * ms..(o + 1) * ms]);
            self.zone_rebuild(zone).footer[position as usize * cb + o] = FooterEntry {
                lba: lba.into(),
                timestamp: timestamp.into(),
                stripe_id: stripe_id.into(),
                reserved: 0.into(),
            };
        }
        self.zone_rebuild(zone).ready.insert(position, (data, metadata));
    }
}

/// Whether every block of a chunk read back decodes (checksum, magic): a chunk with a
/// damaged block is not used as a source.
pub(super) fn chunk_blocks_decode(data: &[u8], metadata: &[u8], block_bytes: usize, meta_bytes: usize) -> bool {
    data.chunks_exact(block_bytes)
        .zip(metadata.chunks_exact(meta_bytes))
        .all(|(block, meta)| BlockMetadata::decode(block, meta).is_ok())
}
