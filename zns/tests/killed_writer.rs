//! A process writing to a drive file is killed with SIGKILL mid-I/O; the reopened drive
//! must hold every acknowledged block and pass the post-crash checks and the whole suite.
//! In a test binary of its own: a spawned child inherits, until it execs, every file the
//! parent has open, and with it their locks, which would upset other tests' drives.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command as Process, Stdio};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use zapraid_zns::conformance::{self, Report};
use zapraid_zns::{EmulatedDrive, Geometry};

mod crash_workload;
use crash_workload::{crash_workload, verify_crash_block};

/// Tracks the child's acknowledged extent per zone; true for an acknowledgement.
fn note_event(line: &str, acked: &mut HashMap<u32, u64>) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["acked", zone, end] => {
            let (zone, end): (u32, u64) = (zone.parse().unwrap(), end.parse().unwrap());
            let e = acked.entry(zone).or_default();
            *e = (*e).max(end);
            true
        }
        // Printed before a reset is submitted: from here acknowledged blocks may be erased.
        ["resetting"] => {
            acked.clear();
            false
        }
        _ => false, // test-harness chatter
    }
}

fn assert_passed(what: &str, report: &Report) {
    assert!(report.passed(), "{what}:\n{report}");
}

/// Run as a child process by `killed_writer_leaves_a_consistent_drive_file`: writes to
/// the drive file named by ZAPRAID_CRASH_DRIVE until killed.
#[test]
#[ignore = "child process of killed_writer_leaves_a_consistent_drive_file"]
fn crash_child_writer() {
    let path = std::env::var("ZAPRAID_CRASH_DRIVE").expect("run by the crash test");
    let seed: u64 = std::env::var("ZAPRAID_CRASH_SEED").unwrap().parse().unwrap();
    let mut drive = EmulatedDrive::open_file(path.as_ref()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut stdout = std::io::stdout();
    crash_workload(&mut drive, &mut rng, usize::MAX, |event| {
        use std::io::Write;
        writeln!(stdout, "{event}").unwrap();
        stdout.flush().unwrap();
    });
}

#[test]
fn killed_writer_leaves_a_consistent_drive_file() {
    let dir = tempfile::tempdir().unwrap();
    let geometry = Geometry::small(8, 32, 30);
    for seed in 0..6u64 {
        let path = dir.path().join(format!("k{seed}.zns"));
        drop(EmulatedDrive::create_file(&path, geometry, seed).unwrap());
        let mut child = Process::new(std::env::current_exe().unwrap())
            .args(["--exact", "crash_child_writer", "--ignored", "--nocapture", "--test-threads=1"])
            .env("ZAPRAID_CRASH_DRIVE", &path)
            .env("ZAPRAID_CRASH_SEED", seed.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let kill_after = 50 + seed as usize * 97;
        let mut acked: HashMap<u32, u64> = HashMap::new();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut seen = 0;
        while seen < kill_after {
            let line = lines.next().expect("child ended early").unwrap();
            seen += usize::from(note_event(&line, &mut acked));
        }
        child.kill().unwrap(); // SIGKILL: no destructor, no flush, mid-I/O
        child.wait().unwrap();
        // The child ran on until the signal landed: what it said meanwhile (more acks, or a
        // reset that legitimately erased acknowledged blocks) is still in the pipe.
        for line in lines.map_while(Result::ok) {
            note_event(&line, &mut acked);
        }
        let mut drive = EmulatedDrive::open_file(&path).unwrap();
        for (zone, end) in &acked {
            let z = drive.zones()[*zone as usize];
            assert!(z.written_blocks() >= *end, "seed {seed}: zone {zone} lost acknowledged blocks: {z:?} < {end}");
        }
        let report = conformance::check_after_crash_then_run(&mut drive, &mut |_, d, m| verify_crash_block(d, m));
        assert_passed(&format!("killed writer, seed {seed}"), &report);
    }
}
