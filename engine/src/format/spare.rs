//! The spare record (zone 0 of a hot spare): "this drive is a spare of array <uuid>
//! <name>"; byte table in docs/FORMAT.md. It is its own record kind, with its own magic,
//! not an array superblock with a role flag: a zapraid that knows no spares reads only
//! `ZRAIDARR` blocks, so it never takes a spare for a member (it sees a drive whose zone 0
//! is written without a valid superblock, which it refuses to format or assemble), and a
//! spare, which has no place in the array, never carries a drive index or a generation
//! that could outrank a member's superblock. Decoding checks magic, version, size, CRC32C
//! and the fields' rules: a record read from a drive is untrusted.

use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::record::{check_sealed, read, DecodeError, FORMAT_VERSION, MAX_DRIVES};

pub const SPARE_RECORD_MAGIC: [u8; 8] = *b"ZRAIDSPR";

/// What a spare's `drive_index` always holds: it has no place in the array until a
/// rebuild makes it a member (then its zone 0 holds an array superblock instead).
pub const SPARE_DRIVE_INDEX: u32 = u32::MAX;

/// A hot spare's record, written by `zapraid format --spare` or `zapraid add-spare` as the
/// first blocks of zone 0 of the spare.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct SpareRecord {
    pub magic: [u8; 8],
    pub version: U32,
    pub record_bytes: U32,
    /// The array this drive stands by for.
    pub array_uuid: [u8; 16],
    /// Always `SPARE_DRIVE_INDEX`.
    pub drive_index: U32,
    /// The array's drives (k + m) when the spare was added, for people.
    pub drive_count: U32,
    pub block_size_bytes: U32,
    pub reserved0: U32,
    /// When the drive was made a spare.
    pub created_unix_s: U64,
    /// The array's name, UTF-8, zero-padded.
    pub name: [u8; 32],
    pub reserved1: U32,
    pub crc32c: U32,
}

pub const SPARE_RECORD_BYTES: usize = 96;
const _: () = assert!(std::mem::size_of::<SpareRecord>() == SPARE_RECORD_BYTES);

impl SpareRecord {
    /// A spare record of array `array_uuid` named `name` (at most 32 bytes: longer is cut).
    pub fn new(array_uuid: [u8; 16], name: &str, drive_count: u32, block_size_bytes: u32, created_unix_s: u64) -> Self {
        let mut padded = [0u8; 32];
        let bytes = name.as_bytes();
        let len = bytes.len().min(padded.len());
        padded[..len].copy_from_slice(&bytes[..len]);
        SpareRecord {
            magic: SPARE_RECORD_MAGIC,
            version: FORMAT_VERSION.into(),
            record_bytes: (SPARE_RECORD_BYTES as u32).into(),
            array_uuid,
            drive_index: SPARE_DRIVE_INDEX.into(),
            drive_count: drive_count.into(),
            block_size_bytes: block_size_bytes.into(),
            reserved0: 0.into(),
            created_unix_s: created_unix_s.into(),
            name: padded,
            reserved1: 0.into(),
            crc32c: 0.into(),
        }
        .seal()
    }

    /// Seals the record: sets magic, version, size and the CRC over everything before it.
    pub fn seal(mut self) -> Self {
        self.magic = SPARE_RECORD_MAGIC;
        self.version = FORMAT_VERSION.into();
        self.record_bytes = (SPARE_RECORD_BYTES as u32).into();
        self.crc32c = crate::crc::crc32c(&self.as_bytes()[..SPARE_RECORD_BYTES - 4]).into();
        self
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let r: SpareRecord = read(bytes)?;
        check_sealed(
            r.magic,
            SPARE_RECORD_MAGIC,
            r.version.get(),
            &r.as_bytes()[..SPARE_RECORD_BYTES - 4],
            r.crc32c.get(),
        )?;
        let drives = r.drive_count.get() as usize;
        if r.record_bytes.get() as usize != SPARE_RECORD_BYTES
            || r.drive_index.get() != SPARE_DRIVE_INDEX
            || drives == 0
            || drives > MAX_DRIVES
            || r.block_size_bytes.get() == 0
        {
            return Err(DecodeError::Field(format!(
                "inconsistent spare record: {} bytes, drive index {}, {drives} drives, blocks of {} bytes",
                r.record_bytes.get(),
                r.drive_index.get(),
                r.block_size_bytes.get()
            )));
        }
        Ok(r)
    }

    /// The array's name as text (up to the first zero byte; invalid UTF-8 shown lossily).
    pub fn name(&self) -> String {
        let end = self.name.iter().position(|b| *b == 0).unwrap_or(self.name.len());
        String::from_utf8_lossy(&self.name[..end]).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::superblock::{ArraySuperblock, ARRAY_SUPERBLOCK_MAGIC};
    use proptest::prelude::*;

    fn record() -> SpareRecord {
        SpareRecord::new([7; 16], "tank", 4, 4096, 1_700_000_000)
    }

    #[test]
    fn spare_record_round_trips() {
        let r = record();
        let decoded = SpareRecord::decode(r.as_bytes()).unwrap();
        assert_eq!(decoded.as_bytes(), r.as_bytes());
        assert_eq!((decoded.array_uuid, decoded.name()), ([7; 16], "tank".to_string()));
        assert_eq!((decoded.drive_count.get(), decoded.block_size_bytes.get()), (4, 4096));
        assert_eq!(decoded.drive_index.get(), SPARE_DRIVE_INDEX);
        // In a block, as it is written: the rest of the block does not matter.
        let mut block = vec![0xa5u8; 4096];
        block[..SPARE_RECORD_BYTES].copy_from_slice(r.as_bytes());
        assert!(SpareRecord::decode(&block).is_ok());
    }

    #[test]
    fn every_single_bit_flip_of_a_spare_record_is_detected() {
        let r = record();
        let bytes = r.as_bytes();
        for bit in 0..bytes.len() * 8 {
            let mut b = bytes.to_vec();
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(SpareRecord::decode(&b).is_err(), "bit {bit} flip went undetected");
        }
    }

    /// Sealed but breaking a rule: not a spare record.
    #[test]
    fn a_sealed_record_with_bad_fields_is_refused() {
        let mut r = record();
        r.drive_index = 0.into();
        assert!(matches!(SpareRecord::decode(r.seal().as_bytes()), Err(DecodeError::Field(_))));
        let mut r = record();
        r.drive_count = 0.into();
        assert!(matches!(SpareRecord::decode(r.seal().as_bytes()), Err(DecodeError::Field(_))));
        let mut r = record();
        r.drive_count = (MAX_DRIVES as u32 + 1).into();
        assert!(matches!(SpareRecord::decode(r.seal().as_bytes()), Err(DecodeError::Field(_))));
    }

    /// An array superblock is not a spare record, and a spare record not a superblock.
    #[test]
    fn spare_records_and_superblocks_are_told_apart() {
        let mut block = vec![0u8; 512];
        block[..SPARE_RECORD_BYTES].copy_from_slice(record().as_bytes());
        assert_eq!(ArraySuperblock::decode(&block).err(), Some(DecodeError::Magic));
        let mut block = vec![0u8; 512];
        block[..8].copy_from_slice(&ARRAY_SUPERBLOCK_MAGIC);
        assert_eq!(SpareRecord::decode(&block).err(), Some(DecodeError::Magic));
        assert!(matches!(SpareRecord::decode(&block[..10]), Err(DecodeError::Short { .. })));
    }

    proptest! {
        #[test]
        fn spare_record_decoding_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = SpareRecord::decode(&bytes);
        }
    }
}
