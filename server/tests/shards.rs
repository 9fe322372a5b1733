//! Arrays of engine shards end to end over drive files: formatted with S shards, run
//! through a `Session` (one engine thread per shard over its parts of the drives), with
//! requests that cross the shards' units, a drive failed (by one message: every shard
//! fails it, the superblock records it once), a clean stop and a start again (from each
//! shard's checkpoint when the array keeps one), every block read back as last written.

use std::path::PathBuf;

use zapraid_engine::Request;
use zapraid_server::assemble::{assemble, format, FormatOptions};
use zapraid_server::drives::open_drive;
use zapraid_server::records::superblock::{failed_drives, read_superblock};
use zapraid_server::run::{Message, Session};
use zapraid_zns::Geometry;

mod common;
use common::raid5_drive_files;

/// The interleave unit in blocks of 4 KiB (`shard::DEFAULT_UNIT_BYTES`).
const UNIT_BLOCKS: u64 = 128;

fn drive_geometry() -> Geometry {
    Geometry { metadata_bytes_per_block: 64, ..Geometry::small(48, 512, 480) }
}

/// Four new drive files, and the options of a RAID-5 array of `shards` shards on them.
fn drives(shards: u32, l2p_budget_bytes: Option<u64>) -> (tempfile::TempDir, Vec<PathBuf>, FormatOptions) {
    raid5_drive_files(drive_geometry(), "s", l2p_budget_bytes, shards)
}

/// Four drive files formatted as a RAID-5 array of `shards` shards.
fn formatted(shards: u32, l2p_budget_bytes: Option<u64>) -> (tempfile::TempDir, Vec<PathBuf>, u64) {
    let (dir, paths, options) = drives(shards, l2p_budget_bytes);
    let formatted = format(&paths, &options, |_, _| {}).unwrap();
    (dir, paths, formatted.logical_blocks)
}

/// Block `lba` as pass `pass` writes it.
fn pattern(lba: u64, pass: u64, block: usize) -> Vec<u8> {
    (0..block).map(|i| (lba as u8).wrapping_mul(31) ^ (pass as u8).wrapping_mul(7) ^ (i as u8)).collect()
}

/// Writes runs of blocks that start just before a unit's end (so each crosses into the
/// next unit, another shard's) and blocks within units, as pass `pass`; returns the
/// blocks written.
fn write_runs(session: &Session, logical_blocks: u64, pass: u64) -> Vec<u64> {
    let block = session.block_bytes;
    let mut written = Vec::new();
    let mut lba = UNIT_BLOCKS - 3;
    while lba + 8 <= logical_blocks.min(UNIT_BLOCKS * 12) {
        let data = (lba..lba + 8).flat_map(|l| pattern(l, pass, block)).collect();
        session.ask(Request::Write { lba, data }).unwrap();
        written.extend(lba..lba + 8);
        lba += UNIT_BLOCKS + 17;
    }
    session.ask(Request::Flush).unwrap();
    written
}

/// Reads back every run `write_runs` wrote, in one request per run and one spanning three
/// units, against pass `pass`.
fn check_runs(session: &Session, written: &[u64], pass: u64) {
    let block = session.block_bytes;
    for run in written.chunks(8) {
        let got = session.ask(Request::Read { lba: run[0], blocks: 8 }).unwrap();
        let want: Vec<u8> = run.iter().flat_map(|l| pattern(*l, pass, block)).collect();
        assert!(got == want, "blocks {}.. read back wrong", run[0]);
    }
    // A read across three units (three shards' parts) joined in LBA order.
    let (first, blocks) = (written[0], 2 * UNIT_BLOCKS + 8);
    let got = session.ask(Request::Read { lba: first, blocks }).unwrap();
    for (i, chunk) in got.chunks(block).enumerate() {
        let lba = first + i as u64;
        let want = if written.contains(&lba) { pattern(lba, pass, block) } else { vec![0; block] };
        assert!(chunk == want.as_slice(), "block {lba} of the spanning read");
    }
}

fn shards_keep_every_block(shards: u32, l2p_budget_bytes: Option<u64>) {
    let (_dir, paths, logical_blocks) = formatted(shards, l2p_budget_bytes);
    let session = Session::start(assemble(&paths).unwrap()).unwrap();
    let written = write_runs(&session, logical_blocks, 1);
    check_runs(&session, &written, 1);
    let status = session.status().unwrap();
    assert_eq!(status.shards.len(), shards as usize, "each shard's status");
    assert_eq!(status.engine.mapped_blocks, written.len() as u64, "the shards' sum");
    assert!(status.shards.iter().all(|s| s.mapped_blocks > 0), "every shard took blocks: {:?}", status.shards);
    assert_eq!(status.logical_blocks, logical_blocks);
    // Requests, not their parts: every write crossed into another shard's unit.
    assert_eq!(status.writes, written.len() as u64 / 8, "writes counted once each");
    assert_eq!(status.flushes, 1, "a flush reaches every shard, counted once");
    session.stop().unwrap();

    // Again from the drives (from every shard's checkpoint when the array keeps one).
    let session = Session::start(assemble(&paths).unwrap()).unwrap();
    let status = session.status().unwrap();
    if let Some(budget) = l2p_budget_bytes {
        assert!(status.engine.start.checkpoint_generation.is_some(), "every shard started from its checkpoint");
        // The array's budget shared among its shards (each rounds its share down to whole
        // pages), not given to each.
        let shared = status.engine.l2p.budget_bytes.unwrap();
        let page_bytes = 4096 * u64::from(shards);
        assert!(shared <= budget && shared + page_bytes > budget, "{shared} of {budget}");
    }
    check_runs(&session, &written, 1);
    // One failure, told once: every shard fails the drive, the superblock records it.
    let (done, answer) = crossbeam_channel::bounded(1);
    session.thread.tx().send(Message::FailDrive { drive: 2, force: false, done }).unwrap();
    answer.recv().unwrap().unwrap();
    let status = session.status().unwrap();
    assert!(status.shards.iter().all(|s| s.failed_drives == vec![2]), "{:?}", status.shards);
    let written_again = write_runs(&session, logical_blocks, 2);
    check_runs(&session, &written_again, 2);
    session.stop().unwrap();
    let mut drive = open_drive(&paths[0]).unwrap();
    let sb = read_superblock(drive.as_mut()).unwrap();
    assert_eq!(failed_drives(&sb), vec![2], "recorded once, for the array");
    drop(drive);

    // Degraded, from the drives again.
    let session = Session::start(assemble(&paths).unwrap()).unwrap();
    check_runs(&session, &written_again, 2);
    session.stop().unwrap();
}

#[test]
fn two_shards_keep_every_block_across_a_failure_and_restarts() {
    shards_keep_every_block(2, None);
}

#[test]
fn three_shards_with_checkpoints_keep_every_block_across_a_failure_and_restarts() {
    shards_keep_every_block(3, Some(64 << 10));
}

#[test]
fn shards_export_less_than_one_engine_and_format_refuses_too_many() {
    let (_dir, _paths, one) = formatted(1, None);
    let (_dir2, _paths2, two) = formatted(2, None);
    assert!(two < one && two.is_multiple_of(2 * UNIT_BLOCKS), "{two} of {one}");
    let (_dir3, paths, options) = drives(40, None);
    let err = format(&paths, &options, |_, _| {}).unwrap_err().to_string();
    assert!(err.contains("40 shards of 1 open segment"), "{err}");
}
