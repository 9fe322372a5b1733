//! Scrub and read repair over the simulator: silent corruption planted with the emulator's
//! fault (`EmulatedDrive::corrupt_block`) in live data blocks and parity blocks of sealed
//! segments is found by a scrub, every damaged row's live blocks are rewritten, every
//! block reads back exactly (also after a restart), and a second scrub finds no damage in
//! live data. A clean array scrubs with nothing found; a frontend read that rebuilt a
//! damaged block moves every live block of its row, so that a later drive failure loses
//! none of them; a rate-limited scrub keeps to its rate in virtual time.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zapraid_engine::format::BlockKind;
use zapraid_engine::l2p::Physical;
use zapraid_engine::{Config, L2pConfig, Mode, RaidLevel, Request, ScrubReport, Simulator};
use zapraid_zns::{Geometry, ZoneState};

mod common;

const ZONES: u32 = 16;
const LOGICAL_BLOCKS: u64 = 150;
const BLOCKS_WRITTEN: u64 = 420;

fn geometry() -> Geometry {
    common::geometry(ZONES, 8, 10)
}

fn config(level: RaidLevel, mode: Mode, chunk_blocks: u64) -> Config {
    common::config(level, mode, chunk_blocks, LOGICAL_BLOCKS)
}

/// The schemes scrubbed: RAID-5 and RAID-6, Zone Append groups and Zone Write, 1- and
/// 2-block chunks.
fn schemes() -> Vec<(RaidLevel, Mode, u64)> {
    vec![
        (RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 }, 1),
        (RaidLevel::Raid5 { drives: 4 }, Mode::ZoneWriteOnly, 2),
        (RaidLevel::Raid5 { drives: 4 }, Mode::ZoneAppendOnly, 2),
        (RaidLevel::Raid6 { drives: 4 }, Mode::ZapRaid { group_size: 4 }, 1),
    ]
}

/// An array written with random writes (every one acknowledged), and what each LBA holds.
fn world(config: Config, seed: u64) -> (Simulator, HashMap<u64, Vec<u8>>) {
    let mut sim = Simulator::new(geometry(), config, seed, None).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut expected = HashMap::new();
    let (mut written, mut id) = (0, 0);
    while written < BLOCKS_WRITTEN {
        let blocks = rng.random_range(1..=3u64);
        let lba = rng.random_range(0..LOGICAL_BLOCKS - blocks);
        let data: Vec<u8> = (lba..lba + blocks).flat_map(|l| common::named_block(l, id)).collect();
        sim.submit(id, Request::Write { lba, data });
        sim.run_until_response(id).expect("answered").result.expect("acknowledged");
        for l in lba..lba + blocks {
            expected.insert(l, common::named_block(l, id));
        }
        written += blocks;
        id += 1;
    }
    sim.run_until_idle();
    (sim, expected)
}

/// Reads every LBA back and checks it. Request ids start at `first_id`.
fn verify(sim: &mut Simulator, expected: &HashMap<u64, Vec<u8>>, first_id: u64, when: &str) {
    for (i, (lba, want)) in expected.iter().enumerate() {
        let id = first_id + i as u64;
        sim.submit(id, Request::Read { lba: *lba, blocks: 1 });
        let got = sim.run_until_response(id).expect("answered").result;
        assert_eq!(got.as_ref().ok(), Some(want), "LBA {lba} read back wrong {when}");
    }
    sim.run_until_idle();
}

/// Runs a scrub to its end (repairs persisted) and returns its report.
fn scrub(sim: &mut Simulator) -> ScrubReport {
    sim.start_scrub(None).unwrap();
    sim.run_until_idle();
    let status = sim.engine.scrub_status();
    assert!(status.running.is_none(), "the scrub finished: {status:?}");
    assert_eq!(status.repairs_in_flight, 0, "every repair persisted");
    status.last.expect("a scrub finished")
}

/// Zones holding sealed segments (finished on drive 0, with a segment the engine knows).
fn sealed_zones(sim: &Simulator) -> Vec<u32> {
    (0..ZONES)
        .filter(|z| sim.engine.segment_layout(*z).is_some())
        .filter(|z| sim.drives[0].zones()[*z as usize].state == ZoneState::Full)
        .collect()
}

/// Plants silent corruption in the sealed segments: a live data block in every other
/// segment, a parity block in the others (on another drive than the live block, in every
/// segment when the level has two parity chunks). Returns how many live data blocks and
/// how many blocks in all were damaged.
fn plant(sim: &mut Simulator, parity_chunks: usize, rng: &mut ChaCha8Rng) -> (u64, u64) {
    let g = geometry();
    let bits = common::BLOCK as u64 * 8;
    let (mut live, mut all) = (0, 0);
    for (i, zone) in sealed_zones(sim).into_iter().enumerate() {
        let layout = sim.engine.segment_layout(zone).unwrap();
        let places: Vec<_> =
            (0..LOGICAL_BLOCKS).filter_map(|l| sim.engine.locate(l)).filter(|p| p.zone == zone).collect();
        let mut damaged_drive = None;
        if (i % 2 == 0 || parity_chunks >= 2) && !places.is_empty() {
            let p = places[rng.random_range(0..places.len())];
            sim.drives[p.drive].corrupt_block(g.zone_start_lba(zone) + p.offset, rng.random_range(0..bits)).unwrap();
            damaged_drive = Some(p.drive);
            live += 1;
            all += 1;
        }
        if i % 2 == 0 && parity_chunks < 2 {
            continue;
        }
        let drive = (0..layout.drives()).find(|d| Some(*d) != damaged_drive).unwrap();
        let data_region = layout.data_start_blocks()..layout.footer_start_blocks();
        let parity = data_region
            .map(|o| g.zone_start_lba(zone) + o)
            .find(|lba| common::kind_of(&mut sim.drives[drive], *lba) == Some(BlockKind::Parity));
        if let Some(lba) = parity {
            sim.drives[drive].corrupt_block(lba, rng.random_range(0..bits)).unwrap();
            all += 1;
        }
    }
    (live, all)
}

#[test]
fn scrub_of_a_clean_array_finds_nothing() {
    for (level, mode, chunk_blocks) in schemes() {
        let (mut sim, expected) = world(config(level, mode, chunk_blocks), 3);
        let report = scrub(&mut sim);
        let what = format!("{} {} chunks of {chunk_blocks}", level.label(), mode.name());
        assert!(report.segments_checked > 0 && report.blocks_checked > 0, "{what}: the scrub read nothing: {report:?}");
        let found = (report.blocks_damaged, report.stale_blocks_damaged, report.parity_mismatches);
        assert_eq!(found, (0, 0, 0), "{what}: damage found on a clean array: {report:?}");
        assert_eq!((report.blocks_rewritten, report.blocks_unrecoverable), (0, 0), "{what}: {report:?}");
        verify(&mut sim, &expected, 1_000_000, "after a clean scrub");
        println!("{what}: clean scrub: {report:?}");
    }
}

/// After a clean stop and a restart, the segments the stop closed end in a stop footer
/// right after their last stripe: a scrub stops there and counts no damage.
#[test]
fn scrub_after_a_clean_restart_finds_nothing() {
    for (level, mode, chunk_blocks) in schemes() {
        let config = config(level, mode, chunk_blocks);
        let (mut sim, expected) = world(config, 3);
        sim.stop();
        let mut sim = Simulator::recover(geometry(), config, std::mem::take(&mut sim.drives)).unwrap();
        let report = scrub(&mut sim);
        let what = format!("{} {} chunks of {chunk_blocks}", level.label(), mode.name());
        let found = (report.blocks_damaged, report.stale_blocks_damaged, report.parity_mismatches);
        assert_eq!(found, (0, 0, 0), "{what}: damage found on a clean array: {report:?}");
        verify(&mut sim, &expected, 1_000_000, "after a restart and a scrub");
    }
}

#[test]
fn scrub_finds_and_repairs_every_planted_corruption() {
    for (level, mode, chunk_blocks) in schemes() {
        finds_and_repairs_every_planted_corruption(config(level, mode, chunk_blocks), None);
    }
}

/// With the L2P table offloaded to a budget of two pages of eight entries after a
/// restart (every page made from the recovered entries, evicted and read back while the
/// scrub finds each segment's live blocks), the scrub finds and repairs the same.
#[test]
fn scrub_with_a_tiny_l2p_budget_finds_and_repairs_every_planted_corruption() {
    let l2p = L2pConfig { budget_bytes: Some(2 * common::BLOCK as u64), page_entries: Some(8), checkpoint: false };
    for (level, mode, chunk_blocks) in schemes() {
        finds_and_repairs_every_planted_corruption(config(level, mode, chunk_blocks), Some(l2p));
    }
}

/// Plants corruption in an array written with `config`, restarts it with `l2p` if given,
/// scrubs, and checks that every corruption is found and every damaged live block moved.
/// The tiny budget's two pages, and the pages repairs in flight pin.
const PEAK_PAGES_WITH_A_TINY_BUDGET: u64 = 2 + 8;

fn finds_and_repairs_every_planted_corruption(config: Config, l2p: Option<L2pConfig>) {
    {
        let (level, mode, chunk_blocks) = (config.level, config.mode, config.chunk_bytes / common::BLOCK as u64);
        let what = format!("{} {} chunks of {chunk_blocks}, {l2p:?}", level.label(), mode.name());
        let (mut sim, expected) = world(config, 5);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let (live, all) = plant(&mut sim, level.shape().1, &mut rng);
        assert!(live >= 2, "{what}: the workload sealed too few segments to plant in");
        let config = Config { l2p: l2p.unwrap_or(config.l2p), ..config };
        if l2p.is_some() {
            sim.stop();
            sim = Simulator::recover(geometry(), config, std::mem::take(&mut sim.drives)).unwrap();
        }
        let report = scrub(&mut sim);
        if l2p.is_some() {
            let l2p = sim.engine.status().l2p;
            // Pages were made and evicted while the scan went on (read back from the drives,
            // or from the snapshot of a write-back still in flight), the cache stayed small.
            assert!(l2p.evictions > 0, "{what}: nothing was evicted: {l2p:?}");
            assert!(l2p.peak_cached_pages <= PEAK_PAGES_WITH_A_TINY_BUDGET, "{what}: {l2p:?}");
            println!("{what}: L2P during the scrub: {l2p:?}");
        }
        println!("{what}: {live} live and {all} blocks in all corrupted: {report:?}");
        assert_eq!(report.blocks_damaged + report.stale_blocks_damaged, all, "{what}: every corruption found");
        assert!(report.blocks_damaged >= live, "{what}: damaged live blocks counted");
        assert_eq!((report.blocks_unrecoverable, report.parity_mismatches), (0, 0), "{what}");
        assert!(report.blocks_rewritten >= live, "{what}: every damaged live block rewritten");
        let repaired_by_reads = sim.engine.status().read_blocks_repaired;
        verify(&mut sim, &expected, 1_000_000, "after the scrub");
        assert_eq!(
            sim.engine.status().read_blocks_repaired,
            repaired_by_reads,
            "{what}: a read still came across a damaged block after the scrub moved them all"
        );
        let again = scrub(&mut sim);
        assert_eq!((again.blocks_damaged, again.parity_mismatches, again.blocks_rewritten), (0, 0, 0), "{what}");
        // The rewrites survive a restart.
        sim.stop();
        let drives = std::mem::take(&mut sim.drives);
        let mut sim = Simulator::recover(geometry(), config, drives).unwrap();
        verify(&mut sim, &expected, 2_000_000, "after the scrub and a restart");
    }
}

#[test]
fn a_scrub_checks_the_open_segment_as_far_as_its_groups_are_done() {
    let config = config(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 }, 1);
    let (mut sim, expected) = world(config, 13);
    let open = (0..ZONES)
        .find(|z| {
            sim.engine.segment_layout(*z).is_some() && sim.drives[0].zones()[*z as usize].state != ZoneState::Full
        })
        .expect("an open segment");
    let layout = sim.engine.segment_layout(open).unwrap();
    let position = |offset: u64| (offset - layout.data_start_blocks()) / layout.chunk_blocks;
    let live: Vec<_> = (0..LOGICAL_BLOCKS).filter_map(|l| sim.engine.locate(l)).filter(|p| p.zone == open).collect();
    let last_group = live.iter().map(|p| position(p.offset) / layout.group_size).max().expect("live blocks");
    // A block of a group before the last one written: that group is done.
    let target = live.iter().find(|p| position(p.offset) / layout.group_size < last_group).expect("a done group");
    sim.drives[target.drive].corrupt_block(geometry().zone_start_lba(open) + target.offset, 77).unwrap();
    let report = scrub(&mut sim);
    assert!(report.blocks_damaged >= 1 && report.blocks_rewritten >= 1, "{report:?}");
    assert_eq!(report.blocks_unrecoverable, 0, "{report:?}");
    verify(&mut sim, &expected, 1_000_000, "after scrubbing the open segment");
    assert_eq!(sim.engine.status().read_blocks_repaired, 0, "no read came across the damage");
}

/// The other blocks of the row holding the block at `at` (the same block offset of every
/// chunk of its stripe), found by their metadata: on each other drive, the chunk of the
/// same stripe group with the same stripe ID (Zone Write: groups of one stripe).
fn row_of(sim: &mut Simulator, at: Physical) -> Vec<Physical> {
    let layout = sim.engine.segment_layout(at.zone).unwrap();
    let zone_start = geometry().zone_start_lba(at.zone);
    let (start, cb) = (layout.data_start_blocks(), layout.chunk_blocks);
    let (position, within) = ((at.offset - start) / cb, (at.offset - start) % cb);
    let group = position / layout.group_size;
    let positions = group * layout.group_size..group * layout.group_size + layout.group_stripes(group);
    let stripe_id = |sim: &mut Simulator, p: Physical| {
        common::metadata_of(&mut sim.drives[p.drive], zone_start + p.offset).map(|(m, _)| m.stripe_id.get())
    };
    let id = stripe_id(sim, at).expect("the block's metadata decodes");
    let mut row = Vec::new();
    for drive in (0..layout.drives()).filter(|d| *d != at.drive) {
        let mut places = positions.clone().map(|p| Physical { zone: at.zone, drive, offset: start + p * cb + within });
        row.extend(places.find(|p| stripe_id(sim, *p) == Some(id)));
    }
    row
}

/// A frontend read that rebuilt a damaged block rewrites every live block of its row, as
/// a scrub does: none stays in a row with a bad chunk, so a later failure of a drive
/// holding one of them loses nothing (before, only the damaged block moved, and the
/// others' rows then lacked two chunks).
#[test]
fn a_read_repair_rewrites_the_damaged_row_so_a_later_failure_loses_nothing() {
    for (level, mode, chunk_blocks) in schemes().into_iter().filter(|(level, ..)| level.shape().1 == 1) {
        let config = config(level, mode, chunk_blocks);
        let what = format!("{} {} chunks of {chunk_blocks}", level.label(), mode.name());
        let (mut sim, expected) = world(config, 7);
        let located: HashMap<Physical, u64> =
            (0..LOGICAL_BLOCKS).filter_map(|l| sim.engine.locate(l).map(|p| (p, l))).collect();
        let mut in_sealed: Vec<(u64, Physical)> = sealed_zones(&sim)
            .into_iter()
            .flat_map(|zone| located.iter().filter(move |(p, _)| p.zone == zone).map(|(p, l)| (*l, *p)))
            .collect();
        in_sealed.sort_by_key(|(lba, _)| *lba);
        // A live block whose row holds other live blocks.
        let (lba, at, mates) = in_sealed
            .into_iter()
            .find_map(|(lba, at)| {
                let mates: Vec<(u64, Physical)> =
                    row_of(&mut sim, at).into_iter().filter_map(|p| located.get(&p).map(|l| (*l, p))).collect();
                (!mates.is_empty()).then_some((lba, at, mates))
            })
            .unwrap_or_else(|| panic!("{what}: no row of a sealed segment holds two live blocks"));
        println!("{what}: LBA {lba} damaged at {at:?}, live in its row: {mates:?}");
        sim.drives[at.drive].corrupt_block(geometry().zone_start_lba(at.zone) + at.offset, 100).unwrap();
        sim.submit(1, Request::Read { lba, blocks: 1 });
        let got = sim.run_until_response(1).unwrap().result.unwrap();
        assert_eq!(got, expected[&lba], "{what}: the damaged block was rebuilt");
        sim.run_until_idle();
        let failed = mates[0].1.drive;
        sim.engine.fail_drive(failed);
        verify(&mut sim, &expected, 10, &format!("{what}: with drive {failed} failed after the read repair"));

        let status = sim.engine.status();
        let rewritten = 1 + mates.len() as u64;
        assert_eq!(status.read_blocks_repaired, 1, "{what}: no read came across the damage again");
        assert_eq!(status.scrub.read_repairs_scheduled, rewritten, "{what}: the row's live blocks, {mates:?}");
        assert_eq!((status.scrub.read_repairs_done, status.scrub.repairs_in_flight), (rewritten, 0), "{what}");
        for (l, was) in mates.iter().copied().chain([(lba, at)]) {
            assert_ne!(sim.engine.locate(l), Some(was), "{what}: LBA {l} moved off the damaged row");
        }
    }
}

#[test]
fn a_rate_limited_scrub_keeps_to_its_rate_in_virtual_time() {
    let config = config(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 }, 1);
    let (mut sim, _) = world(config, 11);
    let rate_bytes_per_s = 1_000_000;
    let started_ns = sim.now_ns();
    sim.start_scrub(Some(rate_bytes_per_s)).unwrap();
    assert_eq!(sim.engine.scrub_status().rate_bytes_per_s, Some(rate_bytes_per_s));
    sim.run_until_idle();
    let report = sim.engine.scrub_status().last.expect("finished");
    let elapsed_ns = sim.now_ns() - started_ns;
    // Reads may run one burst (10 ms) and one stripe (4 chunks of 512 B: 2 ms here) ahead
    // of the average rate.
    let floor_ns = (report.bytes_read * 1_000_000_000 / rate_bytes_per_s).saturating_sub(10_000_000 + 3_000_000);
    println!("{} bytes in {elapsed_ns} ns of virtual time", report.bytes_read);
    assert!(report.bytes_read > 50_000, "enough read to measure: {report:?}");
    assert!(elapsed_ns >= floor_ns, "{} bytes read in {elapsed_ns} ns at {rate_bytes_per_s} B/s", report.bytes_read);
}

/// Found by the hostile model test (seed 1648213658874162721: RAID-1 of 3 drives, ZapRAID
/// with groups of 4, few zones): a scrub of the open segment was under way when a drive
/// was replaced; the rebuild retired the open segment, to be reclaimed before it ends, but
/// garbage collection passes over the segment being scrubbed. The scrub then let go of it
/// after garbage collection had looked, and nothing more happened in the idle array: the
/// rebuild never ended.
#[test]
fn a_rebuild_started_during_a_scrub_ends() {
    let (level, mode) = (RaidLevel::Raid1 { drives: 3 }, Mode::ZapRaid { group_size: 4 });
    let geometry = common::geometry(6, 6, 8);
    let mut sim = Simulator::new(geometry, common::config(level, mode, 1, 96), 1, None).unwrap();
    for (id, blocks) in [(0, 2), (1, 5)] {
        let data: Vec<u8> = (0..blocks).flat_map(|l| common::named_block(l, id)).collect();
        sim.submit(id, Request::Write { lba: 0, data });
    }
    sim.run_until_idle();
    sim.drives[0].fail();
    sim.submit(2, Request::Write { lba: 0, data: common::named_block(0, 2) });
    sim.run_until_response(2).expect("answered").result.expect("within tolerance");
    sim.start_scrub(None).unwrap();
    sim.replace_drive(0, 5).unwrap();
    sim.run_until_idle();
    assert!(sim.engine.scrub_status().running.is_none(), "the scrub ended");
    assert!(sim.engine.rebuild_status().is_none(), "the rebuild never ended: {:?}", sim.engine.rebuild_status());
    let want: Vec<u8> =
        [common::named_block(0, 2)].into_iter().chain((1..5).map(|l| common::named_block(l, 1))).flatten().collect();
    sim.submit(3, Request::Read { lba: 0, blocks: 5 });
    assert!(sim.run_until_response(3).expect("answered").result.expect("readable") == want);
}
