//! What every on-disk record shares: the format version, the most drives an array holds,
//! why a record did not decode (`DecodeError`), and the reading of a fixed-size record with
//! its magic, version and CRC32C checked.

use zerocopy::{FromBytes, Immutable, KnownLayout};

/// Version of every structure in this module.
pub const FORMAT_VERSION: u32 = 1;
/// Most drives in a stripe (k + m), bounded by the segment header's zone and lane tables;
/// a classic array (as wide as its stripes) has at most this many drives. Data on the
/// drives depends on it (the tables' sizes): never to change.
pub const MAX_DRIVES: usize = 36;
/// Most drives in a declustered array (N, wider than its stripes): the superblock's failed
/// and rebuilding drives are bits of a u64. Data on the drives depends on it: never to
/// change.
pub const MAX_ARRAY_DRIVES: usize = 64;

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

pub(super) fn read<T: FromBytes + KnownLayout + Immutable>(bytes: &[u8]) -> Result<T, DecodeError> {
    let size = std::mem::size_of::<T>();
    match bytes.get(..size) {
        Some(prefix) => T::read_from_bytes(prefix).map_err(|_| DecodeError::Short { needed: size, got: bytes.len() }),
        None => Err(DecodeError::Short { needed: size, got: bytes.len() }),
    }
}

pub(super) fn check_crc(covered: &[u8], stored: u32) -> Result<(), DecodeError> {
    let computed = crate::crc::crc32c(covered);
    if computed == stored {
        Ok(())
    } else {
        Err(DecodeError::Checksum { stored, computed })
    }
}

/// Magic, version and CRC of a structure sealed with all three.
pub(super) fn check_sealed(
    magic: [u8; 8],
    expected: [u8; 8],
    version: u32,
    covered: &[u8],
    crc: u32,
) -> Result<(), DecodeError> {
    if magic != expected {
        return Err(DecodeError::Magic);
    }
    if version != FORMAT_VERSION {
        return Err(DecodeError::Version(version));
    }
    check_crc(covered, crc)
}

/// Whether a decoded drive count, drive index and data + parity split describe an array
/// this format can hold (the sums are widened: the fields are untrusted).
pub(super) fn drive_shape_is_valid(drives: usize, drive_index: u32, data_chunks: u32, parity_chunks: u32) -> bool {
    (1..=MAX_DRIVES).contains(&drives)
        && (drive_index as usize) < drives
        && u64::from(data_chunks) + u64::from(parity_chunks) == drives as u64
}
