//! Declustered arrays (issue 35): N drives, each segment on k + m of them
//! (`Config::declustering`, `placement`, `lanes`). Writes, garbage collection, reads,
//! degraded reads with drives failed, and a damaged block rebuilt, all against a reference
//! map of what each block holds; every drive of the array holds segments.

use std::collections::HashMap;

use zapraid_engine::{Mode, OpenSegments, RaidLevel, Simulator};
use zapraid_zns::ZoneState;

mod common;
use common::declustered::{geometry, schemes, Run, Scheme, LOGICAL_BLOCKS, ZONES};

fn run_scheme(scheme: Scheme) {
    let mut run = Run::new(scheme);
    assert_eq!(run.sim.drives.len(), scheme.drives as usize);
    assert_eq!(run.sim.engine.drive_count(), scheme.drives as usize);
    // Twice the array's segments' worth: garbage collection makes room.
    run.fill(20);
    run.verify("after the writes");
    let status = run.sim.engine.status();
    assert!(status.segments_reclaimed > 0, "{}: garbage collection never ran: {status:?}", run.what);
    assert_eq!(run.drives_written(), scheme.drives as usize, "{}: every drive holds segments", run.what);

    // A damaged block is rebuilt from the other drives of its stripe, wherever they are.
    let at = run.sim.engine.locate(7).expect("LBA 7 is mapped");
    let (drive, lba) = run.sim.engine.drive_block(at);
    run.sim.drives[drive].corrupt_block(lba, 100).unwrap();
    run.verify("with a damaged block");
    // The read rewrote the damaged block's row elsewhere: let that finish before a drive
    // fails (a damaged block and a failed drive in one stripe are two faults).
    run.sim.run_until_idle();
    assert_eq!(run.sim.engine.status().read_blocks_repaired, 1, "{}", run.what);

    // Drives fail, as many as parity covers: every block still reads, and writes go on.
    let m = scheme.level.tolerated_failures();
    for drive in [2usize, 9].into_iter().take(m) {
        run.pull(drive);
        run.verify(&format!("with drive {drive} failed"));
    }
    for _ in 0..4 {
        run.write_round(0..LOGICAL_BLOCKS / 2);
    }
    run.verify("after writes with drives failed");
    let failed: Vec<usize> = run.sim.engine.status().failed_drives;
    assert_eq!(failed.len(), m, "{}: only the pulled drives failed: {failed:?}", run.what);
}

/// A drive fails and is rebuilt into distributed spare space while writes and reads go
/// on: no segment keeps a lane on it, the array is fully redundant again without a new
/// drive, and m more drives may fail with every block still read back. Then the first
/// drive is replaced by a new one, rebuilt lane by lane (each segment's lane on it).
fn spare_rebuild(scheme: Scheme) {
    let mut run = Run::new(scheme);
    run.fill(12);
    let failed = 4;
    run.pull(failed);
    run.write_round(0..LOGICAL_BLOCKS / 4);
    run.sim.rebuild_into_spares(failed).unwrap_or_else(|e| panic!("{}: into spares: {e}", run.what));
    let rebuilding = run.sim.engine.rebuild_status().expect("a rebuild runs");
    assert!(rebuilding.segments_left > 0, "{}: nothing to rebuild: {rebuilding:?}", run.what);
    run.verify("as the rebuild into spare space starts");
    for _ in 0..2 {
        run.write_round(LOGICAL_BLOCKS / 4..LOGICAL_BLOCKS / 2);
        run.verify("while the drive is rebuilt into spare space");
    }
    run.sim.run_until_idle();
    let status = run.sim.engine.status();
    assert!(status.rebuild.is_none(), "{}: the rebuild did not finish: {status:?}", run.what);
    assert_eq!(status.rebuilds_completed, 1, "{}", run.what);
    assert_eq!(run.sim.engine.drives_in_spare_space(), vec![failed], "{}", run.what);
    let spread = status.declustered.expect("a declustered array says so");
    assert_eq!((spread.drives, spread.distributed_spares), (scheme.drives, 1), "{}", run.what);
    assert_eq!(spread.drives_in_spare_space, vec![failed], "{}", run.what);
    // The failed drive's lanes now take spare zones.
    assert!(spread.spare_zones_used > 0 && spread.spare_zones_used <= spread.spare_zones, "{}: {spread:?}", run.what);
    run.verify("after the rebuild into spare space");
    // Fully redundant again: as many more drives as parity covers may fail.
    let m = scheme.level.tolerated_failures();
    let others: Vec<usize> = [1usize, 8].into_iter().take(m).collect();
    for &drive in &others {
        run.pull(drive);
    }
    run.verify(&format!("with drives {others:?} failed after the rebuild into spare space"));
    run.write_round(0..LOGICAL_BLOCKS / 4);
    run.verify("after writes with those drives failed");
}

#[test]
fn a_failed_drive_is_rebuilt_into_distributed_spare_space() {
    for scheme in schemes() {
        spare_rebuild(scheme);
    }
}

/// A drive of a declustered array replaced by a new one is rebuilt lane by lane: each
/// segment's chunks on it, whichever lane they are, and then another drive may fail.
#[test]
fn a_replaced_drive_of_a_declustered_array_is_rebuilt() {
    for scheme in schemes() {
        let mut run = Run::new(scheme);
        run.fill(12);
        run.pull(6);
        run.verify("with drive 6 failed");
        run.sim.replace_drive(6, 99).unwrap_or_else(|e| panic!("{}: replace: {e}", run.what));
        run.write_round(0..LOGICAL_BLOCKS / 2);
        run.verify("while drive 6 is rebuilt");
        run.sim.run_until_idle();
        let status = run.sim.engine.status();
        assert!(status.rebuild.is_none() && status.failed_drives.is_empty(), "{}: {status:?}", run.what);
        let m = scheme.level.tolerated_failures();
        for drive in [0usize, 10].into_iter().take(m) {
            run.pull(drive);
        }
        run.verify("with others failed after the replace");
    }
}

/// A classic array has no spare space to rebuild into: refused, plainly.
#[test]
fn a_classic_array_has_no_spare_space() {
    let scheme = Scheme { drives: 5, spares: 0, ..schemes()[0] };
    let mut run = Run::new(scheme);
    run.write_round(0..LOGICAL_BLOCKS);
    run.pull(1);
    let refused = run.sim.rebuild_into_spares(1).expect_err("refused");
    assert!(refused.to_string().contains("no distributed spare space"), "{refused}");
}

#[test]
fn declustered_arrays_read_back_what_was_written() {
    for scheme in schemes() {
        run_scheme(scheme);
    }
}

/// A scrub of a declustered array reads every chunk from the drive that holds it and
/// finds nothing wrong with a clean array.
#[test]
fn a_scrub_of_a_declustered_array_is_clean() {
    let scheme = schemes()[0];
    let mut run = Run::new(scheme);
    run.fill(3);
    run.sim.start_scrub(None).unwrap();
    run.sim.run_until_idle();
    let report = run.sim.engine.scrub_status().last.expect("a scrub finished");
    assert!(report.segments_checked > 2 && report.blocks_checked > 0, "{report:?}");
    assert_eq!((report.blocks_damaged, report.parity_mismatches), (0, 0), "{report:?}");
    run.verify("after the scrub");
}

/// N = k + m given explicitly is the classic array.
#[test]
fn an_array_as_wide_as_its_stripes_is_classic() {
    let scheme = Scheme { drives: 5, spares: 0, ..schemes()[0] };
    let mut run = Run::new(scheme);
    run.write_round(0..LOGICAL_BLOCKS);
    run.verify("classic");
    let status = run.sim.engine.status();
    assert!(status.zones == ZONES && status.declustered.is_none(), "a segment per zone: {status:?}");
}

/// The drives after a power cut (`Simulator::power_cut`; after a clean stop if `clean`),
/// and the array recovered from them with `failed` drives recorded failed, and those
/// rebuilt into spare space recorded so.
fn restart(run: &mut Run, scheme: Scheme, failed: &[usize], clean: bool) {
    if clean {
        run.sim.stop();
    }
    let spared = run.sim.engine.drives_in_spare_space();
    let placeholder = Simulator::new(geometry(), scheme.config(), 0, None).unwrap();
    let drives = std::mem::replace(&mut run.sim, placeholder).power_cut().unwrap();
    run.sim = Simulator::recover_with_spared(geometry(), scheme.config(), drives, failed, &spared, None)
        .unwrap_or_else(|e| panic!("{}: restart: {e}", run.what));
    run.sim.run_until_idle();
}

/// A declustered array starts again from its drives, after a clean stop and after a power
/// cut, and every acknowledged block reads back.
#[test]
fn a_declustered_array_restarts() {
    for scheme in schemes() {
        let mut run = Run::new(scheme);
        run.fill(10);
        restart(&mut run, scheme, &[], true);
        run.verify("after a clean stop and a start");
        run.write_round(0..LOGICAL_BLOCKS / 3);
        restart(&mut run, scheme, &[], false);
        run.verify("after a power cut and a start");
        run.write_round(0..LOGICAL_BLOCKS);
        run.verify("after writes since the start");
    }
}

/// A start finds the lanes a rebuild moved into spare space from the segment headers:
/// after the rebuild and a power cut, with the failed drive still failed, another drive
/// fails and every block still reads back (had the start left those lanes on the failed
/// drive, their stripes would have lost two chunks).
#[test]
fn a_start_finds_lanes_moved_into_spare_space() {
    for scheme in schemes() {
        let mut run = Run::new(scheme);
        let failed = 3;
        run.fill_and_spare(12, failed);
        run.sim.run_until_idle();
        assert_eq!(run.sim.engine.drives_in_spare_space(), vec![failed], "{}: {:?}", run.what, run.sim.engine.status());
        run.write_round(0..LOGICAL_BLOCKS / 2);
        restart(&mut run, scheme, &[failed], false);
        run.verify("after a start with the drive rebuilt into spare space");
        let another = 7;
        run.pull(another);
        run.verify("with another drive failed after the start");
    }
}

/// After a start, a rebuild into spare space started again finds nothing left to write:
/// every segment was found on the drives it had moved to.
#[test]
fn a_rebuild_into_spare_space_started_again_after_a_start_has_nothing_to_write() {
    let scheme = schemes()[0];
    let mut run = Run::new(scheme);
    let failed = 3;
    run.fill_and_spare(12, failed);
    run.sim.run_until_idle();
    restart(&mut run, scheme, &[failed], true);
    run.sim.rebuild_into_spares(failed).unwrap();
    run.sim.run_until_idle();
    let last = run.sim.engine.last_rebuild().expect("the rebuild ended");
    assert_eq!((last.segments_rebuilt, last.blocks_written), (0, 0), "{last:?}");
    assert_eq!(run.sim.engine.drives_in_spare_space(), vec![failed]);
    run.verify("after the rebuild started again");
}

/// Power is cut part way through a rebuild into spare space: the start leaves unfinished
/// lanes on the failed drive (read from the others), the rebuild started again finishes
/// them, and then another drive may fail.
#[test]
fn a_rebuild_into_spare_space_cut_short_is_started_again() {
    for scheme in schemes() {
        let mut run = Run::new(scheme);
        let failed = 5;
        run.fill_and_spare(12, failed);
        // Cut once the rebuild has written something, and not everything.
        while run.sim.engine.rebuild_status().is_some_and(|r| r.blocks_written < 40) && run.sim.step() {}
        let rebuilding = run.sim.engine.rebuild_status().expect("the rebuild is under way");
        assert!(rebuilding.segments_left > 0, "{}: {rebuilding:?}", run.what);
        restart(&mut run, scheme, &[failed], false);
        run.verify("after a power cut during the rebuild into spare space");
        run.sim.rebuild_into_spares(failed).unwrap();
        run.sim.run_until_idle();
        assert_eq!(run.sim.engine.drives_in_spare_space(), vec![failed], "{}", run.what);
        let another = 0;
        run.pull(another);
        run.verify("with another drive failed after the rebuild started again");
    }
}

/// Each zone of a declustered segment starts with a header naming the segment's number
/// and every lane's drive (280 bytes, docs/FORMAT.md); after a rebuild into spare space,
/// the rebuilt lane's header names its new drive.
#[test]
fn segment_headers_name_their_lanes_drives() {
    use zapraid_engine::format::{SegmentHeader, DECLUSTERED_SEGMENT_HEADER_BYTES};
    let scheme = schemes()[0];
    let mut run = Run::new(scheme);
    let failed = 2;
    run.fill_and_spare(6, failed);
    run.sim.run_until_idle();
    let geometry = geometry();
    let mut headers = 0;
    for drive in (0..run.sim.drives.len()).filter(|d| *d != failed) {
        for row in 0..ZONES {
            if run.sim.drives[drive].zones()[row as usize].state == ZoneState::Empty {
                continue;
            }
            let block = common::read_block(&mut run.sim.drives[drive], geometry.zone_start_lba(row));
            let (header, lanes) = SegmentHeader::decode_with_lanes(&block).expect("a header");
            assert_eq!(header.header_bytes.get() as usize, DECLUSTERED_SEGMENT_HEADER_BYTES);
            let lane = header.drive_index.get() as usize;
            assert_eq!(lanes.drive_of_lane(lane), Some(drive as u32), "drive {drive} zone {row}: {lanes:?}");
            assert_eq!(lanes.segment_number.get() / 2, row, "two segments per row");
            headers += 1;
        }
    }
    assert!(headers > 10, "{headers} headers read");
}

/// RAID-6 4+2 over 14 drives with two distributed spares.
fn raid6_two_spares() -> Scheme {
    Scheme {
        level: RaidLevel::Raid6 { drives: 6 },
        drives: 14,
        spares: 2,
        mode: Mode::ZapRaid { group_size: 4 },
        chunk_blocks: 1,
        open: OpenSegments::SINGLE,
    }
}

/// Found in review: a late error completion of a command the failed drive had in flight
/// (`fail_drive` of that drive again) stopped its rebuild into spare space, and the drive
/// was then reported in spare space with segments not rebuilt (two more failures of a
/// RAID-6 then lost 62 blocks). The rebuild goes on; two more drives may fail after it.
#[test]
fn a_late_failure_of_the_drive_does_not_stop_its_rebuild_into_spare_space() {
    let scheme = raid6_two_spares();
    let mut run = Run::new(scheme);
    let failed = 3;
    run.fill_and_spare(3, failed);
    run.sim.engine.fail_drive(failed);
    assert!(run.sim.engine.rebuild_status().is_some(), "the rebuild goes on");
    run.sim.run_until_idle();
    assert_eq!(run.sim.engine.status().rebuilds_completed, 1);
    assert_eq!(run.sim.engine.drives_in_spare_space(), vec![failed]);
    run.pull(0);
    run.pull(9);
    run.verify("with two more drives failed after the rebuild into spare space");
}

/// Found in review: a spare drive that fails while a rebuild into spare space writes to
/// it stops that rebuild with segments still lacking their moved lane on other drives; a
/// rebuild of the spare drive then overwrote which lane a segment lacked, and reads
/// trusted an empty zone. Now that rebuild is refused while a segment lacks another
/// lane; the first drive's rebuild started again moves the lanes whose target failed and
/// finishes, then the other drive's; then two more drives may fail. (The drive that fails
/// mid-rebuild is one the rebuild has commands in flight on: a target or a source.)
#[test]
fn a_spare_target_failing_mid_rebuild_is_rebuilt_after_the_first_drive() {
    let scheme = raid6_two_spares();
    let mut run = Run::new(scheme);
    let failed = 3;
    run.fill_and_spare(12, failed);
    for _ in 0..3 {
        run.sim.step();
    }
    // A drive the rebuild is busy with (reading from it, or writing moved lanes to it).
    let busy = |d: &usize| *d != failed && zapraid_zns::ZonedDevice::in_flight(&run.sim.drives[*d]) > 0;
    let target = (0..scheme.drives as usize).find(busy).expect("the rebuild has commands in flight");
    run.pull(target);
    run.sim.run_until_idle();
    run.verify("with the spare target failed");
    let first = run.sim.rebuild_into_spares(target);
    if let Err(e) = &first {
        assert!(e.to_string().contains("still lacks its chunks"), "{e}");
    }
    run.sim.run_until_idle();
    run.sim.rebuild_into_spares(failed).unwrap();
    run.sim.run_until_idle();
    if first.is_err() {
        run.sim.rebuild_into_spares(target).unwrap();
        run.sim.run_until_idle();
    }
    let mut spared = run.sim.engine.drives_in_spare_space();
    spared.sort_unstable();
    let mut both = vec![failed, target];
    both.sort_unstable();
    assert_eq!(spared, both, "{:?}", run.sim.engine.status());
    run.verify("with both rebuilt into spare space");
    let others: Vec<usize> = (0..scheme.drives as usize).filter(|d| !both.contains(d)).take(2).collect();
    for drive in others {
        run.pull(drive);
    }
    run.verify("with two more drives failed");
}

/// Found in review: a segment opened after a drive's lanes moved into spare space, cut by
/// a power loss while it was being sealed (some of its zones finished, the moved lane's
/// not yet), had that lane put back on the failed drive at the start and its zone, the
/// lane's only copy, reset; one more failure then failed 90 reads. The start now takes the
/// lane where the segment's other headers say it was opened. Seeds and cut points where
/// the review saw it (RAID-5 4+1 over 12 drives, two spares, ZN540 timing).
#[test]
fn a_segment_cut_while_sealing_keeps_its_lane_in_spare_space() {
    use zapraid_engine::l2p::Physical;
    let scheme = Scheme { drives: 12, spares: 2, ..schemes()[0] };
    for (seed, mut skip) in [(12u64, 6usize), (15, 9)] {
        let timing = Some(zapraid_zns::TimingParams::zn540());
        let sim = Simulator::new(geometry(), scheme.config(), seed, timing).unwrap();
        let mut run = Run { sim, model: HashMap::new(), next_id: 0, round: 0, what: format!("seed {seed}") };
        let lane_drive =
            |run: &Run, zone: u32, lane: usize| run.sim.engine.drive_block(Physical { zone, drive: lane, offset: 0 });
        let placed: Vec<Vec<usize>> =
            (0..ZONES * 2).map(|e| (0..5).map(|l| lane_drive(&run, e, l).0).collect()).collect();
        run.fill(3);
        let failed = 3;
        run.pull(failed);
        run.sim.rebuild_into_spares(failed).unwrap();
        run.sim.run_until_idle();
        // Step writes until a segment with a moved lane is sealing: another of its zones
        // full, the moved lane's not.
        let zs = geometry().zone_size_blocks;
        let full = |run: &Run, zone: u32, lane: usize| {
            let (drive, lba) = lane_drive(run, zone, lane);
            run.sim.drives[drive].zones()[(lba / zs) as usize].state == ZoneState::Full
        };
        let mut found = None;
        'writes: for _ in 0..40 {
            run.submit_round(0..LOGICAL_BLOCKS);
            while run.sim.step() {
                for zone in run.sim.engine.zones_holding_segments() {
                    let Some(lane) = (0..5).find(|&l| lane_drive(&run, zone, l).0 != placed[zone as usize][l]) else {
                        continue;
                    };
                    if !full(&run, zone, lane) && (0..5).any(|o| o != lane && full(&run, zone, o)) {
                        if skip == 0 {
                            found = Some((zone, lane, lane_drive(&run, zone, lane).0));
                            break 'writes;
                        }
                        skip -= 1;
                    }
                }
            }
        }
        let Some((zone, lane, spare)) = found else { panic!("seed {seed}: no segment cut while sealing") };
        let spared = run.sim.engine.drives_in_spare_space();
        let placeholder = Simulator::new(geometry(), scheme.config(), 0, None).unwrap();
        let drives = std::mem::replace(&mut run.sim, placeholder).power_cut().unwrap();
        run.sim =
            Simulator::recover_with_spared(geometry(), scheme.config(), drives, &[failed], &spared, None).unwrap();
        run.sim.run_until_idle();
        assert_eq!(lane_drive(&run, zone, lane).0, spare, "seed {seed}: the lane went back to the failed drive");
    }
}
