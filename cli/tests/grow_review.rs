//! A review of `zapraid grow` (issue 35 item 3) as an operator drives it: cases
//! `declustered.rs` leaves out, each pinned once found.

mod common;

use std::time::{Duration, Instant};

use common::serial;
use common::world::World;

/// Polls `status` until no zone index is left in the earlier placement.
fn wait_grown(world: &World) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = world.status();
        if s["declustered"]["zone_indexes_to_grow"] == 0 {
            return s;
        }
        assert!(Instant::now() < deadline, "the grow did not end: {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A grown array with a bounded L2P table: `status` counts the zones it may use (free of
/// them), the clean stop leaves a checkpoint a start on all 12 drives uses, and every
/// block reads back.
#[test]
fn a_grown_array_with_a_bounded_table_stops_and_starts_from_its_checkpoint() {
    let _serial = serial();
    let args = ["--stripe-width", "5", "--distributed-spares", "1", "--l2p-memory", "8K"];
    let mut world = World::formatted("raid5", 8, 40, 6000, &args);
    let status = world.write_and_verify(Some(1), 1);
    assert!(status.l2p.pages_on_drives > 0, "no page was written back: {:?}", status.l2p);
    world.start(&[], &[]);
    let s = world.status();
    let before = s["capacity"]["zones"].as_u64().expect("zones");
    let new: Vec<String> = (8..12).map(|i| world.new_drive(&format!("new{i}"))).collect();
    let mut grow = vec!["grow", "rp"];
    grow.extend(new.iter().map(String::as_str));
    world.ok(&grow);
    world.drives.extend(new.iter().cloned());
    let s = wait_grown(&world);
    // 8 drives of 4+1 and a spare: one segment per zone index; 12: two.
    let zones = s["capacity"]["zones"].as_u64().expect("zones");
    assert_eq!(zones, 2 * before, "the zones the grown array uses: {s}");
    let human = world.ok(&["status", "rp"]);
    assert!(human.contains(&format!(" free of {zones}; ")), "{human}");
    world.ok(&["stop", "rp"]);

    let status = world.write_and_verify(None, 1);
    assert!(status.start.checkpoint_generation.is_some(), "the start did not use the checkpoint: {:?}", status.start);
    let status = world.write_and_verify(Some(2), 2);
    assert!(status.start.checkpoint_generation.is_some(), "the start did not use the checkpoint: {:?}", status.start);
}
