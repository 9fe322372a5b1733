//! What the `zapraid` binary's test files share: running it with its own run directory
//! (control sockets, logs), and its output as one text for messages to search.

pub mod drive_file;
pub mod traces;
pub mod world;

use std::path::Path;
use std::process::{Command, Output};

/// Runs `zapraid` with its run directory in `run_dir`.
#[allow(dead_code)] // not every test binary uses every helper
pub fn zapraid_in(run_dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zapraid"))
        .args(args)
        .env("ZAPRAID_RUN_DIR", run_dir)
        .output()
        .expect("run zapraid")
}

/// Standard output, then standard error.
pub fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// One test at a time in a binary whose tests open drive files in-process: a `zapraid`
/// process forked by one test holds, until it execs, the drive files another test opened
/// at that moment (their locks with them), and a start of that other test's array then
/// finds its drives in use.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[allow(dead_code)] // not every test binary uses every helper
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The kind a block's metadata on `drive` at `lba` gives, if it decodes (a damaged block
/// does not).
#[allow(dead_code)] // not every test binary uses every helper
pub fn kind_of(drive: &mut zapraid_zns::EmulatedDrive, lba: u64) -> Option<zapraid_engine::format::BlockKind> {
    use zapraid_zns::ZonedDevice;
    let g = drive.geometry();
    let (data, metadata) = (vec![0; g.block_size_bytes as usize], vec![0; g.metadata_bytes_per_block as usize]);
    drive.submit(0, zapraid_zns::Command::Read { lba, data, metadata });
    let mut out = Vec::new();
    while out.is_empty() {
        drive.wait(&mut out);
    }
    let c = out.pop().expect("one completion");
    zapraid_engine::format::BlockMetadata::decode(&c.data, &c.metadata).ok().map(|(_, kind)| kind)
}
