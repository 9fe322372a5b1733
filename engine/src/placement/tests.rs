//! The placement's properties: distinct drives per segment, rows covered, every drive the
//! same share, balance bounds up to 64 drives, determinism, today's arrays unchanged, and
//! recorded bases checked.

use proptest::prelude::*;

use super::*;

/// Stripe widths the tests cover: 2+1, 4+1, 4+2, 8+2.
const WIDTHS: [u32; 4] = [3, 5, 6, 10];

/// The most drives the balance bounds are checked up to.
const MAX_CHECKED_DRIVES: u32 = 64;

/// The largest rebuild load imbalance allowed at any size up to `MAX_CHECKED_DRIVES`
/// (issue 35 asks at most 1.10 at 8 drives and 1.15 at 16; dRAID's maps give 1.059 and
/// 1.111).
const MAX_IMBALANCE: f64 = 1.06;

/// Each shape the tests cover: width, drives, distributed spares.
fn shapes() -> Vec<(u32, u32, u32)> {
    let mut shapes = Vec::new();
    for w in WIDTHS {
        shapes.push((w, w, 0));
        for n in w + 1..=MAX_CHECKED_DRIVES {
            shapes.push((w, n, 1));
            if n >= w + 2 {
                shapes.push((w, n, 2));
            }
        }
    }
    shapes
}

/// Row `row`: its groups and spare positions hold every drive once.
fn check_row(p: &Placement, row: u64) {
    let mut seen = vec![0u32; p.drives() as usize];
    for group in 0..p.groups_per_row() {
        let drives = p.segment_drives(row, group);
        assert_eq!(drives.len(), p.width() as usize);
        for d in drives {
            seen[d as usize] += 1;
        }
    }
    let spares = p.spare_drives(row);
    assert!(spares.len() as u32 >= p.distributed_spares(), "row {row}: {spares:?}");
    for d in spares {
        seen[d as usize] += 1;
    }
    assert!(seen.iter().all(|s| *s == 1), "row {row} of {p:?}: {seen:?}");
}

#[test]
fn every_row_holds_every_drive_once_and_segments_take_distinct_drives() {
    for (w, n, s) in shapes() {
        let p = Placement::new(n, w, s).unwrap();
        // The first base's development, the step to the next base, and the period's end.
        let period = p.period_rows();
        for row in (0..2 * u64::from(n)).chain(period - 2..period + 2) {
            check_row(&p, row);
        }
    }
}

#[test]
fn over_a_period_every_drive_holds_the_same_share_of_segments() {
    for (w, n, s) in shapes().into_iter().filter(|(_, n, _)| n % 8 == 0 || *n < 12) {
        let p = Placement::new(n, w, s).unwrap();
        let mut chunks = vec![0u64; n as usize];
        for row in 0..p.period_rows() {
            for group in 0..p.groups_per_row() {
                for d in p.segment_drives(row, group) {
                    chunks[d as usize] += 1;
                }
            }
        }
        assert!(chunks.iter().all(|c| *c == chunks[0]), "{w} wide on {n}: {chunks:?}");
    }
}

#[test]
fn pair_counts_are_what_a_rebuild_reads() {
    for (w, n, s) in [(5, 8, 1), (3, 12, 2), (10, 24, 1), (6, 17, 1)] {
        let p = Placement::new(n, w, s).unwrap();
        let counts = p.pair_counts();
        for failed in [0, n / 2, n - 1] {
            let reads = p.rebuild_reads(failed);
            assert_eq!(reads[failed as usize], 0);
            for d in (0..n).filter(|d| *d != failed) {
                assert_eq!(
                    reads[d as usize],
                    counts[((d + n - failed) % n) as usize],
                    "{w} wide on {n}, {failed} failed"
                );
            }
        }
    }
}

#[test]
fn the_rebuild_load_is_balanced_up_to_64_drives() {
    let mut worst = (1.0, 0, 0);
    for (w, n, s) in shapes() {
        let imbalance = Placement::new(n, w, s).unwrap().rebuild_imbalance();
        if imbalance > worst.0 {
            worst = (imbalance, w, n);
        }
        assert!(imbalance <= MAX_IMBALANCE, "{w} wide on {n} drives, {s} spares: imbalance {imbalance:.3}");
    }
    // The two figures, for 4+1 and one distributed spare.
    for (n, bound) in [(8, 1.10), (16, 1.15)] {
        let imbalance = Placement::new(n, 5, 1).unwrap().rebuild_imbalance();
        assert!(imbalance <= bound, "4+1 on {n}: {imbalance:.3}");
    }
    assert!(worst.0 >= 1.0, "{worst:?}");
}

#[test]
fn the_same_shape_gives_the_same_placement_and_records_round_trip() {
    for (w, n, s) in [(5, 8, 1), (10, 64, 2), (3, 3, 0), (6, 13, 1)] {
        let p = Placement::new(n, w, s).unwrap();
        assert_eq!(p, Placement::new(n, w, s).unwrap());
        assert_eq!(p, Placement::recorded(n, w, s, p.bases().to_vec()).unwrap());
    }
    // Another shape, other bases.
    assert_ne!(Placement::new(9, 5, 1).unwrap().bases(), Placement::new(9, 4, 1).unwrap().bases());
}

#[test]
fn an_array_as_wide_as_its_stripes_is_todays() {
    for w in WIDTHS {
        let p = Placement::new(w, w, 0).unwrap();
        assert_eq!((p.groups_per_row(), p.spare_positions_per_row(), p.bases().len()), (1, 0, 1));
        for row in [0, 1, 7, 1_000_003] {
            assert_eq!(p.segment_drives(row, 0), (0..w).collect::<Vec<_>>());
        }
    }
}

/// The bases' CRC32C of 11 drives, stripes of 5, 1 distributed spare, as arrays record
/// it. A change of this value means the placement search changed (seed, generator,
/// candidates, bases or their scoring): arrays on drives depend on it, and a start would
/// refuse every declustered array formatted before the change.
const PINNED_BASES_CRC32C_11_5_1: u32 = 0xc2b7_1ad7;

#[test]
fn the_bases_crc_is_stable_and_checked_at_start() {
    let p = Placement::new(11, 5, 1).unwrap();
    let crc = p.bases_crc32c();
    assert_eq!(crc, PINNED_BASES_CRC32C_11_5_1, "the placement search changed: {crc:#010x}");
    // CRC32C of the bases' bytes, base after base.
    assert_eq!(crc, crate::crc::crc32c(&p.bases().concat()));
    assert_eq!(Placement::checked(11, 5, 1, crc).unwrap(), p);
    let err = Placement::checked(11, 5, 1, crc ^ 1).unwrap_err();
    assert!(err.to_string().contains("search differs"), "{err}");
    // Other shapes, other bases (S = 0 has the same two groups per row, so the same
    // bases: the superblock records S beside the CRC); a classic placement's is 0,
    // whatever the search.
    assert_eq!(Placement::new(11, 5, 0).unwrap().bases_crc32c(), crc);
    for (n, w, s) in [(11, 5, 2), (11, 4, 1), (12, 5, 1)] {
        assert_ne!(Placement::new(n, w, s).unwrap().bases_crc32c(), crc, "{n} drives, {w} wide, {s} spares");
    }
    for w in WIDTHS {
        assert_eq!(Placement::new(w, w, 0).unwrap().bases_crc32c(), 0);
        assert!(Placement::checked(w, w, 0, 0).is_ok());
    }
}

#[test]
fn shapes_that_cannot_be_are_refused() {
    for (n, w, s) in [(4, 5, 0), (6, 5, 2), (5, 0, 0), (256, 5, 1), (5, 5, 1)] {
        let err = Placement::new(n, w, s).unwrap_err();
        assert!(matches!(err, Error::InvalidConfig { .. }), "{n} drives, {w} wide, {s} spares: {err}");
    }
}

#[test]
fn recorded_bases_are_checked() {
    let p = Placement::new(8, 5, 1).unwrap();
    let mut bases = p.bases().to_vec();
    bases[3][2] = bases[3][1]; // a drive twice
    assert!(Placement::recorded(8, 5, 1, bases).is_err());
    let mut bases = p.bases().to_vec();
    bases[0][0] = 8; // no such drive
    assert!(Placement::recorded(8, 5, 1, bases).is_err());
    let mut bases = p.bases().to_vec();
    bases.pop();
    assert!(Placement::recorded(8, 5, 1, bases).is_err());
    let mut bases = p.bases().to_vec();
    bases[5].pop();
    assert!(Placement::recorded(8, 5, 1, bases).is_err());
}

proptest! {
    #[test]
    fn any_row_of_any_shape_holds_distinct_drives(
        w in 1u32..=12,
        extra in 0u32..40,
        s in 0u32..3,
        row in any::<u64>(),
    ) {
        let n = w + extra + s;
        let p = Placement::new(n, w, s).unwrap();
        check_row(&p, row);
    }
}
