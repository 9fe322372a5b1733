//! Replacing failed drives on drive files, as an operator does it: a drive gone (deleted)
//! or failed (`zapraid fail`), the array started degraded, `zapraid replace` with a new
//! drive file, the rebuild followed in `zapraid status` until done; then a *different*
//! drive fails and every block still reads back, which only holds if the rebuilt drive
//! holds the right data. A server killed mid-rebuild starts it again at the next start.
//!
//! The data is written and read back through the server library (assemble, recover, the
//! engine thread: what `start` runs) with the array stopped, since without ublk the CLI
//! has no block device to write through; the starts, replaces, fails and status are the
//! `zapraid` binary's.

use std::path::PathBuf;
use std::process::Output;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zapraid_engine::Request;
use zapraid_server::array::{assemble, recover};
use zapraid_server::driver::{Answer, EngineThread, FailureRecord, Message, ReplyTo};

mod common;
use common::{serial, text};

/// Blocks per request.
const REQUEST_BLOCKS: u64 = 64;

struct World {
    dir: tempfile::TempDir,
    run_dir: PathBuf,
    /// The array's drives, in array order (a replaced one's new file in its place).
    drives: Vec<String>,
    zone_args: Vec<String>,
    /// Blocks written and verified.
    blocks: u64,
}

impl World {
    /// `count` drive files of `zones` zones of 512 KiB, formatted as array "rp" of `level`.
    fn new(level: &str, count: usize, zones: u32, blocks: u64) -> World {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        let d = dir.path().join("d").display().to_string();
        let drives = (0..count).map(|i| format!("{d}/drive{i}.zns")).collect();
        let zone_args = ["--zones", &zones.to_string(), "--zone-size", "512K", "--zone-capacity", "480K"]
            .map(str::to_string)
            .to_vec();
        let world = World { dir, run_dir, drives, zone_args, blocks };
        world.create(&d, count);
        let mut args = vec!["format", "--level", level, "--group-size", "8", "--name", "rp"];
        args.extend(world.drives.iter().map(String::as_str));
        world.ok(&args);
        world
    }

    /// `count` new drive files in `dir` (drive0.zns, ...), of the array's geometry.
    fn create(&self, dir: &str, count: usize) {
        let count = count.to_string();
        let mut args = vec!["emu", "create", "--dir", dir, "--drives", &count];
        args.extend(self.zone_args.iter().map(String::as_str));
        self.ok(&args);
    }

    /// A new, empty drive file named `name`.
    fn new_drive(&self, name: &str) -> String {
        let dir = self.dir.path().join(name).display().to_string();
        self.create(&dir, 1);
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

    /// `start --daemon --no-device` (and `extra`) on the drives but those of `gone`.
    fn start(&self, extra: &[&str], gone: &[usize]) -> String {
        let mut args = vec!["start", "--daemon", "--no-device"];
        args.extend(extra);
        args.extend(self.drives.iter().enumerate().filter(|(i, _)| !gone.contains(i)).map(|(_, d)| d.as_str()));
        self.ok(&args)
    }

    fn status(&self) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["status", "rp", "--json"])).expect("status --json is JSON")
    }

    /// Polls `status` until no rebuild runs and drive `drive` is ok; returns what the
    /// human status said while the rebuild ran, if a poll saw it running.
    fn wait_rebuilt(&self, drive: usize) -> Option<String> {
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut seen = None;
        loop {
            let s = self.status();
            if s["rebuild"].is_null() && s["drives"][drive]["state"] == "ok" {
                assert!(!s["rebuilding"].as_bool().unwrap(), "{s}");
                return seen;
            }
            if !s["rebuild"].is_null() {
                assert_eq!(s["rebuild"]["drive"], drive, "{s}");
                assert_eq!(s["state"], "rebuilding", "{s}");
                let human = self.ok(&["status", "rp"]);
                if human.contains("rebuild of drive") {
                    seen = Some(human);
                }
            }
            assert!(Instant::now() < deadline, "rebuild of drive {drive} not done: {s}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What `inspect` says of a drive's superblock.
    fn superblock_line(&self, drive: usize) -> String {
        let said = self.ok(&["inspect", &self.drives[drive]]);
        said.lines().find(|l| l.starts_with("superblock: ")).expect("a superblock line").to_string()
    }

    /// Runs the array (stopped) on its drives, writes blocks as `write_pass` if given,
    /// reads them all back as `read_pass`, stops it cleanly.
    fn write_and_verify(&self, write_pass: Option<u64>, read_pass: u64) {
        let paths: Vec<PathBuf> = self.drives.iter().map(PathBuf::from).collect();
        let mut assembled = assemble(&paths).unwrap_or_else(|e| panic!("assemble {paths:?}: {e}"));
        let engine = recover(&mut assembled).unwrap();
        let block = assembled.geometry.block_size_bytes as usize;
        let record = FailureRecord {
            superblock: assembled.superblock,
            next_lba: assembled.superblock_next_lba.clone(),
            zone_capacity_blocks: assembled.geometry.zone_capacity_blocks,
        };
        let thread = EngineThread::spawn(engine, assembled.drives, block as u32, record).unwrap();
        let (tx, answers) = crossbeam_channel::unbounded::<Answer>();
        let reply = Arc::new(ReplyTo { tx, wake: Box::new(|| {}) });
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
        let _ = self.cli(&["stop", "rp"]);
    }
}

/// Block `lba` as pass `pass` writes it.
fn pattern(lba: u64, pass: u64, block: usize) -> Vec<u8> {
    let seed = lba.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ pass;
    (0..block).map(|i| (seed >> ((i % 8) * 8)) as u8 ^ (i / 8) as u8).collect()
}

/// Replaces drive `drive` of the running array by a new drive file `name`, waits for
/// the rebuild, stops the array; the new file is the drive from then on.
fn replace(world: &mut World, drive: usize, name: &str) {
    let new = world.new_drive(name);
    let said = world.ok(&["replace", "rp", &drive.to_string(), &new]);
    assert!(said.contains(&format!("drive {drive} replaced by {new}; rebuilding onto it")), "{said}");
    world.wait_rebuilt(drive);
    let s = world.status();
    assert_eq!(s["drives"][drive]["path"].as_str(), Some(new.as_str()), "{s}");
    world.ok(&["stop", "rp"]);
    world.drives[drive] = new;
}

#[test]
fn raid5_drive_gone_replaced_then_another_fails_and_everything_reads() {
    let _serial = serial();
    let mut world = World::new("raid5", 4, 12, 1200);
    world.write_and_verify(Some(1), 1);
    std::fs::remove_file(&world.drives[1]).unwrap();
    let said = world.start(&["--degraded"], &[1]);
    assert!(said.contains("drive 1 missing (recorded failed)"), "{said}");
    world.ok(&["stop", "rp"]);
    let gone = std::mem::take(&mut world.drives[1]);
    world.drives.remove(1);
    world.write_and_verify(Some(2), 2);
    world.drives.insert(1, gone);

    world.start(&[], &[1]);
    // Refusals: a drive not failed, a drive of the array, a drive too small, one not empty.
    let fresh = world.new_drive("fresh");
    let e = world.refused(&["replace", "rp", "2", &fresh]);
    assert!(e.contains("drive 2 has not failed: only a failed drive is replaced"), "{e}");
    let e = world.refused(&["replace", "rp", "1", &world.drives[3]]);
    assert!(e.contains("it is drive 3 of this array"), "{e}");
    let small_dir = world.dir.path().join("small").display().to_string();
    world.ok(&[
        "emu",
        "create",
        "--dir",
        &small_dir,
        "--drives",
        "1",
        "--zones",
        "8",
        "--zone-size",
        "512K",
        "--zone-capacity",
        "480K",
    ]);
    let e = world.refused(&["replace", "rp", "1", &format!("{small_dir}/drive0.zns")]);
    assert!(e.contains("it is too small: 8 zones"), "{e}");
    let other = World::new("raid5", 4, 12, 64);
    let e = world.refused(&["replace", "rp", "1", &other.drives[0]]);
    assert!(e.contains("it is drive 0 of array \"rp\"") && e.contains("add --force to erase it"), "{e}");
    let s = world.status();
    assert_eq!((s["state"].as_str(), s["rebuild"].is_null()), (Some("degraded"), true), "{s}");

    replace(&mut world, 1, "new1");
    world.start(&[], &[]);
    let s = world.status();
    assert_eq!((s["state"].as_str(), s["rebuilds_completed"].as_u64()), (Some("optimal"), Some(0)), "{s}");
    world.ok(&["stop", "rp"]);
    for drive in 0..4 {
        let line = world.superblock_line(drive);
        assert!(line.ends_with(", no failed drive"), "drive {drive}: {line}");
    }
    world.write_and_verify(None, 2);
    // Drive 2 fails: drive 1's blocks are read from the rebuilt drive, 2's rebuilt from it.
    world.start(&[], &[]);
    world.ok(&["fail", "rp", "2"]);
    world.ok(&["stop", "rp"]);
    world.write_and_verify(None, 2);
}

#[test]
fn raid6_two_drives_replaced_one_after_the_other() {
    let _serial = serial();
    let mut world = World::new("raid6", 5, 12, 1000);
    world.write_and_verify(Some(1), 1);
    world.start(&[], &[]);
    world.ok(&["fail", "rp", "0"]);
    world.ok(&["fail", "rp", "3"]);
    world.ok(&["stop", "rp"]);
    world.write_and_verify(Some(2), 2);
    world.start(&[], &[]);
    let first = world.new_drive("new0");
    world.ok(&["replace", "rp", "0", &first]);
    world.wait_rebuilt(0);
    world.ok(&["stop", "rp"]);
    world.drives[0] = first;
    world.start(&[], &[]);
    let s = world.status();
    assert_eq!(drive_states(&s), ["ok", "ok", "ok", "failed", "ok"], "{s}");
    world.ok(&["stop", "rp"]);
    world.start(&[], &[]);
    replace(&mut world, 3, "new3b");
    assert!(world.superblock_line(3).ends_with(", no failed drive"), "{}", world.superblock_line(3));
    world.write_and_verify(None, 2);
    // Two other drives fail: both rebuilt drives' blocks are needed.
    world.start(&[], &[]);
    world.ok(&["fail", "rp", "1"]);
    world.ok(&["fail", "rp", "2"]);
    world.ok(&["stop", "rp"]);
    world.write_and_verify(None, 2);
}

/// Each drive's state in a status document.
fn drive_states(s: &serde_json::Value) -> Vec<String> {
    s["drives"].as_array().unwrap().iter().map(|d| d["state"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_server_killed_mid_rebuild_starts_it_again_and_it_completes() {
    let _serial = serial();
    // Enough data that the rebuild outlasts the kill right after `replace` answers.
    let mut world = World::new("raid5", 4, 96, 15_000);
    world.write_and_verify(Some(1), 1);
    world.start(&[], &[]);
    world.ok(&["fail", "rp", "2"]);
    let pid = world.status()["pid"].as_u64().unwrap().to_string();
    let new = world.new_drive("new2");
    world.ok(&["replace", "rp", "2", &new]);
    let killed = std::process::Command::new("kill").args(["-9", &pid]).status().unwrap();
    assert!(killed.success());
    // Wait until the server is gone (its drives unlocked).
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "server {pid} did not die");
        std::thread::sleep(Duration::from_millis(10));
    }
    world.drives[2] = new;
    let line = world.superblock_line(0);
    assert!(line.ends_with("failed drive 2, rebuilding drive 2"), "{line}");
    world.start(&[], &[]);
    let log = std::fs::read_to_string(world.run_dir.join("rp.log")).unwrap_or_default();
    assert!(log.contains("the rebuild cut short resumes"), "{log}");
    world.wait_rebuilt(2);
    assert_eq!(world.status()["rebuilds_completed"], 1);
    world.ok(&["stop", "rp"]);
    assert!(world.superblock_line(2).ends_with(", no failed drive"), "{}", world.superblock_line(2));
    world.write_and_verify(None, 1);
    world.start(&[], &[]);
    world.ok(&["fail", "rp", "0"]);
    world.ok(&["stop", "rp"]);
    world.write_and_verify(None, 1);
}

/// The rebuild rate limit: set at replace, changed and lifted on the running array, shown
/// by `status --json`; the rebuild completes under it and the data verifies.
#[test]
fn the_rebuild_rate_is_set_changed_and_shown() {
    let _serial = serial();
    let mut world = World::new("raid5", 4, 96, 4_000);
    world.write_and_verify(Some(1), 1);
    world.start(&[], &[]);
    assert!(world.status()["rebuild_rate_bytes_per_s"].is_null());
    world.ok(&["fail", "rp", "1"]);
    let new = world.new_drive("new1");
    world.ok(&["replace", "rp", "1", &new, "--rebuild-rate", "64M"]);
    let s = world.status();
    assert_eq!(s["rebuild_rate_bytes_per_s"], 64u64 << 20, "{s}");
    world.ok(&["rebuild-rate", "rp", "200MiB/s"]);
    assert_eq!(world.status()["rebuild_rate_bytes_per_s"], 200u64 << 20);
    world.ok(&["rebuild-rate", "rp", "unlimited"]);
    assert!(world.status()["rebuild_rate_bytes_per_s"].is_null());
    world.wait_rebuilt(1);
    world.ok(&["stop", "rp"]);
    world.drives[1] = new;
    world.write_and_verify(None, 1);
}

#[test]
fn a_second_replace_while_a_rebuild_runs_is_refused() {
    let _serial = serial();
    // Enough data that the first rebuild still runs when the second replace comes.
    let world = World::new("raid6", 5, 96, 15_000);
    world.write_and_verify(Some(1), 1);
    world.start(&[], &[]);
    world.ok(&["fail", "rp", "0"]);
    world.ok(&["fail", "rp", "3"]);
    let first = world.new_drive("new0");
    let second = world.new_drive("new3");
    world.ok(&["replace", "rp", "0", &first]);
    let e = world.refused(&["replace", "rp", "3", &second]);
    assert!(e.contains("cannot replace drive 3: drive 0 is being rebuilt: one rebuild runs at a time"), "{e}");
    world.wait_rebuilt(0);
    // Refused, the second drive was not touched: it is still empty and can be used now.
    world.ok(&["replace", "rp", "3", &second]);
    world.wait_rebuilt(3);
    assert_eq!(world.status()["rebuilds_completed"], 2);
}
