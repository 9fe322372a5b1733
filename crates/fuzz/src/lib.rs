//! Test-only helpers for structure-aware fuzzing of zapraid's on-disk decoders (the engine's
//! and the zoned-device layer's tests use them; nothing else depends on this crate).
//!
//! Uniform random bytes never pass a structure's magic and CRC32C, so the field checks
//! behind them are never reached. Here an input starts as a valid encoding (the real
//! encoder, random field values), is mutated (bits and bytes flipped or set, whole fields
//! set to edge values or moved by one, the encoding cut short or extended) and is then
//! re-checksummed by the caller's `reseal`, so that the decoder gets past its checksum and
//! judges the fields. `fuzz` runs a decoder over such inputs: a panic fails the test (with
//! proptest's smallest failing input), and a run of a few hundred inputs or more that never
//! reached a field check, or never had an input accepted, fails too, as it fuzzed nothing
//! past the checksum.
//!
//! The number of inputs per decoder is `ZAPRAID_FUZZ_CASES` (default `DEFAULT_CASES`):
//! `make test` runs the default, `make soak` many more.

use std::cell::Cell;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};

/// Inputs per decoder when `ZAPRAID_FUZZ_CASES` is not set: a few seconds in all in debug.
pub const DEFAULT_CASES: u32 = 512;
/// Inputs from which a run must have seen both an accepted input and a field-level refusal
/// (every decoder here refuses more than 1% of its inputs by a field check).
const MIN_CASES_FOR_COUNTS: u32 = 256;
/// Most mutations applied to one valid encoding.
const MAX_MUTATIONS: usize = 4;
/// Most bytes one mutation appends.
const MAX_EXTENSION_BYTES: usize = 64;

/// Inputs per decoder: `ZAPRAID_FUZZ_CASES`, or `DEFAULT_CASES`.
pub fn cases() -> u32 {
    std::env::var("ZAPRAID_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CASES)
}

/// One field of an encoding: its offset and width in bytes. Fields wider than 8 bytes
/// (magics, UUIDs, tables) are mutated in their first 8 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub offset: usize,
    pub width: usize,
}

impl Field {
    pub fn new(offset: usize, width: usize) -> Self {
        debug_assert!(width > 0);
        Field { offset, width }
    }

    /// The same field `by` bytes further on (a field of the n-th record of a table).
    pub fn shifted(self, by: usize) -> Self {
        Field { offset: self.offset + by, ..self }
    }
}

/// A valid encoding, where its fields are, and what else its decoder is given (the array
/// and page a mapping block must name, the place of a stop footer, ...).
#[derive(Clone, Debug)]
pub struct Encoded<C = ()> {
    pub bytes: Vec<u8>,
    pub fields: Vec<Field>,
    pub context: C,
}

/// One change to an encoding. Places are picks (`pick(n)`: reduced to the encoding's bytes
/// or fields when applied), so one mutation fits every length.
#[derive(Clone, Debug)]
pub enum Mutation {
    FlipBit {
        at: usize,
        bit: u8,
    },
    SetByte {
        at: usize,
        value: u8,
    },
    /// The field set to `value`, little-endian, cut to its width (`u64::MAX` is the
    /// width's largest value).
    SetField {
        field: usize,
        value: u64,
    },
    /// The field moved by a small amount, wrapping at its width: off-by-one values.
    NudgeField {
        field: usize,
        delta: i8,
    },
    /// The encoding cut to `to` of its length.
    Truncate {
        to: usize,
    },
    Extend {
        bytes: Vec<u8>,
    },
}

/// Values a field is set to: the edges of every width, small counts, powers of two, any.
fn field_value() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        Just(u64::from(u32::MAX)),
        Just(u64::MAX - 1),
        0u64..64,
        (0u32..64).prop_map(|shift| 1u64 << shift),
        any::<u64>(),
    ]
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => (any::<usize>(), 0u8..8).prop_map(|(at, bit)| Mutation::FlipBit { at, bit }),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(at, value)| Mutation::SetByte { at, value }),
        4 => (any::<usize>(), field_value()).prop_map(|(field, value)| Mutation::SetField { field, value }),
        2 => (any::<usize>(), -2i8..=2).prop_map(|(field, delta)| Mutation::NudgeField { field, delta }),
        1 => any::<usize>().prop_map(|to| Mutation::Truncate { to }),
        1 => proptest::collection::vec(any::<u8>(), 1..=MAX_EXTENSION_BYTES)
            .prop_map(|bytes| Mutation::Extend { bytes }),
    ]
}

/// None to `MAX_MUTATIONS` mutations (none: the valid encoding itself must decode).
pub fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    proptest::collection::vec(mutation(), 0..=MAX_MUTATIONS)
}

/// The bytes of a field as a little-endian value (at most its first 8 bytes), and how
/// many bytes that is; None if the encoding no longer holds the field (cut short).
fn field_bytes(bytes: &mut [u8], field: Field) -> Option<&mut [u8]> {
    bytes.get_mut(field.offset..field.offset + field.width.min(8))
}

/// A pick reduced to one of `n` places (`n` > 0).
fn pick(raw: usize, n: usize) -> usize {
    debug_assert!(n > 0);
    raw % n
}

/// `encoded` with `mutations` applied in order (the caller reseals it).
pub fn apply<C>(encoded: &Encoded<C>, mutations: &[Mutation]) -> Vec<u8> {
    let mut bytes = encoded.bytes.clone();
    for m in mutations {
        match m {
            Mutation::FlipBit { at, bit } if !bytes.is_empty() => {
                let i = pick(*at, bytes.len());
                bytes[i] ^= 1 << bit;
            }
            Mutation::SetByte { at, value } if !bytes.is_empty() => {
                let i = pick(*at, bytes.len());
                bytes[i] = *value;
            }
            Mutation::SetField { field, value } if !encoded.fields.is_empty() => {
                let field = encoded.fields[pick(*field, encoded.fields.len())];
                if let Some(target) = field_bytes(&mut bytes, field) {
                    let width = target.len();
                    target.copy_from_slice(&value.to_le_bytes()[..width]);
                }
            }
            Mutation::NudgeField { field, delta } if !encoded.fields.is_empty() => {
                let field = encoded.fields[pick(*field, encoded.fields.len())];
                if let Some(target) = field_bytes(&mut bytes, field) {
                    let width = target.len();
                    let mut value = [0u8; 8];
                    value[..width].copy_from_slice(target);
                    let moved = u64::from_le_bytes(value).wrapping_add_signed(i64::from(*delta));
                    target.copy_from_slice(&moved.to_le_bytes()[..width]);
                }
            }
            Mutation::Truncate { to } => {
                let len = pick(*to, bytes.len() + 1);
                bytes.truncate(len);
            }
            Mutation::Extend { bytes: more } => bytes.extend_from_slice(more),
            // A mutation of bytes or fields an encoding cut to nothing no longer has.
            Mutation::FlipBit { .. } | Mutation::SetByte { .. } => {}
            Mutation::SetField { .. } | Mutation::NudgeField { .. } => {}
        }
    }
    bytes
}

/// Writes the CRC32C of `bytes[covered]` little-endian at `at`, as far as the (possibly
/// cut) bytes hold either: a reseal of a cut encoding reseals what is left.
pub fn put_crc32c(bytes: &mut [u8], at: usize, covered: std::ops::Range<usize>) {
    let end = covered.end.min(bytes.len());
    let start = covered.start.min(end);
    let crc = crc32c::crc32c(&bytes[start..end]);
    if let Some(field) = bytes.get_mut(at..at + 4) {
        field.copy_from_slice(&crc.to_le_bytes());
    }
}

/// A value of `strategy`, the same on every run: the valid encoding a test of one field's
/// check starts from.
pub fn example<S: Strategy>(strategy: S) -> S::Value {
    let mut runner = TestRunner::deterministic();
    strategy.new_tree(&mut runner).expect("the strategy gives a value").current()
}

/// A decoder's error type, as the fuzz runs tell a field check's refusal from the others.
pub trait FieldError {
    /// The reason, when a field broke a rule (after the length, magic, version and
    /// checksum passed).
    fn field_reason(&self) -> Option<&str>;
}

/// How a decoder's answer counts for `fuzz` (the caller checks an accepted value).
pub fn verdict<T, E: FieldError>(result: &Result<T, E>) -> Verdict {
    match result {
        Ok(_) => Verdict::Accepted,
        Err(e) if e.field_reason().is_some() => Verdict::FieldError,
        Err(_) => Verdict::OtherError,
    }
}

/// `result` is a field-level error whose reason says `what` (not a length, magic, version
/// or checksum error: the input passed those).
#[track_caller]
pub fn assert_field_error<T: std::fmt::Debug, E: FieldError + std::fmt::Debug>(result: Result<T, E>, what: &str) {
    match &result {
        Err(e) if e.field_reason().is_some_and(|reason| reason.contains(what)) => {}
        _ => panic!("expected a field error saying {what:?}, got {result:?}"),
    }
}

/// The named fields of a zerocopy struct encoded at `base`, as `Field`s (offsets and
/// widths from the type itself, so they follow the layout).
#[macro_export]
macro_rules! fields_of {
    ($t:ty, $base:expr; $($f:ident),+ $(,)?) => {{
        let zeroed = <$t as $crate::__zerocopy::FromZeros>::new_zeroed();
        vec![$($crate::Field::new($base + std::mem::offset_of!($t, $f), std::mem::size_of_val(&zeroed.$f))),+]
    }};
}

#[doc(hidden)]
pub use zerocopy as __zerocopy;

/// What a decoder answered to one input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Decoded (the caller's check has asserted the value is sound).
    Accepted,
    /// Refused by a field check: the checksum passed and a field broke a rule.
    FieldError,
    /// Refused before the fields: too short, magic, version or checksum.
    OtherError,
}

/// How a fuzz run's inputs were answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub accepted: u64,
    pub field_errors: u64,
    pub other_errors: u64,
}

/// Runs `decode` on `cases()` inputs: a valid encoding from `valid`, mutated, then
/// `reseal`ed (both are given the encoding's context). `decode` classifies its decoder's answer and asserts that an accepted value
/// is sound (a panic anywhere fails the run with the smallest failing input). Fails too if,
/// of at least `MIN_CASES_FOR_COUNTS` inputs, none was refused by a field check or none was
/// accepted.
pub fn fuzz<C: Clone + std::fmt::Debug>(
    name: &str,
    valid: impl Strategy<Value = Encoded<C>>,
    reseal: impl Fn(&mut Vec<u8>, &C),
    decode: impl Fn(&[u8], &C) -> Verdict,
) -> Counts {
    let config_cases = cases();
    let config = Config { cases: config_cases, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new(config);
    let counts = Cell::new(Counts::default());
    let result = runner.run(&(valid, mutations()), |(encoded, mutations)| {
        let mut bytes = apply(&encoded, &mutations);
        reseal(&mut bytes, &encoded.context);
        let mut c = counts.get();
        match decode(&bytes, &encoded.context) {
            Verdict::Accepted => c.accepted += 1,
            Verdict::FieldError => c.field_errors += 1,
            Verdict::OtherError => c.other_errors += 1,
        }
        counts.set(c);
        Ok(())
    });
    if let Err(failure) = result {
        panic!("fuzzing {name}: {failure}");
    }
    let counts = counts.get();
    eprintln!(
        "fuzzed {name}: {} inputs, {} accepted, {} refused by a field check, {} refused before the fields",
        counts.accepted + counts.field_errors + counts.other_errors,
        counts.accepted,
        counts.field_errors,
        counts.other_errors
    );
    // With a few inputs (a quick run by hand) either may by chance not happen.
    if config_cases >= MIN_CASES_FOR_COUNTS {
        assert!(counts.field_errors > 0, "fuzzing {name} reached no field check: {counts:?}");
        assert!(counts.accepted > 0, "fuzzing {name} had no input accepted: {counts:?}");
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_set_and_nudged_within_their_width() {
        let encoded = Encoded { bytes: vec![0xaa; 8], fields: vec![Field::new(2, 2)], context: () };
        let set = apply(&encoded, &[Mutation::SetField { field: 0, value: u64::MAX }]);
        assert_eq!(set, [0xaa, 0xaa, 0xff, 0xff, 0xaa, 0xaa, 0xaa, 0xaa]);
        let nudged = apply(&encoded, &[Mutation::NudgeField { field: 0, delta: 1 }]);
        assert_eq!(nudged, [0xaa, 0xaa, 0xab, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa]);
        let cut = apply(&encoded, &[Mutation::Truncate { to: 0 }, Mutation::SetField { field: 0, value: 1 }]);
        assert!(cut.is_empty());
    }
}
