//! The `zapraid` binary refusing what would harm an array or mislead its operator: array
//! names that cannot name its files, a background start that did not start, a start
//! under a name already running (refused before any drive is touched), a run directory
//! others may write in and a link where the log goes, failures the level cannot survive,
//! and messages that say what really happens.

mod common;
use common::text;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temporary directory with its own run directory (control sockets and logs).
struct World {
    dir: tempfile::TempDir,
    run_dir: PathBuf,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        World { dir, run_dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn cli_in(&self, cwd: &Path, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_zapraid"))
            .args(args)
            .current_dir(cwd)
            .env("ZAPRAID_RUN_DIR", &self.run_dir)
            .output()
            .expect("run zapraid")
    }

    fn cli(&self, args: &[&str]) -> Output {
        self.cli_in(self.path(), args)
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(out.status.success(), "zapraid {args:?} failed: {}", text(&out));
        text(&out)
    }

    /// Runs `args` and returns what it said on stderr; it must fail, and not panic.
    fn refused(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(!out.status.success(), "zapraid {args:?} accepted: {stdout}{stderr}");
        assert!(!stderr.contains("panicked"), "zapraid {args:?} panicked: {stderr}");
        stderr.into_owned()
    }

    /// `count` small drive files in `sub`, their paths.
    fn drives(&self, sub: &str, count: usize) -> Vec<String> {
        let d = self.path().join(sub);
        let d = d.to_str().unwrap();
        let count_text = count.to_string();
        self.ok(&[
            "emu",
            "create",
            "--dir",
            d,
            "--drives",
            &count_text,
            "--zones",
            "12",
            "--zone-size",
            "512K",
            "--zone-capacity",
            "480K",
        ]);
        (0..count).map(|i| format!("{d}/drive{i}.zns")).collect()
    }

    fn format(&self, level: &str, name: &str, drives: &[String]) {
        let mut args = vec!["format", "--level", level, "--name", name];
        args.extend(drives.iter().map(String::as_str));
        self.ok(&args);
    }

    fn start(&self, drives: &[String]) -> Output {
        let mut args = vec!["start", "--daemon", "--no-device"];
        args.extend(drives.iter().map(String::as_str));
        self.cli(&args)
    }
}

impl Drop for World {
    /// Stops whatever array a failed test left running.
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(&self.run_dir) else { return };
        for entry in entries.flatten() {
            if let Some(name) = entry.file_name().to_str().and_then(|n| n.strip_suffix(".sock")) {
                let _ = self.cli(&["stop", name]);
            }
        }
    }
}

/// Names that cannot name an array's socket and log are refused at format and at start
/// (an empty one hung `start --daemon`; "a/b" was accepted, then failed; "../x" put the
/// socket and log outside the run directory).
#[test]
fn array_names_are_checked_at_format_and_start() {
    let world = World::new();
    let drives = world.drives("d", 4);
    let too_long = "n".repeat(33);
    for (name, said) in [
        ("", "array name \"\" is empty"),
        ("a/b", "array name \"a/b\" contains \"/\""),
        ("../x", "array name \"../x\" contains \"/\""),
        (".x", "array name \".x\" starts with \".\""),
        ("a b", "array name \"a b\" contains whitespace"),
        ("a\nb", "array name \"a\\nb\" contains whitespace"),
        (too_long.as_str(), "is 33 bytes long; the superblock holds at most 32"),
    ] {
        let mut args = vec!["format", "--level", "raid5", "--name", name];
        args.extend(drives.iter().map(String::as_str));
        let stderr = world.refused(&args);
        assert!(stderr.contains(said), "{name:?}: {stderr}");
        assert_eq!(stderr.matches("array name").count(), 1, "said more than once: {stderr}");
    }
    // Nothing was formatted.
    let out = world.cli(&["inspect", &drives[0]]);
    assert!(text(&out).contains("superblock: none"), "{}", text(&out));

    world.format("raid5", "good", &drives);
    for name in ["", "a/b", "../x"] {
        let mut args = vec!["start", "--daemon", "--no-device", "--name", name];
        args.extend(drives.iter().map(String::as_str));
        let stderr = world.refused(&args);
        assert!(stderr.contains(&format!("array name \"{name}\"")), "{name:?}: {stderr}");
        let mut args = vec!["start", "--no-device", "--name", name];
        args.extend(drives.iter().map(String::as_str));
        let stderr = world.refused(&args);
        assert!(stderr.contains(&format!("array name \"{name}\"")), "{name:?}: {stderr}");
    }
    // Nothing landed beside the run directory.
    for file in ["x.sock", "x.log"] {
        assert!(!world.path().join(file).exists(), "{file} written outside the run directory");
    }
    // The good name still starts.
    let out = world.start(&drives);
    assert!(out.status.success(), "{}", text(&out));
    world.ok(&["stop", "good"]);
}

/// A background start whose server dies says so, with the server's own error, and fails:
/// another array answering under the same name is not taken for it (that start said
/// "running in the background" while its server had exited).
#[test]
fn a_background_start_reports_its_own_server() {
    let world = World::new();
    let first = world.drives("a", 4);
    let second = world.drives("b", 4);
    world.format("raid5", "same", &first);
    world.format("raid5", "same", &second);
    let out = world.start(&first);
    assert!(out.status.success(), "{}", text(&out));
    let uuid_of = |status: &str| serde_json::from_str::<serde_json::Value>(status).unwrap()["uuid"].clone();
    let running = uuid_of(&world.ok(&["status", "same", "--json"]));

    let out = world.start(&second);
    let said = text(&out);
    assert!(!out.status.success(), "a second array named \"same\" reported as started: {said}");
    assert!(said.contains("an array named \"same\" is already running"), "{said}");
    assert!(!said.contains("running in the background") && !said.contains("assembled"), "{said}");
    // The first array runs on, still the one that answers, and names its server.
    let status = world.ok(&["status", "same", "--json"]);
    assert_eq!(uuid_of(&status), running);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert!(status["pid"].as_u64().is_some(), "status names no server pid: {status}");

    // The first array's drives under another name: they are in use.
    let mut args = vec!["start", "--daemon", "--no-device", "--name", "other"];
    args.extend(first.iter().map(String::as_str));
    let out = world.cli(&args);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("in use by another process"), "{}", text(&out));
    world.ok(&["stop", "same"]);
}

/// A start under a name already running is refused before any drive is touched (the
/// second array's drives were assembled and recovered first, a drive left out with
/// --degraded recorded failed on the others, and a background start appended its
/// server's refusal to the running array's log).
#[test]
fn a_start_under_a_running_name_is_refused_before_any_drive_is_touched() {
    let world = World::new();
    let first = world.drives("a", 4);
    let second = world.drives("b", 4);
    world.format("raid5", "same", &first);
    world.format("raid5", "other", &second);
    let out = world.start(&first);
    assert!(out.status.success(), "{}", text(&out));
    let log = world.run_dir.join("same.log");
    let log_before = std::fs::read(&log).unwrap();
    let images: Vec<Vec<u8>> = second.iter().map(|d| std::fs::read(d).unwrap()).collect();
    for extra in [&["--daemon"][..], &[]] {
        let mut args = vec!["start", "--no-device", "--degraded", "--name", "same"];
        args.extend(extra);
        args.extend(second[1..].iter().map(String::as_str));
        let said = world.refused(&args);
        assert!(said.contains("an array named \"same\" is already running"), "{said}");
        assert!(said.contains("zapraid stop same") && said.contains("--name"), "{said}");
        assert!(!said.contains("assembled") && !said.contains("recover"), "{said}");
    }
    for (drive, image) in second.iter().zip(&images) {
        assert!(std::fs::read(drive).unwrap() == *image, "{drive} was written");
    }
    assert!(std::fs::read(&log).unwrap() == log_before, "the running array's log was written");
    world.ok(&["stop", "same"]);
}

/// The run directory is made 0700, and one others may write in is refused with the fix;
/// the log is not written through a symbolic link (with a run directory others could
/// write in, a link `NAME.log` made the root server append to any file).
#[test]
fn the_run_directory_is_private_and_the_log_is_not_written_through_a_link() {
    use std::os::unix::fs::PermissionsExt;
    let world = World::new();
    let drives = world.drives("d", 4);
    world.format("raid5", "rd", &drives);
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
    let out = world.start(&drives);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(mode(&world.run_dir), 0o700, "run directory {}", world.run_dir.display());
    let log = world.run_dir.join("rd.log");
    assert_eq!(mode(&log), 0o600);
    world.ok(&["stop", "rd"]);

    // A link where the log goes: refused, the file it points at untouched.
    let target = world.path().join("precious");
    std::fs::write(&target, b"keep me").unwrap();
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink(&target, &log).unwrap();
    let said = world.refused(&["start", "--daemon", "--no-device", &drives[0], &drives[1], &drives[2], &drives[3]]);
    assert!(said.contains(&format!("{} refused: the log is a symbolic link", log.display())), "{said}");
    assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
    std::fs::remove_file(&log).unwrap();

    // Writable by others: refused with the fix, nothing made in it; fixed, it starts.
    std::fs::set_permissions(&world.run_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let said = world.refused(&["start", "--daemon", "--no-device", &drives[0], &drives[1], &drives[2], &drives[3]]);
    let dir = world.run_dir.display();
    assert!(said.contains(&format!("{dir} refused: the run directory is writable by its group and others")), "{said}");
    assert!(said.contains(&format!("chmod 700 {dir}")), "{said}");
    assert!(std::fs::read_dir(&world.run_dir).unwrap().next().is_none(), "something was made in it");
    std::fs::set_permissions(&world.run_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = world.start(&drives);
    assert!(out.status.success(), "{}", text(&out));
    world.ok(&["stop", "rd"]);
}

/// `fail` refuses what the level cannot survive (a RAID-0 drive; a second RAID-5 drive:
/// both were accepted as "rebuilt from parity" and the array never started again), says
/// a drive has failed already, and finds a drive by any spelling of its path.
#[test]
fn fail_refuses_what_the_array_cannot_survive() {
    let world = World::new();
    // RAID-0, started with absolute paths; failed by a path relative to another directory.
    let drives = world.drives("r0", 4);
    world.format("raid0", "r0", &drives);
    let out = world.start(&drives);
    assert!(out.status.success(), "{}", text(&out));
    let out = world.cli_in(&world.path().join("r0"), &["fail", "r0", "drive1.zns"]);
    let said = text(&out);
    assert!(!out.status.success(), "RAID-0 accepted a failure: {said}");
    assert!(
        said.contains(
            "array \"r0\": RAID-0 (4) survives no failed drive: failing drive 1 would lose the array's data \
             (blocks of the stripes it would leave short read as errors, and with no drive to spare the array would \
             not start again); add --force to fail it anyway"
        ),
        "{said}"
    );
    let status: serde_json::Value = serde_json::from_str(&world.ok(&["status", "r0", "--json"])).unwrap();
    assert_eq!(status["state"], "optimal", "{status}");
    // It starts again as it was.
    world.ok(&["stop", "r0"]);
    let out = world.start(&drives);
    assert!(out.status.success(), "{}", text(&out));
    // Forced, the failure is carried out and said for what it is.
    let said = world.ok(&["fail", "r0", "2", "--force"]);
    assert!(said.contains("drive 2 (") && said.contains("its data is lost"), "{said}");
    assert!(!said.contains("rebuilt"), "{said}");
    world.ok(&["stop", "r0"]);
    let out = world.start(&drives);
    assert!(!out.status.success(), "a RAID-0 array that lost a drive started: {}", text(&out));

    // RAID-5, started with paths relative to the test directory; failed by absolute path.
    world.drives("r5", 4);
    let relative: Vec<String> = (0..4).map(|i| format!("r5/drive{i}.zns")).collect();
    let absolute: Vec<String> = relative.iter().map(|p| world.path().join(p).display().to_string()).collect();
    world.format("raid5", "r5", &absolute);
    let out = world.start(&relative);
    assert!(out.status.success(), "{}", text(&out));
    let said = world.ok(&["fail", "r5", &absolute[1]]);
    assert!(
        said.contains(
            "array \"r5\": drive 1 (r5/drive1.zns) marked failed; its blocks are rebuilt from the other drives"
        ),
        "{said}"
    );
    for again in ["1", absolute[1].as_str()] {
        let stderr = world.refused(&["fail", "r5", again]);
        assert!(stderr.contains("array \"r5\": drive 1 has failed already"), "{stderr}");
    }
    let stderr = world.refused(&["fail", "r5", "3"]);
    assert!(
        stderr.contains("RAID-5 (3+1) survives 1 failed drive, and drive 1 has failed already: failing drive 3 too"),
        "{stderr}"
    );
    assert!(!stderr.contains("\"error\""), "a JSON form in the message: {stderr}");
    let stderr = world.refused(&["fail", "r5", "7"]);
    assert!(stderr.contains("no drive 7: the array has drives 0 to 3"), "{stderr}");
    let status: serde_json::Value = serde_json::from_str(&world.ok(&["status", "r5", "--json"])).unwrap();
    let states: Vec<&str> = (0..4).map(|i| status["drives"][i]["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["ok", "failed", "ok", "ok"], "{status}");
    // Degraded, it starts again.
    world.ok(&["stop", "r5"]);
    let out = world.start(&relative);
    assert!(out.status.success(), "{}", text(&out));
    world.ok(&["stop", "r5"]);
}

/// Wrong drive counts are said in drives for the level as given (RAID-01 over 1 drive
/// said "needs 0 drives", over 3 "needs 2"; RAID-1 over 37 said "1+36 chunks").
#[test]
fn format_says_drive_counts_as_given() {
    let world = World::new();
    let drives = world.drives("d", 37);
    let refused = |level: &str, count: usize| {
        let mut args = vec!["format", "--level", level];
        args.extend(drives[..count].iter().map(String::as_str));
        world.refused(&args)
    };
    for (level, count, said) in [
        ("raid01", 1, "RAID-01 needs an even number of drives, at least 2 (1 given)"),
        ("raid01", 3, "RAID-01 needs an even number of drives, at least 2 (3 given)"),
        ("raid1", 37, "RAID-1 takes at most 5 drives (37 given)"),
        ("raid1", 6, "RAID-1 takes at most 5 drives (6 given)"),
        ("raid5", 37, "RAID-5 takes at most 33 drives (37 given)"),
        ("raid0", 33, "RAID-0 takes at most 32 drives (33 given)"),
        ("raid6", 3, "RAID-6 needs at least 4 drives (3 given)"),
    ] {
        let stderr = refused(level, count);
        assert!(stderr.contains(said), "{level} over {count}: {stderr}");
        assert!(!stderr.contains("needs 0") && !stderr.contains("chunks"), "{level} over {count}: {stderr}");
    }
    // The largest RAID-1 it names is made.
    let mut args = vec!["format", "--level", "raid1"];
    args.extend(drives[..5].iter().map(String::as_str));
    world.ok(&args);
}

/// Drives of two arrays mixed: the one of the other array is refused wherever it was
/// listed (listed first, the healthy drive listed second was blamed).
#[test]
fn a_foreign_drive_is_the_one_named() {
    let world = World::new();
    let a = world.drives("a", 4);
    let b = world.drives("b", 4);
    world.format("raid5", "a", &a);
    world.format("raid5", "b", &b);
    for mixed in [[&b[0], &a[1], &a[2], &a[3]], [&a[0], &a[1], &b[2], &a[3]]] {
        let mut args = vec!["start", "--no-device"];
        args.extend(mixed.iter().map(|p| p.as_str()));
        let stderr = world.refused(&args);
        let foreign = mixed.iter().find(|p| p.contains("/b/")).unwrap();
        assert!(stderr.contains(&format!("{foreign} refused: it belongs to array ")), "{stderr}");
        assert!(stderr.contains("(\"b\"), while 3 of the 4 drives given belong to array "), "{stderr}");
        assert!(!stderr.contains("/a/drive1.zns refused"), "a healthy drive blamed: {stderr}");
    }
}

/// The self-test says what it writes (its --size capped at what the array holds: it
/// said "64 MiB to write" and wrote what fitted) and verifies all of it after the last
/// restart (it verified half, and nothing at all on RAID-0).
#[test]
fn selftest_says_what_it_writes_and_verifies_it_all() {
    let world = World::new();
    let drives = world.drives("d", 4);
    for level in ["raid5", "raid0"] {
        let mut args = vec!["selftest", "--erase", "--level", level];
        args.extend(drives.iter().map(String::as_str));
        let stdout = world.ok(&args);
        assert!(!stdout.contains("64 MiB to write"), "{stdout}");
        let written = stdout
            .lines()
            .find_map(|l| l.strip_prefix("write: ").and_then(|l| l.strip_suffix(" ok")))
            .unwrap_or_else(|| panic!("no write line: {stdout}"))
            .to_string();
        assert_ne!(written, "64 MiB", "{stdout}");
        assert!(
            stdout.contains(&format!("over 4 drives; writing {written} (all the array holds: --size 64 MiB is more)")),
            "{stdout}"
        );
        assert!(stdout.contains(&format!("selftest passed: {written} written and verified")), "{stdout}");
        if level == "raid5" {
            assert!(stdout.contains("verify after restart (failed drive recorded), first half (written degraded): "));
            assert!(stdout.contains("verify after restart (failed drive recorded), second half: "), "{stdout}");
        } else {
            assert!(stdout.contains(&format!("verify after a second stop and start: {written} ok")), "{stdout}");
        }
    }
}

/// simulate refuses to fail more drives than the array has (--fail 100 was accepted and
/// said "100 failed drive(s)"), and says up front when the read is meant to fail.
#[test]
fn simulate_fails_only_drives_it_has() {
    let world = World::new();
    let stderr = world.refused(&["simulate", "--size", "1M", "--fail", "100"]);
    assert!(stderr.contains("--fail 100: the array has only 4 drives to fail"), "{stderr}");
    let stdout = world.ok(&["simulate", "--size", "1M", "--fail", "2"]);
    assert!(
        stdout
            .contains("failing 2 drives, more than the 1 RAID-5 (3+1) survives: the degraded read is expected to fail"),
        "{stdout}"
    );
}
