//! Parity codes behind one interface: none (RAID-0), XOR (m = 1), mirroring (k = 1) and
//! Reed-Solomon over GF(2^8) (m >= 2).
//!
//! A stripe is k data chunks and m parity chunks of equal length. `encode` computes the
//! parity chunks; `reconstruct` fills in up to m missing chunks of any kind, and refuses
//! (never guesses) when more are missing.
//!
//! Reed-Solomon uses reed-solomon-erasure's systematic Vandermonde matrix (the code the
//! on-disk format was written with), multiplied out by rusty_erasure's SIMD GF(2^8)
//! kernels (AVX2/SSSE3 when the CPU has them, chosen once at run time): the parity bytes
//! are the same as reed-solomon-erasure's, about ten times faster (`cargo bench --bench
//! parity`, README "Microbenchmarks"). XOR runs on its AVX2 XOR kernel likewise.

use rusty_erasure::{Coder, RecoverError};

use crate::error::{Error, Result};
use crate::format::MAX_DRIVES;

/// Output shards for `encode` and `reconstruct_into` without an allocation: the buffers
/// given, in order, then empty slices up to `MAX_DRIVES` (the caller passes the first ones).
pub(crate) fn shard_slices_mut<'a>(buffers: impl IntoIterator<Item = &'a mut [u8]>) -> [&'a mut [u8]; MAX_DRIVES] {
    let mut slices: [&mut [u8]; MAX_DRIVES] = std::array::from_fn(|_| <&mut [u8]>::default());
    let mut given = 0;
    for (slot, buffer) in slices.iter_mut().zip(buffers) {
        *slot = buffer;
        given += 1;
    }
    debug_assert!(given <= MAX_DRIVES);
    slices
}

/// Most data chunks per stripe.
pub const MAX_DATA_CHUNKS: usize = 32;
/// Most parity chunks per stripe.
pub const MAX_PARITY_CHUNKS: usize = 4;

enum Code {
    None,
    Xor,
    Mirror,
    /// RAID-01: parity chunk i is a copy of data chunk i.
    Pairwise,
    ReedSolomon(Box<Coder>),
}

/// An erasure code with k data and m parity chunks per stripe.
pub struct ParityCodec {
    k: usize,
    m: usize,
    code: Code,
}

impl ParityCodec {
    pub fn new(k: usize, m: usize) -> Result<Self> {
        if k == 0 || k > MAX_DATA_CHUNKS || m > MAX_PARITY_CHUNKS {
            return Err(Error::InvalidConfig {
                reason: format!("{k}+{m}: need 1 <= k <= {MAX_DATA_CHUNKS} and m <= {MAX_PARITY_CHUNKS}"),
            });
        }
        let code = match (k, m) {
            (_, 0) => Code::None,
            // XOR of one chunk is a copy, so k = 1, m = 1 is a mirror either way.
            (_, 1) => Code::Xor,
            (1, _) => Code::Mirror,
            _ => {
                let invalid =
                    |e: &dyn std::fmt::Debug| Error::InvalidConfig { reason: format!("Reed-Solomon {k}+{m}: {e:?}") };
                let matrix = rusty_erasure::compat::reed_solomon_erasure_matrix(k, m).map_err(|e| invalid(&e))?;
                Code::ReedSolomon(Box::new(rusty_erasure::coder(matrix).map_err(|e| invalid(&e))?))
            }
        };
        Ok(ParityCodec { k, m, code })
    }

    /// RAID-01's code: k data chunks, each mirrored by one of k copies. Survives any
    /// loss that leaves one chunk of every pair.
    pub fn pairwise_mirror(k: usize) -> Result<Self> {
        if k == 0 || 2 * k > MAX_DATA_CHUNKS {
            return Err(Error::InvalidConfig { reason: format!("RAID-01 over {} drives", 2 * k) });
        }
        Ok(ParityCodec { k, m: k, code: Code::Pairwise })
    }

    pub fn data_chunks(&self) -> usize {
        self.k
    }

    pub fn parity_chunks(&self) -> usize {
        self.m
    }

    /// Computes the m parity chunks of the k data chunks.
    pub fn encode(&self, data: &[&[u8]], parity: &mut [&mut [u8]]) {
        assert_eq!(data.len(), self.k, "k data chunks");
        assert_eq!(parity.len(), self.m, "m parity chunks");
        let len = data[0].len();
        assert!(data.iter().all(|d| d.len() == len) && parity.iter().all(|p| p.len() == len));
        match &self.code {
            Code::None => {}
            Code::Xor => xor_sources(parity[0], data),
            Code::Mirror => parity.iter_mut().for_each(|p| p.copy_from_slice(data[0])),
            Code::Pairwise => parity.iter_mut().zip(data).for_each(|(p, d)| p.copy_from_slice(d)),
            Code::ReedSolomon(rs) => rs.encode(data, parity).expect("shard counts and lengths checked above"),
        }
    }

    /// CRC32C of a block of parity chunk `p` from the CRC32C of the k data blocks at the
    /// same offset, where the code makes it a function of them (XOR, copies), so the
    /// parity is not read for it; None for Reed-Solomon. `zero_block_crc`: CRC32C of a
    /// zero block of the blocks' length.
    pub fn parity_block_crc(
        &self,
        p: usize,
        mut data_crcs: impl Iterator<Item = u32>,
        zero_block_crc: u32,
    ) -> Option<u32> {
        debug_assert!(p < self.m, "parity chunk {p} of {}", self.m);
        match &self.code {
            Code::Xor => {
                let (xor, count) = data_crcs.fold((0, 0), |(xor, count), crc| (xor ^ crc, count + 1));
                debug_assert_eq!(count, self.k, "one CRC per data chunk");
                Some(crate::checksum::xor_of_crcs(xor, count, zero_block_crc))
            }
            Code::Mirror => data_crcs.next(),
            Code::Pairwise => data_crcs.nth(p),
            Code::None | Code::ReedSolomon(_) => None,
        }
    }

    /// CRC32C of a block `reconstruct_into` rebuilds in missing chunk `lost`, from the
    /// CRC32C of the blocks at the same offset of the stripe's chunks (`crcs`, k + m of
    /// them, `None` for a missing one), where the code makes it a function of them: XOR
    /// (the one missing chunk is the XOR of all the others) and copies (the survivor it is
    /// copied from); None for Reed-Solomon, or where `reconstruct_into` would refuse.
    /// `zero_block_crc`: CRC32C of a zero block of the blocks' length.
    pub fn rebuilt_block_crc(&self, lost: usize, crcs: &[Option<u32>], zero_block_crc: u32) -> Option<u32> {
        debug_assert_eq!(crcs.len(), self.k + self.m, "k + m chunks");
        debug_assert!(crcs.get(lost).is_some_and(Option::is_none), "chunk {lost} is missing");
        match &self.code {
            Code::Xor => {
                let (xor, count) = crcs.iter().flatten().fold((0, 0), |(xor, count), crc| (xor ^ crc, count + 1));
                (count + 1 == crcs.len()).then(|| crate::checksum::xor_of_crcs(xor, count, zero_block_crc))
            }
            Code::Mirror => crcs.iter().flatten().next().copied(),
            Code::Pairwise => {
                let partner = if lost < self.k { lost + self.k } else { lost - self.k };
                crcs.get(partner).copied().flatten()
            }
            Code::None | Code::ReedSolomon(_) => None,
        }
    }

    /// Fills in the missing (`None`) chunks of a stripe of k + m chunks, data first, in
    /// new buffers (see `reconstruct_into` to rebuild into the caller's).
    pub fn reconstruct(&self, chunks: &mut [Option<Vec<u8>>]) -> Result<()> {
        let missing: Vec<usize> = (0..chunks.len()).filter(|&i| chunks[i].is_none()).collect();
        if missing.is_empty() {
            return Ok(());
        }
        let len = chunks.iter().flatten().next().map_or(0, Vec::len);
        let mut rebuilt = vec![vec![0u8; len]; missing.len()];
        {
            let present: Vec<Option<&[u8]>> = chunks.iter().map(Option::as_deref).collect();
            let mut out: Vec<&mut [u8]> = rebuilt.iter_mut().map(Vec::as_mut_slice).collect();
            self.reconstruct_into(&present, &mut out)?;
        }
        for (i, chunk) in missing.into_iter().zip(rebuilt) {
            chunks[i] = Some(chunk);
        }
        Ok(())
    }

    /// Rebuilds the missing (`None`) chunks of a stripe of k + m chunks, data first, into
    /// `out`: one buffer per missing chunk, in chunk order, each as long as the chunks.
    pub fn reconstruct_into(&self, chunks: &[Option<&[u8]>], out: &mut [&mut [u8]]) -> Result<()> {
        let total = self.k + self.m;
        assert_eq!(chunks.len(), total, "k + m chunks");
        // Fixed arrays, not vectors: a degraded read rebuilds one block without allocating.
        let mut missing_at = [0usize; MAX_DATA_CHUNKS + MAX_PARITY_CHUNKS];
        let mut lost = 0;
        for i in (0..total).filter(|&i| chunks[i].is_none()) {
            missing_at[lost] = i;
            lost += 1;
        }
        let missing = &missing_at[..lost];
        assert_eq!(out.len(), lost, "one output buffer per missing chunk");
        if lost == 0 {
            return Ok(());
        }
        if lost > self.m {
            return Err(Error::TooManyErasures { lost, total, tolerated: self.m });
        }
        let len = chunks.iter().flatten().next().expect("at least k chunks present").len();
        if chunks.iter().flatten().any(|c| c.len() != len) || out.iter().any(|o| o.len() != len) {
            return Err(Error::InvalidConfig { reason: "chunks of a stripe differ in length".into() });
        }
        match &self.code {
            Code::None => unreachable!("m = 0 tolerates no loss"),
            Code::Xor => {
                let mut survivors: [&[u8]; MAX_DATA_CHUNKS + MAX_PARITY_CHUNKS] =
                    [&[]; MAX_DATA_CHUNKS + MAX_PARITY_CHUNKS];
                let mut present = 0;
                for chunk in chunks.iter().flatten() {
                    survivors[present] = chunk;
                    present += 1;
                }
                xor_sources(out[0], &survivors[..present]);
            }
            Code::Mirror => {
                let copy = chunks.iter().flatten().next().expect("one survivor");
                out.iter_mut().for_each(|o| o.copy_from_slice(copy));
            }
            Code::Pairwise => {
                let k = self.k;
                for (o, &i) in out.iter_mut().zip(missing) {
                    let partner = if i < k { i + k } else { i - k };
                    let copy = chunks[partner].ok_or(Error::TooManyErasures { lost, total, tolerated: 1 })?;
                    o.copy_from_slice(copy);
                }
            }
            Code::ReedSolomon(rs) => rs.recover(chunks, missing, out).map_err(|e| match e {
                RecoverError::TooManyMissing { .. } => Error::TooManyErasures { lost, total, tolerated: self.m },
                e => Error::InvalidConfig { reason: format!("Reed-Solomon reconstruction: {e:?}") },
            })?,
        }
        Ok(())
    }
}

/// `out` = XOR of `sources` (at least one, each as long as `out`), by rusty_erasure's
/// dispatched XOR kernel (AVX2 when the CPU has it): about twice our auto-vectorized loop
/// (`cargo bench --bench parity`).
fn xor_sources(out: &mut [u8], sources: &[&[u8]]) {
    match sources {
        [only] => out.copy_from_slice(only),
        _ => rusty_erasure::raid::xor_gen(sources, out).expect("two or more sources as long as the output"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stripe(k: usize, m: usize, len: usize, seed: u64) -> Vec<Vec<u8>> {
        let codec = ParityCodec::new(k, m).unwrap();
        let mut state = seed | 1;
        let data: Vec<Vec<u8>> = (0..k)
            .map(|_| {
                (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        state as u8
                    })
                    .collect()
            })
            .collect();
        let mut parity = vec![vec![0u8; len]; m];
        let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        let mut prefs: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
        codec.encode(&refs, &mut prefs);
        data.into_iter().chain(parity).collect()
    }

    /// A rebuilt block's CRC from the others' is the CRC of what `reconstruct_into`
    /// rebuilds, for every code that gives one, for every single lost chunk.
    #[test]
    fn a_rebuilt_blocks_crc_follows_from_the_others() {
        const LEN: usize = 4096;
        let zero_block_crc = crate::crc::crc32c(&[0u8; LEN]);
        let codecs = [(3, 1), (4, 1), (1, 2), (4, 2)].map(|(k, m)| ParityCodec::new(k, m).unwrap());
        let pairwise = ParityCodec::pairwise_mirror(2).unwrap();
        for codec in codecs.iter().chain([&pairwise]) {
            let (k, m) = (codec.data_chunks(), codec.parity_chunks());
            let mut full = stripe(k, m, LEN, (k * 5 + m) as u64);
            if matches!(codec.code, Code::Pairwise) {
                let data: Vec<Vec<u8>> = full[..k].to_vec();
                full.truncate(k);
                full.extend(data);
            }
            for lost in 0..k + m {
                let crcs: Vec<Option<u32>> =
                    full.iter().enumerate().map(|(i, c)| (i != lost).then(|| crate::crc::crc32c(c))).collect();
                let got = codec.rebuilt_block_crc(lost, &crcs, zero_block_crc);
                let reed_solomon = matches!(codec.code, Code::ReedSolomon(_));
                assert_eq!(got.is_none(), reed_solomon, "{k}+{m}, chunk {lost} lost");
                if let Some(crc) = got {
                    assert_eq!(crc, crate::crc::crc32c(&full[lost]), "{k}+{m}, chunk {lost} lost");
                }
            }
        }
    }

    /// The engine encodes into and rebuilds into reused buffers holding an earlier
    /// stripe's bytes: what they held must not leak into the result.
    #[test]
    fn encode_and_reconstruct_overwrite_stale_outputs() {
        for (k, m) in [(3, 1), (4, 2), (8, 2), (1, 2), (4, 3)] {
            let codec = ParityCodec::new(k, m).unwrap();
            let full = stripe(k, m, 64, (k * 7 + m) as u64);
            let mut parity = vec![vec![0xa5u8; 64]; m];
            let refs: Vec<&[u8]> = full[..k].iter().map(Vec::as_slice).collect();
            let mut prefs: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
            codec.encode(&refs, &mut prefs);
            assert_eq!(parity, full[k..], "{k}+{m} encode");
            let lost = [0, k + m - 1];
            let present: Vec<Option<&[u8]>> =
                full.iter().enumerate().map(|(i, c)| (!lost.contains(&i)).then_some(c.as_slice())).collect();
            let mut rebuilt = vec![vec![0x5au8; 64]; lost.len()];
            let mut out: Vec<&mut [u8]> = rebuilt.iter_mut().map(Vec::as_mut_slice).collect();
            let result = codec.reconstruct_into(&present, &mut out);
            if m >= lost.len() {
                result.unwrap();
                assert_eq!(rebuilt, [full[0].clone(), full[k + m - 1].clone()], "{k}+{m} reconstruct");
            } else {
                assert!(matches!(result, Err(Error::TooManyErasures { .. })));
            }
        }
    }

    /// Every erasure pattern of up to m chunks decodes, for every k <= 8, m <= 4; m + 1
    /// losses are refused.
    #[test]
    fn every_erasure_pattern_decodes() {
        for k in 1..=8 {
            for m in 0..=4 {
                let codec = ParityCodec::new(k, m).unwrap();
                let n = k + m;
                let full = stripe(k, m, 48, (k * 10 + m) as u64);
                for pattern in 0u32..(1 << n) {
                    let lost = pattern.count_ones() as usize;
                    let mut chunks: Vec<Option<Vec<u8>>> = full
                        .iter()
                        .enumerate()
                        .map(|(i, c)| if pattern & (1 << i) != 0 { None } else { Some(c.clone()) })
                        .collect();
                    let result = codec.reconstruct(&mut chunks);
                    if lost <= m {
                        result.unwrap_or_else(|e| panic!("{k}+{m} pattern {pattern:b}: {e}"));
                        let got: Vec<Vec<u8>> = chunks.into_iter().map(Option::unwrap).collect();
                        assert_eq!(got, full, "{k}+{m} pattern {pattern:b} decoded wrong");
                    } else {
                        assert!(
                            matches!(result, Err(Error::TooManyErasures { .. })),
                            "{k}+{m} pattern {pattern:b} with {lost} lost was not refused"
                        );
                    }
                }
            }
        }
    }

    /// The parity bytes are reed-solomon-erasure's (the code the on-disk format was written
    /// with), for every shape the format allows and for lengths the SIMD kernels handle in
    /// their vector body and in their tails.
    #[test]
    fn reed_solomon_parity_is_byte_identical_to_reed_solomon_erasure() {
        for k in 2..=MAX_DATA_CHUNKS {
            for m in 2..=MAX_PARITY_CHUNKS {
                let reference = reed_solomon_erasure::galois_8::ReedSolomon::new(k, m).unwrap();
                for len in [1, 31, 48, 4096 + 33] {
                    let full = stripe(k, m, len, (k * 100 + m) as u64 + len as u64);
                    let mut expected: Vec<Vec<u8>> = full.clone();
                    expected[k..].iter_mut().for_each(|p| p.fill(0));
                    reference.encode(&mut expected).unwrap();
                    assert!(full == expected, "{k}+{m}, {len} bytes: parity differs from reed-solomon-erasure");
                }
            }
        }
    }

    /// Chunk lengths that are not a multiple of any vector width reconstruct too.
    #[test]
    fn odd_lengths_reconstruct() {
        for (k, m) in [(3, 1), (4, 2), (8, 2), (5, 3), (16, 4)] {
            let codec = ParityCodec::new(k, m).unwrap();
            for len in [1, 33, 4096 + 7] {
                let full = stripe(k, m, len, len as u64);
                let mut chunks: Vec<Option<Vec<u8>>> = full.iter().cloned().map(Some).collect();
                (0..m).for_each(|i| chunks[i * 2 % (k + m)] = None);
                codec.reconstruct(&mut chunks).unwrap();
                assert!(chunks.into_iter().map(Option::unwrap).eq(full), "{k}+{m}, {len} bytes");
            }
        }
    }

    #[test]
    fn xor_and_mirror_are_what_they_say() {
        let s = stripe(3, 1, 16, 5);
        let xor: Vec<u8> = (0..16).map(|i| s[0][i] ^ s[1][i] ^ s[2][i]).collect();
        assert_eq!(s[3], xor);
        let s = stripe(1, 3, 16, 6);
        assert!(s[1..].iter().all(|c| *c == s[0]));
    }

    #[test]
    fn pairwise_mirror_survives_exactly_what_leaves_a_copy_of_each_pair() {
        for k in 1..=4 {
            let codec = ParityCodec::pairwise_mirror(k).unwrap();
            let data: Vec<Vec<u8>> = (0..k).map(|i| vec![i as u8 + 1; 8]).collect();
            let full: Vec<Vec<u8>> = data.iter().chain(data.iter()).cloned().collect();
            for pattern in 0u32..(1 << (2 * k)) {
                let mut chunks: Vec<Option<Vec<u8>>> = full
                    .iter()
                    .enumerate()
                    .map(|(i, c)| if pattern & (1 << i) != 0 { None } else { Some(c.clone()) })
                    .collect();
                let pair_lost = (0..k).any(|i| pattern & (1 << i) != 0 && pattern & (1 << (k + i)) != 0);
                match codec.reconstruct(&mut chunks) {
                    Ok(()) => {
                        assert!(!pair_lost, "k={k} pattern {pattern:b} decoded with a pair lost");
                        assert_eq!(chunks.into_iter().map(Option::unwrap).collect::<Vec<_>>(), full);
                    }
                    Err(_) => assert!(pair_lost, "k={k} pattern {pattern:b} refused but decodable"),
                }
            }
        }
    }

    #[test]
    fn rejects_unsupported_shapes() {
        assert!(ParityCodec::new(0, 1).is_err());
        assert!(ParityCodec::new(4, 5).is_err());
        assert!(ParityCodec::new(33, 1).is_err());
    }
}
