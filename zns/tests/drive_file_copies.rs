//! A drive file keeps two copies of its superblock and of every zone record: one damaged
//! copy (bit flips, as on a failing disk) leaves the drive opening with the right
//! geometry and zone state, and files made before the copies existed still open.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use zapraid_zns::drive_file::{FileLayout, SUPERBLOCK_COPY_OFFSET_BYTES, ZONE_RECORD_BYTES};
use zapraid_zns::{execute, report_all_zones, Command, EmulatedDrive, Geometry, ZoneState};

/// The zone written by the tests, and how many blocks.
const ZONE: u32 = 2;
const WRITTEN_BLOCKS: u64 = 5;
/// A byte of the superblock's geometry (block_size_bytes) and of a zone record
/// (written_blocks): flipping either changes what the drive would be.
const SUPERBLOCK_GEOMETRY_BYTE: u64 = 16;
const ZONE_RECORD_WRITTEN_BYTE: u64 = 8;

fn geometry() -> Geometry {
    Geometry::small(6, 64, 60)
}

/// A drive file with `WRITTEN_BLOCKS` blocks written at the start of `ZONE`.
fn drive_file(path: &Path) -> FileLayout {
    let g = geometry();
    let mut drive = EmulatedDrive::create_file(path, g, 7).unwrap();
    let lba = g.zone_start_lba(ZONE);
    let data = vec![0x5a; (WRITTEN_BLOCKS * u64::from(g.block_size_bytes)) as usize];
    execute(&mut drive, Command::Write { lba, data, metadata: Vec::new() }).result.unwrap();
    FileLayout::new(&g).unwrap()
}

fn flip_bit(path: &Path, offset: u64) {
    let file = OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, offset).unwrap();
    byte[0] ^= 1;
    file.write_all_at(&byte, offset).unwrap();
}

fn zone_record_offset(table_offset: u64, zone: u32) -> u64 {
    table_offset + u64::from(zone) * ZONE_RECORD_BYTES as u64
}

/// Opens the drive file and checks its geometry and the written zone.
fn assert_opens_intact(path: &Path) -> EmulatedDrive {
    let mut drive = EmulatedDrive::open_file(path).unwrap_or_else(|e| panic!("drive file does not open: {e}"));
    assert_eq!(zapraid_zns::ZonedDevice::geometry(&drive), geometry());
    let zones = report_all_zones(&mut drive).unwrap();
    assert_eq!(zones[ZONE as usize].written_blocks(), WRITTEN_BLOCKS);
    assert_eq!(zones[ZONE as usize].state, ZoneState::Closed);
    drive
}

#[test]
fn a_damaged_primary_superblock_or_zone_record_falls_back_to_its_copy() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.zns");
    let layout = drive_file(&path);
    flip_bit(&path, SUPERBLOCK_GEOMETRY_BYTE);
    flip_bit(&path, zone_record_offset(layout.zone_table_offset, ZONE) + ZONE_RECORD_WRITTEN_BYTE);
    drop(assert_opens_intact(&path));
    // The copies alone are damaged now (the primaries as above): the record was written
    // anew (both copies) when the zone came back closed, the superblock primary was not.
    flip_bit(&path, zone_record_offset(layout.zone_table_copy_offset, ZONE) + ZONE_RECORD_WRITTEN_BYTE);
    drop(assert_opens_intact(&path));
    flip_bit(&path, SUPERBLOCK_COPY_OFFSET_BYTES + SUPERBLOCK_GEOMETRY_BYTE);
    let error = EmulatedDrive::open_file(&path).err().expect("both superblock copies damaged, yet it opened");
    assert!(error.to_string().contains("superblock"), "{error}");
}

/// ... and can be re-initialised (what `format --force` does with it): every zone empty
/// and writable again, the geometry kept.
#[test]
fn a_zone_record_damaged_in_both_copies_names_the_zone_and_the_file_can_be_reinitialised() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.zns");
    let layout = drive_file(&path);
    for table in [layout.zone_table_offset, layout.zone_table_copy_offset] {
        flip_bit(&path, zone_record_offset(table, ZONE) + ZONE_RECORD_WRITTEN_BYTE);
    }
    let error = EmulatedDrive::open_file(&path).err().expect("both zone record copies damaged, yet it opened");
    assert!(error.to_string().contains(&format!("zone {ZONE} record (every copy)")), "{error}");
    assert!(error.to_string().contains("format --force"), "{error}");
    let mut drive = EmulatedDrive::reinitialize_file(&path).unwrap();
    assert_eq!(zapraid_zns::ZonedDevice::geometry(&drive), geometry());
    let zones = report_all_zones(&mut drive).unwrap();
    assert!(zones.iter().all(|z| z.state == ZoneState::Empty && z.written_blocks() == 0));
    let data = vec![0xa5; geometry().block_size_bytes as usize];
    let lba = geometry().zone_start_lba(ZONE);
    execute(&mut drive, Command::Write { lba, data, metadata: Vec::new() }).result.unwrap();
    drop(drive);
    drop(EmulatedDrive::open_file(&path).unwrap());
}

/// A file as made before the copies: nothing at the superblock copy, no zone table copy.
#[test]
fn a_file_without_the_copies_still_opens_and_works() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.zns");
    let layout = drive_file(&path);
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all_at(&[0u8; 96], SUPERBLOCK_COPY_OFFSET_BYTES).unwrap();
    file.set_len(layout.minimum_file_bytes).unwrap();
    drop(file);
    let mut drive = assert_opens_intact(&path);
    let g = geometry();
    let lba = g.zone_start_lba(ZONE) + WRITTEN_BLOCKS;
    let data = vec![0xa5; g.block_size_bytes as usize];
    execute(&mut drive, Command::Write { lba, data, metadata: Vec::new() }).result.unwrap();
    drop(drive);
    let mut drive = EmulatedDrive::open_file(&path).unwrap();
    assert_eq!(report_all_zones(&mut drive).unwrap()[ZONE as usize].written_blocks(), WRITTEN_BLOCKS + 1);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), layout.minimum_file_bytes, "the file grew");
}
