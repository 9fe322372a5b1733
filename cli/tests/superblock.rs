//! The array superblock's copies as a user meets them: one damaged copy on a drive does
//! not stop the array; a drive whose copies are all damaged is described, not sent to
//! `zapraid format`; a bad segment header is reported in the zone `zapraid inspect` shows.
//!
//! Damage is done in the drive files directly (`common::drive_file`).

use std::path::{Path, PathBuf};
use std::process::Output;

/// A byte inside the array superblock's CRC-covered fields (the array UUID).
const SUPERBLOCK_DAMAGE_BYTE: u64 = 20;
/// Drives of the test arrays.
const DRIVES: usize = 4;

mod common;
use common::drive_file::DriveFile;
use common::text;

/// Drive files in a temporary directory and a run directory for the array's socket.
struct Setup {
    _dir: tempfile::TempDir,
    run_dir: PathBuf,
    drives: Vec<String>,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        let d = dir.path().join("d");
        let setup = Setup {
            drives: (0..DRIVES).map(|i| format!("{}/drive{i}.zns", d.display())).collect(),
            run_dir,
            _dir: dir,
        };
        let d = d.to_str().unwrap();
        let drives = DRIVES.to_string();
        let geometry = ["--zones", "12", "--zone-size", "512K", "--zone-capacity", "480K", "--metadata", "64"];
        let mut args = vec!["emu", "create", "--dir", d, "--drives", &drives];
        args.extend(geometry);
        setup.ok(&args);
        setup
    }

    fn run(&self, args: &[&str]) -> Output {
        common::zapraid_in(&self.run_dir, args)
    }

    /// Runs `args` followed by every drive.
    fn run_on_drives(&self, args: &[&str]) -> Output {
        let mut all = args.to_vec();
        all.extend(self.drives.iter().map(String::as_str));
        self.run(&all)
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "zapraid {args:?}: {}", text(&out));
        text(&out)
    }

    fn format(&self, name: &str) {
        let out = self.run_on_drives(&["format", "--level", "raid5", "--group-size", "8", "--name", name]);
        assert!(out.status.success(), "{}", text(&out));
    }

    /// Formats the drives (as "selftest") and leaves segments with data on them.
    fn selftest(&self) {
        let out = self.run_on_drives(&["selftest", "--size", "2M", "--erase"]);
        assert!(out.status.success(), "{}", text(&out));
    }

    fn start(&self) -> Output {
        self.run_on_drives(&["start", "--daemon", "--no-device"])
    }

    fn file(&self, drive: usize) -> DriveFile {
        DriveFile::open(Path::new(&self.drives[drive]))
    }
}

#[test]
fn one_damaged_superblock_copy_does_not_stop_the_array() {
    let s = Setup::new();
    s.format("sb1");
    // The first copy of generation 0 on the first drive (the one `start` names the array from).
    s.file(0).damage(0, 0, SUPERBLOCK_DAMAGE_BYTE);
    let out = s.start();
    assert!(out.status.success(), "{}", text(&out));
    // A failed drive makes generation 1 (two more blocks); its first copy damaged on every
    // live drive, the twin still says drive 2 failed.
    s.ok(&["fail", "sb1", "2"]);
    s.ok(&["stop", "sb1"]);
    for drive in [0, 1, 3] {
        let file = s.file(drive);
        let written = file.written_blocks(0);
        assert_eq!(written, 4, "drive {drive}: two generations of two copies");
        file.damage(0, written - 2, SUPERBLOCK_DAMAGE_BYTE);
    }
    let out = s.start();
    assert!(out.status.success(), "{}", text(&out));
    let status: serde_json::Value = serde_json::from_str(&s.ok(&["status", "sb1", "--json"])).unwrap();
    assert_eq!(status["drives"][2]["state"], "failed", "{status}");
    s.ok(&["stop", "sb1"]);
}

/// A drive file whose record of one zone is damaged in both copies cannot be driven; the
/// refusal names the zone and says `format --force` re-initialises it, which it does.
#[test]
fn format_force_reinitialises_a_drive_file_with_a_zone_record_damaged_in_both_copies() {
    let s = Setup::new();
    s.selftest();
    s.file(0).damage_zone_record(3);
    let format = ["format", "--level", "raid5", "--group-size", "8", "--name", "zr"];
    let out = s.run_on_drives(&format);
    let said = text(&out);
    assert!(!out.status.success() && said.contains("zone 3 record") && said.contains("format --force"), "{said}");
    let out = s.run_on_drives(&[&format[..], &["--force"]].concat());
    assert!(out.status.success(), "{}", text(&out));
    let out = s.start();
    assert!(out.status.success(), "{}", text(&out));
    s.ok(&["stop", "zr"]);
}

#[test]
fn a_drive_with_every_copy_damaged_is_described_not_sent_to_format() {
    let s = Setup::new();
    s.selftest();
    let damaged = 0;
    let file = s.file(damaged);
    for block in 0..file.written_blocks(0) {
        file.damage(0, block, SUPERBLOCK_DAMAGE_BYTE);
    }
    let out = s.start();
    let message = text(&out);
    assert!(!out.status.success(), "started without drive 0's superblock: {message}");
    assert!(!message.contains("format first"), "{message}");
    assert!(message.contains("looks like an array member") && message.contains("would erase"), "{message}");
    assert!(message.contains(&format!("segment header of drive {damaged} of {DRIVES}")), "{message}");
    let out = s.run(&["inspect", &s.drives[damaged]]);
    assert!(out.status.success() && text(&out).contains("looks like an array member"), "{}", text(&out));
    // Formatting it needs --force, as for a member of another array.
    let out = s.run_on_drives(&["format", "--level", "raid5"]);
    let refused = format!("{} refused: it holds no valid zapraid array superblock", s.drives[damaged]);
    assert!(!out.status.success() && text(&out).contains(&refused) && text(&out).contains("--force"), "{}", text(&out));

    // A blank drive is still told to format.
    let blank = Setup::new();
    let out = blank.start();
    assert!(!out.status.success() && text(&out).contains("run zapraid format first"), "{}", text(&out));
}

#[test]
fn a_segment_header_of_another_drive_is_reported_in_the_zone_inspect_shows() {
    let s = Setup::new();
    s.selftest();
    let inspect = s.ok(&["inspect", &s.drives[0]]);
    // The first zone with a segment header, as inspect numbers it (its first column).
    let zone: u32 = inspect
        .lines()
        .find(|l| l.contains("sequence ") && l.contains(&format!("drive 0 of {DRIVES}")))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|z| z.parse().ok())
        .unwrap_or_else(|| panic!("no segment header in:\n{inspect}"));
    // Drive 2's header of the same segment, valid, in drive 0's place.
    s.file(0).copy_block_from(&s.file(2), zone, 0);
    let out = s.run_on_drives(&["start", "--no-device"]);
    let message = text(&out);
    assert!(!out.status.success(), "started with drive 2's header on drive 0: {message}");
    assert!(message.contains(&format!("drive 0: segment header at zone {zone},")), "{message}");
    assert!(message.contains("is drive 2 of the array"), "{message}");
}
