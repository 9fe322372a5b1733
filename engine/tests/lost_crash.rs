//! Power cuts after damage beyond parity while a drive is rebuilt or after a rebuild ended
//! over blocks it could not reconstruct: the start must know those blocks are lost (reads
//! answer `Error::Lost` or another error), never answer zeros or an older version.

use zapraid_engine::{Config, Error, L2pConfig, Mode, RaidLevel, Request, Simulator};

mod common;
use common::{named_block, BLOCK};

/// Found by the model test with faults beyond parity (model.proptest-regressions, RAID-4 of
/// 4 drives, ZapRAID groups of 4): a drive failed and replaced, its rebuild not at the first
/// segment yet, the row of an LBA on that drive damaged on another drive, a power cut. The
/// start leaves the drive being rebuilt out, so the row has two chunks missing; it scans
/// the segment (open when the rebuild retired it) and could not tell the LBA of the block
/// on the rebuilt drive, so that LBA read zeros. The damaged block's metadata still
/// decodes: with its fields, parity gives the missing block's LBA, which is recorded lost.
#[test]
fn a_crash_during_a_rebuild_forgets_no_block_damaged_beyond_parity() {
    for level in [RaidLevel::Raid4 { drives: 4 }, RaidLevel::Raid5 { drives: 4 }] {
        for mode in [Mode::ZapRaid { group_size: 4 }, Mode::ZoneWriteOnly] {
            let what = format!("{level:?} {mode:?}");
            let geometry = common::geometry(6, 6, 8);
            let config = common::config(level, mode, 1, 96);
            let mut sim = Simulator::new(geometry, config, 0, None).unwrap();
            let data: Vec<u8> = (57..62).flat_map(|lba| named_block(lba, 1)).collect();
            sim.submit(0, Request::Write { lba: 57, data });
            sim.run_until_response(0).expect("answered").result.unwrap();
            sim.submit(1, Request::Write { lba: 0, data: named_block(0, 1) });
            sim.run_until_response(1).expect("answered").result.unwrap();
            // The block of an LBA on drive 0, in the segment open when drive 0 fails.
            let lba = (57..62).find(|&l| sim.engine.locate(l).is_some_and(|at| at.drive == 0)).expect("on drive 0");
            let at = sim.engine.locate(lba).unwrap();
            sim.drives[0].fail();
            sim.engine.fail_drive(0);
            sim.replace_drive(0, 1).unwrap();
            assert!(sim.engine.rebuild_status().is_some_and(|r| r.segments_rebuilt == 0), "{what}");
            // Its row damaged on the next drive: with drive 0 out, two chunks are missing.
            let start = geometry.zone_start_lba(at.zone);
            sim.drives[1].corrupt_block(start + at.offset, 5).unwrap();
            let drives = sim.power_cut().unwrap();
            let mut sim = Simulator::recover_with_failed(geometry, config, drives, &[0]).unwrap();
            sim.resume_rebuild(0).unwrap();
            sim.submit(2, Request::Read { lba, blocks: 1 });
            match sim.run_until_response(2).expect("answered").result {
                Err(Error::Lost { lba: said }) => assert_eq!(said, lba, "{what}"),
                Err(e) => panic!("{what}: LBA {lba} failed otherwise than lost: {e}"),
                Ok(got) => assert!(got == named_block(lba, 1), "{what}: LBA {lba} read other data after the crash"),
            }
            sim.run_until_idle();
            assert!(sim.engine.blocks_lost() >= 1, "{what}: {:?}", sim.engine.status());
        }
    }
}

/// With more drives down than a stripe can be written with (RAID-5: the drive being
/// rebuilt takes writes, two others failed), garbage collection cannot move the blocks of
/// the segment open when the rebuild started, and a rebuild does not write such a segment
/// (its stripes end short of its footer) to the new drive. The rebuild used to end over it
/// and call the drive whole; a start then took the segment's empty zone on that drive for
/// unwritten, dropped the segment and reset its zones on the others. It waits instead, says
/// for how many segments, and a stop still completes.
#[test]
fn a_rebuild_never_ends_over_a_segment_left_off_the_new_drive() {
    for mode in [Mode::ZoneWriteOnly, Mode::ZapRaid { group_size: 4 }] {
        let geometry = common::geometry(24, 8, 10);
        let config = common::config(RaidLevel::Raid5 { drives: 4 }, mode, 1, 256);
        let mut sim = Simulator::new(geometry, config, 3, None).unwrap();
        for (id, lba) in (0..256).step_by(8).enumerate() {
            let data: Vec<u8> = (lba..lba + 8).flat_map(|l| named_block(l, 1)).collect();
            sim.submit(id as u64, Request::Write { lba, data });
        }
        sim.run_until_idle();
        sim.drives[0].fail();
        sim.engine.fail_drive(0);
        sim.replace_drive(0, 9).unwrap();
        for drive in [1, 2] {
            sim.drives[drive].fail();
            sim.engine.fail_drive(drive);
        }
        sim.run_until_idle();
        let rebuild = sim.engine.rebuild_status();
        let waiting = rebuild.map_or(0, |r| r.segments_unreclaimable);
        assert!(waiting > 0, "{mode:?}: the rebuild ended with a segment off the new drive: {rebuild:?}");
        assert!(rebuild.is_some_and(|r| r.segments_left >= waiting), "{mode:?}: {rebuild:?}");
        sim.stop();
    }
}

/// RAID-5, Zone Write, the L2P table offloaded to a few pages: a mapping block in the
/// segment open when a drive is replaced sits in a row lost beyond parity (the block
/// damaged, another chunk of its row on the failed drive). A rebuild does not write that
/// segment to the new drive (its stripes end short of its footer); garbage collection is
/// to reclaim it but cannot move the mapping block. The rebuild used to end over it and
/// call the drive whole; a start then took the segment's empty zone on that drive for
/// unwritten, dropped the segment and reset its zones on the others, so blocks whose
/// newest version was there read older versions; the segment itself was never reclaimed.
/// Now the page is written back elsewhere (rebuilt from the log, or its LBAs recorded
/// lost), the segment reclaimed, and then the rebuild ends: every block reads its newest
/// data or answers an error, before and after a clean stop and a start from the drives.
#[test]
fn a_rebuild_ends_after_a_segment_kept_for_an_unreadable_mapping_block_is_reclaimed() {
    const LOGICAL_BLOCKS: u64 = 192;
    const PAGE_ENTRIES: u64 = 8;
    let geometry = common::geometry(24, 8, 10);
    let l2p = L2pConfig { budget_bytes: Some(2 * BLOCK as u64), page_entries: Some(PAGE_ENTRIES), checkpoint: true };
    let base = common::config(RaidLevel::Raid5 { drives: 4 }, Mode::ZoneWriteOnly, 1, LOGICAL_BLOCKS);
    let config = Config { l2p, ..base };
    let mut sim = Simulator::new(geometry, config, 4, None).unwrap();
    let mut newest = vec![0; LOGICAL_BLOCKS as usize];
    let mut id = 0;
    let mut write = |sim: &mut Simulator, id: &mut u64, lba: u64| {
        newest[lba as usize] += 1;
        sim.submit(*id, Request::Write { lba, data: named_block(lba, newest[lba as usize]) });
        sim.run_until_response(*id).expect("answered").result.unwrap();
        *id += 1;
    };
    // Every LBA twice, one block at a time across the pages, so that evicted pages go to
    // the log as mapping blocks among newer versions of the data.
    for lba in (0..LOGICAL_BLOCKS).chain((0..LOGICAL_BLOCKS).map(|i| (i * 37) % LOGICAL_BLOCKS)) {
        write(&mut sim, &mut id, lba);
    }
    // Then the last page of the table, evicted by reads of two others: its mapping block
    // goes to the open segment, and it is the page a relocation's scan reads last (it is
    // still cached when the scan ends, so that eviction does not write it elsewhere).
    let last = LOGICAL_BLOCKS - 1;
    write(&mut sim, &mut id, last);
    let open = sim.engine.locate(last).expect("its page is cached").zone;
    for lba in [0, PAGE_ENTRIES] {
        sim.submit(id, Request::Read { lba, blocks: 1 });
        sim.run_until_response(id).expect("answered").result.unwrap();
        id += 1;
    }
    sim.run_until_idle();
    let page = (LOGICAL_BLOCKS / PAGE_ENTRIES - 1) as u32;
    let at = sim.engine.locate_page(page).expect("the last page was written back");
    assert_eq!(at.zone, open, "the last page's mapping block is in the open segment");
    // Cached again, clean, and no longer evicted: garbage collection cannot read its
    // mapping block, and nothing else writes the page elsewhere.
    sim.submit(id, Request::Read { lba: last, blocks: 1 });
    sim.run_until_response(id).expect("answered").result.unwrap();
    id += 1;
    sim.engine.set_l2p_budget(None);
    let failed = (at.drive + 1) % 4;
    sim.drives[failed].fail();
    sim.engine.fail_drive(failed);
    sim.drives[at.drive].corrupt_block(geometry.zone_start_lba(at.zone) + at.offset, 3).unwrap();
    sim.replace_drive(failed, 5).unwrap();
    sim.run_until_idle();
    let status = sim.engine.status();
    assert!(status.rebuild.is_none() && status.rebuilds_completed == 1, "the rebuild ended: {status:?}");
    assert_eq!(status.segments_to_reclaim, 0, "the segment open at the replace was reclaimed: {status:?}");
    assert!(sim.engine.locate_page(page).is_none_or(|p| p.zone != open), "the page left the segment");

    let mut check = |sim: &mut Simulator, when: &str| {
        for lba in 0..LOGICAL_BLOCKS {
            sim.submit(id, Request::Read { lba, blocks: 1 });
            let answer = sim.run_until_response(id).expect("every read is answered").result;
            id += 1;
            if let Ok(got) = answer {
                assert!(got == named_block(lba, newest[lba as usize]), "{when}: LBA {lba} read other data");
            }
        }
    };
    check(&mut sim, "after the rebuild");
    sim.stop();
    let drives = sim.power_cut().unwrap();
    let mut sim = Simulator::recover(geometry, config, drives).unwrap();
    check(&mut sim, "after a clean stop and a start");
}
