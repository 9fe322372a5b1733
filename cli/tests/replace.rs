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

use std::time::{Duration, Instant};

mod common;
use common::serial;
use common::world::World;

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
    assert!(log.contains("the rebuild cut short starts again from the beginning"), "{log}");
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
