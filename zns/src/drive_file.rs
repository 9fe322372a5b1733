//! On-disk format of a file-backed emulated drive (documented in docs/FORMAT.md).
//!
//! A drive file holds a superblock (geometry, identity, seed), a table of zone records
//! (state and write pointer of every zone), a per-block metadata area and a data area,
//! at offsets derived from the geometry alone. All integers are little-endian; every
//! structure carries a CRC32C, and decoding never panics on any input.

use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::geometry::Geometry;
use crate::zone::ZoneState;

/// First bytes of every emulated drive file.
pub const DRIVE_MAGIC: [u8; 8] = *b"ZRAIDEMU";
/// Version of the layout this build writes and reads.
pub const DRIVE_FORMAT_VERSION: u32 = 1;
/// Bytes reserved for the superblock at the start of the file.
pub const SUPERBLOCK_REGION_BYTES: u64 = 4096;
/// Alignment of the areas after the superblock.
const AREA_ALIGN_BYTES: u64 = 4096;
/// On-disk encoding of "no limit" for the open/active zone limits.
const NO_LIMIT: u32 = 0;

/// The superblock at offset 0.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct Superblock {
    pub magic: [u8; 8],
    pub version: U32,
    pub superblock_bytes: U32,
    pub block_size_bytes: U32,
    pub metadata_bytes_per_block: U32,
    pub zone_size_blocks: U64,
    pub zone_capacity_blocks: U64,
    pub zone_count: U32,
    pub max_open_zones: U32,
    pub max_active_zones: U32,
    pub zone_append_max_blocks: U32,
    pub max_transfer_blocks: U32,
    pub reserved0: U32,
    pub drive_uuid: [u8; 16],
    pub landing_seed: U64,
    pub crc32c: U32,
    pub reserved1: U32,
}

const _: () = assert!(std::mem::size_of::<Superblock>() == 96);
const SUPERBLOCK_CRC_OFFSET: usize = 88;

/// One zone's persistent state.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct ZoneRecord {
    pub state: u8,
    pub reserved0: [u8; 7],
    /// Blocks written in the zone (zone-relative write pointer).
    pub written_blocks: U64,
    /// Incremented on every update of this record.
    pub update_sequence: U64,
    pub reserved1: U32,
    pub crc32c: U32,
}

/// Bytes of one zone record.
pub const ZONE_RECORD_BYTES: usize = 32;
const _: () = assert!(std::mem::size_of::<ZoneRecord>() == ZONE_RECORD_BYTES);
const ZONE_RECORD_CRC_OFFSET: usize = 28;

/// Why a structure failed to decode.
#[derive(Debug, PartialEq, Eq)]
pub enum DecodeError {
    Short { needed: usize, got: usize },
    Magic([u8; 8]),
    Version(u32),
    Checksum { stored: u32, computed: u32 },
    Field(String),
}

/// Said inside a drive file error ("zone 3 record: checksum ..."), so in words.
impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Short { needed, got } => write!(f, "{got} bytes, needs {needed}"),
            DecodeError::Magic(found) => write!(f, "magic \"{}\", not \"ZRAIDEMU\"", found.escape_ascii()),
            DecodeError::Version(v) => write!(f, "format version {v}, this build reads {DRIVE_FORMAT_VERSION}"),
            DecodeError::Checksum { stored, computed } => {
                write!(f, "checksum {stored:#010x} does not match contents ({computed:#010x})")
            }
            DecodeError::Field(what) => write!(f, "{what}"),
        }
    }
}

impl Superblock {
    pub fn new(geometry: &Geometry, drive_uuid: [u8; 16], landing_seed: u64) -> Self {
        let mut sb = Superblock {
            magic: DRIVE_MAGIC,
            version: DRIVE_FORMAT_VERSION.into(),
            superblock_bytes: (std::mem::size_of::<Superblock>() as u32).into(),
            block_size_bytes: geometry.block_size_bytes.into(),
            metadata_bytes_per_block: geometry.metadata_bytes_per_block.into(),
            zone_size_blocks: geometry.zone_size_blocks.into(),
            zone_capacity_blocks: geometry.zone_capacity_blocks.into(),
            zone_count: geometry.zone_count.into(),
            max_open_zones: geometry.max_open_zones.unwrap_or(NO_LIMIT).into(),
            max_active_zones: geometry.max_active_zones.unwrap_or(NO_LIMIT).into(),
            zone_append_max_blocks: geometry.zone_append_max_blocks.into(),
            max_transfer_blocks: geometry.max_transfer_blocks.into(),
            reserved0: 0.into(),
            drive_uuid,
            landing_seed: landing_seed.into(),
            crc32c: 0.into(),
            reserved1: 0.into(),
        };
        sb.crc32c = crc32c::crc32c(&sb.as_bytes()[..SUPERBLOCK_CRC_OFFSET]).into();
        sb
    }

    /// Decodes and checks a superblock; the geometry is checked separately.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let size = std::mem::size_of::<Superblock>();
        if bytes.len() < size {
            return Err(DecodeError::Short { needed: size, got: bytes.len() });
        }
        let sb = Superblock::read_from_bytes(&bytes[..size])
            .map_err(|_| DecodeError::Short { needed: size, got: bytes.len() })?;
        if sb.magic != DRIVE_MAGIC {
            return Err(DecodeError::Magic(sb.magic));
        }
        if sb.version.get() != DRIVE_FORMAT_VERSION {
            return Err(DecodeError::Version(sb.version.get()));
        }
        let computed = crc32c::crc32c(&sb.as_bytes()[..SUPERBLOCK_CRC_OFFSET]);
        if computed != sb.crc32c.get() {
            return Err(DecodeError::Checksum { stored: sb.crc32c.get(), computed });
        }
        if sb.superblock_bytes.get() as usize != size {
            return Err(DecodeError::Field(format!("superblock size {}", sb.superblock_bytes.get())));
        }
        Ok(sb)
    }

    pub fn geometry(&self) -> Geometry {
        let limit = |v: U32| Some(v.get()).filter(|v| *v != NO_LIMIT);
        Geometry {
            block_size_bytes: self.block_size_bytes.get(),
            metadata_bytes_per_block: self.metadata_bytes_per_block.get(),
            zone_size_blocks: self.zone_size_blocks.get(),
            zone_capacity_blocks: self.zone_capacity_blocks.get(),
            zone_count: self.zone_count.get(),
            max_open_zones: limit(self.max_open_zones),
            max_active_zones: limit(self.max_active_zones),
            zone_append_max_blocks: self.zone_append_max_blocks.get(),
            max_transfer_blocks: self.max_transfer_blocks.get(),
        }
    }
}

impl ZoneRecord {
    pub fn new(state: ZoneState, written_blocks: u64, update_sequence: u64) -> Self {
        let mut record = ZoneRecord {
            state: state.to_nvme(),
            reserved0: [0; 7],
            written_blocks: written_blocks.into(),
            update_sequence: update_sequence.into(),
            reserved1: 0.into(),
            crc32c: 0.into(),
        };
        record.crc32c = crc32c::crc32c(&record.as_bytes()[..ZONE_RECORD_CRC_OFFSET]).into();
        record
    }

    /// Decodes a record and checks it against the zone capacity.
    pub fn decode(bytes: &[u8], zone_capacity_blocks: u64) -> Result<(ZoneState, u64, u64), DecodeError> {
        let record = ZoneRecord::read_from_bytes(bytes)
            .map_err(|_| DecodeError::Short { needed: ZONE_RECORD_BYTES, got: bytes.len() })?;
        let computed = crc32c::crc32c(&record.as_bytes()[..ZONE_RECORD_CRC_OFFSET]);
        if computed != record.crc32c.get() {
            return Err(DecodeError::Checksum { stored: record.crc32c.get(), computed });
        }
        let state = ZoneState::from_nvme(record.state)
            .ok_or_else(|| DecodeError::Field(format!("zone state {:#x}", record.state)))?;
        let written = record.written_blocks.get();
        if written > zone_capacity_blocks {
            return Err(DecodeError::Field(format!("write pointer {written} past capacity {zone_capacity_blocks}")));
        }
        if state == ZoneState::Empty && written != 0 {
            return Err(DecodeError::Field(format!("empty zone with {written} blocks written")));
        }
        Ok((state, written, record.update_sequence.get()))
    }
}

/// Byte offsets of the areas of a drive file of a given geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileLayout {
    pub zone_table_offset: u64,
    pub metadata_offset: u64,
    pub data_offset: u64,
    pub file_bytes: u64,
}

fn align_up(value: u64, align: u64) -> u64 {
    value.div_ceil(align) * align
}

impl FileLayout {
    /// Offsets for a validated geometry; `None` if the file would exceed 64-bit offsets.
    pub fn new(geometry: &Geometry) -> Option<Self> {
        let zones = u64::from(geometry.zone_count);
        let blocks = zones.checked_mul(geometry.zone_capacity_blocks)?;
        let zone_table_offset = SUPERBLOCK_REGION_BYTES;
        let metadata_offset =
            align_up(zone_table_offset.checked_add(zones.checked_mul(ZONE_RECORD_BYTES as u64)?)?, AREA_ALIGN_BYTES);
        let metadata_bytes = blocks.checked_mul(u64::from(geometry.metadata_bytes_per_block))?;
        let data_offset = align_up(
            metadata_offset.checked_add(metadata_bytes)?,
            AREA_ALIGN_BYTES.max(u64::from(geometry.block_size_bytes)),
        );
        let file_bytes = data_offset.checked_add(blocks.checked_mul(u64::from(geometry.block_size_bytes))?)?;
        Some(FileLayout { zone_table_offset, metadata_offset, data_offset, file_bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn superblock_round_trips() {
        let g = Geometry::small(6, 128, 100);
        let sb = Superblock::new(&g, [7; 16], 42);
        let decoded = Superblock::decode(sb.as_bytes()).unwrap();
        assert_eq!(decoded.geometry(), g);
        assert_eq!(decoded.landing_seed.get(), 42);
    }

    #[test]
    fn decode_errors_read_as_words() {
        let record = ZoneRecord::new(ZoneState::Closed, 17, 3);
        let mut bytes = record.as_bytes().to_vec();
        bytes[0] ^= 1;
        let e = ZoneRecord::decode(&bytes, 100).unwrap_err();
        assert!(e.to_string().starts_with("checksum 0x"), "{e}");
        assert_eq!(DecodeError::Short { needed: 32, got: 4 }.to_string(), "4 bytes, needs 32");
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let sb = Superblock::new(&Geometry::small(6, 128, 100), [7; 16], 42);
        let bytes = sb.as_bytes().to_vec();
        for bit in 0..SUPERBLOCK_CRC_OFFSET * 8 + 32 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(Superblock::decode(&flipped).is_err(), "superblock bit {bit} flip undetected");
        }
        let record = ZoneRecord::new(ZoneState::Closed, 17, 3);
        let bytes = record.as_bytes().to_vec();
        for bit in 0..ZONE_RECORD_BYTES * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(ZoneRecord::decode(&flipped, 100).is_err(), "zone record bit {bit} flip undetected");
        }
    }

    #[test]
    fn layout_areas_do_not_overlap() {
        let g = Geometry::small(31, 16384, 15872);
        let layout = FileLayout::new(&g).unwrap();
        assert!(layout.metadata_offset >= layout.zone_table_offset + 31 * ZONE_RECORD_BYTES as u64);
        assert!(layout.data_offset >= layout.metadata_offset + 31 * 15872 * 64);
        assert_eq!(layout.data_offset % 4096, 0);
        assert_eq!(layout.file_bytes, layout.data_offset + 31 * 15872 * 4096);
    }

    proptest! {
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), cap in 0u64..1000) {
            let _ = Superblock::decode(&bytes);
            let _ = ZoneRecord::decode(&bytes[..bytes.len().min(ZONE_RECORD_BYTES)], cap);
        }
    }
}
