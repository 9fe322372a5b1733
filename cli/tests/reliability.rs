//! Reliability on drive files, through the `zapraid` binary and its engine thread (the
//! io_uring file driver, whose reads complete in any order): a start after a clean stop
//! keeps every sealed segment and rewrites nothing; a damaged data block in a sealed
//! segment loses nothing and is repaired from parity.

use std::path::{Path, PathBuf};
use std::process::Output;

use zapraid_zns::{EmulatedDrive, ZoneState, ZonedDevice};

mod common;
use common::{serial, text};

struct World {
    _dir: tempfile::TempDir,
    run_dir: PathBuf,
    drives: Vec<String>,
}

impl World {
    /// Four small drive files holding a RAID-6 (2+2) array "selftest" that `zapraid
    /// selftest` filled past several sealed segments (it ends with drive 1 failed).
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        let d = dir.path().join("d");
        let d = d.to_str().unwrap().to_string();
        let world = World { run_dir, drives: (0..4).map(|i| format!("{d}/drive{i}.zns")).collect(), _dir: dir };
        world.ok(&[
            "emu",
            "create",
            "--dir",
            &d,
            "--drives",
            "4",
            "--zones",
            "24",
            "--zone-size",
            "512K",
            "--zone-capacity",
            "480K",
        ]);
        let mut args = vec!["selftest", "--level", "raid6", "--size", "6M", "--erase"];
        args.extend(world.drives.iter().map(String::as_str));
        world.ok(&args);
        world
    }

    fn cli(&self, args: &[&str]) -> Output {
        common::zapraid_in(&self.run_dir, args)
    }

    fn ok(&self, args: &[&str]) -> Output {
        let out = self.cli(args);
        assert!(out.status.success(), "zapraid {args:?} failed: {}", text(&out));
        out
    }

    /// Starts the array, waits until its background work settles, returns its status.
    fn start_and_status(&self) -> serde_json::Value {
        let mut args = vec!["start", "--daemon", "--no-device"];
        args.extend(self.drives.iter().map(String::as_str));
        self.ok(&args);
        let mut status = serde_json::Value::Null;
        // Background work (reclaiming segments) shows within moments; a start that keeps
        // its segments has none to show.
        for _ in 0..20 {
            let out = self.ok(&["status", "selftest", "--json"]);
            status = serde_json::from_slice(&out.stdout).expect("status --json is JSON");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        status
    }

    fn stop(&self) {
        self.ok(&["stop", "selftest"]);
    }
}

fn sealed_zones(path: &Path) -> Vec<(u64, u64)> {
    let drive = EmulatedDrive::open_file(path).unwrap();
    let g = drive.geometry();
    drive
        .zones()
        .iter()
        .filter(|z| z.state == ZoneState::Full && z.zone > 0)
        .map(|z| (g.zone_start_lba(z.zone), z.written_blocks()))
        .collect()
}

#[test]
fn clean_stops_and_starts_rewrite_nothing() {
    let _serial = serial();
    let world = World::new();
    let mut used = None;
    for cycle in 0..5 {
        let status = world.start_and_status();
        let segments = &status["segments"];
        assert_eq!(segments["to_reclaim"], 0, "cycle {cycle}: sealed segments taken for open ones: {status}");
        assert_eq!(segments["blocks_relocated"], 0, "cycle {cycle}: a start rewrote data: {status}");
        let now = status["capacity"]["used_bytes"].as_u64().expect("used bytes");
        assert_eq!(*used.get_or_insert(now), now, "cycle {cycle}: mapped data changed: {status}");
        world.stop();
    }
}

#[test]
fn a_damaged_block_in_sealed_segments_loses_nothing() {
    let _serial = serial();
    let world = World::new();
    let before = world.start_and_status();
    world.stop();
    // One data block in every sealed zone of drive 0 (drive 1 is already failed: RAID-6
    // rebuilds both).
    let path = Path::new(&world.drives[0]);
    let zones = sealed_zones(path);
    assert!(zones.len() >= 2, "the self-test sealed segments: {zones:?}");
    let mut drive = EmulatedDrive::open_file(path).unwrap();
    for (i, (start, _)) in zones.iter().enumerate() {
        drive.corrupt_block(start + 3 + i as u64 * 7, 100).unwrap();
    }
    drop(drive);
    let after = world.start_and_status();
    world.stop();
    assert_eq!(after["capacity"]["used_bytes"], before["capacity"]["used_bytes"], "blocks lost: {after}");
    assert_eq!(after["segments"]["to_reclaim"], 0, "{after}");
}
