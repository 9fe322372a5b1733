//! Power cuts after damage beyond parity while a drive is rebuilt or after a rebuild ended
//! over blocks it could not reconstruct: the start must know those blocks are lost (reads
//! answer `Error::Lost` or another error), never answer zeros or an older version.

use zapraid_engine::{Error, Mode, RaidLevel, Request, Simulator};

mod common;
use common::named_block;

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
