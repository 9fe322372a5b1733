//! A write whose blocks span two stripes, one of which fails: the write is answered once,
//! with the error, and the other stripe landing afterwards must not trip the engine (it
//! used to panic looking for the write it belonged to).
//!
//! Driven by hand (no simulator), so that the failing stripe's chunks complete, with two
//! drives failing, before the other stripe's.

use std::collections::HashMap;

use zapraid_engine::{Engine, Mode, RaidLevel, Request};
use zapraid_zns::{Command, Completion, Done, Error as DriveError, Geometry};

mod common;

use common::BLOCK;

/// The test drives' zone size (`common::geometry`).
const ZONE_SIZE_BLOCKS: u64 = 64;

/// Completes `command` as a drive that accepts everything would, appends landing at the
/// zone's write pointer (kept in `pointers`).
fn complete(tag: u64, command: Command, pointers: &mut HashMap<(usize, u64), u64>, drive: usize) -> Completion {
    let (result, data, metadata) = match command {
        Command::Write { lba, data, metadata } => {
            let blocks = (data.len() / BLOCK) as u64;
            let zone_start = lba - lba % ZONE_SIZE_BLOCKS;
            pointers.insert((drive, zone_start), lba + blocks);
            (Ok(Done::Written { lba, blocks }), data, metadata)
        }
        Command::Append { zone_start_lba, data, metadata } => {
            let blocks = (data.len() / BLOCK) as u64;
            let pointer = pointers.entry((drive, zone_start_lba)).or_insert(zone_start_lba);
            let lba = *pointer;
            *pointer += blocks;
            (Ok(Done::Written { lba, blocks }), data, metadata)
        }
        Command::ManageZone { .. } => (Ok(Done::ZoneManaged), Vec::new(), Vec::new()),
        Command::Read { data, metadata, .. } => (Ok(Done::Read), data, metadata),
        Command::ReportZones { .. } => (Ok(Done::Zones(Vec::new())), Vec::new(), Vec::new()),
    };
    Completion { tag, result, data, metadata }
}

#[test]
fn a_write_whose_other_stripe_failed_is_answered_once_and_its_last_stripe_lands_quietly() {
    let config = common::config(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 }, 1, 60);
    // Zone Appends of one block: each one-block chunk goes alone (`append_batch` merges
    // a pass's chunks per drive up to this limit), so one stripe's chunks can fail while
    // the other's are still in flight.
    let geometry = Geometry { zone_append_max_blocks: 1, ..common::geometry(12, 8, 10) };
    let mut engine = Engine::format(geometry, config).unwrap();
    // Six blocks: two full stripes of three data chunks of one block.
    engine.submit(1, Request::Write { lba: 0, data: vec![5u8; 6 * BLOCK] }, 0);
    let mut pointers = HashMap::new();
    // Everything but the stripes' chunk appends completes at once (segment headers).
    let mut appends = Vec::new();
    loop {
        let mut progressed = false;
        while let Some(c) = engine.poll_command() {
            progressed = true;
            match c.command {
                Command::Append { .. } => appends.push(c),
                command => {
                    let completion = complete(c.tag, command, &mut pointers, c.drive);
                    engine.on_completion(c.drive, completion, 0);
                }
            }
        }
        if !progressed {
            break;
        }
    }
    assert_eq!(appends.len(), 8, "two stripes of four chunks in flight");
    let second = appends.split_off(4);
    // The second stripe loses the chunks on drives 1 and 2: more than RAID-5 survives.
    for c in second {
        let completion = if c.drive == 1 || c.drive == 2 {
            Completion { tag: c.tag, result: Err(DriveError::DeviceFailed), data: Vec::new(), metadata: Vec::new() }
        } else {
            complete(c.tag, c.command, &mut pointers, c.drive)
        };
        engine.on_completion(c.drive, completion, 0);
    }
    let first_answer = engine.poll_response().expect("the write is answered when its stripe fails");
    assert_eq!(first_answer.id, 1);
    assert!(first_answer.result.is_err(), "a stripe of it failed");
    // The first stripe's chunks, issued before the drives failed, land now.
    for c in appends {
        let completion = complete(c.tag, c.command, &mut pointers, c.drive);
        engine.on_completion(c.drive, completion, 0);
    }
    while let Some(c) = engine.poll_command() {
        let completion = complete(c.tag, c.command, &mut pointers, c.drive);
        engine.on_completion(c.drive, completion, 0);
    }
    assert!(engine.poll_response().is_none(), "the write was answered once");
}
