//! Declustered arrays as an operator drives them (issue 35): `format --stripe-width` over
//! more drives than a stripe, with distributed spares; a failed drive rebuilt into the
//! spare space of the others without a new drive while the array runs; a second failure
//! taken the same way; every block read back with both drives gone; a new drive in the
//! first one's place, which new segments use at once, and the segments in spare space
//! moved back (the rebalance) while blocks are written again.

mod common;

use std::time::{Duration, Instant};

use common::serial;
use common::world::{write_and_verify, World};

/// Polls `status` until no rebuild runs and `drive` is recorded in spare space; returns
/// the human status then.
fn wait_in_spare_space(world: &World, drive: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let s = world.status();
        let spared = s["declustered"]["drives_in_spare_space"].as_array().cloned().unwrap_or_default();
        if s["rebuild"].is_null() && spared.contains(&drive.into()) {
            assert_eq!(s["drives"][drive]["state"], "failed", "{s}");
            assert_eq!(s["drives"][drive]["in_spare_space"], true, "{s}");
            assert_eq!(s["declustered"]["segments_beyond_parity"], 0, "{s}");
            return world.ok(&["status", "rp"]);
        }
        if !s["rebuild"].is_null() {
            assert_eq!(
                (s["rebuild"]["drive"].as_u64(), s["rebuild"]["into_spare_space"].as_bool()),
                (Some(drive as u64), Some(true)),
                "{s}"
            );
        }
        assert!(Instant::now() < deadline, "drive {drive} not rebuilt into spare space: {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn eight_drives_of_four_plus_one_lose_two_drives_into_spare_space_and_take_a_new_one() {
    let _serial = serial();
    let args = ["--stripe-width", "5", "--distributed-spares", "1"];
    let mut world = World::formatted("raid5", 8, 40, 2400, &args);
    let line = world.superblock_line(0);
    assert!(line.contains("drive 0 of 8, RAID-5 (4+1) declustered, 1 distributed spare(s)"), "{line}");
    let blocks = world.write_and_verify(Some(1), 1).mapped_blocks;
    assert!(blocks > 0);
    // Every drive holds segments: the stripes spread over all eight, each header naming
    // its segment and its lanes' drives.
    for drive in &world.drives {
        let inspect = world.ok(&["inspect", drive]);
        assert!(inspect.contains("sequence") && inspect.contains("(lanes on drives "), "{drive}: {inspect}");
    }

    world.start(&[], &[]);
    let s = world.status();
    assert_eq!((s["state"].as_str(), s["declustered"]["drives"].as_u64()), (Some("optimal"), Some(8)), "{s}");
    assert_eq!(s["declustered"]["spare_space_used"], false, "{s}");
    // One drive fails: its chunks are rebuilt into the others' spare zones, no new drive.
    world.ok(&["fail", "rp", "3"]);
    let human = wait_in_spare_space(&world, 3);
    assert!(human.contains(": optimal, spare space used ("), "{human}");
    assert!(human.contains("drive 3: ") && human.contains("failed (rebuilt into spare space)"), "{human}");
    assert!(human.contains("declustered: stripes of 5 over 8 drives"), "{human}");
    let s = world.status();
    assert_eq!((s["state"].as_str(), s["declustered"]["spare_space_used"].as_bool()), (Some("optimal"), Some(true)));
    // A second drive fails: no segment lacks two chunks, so it is taken, and rebuilt too.
    world.ok(&["fail", "rp", "6"]);
    wait_in_spare_space(&world, 6);
    assert!(world.refused(&["fail", "rp", "6"]).contains("drive 6 has failed already"));
    world.ok(&["stop", "rp"]);
    let line = world.superblock_line(0);
    assert!(line.ends_with("failed drives 3 and 6, in distributed spare space drives 3 and 6"), "{line}");

    // Every block reads back with both drives gone (recorded in spare space, they are
    // not needed: no start flag asked).
    let read = world.without(&[3, 6]);
    assert_eq!(write_and_verify(&read, world.blocks, None, 1).mapped_blocks, blocks);

    // A new drive in drive 3's place: it holds nothing to rebuild, serves at once, and
    // the segments written from then on use it.
    let said = world.start(&[], &[3, 6]);
    let line = "runs without drives it needs no more: drive 3 missing (its chunks in distributed spare space), \
                drive 6 missing (its chunks in distributed spare space)";
    assert!(said.contains(line), "{said}");
    let new = world.new_drive("new3");
    world.ok(&["replace", "rp", "3", &new]);
    world.wait_rebuilt(3);
    world.drives[3] = new;
    let s = world.status();
    assert_eq!(s["drives"][3]["state"], "ok", "{s}");
    assert_eq!(s["declustered"]["drives_in_spare_space"], serde_json::json!([6]), "{s}");
    // Nothing is written meanwhile: only the rebalance writes segments onto the new drive
    // (relocating those with a lane in spare space whose home it is).
    let deadline = Instant::now() + Duration::from_secs(60);
    while world.status()["declustered"]["segments_to_rebalance"] != 0 {
        assert!(Instant::now() < deadline, "the rebalance did not end: {}", world.status());
        std::thread::sleep(Duration::from_millis(20));
    }
    world.ok(&["stop", "rp"]);
    let inspect = world.ok(&["inspect", &world.drives[3]]);
    assert!(inspect.contains("sequence"), "the rebalance moved no segment onto the new drive: {inspect}");
    // The segments in spare space move back as garbage collection relocates them (the
    // rebalance), while blocks are written again and read back.
    let live = world.without(&[6]);
    let mut pass = 1;
    let spread = loop {
        pass += 1;
        let status = write_and_verify(&live, world.blocks, Some(pass), pass);
        assert_eq!(status.mapped_blocks, blocks);
        let spread = status.declustered.expect("a declustered array");
        if spread.segments_to_rebalance == 0 || pass == 6 {
            break spread;
        }
    };
    assert_eq!(spread.segments_to_rebalance, 0, "the rebalance did not end: {spread:?}");
    let inspect = world.ok(&["inspect", &world.drives[3]]);
    assert!(inspect.contains("sequence"), "the new drive holds no segment: {inspect}");
    assert_eq!(write_and_verify(&live, world.blocks, None, pass).mapped_blocks, blocks);
}

/// A hot spare of a declustered array (`add-spare`): a drive that fails is first rebuilt
/// into distributed spare space; then the hot spare takes its place by itself, the
/// segments in spare space move back onto it, and a scrub finds every stripe whole.
#[test]
fn a_hot_spare_takes_the_place_of_a_drive_rebuilt_into_spare_space() {
    let _serial = serial();
    let args = ["--stripe-width", "5", "--distributed-spares", "1"];
    let mut world = World::formatted("raid5", 8, 40, 2400, &args);
    let blocks = world.write_and_verify(Some(1), 1).mapped_blocks;
    let spare = world.new_drive("spare");
    world.start(&[], &[]);
    world.ok(&["add-spare", "rp", &spare]);
    world.ok(&["fail", "rp", "2"]);
    world.wait_rebuilt(2);
    let deadline = Instant::now() + Duration::from_secs(60);
    let s = loop {
        let s = world.status();
        if s["declustered"]["segments_to_rebalance"] == 0 {
            break s;
        }
        assert!(Instant::now() < deadline, "the rebalance did not end: {s}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!((s["drives"][2]["path"].as_str(), s["state"].as_str()), (Some(spare.as_str()), Some("optimal")), "{s}");
    assert_eq!(s["declustered"]["drives_in_spare_space"], serde_json::json!([]), "{s}");
    world.scrub_clean();
    world.ok(&["stop", "rp"]);
    world.drives[2] = spare;
    assert_eq!(world.write_and_verify(None, 1).mapped_blocks, blocks);
}

/// A declustered array with a bounded L2P table (`--l2p-memory`): pages written back as
/// mapping blocks, a drive rebuilt into spare space, every block read back after a stop
/// and a start from the checkpoint without that drive.
#[test]
fn a_declustered_array_keeps_its_l2p_table_within_a_budget() {
    let _serial = serial();
    // Six pages of 1,012 entries, two kept in memory.
    let args = ["--stripe-width", "5", "--distributed-spares", "1", "--l2p-memory", "8K"];
    let world = World::formatted("raid5", 8, 40, 6000, &args);
    let status = world.write_and_verify(Some(1), 1);
    assert!(status.l2p.pages_on_drives > 0, "no page was written back: {:?}", status.l2p);
    world.start(&[], &[]);
    world.ok(&["fail", "rp", "5"]);
    wait_in_spare_space(&world, 5);
    world.ok(&["stop", "rp"]);
    let read = world.without(&[5]);
    let status = write_and_verify(&read, world.blocks, None, 1);
    assert!(status.start.checkpoint_generation.is_some(), "the start did not use the checkpoint: {:?}", status.start);
}

/// A declustered array survives as its segments do: while the first failed drive's chunks
/// are being rebuilt (slowly, at a low rate limit: a segment or two at most rebuilt of
/// about a dozen), a second failure would leave segments two chunks short: refused, and
/// said why.
#[test]
fn a_failure_that_would_leave_segments_short_is_refused() {
    let _serial = serial();
    let world = World::formatted("raid5", 6, 40, 6000, &["--stripe-width", "5"]);
    world.write_and_verify(Some(1), 1);
    world.start(&["--rebuild-rate", "16K"], &[]);
    world.ok(&["fail", "rp", "2"]);
    let said = world.refused(&["fail", "rp", "4"]);
    assert!(said.contains("failing drive 4 would leave") && said.contains("add --force"), "{said}");
    let s = world.status();
    assert_eq!((s["state"].as_str(), s["rebuild"]["into_spare_space"].as_bool()), (Some("rebuilding"), Some(true)));
    world.ok(&["stop", "rp"]);
}

/// Shapes a declustered array cannot have are refused before any drive is written.
#[test]
fn impossible_declustered_shapes_are_refused() {
    let _serial = serial();
    let world = World::new("raid5", 6, 40, 2400);
    let mut args = vec!["format", "--level", "raid5", "--stripe-width", "5", "--distributed-spares", "2"];
    args.extend(world.drives.iter().map(String::as_str));
    let said = world.refused(&args);
    assert!(said.contains("distributed spare"), "{said}");
    let mut args = vec!["format", "--level", "raid5", "--stripe-width", "5", "--shards", "2"];
    args.extend(world.drives.iter().map(String::as_str));
    let said = world.refused(&args);
    assert!(said.contains("shard"), "{said}");
}

/// `zapraid grow` (issue 35 item 3): 8 drives of 4+1 with a distributed spare take 4 new
/// ones while the array runs. The superblock records the shape before; new segments use
/// the new drives at once and garbage collection moves the rest onto the new placement
/// with nothing else written; every block reads back on all 12 drives, after a restart,
/// and once a new drive failed and was rebuilt into spare space. Members, a drive named
/// twice and a classic array are refused.
#[test]
fn eight_drives_grow_to_twelve_while_running() {
    let _serial = serial();
    let args = ["--stripe-width", "5", "--distributed-spares", "1"];
    let mut world = World::formatted("raid5", 8, 40, 2400, &args);
    let blocks = world.write_and_verify(Some(1), 1).mapped_blocks;
    world.start(&[], &[]);
    assert_eq!(world.status()["declustered"]["placements"], 1);
    let new: Vec<String> = (8..12).map(|i| world.new_drive(&format!("new{i}"))).collect();
    let member = world.refused(&["grow", "rp", &new[0], &world.drives[2]]);
    assert!(member.contains("it is drive 2 of this array"), "{member}");
    let twice = world.refused(&["grow", "rp", &new[0], &new[0]]);
    assert!(twice.contains("it is named twice"), "{twice}");
    assert_eq!(world.status()["declustered"]["drives"], 8, "a refused grow changes nothing");

    let mut grow = vec!["grow", "rp"];
    grow.extend(new.iter().map(String::as_str));
    let said = world.ok(&grow);
    assert!(said.contains("grown to 12 drives (4 added)"), "{said}");
    world.drives.extend(new.iter().cloned());
    let s = world.status();
    assert_eq!((s["declustered"]["drives"].as_u64(), s["declustered"]["placements"].as_u64()), (Some(12), Some(2)));
    assert_eq!(s["drives"].as_array().map(Vec::len), Some(12), "{s}");
    assert_eq!(s["state"], "optimal", "{s}");
    // Nothing is written: garbage collection moves every zone index onto the new
    // placement by itself.
    let deadline = Instant::now() + Duration::from_secs(60);
    while world.status()["declustered"]["zone_indexes_to_grow"] != 0 {
        assert!(Instant::now() < deadline, "the grow did not end: {}", world.status());
        std::thread::sleep(Duration::from_millis(20));
    }
    let human = world.ok(&["status", "rp"]);
    assert!(human.contains("declustered: stripes of 5 over 12 drives"), "{human}");
    world.ok(&["stop", "rp"]);
    let line = world.superblock_line(11);
    assert!(line.contains("drive 11 of 12, RAID-5 (4+1) declustered, 1 distributed spare(s), grown from 8 drives"));
    assert!(world.superblock_line(0).contains("drive 0 of 12"), "{}", world.superblock_line(0));
    let moved = (8..12).filter(|&d| world.ok(&["inspect", &world.drives[d]]).contains("sequence")).count();
    assert!(moved > 0, "no segment moved onto a new drive");

    // Every block reads back on the 12 drives; written again, it reads back again.
    assert_eq!(world.write_and_verify(None, 1).mapped_blocks, blocks);
    let status = world.write_and_verify(Some(2), 2);
    assert_eq!(status.mapped_blocks, blocks);
    // A new drive fails and is rebuilt into spare space; every block reads without it.
    world.start(&[], &[]);
    world.ok(&["fail", "rp", "10"]);
    wait_in_spare_space(&world, 10);
    world.ok(&["stop", "rp"]);
    assert_eq!(write_and_verify(&world.without(&[10]), world.blocks, None, 2).mapped_blocks, blocks);

    // A classic array does not grow.
    let classic = World::new("raid5", 5, 40, 600);
    classic.start(&[], &[]);
    let extra = classic.new_drive("extra");
    let refused = classic.refused(&["grow", "rp", &extra]);
    assert!(refused.contains("only a declustered array grows"), "{refused}");
}
