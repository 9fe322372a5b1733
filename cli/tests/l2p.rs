//! `--l2p-memory` on drive files: `format` records the L2P budget, the engine keeps to it
//! (pages evicted and written back as mapping blocks, read again on demand), every block
//! reads back across restarts, `status` shows the budget and the mapping traffic, and
//! `start --l2p-memory` changes the budget for one run (0: the whole table); a scrub runs
//! within the budget and finds a clean array clean; each start after a clean stop begins
//! from the checkpoint the stop left (`status` says so); pages whose mapping blocks are
//! damaged beyond parity are rebuilt from the segments' footers, and counted.

use std::collections::BTreeSet;
use std::path::Path;

use zapraid_engine::format::BlockKind;
use zapraid_server::records::SUPERBLOCK_ZONES;
use zapraid_zns::{EmulatedDrive, ZonedDevice};

mod common;
use common::world::World;
use common::{kind_of, serial};

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

/// Damages every mapping block on the drive files beyond what RAID-6 parity rebuilds: the
/// block and the two parity blocks of its row (Zone Write: a stripe's chunks sit at the
/// same offset on every drive), flipping bit `bit` of each once. Returns how many mapping
/// blocks were damaged.
fn damage_mapping_blocks(drives: &[String], bit: u64) -> usize {
    let mut files: Vec<EmulatedDrive> =
        drives.iter().map(|p| EmulatedDrive::open_file(Path::new(p)).unwrap()).collect();
    let g = files[0].geometry();
    let mut mapping = Vec::new();
    for (drive, file) in files.iter_mut().enumerate() {
        for zone in SUPERBLOCK_ZONES..g.zone_count {
            let start = g.zone_start_lba(zone);
            let written = file.zones()[zone as usize].written_blocks();
            let found = (start..start + written).filter(|lba| kind_of(file, *lba) == Some(BlockKind::Mapping));
            mapping.extend(found.map(|lba| (drive, lba)));
        }
    }
    // A row may hold several mapping blocks: each block is flipped once.
    let mut damaged = BTreeSet::new();
    for &(drive, lba) in &mapping {
        let parity: Vec<usize> = (0..files.len())
            .filter(|d| *d != drive && kind_of(&mut files[*d], lba) == Some(BlockKind::Parity))
            .collect();
        assert_eq!(parity.len(), 2, "a RAID-6 row holds two parity blocks");
        damaged.extend(parity.into_iter().chain([drive]).map(|d| (d, lba)));
    }
    for (drive, lba) in damaged {
        files[drive].corrupt_block(lba, bit).unwrap();
    }
    mapping.len()
}

/// Mapping blocks damaged beyond parity (the data is on the drives all along, so its blocks
/// must read back and nothing be counted lost because an index to it was): every page they held
/// is rebuilt from the segments' footers, every block reads back, and status counts the
/// pages rebuilt, in the JSON and the text.
#[test]
fn mapping_blocks_damaged_beyond_parity_are_rebuilt_from_the_footers() {
    let _serial = serial();
    // Six pages of 1,012 entries (4 KiB mapping blocks) over a budget of four.
    let world = World::new("raid6", 6, 40, 5 * 1012 + 500);
    let mut format = vec!["format", "--force", "--level", "raid6", "--mode", "zone-write", "--name", "rp"];
    format.extend(["--l2p-memory", "16K"]);
    format.extend(world.drives.iter().map(String::as_str));
    world.ok(&format);
    world.write_and_verify(Some(1), 1);

    // Frontend reads meet the damaged pages.
    assert!(damage_mapping_blocks(&world.drives, 100) > 0, "the clean stop wrote the pages back");
    let status = world.write_and_verify(None, 1);
    let pages = world.blocks.div_ceil(status.l2p.entries_per_page);
    assert_eq!(status.l2p.pages_rebuilt, pages, "every page read was rebuilt: {:?}", status.l2p);
    assert_eq!(status.mapped_blocks, world.blocks, "nothing lost");

    // The server meets them too (a scrub scans every page), and says so.
    assert!(damage_mapping_blocks(&world.drives, 200) > 0);
    world.start(&[], &[]);
    world.ok(&["scrub", "rp", "--wait"]);
    let l2p = world.status()["l2p"].clone();
    assert_eq!(l2p["mapping_pages_rebuilt"].as_u64(), Some(pages), "{l2p}");
    let text = world.ok(&["status", "rp"]);
    assert!(
        text.contains(&format!(", {pages} pages rebuilt from the log (their mapping blocks unreadable)")),
        "{text}"
    );
    world.ok(&["stop", "rp"]);
    // The rebuilt pages were written back: nothing to rebuild at the next start.
    let status = world.write_and_verify(None, 1);
    assert_eq!(status.l2p.pages_rebuilt, 0, "{:?}", status.l2p);
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
