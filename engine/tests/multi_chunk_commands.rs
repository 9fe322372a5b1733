//! Commands of several chunks. Merged chunk appends (`engine::append_batch`): a write of
//! several stripes goes to each drive as few Zone Appends as the drive's limits allow, not
//! one per chunk; every block reads back; a merged command that fails fails each of its
//! chunks, which the other drives then rebuild on read. A drive rebuild (`engine::rebuild`)
//! reads and writes consecutive chunks in commands of up to a transfer, and every block
//! reads back from the rebuilt drive.
//!
//! Driven by hand over in-memory drives (`zapraid_zns::execute`), so that every command
//! the engine sends is seen and counted.

use zapraid_engine::{Config, Engine, Mode, RaidLevel, Request, Response};
use zapraid_zns::Geometry;
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
/// fail instead; each Zone Append it sent, (drive, blocks).
fn run(engine: &mut Engine, drives: &mut [EmulatedDrive], fail: &dyn Fn(usize, &Command) -> bool) -> Vec<(usize, u64)> {
    run_seeing(engine, drives, fail, &mut |_, _| {})
}

/// As `run`, showing `seen` every command before it runs.
fn run_seeing(
    engine: &mut Engine,
    drives: &mut [EmulatedDrive],
    fail: &dyn Fn(usize, &Command) -> bool,
    seen: &mut dyn FnMut(usize, &Command),
) -> Vec<(usize, u64)> {
    let mut appends = Vec::new();
    while let Some(c) = engine.poll_command() {
        seen(c.drive, &c.command);
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

/// The test drives' geometry.
fn geometry() -> Geometry {
    common::geometry(12, 8, 10)
}

fn array(merge_appends: bool) -> (Engine, Vec<EmulatedDrive>) {
    array_of(config(merge_appends))
}

/// An array of `config` over in-memory test drives.
fn array_of(config: Config) -> (Engine, Vec<EmulatedDrive>) {
    array_on(geometry(), config)
}

/// An array of `config` over in-memory drives of `geometry`.
fn array_on(geometry: Geometry, config: Config) -> (Engine, Vec<EmulatedDrive>) {
    let engine = Engine::format(geometry, config).unwrap();
    let drives = (0..DRIVES).map(|d| EmulatedDrive::memory(geometry, d as u64).unwrap()).collect();
    (engine, drives)
}

/// The test drives with a granule of 3 blocks: commands of 1-3, 6, 9, 12 or 15 blocks (as
/// NVMe passthrough with 64 B metadata takes 1-8 or multiples of 8). 3, so that a
/// rebuild's full runs of 16 and tails of 8 chunks are counts the drives refuse.
fn granular_geometry() -> Geometry {
    Geometry { transfer_granule_blocks: 3, ..geometry() }
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
fn merged_appends_are_cut_to_counts_the_granule_allows() {
    let (mut engine, mut drives) = array_on(granular_geometry(), config(true));
    run(&mut engine, &mut drives, &|_, _| false);
    // Seven stripes: seven chunks per drive, which the drives take as 6 and 1, not 7.
    let stripes = 7;
    let data: Vec<u8> = (0..stripes * 3).flat_map(|lba| common::named_block(lba, 1)).collect();
    engine.submit(1, Request::Write { lba: 0, data }, 0);
    let appends = run(&mut engine, &mut drives, &|_, _| false);
    assert!(responses(&mut engine).iter().any(|r| r.id == 1 && r.result.is_ok()), "the write is acknowledged");
    assert!((0..DRIVES).all(|d| !engine.is_failed(d)), "no drive refused a command");
    for drive in 0..DRIVES {
        let mut sizes: Vec<u64> = appends.iter().filter(|(d, _)| *d == drive).map(|(_, b)| *b).collect();
        sizes.sort();
        assert_eq!(sizes, [1, 6], "drive {drive}: {appends:?}");
    }
    engine.submit(2, Request::Read { lba: 0, blocks: stripes * 3 }, 0);
    run(&mut engine, &mut drives, &|_, _| false);
    let answer = responses(&mut engine).into_iter().find(|r| r.id == 2).expect("the read is answered");
    let data = answer.result.unwrap_or_else(|e| panic!("read: {e}"));
    for lba in 0..stripes * 3 {
        let block = &data[lba as usize * BLOCK..(lba as usize + 1) * BLOCK];
        assert!(block == common::named_block(lba, 1).as_slice(), "block {lba} reads back what was written");
    }
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

/// The blocks of the largest read and the largest Zone Write a rebuild sent the drives.
#[derive(Default)]
struct Largest {
    read_blocks: u64,
    write_blocks: u64,
}

#[test]
fn a_rebuild_reads_and_writes_several_chunks_per_command() {
    rebuild_in_commands_of_several_chunks(geometry());
}

#[test]
fn a_rebuild_cuts_its_commands_to_counts_the_granule_allows() {
    rebuild_in_commands_of_several_chunks(granular_geometry());
}

/// Fills an array over drives of `geometry`, rebuilds a drive and reads every block
/// back with another failed: the rebuild's reads and writes carry several chunks each,
/// and every one is a count the drives take.
fn rebuild_in_commands_of_several_chunks(geometry: Geometry) {
    const FAILED: usize = 1;
    // Zone Writes throughout (the rebuild's chunks are at their stripes' offsets), zones
    // of 60 blocks: a few sealed segments from a fill of the array.
    let base = common::config(RaidLevel::Raid5 { drives: DRIVES }, Mode::ZoneWriteOnly, 1, 120);
    let (mut engine, mut drives) = array_on(geometry, Config { merge_appends: true, ..base });
    // Every block written three times over: segments sealed full for the rebuild to read.
    let (fill_blocks, rounds) = (120, 3);
    for round in 1..=rounds {
        for lba in 0..fill_blocks {
            engine.submit(lba, Request::Write { lba, data: common::named_block(lba, round) }, 0);
            run(&mut engine, &mut drives, &|_, _| false);
        }
    }
    engine.submit(fill_blocks, Request::Flush, 0);
    run(&mut engine, &mut drives, &|_, _| false);
    assert!(responses(&mut engine).iter().all(|r| r.result.is_ok()), "the fill is acknowledged");
    engine.fail_drive(FAILED);
    drives[FAILED] = EmulatedDrive::memory(geometry, 99).unwrap();
    engine.rebuild_drive(FAILED).unwrap();
    let mut largest = Largest::default();
    let mut refused = Vec::new();
    let mut seen = |drive: usize, command: &Command| {
        if let Command::Read { data, .. } | Command::Write { data, .. } = command {
            let blocks = (data.len() / BLOCK) as u64;
            if !geometry.transfer_takes(blocks) {
                refused.push(blocks);
            }
        }
        match command {
            Command::Read { data, .. } if drive != FAILED => {
                largest.read_blocks = largest.read_blocks.max((data.len() / BLOCK) as u64)
            }
            Command::Write { data, .. } if drive == FAILED => {
                largest.write_blocks = largest.write_blocks.max((data.len() / BLOCK) as u64)
            }
            _ => {}
        }
    };
    while engine.rebuild_status().is_some() {
        engine.tick(0);
        run_seeing(&mut engine, &mut drives, &|_, _| false, &mut seen);
    }
    assert!(refused.is_empty(), "commands of counts the drives refuse: {refused:?}");
    assert_eq!(engine.status().rebuilds_completed, 1, "the rebuild completed");
    // One-block chunks, and the test drives take 16 blocks per transfer.
    assert!(largest.read_blocks > 1, "reads of several chunks: the largest was {} blocks", largest.read_blocks);
    assert!(largest.write_blocks > 1, "writes of several chunks: the largest was {} blocks", largest.write_blocks);
    assert!(largest.read_blocks.max(largest.write_blocks) <= u64::from(geometry.max_transfer_blocks));
    // Another drive fails: every block now comes from the rebuilt one or its stripe.
    engine.fail_drive(3);
    for lba in 0..fill_blocks {
        engine.submit(1_000 + lba, Request::Read { lba, blocks: 1 }, 0);
        run(&mut engine, &mut drives, &|drive, _| drive == 3);
        let answer = responses(&mut engine).into_iter().find(|r| r.id == 1_000 + lba).expect("answered");
        let data = answer.result.unwrap_or_else(|e| panic!("block {lba}: {e}"));
        assert!(data == common::named_block(lba, rounds), "block {lba} reads back after the rebuild");
    }
}
