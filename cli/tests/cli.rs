//! The `zapraid` binary as a user runs it: emulated drives, their errors, the suite.

use std::process::{Command, Output};

fn zapraid(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zapraid")).args(args).output().expect("run zapraid")
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
fn simulate_verifies_degraded_reads_and_refuses_wrong_data() {
    let out = zapraid(&["simulate", "--level", "raid6", "--drives", "5", "--size", "2M", "--fail", "2"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
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
