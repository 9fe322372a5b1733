//! Block checksums a frontend computes on its own thread.
//!
//! Every block's metadata carries CRC32C(data ‖ metadata fields) (`format::BlockMetadata`).
//! The CRC of the data is most of that cost (a 4 KiB block is hundreds of nanoseconds
//! where the rest of a write is about a microsecond), and nothing about it needs the
//! engine: a frontend with threads of its own (the ublk queues) computes it where the data
//! arrives and hands it over with the write (`Request::WriteWithChecksums`), and the
//! engine thread only folds in the metadata fields.
//!
//! Parity blocks need no pass over their data either where the code is XOR or a copy:
//! CRC32C is affine over GF(2), so the CRC of an XOR of n equal-length blocks is the XOR
//! of their CRCs, plus the CRC of a zero block when n is even (`xor_of_crcs`).
//!
//! Invariant: a `BlockChecksums` holds one CRC per block of the data it came with; the
//! engine checks the count at submission and, in debug builds, every value.

use crate::error::{Error, Result};
use crate::format::BlockMetadata;

/// CRC32C of each block of a write's data, in order. One block's CRC is kept inline, so a
/// one-block write costs no allocation for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockChecksums {
    /// Block 0's CRC32C (None: no block), then the others'.
    first: Option<u32>,
    rest: Vec<u32>,
}

impl BlockChecksums {
    /// The CRC32C of each `block_bytes` block of `data` (whole blocks; a partial tail is
    /// left out, and the engine refuses the write for it).
    pub fn of(data: &[u8], block_bytes: usize) -> BlockChecksums {
        assert!(block_bytes > 0, "blocks have bytes");
        Self::from_crcs(data.chunks_exact(block_bytes).map(crate::crc::crc32c))
    }

    /// CRCs given in order, one per block (a share of another write's: `shard`).
    pub fn from_crcs(crcs: impl IntoIterator<Item = u32>) -> BlockChecksums {
        let mut crcs = crcs.into_iter();
        BlockChecksums { first: crcs.next(), rest: crcs.collect() }
    }

    /// Blocks it holds a CRC for.
    pub fn blocks(&self) -> usize {
        self.first.map_or(0, |_| 1 + self.rest.len())
    }

    /// Block `i`'s CRC32C.
    pub fn get(&self, i: usize) -> u32 {
        assert!(i < self.blocks(), "block {i} of {}", self.blocks());
        match (i, self.first) {
            (0, Some(first)) => first,
            _ => self.rest[i - 1],
        }
    }

    /// Whether it fits `data` of `block_bytes` blocks (count, and in debug builds every
    /// value), so a frontend's mistake fails the request instead of landing on a drive.
    pub(crate) fn check(&self, data: &[u8], block_bytes: usize) -> Result<()> {
        let blocks = data.len() / block_bytes;
        if self.blocks() != blocks {
            let reason = format!("{} block checksums for a write of {blocks} blocks", self.blocks());
            return Err(Error::InvalidConfig { reason });
        }
        if cfg!(debug_assertions) {
            for (i, block) in data.chunks_exact(block_bytes).enumerate() {
                if crate::crc::crc32c(block) != self.get(i) {
                    let reason = format!("the frontend's checksum of block {i} does not match its data");
                    return Err(Error::InvalidConfig { reason });
                }
            }
        }
        Ok(())
    }
}

/// What a frontend checks of a read's blocks (`Request::ReadUnverified`): the metadata
/// of each block read from a drive, whose checksum the engine left to it; None for a
/// block the engine made itself (zeros, or rebuilt from its stripe and checked there).
/// One block's is kept inline, so a one-block read costs no allocation for it.
#[derive(Clone, Debug)]
pub enum ReadChecks {
    One(Option<BlockMetadata>),
    Many(Vec<Option<BlockMetadata>>),
}

impl ReadChecks {
    /// Checks each block of `data` (`block_bytes` each) against its metadata: the index
    /// of the first block that fails (read it again with `Request::Read`, which rebuilds
    /// it from its stripe), or Ok.
    pub fn verify(&self, data: &[u8], block_bytes: usize) -> std::result::Result<(), usize> {
        let metadata = self.metadata();
        let failed = data
            .chunks_exact(block_bytes)
            .zip(metadata)
            .position(|(block, m)| m.as_ref().is_some_and(|m| !m.verifies(block)));
        match (failed, metadata.len() == data.len() / block_bytes) {
            (None, true) => Ok(()),
            (Some(block), _) => Err(block),
            (None, false) => Err(0),
        }
    }

    /// Blocks it covers.
    pub fn blocks(&self) -> usize {
        self.metadata().len()
    }

    /// Each block's metadata, or None for a block the engine made itself.
    pub(crate) fn metadata(&self) -> &[Option<BlockMetadata>] {
        match self {
            ReadChecks::One(metadata) => std::slice::from_ref(metadata),
            ReadChecks::Many(metadata) => metadata,
        }
    }
}

/// CRC32C of the XOR of `count` equal-length blocks whose CRC32Cs XOR to `xor_of_block_crcs`;
/// `zero_block_crc` is the CRC32C of a zero block of that length. CRC32C(x) = L(x) ^ c
/// with L linear and c = CRC32C(0…0): the c terms cancel in pairs.
pub fn xor_of_crcs(xor_of_block_crcs: u32, count: usize, zero_block_crc: u32) -> u32 {
    if count.is_multiple_of(2) {
        xor_of_block_crcs ^ zero_block_crc
    } else {
        xor_of_block_crcs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(seed: u64, len: usize) -> Vec<u8> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        (0..len).map(|_| rng.random::<u8>()).collect()
    }

    #[test]
    fn the_crc_of_an_xor_is_the_xor_of_the_crcs_for_any_count() {
        const LEN: usize = 4096;
        let zero = crc32c::crc32c(&[0u8; LEN]);
        for count in 1..=8 {
            let blocks: Vec<Vec<u8>> = (0..count).map(|i| block(i as u64 * 31 + 7, LEN)).collect();
            let mut xor = vec![0u8; LEN];
            blocks.iter().for_each(|b| xor.iter_mut().zip(b).for_each(|(x, y)| *x ^= y));
            let crcs = blocks.iter().fold(0, |acc, b| acc ^ crc32c::crc32c(b));
            assert_eq!(xor_of_crcs(crcs, count, zero), crc32c::crc32c(&xor), "{count} blocks");
        }
    }

    #[test]
    fn checksums_hold_one_crc_per_block_and_are_checked() {
        let data = block(3, 3 * 512);
        let sums = BlockChecksums::of(&data, 512);
        assert_eq!(sums.blocks(), 3);
        for i in 0..3 {
            assert_eq!(sums.get(i), crc32c::crc32c(&data[i * 512..(i + 1) * 512]));
        }
        assert!(sums.check(&data, 512).is_ok());
        assert!(sums.check(&data[..1024], 512).is_err(), "a count that does not fit fails");
        let mut other = data.clone();
        other[700] ^= 1;
        assert_eq!(sums.check(&other, 512).is_err(), cfg!(debug_assertions), "a wrong value fails in debug builds");
        assert_eq!(BlockChecksums::of(&[], 512).blocks(), 0);
    }
}
