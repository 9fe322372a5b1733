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

/// A RAID-5 array of 4 drives formatted with an L2P budget of `budget` (so it keeps a
/// checkpoint).
fn with_budget(budget: &str) -> World {
    // Fewer blocks than the world's default: the checkpoint's zones come off the capacity.
    let world = World::new("raid5", 4, 12, 1700);
    reformat(&world, &["--l2p-memory", budget]);
    world
}

/// Formats the world's drives again as RAID-5 "rp" with `extra` options; what it said.
fn reformat(world: &World, extra: &[&str]) -> String {
    let mut format = vec!["format", "--force", "--level", "raid5", "--group-size", "8", "--name", "rp"];
    format.extend(extra);
    format.extend(world.drives.iter().map(String::as_str));
    world.ok(&format)
}

/// The blocks `format` said the array exports ("..., 202.2 MiB usable (51760 blocks of 4096 B)").
fn usable_blocks(said: &str) -> u64 {
    let after = said.split(" usable (").nth(1).unwrap_or_else(|| panic!("no usable size in {said}"));
    after.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("no block count in {said}"))
}

/// The generation of the checkpoint the running array started from, if it did.
fn started_from(world: &World) -> Option<u64> {
    world.status()["start"]["checkpoint_generation"].as_u64()
}

#[test]
fn a_one_page_budget_keeps_every_block_and_status_shows_it() {
    let _serial = serial();
    let world = with_budget(ONE_PAGE);
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

/// A clean stop with nothing written since the checkpoint on the drives leaves that one as
/// it is (no new generation), and the start after it still begins from it; a stop after
/// writes leaves a new one.
#[test]
fn a_stop_with_nothing_changed_leaves_the_checkpoint_as_it_is() {
    let _serial = serial();
    let world = with_budget(ONE_PAGE);
    world.write_and_verify(Some(1), 1);
    world.start(&[], &[]);
    let first = started_from(&world).expect("the start after a clean stop begins from its checkpoint");
    world.ok(&["stop", "rp"]);
    world.start(&[], &[]);
    assert_eq!(started_from(&world), Some(first), "the stop with nothing changed wrote a checkpoint");
    world.ok(&["stop", "rp"]);
    world.write_and_verify(Some(2), 2);
    world.start(&[], &[]);
    let after_writes = started_from(&world).expect("a start from the checkpoint the writes' stop left");
    assert!(after_writes > first, "generation {after_writes} after writes, {first} before");
    world.ok(&["stop", "rp"]);
    world.write_and_verify(None, 2);
}

/// `format --l2p-memory 0` is no budget, as without the option: no zones are set aside for
/// a checkpoint (the same capacity), and `status` says there is no budget.
#[test]
fn a_zero_budget_at_format_is_no_budget_and_sets_no_checkpoint_zones_aside() {
    let _serial = serial();
    let world = World::new("raid5", 4, 12, 1700);
    let without = usable_blocks(&reformat(&world, &[]));
    let with_one_page = usable_blocks(&reformat(&world, &["--l2p-memory", ONE_PAGE]));
    assert!(with_one_page < without, "a budget's checkpoint zones come off the capacity");
    let said = reformat(&world, &["--l2p-memory", "0"]);
    assert_eq!(usable_blocks(&said), without, "{said}");
    world.start(&[], &[]);
    assert!(world.status()["l2p"]["budget_bytes"].is_null());
    let text = world.ok(&["status", "rp"]);
    assert!(text.contains("L2P table: no memory budget"), "{text}");
    world.ok(&["stop", "rp"]);
}
