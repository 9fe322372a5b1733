//! CRC32C for the whole engine (every block's data, every on-disk record), computed by
//! whichever of two implementations is faster on the CPU it runs on, measured once at
//! first use, as the kernel's RAID-6 and XOR code pick their routines by timing them at
//! boot.
//!
//! The two: the CPU's own instruction (SSE 4.2 `crc32`, through the crc32c crate, which
//! falls back to a table where the CPU has none), and a slicing-by-16 table (the crc
//! crate). On hardware the instruction wins by about 7x (0.26 against 1.84 us per 4 KiB
//! here). Under an emulator it can lose: QEMU 7.2's TCG runs `crc32` as a helper that
//! loops once per bit, 28 us per 4 KiB in the e2e guest against 11-15 us for the table,
//! and the guest's fills and reads spend a third of their CPU time there
//! (`docs/performance.md`).
//!
//! Invariant: both implementations give the same value for every input (CRC32C,
//! Castagnoli, reflected, init and final XOR all ones), so the choice changes the speed
//! and nothing else: what is on the drives, and a deterministic simulation's every step,
//! are the same whichever is used. Tests check the two against each other.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The table implementation: 16 tables of 256 entries, built at compile time.
const TABLE: crc::Crc<u32, crc::Table<16>> = crc::Crc::<u32, crc::Table<16>>::new(&crc::CRC_32_ISCSI);

/// Bytes each implementation is timed over: a few 4 KiB blocks, enough to time past the
/// clock's resolution, little enough to cost about a millisecond under an emulator.
const CALIBRATION_BYTES: usize = 16 << 10;
/// Timings of each, of which the fastest counts (a preemption spoils one, not all).
const CALIBRATION_ROUNDS: usize = 3;

/// Which implementation computes CRC32C here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrcImplementation {
    /// The crc32c crate: the CPU's `crc32` instruction where it has one.
    Instruction,
    /// The crc crate's slicing-by-16 table.
    Table,
}

impl CrcImplementation {
    pub fn name(self) -> &'static str {
        match self {
            CrcImplementation::Instruction => "the CPU's crc32 instruction",
            CrcImplementation::Table => "a slicing-by-16 table",
        }
    }

    /// CRC32C of `data`, continuing from `crc` (the finished CRC of what came before it;
    /// 0 for nothing), by this implementation.
    pub fn append(self, crc: u32, data: &[u8]) -> u32 {
        match self {
            CrcImplementation::Instruction => crc32c::crc32c_append(crc, data),
            CrcImplementation::Table => {
                // The crc crate takes the register's initial value as written in the
                // algorithm's own (unreflected) order, before the final XOR.
                let mut digest = TABLE.digest_with_initial((!crc).reverse_bits());
                digest.update(data);
                digest.finalize()
            }
        }
    }
}

/// What the first use measured, and so chose.
#[derive(Clone, Copy, Debug)]
pub struct CrcChoice {
    pub implementation: CrcImplementation,
    /// The fastest of the rounds of each, over `CALIBRATION_BYTES`.
    pub instruction_ns: u64,
    pub table_ns: u64,
}

impl CrcChoice {
    /// Nanoseconds per 4 KiB block of the chosen implementation, and of the other.
    pub fn ns_per_4k(ns: u64) -> f64 {
        ns as f64 * 4096.0 / CALIBRATION_BYTES as f64
    }
}

static CHOICE: OnceLock<CrcChoice> = OnceLock::new();

fn fastest(implementation: CrcImplementation, data: &[u8]) -> Duration {
    (0..CALIBRATION_ROUNDS)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(implementation.append(0, std::hint::black_box(data)));
            start.elapsed()
        })
        .min()
        .expect("at least one round")
}

/// The implementation in use, measuring both on the first call.
pub fn choice() -> CrcChoice {
    *CHOICE.get_or_init(|| {
        let data: Vec<u8> = (0..CALIBRATION_BYTES).map(|i| (i * 31 + 7) as u8).collect();
        let instruction = fastest(CrcImplementation::Instruction, &data);
        let table = fastest(CrcImplementation::Table, &data);
        let implementation =
            if table < instruction { CrcImplementation::Table } else { CrcImplementation::Instruction };
        CrcChoice { implementation, instruction_ns: instruction.as_nanos() as u64, table_ns: table.as_nanos() as u64 }
    })
}

/// CRC32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    choice().implementation.append(0, data)
}

/// CRC32C of what came before (whose CRC32C is `crc`) followed by `data`.
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    choice().implementation.append(crc, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        // RFC 3720's check value, and an empty input.
        for implementation in [CrcImplementation::Instruction, CrcImplementation::Table] {
            assert_eq!(implementation.append(0, b"123456789"), 0xE306_9283, "{implementation:?}");
            assert_eq!(implementation.append(0, b""), 0, "{implementation:?}");
            assert_eq!(implementation.append(0, &[0u8; 32]), 0x8A91_36AA, "{implementation:?}");
        }
    }

    #[test]
    fn the_choice_is_one_of_the_two_and_stays() {
        let first = choice();
        assert!(first.instruction_ns > 0 || first.table_ns > 0, "something was timed: {first:?}");
        assert_eq!(choice().implementation, first.implementation);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    proptest! {
        #[test]
        fn both_implementations_agree(data in proptest::collection::vec(any::<u8>(), 0..9000), cut in 0usize..9000) {
            let cut = cut.min(data.len());
            let whole = CrcImplementation::Instruction.append(0, &data);
            prop_assert_eq!(CrcImplementation::Table.append(0, &data), whole);
            // In two pieces, each continuing from either's CRC of the first.
            for first in [CrcImplementation::Instruction, CrcImplementation::Table] {
                let head = first.append(0, &data[..cut]);
                for second in [CrcImplementation::Instruction, CrcImplementation::Table] {
                    prop_assert_eq!(second.append(head, &data[cut..]), whole);
                }
            }
        }
    }
}
