//! The declustered runs of the reference model (`model.rs`, issue 35): the shapes, the
//! property over them whose operations include grows (`grow`) and what it counts, and a
//! fixed run of grows around a rebuild into distributed spare space.

use proptest::prelude::*;
use zapraid_engine::{Declustering, Mode, OpenSegments, RaidLevel};

use super::grow::{counts, GrowCounts};
use super::{declustered_op, run_with_l2p, Op, Setup, FEW_ZONES};
use crate::common;

/// Declustered shapes: stripes of each level placed over more drives, with one
/// distributed spare, two or three segments per row.
pub(crate) fn shapes() -> Vec<(RaidLevel, u32)> {
    vec![
        (RaidLevel::Raid0 { drives: 3 }, 7),
        (RaidLevel::Raid1 { drives: 3 }, 7),
        (RaidLevel::Raid5 { drives: 4 }, 9),
        (RaidLevel::Raid5 { drives: 5 }, 11),
        (RaidLevel::Raid6 { drives: 5 }, 16),
        (RaidLevel::Erasure { k: 3, m: 3 }, 13),
    ]
}

/// Cases of `property`; `PROPTEST_CASES` sets another count. Half the 128 it had before
/// grows came: grown arrays (up to 31 drives) take about twice as long a case.
pub(crate) const CASES: u32 = 64;

/// The declustered property: random operations (`declustered_op`: grows among them) over
/// every shape and one of `modes`, one open segment, chunks of 1 or 2 blocks, few zones or
/// more. Prints what the grows did; with `CASES` or more, every kind of grow must have
/// come but the refusal during a rebuild (a few in `CASES`), which must with 1000 or more.
/// Failing cases are kept beside `source_file` (the test's).
pub(crate) fn property(modes: Vec<Mode>, source_file: &'static str) {
    let before = counts();
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(CASES);
    let config = ProptestConfig { cases, source_file: Some(source_file), ..ProptestConfig::default() };
    let strategy = (
        proptest::sample::select(shapes()),
        proptest::sample::select(modes),
        1..=2u64,
        proptest::collection::vec(declustered_op(), 1..60),
        any::<u64>(),
        proptest::sample::select(vec![FEW_ZONES, 12]),
    );
    let result = proptest::test_runner::TestRunner::new(config).run(
        &strategy,
        |((level, drives), mode, chunk_blocks, ops, seed, zones)| {
            let geometry = common::geometry(zones, 6, 8);
            let declustering = Declustering::wide(drives, 1);
            let open = OpenSegments::SINGLE;
            let setup = Setup { geometry, level, mode, chunk_blocks, open, l2p: None, hostile: false, declustering };
            run_with_l2p(setup, &ops, seed).map(|_| ())
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    let after = counts();
    let n = |f: fn(&GrowCounts) -> usize| f(&after) - f(&before);
    let (grown, in_flight) = (n(|c| c.grown), n(|c| c.grown_in_flight));
    let (rebuilding, placements) = (n(|c| c.refused_rebuilding), n(|c| c.refused_placements));
    let (starts, mid) = (n(|c| c.starts_after), n(|c| c.starts_mid_grow));
    eprintln!(
        "declustered: {cases} cases, {grown} grows ({in_flight} with drive commands in flight), {rebuilding} refused \
         during a rebuild and {placements} past the placements recorded; {starts} restarts and power cuts after a \
         grow, {mid} of them finding rows still to move"
    );
    // Starts that find rows still to move are counted, not required: a grow retires the
    // open segments and starts moving at once, so with instant drives the moves are
    // mostly done before the next cut; the crash exploration (`exploration/grow.rs`)
    // cuts power at every step of them.
    let kinds = [grown, in_flight, placements, starts];
    if cases >= CASES {
        assert!(kinds.iter().all(|&k| k > 0), "a kind of grow never came: {kinds:?}");
    }
    if cases >= 1000 {
        assert!(rebuilding > 0, "no grow came during a rebuild in {cases} cases");
    }
}

/// Writes, a drive failed and rebuilt into spare space, a grow while that rebuild runs
/// (refused, unless the drive held nothing to rebuild), grows after it (accepted: the
/// drive still in spare space), a power cut and a clean stop, each start with the grown
/// config; every read matches the model. RAID-0 fails no drive (the model keeps failures
/// within tolerance): its first grow goes through, and it ends with every placement the
/// engine records. Whether the grow during the rebuild was refused.
pub(crate) fn grows_around_a_rebuild(level: RaidLevel, drives: u32, mode: Mode) -> bool {
    let before = counts();
    let mut ops: Vec<Op> = (0..40).map(|i| Op::Write { lba: (i * 7) % 90, blocks: 3, fill: i as u8 }).collect();
    ops.extend([Op::Settle, Op::FailDrive { drive: 2 }, Op::IntoSpares { drive: 0 }]);
    ops.extend([Op::Write { lba: 5, blocks: 4, fill: 1 }, Op::Grow { added: 3 }, Op::Settle]);
    ops.extend([Op::Write { lba: 9, blocks: 4, fill: 2 }, Op::Grow { added: 4 }]);
    ops.extend((40..70).map(|i| Op::Write { lba: (i * 5) % 90, blocks: 2, fill: i as u8 }));
    ops.extend([Op::Grow { added: 1 }, Op::Crash, Op::Read { lba: 0, blocks: 90 }]);
    ops.extend((70..90).map(|i| Op::Write { lba: (i * 11) % 90, blocks: 3, fill: i as u8 }));
    ops.extend([Op::Restart, Op::Read { lba: 0, blocks: 90 }]);
    let geometry = common::geometry(12, 6, 8);
    let declustering = Declustering::wide(drives, 1);
    let open = OpenSegments::SINGLE;
    let setup = Setup { geometry, level, mode, chunk_blocks: 1, open, l2p: None, hostile: false, declustering };
    let what = format!("{level} over {drives}, {mode}");
    let status = run_with_l2p(setup, &ops, 5).unwrap_or_else(|e| panic!("{what}: {e}"));
    let after = counts();
    let spread = status.declustered.expect("declustered");
    let tolerant = level.tolerated_failures() > 0;
    let refused = after.refused_rebuilding - before.refused_rebuilding;
    assert!(refused <= usize::from(tolerant), "{what}: {refused} grows refused during a rebuild");
    let (grows, added) = if refused == 1 { (2, 5) } else { (3, 8) };
    assert_eq!(after.grown - before.grown, grows, "{what}: {spread:?}");
    assert_eq!((spread.drives, spread.placements), (drives + added, 1 + grows as u32), "{what}: {spread:?}");
    assert_eq!(after.starts_after - before.starts_after, 2, "{what}");
    if tolerant {
        assert_eq!(spread.drives_in_spare_space, vec![2], "{what}: {spread:?}");
    }
    refused == 1
}
