//! `zapraid replay` in wall time: onto a stopped array's drive files (the engine in the
//! replaying process) and onto a block device or file with direct I/O. Every format, in
//! closed and open loop; the array starts afterwards and a scrub finds it clean.

mod common;

use std::path::Path;

use common::serial;
use common::traces::{one_of_each_format, PACINGS, SAMPLE};
use common::world::World;
use serde_json::Value;

fn replay_json(world: &World, trace: &Path, target: &[&str], pacing: &[&str]) -> Value {
    let mut args = vec!["replay", trace.to_str().unwrap(), "--json"];
    args.extend_from_slice(target);
    args.extend_from_slice(pacing);
    serde_json::from_str(&world.ok(&args)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_format_replays_onto_drive_files_and_the_array_scrubs_clean() {
    let _serial = serial();
    let world = World::new("raid5", 4, 12, 0);
    let dir = tempfile::tempdir().unwrap();
    let mut on_drives = vec!["--on-drives"];
    on_drives.extend(world.drives.iter().map(String::as_str));
    for (path, format, requests) in one_of_each_format(dir.path()) {
        for pacing in PACINGS {
            let report = replay_json(&world, &path, &on_drives, pacing);
            assert_eq!(report["trace"]["format"], format, "{path:?} {pacing:?}");
            assert_eq!(report["requests"], requests, "{path:?} {pacing:?}: {report}");
            assert_eq!(report["target"], "drives");
            assert!(report["gc"]["user_blocks_written"].as_u64().is_some(), "{report}");
            // The engine runs behind a session here: it cannot tell which blocks were written.
            assert!(report["reads_of_unwritten_blocks"].is_null(), "{report}");
            assert!(report["prefill"].is_null(), "no prefill unless asked for: {report}");
        }
    }
    let mut prefilled = on_drives.clone();
    prefilled.push("--prefill");
    let report = replay_json(&world, Path::new(SAMPLE), &prefilled, PACINGS[0]);
    assert!(report["prefill"]["blocks"].as_u64().unwrap() > 0, "{report}");
    let mut sized = on_drives.clone();
    sized.extend(["--utilization", "0.8"]);
    let mut args = vec!["replay", SAMPLE];
    args.extend(&sized);
    let refused = world.refused(&args);
    assert!(refused.contains("--utilization sizes the simulated array"), "{refused}");
    world.start(&[], &[]);
    let said = world.ok(&["scrub", "rp", "--wait"]);
    assert!(said.contains("0 damaged blocks, 0 parity mismatches"), "{said}");
    world.ok(&["stop", "rp"]);
    // A running array's drives are refused, not written behind its back.
    world.start(&[], &[]);
    let mut args = vec!["replay", SAMPLE];
    args.extend(&on_drives);
    let refused = world.refused(&args);
    assert!(refused.contains("in use") || refused.contains("running"), "{refused}");
}

#[test]
fn a_trace_replays_onto_a_file_with_direct_io() {
    let world_dir = tempfile::tempdir().unwrap();
    let device = world_dir.path().join("device.img");
    std::fs::File::create(&device).unwrap().set_len(64 << 20).unwrap();
    let device = device.to_str().unwrap();
    let run_dir = tempfile::tempdir().unwrap();
    for pacing in PACINGS {
        let mut args = vec!["replay", SAMPLE, "--json", "--device", device];
        args.extend_from_slice(pacing);
        let out = common::zapraid_in(run_dir.path(), &args);
        assert!(out.status.success(), "{}", common::text(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!((report["target"].as_str(), report["requests"].as_u64()), (Some("device"), Some(13)), "{report}");
        assert!(report["gc"].is_null(), "a block device does not show garbage collection: {report}");
        assert!(report["reads_of_unwritten_blocks"].is_null(), "a block device cannot tell: {report}");
    }
}

/// With a member missing, replay onto the drives refuses as `start` does, and the advice it
/// gives (add --degraded) works: replay takes it, and the array runs degraded afterwards.
#[test]
fn a_replay_onto_drives_with_a_member_missing_takes_the_degraded_it_advises() {
    let _serial = serial();
    let world = World::new("raid5", 4, 12, 0);
    let present = world.without(&[3]);
    let mut args = vec!["replay", SAMPLE, "--on-drives"];
    args.extend(present.iter().map(String::as_str));
    let refused = world.refused(&args);
    assert!(refused.contains("add --degraded"), "{refused}");
    args.push("--degraded");
    let said = world.ok(&args);
    assert!(said.contains("requests"), "{said}");
    world.start(&[], &[3]);
    assert_eq!(world.status()["drives"][3]["state"], "failed", "{}", world.status());
    world.ok(&["stop", "rp"]);
}
