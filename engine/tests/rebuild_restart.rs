//! A rebuild stopped (its new drive failed) and started again onto another drive while
//! commands of the first were still in flight: their completions arrive during the
//! second rebuild, and must count for nothing in it. Before rebuild commands carried the
//! rebuild they belong to, they were taken for the second's (a late Zone Finish could
//! mark a segment rebuilt that the second had not written), and a second failure after
//! the rebuild lost blocks: "block 1: 2 of 4 chunks of a stripe are lost".
//!
//! Driven by hand over in-memory drives (`zapraid_zns::execute`), so that the test decides
//! which commands complete when.

use zapraid_engine::{Config, DriveCommand, Engine, Mode, RaidLevel, Request};
use zapraid_zns::{execute, Command, Completion, EmulatedDrive, ZoneAction};

mod common;

const DRIVES: usize = 4;
const TARGET: usize = 1;
/// Blocks the array exports and the test writes, each several times.
const LBAS: u64 = 120;
const ROUNDS: u64 = 3;

fn complete(engine: &mut Engine, drives: &mut [EmulatedDrive], c: DriveCommand) {
    let completion = Completion { tag: c.tag, ..execute(&mut drives[c.drive], c.command) };
    engine.on_completion(c.drive, completion, 0);
}

/// Runs every command the engine has until it has none.
fn run(engine: &mut Engine, drives: &mut [EmulatedDrive]) {
    while let Some(c) = engine.poll_command() {
        complete(engine, drives, c);
    }
}

fn read(engine: &mut Engine, drives: &mut [EmulatedDrive], id: u64, lba: u64) -> Vec<u8> {
    engine.submit(id, Request::Read { lba, blocks: 1 }, 0);
    run(engine, drives);
    let answer = std::iter::from_fn(|| engine.poll_response()).find(|r| r.id == id).expect("the read is answered");
    answer.result.unwrap_or_else(|e| panic!("block {lba}: {e}"))
}

#[test]
fn late_completions_of_a_stopped_rebuild_count_for_nothing_in_the_next() {
    let geometry = common::geometry(12, 8, 10);
    let base = common::config(RaidLevel::Raid5 { drives: DRIVES }, Mode::ZoneWriteOnly, 1, LBAS);
    let config = Config { merge_appends: true, ..base };
    let mut engine = Engine::format(geometry, config).unwrap();
    let mut drives: Vec<EmulatedDrive> =
        (0..DRIVES).map(|d| EmulatedDrive::memory(geometry, d as u64).unwrap()).collect();
    for round in 1..=ROUNDS {
        for lba in 0..LBAS {
            engine.submit(lba, Request::Write { lba, data: common::named_block(lba, round) }, 0);
            run(&mut engine, &mut drives);
        }
    }
    engine.submit(LBAS, Request::Flush, 0);
    run(&mut engine, &mut drives);
    assert!(std::iter::from_fn(|| engine.poll_response()).all(|r| r.result.is_ok()), "the fill is acknowledged");
    let sealed = engine.status().segments;
    assert!(sealed >= 3, "segments for the rebuilds to read: {sealed}");

    // The first rebuild runs until it sends the new drive a Zone Finish (a segment
    // written): that and every command sent with it are held, in flight.
    engine.fail_drive(TARGET);
    drives[TARGET] = EmulatedDrive::memory(geometry, 100).unwrap();
    engine.rebuild_drive(TARGET).unwrap();
    let finish = |c: &DriveCommand| {
        c.drive == TARGET && matches!(c.command, Command::ManageZone { action: ZoneAction::Finish, .. })
    };
    let held = loop {
        engine.tick(0);
        let sent: Vec<DriveCommand> = std::iter::from_fn(|| engine.poll_command()).collect();
        assert!(!sent.is_empty(), "the first rebuild ended without a Zone Finish to hold");
        if sent.iter().any(finish) {
            break sent;
        }
        for c in sent {
            complete(&mut engine, &mut drives, c);
        }
    };
    // Its drive fails: the rebuild stops. Another takes its place and a rebuild starts.
    engine.fail_drive(TARGET);
    assert!(engine.rebuild_status().is_none(), "the first rebuild stopped");
    let first_drive = std::mem::replace(&mut drives[TARGET], EmulatedDrive::memory(geometry, 200).unwrap());
    engine.rebuild_drive(TARGET).unwrap();
    engine.tick(0);
    // The first rebuild's commands complete now, on the drives they went to.
    let mut first_drive = first_drive;
    for c in held {
        let on = if c.drive == TARGET { &mut first_drive } else { &mut drives[c.drive] };
        let completion = Completion { tag: c.tag, ..execute(on, c.command) };
        engine.on_completion(c.drive, completion, 0);
    }
    while engine.rebuild_status().is_some() {
        engine.tick(0);
        run(&mut engine, &mut drives);
    }
    assert_eq!(engine.status().rebuilds_completed, 1, "the second rebuild completed");
    // Another drive fails: every block now comes from the rebuilt one or its stripe.
    let other = (TARGET + 1) % DRIVES;
    engine.fail_drive(other);
    for lba in 0..LBAS {
        let data = read(&mut engine, &mut drives, 1_000 + lba, lba);
        assert!(data == common::named_block(lba, ROUNDS), "block {lba} reads back after the second rebuild");
    }
}
