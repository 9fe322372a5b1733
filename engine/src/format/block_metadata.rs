//! The per-block metadata in each block's out-of-band area (LBA, timestamp, stripe ID,
//! kind, checksum), what a block's LBA field can name (data, a mapping page, a lost-block
//! marker), and the (LBA, timestamp) fields as the parity codec sees them.

use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::footer::NO_LBA;
use super::record::{read, DecodeError, FORMAT_VERSION};

pub const BLOCK_METADATA_MAGIC: u16 = 0x525a; // "ZR"

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

    pub(super) fn from_u8(v: u8) -> Option<Self> {
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
        self.checksum_with(crate::crc::crc32c(data))
    }

    /// The block's checksum from the CRC32C of its data alone.
    fn checksum_with(&self, data_crc: u32) -> u32 {
        crate::crc::crc32c_append(data_crc, &self.as_bytes()[..BLOCK_METADATA_CRC_OFFSET])
    }

    /// Writes the metadata of `data` into `out` (the block's OOB area, >= 32 bytes).
    pub fn encode(self, data: &[u8], out: &mut [u8]) {
        self.encode_with_data_crc(crate::crc::crc32c(data), out);
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
        Self::decode_with_data_crc(data, oob).map(|(m, kind, _)| (m, kind))
    }

    /// As `decode`, also giving the CRC32C of the block's data it computed to check it:
    /// for a caller that derives another block's checksum from it (a block the rebuild
    /// reconstructs by XOR or copy, `ParityCodec::rebuilt_block_crc`), so the data is
    /// checksummed once.
    pub fn decode_with_data_crc(data: &[u8], oob: &[u8]) -> Result<(Self, BlockKind, u32), DecodeError> {
        let (m, kind) = Self::decode_unverified(oob)?;
        let data_crc = crate::crc::crc32c(data);
        let stored = m.crc32c.get();
        let computed = m.checksum_with(data_crc);
        if stored != computed {
            return Err(DecodeError::Checksum { stored, computed });
        }
        Ok((m, kind, data_crc))
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
