//! Degraded starts on drive files, as an operator meets them: a drive file deleted after a
//! stop (gone, as after a real failure) stops `zapraid start` until `--degraded` is given;
//! then the array comes up with the drive recorded failed, its data still reads back, and
//! later starts need no flag. More drives gone than the level survives is refused naming
//! them; a drive failed with `zapraid fail` may be left out without the flag; a stale
//! copy of a drive put back is refused saying how to start without it.
//!
//! The data is written and read back through the server library (assemble, recover, the
//! engine thread: what `start` runs), since without ublk the CLI has no block device to
//! write through; the starts, refusals and status are the `zapraid` binary's.

use std::path::PathBuf;
use std::process::Output;

mod common;
use common::{serial, text};

/// Blocks written and verified: several segments' worth on the test drives.
const BLOCKS: u64 = 1200;

struct World {
    _dir: tempfile::TempDir,
    run_dir: PathBuf,
    drives: Vec<String>,
}

impl World {
    /// `count` small drive files, formatted as array "dg" of `level`.
    fn new(level: &str, count: usize) -> World {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        let d = dir.path().join("d").display().to_string();
        let drives = (0..count).map(|i| format!("{d}/drive{i}.zns")).collect();
        let world = World { _dir: dir, run_dir, drives };
        let count = count.to_string();
        world.ok(&[
            "emu",
            "create",
            "--dir",
            &d,
            "--drives",
            &count,
            "--zones",
            "12",
            "--zone-size",
            "512K",
            "--zone-capacity",
            "480K",
        ]);
        let mut args = vec!["format", "--level", level, "--group-size", "8", "--name", "dg"];
        args.extend(world.drives.iter().map(String::as_str));
        world.ok(&args);
        world
    }

    fn cli(&self, args: &[&str]) -> Output {
        common::zapraid_in(&self.run_dir, args)
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(out.status.success(), "zapraid {args:?} failed: {}", text(&out));
        text(&out)
    }

    /// The drives but those of `gone`.
    fn without(&self, gone: &[usize]) -> Vec<String> {
        self.drives.iter().enumerate().filter(|(i, _)| !gone.contains(i)).map(|(_, d)| d.clone()).collect()
    }

    /// `start --daemon --no-device` (and `extra`) on `drives`.
    fn start(&self, extra: &[&str], drives: &[String]) -> Output {
        let mut args = vec!["start", "--daemon", "--no-device"];
        args.extend(extra);
        args.extend(drives.iter().map(String::as_str));
        self.cli(&args)
    }

    /// A start that must be refused; its message.
    fn refused(&self, extra: &[&str], drives: &[String]) -> String {
        let out = self.start(extra, drives);
        let said = text(&out);
        assert!(!out.status.success(), "started: {said}");
        said
    }

    fn status(&self) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["status", "dg", "--json"])).expect("status --json is JSON")
    }

    /// Each drive's (state, missing) in a status document.
    fn drive_states(status: &serde_json::Value) -> Vec<(String, bool)> {
        let drives = status["drives"].as_array().expect("drives");
        drives.iter().map(|d| (d["state"].as_str().unwrap().to_string(), d["missing"] == true)).collect()
    }

    /// What `inspect` says of a drive's superblock.
    fn superblock_line(&self, drive: usize) -> String {
        let said = self.ok(&["inspect", &self.drives[drive]]);
        said.lines().find(|l| l.starts_with("superblock: ")).expect("a superblock line").to_string()
    }

    fn delete(&self, drive: usize) {
        std::fs::remove_file(&self.drives[drive]).unwrap();
    }

    /// The log of the array's background servers.
    fn log(&self) -> String {
        std::fs::read_to_string(self.run_dir.join("dg.log")).unwrap_or_default()
    }
}

/// A test that fails with the array running leaves no server behind.
impl Drop for World {
    fn drop(&mut self) {
        let _ = self.cli(&["stop", "dg"]);
    }
}

/// Runs the array on `drives`, writes blocks 0..BLOCKS as `write_pass` if given, reads
/// them all back as `read_pass`, stops it cleanly.
fn write_and_verify(drives: &[String], write_pass: Option<u64>, read_pass: u64) {
    common::world::write_and_verify(drives, BLOCKS, write_pass, read_pass);
}

#[test]
fn a_drive_gone_starts_degraded_only_when_asked_then_without_the_flag() {
    let _serial = serial();
    let world = World::new("raid5", 4);
    write_and_verify(&world.drives, Some(1), 1);
    world.delete(1);
    let three = world.without(&[1]);
    // Not given, or given where the file was: refused, saying what to do; nothing written.
    let said = world.refused(&[], &three);
    assert!(said.contains("array \"dg\" cannot start: drive 1 is missing. If it is gone, add --degraded"), "{said}");
    assert!(said.contains("stays failed even if it comes back"), "{said}");
    let said = world.refused(&[], &world.drives);
    let gone = &world.drives[1];
    assert!(said.contains(&format!("drive 1 is missing (given but not used: {gone}: cannot open")), "{said}");
    assert!(world.superblock_line(0).ends_with("generation 0, no failed drive"), "{}", world.superblock_line(0));

    let said = world.ok(&["start", "--daemon", "--no-device", "--degraded", &three[0], &three[1], &three[2]]);
    assert!(said.contains("array \"dg\" runs degraded: drive 1 missing (recorded failed)"), "{said}");
    assert!(world.log().contains("array \"dg\" runs degraded: drive 1 missing (recorded failed now)"));
    let status = world.status();
    assert_eq!(status["state"], "degraded", "{status}");
    let states = World::drive_states(&status);
    assert_eq!(states[1], ("failed".to_string(), true), "{status}");
    assert!(states.iter().enumerate().all(|(i, s)| i == 1 || s.0 == "ok" && !s.1), "{status}");
    assert!(status["drives"][1]["path"].is_null(), "{status}");
    let human = world.ok(&["status", "dg"]);
    assert!(human.contains("  drive 1: (missing) failed"), "{human}");
    world.ok(&["stop", "dg"]);
    for drive in [0, 2, 3] {
        let line = world.superblock_line(drive);
        assert!(line.ends_with("generation 1, failed drive 1"), "drive {drive}: {line}");
    }

    // The data reads back with the drive recorded failed; written again degraded, too.
    write_and_verify(&three, None, 1);
    write_and_verify(&three, Some(2), 2);
    // Recorded failed now: no flag needed.
    let out = world.start(&[], &three);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(World::drive_states(&world.status())[1], ("failed".to_string(), true));
    world.ok(&["stop", "dg"]);
    write_and_verify(&three, None, 2);
    assert!(!PathBuf::from(gone).exists(), "something was written where drive 1 was");
}

#[test]
fn raid6_starts_with_two_drives_gone_not_three() {
    let _serial = serial();
    let world = World::new("raid6", 5);
    write_and_verify(&world.drives, Some(1), 1);
    world.delete(1);
    world.delete(3);
    let said = world.refused(&["--degraded"], &world.without(&[1, 3, 4]));
    assert!(
        said.contains(
            "array \"dg\" cannot start: RAID-6 (3+2) survives 2 failed drives, and drives 1, 3 and 4 are missing \
             or failed (drive 1 missing, drive 3 missing, drive 4 missing): its data cannot be read"
        ),
        "{said}"
    );
    let three = world.without(&[1, 3]);
    let said = world.refused(&[], &three);
    assert!(said.contains("drives 1 and 3 are missing. If they are gone, add --degraded"), "{said}");
    assert!(world.superblock_line(0).ends_with("generation 0, no failed drive"));

    let said = text(&world.start(&["--degraded"], &three));
    assert!(said.contains("runs degraded: drive 1 missing (recorded failed), drive 3 missing (recorded failed)"));
    let states = World::drive_states(&world.status());
    let down: Vec<usize> = (0..5).filter(|i| states[*i] == ("failed".to_string(), true)).collect();
    assert_eq!(down, [1, 3], "{states:?}");
    world.ok(&["stop", "dg"]);
    assert!(world.superblock_line(4).ends_with("generation 1, failed drives 1 and 3"));
    write_and_verify(&three, None, 1);
    // A third drive recorded failed already or not, the level survives no more.
    let said = world.refused(&["--degraded"], &world.without(&[1, 3, 0]));
    assert!(said.contains("and drives 0, 1 and 3 are missing or failed (drive 0 missing, drive 1 missing"), "{said}");
}

#[test]
fn a_drive_failed_with_zapraid_fail_may_be_left_out_without_the_flag() {
    let _serial = serial();
    let world = World::new("raid5", 4);
    write_and_verify(&world.drives, Some(1), 1);
    let out = world.start(&[], &world.drives);
    assert!(out.status.success(), "{}", text(&out));
    world.ok(&["fail", "dg", &world.drives[2]]);
    world.ok(&["stop", "dg"]);
    let three = world.without(&[2]);
    let said = text(&world.start(&[], &three));
    assert!(said.contains("array \"dg\" runs degraded: drive 2 missing (recorded failed)"), "{said}");
    assert!(world.log().contains("drive 2 missing (recorded failed before)"), "{}", world.log());
    let states = World::drive_states(&world.status());
    assert_eq!(states[2], ("failed".to_string(), true), "{states:?}");
    world.ok(&["stop", "dg"]);
    // Nothing more was recorded: the failure `fail` wrote is the newest generation.
    assert!(world.superblock_line(0).ends_with("generation 1, failed drive 2"), "{}", world.superblock_line(0));
    write_and_verify(&three, None, 1);
}

/// A stale copy of a drive (its file copied aside, the array written on, the old copy put
/// back) is refused, as it must be, and the refusal names the drive and says how to start
/// without it (it said only "segment header ... disagrees with the other drives'
/// headers"); started so, as said, every block reads back as last written.
#[test]
fn a_stale_copy_of_a_drive_is_refused_saying_how_to_start_without_it() {
    let _serial = serial();
    let world = World::new("raid5", 4);
    write_and_verify(&world.drives, Some(1), 1);
    let stale = 2;
    let aside = format!("{}.aside", world.drives[stale]);
    std::fs::copy(&world.drives[stale], &aside).unwrap();
    for pass in 2..=4 {
        write_and_verify(&world.drives, Some(pass), pass);
    }
    std::fs::rename(&aside, &world.drives[stale]).unwrap();

    let said = world.refused(&[], &world.drives);
    assert!(said.contains(&format!("drive {stale}: segment header at zone ")), "{said}");
    assert!(said.contains("disagrees with the other drives' headers"), "{said}");
    let others = world.without(&[stale]);
    let path = &world.drives[stale];
    assert!(said.contains(&format!("Drive {stale} ({path}) is most likely a stale copy")), "{said}");
    assert!(said.contains(&format!("zapraid start --degraded {}", others.join(" "))), "{said}");
    assert!(said.contains(&format!("zapraid replace dg {stale} NEW-DRIVE")), "{said}");

    let said = text(&world.start(&["--degraded"], &others));
    assert!(said.contains(&format!("runs degraded: drive {stale} missing (recorded failed)")), "{said}");
    world.ok(&["stop", "dg"]);
    write_and_verify(&others, None, 4);
}
