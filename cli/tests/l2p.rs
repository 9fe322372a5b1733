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
use zapraid_server::array::SUPERBLOCK_ZONES;
use zapraid_zns::{EmulatedDrive, ZonedDevice};

mod common;
use common::world::World;
use common::{kind_of, serial};

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

/// Mapping blocks damaged beyond parity (issue 31: the data was on the drives all along,
/// but its blocks did not read back and status counted nothing lost): every page they held
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
