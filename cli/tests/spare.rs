//! Hot spares on drive files, as an operator uses them: `format --spare`, `start` with the
//! spare among the drives (it stays a spare), `zapraid fail` and the rebuild onto the
//! spare starting by itself, followed in `status` until done; then a *different* drive
//! fails and every block still reads back, which only holds if the rebuilt spare holds the
//! right data. `add-spare` on a degraded array, and a `start --degraded` with a spare
//! among the drives, start the rebuild at once; two drives failed with two spares are
//! rebuilt one after the other; a spare whose record is damaged costs the spare, not the
//! array; and the refusals, each saying why.
//!
//! The data is written and read back through the server library (assemble, recover, the
//! engine thread: what `start` runs) with the array stopped, since without ublk the CLI
//! has no block device to write through; the rest is the `zapraid` binary's.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zapraid_engine::Request;
use zapraid_server::assemble::{assemble, recover};
use zapraid_server::run::{Answer, EngineThread, FailureRecord, Message, ReplyTo};

mod common;
use common::drive_file::DriveFile;
use common::{serial, text};

/// Blocks per request.
const REQUEST_BLOCKS: u64 = 64;

struct World {
    dir: tempfile::TempDir,
    run_dir: PathBuf,
    /// The array's drives, in array order (a spare rebuilt onto in its drive's place).
    drives: Vec<String>,
    /// Its spares, as formatted or added.
    spares: Vec<String>,
    /// Blocks written and verified.
    blocks: u64,
}

/// Zone arguments of every drive file of the tests (`emu create`).
const ZONES: [&str; 4] = ["--zone-size", "512K", "--zone-capacity", "480K"];

impl World {
    /// `count` drive files of 12 zones formatted as array "sp" of `level`, with `spares`
    /// spares (`format --spare`).
    fn new(level: &str, count: usize, spares: usize, blocks: u64) -> World {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        let mut world = World { dir, run_dir, drives: Vec::new(), spares: Vec::new(), blocks };
        world.drives = (0..count).map(|i| world.new_drive(&format!("d{i}"), 12)).collect();
        world.spares = (0..spares).map(|i| world.new_drive(&format!("s{i}"), 12)).collect();
        let mut args = vec!["format", "--level", level, "--group-size", "8", "--name", "sp"];
        args.extend(world.drives.iter().map(String::as_str));
        for spare in &world.spares {
            args.extend(["--spare", spare.as_str()]);
        }
        let said = world.ok(&args);
        for spare in &world.spares {
            assert!(said.contains(&format!("spare: {spare} (rebuilt onto by itself when a drive fails)")), "{said}");
        }
        world
    }

    /// A new, empty drive file of `zones` zones in directory `name`.
    fn new_drive(&self, name: &str, zones: u32) -> String {
        let dir = self.dir.path().join(name).display().to_string();
        let zones = zones.to_string();
        let mut args = vec!["emu", "create", "--dir", &dir, "--drives", "1", "--zones", &zones];
        args.extend(ZONES);
        self.ok(&args);
        format!("{dir}/drive0.zns")
    }

    fn cli(&self, args: &[&str]) -> Output {
        common::zapraid_in(&self.run_dir, args)
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(out.status.success(), "zapraid {args:?} failed: {}", text(&out));
        text(&out)
    }

    fn refused(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(!out.status.success(), "zapraid {args:?} succeeded: {}", text(&out));
        text(&out)
    }

    /// `start --daemon --no-device` on the drives and the spares.
    fn start(&self) -> String {
        let mut args = vec!["start", "--daemon", "--no-device"];
        args.extend(self.drives.iter().chain(&self.spares).map(String::as_str));
        self.ok(&args)
    }

    fn status(&self) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["status", "sp", "--json"])).expect("status --json is JSON")
    }

    /// The spares a status document lists: (path, state).
    fn spares_listed(&self) -> Vec<(String, String)> {
        let s = self.status();
        let field = |v: &serde_json::Value, f: &str| v[f].as_str().unwrap_or("?").to_string();
        s["spares"].as_array().expect("spares listed").iter().map(|v| (field(v, "path"), field(v, "state"))).collect()
    }

    /// Polls `status` until no rebuild runs and every drive of `drives` is ok; returns
    /// what the human status said of a rebuild onto a spare, if a poll saw one running.
    fn wait_rebuilt(&self, drives: &[usize]) -> Option<String> {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut seen = None;
        loop {
            let s = self.status();
            if s["rebuild"].is_null() && drives.iter().all(|d| s["drives"][d]["state"] == "ok") {
                return seen;
            }
            if !s["rebuild"]["spare"].is_null() {
                let human = self.ok(&["status", "sp"]);
                if human.contains("onto spare") {
                    seen = Some(human);
                }
            }
            assert!(Instant::now() < deadline, "rebuild of drives {drives:?} not done: {s}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The running server's log.
    fn log(&self) -> String {
        std::fs::read_to_string(self.run_dir.join("sp.log")).unwrap_or_default()
    }

    /// What `inspect` says of a drive's superblock.
    fn superblock_line(&self, drive: &str) -> String {
        let said = self.ok(&["inspect", drive]);
        said.lines().find(|l| l.starts_with("superblock: ")).expect("a superblock line").to_string()
    }

    /// Runs the array (stopped) on its drives, writes blocks as `write_pass` if given,
    /// reads them all back as `read_pass`, stops it cleanly.
    fn write_and_verify(&self, write_pass: Option<u64>, read_pass: u64) {
        let paths: Vec<PathBuf> = self.drives.iter().map(PathBuf::from).collect();
        let mut assembled = assemble(&paths).unwrap_or_else(|e| panic!("assemble {paths:?}: {e}"));
        let engine = recover(&mut assembled).unwrap();
        let block = assembled.geometry.block_size_bytes as usize;
        let record = FailureRecord::of(&assembled);
        let threads = zapraid_server::run::thread::rebuild_workers::default_threads();
        let thread = EngineThread::spawn(engine, assembled.drives, block as u32, record, threads).unwrap();
        let (tx, answers) = crossbeam_channel::unbounded::<Answer>();
        let reply = Arc::new(ReplyTo { tx, wake: Box::new(|| {}), counted: true });
        let ask = |request: Request| {
            let sent = thread.tx.send(Message::Io { tag: 0, request, reply: reply.clone() });
            assert!(sent.is_ok(), "the engine thread has stopped");
            answers.recv().unwrap().1.unwrap_or_else(|e| panic!("request failed: {e}"))
        };
        for start in (0..self.blocks).step_by(REQUEST_BLOCKS as usize) {
            let blocks = REQUEST_BLOCKS.min(self.blocks - start);
            if let Some(pass) = write_pass {
                let data = (start..start + blocks).flat_map(|l| pattern(l, pass, block)).collect();
                ask(Request::Write { lba: start, data });
            }
        }
        ask(Request::Flush);
        for start in (0..self.blocks).step_by(REQUEST_BLOCKS as usize) {
            let blocks = REQUEST_BLOCKS.min(self.blocks - start);
            let got = ask(Request::Read { lba: start, blocks });
            for (i, data) in got.chunks(block).enumerate() {
                let lba = start + i as u64;
                assert!(data == pattern(lba, read_pass, block), "block {lba} does not hold pass {read_pass}");
            }
        }
        assert!(thread.tx.send(Message::Stop).is_ok());
        thread.join().unwrap();
    }
}

/// A test that fails with the array running leaves no server behind.
impl Drop for World {
    fn drop(&mut self) {
        let _ = self.cli(&["stop", "sp"]);
    }
}

/// Block `lba` as pass `pass` writes it.
fn pattern(lba: u64, pass: u64, block: usize) -> Vec<u8> {
    let seed = lba.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ pass;
    (0..block).map(|i| (seed >> ((i % 8) * 8)) as u8 ^ (i / 8) as u8).collect()
}

/// The spare at `spares[spare]` took drive `drive`'s place: it is that drive from now on.
fn spare_became(world: &mut World, spare: usize, drive: usize) {
    world.drives[drive] = world.spares.remove(spare);
}

#[test]
fn raid5_drive_failed_is_rebuilt_onto_the_spare_by_itself_then_another_fails_and_everything_reads() {
    let _serial = serial();
    let mut world = World::new("raid5", 4, 1, 1200);
    let spare = world.spares[0].clone();
    let line = world.superblock_line(&spare);
    assert!(
        line.starts_with("superblock: none: it holds no array superblock: it is a spare of array \"sp\" ("),
        "{line}"
    );
    world.write_and_verify(Some(1), 1);

    // Started with the spare among the drives: it stays a spare, the array is whole.
    let said = world.start();
    assert!(said.contains(&format!("array \"sp\": spares: {spare} ready")), "{said}");
    let s = world.status();
    assert_eq!((s["state"].as_str(), s["drives"].as_array().unwrap().len()), (Some("optimal"), 4), "{s}");
    assert_eq!(world.spares_listed(), [(spare.clone(), "ready".to_string())]);
    assert!(world.ok(&["status", "sp"]).contains(&format!("  spares: {spare} ready")));

    world.ok(&["fail", "sp", "1"]);
    let seen = world.wait_rebuilt(&[1]);
    if let Some(human) = seen {
        assert!(human.contains(&format!("rebuilding drive 1 onto spare {spare}")), "{human}");
    }
    let log = world.log();
    assert!(log.contains(&format!("rebuilding drive 1 onto spare {spare}")), "{log}");
    let s = world.status();
    assert_eq!((s["state"].as_str(), s["rebuilds_completed"].as_u64()), (Some("optimal"), Some(1)), "{s}");
    assert_eq!(s["drives"][1]["path"].as_str(), Some(spare.as_str()), "{s}");
    assert_eq!(world.spares_listed(), [], "the spare was consumed");
    world.ok(&["stop", "sp"]);
    spare_became(&mut world, 0, 1);
    for drive in &world.drives {
        let line = world.superblock_line(drive);
        assert!(line.ends_with(", no failed drive"), "{drive}: {line}");
    }
    world.write_and_verify(None, 1);

    // Drive 2 fails: drive 1's blocks are read from the rebuilt spare, 2's rebuilt from it.
    world.start();
    world.ok(&["fail", "sp", "2"]);
    world.ok(&["stop", "sp"]);
    world.write_and_verify(None, 1);
}

#[test]
fn add_spare_to_a_degraded_array_starts_the_rebuild_at_once() {
    let _serial = serial();
    let mut world = World::new("raid5", 4, 0, 1200);
    world.write_and_verify(Some(1), 1);
    world.start();
    world.ok(&["fail", "sp", "0"]);
    world.ok(&["stop", "sp"]);
    // Written degraded: drive 0 missed it.
    world.write_and_verify(Some(2), 2);
    world.start();
    let s = world.status();
    assert_eq!((s["state"].as_str(), s["spares"].as_array().map(Vec::len)), (Some("degraded"), Some(0)), "{s}");
    let spare = world.new_drive("late", 12);
    let said = world.ok(&["add-spare", "sp", &spare]);
    assert!(said.contains(&format!("{spare} added as a spare; rebuilding drive 0 onto it")), "{said}");
    world.wait_rebuilt(&[0]);
    assert_eq!(world.status()["drives"][0]["path"].as_str(), Some(spare.as_str()));
    world.ok(&["stop", "sp"]);
    world.drives[0] = spare;
    world.write_and_verify(None, 2);
    world.start();
    world.ok(&["fail", "sp", "3"]);
    world.ok(&["stop", "sp"]);
    world.write_and_verify(None, 2);
}

#[test]
fn raid6_two_drives_fail_and_two_spares_are_rebuilt_onto_one_after_the_other() {
    let _serial = serial();
    let mut world = World::new("raid6", 5, 2, 1000);
    world.write_and_verify(Some(1), 1);
    world.start();
    world.ok(&["fail", "sp", "0"]);
    world.ok(&["fail", "sp", "3"]);
    // One rebuild at a time: the second spare waits for the first rebuild to end.
    world.wait_rebuilt(&[0, 3]);
    let s = world.status();
    assert_eq!((s["state"].as_str(), s["rebuilds_completed"].as_u64()), (Some("optimal"), Some(2)), "{s}");
    let log = world.log();
    assert!(log.contains("rebuilding drive 0 onto spare "), "{log}");
    assert!(log.contains("rebuilding drive 3 onto spare "), "{log}");
    let (onto0, onto3) = (s["drives"][0]["path"].as_str().unwrap(), s["drives"][3]["path"].as_str().unwrap());
    assert!(world.spares.iter().any(|p| p == onto0) && world.spares.iter().any(|p| p == onto3), "{s}");
    assert_ne!(onto0, onto3);
    assert_eq!(world.spares_listed(), []);
    world.ok(&["stop", "sp"]);
    (world.drives[0], world.drives[3]) = (onto0.to_string(), onto3.to_string());
    world.spares.clear();
    world.write_and_verify(None, 1);
    // Two other drives fail: both rebuilt spares' blocks are needed.
    world.start();
    world.ok(&["fail", "sp", "1"]);
    world.ok(&["fail", "sp", "2"]);
    world.ok(&["stop", "sp"]);
    world.write_and_verify(None, 1);
}

#[test]
fn spares_that_cannot_be_are_refused_saying_why() {
    let _serial = serial();
    let mut world = World::new("raid5", 4, 0, 64);
    let small = world.new_drive("small", 8);
    let other = World::new("raid5", 4, 0, 64);
    let fresh = world.new_drive("fresh", 12);

    // At format (on blank drives, so that only the spare is refused): a member also given
    // as a spare, a drive too small, one not empty. Nothing is written before the checks.
    let blank: Vec<String> = (0..4).map(|i| world.new_drive(&format!("m{i}"), 12)).collect();
    let mut format = vec!["format", "--level", "raid5", "--name", "sp2"];
    format.extend(blank.iter().map(String::as_str));
    let e = world.refused(&[format.as_slice(), &["--spare", &blank[1]]].concat());
    assert!(e.contains(&format!("drive {} given twice", blank[1])), "{e}");
    let e = world.refused(&[format.as_slice(), &["--spare", &small]].concat());
    assert!(e.contains(&format!("{small} refused: it is too small: 8 zones")), "{e}");
    let e = world.refused(&[format.as_slice(), &["--spare", &world.drives[0]]].concat());
    assert!(e.contains("refused: it is drive 0 of array \"sp\"") && e.contains("add --force to erase it"), "{e}");
    for drive in &blank {
        assert!(world.superblock_line(drive).contains("it is blank"), "{drive} was written");
    }

    // On the running array.
    world.start();
    let e = world.refused(&["add-spare", "sp", &world.drives[2]]);
    assert!(e.contains("it is drive 2 of this array; a spare must be a drive outside it"), "{e}");
    let e = world.refused(&["add-spare", "sp", &small]);
    assert!(e.contains("it is too small: 8 zones"), "{e}");
    let e = world.refused(&["add-spare", "sp", &other.drives[0]]);
    assert!(e.contains("it is drive 0 of array \"sp\"") && e.contains("add --force to erase it"), "{e}");
    // Forced, it is erased and taken; the array is whole, so it waits.
    let said = world.ok(&["add-spare", "sp", &other.drives[0], "--force"]);
    assert!(said.contains("added as a spare; it is rebuilt onto by itself when a drive fails"), "{said}");
    let e = world.refused(&["add-spare", "sp", &other.drives[0]]);
    assert!(e.contains("it is a spare of this array already"), "{e}");
    let e = world.refused(&["replace", "sp", "1", &other.drives[0]]);
    assert!(e.contains("is a spare of this array"), "{e}");
    world.ok(&["add-spare", "sp", &fresh]);
    assert_eq!(world.spares_listed().len(), 2);
    world.ok(&["remove-spare", "sp", &other.drives[0]]);
    assert_eq!(world.spares_listed(), [(fresh.clone(), "ready".to_string())]);
    let e = world.refused(&["remove-spare", "sp", &other.drives[0]]);
    assert!(e.contains("it is not a spare of this array"), "{e}");
    world.ok(&["stop", "sp"]);
    // Removed, the drive is blank again; the other is still a spare at the next start.
    let line = world.superblock_line(&other.drives[0]);
    assert!(line.contains("it is blank"), "{line}");
    world.spares = vec![fresh.clone()];
    world.start();
    assert_eq!(world.spares_listed(), [(fresh.clone(), "ready".to_string())]);
    world.ok(&["stop", "sp"]);

    // A spare of another array given at start: named as such.
    let theirs = world.new_drive("theirs", 12);
    let mut args = vec!["format", "--level", "raid5", "--name", "sp3", "--force", "--spare", &theirs];
    args.extend(other.drives.iter().map(String::as_str));
    world.ok(&args);
    world.spares.push(theirs.clone());
    let e = world.refused(
        &[
            &["start", "--no-device"][..],
            &world.drives.iter().chain(&world.spares).map(String::as_str).collect::<Vec<_>>(),
        ]
        .concat(),
    );
    assert!(e.contains(&format!("{theirs} refused: it is a spare of array \"sp3\"")), "{e}");
    assert!(e.contains("not of array \"sp\""), "{e}");
}

#[test]
fn a_drive_gone_at_start_is_rebuilt_onto_the_spare_given_with_the_others() {
    let _serial = serial();
    let mut world = World::new("raid5", 4, 1, 600);
    world.write_and_verify(Some(1), 1);
    std::fs::remove_file(&world.drives[2]).unwrap();
    let spare = world.spares[0].clone();
    let mut args = vec!["start", "--daemon", "--no-device", "--degraded", &spare];
    args.extend(world.drives.iter().enumerate().filter(|(i, _)| *i != 2).map(|(_, d)| d.as_str()));
    // By the time `start` reports, drive 2 may be the spare already: the log says both.
    world.ok(&args);
    world.wait_rebuilt(&[2]);
    let log = world.log();
    assert!(log.contains("drive 2 missing"), "{log}");
    assert!(log.contains(&format!("rebuilding drive 2 onto spare {spare}")), "{log}");
    let s = world.status();
    assert_eq!((s["state"].as_str(), s["drives"][2]["path"].as_str()), (Some("optimal"), Some(spare.as_str())), "{s}");
    world.ok(&["stop", "sp"]);
    spare_became(&mut world, 0, 2);
    world.write_and_verify(None, 1);
    world.start();
    world.ok(&["fail", "sp", "0"]);
    world.ok(&["stop", "sp"]);
    world.write_and_verify(None, 1);
}

/// A byte of a spare record's CRC-covered fields (the array UUID): the magic stays.
const SPARE_RECORD_DAMAGE_BYTE: u64 = 20;

/// A spare whose record is damaged in every copy costs the spare, not the array (it
/// stopped the healthy array from starting, calling the empty spare "an array member whose
/// superblock is damaged" that formatting "would erase"): the start goes on without it
/// and says so, naming it, what is wrong and what to do; `status` lists it unusable, and
/// a failed drive is not rebuilt onto it; `remove-spare` then `add-spare` make it a spare
/// again, rebuilt onto at once.
#[test]
fn a_spare_whose_record_is_damaged_costs_the_spare_not_the_array() {
    let _serial = serial();
    let mut world = World::new("raid5", 4, 1, 600);
    world.write_and_verify(Some(1), 1);
    let spare = world.spares[0].clone();
    let file = DriveFile::open(Path::new(&spare));
    for block in 0..file.written_blocks(0) {
        file.damage(0, block, SPARE_RECORD_DAMAGE_BYTE);
    }
    let line = world.superblock_line(&spare);
    assert!(line.contains("looks like a hot spare whose spare record is damaged"), "{line}");
    assert!(line.contains("it holds no array data") && !line.contains("would erase"), "{line}");

    let said = world.start();
    assert!(said.contains(&format!("array \"sp\": spares: {spare} unusable (it holds no valid")), "{said}");
    let fix = format!("`zapraid remove-spare sp {spare}`, then `zapraid add-spare sp {spare}`");
    assert!(said.contains("the array runs without this spare") && said.contains(&fix), "{said}");
    let log = world.log();
    assert!(log.contains(&format!("spare {spare} is not used: it holds no valid")), "{log}");
    let s = world.status();
    assert_eq!((s["state"].as_str(), s["spares"][0]["reason"].is_string()), (Some("optimal"), true), "{s}");
    assert_eq!(world.spares_listed(), [(spare.clone(), "unusable".to_string())]);
    let human = world.ok(&["status", "sp"]);
    assert!(human.contains(&format!("spares: {spare} unusable (")), "{human}");

    // Not taken when a drive fails; once made a spare again, it is.
    world.ok(&["fail", "sp", "1"]);
    std::thread::sleep(Duration::from_millis(300));
    let s = world.status();
    assert!(s["rebuild"].is_null() && s["state"] == "degraded", "{s}");
    assert_eq!(world.spares_listed(), [(spare.clone(), "unusable".to_string())]);
    let e = world.refused(&["add-spare", "sp", &spare]);
    assert!(e.contains("it is listed as an unusable spare of this array") && e.contains("remove-spare"), "{e}");
    world.ok(&["remove-spare", "sp", &spare]);
    let said = world.ok(&["add-spare", "sp", &spare]);
    assert!(said.contains("added as a spare; rebuilding drive 1 onto it"), "{said}");
    world.wait_rebuilt(&[1]);
    world.ok(&["stop", "sp"]);
    spare_became(&mut world, 0, 1);
    world.write_and_verify(None, 1);
}
