//! Structure-aware fuzzing of every decoder of the format module (helpers in the
//! `zapraid-fuzz` crate): valid encodings from the real encoders with random fields, then
//! mutated (bits, bytes, fields set to edge values or moved by one, cut short, extended)
//! and re-checksummed, so that the field checks behind the magic and CRC32C are reached.
//! Every decoder must answer with a value that is sound (it re-encodes to itself and keeps
//! its structure's rules) or a `DecodeError`, never panic; and for each decoder a test sets
//! one field to an invalid value, re-checksums, and gets that field's error.

use super::DecodeError;

mod checkpoint;
mod footers;
mod records;
mod segment_header;
mod superblock;

impl zapraid_fuzz::FieldError for DecodeError {
    fn field_reason(&self) -> Option<&str> {
        match self {
            DecodeError::Field(reason) => Some(reason),
            _ => None,
        }
    }
}
