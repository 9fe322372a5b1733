//! A start with drives gone, end to end: assembled (refused, or with `--degraded` the
//! absent drive recorded failed first), then run through a `Session` that writes and reads
//! blocks back. Across rooms (`assemble`, `run`), so here rather than beside either.

use std::path::{Path, PathBuf};

use zapraid_engine::Request;
use zapraid_server::assemble::degraded::AbsentDrive;
use zapraid_server::assemble::{assemble, assemble_with, format, Assembled, NewlyMissing};
use zapraid_server::drives::open_drive;
use zapraid_server::records::superblock::{failed_drives, read_superblock};
use zapraid_server::run::Session;
use zapraid_zns::{EmulatedDrive, Geometry};

mod common;
use common::raid5_drive_files;

/// Blocks written and read back.
const BLOCKS: u64 = 96;

fn drive_geometry() -> Geometry {
    Geometry { metadata_bytes_per_block: 64, ..Geometry::small(12, 256, 240) }
}

/// Four drive files formatted as a RAID-5 array.
fn formatted_drives() -> (tempfile::TempDir, Vec<PathBuf>) {
    let (dir, paths, options) = raid5_drive_files(drive_geometry(), "t", None, 1);
    format(&paths, &options, |_, _| {}).unwrap();
    (dir, paths)
}

/// Block `lba` as pass `pass` writes it.
fn pattern(lba: u64, pass: u64, block: usize) -> Vec<u8> {
    (0..block).map(|i| (lba as u8).wrapping_mul(31) ^ (pass as u8) ^ (i as u8)).collect()
}

/// Runs an assembled array (`Session`): writes blocks 0..BLOCKS as `write_pass` if
/// given, reads them back against `read_pass`'s pattern, stops it cleanly.
fn run(assembled: Assembled, write_pass: Option<u64>, read_pass: u64) {
    let session = Session::start(assembled).unwrap();
    let block = session.block_bytes;
    if let Some(pass) = write_pass {
        let data = (0..BLOCKS).flat_map(|l| pattern(l, pass, block)).collect();
        session.ask(Request::Write { lba: 0, data }).unwrap();
        session.ask(Request::Flush).unwrap();
    }
    let got = session.ask(Request::Read { lba: 0, blocks: BLOCKS }).unwrap();
    for (l, data) in got.chunks(block).enumerate() {
        assert!(data == pattern(l as u64, read_pass, block), "block {l} differs");
    }
    session.stop().unwrap();
}

fn generation(path: &Path) -> (u64, Vec<usize>) {
    let sb = read_superblock(open_drive(path).unwrap().as_mut()).unwrap();
    (sb.generation.get(), failed_drives(&sb))
}

/// A drive gone since the last stop: refused without the flag (nothing written), with
/// it recorded failed on the others before the array runs, its blocks rebuilt on read;
/// the next start needs no flag. Nothing is ever created where the drive was.
#[test]
fn a_drive_gone_is_refused_then_recorded_failed_and_rebuilt_on_read() {
    let (_dir, paths) = formatted_drives();
    run(assemble(&paths).unwrap(), Some(1), 1);
    std::fs::remove_file(&paths[1]).unwrap();
    let without: Vec<PathBuf> = paths.iter().enumerate().filter(|(i, _)| *i != 1).map(|(_, p)| p.clone()).collect();
    let before = generation(&paths[0]);
    for given in [&without, &paths] {
        let e = assemble(given).err().expect("refused").to_string();
        assert!(e.starts_with("array \"t\" cannot start: drive 1 is missing"), "{e}");
        assert!(e.contains("add --degraded"), "{e}");
        assert_eq!(generation(&paths[0]), before, "a refused start wrote a superblock");
    }
    let mut assembled = assemble_with(&paths, NewlyMissing::RecordFailed).unwrap();
    assert_eq!(assembled.absent, [AbsentDrive { index: 1, recorded_before: false, in_spare_space: false }]);
    assert_eq!(assembled.failed, [1]);
    assert_eq!(assembled.paths[1], None);
    assert_eq!(assembled.unusable.len(), 1, "the path given for drive 1 is said as not used");
    for i in [0, 2, 3] {
        // Read through the assembled drives: they hold the files' locks.
        let sb = read_superblock(assembled.drives[i].inner_mut().as_mut()).unwrap();
        assert_eq!((sb.generation.get(), failed_drives(&sb)), (before.0 + 1, vec![1]), "drive {i}: recorded");
    }
    run(assembled, Some(2), 2);
    let assembled = assemble(&without).unwrap();
    assert_eq!(assembled.absent, [AbsentDrive { index: 1, recorded_before: true, in_spare_space: false }]);
    run(assembled, None, 2);
    for p in &without {
        assert_eq!(generation(p), (before.0 + 1, vec![1]), "{}: recorded once", p.display());
    }
    assert!(!paths[1].exists(), "something was written where the missing drive was");
}

/// A blank drive given in a drive's place is not used, and nothing is written to it.
#[test]
fn a_blank_drive_in_a_drive_place_is_left_untouched() {
    let (_dir, paths) = formatted_drives();
    run(assemble(&paths).unwrap(), Some(1), 1);
    std::fs::remove_file(&paths[2]).unwrap();
    EmulatedDrive::create_file(&paths[2], drive_geometry(), 9).unwrap();
    let e = assemble(&paths).err().expect("refused").to_string();
    assert!(e.contains("drive 2 is missing (given but not used: "), "{e}");
    assert!(e.contains("it is blank"), "{e}");
    let assembled = assemble_with(&paths, NewlyMissing::RecordFailed).unwrap();
    assert_eq!(assembled.failed, [2]);
    run(assembled, None, 1);
    let mut blank = open_drive(&paths[2]).unwrap();
    let zones = zapraid_zns::report_all_zones(blank.as_mut()).unwrap();
    assert!(zones.iter().all(|z| z.written_blocks() == 0), "the blank drive was written");
}

/// Beyond what the level survives, even with the flag: refused naming the drives.
#[test]
fn more_drives_gone_than_the_level_survives_is_refused() {
    let (_dir, paths) = formatted_drives();
    let e = assemble_with(&paths[..2], NewlyMissing::RecordFailed).err().expect("refused").to_string();
    assert!(e.contains("RAID-5 (3+1) survives 1 failed drive, and drives 2 and 3 are missing or failed"), "{e}");
    // All here, and a drive of nothing besides: named as before.
    let extra = paths[0].with_file_name("extra.zns");
    EmulatedDrive::create_file(&extra, drive_geometry(), 7).unwrap();
    let mut given = paths.clone();
    given.push(extra);
    let e = assemble(&given).err().expect("refused").to_string();
    assert!(e.contains("extra.zns refused: it holds no zapraid array superblock: it is blank"), "{e}");
}
