//! `zapraid scrub` on drive files: a clean array scrubs with nothing found; silent
//! corruption planted with the emulator's fault (`EmulatedDrive::corrupt_block`) in drive
//! files of a stopped array is found by the next scrub, the live blocks of damaged rows are
//! rewritten, every block reads back, and a second scrub finds no damage in live data.

use std::path::Path;

use zapraid_engine::format::{BlockKind, BlockMetadata};
use zapraid_server::array::SUPERBLOCK_ZONES;
use zapraid_zns::{Command, EmulatedDrive, ZoneState, ZonedDevice};

mod common;
use common::serial;
use common::world::World;

/// Flips a bit of the first data block of every full zone holding segments on the drive
/// file at `path`; returns how many were flipped.
fn plant(path: &Path) -> u64 {
    let mut drive = EmulatedDrive::open_file(path).unwrap();
    let g = drive.geometry();
    let mut planted = 0;
    for (zone, z) in drive.zones().iter().enumerate().skip(SUPERBLOCK_ZONES as usize) {
        if z.state != ZoneState::Full {
            continue;
        }
        let start = g.zone_start_lba(zone as u32);
        let data = (start..start + g.zone_capacity_blocks).find(|lba| {
            let (data, metadata) = (vec![0; g.block_size_bytes as usize], vec![0; g.metadata_bytes_per_block as usize]);
            drive.submit(0, Command::Read { lba: *lba, data, metadata });
            let mut out = Vec::new();
            while out.is_empty() {
                drive.wait(&mut out);
            }
            let c = out.pop().unwrap();
            BlockMetadata::decode(&c.data, &c.metadata).is_ok_and(|(_, kind)| kind == BlockKind::Data)
        });
        if let Some(lba) = data {
            drive.corrupt_block(lba, 12_345).unwrap();
            planted += 1;
        }
    }
    planted
}

fn last_scrub(world: &World) -> serde_json::Value {
    world.status()["scrub"]["last"].clone()
}

#[test]
fn scrub_finds_planted_corruption_rewrites_it_and_then_finds_none() {
    let _serial = serial();
    let world = World::new("raid5", 4, 12, 1200);
    world.write_and_verify(Some(1), 1);
    world.start(&[], &[]);
    let said = world.ok(&["scrub", "rp", "--wait"]);
    assert!(said.contains("0 damaged blocks, 0 parity mismatches, 0 live blocks rewritten, 0 unrecoverable"), "{said}");
    let clean = last_scrub(&world);
    assert!(clean["blocks_checked"].as_u64().unwrap() > 0, "{clean}");
    assert!(world.ok(&["status", "rp"]).contains("last scrub checked"), "status shows the last scrub");
    let refused = world.refused(&["scrub", "rp", "--set-rate", "10M"]);
    assert!(refused.contains("no scrub is running"), "{refused}");
    world.ok(&["stop", "rp"]);

    let planted = plant(Path::new(&world.drives[1]));
    assert!(planted >= 2, "the data filled too few zones to plant in");
    world.start(&[], &[]);
    let said = world.ok(&["scrub", "rp", "--wait", "--rate", "64M"]);
    let found = last_scrub(&world);
    let damaged = found["blocks_damaged"].as_u64().unwrap();
    let stale = found["stale_blocks_damaged"].as_u64().unwrap();
    assert_eq!(damaged + stale, planted, "every planted corruption found: {said}");
    assert!(found["blocks_rewritten"].as_u64().unwrap() >= damaged, "{found}");
    assert_eq!(found["blocks_unrecoverable"], 0, "{found}");
    world.ok(&["stop", "rp"]);

    world.write_and_verify(None, 1);
    world.start(&[], &[]);
    world.ok(&["scrub", "rp", "--wait"]);
    let again = last_scrub(&world);
    assert_eq!((again["blocks_damaged"].as_u64(), again["blocks_rewritten"].as_u64()), (Some(0), Some(0)), "{again}");
    world.ok(&["stop", "rp"]);
}
