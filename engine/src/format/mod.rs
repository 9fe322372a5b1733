//! On-disk structures of a zapraid array, byte by byte in docs/FORMAT.md: the array
//! superblock (zone 0 of every drive), the spare record (zone 0 of a hot spare), the segment
//! header (first chunk of each zone of a segment), footer blocks (LBA, timestamp and
//! stripe ID of every data-region block, written when a segment is sealed, and as a stop
//! footer at a clean stop), the per-block metadata in each block's out-of-band area, the
//! checkpoint image and the mapping block.
//!
//! All little-endian, fixed-size, with a magic, a format version and a CRC32C. Decoding
//! is total: any bytes give a value or a typed reason, never a panic.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Version of every structure in this module.
pub const FORMAT_VERSION: u32 = 1;
/// Most drives in an array (k + m), bounded by the header's zone table.
pub const MAX_DRIVES: usize = 36;

mod checkpoint;
mod mapping;
mod spare;
mod stop_footer;
mod superblock;

pub use checkpoint::*;
pub use mapping::*;
pub use spare::*;
pub use stop_footer::*;
pub use superblock::*;

pub const SEGMENT_HEADER_MAGIC: [u8; 8] = *b"ZRAIDSEG";
pub const FOOTER_MAGIC: [u8; 8] = *b"ZRAIDFTR";
pub const BLOCK_METADATA_MAGIC: u16 = 0x525a; // "ZR"

/// Why a structure did not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    Short { needed: usize, got: usize },
    Magic,
    Version(u32),
    Checksum { stored: u32, computed: u32 },
    Field(String),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Short { needed, got } => write!(f, "{got} bytes, needs {needed}"),
            DecodeError::Magic => write!(f, "bad magic"),
            DecodeError::Version(v) => {
                write!(f, "format version {v}, this build reads {FORMAT_VERSION}")
            }
            DecodeError::Checksum { stored, computed } => {
                write!(f, "checksum {stored:#010x} does not match contents ({computed:#010x})")
            }
            DecodeError::Field(what) => write!(f, "{what}"),
        }
    }
}

fn read<T: FromBytes + KnownLayout + Immutable>(bytes: &[u8]) -> Result<T, DecodeError> {
    let size = std::mem::size_of::<T>();
    match bytes.get(..size) {
        Some(prefix) => T::read_from_bytes(prefix).map_err(|_| DecodeError::Short { needed: size, got: bytes.len() }),
        None => Err(DecodeError::Short { needed: size, got: bytes.len() }),
    }
}

fn check_crc(covered: &[u8], stored: u32) -> Result<(), DecodeError> {
    let computed = crc32c::crc32c(covered);
    if computed == stored {
        Ok(())
    } else {
        Err(DecodeError::Checksum { stored, computed })
    }
}

/// Magic, version and CRC of a structure sealed with all three.
fn check_sealed(magic: [u8; 8], expected: [u8; 8], version: u32, covered: &[u8], crc: u32) -> Result<(), DecodeError> {
    if magic != expected {
        return Err(DecodeError::Magic);
    }
    if version != FORMAT_VERSION {
        return Err(DecodeError::Version(version));
    }
    check_crc(covered, crc)
}

/// The header written as the first chunk of every zone of a segment.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct SegmentHeader {
    pub magic: [u8; 8],
    pub version: U32,
    pub header_bytes: U32,
    pub array_uuid: [u8; 16],
    pub segment_sequence: U64,
    pub drive_index: U32,
    pub drive_count: U32,
    pub data_chunks: U32,
    pub parity_chunks: U32,
    pub level: u8,
    /// How this segment is written: 0 stripe groups (Zone Append), 1 Zone Write, 2 one
    /// group of the whole segment (Zone Append).
    pub mode: u8,
    /// 0 small chunks, 1 large chunks (`hybrid::ChunkClass`).
    pub segment_class: u8,
    pub reserved0: u8,
    pub chunk_blocks: U32,
    pub group_size: U32,
    pub block_size_bytes: U32,
    pub stripes: U64,
    pub created_timestamp: U64,
    /// Zone of each drive of the segment (entries past drive_count are 0).
    pub zones: [U32; MAX_DRIVES],
    pub reserved1: U32,
    pub crc32c: U32,
}

pub const SEGMENT_HEADER_BYTES: usize = 240;
const _: () = assert!(std::mem::size_of::<SegmentHeader>() == SEGMENT_HEADER_BYTES);

impl SegmentHeader {
    /// Seals the header: sets the CRC over everything before it.
    pub fn seal(mut self) -> Self {
        self.magic = SEGMENT_HEADER_MAGIC;
        self.version = FORMAT_VERSION.into();
        self.header_bytes = (SEGMENT_HEADER_BYTES as u32).into();
        self.crc32c = crc32c::crc32c(&self.as_bytes()[..SEGMENT_HEADER_BYTES - 4]).into();
        self
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let h: SegmentHeader = read(bytes)?;
        check_sealed(
            h.magic,
            SEGMENT_HEADER_MAGIC,
            h.version.get(),
            &h.as_bytes()[..SEGMENT_HEADER_BYTES - 4],
            h.crc32c.get(),
        )?;
        let drives = h.drive_count.get() as usize;
        if h.header_bytes.get() as usize != SEGMENT_HEADER_BYTES
            || !drive_shape_is_valid(drives, h.drive_index.get(), h.data_chunks.get(), h.parity_chunks.get())
            || h.chunk_blocks.get() == 0
            || h.group_size.get() == 0
        {
            return Err(DecodeError::Field(format!(
                "inconsistent shape: drive {} of {drives}, {}+{}, chunk {} blocks, group {}",
                h.drive_index.get(),
                h.data_chunks.get(),
                h.parity_chunks.get(),
                h.chunk_blocks.get(),
                h.group_size.get()
            )));
        }
        Ok(h)
    }
}

/// Whether a decoded drive count, drive index and data + parity split describe an array
/// this format can hold (the sums are widened: the fields are untrusted).
fn drive_shape_is_valid(drives: usize, drive_index: u32, data_chunks: u32, parity_chunks: u32) -> bool {
    (1..=MAX_DRIVES).contains(&drives)
        && (drive_index as usize) < drives
        && u64::from(data_chunks) + u64::from(parity_chunks) == drives as u64
}

/// Header of each footer block; entries follow, the block's CRC32C is in its last 4 bytes.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct FooterBlockHeader {
    pub magic: [u8; 8],
    pub version: U32,
    pub drive_index: U32,
    pub segment_sequence: U64,
    /// Index (in the drive's data region) of the first block this footer block describes.
    pub first_block: U32,
    pub entries: U32,
}

pub const FOOTER_BLOCK_HEADER_BYTES: usize = 32;
const _: () = assert!(std::mem::size_of::<FooterBlockHeader>() == FOOTER_BLOCK_HEADER_BYTES);

impl FooterBlockHeader {
    /// The header of the footer block of `drive_index`'s zone of segment
    /// `segment_sequence` that describes data-region blocks from `first_block` on; the magic,
    /// version and entry count are `encode_footer_block`'s to set.
    pub fn new(drive_index: u32, segment_sequence: u64, first_block: u32) -> Self {
        FooterBlockHeader {
            magic: [0; 8],
            version: 0.into(),
            drive_index: drive_index.into(),
            segment_sequence: segment_sequence.into(),
            first_block: first_block.into(),
            entries: 0.into(),
        }
    }
}

/// What a footer records of one data-region block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct FooterEntry {
    /// Logical block address (`NO_LBA` for padding); for parity blocks, the parity of the
    /// data blocks' `lba` fields (and `timestamp` likewise), as in their metadata.
    pub lba: U64,
    pub timestamp: U64,
    pub stripe_id: U32,
    /// Flags: `FOOTER_ENTRY_UNKNOWN`; other bits 0.
    pub reserved: U32,
}

/// `FooterEntry::reserved` flag: the block could not be reconstructed when its drive was
/// rebuilt (its stripe lost more than parity covers); its LBA and timestamp are not known,
/// and `lba` holds `NO_LBA`. A reader takes such a block for a damaged one, never for
/// padding. Added in version 1 without a version change (the field was always 0).
pub const FOOTER_ENTRY_UNKNOWN: u32 = 1;

pub const FOOTER_ENTRY_BYTES: usize = 24;
const _: () = assert!(std::mem::size_of::<FooterEntry>() == FOOTER_ENTRY_BYTES);
const FOOTER_CRC_BYTES: usize = 4;
/// LBA of blocks that hold no user data (padding, headers, footers).
pub const NO_LBA: u64 = u64::MAX;

/// Footer entries that fit in one block of `block_size_bytes`.
pub fn footer_entries_per_block(block_size_bytes: u32) -> usize {
    (block_size_bytes as usize - FOOTER_BLOCK_HEADER_BYTES - FOOTER_CRC_BYTES) / FOOTER_ENTRY_BYTES
}

/// Encodes one footer block.
pub fn encode_footer_block(header: FooterBlockHeader, entries: &[FooterEntry], block: &mut [u8]) {
    assert!(entries.len() <= footer_entries_per_block(block.len() as u32));
    block.fill(0);
    let header = FooterBlockHeader {
        magic: FOOTER_MAGIC,
        version: FORMAT_VERSION.into(),
        entries: (entries.len() as u32).into(),
        ..header
    };
    block[..FOOTER_BLOCK_HEADER_BYTES].copy_from_slice(header.as_bytes());
    for (i, e) in entries.iter().enumerate() {
        let at = FOOTER_BLOCK_HEADER_BYTES + i * FOOTER_ENTRY_BYTES;
        block[at..at + FOOTER_ENTRY_BYTES].copy_from_slice(e.as_bytes());
    }
    let end = block.len() - FOOTER_CRC_BYTES;
    let crc = crc32c::crc32c(&block[..end]);
    block[end..].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes one footer block.
pub fn decode_footer_block(block: &[u8]) -> Result<(FooterBlockHeader, Vec<FooterEntry>), DecodeError> {
    if block.len() < FOOTER_BLOCK_HEADER_BYTES + FOOTER_CRC_BYTES {
        return Err(DecodeError::Short { needed: FOOTER_BLOCK_HEADER_BYTES + FOOTER_CRC_BYTES, got: block.len() });
    }
    let header: FooterBlockHeader = read(block)?;
    if header.magic != FOOTER_MAGIC {
        return Err(DecodeError::Magic);
    }
    if header.version.get() != FORMAT_VERSION {
        return Err(DecodeError::Version(header.version.get()));
    }
    let end = block.len() - FOOTER_CRC_BYTES;
    let stored = u32::from_le_bytes(block[end..].try_into().expect("4 bytes"));
    check_crc(&block[..end], stored)?;
    let entries = header.entries.get() as usize;
    if entries > footer_entries_per_block(block.len() as u32) {
        return Err(DecodeError::Field(format!("{entries} entries do not fit in a block")));
    }
    let list = (0..entries)
        .map(|i| read(&block[FOOTER_BLOCK_HEADER_BYTES + i * FOOTER_ENTRY_BYTES..]))
        .collect::<Result<Vec<FooterEntry>, _>>()?;
    Ok((header, list))
}

/// What a block holds, as its metadata says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum BlockKind {
    Data = 1,
    Parity = 2,
    Padding = 3,
    Header = 4,
    Footer = 5,
    /// A page of the offloaded L2P table (`mapping`).
    Mapping = 6,
    /// A lost-block marker (`LOST_LBA_FLAG`): zeros standing for a block that could not be
    /// read or rebuilt.
    Lost = 7,
}

/// The LBA field of a mapping block (metadata and footer entry) is this flag with the
/// page's index: beyond every logical block, and told apart from `NO_LBA`.
pub const MAPPING_LBA_FLAG: u64 = 1 << 62;

/// The LBA field of a lost-block marker (metadata, fields and footer entry) is this flag
/// with the logical block's LBA: the L2P table points at the marker, and reads of the LBA
/// fail until it is written again (`engine::lost`). Never set together with
/// `MAPPING_LBA_FLAG`. Never to change: data on the drives depends on it.
pub const LOST_LBA_FLAG: u64 = 1 << 61;

/// The logical block a lost-block marker's LBA field stands for, if it is one.
pub fn lost_lba_of(lba: u64) -> Option<u64> {
    (lba != NO_LBA && lba & MAPPING_LBA_FLAG == 0 && lba & LOST_LBA_FLAG != 0).then_some(lba & !LOST_LBA_FLAG)
}

/// The LBA a data-region LBA field names, marker flag taken off, and whether it was a
/// lost-block marker's.
pub fn split_lost_lba(field: u64) -> (u64, bool) {
    match lost_lba_of(field) {
        Some(lba) => (lba, true),
        None => (field, false),
    }
}

/// The mapping page an LBA field names, if it names one.
pub fn mapping_page_of(lba: u64) -> Option<u64> {
    (lba != NO_LBA && lba & MAPPING_LBA_FLAG != 0).then_some(lba & !MAPPING_LBA_FLAG)
}

impl BlockKind {
    /// The kind of a data-region block of a data chunk with this LBA field.
    pub fn of_data_lba(lba: u64) -> BlockKind {
        if lba == NO_LBA {
            BlockKind::Padding
        } else if mapping_page_of(lba).is_some() {
            BlockKind::Mapping
        } else if lost_lba_of(lba).is_some() {
            BlockKind::Lost
        } else {
            BlockKind::Data
        }
    }

    fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => BlockKind::Data,
            2 => BlockKind::Parity,
            3 => BlockKind::Padding,
            4 => BlockKind::Header,
            5 => BlockKind::Footer,
            6 => BlockKind::Mapping,
            7 => BlockKind::Lost,
            _ => return None,
        })
    }
}

/// Bytes of a block's (LBA, timestamp) fields as the parity codec sees them: parity
/// blocks carry the parity of their stripe's data blocks' fields, so a lost block's
/// identity is rebuilt with its contents.
pub const FIELD_BYTES: usize = 16;

/// A block's (LBA, timestamp) fields as the parity codec takes them (little-endian).
pub fn encode_fields(lba: u64, timestamp: u64) -> Vec<u8> {
    field_bytes(lba, timestamp).to_vec()
}

/// `encode_fields` without an allocation, for the data path.
pub fn field_bytes(lba: u64, timestamp: u64) -> [u8; FIELD_BYTES] {
    let mut bytes = [0u8; FIELD_BYTES];
    bytes[..8].copy_from_slice(&lba.to_le_bytes());
    bytes[8..].copy_from_slice(&timestamp.to_le_bytes());
    bytes
}

/// The (LBA, timestamp) of `encode_fields`; None if `bytes` is too short.
pub fn decode_fields(bytes: &[u8]) -> Option<(u64, u64)> {
    let lba = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    let timestamp = u64::from_le_bytes(bytes.get(8..FIELD_BYTES)?.try_into().ok()?);
    Some((lba, timestamp))
}

/// Per-block metadata in the out-of-band area. For parity blocks, `lba` and `timestamp`
/// hold the parity of the data blocks' fields at the same offset of the stripe, so a lost
/// data block's LBA and timestamp are rebuilt with its data; `stripe_id` is replicated.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct BlockMetadata {
    pub lba: U64,
    pub timestamp: U64,
    pub stripe_id: U32,
    /// Low 32 bits of the segment sequence: tells a stale block from a current one.
    pub segment_sequence_low: U32,
    pub magic: U16,
    pub version: u8,
    pub kind: u8,
    /// CRC32C of the block's data followed by bytes 0..28 of this structure.
    pub crc32c: U32,
}

/// Bytes of per-block metadata the engine needs from a drive.
pub const BLOCK_METADATA_BYTES: usize = 32;
const _: () = assert!(std::mem::size_of::<BlockMetadata>() == BLOCK_METADATA_BYTES);
const BLOCK_METADATA_CRC_OFFSET: usize = 28;

impl BlockMetadata {
    pub fn new(lba: u64, timestamp: u64, stripe_id: u32, segment_sequence: u64, kind: BlockKind) -> Self {
        BlockMetadata {
            lba: lba.into(),
            timestamp: timestamp.into(),
            stripe_id: stripe_id.into(),
            segment_sequence_low: (segment_sequence as u32).into(),
            magic: BLOCK_METADATA_MAGIC.into(),
            version: FORMAT_VERSION as u8,
            kind: kind as u8,
            crc32c: 0.into(),
        }
    }

    fn checksum(&self, data: &[u8]) -> u32 {
        self.checksum_with(crc32c::crc32c(data))
    }

    /// The block's checksum from the CRC32C of its data alone.
    fn checksum_with(&self, data_crc: u32) -> u32 {
        crc32c::crc32c_append(data_crc, &self.as_bytes()[..BLOCK_METADATA_CRC_OFFSET])
    }

    /// Writes the metadata of `data` into `out` (the block's OOB area, >= 32 bytes).
    pub fn encode(self, data: &[u8], out: &mut [u8]) {
        self.encode_with_data_crc(crc32c::crc32c(data), out);
    }

    /// As `encode`, given the CRC32C of the block's data (computed by the frontend, or
    /// derived from other blocks' for XOR parity: `checksum`), so the data is not read.
    pub fn encode_with_data_crc(mut self, data_crc: u32, out: &mut [u8]) {
        self.crc32c = self.checksum_with(data_crc).into();
        out.fill(0);
        out[..BLOCK_METADATA_BYTES].copy_from_slice(self.as_bytes());
    }

    /// Decodes the metadata of a block and checks it against the block's data: a torn,
    /// stale-format or corrupted block fails here.
    pub fn decode(data: &[u8], oob: &[u8]) -> Result<(Self, BlockKind), DecodeError> {
        let (m, kind) = Self::decode_unverified(oob)?;
        let stored = m.crc32c.get();
        let computed = m.checksum(data);
        if stored != computed {
            return Err(DecodeError::Checksum { stored, computed });
        }
        Ok((m, kind))
    }

    /// As `decode`, leaving the checksum to whoever checks the data later (`verifies`):
    /// a frontend read's blocks are checked on the frontend's thread
    /// (`checksum::ReadChecks`).
    pub fn decode_unverified(oob: &[u8]) -> Result<(Self, BlockKind), DecodeError> {
        let m: BlockMetadata = read(oob)?;
        if m.magic.get() != BLOCK_METADATA_MAGIC {
            return Err(DecodeError::Magic);
        }
        if u32::from(m.version) != FORMAT_VERSION {
            return Err(DecodeError::Version(u32::from(m.version)));
        }
        let kind = BlockKind::from_u8(m.kind).ok_or_else(|| DecodeError::Field(format!("block kind {}", m.kind)))?;
        Ok((m, kind))
    }

    /// Whether `data` is the block this metadata's checksum covers.
    pub fn verifies(&self, data: &[u8]) -> bool {
        self.crc32c.get() == self.checksum(data)
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod fuzz_tests;
