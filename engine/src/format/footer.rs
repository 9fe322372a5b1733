//! Footer blocks: the LBA, timestamp and stripe ID of every data-region block of a zone,
//! written when its segment is sealed (and as a stop footer at a clean stop).

use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::record::{check_crc, read, DecodeError, FORMAT_VERSION};

pub const FOOTER_MAGIC: [u8; 8] = *b"ZRAIDFTR";

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
    let crc = crate::crc::crc32c(&block[..end]);
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
