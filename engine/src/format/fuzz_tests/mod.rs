//! Structure-aware fuzzing of every decoder of the format module (helpers in the
//! `zapraid-fuzz` crate): valid encodings from the real encoders with random fields, then
//! mutated (bits, bytes, fields set to edge values or moved by one, cut short, extended)
//! and re-checksummed, so that the field checks behind the magic and CRC32C are reached.
//! Every decoder must answer with a value that is sound (it re-encodes to itself and keeps
//! its structure's rules) or a `DecodeError`, never panic; and for each decoder a test sets
//! one field to an invalid value, re-checksums, and gets that field's error.

use std::fmt::Debug;

use zapraid_fuzz::Verdict;

use super::DecodeError;

mod checkpoint;
mod footers;
mod records;

/// The named fields of a zerocopy struct encoded at `base`, as `Field`s (offsets and widths
/// from the type itself, so they follow the layout).
macro_rules! fields_of {
    ($t:ty, $base:expr; $($f:ident),+ $(,)?) => {{
        let zeroed = <$t as zerocopy::FromZeros>::new_zeroed();
        vec![$(zapraid_fuzz::Field::new($base + std::mem::offset_of!($t, $f), std::mem::size_of_val(&zeroed.$f))),+]
    }};
}
use fields_of;

/// How a decoder's answer counts for `zapraid_fuzz::fuzz` (the caller checks an accepted
/// value).
fn verdict<T>(result: &Result<T, DecodeError>) -> Verdict {
    match result {
        Ok(_) => Verdict::Accepted,
        Err(DecodeError::Field(_)) => Verdict::FieldError,
        Err(_) => Verdict::OtherError,
    }
}

/// `result` is a field-level error whose reason says `what` (not a length, magic,
/// version or checksum error: the input passed those).
#[track_caller]
fn assert_field_error<T: Debug>(result: Result<T, DecodeError>, what: &str) {
    match result {
        Err(DecodeError::Field(reason)) if reason.contains(what) => {}
        other => panic!("expected a field error saying {what:?}, got {other:?}"),
    }
}
