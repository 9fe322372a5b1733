//! `--l2p-memory` on drive files: `format` records the L2P budget, the engine keeps to it
//! (pages evicted and written back as mapping blocks, read again on demand), every block
//! reads back across restarts, `status` shows the budget and the mapping traffic, and
//! `start --l2p-memory` changes the budget for one run (0: the whole table); a scrub runs
//! within the budget and finds a clean array clean; each start after a clean stop begins
//! from the checkpoint the stop left (`status` says so).

mod common;
use common::serial;
use common::world::World;

/// One page of the table (a 4 KiB mapping block): the array's few pages take turns.
const ONE_PAGE: &str = "4K";

#[test]
fn a_one_page_budget_keeps_every_block_and_status_shows_it() {
    let _serial = serial();
    // Fewer blocks than the world's default: the checkpoint's zones come off the capacity.
    let world = World::new("raid5", 4, 12, 1700);
    let mut format = vec!["format", "--force", "--level", "raid5", "--group-size", "8", "--name", "rp"];
    format.extend(["--l2p-memory", ONE_PAGE]);
    format.extend(world.drives.iter().map(String::as_str));
    world.ok(&format);
    world.write_and_verify(Some(1), 1);
    world.write_and_verify(Some(2), 2);
    world.start(&[], &[]);
    let l2p = world.status()["l2p"].clone();
    assert_eq!(l2p["budget_bytes"].as_u64(), Some(4096), "{l2p}");
    assert!(l2p["pages"].as_u64().unwrap() > 1, "{l2p}");
    let text = world.ok(&["status", "rp"]);
    assert!(text.contains("L2P table: budget 4 KiB, "), "{text}");
    // The last stop was clean: the start began from the checkpoint it left.
    let start = world.status()["start"].clone();
    assert!(start["checkpoint_generation"].as_u64().is_some(), "{start}");
    assert!(text.contains("start: from checkpoint "), "{text}");
    // A scrub finds each segment's live blocks page by page within the budget.
    world.ok(&["scrub", "rp", "--wait"]);
    let scrub = world.status()["scrub"]["last"].clone();
    assert!(scrub["blocks_checked"].as_u64().unwrap() > 0, "{scrub}");
    assert_eq!(scrub["blocks_damaged"].as_u64(), Some(0), "{scrub}");
    assert_eq!(scrub["stale_blocks_damaged"].as_u64(), Some(0), "{scrub}");
    world.ok(&["stop", "rp"]);
    // The whole table for one run, then the recorded budget again.
    world.start(&["--l2p-memory", "0"], &[]);
    assert!(world.status()["l2p"]["budget_bytes"].is_null());
    assert!(world.status()["start"]["checkpoint_generation"].as_u64().is_some(), "a checkpoint without a budget too");
    world.ok(&["stop", "rp"]);
    world.write_and_verify(None, 2);
}
