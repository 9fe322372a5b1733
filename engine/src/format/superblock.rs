//! The array superblock (zone 0 of every drive): the array's shape, name, open segments,
//! failed and rebuilding drives, in generations; byte table in docs/FORMAT.md. Decoding
//! checks magic, version, size and CRC32C, and that the shape is one this format holds:
//! a superblock read from a drive is untrusted.
//!
//! An array is *classic* (N = k + m drives: every segment on all of them) or *declustered*
//! (N > k + m: each segment on k + m of them, `crate::placement`); a declustered array
//! records N, its distributed spares S and its placement's CRC32C, from which a start makes
//! the placement again and checks it.

use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::record::{check_sealed, read, DecodeError, FORMAT_VERSION, MAX_ARRAY_DRIVES, MAX_DRIVES};

/// The most open segments an array may have (each takes open and active zones).
pub const MAX_OPEN_SEGMENTS: u32 = 16;

/// Most engine shards an array may have (`crate::shard`: the UUID mixing keeps S and the
/// shard's index in one byte each). Data on the drives depends on it: never to change.
pub const MAX_SHARDS: u32 = 255;

pub const ARRAY_SUPERBLOCK_MAGIC: [u8; 8] = *b"ZRAIDARR";

/// The array superblock: first block of zone 0 of every drive, written by `zapraid
/// format` (zone 0 is reserved for it; segments use the zones after it). `zapraid start`
/// reads it to learn the array's shape and each drive's place, whatever order the drives
/// are named in.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct ArraySuperblock {
    pub magic: [u8; 8],
    pub version: U32,
    pub superblock_bytes: U32,
    pub array_uuid: [u8; 16],
    /// This drive's place in the array, below `drive_count`.
    pub drive_index: U32,
    /// N, the array's drives: k + m for a classic array, more for a declustered one.
    pub drive_count: U32,
    /// k and m: a stripe (a segment) takes k + m drives (`stripe_width`).
    pub data_chunks: U32,
    pub parity_chunks: U32,
    pub level: u8,
    /// 0 ZapRAID (hybrid groups), 1 ZoneWrite-Only, 2 ZoneAppend-Only.
    pub mode: u8,
    /// Open segments of small chunks (Ns) and of large chunks (Nl); both 0 in superblocks
    /// written before hybrid management: one open segment (Ns 1, Nl 0).
    pub small_segments: u8,
    pub large_segments: u8,
    /// The small chunk (Cs), the only one when Nl is 0.
    pub chunk_bytes: U32,
    pub group_size: U32,
    pub block_size_bytes: U32,
    pub reserved_zones: U32,
    pub logical_blocks: U64,
    pub stripe_timeout_ns: U64,
    pub created_unix_s: U64,
    /// Array name, UTF-8, zero-padded.
    pub name: [u8; 32],
    /// Superblocks are appended to zone 0 (format writes generation 0 at its first block);
    /// the valid one with the highest generation on any drive is in force.
    pub generation: U64,
    /// Drives failed while the array ran, bit i for drive i: they stay failed (they
    /// missed writes) until rebuilt.
    pub failed_drives: U64,
    /// The large chunk (Cl); 0 when Nl is 0.
    pub large_chunk_bytes: U32,
    /// Drives being rebuilt onto a new drive (`zapraid replace`), bit i for drive i; each
    /// is failed in `failed_drives` too until its rebuild completes. Superblocks written
    /// before this field (`LEGACY_ARRAY_SUPERBLOCK_BYTES`) read as 0.
    pub rebuilding_drives: U64,
    /// The L2P table's memory budget in bytes (`zapraid format --l2p-memory`); 0: the
    /// whole table in memory. Superblocks written before this field read as 0.
    pub l2p_budget_bytes: U64,
    /// Engine shards the array runs (`zapraid format --shards`), each owning a run of every
    /// drive's zones and an interleaved share of the logical space (`crate::shard`); 0 or 1:
    /// one. Superblocks written before this field read as 0. Never changes after format:
    /// it decides where every block is.
    pub shard_count: U32,
    /// The interleave unit of the shards' logical space, in blocks (0 with one shard).
    pub shard_unit_blocks: U32,
    /// S, the drives' worth of spare space each row of a declustered array's placement
    /// keeps (`crate::placement`); 0 for a classic array. Superblocks written before this
    /// field read as 0. Never changes after format.
    pub distributed_spares: U32,
    /// CRC32C of a declustered array's placement bases (`Placement::bases_crc32c`), made
    /// at format from (N, k + m, S); a start makes the placement again and refuses one
    /// whose CRC differs. 0 for a classic array, and in superblocks written before it.
    pub placement_crc32c: U32,
    /// Failed drives of a declustered array whose chunks were all rebuilt into distributed
    /// spare space, bit i for drive i (each failed in `failed_drives` too): no segment has
    /// a lane on them, so a start knows a segment number whose other drives all failed is
    /// empty (`Recovery::set_spared_drives`). 0 for a classic array, and in superblocks
    /// written before it (`PRE_SPARED_ARRAY_SUPERBLOCK_BYTES`).
    pub spared_drives: U64,
    /// The drives a declustered array had before each grow (`zapraid grow`), oldest
    /// first, 0 past the last (the fourth byte always 0): each an earlier placement some
    /// of its rows may still be in (`crate::lanes`). All 0 for an array never grown, and
    /// in superblocks written before it (`PRE_GROW_ARRAY_SUPERBLOCK_BYTES`).
    pub grown_from: [u8; 4],
    /// The CRC32C of each earlier placement's bases (as `placement_crc32c` is the newest
    /// one's), 0 past the last: a start makes each again and checks it.
    pub grown_placement_crc32c: [U32; 3],
    pub crc32c: U32,
}

pub const ARRAY_SUPERBLOCK_BYTES: usize = 204;
/// Superblocks written before `grown_from`: the fields up to `spared_drives`, then the
/// CRC.
pub const PRE_GROW_ARRAY_SUPERBLOCK_BYTES: usize = 188;
/// Superblocks written before `spared_drives`: the fields up to `placement_crc32c`, then
/// the CRC (the first layout of declustered arrays).
pub const PRE_SPARED_ARRAY_SUPERBLOCK_BYTES: usize = 180;
/// Superblocks written before declustered arrays: the fields up to `shard_unit_blocks`,
/// then the CRC.
pub const PRE_DECLUSTERED_ARRAY_SUPERBLOCK_BYTES: usize = 172;
/// Superblocks written before `shard_count`: the fields up to `l2p_budget_bytes`, then
/// the CRC.
pub const PRE_SHARD_ARRAY_SUPERBLOCK_BYTES: usize = 164;
/// Superblocks written before `rebuilding_drives`: the same fields up to
/// `large_chunk_bytes`, then the CRC.
pub const LEGACY_ARRAY_SUPERBLOCK_BYTES: usize = 148;
/// Superblocks written before `l2p_budget_bytes`: the fields up to `rebuilding_drives`,
/// then the CRC.
pub const PRE_L2P_ARRAY_SUPERBLOCK_BYTES: usize = 156;
/// Every older layout that still decodes (the fields it lacks read as 0).
pub const OLDER_ARRAY_SUPERBLOCK_SIZES: [usize; 6] = [
    LEGACY_ARRAY_SUPERBLOCK_BYTES,
    PRE_L2P_ARRAY_SUPERBLOCK_BYTES,
    PRE_SHARD_ARRAY_SUPERBLOCK_BYTES,
    PRE_DECLUSTERED_ARRAY_SUPERBLOCK_BYTES,
    PRE_SPARED_ARRAY_SUPERBLOCK_BYTES,
    PRE_GROW_ARRAY_SUPERBLOCK_BYTES,
];
const _: () = assert!(std::mem::size_of::<ArraySuperblock>() == ARRAY_SUPERBLOCK_BYTES);

impl ArraySuperblock {
    /// Seals the superblock: sets magic, version, size and the CRC over everything before it.
    pub fn seal(mut self) -> Self {
        self.magic = ARRAY_SUPERBLOCK_MAGIC;
        self.version = FORMAT_VERSION.into();
        self.superblock_bytes = (ARRAY_SUPERBLOCK_BYTES as u32).into();
        self.crc32c = crate::crc::crc32c(&self.as_bytes()[..ARRAY_SUPERBLOCK_BYTES - 4]).into();
        self
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        // `superblock_bytes` follows the magic and the version.
        let size = bytes.get(12..16).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        let s: ArraySuperblock = if let Some(old) = size.filter(|size| OLDER_ARRAY_SUPERBLOCK_SIZES.contains(size)) {
            // An older layout: the fields it lacks read as 0, its CRC right after its fields.
            let legacy = bytes.get(..old).ok_or(DecodeError::Short { needed: old, got: bytes.len() })?;
            let covered = &legacy[..old - 4];
            let mut widened = [0u8; ARRAY_SUPERBLOCK_BYTES];
            widened[..covered.len()].copy_from_slice(covered);
            widened[ARRAY_SUPERBLOCK_BYTES - 4..].copy_from_slice(&legacy[old - 4..]);
            let s: ArraySuperblock = read(&widened)?;
            check_sealed(s.magic, ARRAY_SUPERBLOCK_MAGIC, s.version.get(), covered, s.crc32c.get())?;
            s
        } else {
            let s: ArraySuperblock = read(bytes)?;
            check_sealed(
                s.magic,
                ARRAY_SUPERBLOCK_MAGIC,
                s.version.get(),
                &s.as_bytes()[..ARRAY_SUPERBLOCK_BYTES - 4],
                s.crc32c.get(),
            )?;
            s
        };
        let drives = s.drive_count.get();
        let size = s.superblock_bytes.get() as usize;
        if !(size == ARRAY_SUPERBLOCK_BYTES || OLDER_ARRAY_SUPERBLOCK_SIZES.contains(&size))
            || !s.shape_is_valid()
            // A zapraid before declustered arrays wrote only classic ones.
            || (size < PRE_SPARED_ARRAY_SUPERBLOCK_BYTES && s.is_declustered())
            // Only a declustered array's failed drives are in spare space.
            || s.spared_drives.get() & !s.failed_drives.get() != 0
            || (s.spared_drives.get() != 0 && !s.is_declustered())
            || !s.growth_is_valid()
            || s.chunk_bytes.get() == 0
            || s.group_size.get() == 0
            || s.mode > 2
            || s.logical_blocks.get() == 0
            || bits_from(s.failed_drives.get(), drives) != 0
            || bits_from(s.rebuilding_drives.get(), drives) != 0
            || u32::from(s.small_segments) + u32::from(s.large_segments) > MAX_OPEN_SEGMENTS
            || (s.large_segments > 0 && s.large_chunk_bytes.get() <= s.chunk_bytes.get())
            || s.shard_count.get() > MAX_SHARDS
            || (s.shard_count.get() > 1 && s.shard_unit_blocks.get() == 0)
        {
            return Err(DecodeError::Field(format!(
                "inconsistent shape: drive {} of {drives}, {}+{}, {} distributed spare(s), placement CRC {:#010x}, \
                 chunk {} bytes, group {}, mode {}, {} shards of {} blocks, in the {size}-byte layout",
                s.drive_index.get(),
                s.data_chunks.get(),
                s.parity_chunks.get(),
                s.distributed_spares.get(),
                s.placement_crc32c.get(),
                s.chunk_bytes.get(),
                s.group_size.get(),
                s.mode,
                s.shard_count.get(),
                s.shard_unit_blocks.get()
            )));
        }
        Ok(s)
    }

    /// k + m: the drives each segment takes (N, `drive_count`, for a classic array).
    pub fn stripe_width(&self) -> u32 {
        self.data_chunks.get().saturating_add(self.parity_chunks.get())
    }

    /// Whether the array is wider than its stripes (N > k + m): its segments are placed
    /// on the drives by `crate::placement`, as `distributed_spares` and `placement_crc32c`
    /// record.
    pub fn is_declustered(&self) -> bool {
        self.drive_count.get() > self.stripe_width()
    }

    /// Whether the drives, the stripe, the spares and the placement's CRC are an array this
    /// format holds (the sums widened: the fields are untrusted). A stripe of 1 to
    /// `MAX_DRIVES` drives; a classic array as wide, with no spares and no placement CRC;
    /// a declustered one of at most `MAX_ARRAY_DRIVES` drives that leave k + m after its
    /// spares; the drive index below N.
    fn shape_is_valid(&self) -> bool {
        let drives = u64::from(self.drive_count.get());
        let width = u64::from(self.data_chunks.get()) + u64::from(self.parity_chunks.get());
        let spares = u64::from(self.distributed_spares.get());
        let stripe = (1..=MAX_DRIVES as u64).contains(&width) && u64::from(self.drive_index.get()) < drives;
        let array = if drives == width {
            spares == 0 && self.placement_crc32c.get() == 0
        } else {
            drives > width && drives <= MAX_ARRAY_DRIVES as u64 && drives >= width + spares
        };
        stripe && array
    }

    /// The drive counts before each grow, oldest first (empty for an array never grown).
    pub fn grown_from(&self) -> Vec<u32> {
        self.grown_from.iter().take_while(|&&n| n != 0).map(|&n| u32::from(n)).collect()
    }

    /// Whether the earlier drive counts and their CRCs make sense (untrusted): only a
    /// declustered array grew, each earlier count was declustered, leaves k + m after the
    /// spares and is less than the next, zeros only after the last, the reserved byte 0,
    /// and a CRC exactly for each count.
    fn growth_is_valid(&self) -> bool {
        let earlier = self.grown_from();
        let width = self.stripe_width();
        let spares = self.distributed_spares.get();
        let counts_ok = earlier.is_empty()
            || (self.is_declustered()
                && earlier.iter().all(|&n| n > width && n >= width.saturating_add(spares))
                && earlier.windows(2).all(|w| w[0] < w[1])
                && earlier.last().is_some_and(|&n| n < self.drive_count.get()));
        let zeros_after = self.grown_from[earlier.len()..].iter().all(|&n| n == 0) && self.grown_from[3] == 0;
        let crcs = self.grown_placement_crc32c.iter().enumerate();
        let crcs_ok = crcs.clone().all(|(i, crc)| (i < earlier.len()) == (crc.get() != 0));
        counts_ok && zeros_after && crcs_ok
    }

    /// Engine shards the array runs (1 for arrays formatted before shards).
    pub fn shards(&self) -> u32 {
        self.shard_count.get().max(1)
    }

    /// The name as text (up to the first zero byte; invalid UTF-8 shown lossily).
    pub fn name(&self) -> String {
        let end = self.name.iter().position(|b| *b == 0).unwrap_or(self.name.len());
        String::from_utf8_lossy(&self.name[..end]).into_owned()
    }
}

/// The bits of `mask` from bit `drives` up (none when `drives` is 64 or more).
fn bits_from(mask: u64, drives: u32) -> u64 {
    mask.checked_shr(drives).unwrap_or(0)
}
