//! The `zapraid` binary as a user runs it: emulated drives, their errors, the suite.

use std::process::{Command, Output};

fn zapraid(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zapraid")).args(args).output().expect("run zapraid")
}

/// Runs `zapraid` with its run directory (control sockets, logs) in `run_dir`.
fn zapraid_in(run_dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zapraid"))
        .args(args)
        .env("ZAPRAID_RUN_DIR", run_dir)
        .output()
        .expect("run zapraid")
}

fn text(output: &Output) -> (String, String) {
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

#[test]
fn create_info_and_conformance() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("drives");
    let d = d.to_str().unwrap();
    let out = zapraid(&[
        "emu",
        "create",
        "--dir",
        d,
        "--drives",
        "3",
        "--zones",
        "20",
        "--zone-size",
        "256K",
        "--zone-capacity",
        "240K",
    ]);
    assert!(out.status.success(), "{:?}", text(&out));
    let out = zapraid(&["emu", "info", d]);
    let (stdout, _) = text(&out);
    assert!(out.status.success());
    assert_eq!(stdout.lines().filter(|l| l.ends_with(".zns")).count(), 3, "{stdout}");
    assert!(stdout.contains("20 zones x 256 KiB (capacity 240 KiB)"), "{stdout}");
    // Creating over existing drives is refused and names the file.
    let out = zapraid(&["emu", "create", "--dir", d, "--drives", "1"]);
    assert!(!out.status.success());
    assert!(text(&out).1.contains("drive0.zns already exists"), "{:?}", text(&out));
    // The suite only runs when erasing is confirmed, then passes.
    let out = zapraid(&["device", "conformance", d]);
    assert!(!out.status.success() && text(&out).1.contains("--erase"));
    let drive = format!("{d}/drive1.zns");
    let out = zapraid(&["device", "conformance", &drive, "--erase"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("0 failed"), "{stdout}");
}

#[test]
fn clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let out = zapraid(&["emu", "info", missing.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(text(&out).1.contains("does not exist"), "{:?}", text(&out));

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = zapraid(&["emu", "info", empty.to_str().unwrap()]);
    assert!(text(&out).1.contains("holds no emulated drives"), "{:?}", text(&out));

    let foreign = dir.path().join("foreign.zns");
    std::fs::write(&foreign, b"not a drive at all, just text").unwrap();
    let out = zapraid(&["emu", "info", foreign.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(text(&out).1.contains("not a zapraid emulated drive file"), "{:?}", text(&out));

    let d = dir.path().join("bad");
    for (args, expect) in [
        (vec!["--zone-capacity", "65M"], "zone capacity"),
        (vec!["--block-size", "3000"], "3000-byte blocks"),
        (vec!["--zone-size", "4X"], "unknown size suffix"),
        (vec!["--max-open", "20"], "max open zones (20) cannot exceed max active zones (14)"),
        (vec!["--zones", "0"], "at least one zone"),
    ] {
        let mut all = vec!["emu", "create", "--dir", d.to_str().unwrap()];
        all.extend(args.iter());
        let out = zapraid(&all);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(text(&out).1.contains(expect), "{args:?}: {:?}", text(&out));
        assert!(!text(&out).1.contains("panicked"), "{args:?} panicked");
    }
    assert!(!d.join("drive0.zns").exists(), "a refused geometry left a drive file behind");
}

#[test]
fn help_explains() {
    let out = zapraid(&["emu", "create", "--help"]);
    let (stdout, _) = text(&out);
    assert!(stdout.contains("--zone-capacity") && stdout.contains("sparse"), "{stdout}");
}

#[test]
fn start_help_gives_the_default_queues_and_zero_queues_are_refused() {
    let out = zapraid(&["start", "--help"]);
    let (stdout, _) = text(&out);
    let most = format!("at most {}", zapraid_server::export::ublk::MAX_DEFAULT_QUEUES);
    assert!(stdout.contains("one per core by default") && stdout.contains(&most), "{stdout}");
    for bad in [["--queues", "0"], ["--queue-depth", "0"]] {
        let out = zapraid(&["start", bad[0], bad[1], "--no-device", "/nonexistent"]);
        let (_, stderr) = text(&out);
        assert!(!out.status.success() && stderr.contains(bad[0]), "{bad:?}: {stderr}");
    }
}

#[test]
fn simulate_verifies_degraded_reads_and_refuses_wrong_data() {
    let out = zapraid(&["simulate", "--level", "raid6", "--drives", "5", "--size", "2M", "--fail", "2"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("array: RAID-6 (3+2), ZapRAID G=256, 4 KiB chunks"), "{stdout}");
    assert!(stdout.contains("every block verified"), "{stdout}");
    let out = zapraid(&["simulate", "--level", "raid5", "--size", "1M", "--fail", "2", "--mode", "zone-write"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("exceed the 1 the level tolerates"), "{stdout}");
    let out = zapraid(&["simulate", "--level", "raid6", "--drives", "5", "--size", "2M", "--fail", "1", "--crash"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("acknowledged overwritten blocks hold their new contents"), "{stdout}");
    let out = zapraid(&["simulate", "--level", "raid5", "--drives", "2"]);
    assert!(!out.status.success());
    assert!(text(&out).1.contains("at least 3 drives"), "{:?}", text(&out));
}

/// Arrays on drive files: format (and its refusals), start in the background without a
/// block device (drives in another order), status --json, fail, stop, inspect.
#[test]
fn format_start_status_fail_stop_inspect() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let cli = |args: &[&str]| zapraid_in(&run_dir, args);
    let d = dir.path().join("d");
    let bare = dir.path().join("bare");
    let (d, bare) = (d.to_str().unwrap(), bare.to_str().unwrap());
    let create = |dir: &str, metadata: &str| {
        let out = cli(&["emu", "create", "--dir", dir, "--drives", "4", "--zones", "12", "--zone-size", "512K"]
            .iter()
            .copied()
            .chain(["--zone-capacity", "480K", "--metadata", metadata])
            .collect::<Vec<_>>());
        assert!(out.status.success(), "{:?}", text(&out));
    };
    create(d, "64");
    create(bare, "0");
    let drives: Vec<String> = (0..4).map(|i| format!("{d}/drive{i}.zns")).collect();
    let drives: Vec<&str> = drives.iter().map(String::as_str).collect();
    // A drive without per-block metadata is refused with the reason.
    let bare_drives: Vec<String> = (0..4).map(|i| format!("{bare}/drive{i}.zns")).collect();
    let mut args = vec!["format", "--level", "raid5"];
    args.extend(bare_drives.iter().map(String::as_str));
    let out = cli(&args);
    assert!(!out.status.success() && text(&out).1.contains("per-block metadata"), "{:?}", text(&out));
    let mut args = vec!["format", "--level", "raid5", "--group-size", "8", "--name", "t1"];
    args.extend(&drives);
    let out = cli(&args);
    assert!(out.status.success(), "{:?}", text(&out));
    assert!(text(&out).0.contains("RAID-5 (3+1), ZapRAID G=8, 4 KiB chunks"), "{:?}", text(&out));
    // Formatting members of an array again needs --force.
    let out = cli(&args);
    assert!(!out.status.success() && text(&out).1.contains("--force"), "{:?}", text(&out));
    let mut args = vec!["start", "--daemon", "--no-device"];
    args.extend(drives.iter().rev());
    let out = cli(&args);
    assert!(out.status.success(), "{:?}", text(&out));
    let out = cli(&["status", "t1", "--json"]);
    assert!(out.status.success(), "{:?}", text(&out));
    let status: serde_json::Value = serde_json::from_str(&text(&out).0).expect("status --json is JSON");
    assert_eq!(status["state"], "optimal");
    assert_eq!(status["drives"].as_array().unwrap().len(), 4);
    assert_eq!(status["drives"][0]["path"], drives[0], "drives listed in array order");
    for field in ["capacity", "segments", "io", "latency_us", "level", "uuid"] {
        assert!(!status[field].is_null(), "status lacks {field}: {status}");
    }
    // The level and mode by name and number, for programs.
    assert_eq!(
        (&status["level"], &status["data_drives"], &status["parity_drives"], &status["mode"], &status["group_size"]),
        (
            &serde_json::json!("raid5"),
            &serde_json::json!(3),
            &serde_json::json!(1),
            &serde_json::json!("zapraid"),
            &serde_json::json!(8)
        ),
        "{status}"
    );
    // And in words for people.
    let out = cli(&["status", "t1"]);
    let (stdout, _) = text(&out);
    assert!(out.status.success() && stdout.contains("RAID-5 (3+1), ZapRAID G=8"), "{stdout}");
    let out = cli(&["fail", "t1", drives[2]]);
    assert!(out.status.success(), "{:?}", text(&out));
    let out = cli(&["status", "t1", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&text(&out).0).unwrap();
    assert_eq!((status["state"].as_str(), status["drives"][2]["state"].as_str()), (Some("degraded"), Some("failed")));
    // Every running array, found by probing the sockets.
    let out = cli(&["status"]);
    assert!(out.status.success() && text(&out).0.contains("t1: degraded"), "{:?}", text(&out));
    // The daemon logs the failure to its log file as plain text, and nothing about the
    // probe.
    let log = std::fs::read_to_string(run_dir.join("t1.log")).unwrap();
    assert!(log.contains("drive marked failed") && !log.contains("\x1b["), "daemon log: {log:?}");
    assert!(!log.contains("control connection"), "daemon log: {log:?}");
    let out = cli(&["stop", "t1"]);
    assert!(out.status.success(), "{:?}", text(&out));
    let out = cli(&["status", "t1"]);
    assert!(!out.status.success(), "a stopped array still answers");
    let out = cli(&["inspect", drives[1]]);
    let (stdout, _) = text(&out);
    assert!(out.status.success() && stdout.contains("drive 1 of 4, RAID-5 (3+1), ZapRAID G=8"), "{stdout}");
    // Zone states in words, no Rust debug forms ("ImplicitlyOpen", "Raid5 { drives: 4 }").
    assert!(stdout.contains(" empty ") && !stdout.contains("Empty") && !stdout.contains('{'), "{stdout}");
    // The engine end to end on the same files (it formats them again).
    let mut args = vec!["selftest", "--size", "2M"];
    args.extend(&drives);
    let out = cli(&args);
    assert!(!out.status.success() && text(&out).1.contains("--erase"), "selftest erases only when told");
    args.push("--erase");
    let out = cli(&args);
    assert!(out.status.success() && text(&out).0.contains("selftest passed"), "{:?}", text(&out));
}

/// Creates four small drive files in `dir` and returns their paths.
fn small_drives(dir: &std::path::Path) -> Vec<String> {
    let d = dir.to_str().unwrap();
    let out = zapraid(
        &["emu", "create", "--dir", d, "--drives", "4", "--zones", "12", "--zone-size", "512K"]
            .iter()
            .copied()
            .chain(["--zone-capacity", "480K"])
            .collect::<Vec<_>>(),
    );
    assert!(out.status.success(), "{:?}", text(&out));
    (0..4).map(|i| format!("{d}/drive{i}.zns")).collect()
}

/// Log lines written to a pipe are plain text: the self-test marks a drive failed, which
/// the engine thread logs as a warning on stderr (here a pipe, not a terminal).
#[test]
fn logs_to_a_pipe_carry_no_colour_escapes() {
    let dir = tempfile::tempdir().unwrap();
    let drives = small_drives(dir.path());
    let mut args = vec!["selftest", "--size", "1M", "--erase"];
    args.extend(drives.iter().map(String::as_str));
    let out = zapraid(&args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("formatted RAID-5 (3+1) over 4 drives"), "{stdout}");
    assert!(stderr.contains("drive marked failed"), "the warning is not logged: {stderr:?}");
    assert!(!stderr.contains("\x1b["), "colour escapes in piped log lines: {stderr:?}");
}

/// A drive another server holds: the error names it once (not once per layer), whether
/// it is formatted or started again.
#[test]
fn a_drive_in_use_is_named_once() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let cli = |args: &[&str]| zapraid_in(&run_dir, args);
    let drives = small_drives(&dir.path().join("d"));
    let drives: Vec<&str> = drives.iter().map(String::as_str).collect();
    let mut args = vec!["format", "--level", "raid5", "--name", "inuse"];
    args.extend(&drives);
    let out = cli(&args);
    assert!(out.status.success(), "{:?}", text(&out));
    let mut args = vec!["start", "--daemon", "--no-device"];
    args.extend(&drives);
    let out = cli(&args);
    assert!(out.status.success(), "{:?}", text(&out));
    let mut again = vec!["start", "--no-device"];
    again.extend(&drives);
    let mut reformat = vec!["format", "--force", "--level", "raid5", "--name", "other"];
    reformat.extend(&drives);
    let results: Vec<Output> = [again, reformat].iter().map(|args| cli(args)).collect();
    let out = cli(&["stop", "inuse"]);
    assert!(out.status.success(), "{:?}", text(&out));
    for out in results {
        let (_, stderr) = text(&out);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains("drive is in use by another process"), "{stderr}");
        assert_eq!(stderr.matches("drive0.zns").count(), 1, "the drive is named more than once: {stderr}");
    }
}

/// The same drive named twice is said as such, not taken for a drive another process
/// holds (the second open meeting the first's lock).
#[test]
fn a_drive_given_twice_is_refused_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let cli = |args: &[&str]| zapraid_in(&run_dir, args);
    let drives = small_drives(dir.path());
    let d1 = drives[1].as_str();
    let repeated = [drives[0].as_str(), d1, d1, drives[2].as_str()];
    let mut format = vec!["format", "--level", "raid5"];
    format.extend(&repeated);
    let out = cli(&format);
    let refused = |out: &Output, args: &[&str], said: String| {
        let (_, stderr) = text(out);
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(stderr.contains(&said), "{args:?}: {stderr}");
        assert!(!stderr.contains("in use"), "{args:?}: {stderr}");
    };
    refused(&out, &format, format!("drive {d1} given twice"));
    let mut all = vec!["format", "--level", "raid5", "--name", "twice"];
    all.extend(drives.iter().map(String::as_str));
    let out = cli(&all);
    assert!(out.status.success(), "{:?}", text(&out));
    // Another spelling of the same file is the same drive.
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let d1_again = format!("{}/sub/../drive1.zns", dir.path().display());
    let start = ["start", "--no-device", drives[0].as_str(), d1, drives[2].as_str(), &d1_again];
    let mut daemon = vec!["start", "--daemon", "--no-device"];
    daemon.extend(&repeated);
    let out = cli(&start);
    refused(&out, &start, format!("drive {d1_again} given twice (also as {d1})"));
    let out = cli(&daemon);
    refused(&out, &daemon, format!("drive {d1} given twice"));
}

/// The self-test fills the array to its advertised size (it clamps
/// --size to it), stops and starts it, overwrites half degraded, and restarts again. At
/// every level the report named, over tiny drives (16 zones of 960 KiB), the array must
/// never report itself full. The runs go at once: the load makes partial stripes time out
/// and be padded, which used to fill the drives before garbage collection was considered.
#[test]
fn selftest_fills_tiny_arrays_without_locking_up() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("raid5", 3, 16),
        ("raid5", 3, 32),
        ("raid5", 3, 64),
        ("raid4", 3, 16),
        ("raid6", 4, 16),
        ("raid6", 6, 16),
        ("raid1", 3, 16),
        ("raid1", 5, 16),
        ("raid01", 4, 16),
    ];
    let runs: Vec<_> = cases
        .iter()
        .map(|&(level, drives, zones)| {
            let d = dir.path().join(format!("{level}-{drives}-{zones}"));
            std::thread::spawn(move || {
                let d = d.to_str().unwrap();
                let (drives, zones) = (drives.to_string(), zones.to_string());
                let out = zapraid(&[
                    "emu",
                    "create",
                    "--dir",
                    d,
                    "--drives",
                    &drives,
                    "--zones",
                    &zones,
                    "--zone-size",
                    "1M",
                    "--zone-capacity",
                    "960K",
                ]);
                assert!(out.status.success(), "{:?}", text(&out));
                let paths: Vec<String> = (0..drives.parse().unwrap()).map(|i| format!("{d}/drive{i}.zns")).collect();
                let mut args = vec!["selftest", "--erase", "--level", level, "--size", "1G"];
                args.extend(paths.iter().map(String::as_str));
                let out = zapraid(&args);
                let (stdout, stderr) = text(&out);
                assert!(
                    out.status.success() && stdout.contains("selftest passed"),
                    "{level} over {drives} drives of {zones} zones: {stdout}{stderr}"
                );
            })
        })
        .collect();
    for run in runs {
        run.join().expect("a self-test run failed");
    }
}

/// Drives whose open or active zone limits cannot hold what the array
/// writes at once are refused by format (and start), naming the drive and the limit;
/// drives with just enough pass the self-test.
#[test]
fn drives_with_too_few_open_or_active_zones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let create = |name: &str, limits: &[&str]| -> Vec<String> {
        let d = dir.path().join(name);
        let d = d.to_str().unwrap();
        let mut args = vec!["emu", "create", "--dir", d, "--drives", "4", "--zones", "16", "--zone-size", "512K"];
        args.extend(["--zone-capacity", "480K"]);
        args.extend(limits);
        let out = zapraid(&args);
        assert!(out.status.success(), "{limits:?}: {:?}", text(&out));
        (0..4).map(|i| format!("{d}/drive{i}.zns")).collect()
    };
    for (name, limits, expect) in [
        ("active1", &["--max-open", "1", "--max-active", "1"][..], "it allows 1 open zone; 1 open segment needs 2 ("),
        (
            "active2",
            &["--max-open", "2", "--max-active", "2"][..],
            "it allows 2 active zones; 1 open segment needs 2 (+1 for the superblock zone): 1 short",
        ),
    ] {
        let drives = create(name, limits);
        let mut args = vec!["format", "--level", "raid5"];
        args.extend(drives.iter().map(String::as_str));
        let out = zapraid(&args);
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{limits:?} accepted: {stdout}");
        assert!(stderr.contains(expect) && stderr.contains("drive0.zns"), "{limits:?}: {stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("Some("), "{limits:?}: {stderr}");
    }
    // Just enough: formats, writes, restarts and runs degraded.
    let drives = create("enough", &["--max-open", "2", "--max-active", "3"]);
    let mut args = vec!["selftest", "--erase", "--level", "raid5", "--size", "4M"];
    args.extend(drives.iter().map(String::as_str));
    let out = zapraid(&args);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success() && stdout.contains("selftest passed"), "{stdout}{stderr}");
}

/// Every rate option reads rates alike (`size::parse_rate`): the same units and suffixes,
/// "unlimited", and the same words for a rate it cannot read.
#[test]
fn scrub_and_rebuild_rates_are_read_alike() {
    let run = tempfile::tempdir().unwrap();
    let ways = |rate: &'static str| {
        [
            vec!["scrub", "nosuch", "--rate", rate],
            vec!["scrub", "nosuch", "--set-rate", rate],
            vec!["rebuild-rate", "nosuch", rate],
        ]
    };
    for rate in ["200M", "200MiB/s", "1g", "unlimited", "0"] {
        for args in ways(rate) {
            // Read, then refused only because no array "nosuch" runs.
            let (_, err) = text(&zapraid_in(run.path(), &args));
            assert!(err.contains("nosuch") && !err.contains("invalid value"), "{args:?}: {err}");
        }
    }
    let why = |args: &[&str]| {
        let (_, err) = text(&zapraid_in(run.path(), args));
        let line = err.lines().find(|l| l.contains("invalid value")).unwrap_or_else(|| panic!("{args:?}: {err}"));
        line.split_once("': ").map(|(_, why)| why.to_string()).unwrap()
    };
    let said: Vec<String> = ways("fast").iter().map(|args| why(args)).collect();
    assert!(said.iter().all(|w| *w == said[0]), "{said:#?}");
    assert!(said[0].contains("unlimited"), "{}", said[0]);
}
