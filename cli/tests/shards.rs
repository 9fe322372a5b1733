//! Arrays of engine shards as an operator drives them: `format --shards`, a start that
//! takes the shard count from the superblock (and refuses `--shards` of another), `status`
//! with each shard's figures beside their sum, `inspect` naming each zone's shard, a failed drive
//! replaced and rebuilt by every shard, and a rebuild cut short by a stop resumed.

mod common;

use common::serial;
use common::world::World;

#[test]
fn an_array_of_two_shards_starts_shows_each_and_refuses_another_count() {
    let _serial = serial();
    let mut world = World::formatted("raid5", 4, 40, 2400, &["--shards", "2"]);
    let blocks = world.write_and_verify(Some(1), 1).mapped_blocks;
    assert!(blocks > 0);
    let line = world.superblock_line(0);
    assert!(line.contains("2 engine shards in units of 128 blocks"), "{line}");
    let inspect = world.ok(&["inspect", &world.drives[0]]);
    assert!(inspect.contains("shard 0: sequence 1") && inspect.contains("shard 1: sequence 1"), "{inspect}");

    let mut refused = vec!["start", "--no-device", "--shards", "3"];
    refused.extend(world.drives.iter().map(String::as_str));
    let said = world.refused(&refused);
    assert!(said.contains("formatted with 2 engine shards") && said.contains("cannot start with 3"), "{said}");

    world.start(&["--shards", "2"], &[]);
    let s = world.status();
    assert_eq!(s["shard_count"], 2, "{s}");
    let shards = s["shards"].as_array().expect("each shard's figures");
    assert_eq!(shards.len(), 2, "{s}");
    let used: u64 = shards.iter().map(|x| x["used_bytes"].as_u64().unwrap()).sum();
    assert_eq!(used, s["capacity"]["used_bytes"].as_u64().unwrap(), "the sum of the shards': {s}");
    let human = world.ok(&["status", "rp"]);
    assert!(human.contains("    shard 0: ") && human.contains("    shard 1: "), "{human}");

    world.ok(&["fail", "rp", "1"]);
    world.ok(&["stop", "rp"]);
    // The failure is on the drives: a start without drive 1 needs no --degraded.
    world.start(&[], &[1]);
    assert_eq!(world.status()["drives"][1]["state"], "failed");
    world.ok(&["stop", "rp"]);
    let read = world.without(&[1]);
    assert_eq!(common::world::write_and_verify(&read, world.blocks, None, 1).mapped_blocks, blocks);

    // Replaced: every shard rebuilds its part of the new drive; slowly, so a stop cuts the
    // rebuild short and a start resumes it in every shard.
    world.start(&[], &[1]);
    let new = world.new_drive("new1");
    world.ok(&["replace", "rp", "1", &new, "--rebuild-rate", "64K"]);
    let s = world.status();
    assert_eq!(s["drives"][1]["state"], "rebuilding", "{s}");
    assert_eq!(s["rebuild_rate_bytes_per_s"], 64 << 10, "the array's rate, shared by its shards: {s}");
    world.ok(&["stop", "rp"]);
    world.drives[1] = new;
    world.start(&[], &[]);
    world.ok(&["rebuild-rate", "rp", "unlimited"]);
    world.wait_rebuilt(1);
    // Whole again: every block reads back with drive 0 failed (drive 1's from the new drive).
    world.ok(&["fail", "rp", "0"]);
    world.ok(&["stop", "rp"]);
    let read = world.without(&[0]);
    assert_eq!(common::world::write_and_verify(&read, world.blocks, None, 1).mapped_blocks, blocks);
}

/// A hot spare of a sharded array: a drive that fails is rebuilt onto it by itself, by
/// every shard; a scrub then reads every shard's stripes and finds them whole.
#[test]
fn a_sharded_array_rebuilds_onto_its_spare_by_itself_and_scrubs_clean() {
    let _serial = serial();
    let mut world = World::formatted("raid5", 4, 40, 2400, &["--shards", "2"]);
    let blocks = world.write_and_verify(Some(1), 1).mapped_blocks;
    let spare = world.new_drive("spare");
    world.start(&[], &[]);
    world.ok(&["add-spare", "rp", &spare]);
    world.ok(&["fail", "rp", "2"]);
    world.wait_rebuilt(2);
    let s = world.status();
    assert_eq!(s["drives"][2]["path"], spare.as_str(), "{s}");
    world.scrub_clean();
    world.ok(&["stop", "rp"]);
    world.drives[2] = spare;
    assert_eq!(world.write_and_verify(None, 1).mapped_blocks, blocks);
}
