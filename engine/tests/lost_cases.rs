//! Cases the hostile property (`model.rs`: damage beyond parity, failures beyond
//! tolerance) found, pinned each as a test of its own: what went wrong, and the sequence
//! that showed it, against the same reference model.

mod common;
// Shared with model.rs, which uses the parts these cases do not (its properties and strategies).
#[allow(dead_code)]
#[path = "common/reference/mod.rs"]
mod reference;
use reference::*;

use zapraid_engine::{Mode, OpenSegments, RaidLevel, Request, Simulator};

/// Found by the hostile property (seed 5045458356904171951: RAID-1 of 3 drives, ZapRAID
/// with groups of 4, few zones: a write of LBAs 73-77, the row of LBA 75 damaged on all
/// three drives, a crash). The block is acknowledged, its segment still open; recovery
/// reads the open segment's blocks and finds the checksum of the damaged ones failing. It
/// took them for blocks a power cut tore and dropped them, so the LBA read zeros (or an
/// older version) instead of failing. The metadata of such a block still names its LBA
/// and timestamp (`BlockMetadata::decode_unverified`): a block is written whole, so it is
/// damaged, not torn, and recovery now records its LBA lost (`recovery::structures`).
#[test]
fn a_crash_forgets_no_acknowledged_block_damaged_beyond_parity() {
    // Zone Write: the chunks of a stripe sit at the same offset on every drive.
    for level in [RaidLevel::Raid1 { drives: 3 }, RaidLevel::Raid5 { drives: 4 }, RaidLevel::Raid6 { drives: 5 }] {
        for mode in [Mode::ZoneWriteOnly, Mode::ZapRaid { group_size: 1 }] {
            let config = config(level, mode, 1, OpenSegments::SINGLE);
            let mut sim = Simulator::new(common::geometry(FEW_ZONES, 6, 8), config, 1, None).unwrap();
            let data: Vec<u8> = (73..78).flat_map(|l| block_bytes(l, 0)).collect();
            sim.submit(0, Request::Write { lba: 73, data });
            assert!(sim.run_until_response(0).expect("answered").result.is_ok());
            let at = sim.engine.locate(75).expect("written");
            let start = common::geometry(FEW_ZONES, 6, 8).zone_start_lba(at.zone);
            let (_, m) = level.shape();
            let n = sim.drives.len();
            for i in 0..=m {
                sim.drives[(at.drive + i) % n].corrupt_block(start + at.offset, 3).unwrap();
            }
            let drives = sim.power_cut().unwrap();
            let mut sim = Simulator::recover(common::geometry(FEW_ZONES, 6, 8), config, drives).unwrap();
            sim.submit(1, Request::Read { lba: 75, blocks: 1 });
            let r = sim.run_until_response(1).expect("answered");
            match r.result {
                Err(_) => {}
                Ok(got) => {
                    panic!("{level:?} {mode:?}: LBA 75 reads {} after the crash", describe(&got, &block_bytes(75, 0)))
                }
            }
        }
    }
}

/// Found by the hostile property (RAID-4 of 4 drives, Zone Write: an LBA recorded lost,
/// then the row of its lost-block marker damaged beyond parity, then a restart): recovery
/// reads a segment without a footer (open at a power cut, or closed when found to have
/// holes) block by block, and kept aside the damaged blocks whose metadata still names an
/// LBA only for data blocks, not for markers. The marker was dropped and the LBA, whose
/// older copies were gone, read zeros.
#[test]
fn a_start_keeps_an_lba_lost_whose_marker_is_damaged_beyond_parity() {
    for level in [RaidLevel::Raid1 { drives: 3 }, RaidLevel::Raid5 { drives: 4 }, RaidLevel::Raid6 { drives: 5 }] {
        for mode in [Mode::ZoneWriteOnly, Mode::ZapRaid { group_size: 1 }] {
            let geometry = common::geometry(FEW_ZONES, 6, 8);
            let config = config(level, mode, 1, OpenSegments::SINGLE);
            let mut sim = Simulator::new(geometry, config, 1, None).unwrap();
            let (_, m) = level.shape();
            let n = sim.drives.len();
            // Zone Write: a stripe's chunks sit at the same offset on every drive.
            let damage_row = |sim: &mut Simulator, lba: u64| {
                let at = sim.engine.locate(lba).expect("mapped");
                for i in 0..=m {
                    sim.drives[(at.drive + i) % n]
                        .corrupt_block(geometry.zone_start_lba(at.zone) + at.offset, 3)
                        .unwrap();
                }
                at
            };
            let data: Vec<u8> = (73..78).flat_map(|l| block_bytes(l, 0)).collect();
            sim.submit(0, Request::Write { lba: 73, data });
            assert!(sim.run_until_response(0).expect("answered").result.is_ok());
            let first = damage_row(&mut sim, 75);
            // The read finds the segment's holes; garbage collection moves it, marking 75.
            sim.submit(1, Request::Read { lba: 75, blocks: 1 });
            assert!(sim.run_until_response(1).expect("answered").result.is_err());
            sim.run_until_idle();
            assert_eq!(sim.engine.blocks_lost(), 1, "{level:?} {mode:?}");
            let marker = damage_row(&mut sim, 75);
            assert_ne!(marker.zone, first.zone, "{level:?} {mode:?}: the marker is in a new segment");
            // A power cut: the marker's segment, still open, is read block by block.
            let drives = sim.power_cut().unwrap();
            let mut sim = Simulator::recover(geometry, config, drives).unwrap();
            sim.submit(2, Request::Read { lba: 75, blocks: 1 });
            match sim.run_until_response(2).expect("answered").result {
                Err(_) => {}
                Ok(got) => panic!("{level:?} {mode:?}: lost LBA 75 reads {} after a start", describe(&got, &[0; 1])),
            }
        }
    }
}

/// Found by the hostile property (seed 4652830693644130913: RAID-5 of 4 drives, ZapRAID
/// with groups of 4): a scrub rewrote a damaged row's blocks into the segment still open,
/// which held the originals; the originals' row was then damaged beyond parity. The
/// rewritten copies keep the originals' timestamps (the same write), so after a clean
/// stop (whose stop footer lists both copies) a start took whichever it met first, the
/// damaged original: blocks that read back before the restart failed after it, uncounted.
/// Of two copies of one timestamp in one segment the later stripe's is the newer.
#[test]
fn a_start_maps_the_repaired_copy_not_its_damaged_original_in_the_same_segment() {
    for level in [RaidLevel::Raid5 { drives: 4 }, RaidLevel::Raid6 { drives: 5 }] {
        for mode in [Mode::ZoneWriteOnly, Mode::ZoneAppendOnly, Mode::ZapRaid { group_size: 4 }] {
            let geometry = geometry();
            let config = config(level, mode, 1, OpenSegments::SINGLE);
            let mut sim = Simulator::new(geometry, config, 7, None).unwrap();
            let data: Vec<u8> = (0..12).flat_map(|l| block_bytes(l, 5)).collect();
            sim.submit(0, Request::Write { lba: 0, data: data.clone() });
            assert!(sim.run_until_response(0).expect("answered").result.is_ok());
            sim.run_until_idle();
            let before: Vec<_> = (0..12).map(|l| sim.engine.locate(l).expect("written")).collect();
            // One chunk damaged (within parity): a read rebuilds the block and rewrites its
            // row into the open segment.
            let at = before[4];
            sim.drives[at.drive].corrupt_block(geometry.zone_start_lba(at.zone) + at.offset, 11).unwrap();
            sim.submit(1, Request::Read { lba: 4, blocks: 1 });
            assert_eq!(sim.run_until_response(1).expect("answered").result.unwrap(), block_bytes(4, 5));
            sim.run_until_idle();
            let moved: Vec<u64> = (0..12).filter(|&l| sim.engine.locate(l) != Some(before[l as usize])).collect();
            assert!(moved.contains(&4), "{level:?} {mode:?}: the read repair rewrote nothing");
            for &l in &moved {
                let now = sim.engine.locate(l).unwrap();
                assert_eq!(now.zone, at.zone, "{level:?} {mode:?}: LBA {l} was rewritten into another segment");
            }
            // The originals of the rewritten blocks, damaged beyond parity.
            for &l in &moved {
                let old = before[l as usize];
                sim.drives[old.drive].corrupt_block(geometry.zone_start_lba(old.zone) + old.offset, 13).unwrap();
            }
            sim.stop();
            let drives = std::mem::take(&mut sim.drives);
            let mut sim = Simulator::recover(geometry, config, drives).unwrap();
            sim.submit(2, Request::Read { lba: 0, blocks: 12 });
            match sim.run_until_response(2).expect("answered").result {
                Ok(got) => assert!(got == data, "{level:?} {mode:?}: wrong data after the start"),
                Err(e) => panic!("{level:?} {mode:?}: LBAs {moved:?} were repaired, yet after a start: {e}"),
            }
            assert_eq!(sim.engine.blocks_lost(), 0, "{level:?} {mode:?}");
        }
    }
}

/// Found by the hostile property (seed 8627880815668644065, pinned in
/// model.proptest-regressions: RAID-5 of 4 drives, Zone Write). Drive 0 fails and is being
/// rebuilt, then it and drive 1 fail: the relocation of the segment open at the first
/// rebuild's start (which holds LBA 0 on drive 1) fails, too few drives to write. The second
/// rebuild of drive 0 started while that relocation was under way, so its start did not try
/// it again; it failed after, and the rebuild ended over the segment, never rebuilt onto the
/// new drive, whose zone stayed empty. A start then took the zone for unwritten (not every
/// drive past its header) and forgot LBA 0, which read zeros. Before ending, a rebuild now
/// tries such segments once more: the new drive takes writes, LBA 0 gets its marker.
#[test]
fn a_rebuild_retries_the_relocation_that_failed_before_it_ends() {
    use Op::*;
    let ops = vec![
        Write { lba: 0, blocks: 1, fill: 0 },
        Restart,
        Write { lba: 0, blocks: 1, fill: 0 },
        Write { lba: 0, blocks: 1, fill: 0 },
        FailDrive { drive: 4 },
        Replace { drive: 0, paced: false },
        ForceFail { drive: 4 },
        ForceFail { drive: 1 },
        Write { lba: 1, blocks: 3, fill: 0 },
        Replace { drive: 0, paced: false },
        Write { lba: 1, blocks: 4, fill: 0 },
        Write { lba: 1, blocks: 1, fill: 0 },
    ];
    let geometry = common::geometry(FEW_ZONES, 6, 8);
    let setup = Setup {
        geometry,
        level: RaidLevel::Raid5 { drives: 4 },
        mode: Mode::ZoneWriteOnly,
        chunk_blocks: 1,
        open: OpenSegments::SINGLE,
        l2p: None,
        hostile: true,
        declustering: Default::default(),
    };
    let status = run_with_l2p(setup, &ops, 8627880815668644065).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(status.blocks_lost, 1, "LBA 0 is recorded lost");
}
