//! Data lost beyond what parity covers, on drive files, as a hostile operator makes it: a
//! second drive failed while the first is rebuilt, blocks damaged beyond parity in many
//! segments. What must hold: a failure the array cannot survive is refused unless forced,
//! counting the drive being rebuilt; once data is lost anyway, the lost blocks are known
//! and counted (status says so), reads of them answer an error (never stale or wrong
//! data), every other block reads back, garbage collection still reclaims the segments
//! that held them (writes go on), and `scrub --wait` and `stop` always finish.

use std::path::{Path, PathBuf};

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use zapraid_server::records::SUPERBLOCK_ZONES;
use zapraid_zns::{EmulatedDrive, ZoneState, ZonedDevice};

use zapraid_engine::Request;
use zapraid_server::assemble::assemble;
use zapraid_server::run::Session;

mod common;
use common::serial;
use common::world::{pattern, World, REQUEST_BLOCKS};

/// How long a command that must finish (stop, scrub --wait) may take here.
const MUST_FINISH: Duration = Duration::from_secs(60);

/// Runs `zapraid` and fails the test if it has not finished within `MUST_FINISH`.
fn finishes(world: &World, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zapraid"))
        .args(args)
        .env("ZAPRAID_RUN_DIR", &world.run_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run zapraid");
    let deadline = Instant::now() + MUST_FINISH;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("zapraid {args:?} did not finish within {MUST_FINISH:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// What reading every block back found: blocks holding their pass, blocks answering an
/// error.
#[derive(Debug, Default, PartialEq, Eq)]
struct ReadBack {
    intact: u64,
    errors: u64,
}

/// The array (stopped) on `drives`, run by the server library.
fn session(drives: &[String]) -> Session {
    let paths: Vec<PathBuf> = drives.iter().map(PathBuf::from).collect();
    let assembled = assemble(&paths).unwrap_or_else(|e| panic!("assemble {paths:?}: {e}"));
    Session::start(assembled).unwrap()
}

/// Writes blocks `lbas` as pass `pass` on the array (stopped) on `drives`, then stops it.
fn write_pass(drives: &[String], lbas: std::ops::Range<u64>, pass: u64) {
    let session = session(drives);
    let block = session.block_bytes;
    for start in lbas.clone().step_by(REQUEST_BLOCKS as usize) {
        let n = REQUEST_BLOCKS.min(lbas.end - start);
        let data = (start..start + n).flat_map(|l| pattern(l, pass, block)).collect();
        session.ask(Request::Write { lba: start, data }).unwrap_or_else(|e| panic!("write at LBA {start}: {e}"));
    }
    session.ask(Request::Flush).unwrap();
    session.stop().unwrap();
}

/// Runs the array (stopped) on `drives`, reads blocks 0..`blocks` one request of
/// `REQUEST_BLOCKS` at a time (a failed request block by block), checks that every block
/// read holds the pass `pass_of` gives for it (never other data), and returns the counts
/// and the engine's count of blocks recorded lost. Then stops it.
fn read_back(drives: &[String], blocks: u64, pass_of: impl Fn(u64) -> u64) -> (ReadBack, u64) {
    let session = session(drives);
    let block = session.block_bytes;
    let mut found = ReadBack::default();
    let mut check = |lba: u64, data: &[u8]| {
        let pass = pass_of(lba);
        assert!(data == pattern(lba, pass, block), "block {lba} read back as other data than pass {pass}");
        found.intact += 1;
    };
    for start in (0..blocks).step_by(REQUEST_BLOCKS as usize) {
        let n = REQUEST_BLOCKS.min(blocks - start);
        match session.ask(Request::Read { lba: start, blocks: n }) {
            Ok(got) => got.chunks(block).enumerate().for_each(|(i, d)| check(start + i as u64, d)),
            Err(_) => {
                for lba in start..start + n {
                    match session.ask(Request::Read { lba, blocks: 1 }) {
                        Ok(got) => check(lba, &got),
                        Err(_) => found.errors += 1,
                    }
                }
            }
        }
    }
    let lost = session.status().unwrap().engine.blocks_lost;
    session.stop().unwrap();
    (found, lost)
}

fn wait_for(world: &World, what: &str, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = world.status();
        if done(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{what}: not seen within 120 s: {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_second_failure_during_a_rebuild_is_refused_and_when_forced_the_loss_is_counted() {
    let _serial = serial();
    // More segments than a rebuild takes at once (`MAX_REBUILD_SEGMENTS_AT_ONCE`): those
    // it has read before the second failure come back whole, the others cannot.
    let mut world = World::new("raid5", 4, 32, 3000);
    world.write_and_verify(Some(1), 1);
    world.start(&[], &[]);
    world.ok(&["fail", "rp", "1"]);
    let new = world.new_drive("new1");
    world.ok(&["replace", "rp", "1", &new, "--rebuild-rate", "64K"]);
    // Drive 1 is being rebuilt: RAID-5 has no failure left to survive.
    let refused = world.refused(&["fail", "rp", "0"]);
    assert!(refused.contains("drive 1 is being rebuilt") && refused.contains("--force"), "{refused}");
    let s = world.status();
    assert_eq!((s["state"].as_str(), s["drives"][0]["state"].as_str()), (Some("rebuilding"), Some("ok")), "{s}");

    let said = world.ok(&["fail", "rp", "0", "--force"]);
    assert!(said.contains("data is lost"), "{said}");
    world.ok(&["rebuild-rate", "rp", "unlimited"]);
    let s = wait_for(&world, "the rebuild ends", |s| s["rebuild"].is_null());
    assert_eq!(s["state"], "data_lost", "{s}");
    assert_eq!(s["drives"][1]["state"], "ok", "{s}");
    assert!(s["lost"]["rebuild_blocks_unrecoverable"].as_u64().unwrap() > 0, "{s}");
    let human = world.ok(&["status", "rp"]);
    assert!(human.contains("data lost"), "{human}");
    // Garbage collection reclaims the segments with holes: every lost block found is
    // recorded lost, and each is counted once.
    let s = wait_for(&world, "the holes recorded", |s| s["segments"]["with_holes"] == 0);
    let lost = s["lost"]["blocks"].as_u64().unwrap();
    assert!(lost > 0, "{s}");
    eprintln!("lost: {}, segments: {}", s["lost"], s["segments"]);
    let said = finishes(&world, &["scrub", "rp", "--wait"]);
    assert!(said.status.success(), "{}", common::text(&said));
    let said = finishes(&world, &["stop", "rp"]);
    assert!(said.status.success(), "{}", common::text(&said));

    world.drives[1] = new;
    let (found, lost_after) = read_back(&world.drives, world.blocks, |_| 1);
    eprintln!("read back: {found:?}, {lost_after} recorded lost");
    assert_eq!(lost_after, lost, "the count of lost blocks survives a restart");
    assert_eq!(found.errors, lost, "every lost block, and only those, answers an error: {found:?}");
    assert_eq!(found.intact + found.errors, world.blocks);
    // A write heals a lost block.
    world.write_and_verify(Some(2), 2);
    let (found, lost_after) = read_back(&world.drives, world.blocks, |_| 2);
    assert_eq!((found.errors, lost_after), (0, 0), "{found:?}");
}

/// Damages the block at zone offset `offset` of every full zone holding a segment on each
/// drive file of `paths`: with Zone Write every stripe sits at the same offset on every
/// drive, so on two drives that is a row lost beyond what RAID-5 parity covers. Returns
/// how many zones were damaged.
fn damage_rows(paths: &[&str], offset: u64) -> u64 {
    let mut zones = 0;
    for path in paths {
        let mut drive = EmulatedDrive::open_file(Path::new(path)).unwrap();
        let g = drive.geometry();
        let full: Vec<u32> =
            (SUPERBLOCK_ZONES..g.zone_count).filter(|z| drive.zones()[*z as usize].state == ZoneState::Full).collect();
        for zone in &full {
            drive.corrupt_block(g.zone_start_lba(*zone) + offset, 4_242).unwrap();
        }
        zones = full.len() as u64;
    }
    zones
}

#[test]
fn blocks_damaged_beyond_parity_never_stop_garbage_collection_scrub_or_stop() {
    let _serial = serial();
    let mut world = World::new("raid5", 4, 16, 0);
    let mut format = vec!["format", "--force", "--level", "raid5", "--mode", "zone-write", "--name", "rp"];
    format.extend(world.drives.iter().map(String::as_str));
    world.ok(&format);
    world.start(&[], &[]);
    let s = world.status();
    world.ok(&["stop", "rp"]);
    world.blocks =
        s["capacity"]["logical_bytes"].as_u64().unwrap() / s["capacity"]["block_size_bytes"].as_u64().unwrap();
    write_pass(&world.drives, 0..world.blocks, 1);
    // Rows early in each segment's data region, damaged on drives 0 and 1.
    let rows =
        damage_rows(&[&world.drives[0], &world.drives[1]], 4) + damage_rows(&[&world.drives[0], &world.drives[1]], 9);
    assert!(rows >= 16, "the data filled too few zones: {rows} rows damaged");
    // Overwriting half the blocks needs garbage collection to reclaim segments with
    // unreadable blocks: writes must not find the array full.
    let half = world.blocks / 2;
    write_pass(&world.drives, 0..half, 2);
    write_pass(&world.drives, 0..half, 3);

    world.start(&[], &[]);
    // The scrub finds the rows garbage collection has not moved yet: it ends, and fails
    // saying so; their segments are reclaimed next, recording the blocks lost.
    let said = finishes(&world, &["scrub", "rp", "--wait"]);
    let text = common::text(&said);
    assert!(said.status.success() || text.contains("damaged beyond what parity covers"), "{text}");
    let s = wait_for(&world, "the holes recorded", |s| s["segments"]["with_holes"] == 0);
    assert_eq!(s["state"], "data_lost", "{s}");
    let lost = s["lost"]["blocks"].as_u64().unwrap();
    eprintln!("damaged {rows} rows; lost: {}, segments: {}", s["lost"], s["segments"]);
    let said = finishes(&world, &["stop", "rp"]);
    assert!(said.status.success(), "{}", common::text(&said));

    let pass_of = |lba: u64| if lba < half { 3 } else { 1 };
    let (found, lost_after) = read_back(&world.drives, world.blocks, pass_of);
    eprintln!("read back: {found:?}, {lost_after} recorded lost");
    assert!(found.errors > 0, "{found:?}");
    assert_eq!((found.errors, lost_after), (lost, lost), "lost blocks, and only those, answer errors");
}

/// Three drives of a RAID-5 out (one being rebuilt, two failed by force): no stripe can be
/// written, so garbage collection cannot move the blocks of the segment open when the
/// rebuild started, which a rebuild does not write to the new drive. The rebuild waits for
/// it, and says so, rather than call the drive whole (a start would then drop the segment);
/// `stop` finishes, and a start refuses the array with that many drives down.
#[test]
fn a_rebuild_that_cannot_finish_waits_and_says_why() {
    let _serial = serial();
    let mut world = World::new("raid5", 4, 16, 1200);
    world.write_and_verify(Some(1), 1);
    world.start(&[], &[]);
    for fail in [&["fail", "rp", "1"][..], &["fail", "rp", "0", "--force"], &["fail", "rp", "2", "--force"]] {
        world.ok(fail);
    }
    let new = world.new_drive("new1");
    world.ok(&["replace", "rp", "1", &new]);
    let s = wait_for(&world, "the rebuild waits", |s| s["rebuild"]["segments_unreclaimable"].as_u64() > Some(0));
    assert_eq!(s["state"], "data_lost", "{s}");
    assert!(s["rebuild"]["eta_s"].is_null(), "{s}");
    let human = world.ok(&["status", "rp"]);
    assert!(human.contains("garbage collection cannot reclaim") && human.contains("not whole yet"), "{human}");
    let said = finishes(&world, &["stop", "rp"]);
    assert!(said.status.success(), "{}", common::text(&said));
    world.drives[1] = new;
    let mut start = vec!["start", "--no-device"];
    start.extend(world.drives.iter().map(String::as_str));
    let refused = world.refused(&start);
    assert!(refused.contains("cannot start") && refused.contains("drive 1 being rebuilt, not whole yet"), "{refused}");
}
