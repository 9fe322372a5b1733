//! Merged chunk appends (`engine::append_batch`): a write of several stripes goes to each
//! drive as few Zone Appends as the drive's limits allow, not one per chunk; every block
//! reads back; a merged command that fails fails each of its chunks, which the other
//! drives then rebuild on read.
//!
//! Driven by hand over in-memory drives (`zapraid_zns::execute`), so that every command
//! the engine sends is seen and counted.

use zapraid_engine::{Config, Engine, Mode, RaidLevel, Request, Response};
use zapraid_zns::{execute, Command, Completion, EmulatedDrive, Error as DriveError};

mod common;

use common::BLOCK;

const DRIVES: usize = 4;
/// Stripes the write fills: (3+1)-RAID-5 of one-block chunks, three data blocks each.
const STRIPES: u64 = 8;
const WRITE_BLOCKS: u64 = STRIPES * 3;

fn config(merge_appends: bool) -> Config {
    let base = common::config(RaidLevel::Raid5 { drives: DRIVES }, Mode::ZapRaid { group_size: 16 }, 1, 120);
    Config { merge_appends, ..base }
}

/// Runs every command the engine has for the drives, `fail(drive, command)` saying which
/// fail instead; each chunk write it sent (Zone Append or Zone Write) in blocks.
fn run(engine: &mut Engine, drives: &mut [EmulatedDrive], fail: &dyn Fn(usize, &Command) -> bool) -> Vec<(usize, u64)> {
    let mut appends = Vec::new();
    while let Some(c) = engine.poll_command() {
        if let Command::Append { data, .. } = &c.command {
            appends.push((c.drive, (data.len() / BLOCK) as u64));
        }
        let completion = if fail(c.drive, &c.command) {
            Completion { tag: c.tag, result: Err(DriveError::DeviceFailed), data: Vec::new(), metadata: Vec::new() }
        } else {
            Completion { tag: c.tag, ..execute(&mut drives[c.drive], c.command) }
        };
        engine.on_completion(c.drive, completion, 0);
    }
    appends
}

fn responses(engine: &mut Engine) -> Vec<Response> {
    std::iter::from_fn(|| engine.poll_response()).collect()
}

/// Writes `WRITE_BLOCKS` named blocks in one request: its data's chunk appends, in
/// blocks, per command, and whether it was acknowledged.
fn write_all(
    engine: &mut Engine,
    drives: &mut [EmulatedDrive],
    fail: &dyn Fn(usize, &Command) -> bool,
) -> (Vec<(usize, u64)>, bool) {
    // The segment's header first, so that the write's chunks are all that is appended.
    run(engine, drives, &|_, _| false);
    let data: Vec<u8> = (0..WRITE_BLOCKS).flat_map(|lba| common::named_block(lba, 1)).collect();
    engine.submit(1, Request::Write { lba: 0, data }, 0);
    let appends = run(engine, drives, fail);
    let acked = responses(engine).iter().any(|r| r.id == 1 && r.result.is_ok());
    (appends, acked)
}

fn read_back(engine: &mut Engine, drives: &mut [EmulatedDrive]) {
    engine.submit(2, Request::Read { lba: 0, blocks: WRITE_BLOCKS }, 0);
    run(engine, drives, &|_, _| false);
    let answer = responses(engine).into_iter().find(|r| r.id == 2).expect("the read is answered");
    let data = answer.result.unwrap_or_else(|e| panic!("read: {e}"));
    for lba in 0..WRITE_BLOCKS {
        let block = &data[lba as usize * BLOCK..(lba as usize + 1) * BLOCK];
        assert!(block == common::named_block(lba, 1).as_slice(), "block {lba} reads back what was written");
    }
}

fn array(merge_appends: bool) -> (Engine, Vec<EmulatedDrive>) {
    let geometry = common::geometry(12, 8, 10);
    let engine = Engine::format(geometry, config(merge_appends)).unwrap();
    let drives = (0..DRIVES).map(|d| EmulatedDrive::memory(geometry, d as u64).unwrap()).collect();
    (engine, drives)
}

#[test]
fn a_write_of_several_stripes_goes_as_one_append_per_drive() {
    let (mut engine, mut drives) = array(true);
    let (appends, acked) = write_all(&mut engine, &mut drives, &|_, _| false);
    assert!(acked, "the write is acknowledged");
    // Eight one-block chunks per drive, and the test drives take 8 blocks per Zone Append.
    let mut expected: Vec<(usize, u64)> = (0..DRIVES).map(|d| (d, STRIPES)).collect();
    let mut sorted = appends.clone();
    sorted.sort();
    expected.sort();
    assert_eq!(sorted, expected, "one append of every stripe's chunk per drive: {appends:?}");
    read_back(&mut engine, &mut drives);
}

#[test]
fn without_merging_every_chunk_is_its_own_append() {
    let (mut engine, mut drives) = array(false);
    let (appends, acked) = write_all(&mut engine, &mut drives, &|_, _| false);
    assert!(acked);
    assert_eq!(appends.len() as u64, STRIPES * DRIVES as u64, "{appends:?}");
    assert!(appends.iter().all(|&(_, blocks)| blocks == 1));
    read_back(&mut engine, &mut drives);
}

#[test]
fn a_failed_merged_append_fails_each_chunk_and_reads_rebuild_them() {
    let (mut engine, mut drives) = array(true);
    // Drive 2's merged append fails: every stripe loses one chunk, which RAID-5 survives.
    let fail = |drive: usize, command: &Command| drive == 2 && matches!(command, Command::Append { .. });
    let (appends, acked) = write_all(&mut engine, &mut drives, &fail);
    assert_eq!(appends.len(), DRIVES, "{appends:?}");
    assert!(acked, "each stripe lost one chunk of four: the write is acknowledged");
    assert!(engine.is_failed(2), "the drive whose append failed is failed");
    read_back(&mut engine, &mut drives);
}
