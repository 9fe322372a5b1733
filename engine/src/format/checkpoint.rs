//! The checkpoint: what a clean stop of an array with an offloaded L2P table leaves so
//! that the next start need not replay every footer (byte table in docs/FORMAT.md). It
//! holds the directory of mapping blocks (page -> place of its newest copy), every
//! segment with its sequence and live block count, and the next sequence number and
//! timestamp. It is an accelerator, never the only copy of anything: every block it
//! describes is also described by the log, and a start that finds it stale (the segments
//! on the drives are not exactly the ones it names) replays the log in full.
//!
//! An image is full, or incremental: an incremental image names the full image it builds
//! on (its base, kept in the other copy) and leaves out the stripe tables the base holds
//! unchanged, so that a checkpoint per garbage collection reset writes the records, the
//! directory and only the tables of segments sealed since the base. `resolve` makes it a
//! whole image again from its base; recovery only ever sees whole images.
//!
//! The image is a header and a body, little-endian, one CRC32C over everything after the
//! CRC field: a flipped bit anywhere is detected. Decoding trusts nothing it reads.

use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::record::{read, DecodeError, FORMAT_VERSION};

pub const CHECKPOINT_MAGIC: [u8; 8] = *b"ZRAIDCKP";

#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct CheckpointHeader {
    pub magic: [u8; 8],
    pub version: U32,
    /// CRC32C of the image after this field: the rest of the header and the whole body.
    pub crc32c: U32,
    /// Header and body; the image is padded with zeros to whole blocks after it.
    pub image_bytes: U64,
    pub array_uuid: [u8; 16],
    /// One more than the checkpoint the last start found (1 when it found none); the
    /// newest valid one is read.
    pub generation: U64,
    pub next_sequence: U64,
    pub next_timestamp: U64,
    /// The array superblock's generation when the checkpoint was taken: a drive failed or
    /// rebuilt since (a new generation) makes the checkpoint stale.
    pub superblock_generation: U64,
    pub segment_count: U32,
    pub page_count: U32,
    pub entries_per_page: U32,
    /// Bit 0: incremental (the body starts with the base's generation). Bit 1: the body
    /// ends with the lost-block list (`CHECKPOINT_LOST_*`). Other bits 0.
    pub flags: U32,
}

pub const CHECKPOINT_HEADER_BYTES: usize = 88;
const _: () = assert!(std::mem::size_of::<CheckpointHeader>() == CHECKPOINT_HEADER_BYTES);
/// Where the CRC starts: everything after the magic, version and CRC fields.
const CHECKPOINT_CRC_START: usize = 16;

/// One segment of the body.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct CheckpointSegmentRecord {
    pub zone: U32,
    /// Bit 0: sealed (every stripe and the footer written). Bit 1: large chunks
    /// (`hybrid::ChunkClass::Large`). Bit 2: open, closed by no footer (recovered open at a
    /// crash, or no room for a stop footer): its live blocks are rewritten first. Bit 3:
    /// appending, open while the checkpoint was taken (a running checkpoint): written on
    /// after it, replayed by recovery. A segment with none of bits 0, 2 and 3 was closed by
    /// a clean stop's stop footer. At most one of bits 0, 2 and 3; other bits 0.
    pub flags: U32,
    pub sequence: U64,
    /// Blocks of the segment the L2P table or the directory points at.
    pub live_blocks: U64,
    /// Bytes of its compact stripe table in the body (0: written with Zone Write). Of an
    /// appending segment, 0 unless a drive was failed or being rebuilt: then its table as
    /// far as it was written (the places Zone Append gave its chunks, that drive's among
    /// them).
    pub table_bytes: U64,
}

pub const CHECKPOINT_SEGMENT_BYTES: usize = 32;
const _: () = assert!(std::mem::size_of::<CheckpointSegmentRecord>() == CHECKPOINT_SEGMENT_BYTES);
/// Bytes of one directory entry (a packed physical address, as in a mapping block).
pub const CHECKPOINT_DIRECTORY_ENTRY_BYTES: usize = 4;
/// Bytes an incremental image's body starts with: its base's generation.
pub const CHECKPOINT_BASE_BYTES: usize = 8;
/// The lost-block list after the tables (header flag bit 1): a count (u64), then per LBA
/// recorded lost its LBA (u64) and the timestamp of its lost-block marker (u64).
pub const CHECKPOINT_LOST_COUNT_BYTES: usize = 8;
pub const CHECKPOINT_LOST_ENTRY_BYTES: usize = 16;

const HEADER_FLAG_INCREMENTAL: u32 = 1;
const HEADER_FLAG_LOST: u32 = 2;

const FLAG_SEALED: u32 = 1;
const FLAG_LARGE: u32 = 2;
const FLAG_OPEN: u32 = 4;
const FLAG_APPENDING: u32 = 8;
const FLAG_TABLE_IN_BASE: u32 = 16;

/// A segment as the checkpoint records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointSegment {
    pub zone: u32,
    pub sequence: u64,
    pub sealed: bool,
    /// Closed by no footer: rewritten first (never together with `sealed`).
    pub open: bool,
    /// Open while a running checkpoint was taken and written on after it: recovery replays
    /// it, taking its entries from the checkpoint's next timestamp on (never together with
    /// `sealed` or `open`; it has a stripe table here, as far as it was written, only when
    /// the checkpoint was taken while a drive was failed or being rebuilt).
    pub appending: bool,
    pub large: bool,
    pub live_blocks: u64,
    /// Its compact stripe table (`CompactStripeTable::encode`); empty for Zone Write, or
    /// when the base holds it.
    pub table: Vec<u8>,
    /// Of an incremental image: the bytes of its stripe table that the base holds for the
    /// same zone and sequence, left out here (`table` is then empty); 0 otherwise.
    pub base_table_bytes: u64,
}

/// A decoded (or to be encoded) checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointImage {
    pub array_uuid: [u8; 16],
    pub generation: u64,
    pub next_sequence: u64,
    pub next_timestamp: u64,
    /// The array superblock's generation it goes with (set by whoever stores it).
    pub superblock_generation: u64,
    pub entries_per_page: u32,
    /// In increasing zone order, each zone at most once.
    pub segments: Vec<CheckpointSegment>,
    /// Per page of the L2P table, its mapping block's packed place, or `u32::MAX`.
    pub directory: Vec<u32>,
    /// Of an incremental image: the generation of the full image it builds on (the other
    /// copy). None for a full image. A resolved image keeps it (every table in place).
    pub base_generation: Option<u64>,
    /// LBAs recorded lost (the L2P points at their lost-block markers) with the markers'
    /// timestamps, in increasing LBA order; written only when not empty.
    pub lost: Vec<(u64, u64)>,
}

/// Bytes of the image (before block padding) of a full checkpoint of these counts and
/// stripe tables of `table_bytes` in all (an incremental one has `CHECKPOINT_BASE_BYTES`
/// more, and only the tables it holds).
pub fn checkpoint_image_bytes(segments: usize, pages: usize, table_bytes: u64) -> u64 {
    (CHECKPOINT_HEADER_BYTES + segments * CHECKPOINT_SEGMENT_BYTES + pages * CHECKPOINT_DIRECTORY_ENTRY_BYTES) as u64
        + table_bytes
}

/// Bytes the lost-block list of `lbas` entries adds to an image (none when empty).
pub fn checkpoint_lost_list_bytes(lbas: usize) -> u64 {
    match lbas {
        0 => 0,
        n => (CHECKPOINT_LOST_COUNT_BYTES + n * CHECKPOINT_LOST_ENTRY_BYTES) as u64,
    }
}

impl CheckpointImage {
    /// Bytes of the image (before block padding).
    pub fn image_len(&self) -> u64 {
        let tables: u64 = self.segments.iter().map(|s| s.table.len() as u64).sum();
        let base = if self.base_generation.is_some() { CHECKPOINT_BASE_BYTES as u64 } else { 0 };
        let lost = checkpoint_lost_list_bytes(self.lost.len());
        checkpoint_image_bytes(self.segments.len(), self.directory.len(), tables) + base + lost
    }

    /// The generation the next checkpoint gets: one more after a full image; two more
    /// after an incremental one, so that the next lands in the same copy again and the
    /// base it builds on stays whole (copy = generation mod 2).
    pub fn next_generation(&self) -> u64 {
        match self.base_generation {
            Some(_) => self.generation + 2,
            None => self.generation + 1,
        }
    }

    /// The whole image an incremental one describes, its left-out tables taken from
    /// `base` (the full image of its base generation, as read from the other copy); a full
    /// image as it is. An error when `base` is not its base or lacks a table it names.
    pub fn resolve(mut self, base: Option<&CheckpointImage>) -> Result<CheckpointImage, DecodeError> {
        let Some(base_generation) = self.base_generation else { return Ok(self) };
        if !self.segments.iter().any(|s| s.base_table_bytes > 0) {
            return Ok(self);
        }
        let Some(base) = base else {
            return Err(DecodeError::Field(format!("its base, generation {base_generation}, was not read")));
        };
        let matches = base.base_generation.is_none()
            && base.generation == base_generation
            && base.array_uuid == self.array_uuid
            && base.superblock_generation == self.superblock_generation
            && base.entries_per_page == self.entries_per_page;
        if !matches {
            return Err(DecodeError::Field(format!(
                "the other copy (generation {}) is not its base, generation {base_generation} of superblock generation {}",
                base.generation, self.superblock_generation
            )));
        }
        for s in self.segments.iter_mut().filter(|s| s.base_table_bytes > 0) {
            let found = base.segments.binary_search_by_key(&s.zone, |b| b.zone).ok().map(|i| &base.segments[i]);
            match found {
                Some(b) if b.sequence == s.sequence && !b.appending && b.table.len() as u64 == s.base_table_bytes => {
                    s.table = b.table.clone();
                    s.base_table_bytes = 0;
                }
                _ => {
                    return Err(DecodeError::Field(format!(
                        "its base has no stripe table of {} bytes for zone {} sequence {}",
                        s.base_table_bytes, s.zone, s.sequence
                    )))
                }
            }
        }
        Ok(self)
    }

    /// The image, padded with zeros to whole blocks of `block_size_bytes`.
    pub fn encode(&self, block_size_bytes: u32) -> Vec<u8> {
        debug_assert!(self.segments.windows(2).all(|w| w[0].zone < w[1].zone));
        let image_bytes = self.image_len();
        let padded = image_bytes.div_ceil(u64::from(block_size_bytes)) * u64::from(block_size_bytes);
        let mut out = Vec::with_capacity(padded as usize);
        let header = CheckpointHeader {
            magic: CHECKPOINT_MAGIC,
            version: FORMAT_VERSION.into(),
            crc32c: 0.into(),
            image_bytes: image_bytes.into(),
            array_uuid: self.array_uuid,
            generation: self.generation.into(),
            next_sequence: self.next_sequence.into(),
            next_timestamp: self.next_timestamp.into(),
            superblock_generation: self.superblock_generation.into(),
            segment_count: (self.segments.len() as u32).into(),
            page_count: (self.directory.len() as u32).into(),
            entries_per_page: self.entries_per_page.into(),
            flags: (if self.base_generation.is_some() { HEADER_FLAG_INCREMENTAL } else { 0 }
                | if self.lost.is_empty() { 0 } else { HEADER_FLAG_LOST })
            .into(),
        };
        out.extend_from_slice(header.as_bytes());
        if let Some(base) = self.base_generation {
            out.extend_from_slice(&base.to_le_bytes());
        }
        for s in &self.segments {
            debug_assert!(u8::from(s.sealed) + u8::from(s.open) + u8::from(s.appending) <= 1);
            debug_assert!(s.base_table_bytes == 0 || (self.base_generation.is_some() && s.table.is_empty()));
            let flags = if s.sealed { FLAG_SEALED } else { 0 }
                | if s.large { FLAG_LARGE } else { 0 }
                | if s.open { FLAG_OPEN } else { 0 }
                | if s.appending { FLAG_APPENDING } else { 0 }
                | if s.base_table_bytes > 0 { FLAG_TABLE_IN_BASE } else { 0 };
            let table_bytes = if s.base_table_bytes > 0 { s.base_table_bytes } else { s.table.len() as u64 };
            let record = CheckpointSegmentRecord {
                zone: s.zone.into(),
                flags: flags.into(),
                sequence: s.sequence.into(),
                live_blocks: s.live_blocks.into(),
                table_bytes: table_bytes.into(),
            };
            out.extend_from_slice(record.as_bytes());
        }
        for entry in &self.directory {
            out.extend_from_slice(&entry.to_le_bytes());
        }
        for s in &self.segments {
            out.extend_from_slice(&s.table);
        }
        if !self.lost.is_empty() {
            debug_assert!(self.lost.windows(2).all(|w| w[0].0 < w[1].0));
            out.extend_from_slice(&(self.lost.len() as u64).to_le_bytes());
            for (lba, timestamp) in &self.lost {
                out.extend_from_slice(&lba.to_le_bytes());
                out.extend_from_slice(&timestamp.to_le_bytes());
            }
        }
        debug_assert_eq!(out.len() as u64, image_bytes);
        let crc = crate::crc::crc32c(&out[CHECKPOINT_CRC_START..]);
        out[CHECKPOINT_CRC_START - 4..CHECKPOINT_CRC_START].copy_from_slice(&crc.to_le_bytes());
        out.resize(padded as usize, 0);
        out
    }

    /// The image's length from its first bytes (magic and version checked): how much to
    /// read before `decode`.
    pub fn image_bytes(first_block: &[u8]) -> Result<u64, DecodeError> {
        Ok(Self::header(first_block)?.image_bytes.get())
    }

    /// The header from an image's first bytes, magic and version checked (the CRC covers
    /// the whole image: `decode` checks it). For tools that describe what a zone holds.
    pub fn header(first_block: &[u8]) -> Result<CheckpointHeader, DecodeError> {
        let header: CheckpointHeader = read(first_block)?;
        check_magic_and_version(&header)?;
        Ok(header)
    }

    /// The generation of the base an incremental image builds on, from its first bytes
    /// (None: a full image); magic and version checked, the CRC is `decode`'s. For tools
    /// that describe what a zone holds.
    pub fn base_generation_of(first_block: &[u8]) -> Result<Option<u64>, DecodeError> {
        let header = Self::header(first_block)?;
        if header.flags.get() & HEADER_FLAG_INCREMENTAL == 0 {
            return Ok(None); // full
        }
        let needed = CHECKPOINT_HEADER_BYTES + CHECKPOINT_BASE_BYTES;
        match first_block.get(CHECKPOINT_HEADER_BYTES..needed).map(<[u8; CHECKPOINT_BASE_BYTES]>::try_from) {
            Some(Ok(bytes)) => Ok(Some(u64::from_le_bytes(bytes))),
            _ => Err(DecodeError::Short { needed, got: first_block.len() }),
        }
    }

    /// A checkpoint from its image (padding after it ignored). Checks magic, version,
    /// lengths, the CRC, and that the segments are in increasing zone order with only
    /// known flags; what the values mean for an array is the reader's to check.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let header: CheckpointHeader = read(bytes)?;
        check_magic_and_version(&header)?;
        let segments = header.segment_count.get() as usize;
        let pages = header.page_count.get() as usize;
        let recorded = header.image_bytes.get();
        let incremental = header.flags.get() & HEADER_FLAG_INCREMENTAL != 0;
        let has_lost = header.flags.get() & HEADER_FLAG_LOST != 0;
        let base_bytes = if incremental { CHECKPOINT_BASE_BYTES } else { 0 };
        // Records and directory first (their length is the counts'), then the tables the
        // records give lengths for; the CRC covers all of it.
        let fixed = checkpoint_image_bytes(segments, pages, base_bytes as u64);
        if recorded < fixed || recorded > bytes.len() as u64 {
            return Err(DecodeError::Field(format!(
                "{recorded} bytes recorded, {segments} segments and {pages} pages take at least {fixed}, {} read",
                bytes.len()
            )));
        }
        let image = &bytes[..recorded as usize];
        let computed = crate::crc::crc32c(&image[CHECKPOINT_CRC_START..]);
        if header.crc32c.get() != computed {
            return Err(DecodeError::Checksum { stored: header.crc32c.get(), computed });
        }
        if header.flags.get() & !(HEADER_FLAG_INCREMENTAL | HEADER_FLAG_LOST) != 0 || header.entries_per_page.get() == 0
        {
            return Err(DecodeError::Field("unknown header flags or no entries per page".into()));
        }
        let (base, body) = image[CHECKPOINT_HEADER_BYTES..].split_at(base_bytes);
        let base_generation = incremental.then(|| u64::from_le_bytes(base.try_into().expect("eight bytes")));
        if base_generation.is_some_and(|b| b >= header.generation.get()) {
            return Err(DecodeError::Field(format!("base generation {base_generation:?} not older than the image")));
        }
        let (records, rest) = body.split_at(segments * CHECKPOINT_SEGMENT_BYTES);
        let (directory, mut tables) = rest.split_at(pages * CHECKPOINT_DIRECTORY_ENTRY_BYTES);
        let mut decoded = Vec::with_capacity(segments);
        for raw in records.chunks_exact(CHECKPOINT_SEGMENT_BYTES) {
            let r: CheckpointSegmentRecord = read(raw)?;
            let flags = r.flags.get();
            let states = flags & (FLAG_SEALED | FLAG_OPEN | FLAG_APPENDING);
            let known = FLAG_SEALED | FLAG_LARGE | FLAG_OPEN | FLAG_APPENDING | FLAG_TABLE_IN_BASE;
            let in_base = flags & FLAG_TABLE_IN_BASE != 0;
            let table_bytes = r.table_bytes.get();
            // A table left in the base only in an incremental image, of a segment not
            // appending (that has none), and never empty.
            let in_base_invalid = in_base && (!incremental || flags & FLAG_APPENDING != 0 || table_bytes == 0);
            if flags & !known != 0 || states.count_ones() > 1 || in_base_invalid {
                return Err(DecodeError::Field(format!("unknown segment flags {flags:#x}")));
            }
            let here = if in_base { 0 } else { table_bytes };
            if here > tables.len() as u64 {
                return Err(DecodeError::Field(format!("zone {}'s stripe table runs past the image", r.zone.get())));
            }
            let (table, after) = tables.split_at(here as usize);
            tables = after;
            let segment = CheckpointSegment {
                zone: r.zone.get(),
                sequence: r.sequence.get(),
                sealed: flags & FLAG_SEALED != 0,
                open: flags & FLAG_OPEN != 0,
                appending: flags & FLAG_APPENDING != 0,
                large: flags & FLAG_LARGE != 0,
                live_blocks: r.live_blocks.get(),
                table: table.to_vec(),
                base_table_bytes: if in_base { table_bytes } else { 0 },
            };
            if decoded.last().is_some_and(|last: &CheckpointSegment| last.zone >= segment.zone) {
                return Err(DecodeError::Field(format!("segment of zone {} out of order", segment.zone)));
            }
            decoded.push(segment);
        }
        let lost = if has_lost { decode_lost(&mut tables)? } else { Vec::new() };
        if !tables.is_empty() {
            return Err(DecodeError::Field(format!("{} bytes after the last stripe table", tables.len())));
        }
        let directory = directory
            .chunks_exact(CHECKPOINT_DIRECTORY_ENTRY_BYTES)
            .map(|e| u32::from_le_bytes([e[0], e[1], e[2], e[3]]))
            .collect();
        Ok(CheckpointImage {
            array_uuid: header.array_uuid,
            generation: header.generation.get(),
            next_sequence: header.next_sequence.get(),
            next_timestamp: header.next_timestamp.get(),
            superblock_generation: header.superblock_generation.get(),
            entries_per_page: header.entries_per_page.get(),
            segments: decoded,
            directory,
            base_generation,
            lost,
        })
    }
}

/// The lost-block list at the start of `rest`, which then holds what follows it: a count,
/// then that many (LBA, timestamp) pairs in increasing LBA order, none empty.
fn decode_lost(rest: &mut &[u8]) -> Result<Vec<(u64, u64)>, DecodeError> {
    let bytes = *rest;
    let Some((count, entries)) = bytes.split_first_chunk::<CHECKPOINT_LOST_COUNT_BYTES>() else {
        return Err(DecodeError::Field("the lost-block list runs past the image".into()));
    };
    let count = u64::from_le_bytes(*count);
    let needed = count.checked_mul(CHECKPOINT_LOST_ENTRY_BYTES as u64).filter(|n| *n <= entries.len() as u64);
    let (Some(needed), true) = (needed, count > 0) else {
        return Err(DecodeError::Field(format!("a lost-block list of {count} entries does not fit the image")));
    };
    let (list, after) = entries.split_at(needed as usize);
    let lost: Vec<(u64, u64)> = list
        .chunks_exact(CHECKPOINT_LOST_ENTRY_BYTES)
        .map(|e| {
            let (lba, timestamp) = e.split_at(8);
            (
                u64::from_le_bytes(lba.try_into().expect("8 bytes")),
                u64::from_le_bytes(timestamp.try_into().expect("8 bytes")),
            )
        })
        .collect();
    if lost.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(DecodeError::Field("the lost-block list is not in increasing LBA order".into()));
    }
    *rest = after;
    Ok(lost)
}

fn check_magic_and_version(header: &CheckpointHeader) -> Result<(), DecodeError> {
    if header.magic != CHECKPOINT_MAGIC {
        return Err(DecodeError::Magic);
    }
    if header.version.get() != FORMAT_VERSION {
        return Err(DecodeError::Version(header.version.get()));
    }
    Ok(())
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
