//! On-disk format of a file-backed emulated drive (documented in docs/FORMAT.md).
//!
//! A drive file holds a superblock (geometry, identity, seed), a table of zone records
//! (state and write pointer of every zone), a per-block metadata area, a data area and a
//! second copy of the zone table, at offsets derived from the geometry alone. The
//! superblock has a second copy too, in the same region. All integers are little-endian;
//! every structure carries a CRC32C, and decoding never panics on any input.
//!
//! Invariant: both copies of a structure are written with the same contents (the
//! primary first), so a damaged or torn copy falls back to its twin: the superblock to
//! whichever copy is valid, a zone record to the valid copy with the higher
//! `update_sequence`. Files made before the copies existed (zeros at the superblock
//! copy, and the file ends after the data area) still open.

use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::geometry::Geometry;
use crate::zone::ZoneState;

/// First bytes of every emulated drive file.
pub const DRIVE_MAGIC: [u8; 8] = *b"ZRAIDEMU";
/// Version of the layout this build writes and reads.
pub const DRIVE_FORMAT_VERSION: u32 = 1;
/// Bytes reserved for the superblock (both copies) at the start of the file.
pub const SUPERBLOCK_REGION_BYTES: u64 = 4096;
/// Where the superblock's second copy starts, inside the superblock region.
pub const SUPERBLOCK_COPY_OFFSET_BYTES: u64 = 2048;
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
const _: () = assert!(
    std::mem::size_of::<Superblock>() as u64 <= SUPERBLOCK_COPY_OFFSET_BYTES
        && SUPERBLOCK_COPY_OFFSET_BYTES + std::mem::size_of::<Superblock>() as u64 <= SUPERBLOCK_REGION_BYTES
);
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

    /// The superblock of a file's superblock region (or as much of it as the file holds):
    /// the primary copy if it is valid, else the second copy (then `true`); if neither
    /// is, the primary's error.
    pub fn decode_region(region: &[u8]) -> Result<(Self, bool), DecodeError> {
        let primary = match Superblock::decode(region) {
            Ok(sb) => return Ok((sb, false)),
            Err(e) => e,
        };
        let copy = region.get(SUPERBLOCK_COPY_OFFSET_BYTES as usize..).unwrap_or_default();
        Superblock::decode(copy).map(|sb| (sb, true)).map_err(|_| primary)
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
            // A drive file takes any count of blocks: the granule is a passthrough quirk
            // (`Geometry::transfer_granule_blocks`), not recorded here.
            transfer_granule_blocks: 0,
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

    /// A zone's record from its two copies (`copy` is `None` in a file without the zone
    /// table copy): the valid one with the higher update sequence (the primary on a tie);
    /// if neither is valid, the primary's error.
    pub fn decode_pair(
        primary: &[u8],
        copy: Option<&[u8]>,
        zone_capacity_blocks: u64,
    ) -> Result<(ZoneState, u64, u64), DecodeError> {
        let first = ZoneRecord::decode(primary, zone_capacity_blocks);
        let second = copy.map(|bytes| ZoneRecord::decode(bytes, zone_capacity_blocks));
        match (first, second) {
            (Ok(a), Some(Ok(b))) => Ok(if b.2 > a.2 { b } else { a }),
            (Ok(a), _) => Ok(a),
            (Err(_), Some(Ok(b))) => Ok(b),
            (Err(e), _) => Err(e),
        }
    }
}

/// Byte offsets of the areas of a drive file of a given geometry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileLayout {
    pub zone_table_offset: u64,
    pub metadata_offset: u64,
    pub data_offset: u64,
    /// The second copy of the zone table, after the data area.
    pub zone_table_copy_offset: u64,
    /// The length a file needs to open: the end of the data area (files made before the
    /// zone table copy end there).
    pub minimum_file_bytes: u64,
    /// The length of a file with every area, as `create` makes it.
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
        let zone_table_bytes = zones.checked_mul(ZONE_RECORD_BYTES as u64)?;
        let metadata_offset = align_up(zone_table_offset.checked_add(zone_table_bytes)?, AREA_ALIGN_BYTES);
        let metadata_bytes = blocks.checked_mul(u64::from(geometry.metadata_bytes_per_block))?;
        let data_offset = align_up(
            metadata_offset.checked_add(metadata_bytes)?,
            AREA_ALIGN_BYTES.max(u64::from(geometry.block_size_bytes)),
        );
        let minimum_file_bytes = data_offset.checked_add(blocks.checked_mul(u64::from(geometry.block_size_bytes))?)?;
        let zone_table_copy_offset = align_up(minimum_file_bytes, AREA_ALIGN_BYTES);
        let file_bytes = zone_table_copy_offset.checked_add(zone_table_bytes)?;
        Some(FileLayout {
            zone_table_offset,
            metadata_offset,
            data_offset,
            zone_table_copy_offset,
            minimum_file_bytes,
            file_bytes,
        })
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
        assert_eq!(layout.minimum_file_bytes, layout.data_offset + 31 * 15872 * 4096);
        assert_eq!(layout.zone_table_copy_offset % 4096, 0);
        assert!(layout.zone_table_copy_offset >= layout.minimum_file_bytes);
        assert_eq!(layout.file_bytes, layout.zone_table_copy_offset + 31 * ZONE_RECORD_BYTES as u64);
    }

    #[test]
    fn a_damaged_copy_falls_back_to_its_twin() {
        let g = Geometry::small(6, 128, 100);
        let sb = Superblock::new(&g, [7; 16], 42);
        let mut region = vec![0u8; SUPERBLOCK_REGION_BYTES as usize];
        region[..96].copy_from_slice(sb.as_bytes());
        // A region of a file made before the copy: the primary alone.
        assert!(!Superblock::decode_region(&region).unwrap().1);
        let copy_at = SUPERBLOCK_COPY_OFFSET_BYTES as usize;
        region.copy_within(..96, copy_at);
        region[20] ^= 1;
        let (decoded, from_copy) = Superblock::decode_region(&region).unwrap();
        assert!(from_copy);
        assert_eq!(decoded.geometry(), g);
        region[copy_at + 20] ^= 1;
        assert!(matches!(Superblock::decode_region(&region), Err(DecodeError::Checksum { .. })));

        let older = ZoneRecord::new(ZoneState::Closed, 17, 3);
        let newer = ZoneRecord::new(ZoneState::Full, 100, 4);
        let pick = |a: &ZoneRecord, b: Option<&ZoneRecord>| {
            ZoneRecord::decode_pair(a.as_bytes(), b.map(|b| b.as_bytes()), 100).map(|(_, written, _)| written)
        };
        assert_eq!(pick(&older, Some(&newer)), Ok(100));
        assert_eq!(pick(&newer, Some(&older)), Ok(100));
        assert_eq!(pick(&older, None), Ok(17));
        let mut torn = newer;
        torn.written_blocks = 99.into();
        assert_eq!(pick(&torn, Some(&older)), Ok(17));
        assert!(pick(&torn, Some(&torn)).is_err());
    }

    proptest! {
        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), cap in 0u64..1000) {
            let _ = Superblock::decode(&bytes);
            let _ = Superblock::decode_region(&bytes);
            let _ = ZoneRecord::decode(&bytes[..bytes.len().min(ZONE_RECORD_BYTES)], cap);
        }
    }
}

#[cfg(test)]
#[path = "drive_file_fuzz_tests.rs"]
mod fuzz_tests;
