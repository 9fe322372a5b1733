//! A rebuild job: the CPU-heavy part of rebuilding one chunk, cut loose from the engine so
//! that a driver can run it on another core (ScalaRAID's point: every core serves the
//! array). The engine gathers a chunk position's sources as the drives return them and
//! makes a `RebuildJob` of them; `RebuildJob::run` checks every source block (its metadata
//! decodes, its CRC32C covers its data), rebuilds the lost chunk's data and its blocks'
//! (LBA, timestamp) fields with the parity codec, and encodes the rebuilt blocks'
//! metadata; the engine takes the `RebuildJobDone` back (`Engine::on_rebuild_jobs_done`),
//! makes the footer entries and writes the chunk.
//!
//! A job owns what it touches: the reads it takes its sources from (shared, read-only), the
//! codec (shared, read-only) and the buffers it fills (taken from the rebuild's pool by the
//! engine, and given back with the result). It holds no reference into the engine, so it
//! is `Send` and runs anywhere, in any order with other jobs; its result depends on its
//! inputs alone (a run on another thread gives the same bytes).
//!
//! Invariants: a source with a block that does not check is left out, never used; a
//! stripe left with fewer sources than the codec needs gives no chunk (`rebuilt: None`),
//! never wrong data; a job of a rebuild that has stopped is dropped by the engine when it
//! comes back, its buffers with it.

use std::sync::Arc;

use crate::engine::state::rebuild::JobSource;
use crate::format::{decode_fields, field_bytes, BlockKind, BlockMetadata, FIELD_BYTES, MAX_DRIVES};
use crate::parity::{shard_slices_mut, ParityCodec};

/// Bytes of a data CRC32C in a source's checked buffer.
const CRC_BYTES: usize = 4;
/// Bytes a source's checked buffer takes per block: its fields, then its data CRC32C.
pub(super) const CHECKED_BYTES_PER_BLOCK: usize = FIELD_BYTES + CRC_BYTES;

/// The shape of the chunk a job rebuilds.
#[derive(Clone, Copy, Debug)]
pub(in crate::engine) struct JobShape {
    /// Chunks of the stripe (k + m), of which `data_chunks` hold data.
    pub(in crate::engine) chunks: usize,
    pub(in crate::engine) data_chunks: usize,
    /// The stripe's chunk to rebuild.
    pub(in crate::engine) lost: usize,
    pub(in crate::engine) chunk_blocks: usize,
    pub(in crate::engine) block_bytes: usize,
    pub(in crate::engine) meta_bytes: usize,
    /// The segment's sequence number, in every block's metadata.
    pub(in crate::engine) sequence: u64,
    /// CRC32C of a zero block (`checksum::xor_of_crcs`).
    pub(in crate::engine) zero_block_crc: u32,
}

/// The work of rebuilding one chunk of the drive being rebuilt (module doc).
pub struct RebuildJob {
    /// Which rebuild, segment and chunk position it is for.
    pub(in crate::engine) rebuild: u64,
    pub(in crate::engine) zone: u32,
    pub(in crate::engine) position: u64,
    pub(in crate::engine) shape: JobShape,
    pub(in crate::engine) codec: Arc<ParityCodec>,
    /// By chunk of the stripe, its source, if it was read whole (the lost chunk has none).
    pub(in crate::engine) sources: Vec<Option<JobSource>>,
    /// Pooled buffers to fill: the rebuilt data (a chunk), its fields (`FIELD_BYTES` per
    /// block), its metadata (a chunk's), and per source its checked fields and CRCs.
    pub(in crate::engine) data: Vec<u8>,
    pub(in crate::engine) fields: Vec<u8>,
    pub(in crate::engine) metadata: Vec<u8>,
    pub(in crate::engine) checked: Vec<Vec<u8>>,
}

/// A job's result, for the engine (`Engine::on_rebuild_jobs_done`).
pub struct RebuildJobDone {
    pub(in crate::engine) rebuild: u64,
    pub(in crate::engine) zone: u32,
    pub(in crate::engine) position: u64,
    /// The rebuilt chunk's data, metadata and fields, and the stripe ID its blocks carry;
    /// None if the stripe cannot give it back (too many sources missing or damaged).
    pub(in crate::engine) rebuilt: Option<Rebuilt>,
    /// Buffers of the rebuild's pool to give back, and the reads the sources came from.
    pub(in crate::engine) spent: Vec<Vec<u8>>,
    pub(in crate::engine) reads: Vec<Arc<Vec<u8>>>,
}

pub(in crate::engine) struct Rebuilt {
    pub(in crate::engine) data: Vec<u8>,
    pub(in crate::engine) metadata: Vec<u8>,
    pub(in crate::engine) fields: Vec<u8>,
    pub(in crate::engine) stripe_id: u32,
}

impl RebuildJob {
    /// Blocks of the sources it checks: what its cost grows with (`cpu_cost`).
    pub fn source_blocks(&self) -> u64 {
        (self.sources.iter().flatten().count() * self.shape.chunk_blocks) as u64
    }

    /// Does the work (module doc). Pure: the same job gives the same result anywhere.
    pub fn run(self) -> RebuildJobDone {
        let RebuildJob { rebuild, zone, position, shape, codec, sources, mut data, mut fields, mut metadata, checked } =
            self;
        let mut spent = Vec::with_capacity(checked.len() + 3);
        // Each source checked, every block of it: a damaged one is left out.
        let mut checked = checked.into_iter();
        let mut kept: Vec<Option<(Vec<u8>, u32)>> = Vec::with_capacity(shape.chunks);
        for source in &sources {
            let entry = source.as_ref().and_then(|source| {
                let mut buffer = checked.next().expect("a checked buffer per source");
                match check_source(source, &shape, &mut buffer) {
                    Some(stripe_id) => Some((buffer, stripe_id)),
                    None => {
                        spent.push(buffer);
                        None
                    }
                }
            });
            kept.push(entry);
        }
        let intact: Vec<Option<(&JobSource, &[u8], u32)>> = sources
            .iter()
            .zip(&kept)
            .map(|(source, kept)| Some((source.as_ref()?, kept.as_ref()?.0.as_slice(), kept.as_ref()?.1)))
            .collect();
        let rebuilt = rebuild_chunk(&shape, &codec, &intact, &mut data, &mut fields, &mut metadata);
        drop(intact);
        spent.extend(kept.into_iter().flatten().map(|(buffer, _)| buffer));
        let reads = sources.into_iter().flatten().flat_map(|s| [s.data, s.metadata]).collect();
        let rebuilt = match rebuilt {
            Some(stripe_id) => Some(Rebuilt { data, metadata, fields, stripe_id }),
            None => {
                spent.extend([data, metadata, fields]);
                None
            }
        };
        RebuildJobDone { rebuild, zone, position, rebuilt, spent, reads }
    }
}

/// Checks every block of `source` (its metadata decodes and its checksum covers its data,
/// each block's CRC32C computed here, once), writing its blocks' fields, then their data
/// CRC32Cs, into `checked`. The stripe ID its blocks carry, or None if one is damaged.
fn check_source(source: &JobSource, shape: &JobShape, checked: &mut [u8]) -> Option<u32> {
    let (bs, ms, cb) = (shape.block_bytes, shape.meta_bytes, shape.chunk_blocks);
    let data = source.data.get(source.data_offset..source.data_offset + cb * bs)?;
    let metadata = source.metadata.get(source.metadata_offset..source.metadata_offset + cb * ms)?;
    let (fields, crcs) = checked.get_mut(..cb * CHECKED_BYTES_PER_BLOCK)?.split_at_mut(cb * FIELD_BYTES);
    let mut stripe_id = None;
    let pieces = data.chunks_exact(bs).zip(metadata.chunks_exact(ms));
    for (((block, meta), field), crc) in
        pieces.zip(fields.chunks_exact_mut(FIELD_BYTES)).zip(crcs.chunks_exact_mut(CRC_BYTES))
    {
        let (m, _, data_crc) = BlockMetadata::decode_with_data_crc(block, meta).ok()?;
        stripe_id.get_or_insert(m.stripe_id.get());
        field.copy_from_slice(&field_bytes(m.lba.get(), m.timestamp.get()));
        crc.copy_from_slice(&data_crc.to_le_bytes());
    }
    stripe_id
}

/// Block `block`'s data CRC32C in a checked buffer of `blocks` blocks.
fn checked_crc(checked: &[u8], blocks: usize, block: usize) -> u32 {
    let at = blocks * FIELD_BYTES + block * CRC_BYTES;
    let mut bytes = [0u8; CRC_BYTES];
    bytes.copy_from_slice(&checked[at..at + CRC_BYTES]);
    u32::from_le_bytes(bytes)
}

/// Rebuilds the lost chunk from the intact sources into `data`, `fields` and `metadata`:
/// the stripe ID its blocks carry, or None if the sources do not suffice.
fn rebuild_chunk(
    shape: &JobShape,
    codec: &ParityCodec,
    intact: &[Option<(&JobSource, &[u8], u32)>],
    data: &mut [u8],
    fields: &mut [u8],
    metadata: &mut [u8],
) -> Option<u32> {
    let (n, cb, bs, ms) = (shape.chunks, shape.chunk_blocks, shape.block_bytes, shape.meta_bytes);
    debug_assert!(intact[shape.lost].is_none(), "the chunk to rebuild is not a source");
    let stripe_id = intact.iter().flatten().next().map(|(_, _, id)| *id)?;
    // One output per missing chunk, in chunk order (`reconstruct_into`): the lost one, and
    // any whose source was left out (more than one missing: Reed-Solomon only). The extra
    // outputs are rare (a damaged source) and not pooled.
    let missing = intact.iter().filter(|s| s.is_none()).count();
    let lost_at = intact[..shape.lost].iter().filter(|s| s.is_none()).count();
    let mut extra_data: Vec<Vec<u8>> = (1..missing).map(|_| vec![0; cb * bs]).collect();
    let mut extra_fields: Vec<Vec<u8>> = (1..missing).map(|_| vec![0; cb * FIELD_BYTES]).collect();
    let mut source_data: [Option<&[u8]>; MAX_DRIVES] = [None; MAX_DRIVES];
    let mut source_fields: [Option<&[u8]>; MAX_DRIVES] = [None; MAX_DRIVES];
    for ((d, f), source) in source_data.iter_mut().zip(source_fields.iter_mut()).zip(intact) {
        if let Some((s, checked, _)) = source {
            *d = Some(&s.data[s.data_offset..s.data_offset + cb * bs]);
            *f = Some(&checked[..cb * FIELD_BYTES]);
        }
    }
    codec.reconstruct_into(&source_data[..n], &mut outputs(&mut extra_data, lost_at, data)[..missing]).ok()?;
    codec.reconstruct_into(&source_fields[..n], &mut outputs(&mut extra_fields, lost_at, fields)[..missing]).ok()?;
    let mut crcs = [None; MAX_DRIVES];
    for o in 0..cb {
        let (lba, timestamp) = decode_fields(&fields[o * FIELD_BYTES..])?;
        let kind = if shape.lost < shape.data_chunks { BlockKind::of_data_lba(lba) } else { BlockKind::Parity };
        let block = &data[o * bs..(o + 1) * bs];
        for (crc, source) in crcs.iter_mut().zip(intact) {
            *crc = source.map(|(_, checked, _)| checked_crc(checked, cb, o));
        }
        // A block rebuilt by XOR or copied has the checksum its sources give, which were
        // verified as they were checked: its data is not read again for it.
        let data_crc = codec
            .rebuilt_block_crc(shape.lost, &crcs[..n], shape.zero_block_crc)
            .unwrap_or_else(|| crate::crc::crc32c(block));
        debug_assert_eq!(data_crc, crate::crc::crc32c(block), "a rebuilt block's derived checksum");
        BlockMetadata::new(lba, timestamp, stripe_id, shape.sequence, kind)
            .encode_with_data_crc(data_crc, &mut metadata[o * ms..(o + 1) * ms]);
    }
    Some(stripe_id)
}

/// The codec's outputs in chunk order: `extra` (the other missing chunks') with `lost`
/// at `lost_at` among them.
fn outputs<'a>(extra: &'a mut [Vec<u8>], lost_at: usize, lost: &'a mut [u8]) -> [&'a mut [u8]; MAX_DRIVES] {
    let (before, after) = extra.split_at_mut(lost_at.min(extra.len()));
    let before = before.iter_mut().map(Vec::as_mut_slice);
    let after = after.iter_mut().map(Vec::as_mut_slice);
    shard_slices_mut(before.chain(std::iter::once(lost)).chain(after))
}
