//! A formatted array on drive files in a temporary directory, driven as an operator does
//! (the `zapraid` binary: start, status, stop) with its data written and read back through
//! the server library (assemble, recover, the engine thread: what `start` runs) while the
//! array is stopped, since without ublk the CLI has no block device to write through.
#![allow(dead_code)] // not every test binary uses every helper

use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use zapraid_engine::Request;
use zapraid_server::assemble::assemble;
use zapraid_server::run::Session;

use super::{text, zapraid_in};

/// Blocks per request.
pub const REQUEST_BLOCKS: u64 = 64;

pub struct World {
    pub dir: tempfile::TempDir,
    pub run_dir: PathBuf,
    /// The array's drives, in array order (a replaced one's new file in its place).
    pub drives: Vec<String>,
    pub zone_args: Vec<String>,
    /// Blocks written and verified.
    pub blocks: u64,
}

impl World {
    /// `count` drive files of `zones` zones of 512 KiB, formatted as array "rp" of `level`.
    pub fn new(level: &str, count: usize, zones: u32, blocks: u64) -> World {
        World::formatted(level, count, zones, blocks, &[])
    }

    /// As `new`, with more `format` options.
    pub fn formatted(level: &str, count: usize, zones: u32, blocks: u64, format_args: &[&str]) -> World {
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
        args.extend(format_args);
        args.extend(world.drives.iter().map(String::as_str));
        world.ok(&args);
        world
    }

    /// `count` new drive files in `dir` (drive0.zns, ...), of the array's geometry.
    pub fn create(&self, dir: &str, count: usize) {
        let count = count.to_string();
        let mut args = vec!["emu", "create", "--dir", dir, "--drives", &count];
        args.extend(self.zone_args.iter().map(String::as_str));
        self.ok(&args);
    }

    /// A new, empty drive file named `name`.
    pub fn new_drive(&self, name: &str) -> String {
        let dir = self.dir.path().join(name).display().to_string();
        self.create(&dir, 1);
        format!("{dir}/drive0.zns")
    }

    pub fn cli(&self, args: &[&str]) -> Output {
        zapraid_in(&self.run_dir, args)
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(out.status.success(), "zapraid {args:?} failed: {}", text(&out));
        text(&out)
    }

    pub fn refused(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(!out.status.success(), "zapraid {args:?} succeeded: {}", text(&out));
        text(&out)
    }

    /// `start --daemon --no-device` (and `extra`) on the drives but those of `gone`.
    pub fn start(&self, extra: &[&str], gone: &[usize]) -> String {
        let mut args = vec!["start", "--daemon", "--no-device"];
        args.extend(extra);
        args.extend(self.drives.iter().enumerate().filter(|(i, _)| !gone.contains(i)).map(|(_, d)| d.as_str()));
        self.ok(&args)
    }

    pub fn status(&self) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["status", "rp", "--json"])).expect("status --json is JSON")
    }

    /// Polls `status` until no rebuild runs and drive `drive` is ok; returns what the
    /// human status said while the rebuild ran, if a poll saw it running.
    pub fn wait_rebuilt(&self, drive: usize) -> Option<String> {
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

    /// Runs `scrub --wait` and checks it read stripes and found nothing damaged.
    pub fn scrub_clean(&self) {
        self.ok(&["scrub", "rp", "--wait"]);
        let last = &self.status()["scrub"]["last"];
        assert!(last["stripes_checked"].as_u64().unwrap() > 0, "{last}");
        assert_eq!((&last["blocks_damaged"], &last["parity_mismatches"]), (&0.into(), &0.into()), "{last}");
    }

    /// What `inspect` says of a drive's superblock.
    pub fn superblock_line(&self, drive: usize) -> String {
        let said = self.ok(&["inspect", &self.drives[drive]]);
        said.lines().find(|l| l.starts_with("superblock: ")).expect("a superblock line").to_string()
    }

    /// The drives but those of `gone`.
    pub fn without(&self, gone: &[usize]) -> Vec<String> {
        self.drives.iter().enumerate().filter(|(i, _)| !gone.contains(i)).map(|(_, d)| d.clone()).collect()
    }

    /// Runs the array (stopped) on its drives, writes blocks as `write_pass` if given,
    /// reads them all back as `read_pass`, stops it cleanly; the engine's status before
    /// the stop.
    pub fn write_and_verify(&self, write_pass: Option<u64>, read_pass: u64) -> zapraid_engine::Status {
        write_and_verify(&self.drives, self.blocks, write_pass, read_pass)
    }
}

/// A test that fails with the array running leaves no server behind.
impl Drop for World {
    fn drop(&mut self) {
        let _ = self.cli(&["stop", "rp"]);
    }
}

/// Runs the array (stopped) on `drives` (every drive absent must be recorded failed),
/// writes blocks 0..`blocks` as `write_pass` if given, reads them all back as
/// `read_pass`, stops it cleanly; returns the engine's status before the stop.
pub fn write_and_verify(
    drives: &[String],
    blocks: u64,
    write_pass: Option<u64>,
    read_pass: u64,
) -> zapraid_engine::Status {
    let paths: Vec<PathBuf> = drives.iter().map(PathBuf::from).collect();
    let assembled = assemble(&paths).unwrap_or_else(|e| panic!("assemble {paths:?}: {e}"));
    let session = Session::start(assembled).unwrap();
    let block = session.block_bytes;
    let ask = |request: Request| session.ask(request).unwrap_or_else(|e| panic!("request failed: {e}"));
    let requests =
        || (0..blocks).step_by(REQUEST_BLOCKS as usize).map(|start| (start, REQUEST_BLOCKS.min(blocks - start)));
    if let Some(pass) = write_pass {
        for (start, n) in requests() {
            let data = (start..start + n).flat_map(|l| pattern(l, pass, block)).collect();
            ask(Request::Write { lba: start, data });
        }
    }
    ask(Request::Flush);
    for (start, n) in requests() {
        let got = ask(Request::Read { lba: start, blocks: n });
        for (i, data) in got.chunks(block).enumerate() {
            let lba = start + i as u64;
            assert!(data == pattern(lba, read_pass, block), "block {lba} does not hold pass {read_pass}");
        }
    }
    let status = session.status().unwrap().engine;
    session.stop().unwrap();
    status
}

/// Block `lba` as pass `pass` writes it.
pub fn pattern(lba: u64, pass: u64, block: usize) -> Vec<u8> {
    let seed = lba.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ pass;
    (0..block).map(|i| (seed >> ((i % 8) * 8)) as u8 ^ (i / 8) as u8).collect()
}
