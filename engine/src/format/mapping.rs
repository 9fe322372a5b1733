//! The mapping block: one page of the L2P table (`l2p`) as it is written to the log when
//! the table is offloaded. A header (magic, version, CRC32C, array UUID, page index) and
//! as many 4-byte entries as the rest of the block holds, little-endian. Logs name a
//! mapping block's LBA field by its page (`LbaField`).

use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::record::{read, DecodeError, FORMAT_VERSION};

pub const MAPPING_BLOCK_MAGIC: [u8; 8] = *b"ZRAIDMAP";

#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct MappingBlockHeader {
    pub magic: [u8; 8],
    pub version: U32,
    /// CRC32C of the block after this field (the rest of the header and every entry).
    pub crc32c: U32,
    pub array_uuid: [u8; 16],
    /// Which page of the table: entries for LBAs `page * entries_per_block ..`.
    pub page: U64,
    /// Entries in the block (`mapping_entries_per_block`).
    pub entries: U32,
    pub reserved: U32,
}

pub const MAPPING_BLOCK_HEADER_BYTES: usize = 48;
const _: () = assert!(std::mem::size_of::<MappingBlockHeader>() == MAPPING_BLOCK_HEADER_BYTES);
/// Bytes of one entry (a packed physical address, `l2p`).
pub const MAPPING_ENTRY_BYTES: usize = 4;
/// Where the CRC starts: everything after the magic, version and CRC fields.
const MAPPING_CRC_START: usize = 16;

/// L2P entries one mapping block holds.
pub fn mapping_entries_per_block(block_size_bytes: u32) -> usize {
    (block_size_bytes as usize).saturating_sub(MAPPING_BLOCK_HEADER_BYTES) / MAPPING_ENTRY_BYTES
}

/// Writes page `page`'s entries into `block` (a whole block, zero-filled past them).
pub fn encode_mapping_block(array_uuid: [u8; 16], page: u64, entries: &[u32], block: &mut [u8]) {
    debug_assert!(entries.len() <= mapping_entries_per_block(block.len() as u32));
    block.fill(0);
    let header = MappingBlockHeader {
        magic: MAPPING_BLOCK_MAGIC,
        version: FORMAT_VERSION.into(),
        crc32c: 0.into(),
        array_uuid,
        page: page.into(),
        entries: (entries.len() as u32).into(),
        reserved: 0.into(),
    };
    block[..MAPPING_BLOCK_HEADER_BYTES].copy_from_slice(header.as_bytes());
    for (i, entry) in entries.iter().enumerate() {
        let at = MAPPING_BLOCK_HEADER_BYTES + i * MAPPING_ENTRY_BYTES;
        block[at..at + MAPPING_ENTRY_BYTES].copy_from_slice(&entry.to_le_bytes());
    }
    let crc = crate::crc::crc32c(&block[MAPPING_CRC_START..]);
    block[MAPPING_CRC_START - 4..MAPPING_CRC_START].copy_from_slice(&crc.to_le_bytes());
}

/// The entries of a mapping block, checked to be page `page` of array `array_uuid`.
pub fn decode_mapping_block(block: &[u8], array_uuid: [u8; 16], page: u64) -> Result<Vec<u32>, DecodeError> {
    let header: MappingBlockHeader = read(block)?;
    if header.magic != MAPPING_BLOCK_MAGIC {
        return Err(DecodeError::Magic);
    }
    if header.version.get() != FORMAT_VERSION {
        return Err(DecodeError::Version(header.version.get()));
    }
    let computed = crate::crc::crc32c(&block[MAPPING_CRC_START..]);
    if header.crc32c.get() != computed {
        return Err(DecodeError::Checksum { stored: header.crc32c.get(), computed });
    }
    if header.array_uuid != array_uuid {
        return Err(DecodeError::Field("mapping block of another array".into()));
    }
    if header.page.get() != page {
        return Err(DecodeError::Field(format!("mapping block of page {}, expected {page}", header.page.get())));
    }
    let entries = header.entries.get() as usize;
    if entries > mapping_entries_per_block(block.len() as u32) {
        return Err(DecodeError::Field(format!("{entries} entries do not fit the block")));
    }
    Ok((0..entries)
        .map(|i| {
            let at = MAPPING_BLOCK_HEADER_BYTES + i * MAPPING_ENTRY_BYTES;
            u32::from_le_bytes(block[at..at + MAPPING_ENTRY_BYTES].try_into().expect("4 bytes"))
        })
        .collect())
}

/// An LBA field as logs show it: a logical block's number, "mapping page N" for a mapping
/// block (`MAPPING_LBA_FLAG` with the page; its raw value, 2^62 + N, means nothing to a
/// reader), "no LBA" for `NO_LBA`. For `tracing` fields: `lba = %LbaField(lba)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LbaField(pub u64);

impl std::fmt::Display for LbaField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match super::mapping_page_of(self.0) {
            Some(page) => write!(f, "mapping page {page}"),
            None if self.0 == super::NO_LBA => f.write_str("no LBA"),
            None => write!(f, "{}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_lba_field_reads_as_a_block_or_a_mapping_page() {
        assert_eq!(LbaField(4_611_686_018_427_387_906).to_string(), "mapping page 2");
        assert_eq!(LbaField(super::super::MAPPING_LBA_FLAG).to_string(), "mapping page 0");
        assert_eq!(LbaField(1234).to_string(), "1234");
        assert_eq!(LbaField(super::super::NO_LBA).to_string(), "no LBA");
    }

    const BLOCK_BYTES: usize = 4096;
    const UUID: [u8; 16] = [7; 16];

    #[test]
    fn round_trips() {
        let per_block = mapping_entries_per_block(BLOCK_BYTES as u32);
        assert_eq!(per_block, 1012);
        let entries: Vec<u32> = (0..per_block as u32).map(|i| i * 3).collect();
        let mut block = vec![0; BLOCK_BYTES];
        encode_mapping_block(UUID, 42, &entries, &mut block);
        assert_eq!(decode_mapping_block(&block, UUID, 42).unwrap(), entries);
        assert!(decode_mapping_block(&block, UUID, 41).is_err(), "another page");
        assert!(decode_mapping_block(&block, [8; 16], 42).is_err(), "another array");
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let per_block = mapping_entries_per_block(BLOCK_BYTES as u32);
        let entries: Vec<u32> = (0..per_block as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
        let mut block = vec![0; BLOCK_BYTES];
        encode_mapping_block(UUID, 9, &entries, &mut block);
        for bit in 0..BLOCK_BYTES * 8 {
            let mut flipped = block.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_mapping_block(&flipped, UUID, 9).is_err(), "flip of bit {bit} not detected");
        }
    }
}
