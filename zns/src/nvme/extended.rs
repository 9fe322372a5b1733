//! Namespaces whose metadata is interleaved with data (extended LBAs: `flbas` bit 4 set),
//! as NVMe over Fabrics carries it: a transfer of n blocks is one buffer of n times
//! (block + metadata) bytes, each block's metadata right after its data, and no separate
//! metadata buffer (the fabrics transports have none; `docs/manual/remote-drives.md`).
//! The device keeps its callers' separate data and metadata buffers: a command's are
//! interleaved into one buffer on the way out and split back on the way in.
//!
//! Invariants: an interleaved buffer holds exactly `blocks x (block + metadata)` bytes;
//! a caller that gives no metadata writes zeros in its place and reads none back.

/// Data and metadata of `blocks` blocks of `block_bytes` + `metadata_bytes` as one
/// interleaved buffer. `metadata` may be empty (zeros are written in its place).
pub(super) fn interleave(
    data: &[u8],
    metadata: &[u8],
    blocks: usize,
    block_bytes: usize,
    metadata_bytes: usize,
) -> Vec<u8> {
    debug_assert_eq!(data.len(), blocks * block_bytes);
    debug_assert!(metadata.is_empty() || metadata.len() == blocks * metadata_bytes);
    let stride = block_bytes + metadata_bytes;
    let mut out = vec![0u8; blocks * stride];
    for (i, slot) in out.chunks_exact_mut(stride).enumerate() {
        slot[..block_bytes].copy_from_slice(&data[i * block_bytes..(i + 1) * block_bytes]);
        if !metadata.is_empty() {
            slot[block_bytes..].copy_from_slice(&metadata[i * metadata_bytes..(i + 1) * metadata_bytes]);
        }
    }
    out
}

/// Splits an interleaved buffer back into `data` and `metadata` (left alone if empty).
pub(super) fn split_interleaved(
    interleaved: &[u8],
    data: &mut [u8],
    metadata: &mut [u8],
    block_bytes: usize,
    metadata_bytes: usize,
) {
    let stride = block_bytes + metadata_bytes;
    debug_assert_eq!(interleaved.len() % stride, 0);
    for (i, slot) in interleaved.chunks_exact(stride).enumerate() {
        data[i * block_bytes..(i + 1) * block_bytes].copy_from_slice(&slot[..block_bytes]);
        if !metadata.is_empty() {
            metadata[i * metadata_bytes..(i + 1) * metadata_bytes].copy_from_slice(&slot[block_bytes..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_blocks_split_back_into_data_and_metadata() {
        let (blocks, bs, ms) = (3, 8, 2);
        let data: Vec<u8> = (0..(blocks * bs) as u8).collect();
        let metadata: Vec<u8> = (100..100 + (blocks * ms) as u8).collect();
        let out = interleave(&data, &metadata, blocks, bs, ms);
        assert_eq!(&out[..bs], &data[..bs]);
        assert_eq!(&out[bs..bs + ms], &metadata[..ms]);
        assert_eq!(&out[bs + ms..2 * bs + ms], &data[bs..2 * bs]);
        let (mut d, mut m) = (vec![0; data.len()], vec![0; metadata.len()]);
        split_interleaved(&out, &mut d, &mut m, bs, ms);
        assert_eq!((d, m), (data.clone(), metadata));
        // No metadata given: zeros written, none read back.
        let out = interleave(&data, &[], blocks, bs, ms);
        assert!(out.chunks_exact(bs + ms).all(|slot| slot[bs..].iter().all(|b| *b == 0)));
        let mut d = vec![0; data.len()];
        split_interleaved(&out, &mut d, &mut [], bs, ms);
        assert_eq!(d, data);
    }
}
