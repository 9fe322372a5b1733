//! Pinned lost-block runs (`exploration::lost`, which `lost_blocks_exploration` in crash.rs
//! explores) found by wider sweeps than `make test` runs (300 runs per scheme), grouped by
//! cause: each hung the engine (a request never answered, or an array that never settles).

mod common;
#[allow(dead_code)] // this binary uses part of the harness crash.rs drives
#[path = "common/exploration/mod.rs"]
mod exploration;
use exploration::*;

/// Runs the lost-block runs `(scheme index, seed)`, as `explore_lost` numbers them.
fn lost_runs(runs: &[(usize, u64)]) {
    for &(scheme, seed) in runs {
        exploration::lost::lost_run(schemes()[scheme], seed);
    }
}

/// Pinned lost-block runs (hybrid RAID-6 ZapRAID G=4 and RAID-5 Zone Append, L2P
/// offloaded): a periodic running checkpoint began at the end of the scheduling loop
/// (`pump`) run by the last completion in flight. It padded the open frontend stripes
/// into the queue and returned, and nothing issued them: no command was in flight, no
/// stripe timer was left (the open stripes were gone), and the requests that came were
/// held for the checkpoint, which waited for those stripes: requests never answered. Seed
/// 1804 has no failed drive, only damage. Fixed: the loop runs again after a checkpoint
/// begins.
#[test]
fn pinned_lost_runs_a_periodic_checkpoint_issues_the_stripes_it_padded() {
    lost_runs(&[(6, 1804), (6, 1987), (6, 2083), (7, 2187)]);
}

/// Pinned lost-block runs (RAID-5 Zone Write, and hybrid ZapRAID G=4, L2P offloaded to a
/// few pages, a drive failed during a rebuild): garbage collection's scan of the L2P table
/// came to a page only on the drives whose mapping block was lost beyond parity. Its load
/// ended before it returned (the read failed at once, the log could not rebuild the page,
/// its LBAs were recorded lost: `page_lost` cached it), but the scan was told to wait for
/// it and no read in flight would ever run the engine again: the relocation stood still,
/// and the running checkpoint that began for its previous victim's reset waited for it
/// with the requests it held. Fixed: `page_ready` says whether the page is cached after
/// the load, and the scan goes on.
#[test]
fn pinned_lost_runs_a_page_recorded_lost_at_once_does_not_stop_a_scan() {
    lost_runs(&[(1, 590), (5, 1618), (5, 1742)]);
}

/// Pinned lost-block runs (RAID-5 and RAID-6 Zone Write, L2P offloaded to 3 pages, more
/// drives failed than parity covers): with the cache over budget, every event evicted a
/// dirty page and wrote its mapping block into a stripe, which failed (too few drives):
/// the page came back dirty, the next stripe timeout wrote it again, and so on; the array
/// never settled (run 587 opened, filled with failed stripes and reset 1,750 segments in
/// 200,000 steps). Fixed: while more drives are failed than parity covers, dirty pages stay
/// cached past the budget (`may_write_back`), and scans do not wait for room.
#[test]
fn pinned_lost_runs_dirty_pages_wait_beyond_tolerance() {
    lost_runs(&[(1, 587), (3, 1151)]);
}
