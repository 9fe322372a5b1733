//! A drive split into parts (`EmulatedDrive::split`), each driven by a thread of its own
//! at the same time: every part writes, appends, resets, finishes and reports its own
//! zones only, the drive file reopened afterwards holds what each part wrote, the open
//! and active zone limits hold across parts, the drive fails as a whole, and the drive
//! stays locked until its last part is gone.

use std::path::Path;
use std::sync::{Arc, Barrier};

use zapraid_zns::conformance::pattern_block;
use zapraid_zns::{
    execute, report_all_zones, Command, Done, DrivePart, EmulatedDrive, Error, Geometry, TimingParams, ZoneAction,
    ZoneState, ZoneTarget, ZonedDevice,
};

/// 13 zones: zone 0 stays outside every part (an array's superblock zone), 1..13 go to
/// three parts of four. The limits are exactly what the parts' workloads need at their
/// peaks together (6 open, 9 active) plus the outside zone's one active: a count that
/// leaked or was lost across parts would refuse a command.
fn geometry() -> Geometry {
    Geometry { max_open_zones: Some(6), max_active_zones: Some(10), ..Geometry::small(13, 64, 60) }
}

const PARTS: [(u32, u32); 3] = [(1, 4), (5, 4), (9, 4)];
const ROUNDS: u64 = 25;
/// Blocks of the zones of a part's workload, written in its last round: zone 0 full by
/// writes, zone 1 by appends then closed, zone 2 left open, zone 3 finished.
const WRITTEN: [u64; 4] = [60, 21, 5, 9];

fn done(device: &mut impl ZonedDevice, command: Command) -> Done {
    let what = format!("{} {command:?}", command.name()).chars().take(120).collect::<String>();
    execute(device, command).result.unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// `blocks` blocks of the pattern of drive LBA `drive_lba` on, with `salt`.
fn pattern(g: &Geometry, drive_lba: u64, blocks: u64, salt: u64) -> (Vec<u8>, Vec<u8>) {
    let (mut data, mut meta) = (Vec::new(), Vec::new());
    for i in 0..blocks {
        let (d, m) = pattern_block(g, drive_lba + i, salt);
        data.extend(d);
        meta.extend(m);
    }
    (data, meta)
}

/// Reads `blocks` blocks at `lba` of `device` (16 at a time) and checks them against the
/// pattern at drive LBA `drive_lba`.
fn check_blocks(device: &mut impl ZonedDevice, lba: u64, drive_lba: u64, blocks: u64, salt: u64) {
    let g = device.geometry();
    let mut at = 0;
    while at < blocks {
        let n = (blocks - at).min(16);
        let (data, metadata) = (vec![0; g.data_bytes(n)], vec![0; g.metadata_bytes(n)]);
        let read = execute(device, Command::Read { lba: lba + at, data, metadata });
        assert_eq!(read.result.unwrap(), Done::Read);
        let (want_data, want_meta) = pattern(&g, drive_lba + at, n, salt);
        assert!(read.data == want_data && read.metadata == want_meta, "blocks {at}.. at LBA {lba} differ");
        at += n;
    }
}

fn salt(round: u64, part: usize) -> u64 {
    round * 16 + part as u64
}

/// One round of a part's workload over its four zones (in its numbering): every zone
/// reset, then written as `WRITTEN` says, read back and reported.
fn workload_round(part: &mut DrivePart<EmulatedDrive>, index: usize, round: u64) {
    let g = part.geometry();
    assert_eq!(g.zone_count, 4);
    let offset = u64::from(part.span().first_zone()) * g.zone_size_blocks;
    let salt = salt(round, index);
    let zone_lba = |zone: u64| zone * g.zone_size_blocks;
    for zone in 0..4 {
        let target = ZoneTarget::Zone { start_lba: zone_lba(zone) };
        done(part, Command::ManageZone { action: ZoneAction::Reset, target });
    }
    // Zone 0: Zone Writes to capacity.
    let mut written = 0;
    while written < WRITTEN[0] {
        let n = (WRITTEN[0] - written).min(16);
        let (data, metadata) = pattern(&g, offset + written, n, salt);
        done(part, Command::Write { lba: written, data, metadata });
        written += n;
    }
    // Zone 1: appends, then closed.
    for i in 0..3 {
        let lba = zone_lba(1) + i * 7;
        let (data, metadata) = pattern(&g, offset + lba, 7, salt);
        assert_eq!(
            done(part, Command::Append { zone_start_lba: zone_lba(1), data, metadata }),
            Done::Written { lba, blocks: 7 },
            "an append lands at the part's LBA"
        );
    }
    done(part, Command::ManageZone { action: ZoneAction::Close, target: ZoneTarget::Zone { start_lba: zone_lba(1) } });
    // Zones 2 and 3: written; 3 finished.
    for zone in [2, 3] {
        let (data, metadata) = pattern(&g, offset + zone_lba(zone), WRITTEN[zone as usize], salt);
        done(part, Command::Write { lba: zone_lba(zone), data, metadata });
    }
    done(part, Command::ManageZone { action: ZoneAction::Finish, target: ZoneTarget::Zone { start_lba: zone_lba(3) } });
    for zone in 0..4 {
        check_blocks(part, zone_lba(zone), offset + zone_lba(zone), WRITTEN[zone as usize], salt);
    }
    let zones = report_all_zones(part).unwrap();
    let seen: Vec<_> = zones.iter().map(|z| (z.zone, z.start_lba, z.state, z.written_blocks())).collect();
    let want = [
        (0, 0, ZoneState::Full, 60),
        (1, zone_lba(1), ZoneState::Closed, 21),
        (2, zone_lba(2), ZoneState::ImplicitlyOpen, 5),
        (3, zone_lba(3), ZoneState::Full, 60),
    ];
    assert_eq!(seen, want, "part {index}, round {round}");
}

/// A drive file with 3 blocks written to zone 0 (outside every part), split into `PARTS`.
fn split_drive_file(path: &Path) -> Vec<DrivePart<EmulatedDrive>> {
    let g = geometry();
    let mut drive = EmulatedDrive::create_file(path, g, 11).unwrap();
    let (data, metadata) = pattern(&g, 0, 3, 999);
    done(&mut drive, Command::Write { lba: 0, data, metadata });
    drive.split(&PARTS).unwrap()
}

#[test]
fn parts_on_threads_of_their_own_write_their_zones_and_the_drive_file_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.zns");
    let parts = split_drive_file(&path);
    let start = Arc::new(Barrier::new(parts.len()));
    let threads: Vec<_> = parts
        .into_iter()
        .enumerate()
        .map(|(index, mut part)| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                for round in 0..ROUNDS {
                    workload_round(&mut part, index, round);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a part's thread failed");
    }

    let mut drive = EmulatedDrive::open_file(&path).unwrap();
    let zones = report_all_zones(&mut drive).unwrap();
    assert_eq!((zones[0].state, zones[0].written_blocks()), (ZoneState::Closed, 3), "the zone outside the parts");
    check_blocks(&mut drive, 0, 0, 3, 999);
    for (index, (first, _)) in PARTS.iter().enumerate() {
        // Zones left open come back closed, as after any power-on.
        let want = [(ZoneState::Full, 60), (ZoneState::Closed, 21), (ZoneState::Closed, 5), (ZoneState::Full, 60)];
        for (i, (state, written)) in want.into_iter().enumerate() {
            let zone = &zones[(first + i as u32) as usize];
            assert_eq!((zone.state, zone.written_blocks()), (state, written), "zone {}", zone.zone);
            let lba = zone.start_lba;
            check_blocks(&mut drive, lba, lba, WRITTEN[i], salt(ROUNDS - 1, index));
        }
    }
}

#[test]
fn a_part_refuses_commands_outside_its_zones() {
    let dir = tempfile::tempdir().unwrap();
    let mut parts = split_drive_file(&dir.path().join("d.zns"));
    let part = &mut parts[1];
    let g = part.geometry();
    assert_eq!((g.zone_count, g.max_open_zones, g.max_active_zones), (4, Some(6), Some(10)), "the drive's limits");
    let end = 4 * g.zone_size_blocks;
    let block = || vec![1u8; g.block_size_bytes as usize];
    let refused = |part: &mut DrivePart<EmulatedDrive>, command| execute(part, command).result.unwrap_err();
    assert!(matches!(
        refused(part, Command::Write { lba: end, data: block(), metadata: Vec::new() }),
        Error::LbaOutOfRange { .. }
    ));
    assert!(matches!(
        refused(part, Command::Read { lba: end - 1, data: vec![0; 2 * block().len()], metadata: Vec::new() }),
        Error::LbaOutOfRange { .. }
    ));
    assert!(matches!(
        refused(part, Command::Append { zone_start_lba: end, data: block(), metadata: Vec::new() }),
        Error::LbaOutOfRange { .. }
    ));
    let all = Command::ManageZone { action: ZoneAction::Reset, target: ZoneTarget::All };
    assert!(refused(part, all).to_string().contains("\"select all\""));
    let report = done(part, Command::ReportZones { start_lba: 3 * g.zone_size_blocks, max_zones: 10 });
    let Done::Zones(zones) = report else { panic!("{report:?}") };
    assert_eq!(zones.iter().map(|z| z.zone).collect::<Vec<_>>(), vec![3], "a report stops at the part's last zone");
    assert!(part.inject_media_error(end).is_err() && part.corrupt_block(end, 0).is_err());
    assert!(part.degrade_zone(4, ZoneState::Offline).is_err());
    // Nothing reached the neighbours: part 2's first zone is empty.
    let next = report_all_zones(&mut parts[2]).unwrap();
    assert_eq!(next[0].state, ZoneState::Empty);
}

#[test]
fn the_open_and_active_zone_limits_hold_across_parts() {
    let g = Geometry { max_open_zones: Some(2), max_active_zones: Some(3), ..Geometry::small(6, 64, 60) };
    let mut parts = EmulatedDrive::memory(g, 3).unwrap().split(&[(0, 3), (3, 3)]).unwrap();
    let [a, b] = &mut parts[..] else { unreachable!() };
    let write = |part: &mut DrivePart<EmulatedDrive>, zone: u64| {
        let command = Command::Write { lba: zone * 64, data: vec![5; 4096], metadata: Vec::new() };
        execute(part, command).result.map(|_| ())
    };
    let manage = |part: &mut DrivePart<EmulatedDrive>, zone: u64, action| {
        done(part, Command::ManageZone { action, target: ZoneTarget::Zone { start_lba: zone * 64 } });
    };
    write(a, 0).unwrap();
    write(a, 1).unwrap();
    // Both open zones are a's: b cannot close them for room.
    assert!(matches!(write(b, 0), Err(Error::TooManyOpenZones { zone: 3, limit: 2 })), "{:?}", write(b, 0));
    manage(a, 0, ZoneAction::Close);
    write(b, 0).unwrap();
    // Three active now (a's closed zone 0, a's open 1, b's open 0).
    assert!(matches!(write(a, 2), Err(Error::TooManyActiveZones { zone: 2, limit: 3 })));
    assert!(matches!(write(b, 1), Err(Error::TooManyActiveZones { zone: 4, limit: 3 })));
    manage(a, 0, ZoneAction::Finish);
    // Room for one more active zone; the open one a takes by closing its own zone 1.
    write(a, 2).unwrap();
    let states = |part: &mut DrivePart<EmulatedDrive>| -> Vec<ZoneState> {
        report_all_zones(part).unwrap().iter().map(|z| z.state).collect()
    };
    assert_eq!(states(a), [ZoneState::Full, ZoneState::Closed, ZoneState::ImplicitlyOpen]);
    assert_eq!(states(b), [ZoneState::ImplicitlyOpen, ZoneState::Empty, ZoneState::Empty]);
    // Resets give the resources back to every part.
    manage(a, 1, ZoneAction::Reset);
    manage(a, 2, ZoneAction::Reset);
    write(b, 1).unwrap();
    write(b, 2).unwrap();
    assert_eq!(states(b), [ZoneState::Closed, ZoneState::ImplicitlyOpen, ZoneState::ImplicitlyOpen]);
}

#[test]
fn splitting_refuses_parts_outside_the_drive_or_sharing_a_zone() {
    let g = geometry();
    let split = |parts: &[(u32, u32)]| match EmulatedDrive::memory(g, 1).unwrap().split(parts) {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    };
    assert_eq!(
        split(&[(1, 4), (6, 4), (4, 2)]),
        "cannot split the drive into parts: parts 0 (zones 1..5) and 2 (zones 4..6) overlap: a zone has one owner"
    );
    assert!(split(&[(1, 12), (12, 1)]).contains("overlap"), "{}", split(&[(1, 12), (12, 1)]));
    assert!(split(&[(1, 4), (10, 4)]).contains("part 1: a window of 4 zones from zone 10 does not fit"));
    assert!(split(&[(3, 0)]).contains("part 0"));
    assert!(split(&[(u32::MAX, 2)]).contains("part 0"));
    assert!(split(&[]).contains("no parts"));
    assert_eq!(split(&[(0, 1), (1, 12)]), "", "parts side by side, the whole drive");

    let timed = EmulatedDrive::memory(g, 1).unwrap().with_timing(TimingParams::zn540()).unwrap();
    assert!(timed.split(&[(0, 2)]).unwrap_err().to_string().contains("virtual time"));
    let mut busy = EmulatedDrive::memory(g, 1).unwrap();
    busy.submit(1, Command::ReportZones { start_lba: 0, max_zones: 1 });
    assert!(busy.split(&[(0, 2)]).unwrap_err().to_string().contains("1 commands are in flight"));
}

#[test]
fn the_drive_stays_locked_until_its_last_part_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.zns");
    let mut parts = split_drive_file(&path);
    let last = parts.pop().unwrap();
    drop(parts);
    assert!(matches!(EmulatedDrive::open_file(&path), Err(Error::DriveInUse { .. })));
    drop(last);
    EmulatedDrive::open_file(&path).unwrap();
}

#[test]
fn a_failed_drive_fails_in_every_part() {
    let mut parts = EmulatedDrive::memory(geometry(), 1).unwrap().split(&PARTS).unwrap();
    let report = || Command::ReportZones { start_lba: 0, max_zones: 1 };
    done(&mut parts[2], report());
    parts[0].fail();
    assert!(parts.iter().all(DrivePart::is_failed));
    assert!(matches!(execute(&mut parts[2], report()).result, Err(Error::DeviceFailed)));

    let mut failed = EmulatedDrive::memory(geometry(), 1).unwrap();
    failed.fail();
    let mut parts = failed.split(&PARTS).unwrap();
    assert!(matches!(execute(&mut parts[1], report()).result, Err(Error::DeviceFailed)));
}
