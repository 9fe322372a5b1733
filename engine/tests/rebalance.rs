//! Rebalancing a declustered array (issue 35, `engine/src/engine/rebalance.rs`): a drive
//! rebuilt into distributed spare space is replaced by a new one; the segments left in
//! spare space are moved back by garbage collection while writes go on, until no spare
//! zone is used; every block reads back all along, and the spare space takes the next
//! failure again.

mod common;

use common::declustered::{schemes, Run, LOGICAL_BLOCKS};

#[test]
fn a_replaced_drive_takes_its_segments_back_and_frees_the_spare_space() {
    for scheme in schemes() {
        let mut run = Run::new(scheme);
        let failed = 4;
        run.fill_and_spare(12, failed);
        run.sim.run_until_idle();
        assert_eq!(run.sim.engine.drives_in_spare_space(), vec![failed], "{}", run.what);
        let used = run.sim.engine.status().declustered.expect("declustered").spare_zones_used;
        assert!(used > 0, "{}: nothing went into spare space", run.what);

        // The drive holds nothing: a new one in its place serves at once, and the
        // segments moved off it wait to go back.
        run.sim.replace_drive(failed, 7).unwrap_or_else(|e| panic!("{}: replace: {e}", run.what));
        let status = run.sim.engine.status();
        let spread = status.declustered.clone().expect("declustered");
        assert!(status.failed_drives.is_empty() && spread.drives_in_spare_space.is_empty(), "{}: {status:?}", run.what);
        assert!(spread.segments_to_rebalance > 0, "{}: nothing to move back: {spread:?}", run.what);
        run.verify("as the rebalance starts");

        // Garbage collection moves them back one at a time, writes going on meanwhile.
        for round in 0..40 {
            run.write_round(0..LOGICAL_BLOCKS / 8);
            if round % 8 == 0 {
                run.verify("during the rebalance");
            }
            if run.sim.engine.status().declustered.expect("declustered").segments_to_rebalance == 0 {
                break;
            }
        }
        run.sim.run_until_idle();
        let spread = run.sim.engine.status().declustered.expect("declustered");
        assert_eq!((spread.segments_to_rebalance, spread.spare_zones_used), (0, 0), "{}: {spread:?}", run.what);
        run.verify("after the rebalance");

        // The spare space takes the next failure again.
        let next = 9;
        run.pull(next);
        run.sim.rebuild_into_spares(next).unwrap_or_else(|e| panic!("{}: into spares again: {e}", run.what));
        run.sim.run_until_idle();
        assert_eq!(run.sim.engine.drives_in_spare_space(), vec![next], "{}", run.what);
        run.verify("with the next failed drive in spare space");
    }
}

/// With a rebuild rate set, the rebalance goes at that rate: the blocks it moves take at
/// least their bytes over the rate in virtual time (beyond the bucket's burst), and it
/// ends with nothing else happening (its waits are timed, not left for the next request).
#[test]
fn a_rebalance_goes_at_the_rebuild_rate() {
    const RATE_BYTES_PER_S: u64 = 4 << 20;
    let scheme = schemes()[0];
    let mut run = Run::new(scheme);
    let failed = 4;
    run.fill_and_spare(12, failed);
    run.sim.run_until_idle();
    run.sim.engine.set_rebuild_rate(Some(RATE_BYTES_PER_S));
    let started_ns = run.sim.now_ns();
    run.sim.replace_drive(failed, 7).unwrap_or_else(|e| panic!("{}: replace: {e}", run.what));
    assert!(run.sim.engine.status().declustered.expect("declustered").segments_to_rebalance > 0, "{}", run.what);
    run.sim.run_until_idle();
    let status = run.sim.engine.status();
    assert_eq!(status.declustered.as_ref().expect("declustered").segments_to_rebalance, 0, "{}: stalled", run.what);
    let moved_bytes = status.declustered.as_ref().expect("declustered").blocks_rebalanced * common::BLOCK as u64;
    let paced_bytes = moved_bytes.saturating_sub(run.sim.engine.rebuild_burst_bytes());
    let least_ns = paced_bytes * 1_000_000_000 / RATE_BYTES_PER_S;
    let took_ns = run.sim.now_ns() - started_ns;
    // More than the burst moved: the rate, not the bucket's size, decides the time.
    assert!(paced_bytes > 0, "{}: {moved_bytes} B moved, within the burst", run.what);
    assert!(took_ns >= least_ns, "{}: {moved_bytes} B moved in {took_ns} ns", run.what);
    run.verify("after a paced rebalance");
}
