//! `zapraid scrub` on drive files: a clean array scrubs with nothing found; silent
//! corruption planted with the emulator's fault (`EmulatedDrive::corrupt_block`) in drive
//! files of a stopped array is found by the next scrub, the live blocks of damaged rows are
//! rewritten, every block reads back, and a second scrub finds no damage in live data. A
//! damaged block a read rebuilt has its whole row rewritten: a later drive failure loses
//! nothing.

use std::path::Path;

use zapraid_engine::format::{BlockKind, BlockMetadata};
use zapraid_server::records::SUPERBLOCK_ZONES;
use zapraid_zns::{Command, EmulatedDrive, ZoneState, ZonedDevice};

mod common;
use common::serial;
use common::world::{write_and_verify, World};

/// A block's metadata on `drive` at `lba` and the kind it gives, if it decodes.
fn block_metadata(drive: &mut EmulatedDrive, lba: u64) -> Option<(BlockMetadata, BlockKind)> {
    let g = drive.geometry();
    let (data, metadata) = (vec![0; g.block_size_bytes as usize], vec![0; g.metadata_bytes_per_block as usize]);
    drive.submit(0, Command::Read { lba, data, metadata });
    let mut out = Vec::new();
    while out.is_empty() {
        drive.wait(&mut out);
    }
    let c = out.pop().unwrap();
    BlockMetadata::decode(&c.data, &c.metadata).ok()
}

fn is_data(drive: &mut EmulatedDrive, lba: u64) -> bool {
    block_metadata(drive, lba).is_some_and(|(_, kind)| kind == BlockKind::Data)
}

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
        if let Some(lba) = (start..start + g.zone_capacity_blocks).find(|lba| is_data(&mut drive, *lba)) {
            drive.corrupt_block(lba, 12_345).unwrap();
            planted += 1;
        }
    }
    planted
}

/// In an array of Zone Write segments (a row of a stripe: the same offset on every
/// drive), a data block of a full zone on drive `damaged` whose row holds a data block
/// on another drive (every block written once is live): the block's address on the
/// drives and that other drive.
fn data_row(drives: &[String], damaged: usize) -> (u64, usize) {
    let mut open: Vec<EmulatedDrive> = drives.iter().map(|d| EmulatedDrive::open_file(Path::new(d)).unwrap()).collect();
    let g = open[damaged].geometry();
    let zones: Vec<u32> = open[damaged].zones().iter().filter(|z| z.state == ZoneState::Full).map(|z| z.zone).collect();
    for zone in zones.into_iter().filter(|z| *z >= SUPERBLOCK_ZONES) {
        let start = g.zone_start_lba(zone);
        for lba in start..start + g.zone_capacity_blocks {
            let Some((meta, BlockKind::Data)) = block_metadata(&mut open[damaged], lba) else { continue };
            let same_stripe = |m: &BlockMetadata| {
                (m.segment_sequence_low.get(), m.stripe_id.get())
                    == (meta.segment_sequence_low.get(), meta.stripe_id.get())
            };
            let other = (0..drives.len()).filter(|d| *d != damaged).find(|d| {
                block_metadata(&mut open[*d], lba).is_some_and(|(m, kind)| kind == BlockKind::Data && same_stripe(&m))
            });
            if let Some(other) = other {
                return (lba, other);
            }
        }
    }
    panic!("no full zone of drive {damaged} holds a stripe row with two data blocks");
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

/// A read that comes across a damaged block rebuilds it and rewrites every live block of
/// its stripe row, as a scrub does: when another drive of that row fails later, every
/// block still reads back (before, only the damaged block moved, and the rest of its row
/// then lacked two chunks of RAID-5's four).
#[test]
fn a_read_repair_rewrites_the_row_so_a_later_failure_loses_nothing() {
    let _serial = serial();
    let world = World::formatted("raid5", 4, 12, 1200, &["--mode", "zone-write"]);
    world.write_and_verify(Some(1), 1);
    let damaged = 1;
    let (lba, other) = data_row(&world.drives, damaged);
    EmulatedDrive::open_file(Path::new(&world.drives[damaged])).unwrap().corrupt_block(lba, 4_321).unwrap();
    // Every block read through the array: the damaged one is rebuilt from its row, which
    // the stop that ends the run writes elsewhere.
    world.write_and_verify(None, 1);

    world.start(&[], &[]);
    world.ok(&["fail", "rp", &world.drives[other]]);
    world.ok(&["stop", "rp"]);
    write_and_verify(&world.without(&[other]), world.blocks, None, 1);
}
