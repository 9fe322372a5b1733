//! Corruption sweep: one bit flipped on one drive (RAID-5) or at the same place on two
//! drives (RAID-6), in every kind of on-disk structure (segment headers, footers, stop
//! footers) and in a sample of data-region blocks (data, parity, padding) of sealed and
//! open segments, after a clean stop and after a power cut. Then the array starts from
//! the drives alone: start must succeed, every acknowledged block must read back exactly,
//! nothing may be counted lost, and damage the array came across (at start, or reading a
//! live block) must be counted as repaired.
//!
//! Also pinned here: a clean stop and start treats sealed segments as sealed (no segment
//! left to reclaim, nothing relocated), however the recovery's reads complete.

use std::collections::{BTreeSet, HashMap};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zapraid_engine::format::BlockKind;
use zapraid_engine::{Config, Layout, Mode, RaidLevel, Request, Simulator, Status};
use zapraid_zns::{Command, EmulatedDrive, Geometry, ZoneState, ZonedDevice};

mod common;

/// Zones per drive: room for a few sealed segments and an open one.
const ZONES: u32 = 12;
const LOGICAL_BLOCKS: u64 = 150;
/// Blocks written: enough to seal two or three segments at these sizes.
const BLOCKS_WRITTEN: u64 = 420;
/// Every how many data-region blocks the sweep flips one.
const DATA_SAMPLE_STRIDE: u64 = 5;

fn geometry() -> Geometry {
    common::geometry(ZONES, 8, 10)
}

fn config(level: RaidLevel, mode: Mode, chunk_blocks: u64) -> Config {
    common::config(level, mode, chunk_blocks, LOGICAL_BLOCKS)
}

fn block(lba: u64, write: u64) -> Vec<u8> {
    common::named_block(lba, write)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    CleanStop,
    PowerCut,
}

/// Writes the workload (every write acknowledged), then stops cleanly or loses power.
/// Returns the drives and what every LBA must hold.
fn world(config: Config, ending: Ending) -> (Vec<EmulatedDrive>, HashMap<u64, Vec<u8>>) {
    let mut sim = Simulator::new(geometry(), config, 11, None).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut expected = HashMap::new();
    let mut written = 0;
    let mut id = 0;
    while written < BLOCKS_WRITTEN {
        let blocks = rng.random_range(1..=3u64);
        let lba = rng.random_range(0..LOGICAL_BLOCKS - blocks);
        let data: Vec<u8> = (lba..lba + blocks).flat_map(|l| block(l, id)).collect();
        sim.submit(id, Request::Write { lba, data });
        let response = sim.run_until_response(id).expect("write answered");
        response.result.expect("write acknowledged");
        for l in lba..lba + blocks {
            expected.insert(l, block(l, id));
        }
        written += blocks;
        id += 1;
    }
    sim.run_until_idle();
    let drives = match ending {
        Ending::CleanStop => {
            sim.stop();
            sim.drives
        }
        Ending::PowerCut => sim.power_cut().unwrap(),
    };
    (drives, expected)
}

/// Where the sweep flips a bit, zone-relative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Site {
    Header { zone: u32 },
    Footer { zone: u32, offset: u64 },
    StopFooter { zone: u32, offset: u64 },
    Data { zone: u32, offset: u64, sealed: bool },
}

impl Site {
    fn place(self) -> (u32, u64) {
        match self {
            Site::Header { zone } => (zone, 0),
            Site::Footer { zone, offset } | Site::StopFooter { zone, offset } | Site::Data { zone, offset, .. } => {
                (zone, offset)
            }
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Site::Header { .. } => "segment header",
            Site::Footer { .. } => "footer block",
            Site::StopFooter { .. } => "stop footer block",
            Site::Data { sealed: true, .. } => "data-region block of a sealed segment",
            Site::Data { sealed: false, .. } => "data-region block of an open segment",
        }
    }
}

/// Every structure of every segment on drive `drive`, and a sample of data blocks.
fn sites(layout: &Layout, drive: &mut EmulatedDrive, ending: Ending) -> Vec<Site> {
    let mut sites = Vec::new();
    let footer_start = layout.footer_start_blocks();
    let footer_end = footer_start + layout.footer_blocks;
    for (zone, z) in drive.zones().iter().enumerate() {
        let zone = zone as u32;
        let written = if z.state == ZoneState::Empty { 0 } else { z.written_blocks() };
        // Zone 0 holds no segment in the simulator's arrays; empty zones hold nothing.
        if written <= layout.data_start_blocks() {
            continue;
        }
        sites.push(Site::Header { zone });
        let sealed = written >= footer_end;
        let data_end = if sealed {
            for offset in footer_start..footer_end {
                sites.push(Site::Footer { zone, offset });
            }
            footer_start
        } else if ending == Ending::CleanStop {
            // The stop footer: the zone's last blocks, as many as are footer blocks.
            let zone_start = drive.geometry().zone_start_lba(zone);
            let mut start = written;
            while start > layout.data_start_blocks()
                && common::kind_of(drive, zone_start + start - 1) == Some(BlockKind::Footer)
            {
                start -= 1;
                sites.push(Site::StopFooter { zone, offset: start });
            }
            assert!(start < written, "a clean stop leaves a stop footer");
            start
        } else {
            written
        };
        for offset in (layout.data_start_blocks()..data_end).step_by(DATA_SAMPLE_STRIDE as usize) {
            sites.push(Site::Data { zone, offset, sealed });
        }
    }
    sites
}

struct Outcome {
    status: Status,
    /// Whether the flipped block was one the array must read after a start: a structure,
    /// a block of an open segment recovery scans, or a live data block.
    used: bool,
}

/// Flips a bit at `site` on each of `drives_hit`, starts the array and checks every block.
fn corrupt_and_check(config: Config, ending: Ending, site: Site, drives_hit: &[usize]) -> Outcome {
    let (mut drives, expected) = world(config, ending);
    let geometry = geometry();
    let (zone, offset) = site.place();
    for &d in drives_hit {
        drives[d].corrupt_block(geometry.zone_start_lba(zone) + offset, 7 + u64::from(zone) * 13).unwrap();
    }
    // Which places hold live data before the start (recovery may move them afterwards).
    let live: BTreeSet<(u32, usize, u64)> = {
        let sim = Simulator::recover_unsettled(geometry, config, world(config, ending).0).unwrap();
        (0..LOGICAL_BLOCKS).filter_map(|l| sim.engine.locate(l)).map(|p| (p.zone, p.drive, p.offset)).collect()
    };
    let mut sim = Simulator::recover(geometry, config, drives)
        .unwrap_or_else(|e| panic!("{config:?} {ending:?}: start failed after a flip in {site:?}: {e}"));
    for (&lba, want) in &expected {
        let id = 1_000_000 + lba;
        sim.submit(id, Request::Read { lba, blocks: 1 });
        let got = sim.run_until_response(id).expect("read answered").result;
        match got {
            Ok(data) => assert!(
                &data == want,
                "{:?} {ending:?}: LBA {lba} reads wrong data after a flip in {site:?} on {drives_hit:?}",
                config.level
            ),
            Err(e) => panic!("{:?} {ending:?}: LBA {lba} unreadable after a flip in {site:?}: {e}", config.level),
        }
    }
    let used = match site {
        Site::Header { .. } | Site::Footer { .. } | Site::StopFooter { .. } => true,
        Site::Data { sealed: false, .. } if ending == Ending::PowerCut => true,
        Site::Data { zone, offset, .. } => drives_hit.iter().any(|d| live.contains(&(zone, *d, offset))),
    };
    Outcome { status: sim.engine.status(), used }
}

fn sweep(level: RaidLevel, mode: Mode, chunk_blocks: u64, drives_hit: &[usize]) -> HashMap<&'static str, usize> {
    let config = config(level, mode, chunk_blocks);
    let layout = Layout::new(&geometry(), level, mode, config.chunk_bytes).unwrap();
    let mut cases: HashMap<&'static str, usize> = HashMap::new();
    for ending in [Ending::CleanStop, Ending::PowerCut] {
        let (mut drives, _) = world(config, ending);
        let sites = sites(&layout, &mut drives[drives_hit[0]], ending);
        assert!(sites.iter().any(|s| matches!(s, Site::Footer { .. })), "the workload seals a segment");
        for site in sites {
            let outcome = corrupt_and_check(config, ending, site, drives_hit);
            let repairs = outcome.status.recovery_repairs;
            assert_eq!(repairs.blocks_lost, 0, "{level:?} {mode:?} {ending:?}: {site:?} counted as a loss");
            assert_eq!(repairs.blocks_dropped, 0, "{level:?} {mode:?} {ending:?}: {site:?} dropped blocks");
            let counted = repairs.damaged_structures + repairs.blocks_repaired + outcome.status.read_blocks_repaired;
            if outcome.used {
                assert!(counted > 0, "{level:?} {mode:?} {ending:?}: the flip in {site:?} was not counted");
            }
            *cases.entry(site.kind()).or_default() += 1;
        }
    }
    cases
}

fn print_cases(what: &str, cases: &HashMap<&'static str, usize>) {
    let total: usize = cases.values().sum();
    let mut kinds: Vec<_> = cases.iter().collect();
    kinds.sort();
    let list: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} in a {k}")).collect();
    println!("{what}: {total} cases, every one started, read back exactly and counted: {}", list.join(", "));
}

#[test]
fn one_flipped_bit_on_one_drive_of_raid5_is_repaired() {
    for (mode, chunk_blocks) in [(Mode::ZapRaid { group_size: 4 }, 1), (Mode::ZoneWriteOnly, 2)] {
        for drive in [0, 2] {
            let cases = sweep(RaidLevel::Raid5 { drives: 4 }, mode, chunk_blocks, &[drive]);
            print_cases(&format!("RAID-5 (3+1), {mode:?}, {chunk_blocks}-block chunks, drive {drive}"), &cases);
        }
    }
}

#[test]
fn flipped_bits_on_two_drives_of_raid6_are_repaired() {
    let cases = sweep(RaidLevel::Raid6 { drives: 5 }, Mode::ZapRaid { group_size: 4 }, 1, &[1, 3]);
    print_cases("RAID-6 (3+2), ZapRAID G=4, drives 1 and 3", &cases);
}

/// A corrupted block of a sealed segment was once enough to make recovery take the
/// segment for an open one and drop the stripe (and then rewrite the segment without it).
#[test]
fn a_damaged_block_in_a_sealed_segment_loses_nothing() {
    let config = config(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 }, 1);
    let layout = Layout::new(&geometry(), config.level, config.mode, config.chunk_bytes).unwrap();
    let (mut drives, _) = world(config, Ending::CleanStop);
    let sealed_data = sites(&layout, &mut drives[1], Ending::CleanStop)
        .into_iter()
        .find(|s| matches!(s, Site::Data { sealed: true, .. }))
        .expect("a sealed segment");
    let outcome = corrupt_and_check(config, Ending::CleanStop, sealed_data, &[1]);
    assert_eq!(outcome.status.segments_to_reclaim, 0);
}

/// After a clean stop, every start finds the sealed segments sealed: nothing to reclaim,
/// nothing relocated, five times over.
#[test]
fn clean_stops_and_starts_rewrite_nothing() {
    for mode in [Mode::ZapRaid { group_size: 4 }, Mode::ZoneWriteOnly, Mode::ZoneAppendOnly] {
        let config = config(RaidLevel::Raid5 { drives: 4 }, mode, 1);
        let (mut drives, expected) = world(config, Ending::CleanStop);
        for cycle in 0..5 {
            let mut sim = Simulator::recover_unsettled(geometry(), config, drives).unwrap();
            let status = sim.engine.status();
            assert_eq!(status.segments_to_reclaim, 0, "{mode:?} cycle {cycle}: a sealed segment taken for open");
            sim.run_until_idle();
            let status = sim.engine.status();
            assert_eq!(status.blocks_relocated, 0, "{mode:?} cycle {cycle}: a start rewrote data");
            assert_eq!(status.mapped_blocks, expected.len() as u64);
            sim.stop();
            drives = sim.drives;
        }
    }
}

/// Hands completions out newest first: the order in which a real drive's reads of one
/// zone (a segment header and its footer probe) may complete.
struct NewestFirst(EmulatedDrive);

impl ZonedDevice for NewestFirst {
    fn geometry(&self) -> Geometry {
        self.0.geometry()
    }
    fn queue_depth(&self) -> usize {
        self.0.queue_depth()
    }
    fn submit(&mut self, tag: zapraid_zns::Tag, command: Command) {
        self.0.submit(tag, command)
    }
    fn reap(&mut self, out: &mut Vec<zapraid_zns::Completion>) -> usize {
        let mut mine = Vec::new();
        while self.0.reap(&mut mine) > 0 {}
        mine.reverse();
        let n = mine.len();
        out.append(&mut mine);
        n
    }
    fn wait(&mut self, out: &mut Vec<zapraid_zns::Completion>) -> usize {
        let mut mine = Vec::new();
        while self.0.in_flight() > 0 {
            self.0.wait(&mut mine);
        }
        mine.reverse();
        let n = mine.len();
        out.append(&mut mine);
        n
    }
    fn in_flight(&self) -> usize {
        self.0.in_flight()
    }
}

/// A footer probe answered before its zone's header once made a sealed segment look open,
/// so every start rewrote the whole array.
#[test]
fn sealed_segments_stay_sealed_whatever_order_reads_complete_in() {
    let config = config(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 }, 1);
    let (drives, expected) = world(config, Ending::CleanStop);
    let mut drives: Vec<NewestFirst> = drives.into_iter().map(NewestFirst).collect();
    let mut recovery = zapraid_engine::recovery::Recovery::new(geometry(), config).unwrap();
    while !recovery.is_done() {
        recovery.run_round(&mut drives).unwrap();
    }
    let engine = recovery.finish().unwrap();
    let status = engine.status();
    assert_eq!(status.segments_to_reclaim, 0, "a sealed segment was taken for an open one");
    assert_eq!(status.mapped_blocks, expected.len() as u64);
}
