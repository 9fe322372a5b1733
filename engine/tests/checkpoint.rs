//! Checkpointed starts: a clean stop of an array that keeps a checkpoint writes its whole
//! L2P table back and hands out the checkpoint; the next start, offered it, reads no
//! footer of a Zone Write segment and maps every block from the directory; a checkpoint
//! that no longer matches the drives (written to, reclaimed, crashed) is not used, and
//! the full replay it falls back to still finds every acknowledged block.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zapraid_engine::format::CheckpointImage;
use zapraid_engine::{Mode, RaidLevel, Request, Simulator};

#[allow(dead_code)] // this binary uses part of what the checkpoint tests share
#[path = "common/checkpointed/mod.rs"]
mod checkpointed;
mod common;
use checkpointed::*;
use common::BLOCK;

#[test]
fn a_start_from_a_checkpoint_reads_less_and_finds_every_block() {
    for (level, mode) in schemes() {
        let (config, mut rng, mut model, mut sim) = fresh(level, mode, 11);
        // Enough overwrites that garbage collection runs.
        write_random(&mut sim, &mut model, &mut rng, 3 * LOGICAL_BLOCKS, 1);
        assert!(sim.engine.status().segments_reclaimed > 0, "{mode:?}: garbage collection ran");
        let (drives, image) = stop_and_checkpoint(sim);
        let generation = image.generation;
        assert!(image.directory.iter().any(|e| *e != u32::MAX), "pages were written back");

        // The same drives replayed in full first, for comparison (its start writes nothing
        // the checkpoint does not name: power is cut right after it).
        let full = Simulator::recover_with_checkpoint(geometry(), config, drives, &[], None).unwrap();
        let replayed = full.recovery_report;
        let drives = full.power_cut().unwrap();
        let checkpoint_blocks = (image.encode(BLOCK as u32).len() / BLOCK) as u64;
        let mut sim = Simulator::recover_with_checkpoint(geometry(), config, drives, &[], Some(image)).unwrap();
        let from_checkpoint = sim.recovery_report;
        eprintln!(
            "{level:?} {mode:?}: start read {} blocks from the checkpoint ({checkpoint_blocks} of it), {} replaying \
             every footer",
            from_checkpoint.blocks_read, replayed.blocks_read
        );
        assert_eq!(from_checkpoint.checkpoint_generation, Some(generation), "{mode:?}: the checkpoint was used");
        assert_eq!(replayed.checkpoint_generation, None);
        assert!(from_checkpoint.blocks_read < replayed.blocks_read, "{mode:?}: the checkpoint saved no reads");
        // Only the checkpoint and the headers were read (the stripe tables are in the
        // checkpoint).
        let headers = u64::from(ZONES) * sim.engine.layout().drives() as u64;
        assert!(
            from_checkpoint.blocks_read <= checkpoint_blocks + headers,
            "{} blocks read",
            from_checkpoint.blocks_read
        );
        // Nothing waits in memory: pages come from the drives as they are needed.
        assert_eq!(sim.engine.status().l2p.cached_pages, 0);
        check_reads(&mut sim, &model, "after the checkpointed start");
        sim.run_until_idle();

        // It keeps working: more writes and collections, a second stop and checkpoint.
        write_random(&mut sim, &mut model, &mut rng, 2 * LOGICAL_BLOCKS, 2);
        let (drives, image) = stop_and_checkpoint(sim);
        let generation = image.generation;
        let mut sim = Simulator::recover_with_checkpoint(geometry(), config, drives, &[], Some(image)).unwrap();
        assert_eq!(sim.recovery_report.checkpoint_generation, Some(generation));
        check_reads(&mut sim, &model, "after the second checkpointed start");
    }
}

#[test]
fn a_stale_checkpoint_is_not_used_and_the_replay_finds_every_block() {
    for (level, mode) in schemes() {
        let (config, mut rng, mut model, mut sim) = fresh(level, mode, 12);
        write_random(&mut sim, &mut model, &mut rng, LOGICAL_BLOCKS, 1);
        let (drives, image) = stop_and_checkpoint(sim);
        let generation = image.generation;

        // A start from it, a crash before anything is written: it still matches.
        let sim = Simulator::recover_with_checkpoint(geometry(), config, drives, &[], Some(image.clone())).unwrap();
        let drives = sim.power_cut().unwrap();
        let mut sim = Simulator::recover_with_checkpoint(geometry(), config, drives, &[], Some(image.clone())).unwrap();
        assert_eq!(sim.recovery_report.checkpoint_generation, Some(generation), "{mode:?}: nothing was written since");
        check_reads(&mut sim, &model, "after a crash with nothing written");

        // Writes and collections after it, then a crash: the drives hold segments it does
        // not name, and it names segments reclaimed since.
        write_random(&mut sim, &mut model, &mut rng, 2 * LOGICAL_BLOCKS, 2);
        let drives = sim.power_cut().unwrap();
        let mut sim = Simulator::recover_with_checkpoint(geometry(), config, drives, &[], Some(image)).unwrap();
        assert_eq!(sim.recovery_report.checkpoint_generation, None, "{mode:?}: the stale checkpoint was used");
        sim.run_until_idle();
        check_written(&mut sim, &model, &format!("{mode:?}: after the replay"));
    }
}

/// A crash after a start from a checkpoint, before garbage collection reset any segment it
/// names: the next start begins from the same checkpoint and replays only the segments
/// written after it, reading less than a full replay; every written block reads back,
/// also with a drive failed; the pages the replayed entries land in are read in the
/// background, and the array keeps going (collections, whose victims must map nothing
/// once moved, check the live counts) and leaves a checkpoint again.
#[test]
fn a_crash_after_a_start_from_a_checkpoint_replays_only_what_came_after() {
    for (level, mode) in schemes() {
        for failed in [None, Some(1)] {
            let (config, mut rng, mut model, mut sim) = fresh(level, mode, 15);
            write_random(&mut sim, &mut model, &mut rng, LOGICAL_BLOCKS, 1);
            let (drives, image) = stop_and_checkpoint(sim);
            let generation = image.generation;
            let mut sim =
                Simulator::recover_with_checkpoint(geometry(), config, drives, &[], Some(image.clone())).unwrap();
            write_random(&mut sim, &mut model, &mut rng, LOGICAL_BLOCKS / 8, 2);
            assert_eq!(sim.engine.status().segments_reclaimed, 0, "no segment the checkpoint names was reset");
            let mut drives = sim.power_cut().unwrap();
            let failed_list: Vec<usize> = failed.into_iter().collect();
            for &drive in &failed_list {
                drives[drive].fail();
            }
            let full = Simulator::recover_with_checkpoint(geometry(), config, drives, &failed_list, None).unwrap();
            let replayed_all = full.recovery_report;
            let drives = full.power_cut().unwrap();
            let mut sim =
                Simulator::recover_with_checkpoint(geometry(), config, drives, &failed_list, Some(image)).unwrap();
            let report = sim.recovery_report;
            let what = format!("{level:?} {mode:?} failed {failed:?}");
            eprintln!(
                "{what}: start after a crash read {} blocks from the checkpoint and {} segments written after it, {} \
                 replaying every segment",
                report.blocks_read, report.segments_replayed, replayed_all.blocks_read
            );
            assert_eq!(report.checkpoint_generation, Some(generation), "{what}: {report:?}");
            assert!(report.segments_replayed > 0, "{what}: {report:?}");
            assert!(report.blocks_read < replayed_all.blocks_read, "{what}: {report:?} against {replayed_all:?}");
            check_written(&mut sim, &model, &format!("{what}: after the crash"));
            sim.run_until_idle();
            // Garbage collection moves segments the checkpoint names, live counts exact.
            write_random(&mut sim, &mut model, &mut rng, 2 * LOGICAL_BLOCKS, 3);
            assert!(sim.engine.status().segments_reclaimed > 0, "{what}: garbage collection ran");
            check_written(&mut sim, &model, &format!("{what}: after more writes"));
            let (drives, image) = stop_and_checkpoint(sim);
            let generation = image.generation;
            let mut sim =
                Simulator::recover_with_checkpoint(geometry(), config, drives, &failed_list, Some(image)).unwrap();
            assert_eq!(sim.recovery_report.checkpoint_generation, Some(generation), "{what}");
            check_written(&mut sim, &model, &format!("{what}: after the next clean stop"));
        }
    }
}

/// After a start that replayed segments written after its checkpoint, the pages their
/// entries land in are read in the background within the memory budget (the reads wait
/// for eviction to make room); a clean stop right after such a start reads and writes
/// them back in batches, and leaves a checkpoint the next start uses.
#[test]
fn pages_read_after_a_crash_start_stay_within_the_budget() {
    let (level, mode) = (RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 });
    for stop_at_once in [false, true] {
        let (config, mut rng, mut model, mut sim) = fresh(level, mode, 16);
        write_random(&mut sim, &mut model, &mut rng, LOGICAL_BLOCKS / 2, 1);
        let (drives, image) = stop_and_checkpoint(sim);
        let mut sim = Simulator::recover_with_checkpoint(geometry(), config, drives, &[], Some(image.clone())).unwrap();
        write_random(&mut sim, &mut model, &mut rng, LOGICAL_BLOCKS / 4, 2);
        let drives = sim.power_cut().unwrap();
        let mut sim = Simulator::recover_with_checkpoint(geometry(), config, drives, &[], Some(image)).unwrap();
        assert!(sim.recovery_report.segments_replayed > 0, "{:?}", sim.recovery_report);
        if stop_at_once {
            let (drives, image) = stop_and_checkpoint(sim);
            let generation = image.generation;
            sim = Simulator::recover_with_checkpoint(geometry(), config, drives, &[], Some(image)).unwrap();
            assert_eq!(sim.recovery_report.checkpoint_generation, Some(generation));
        } else {
            sim.run_until_idle();
            let l2p = sim.engine.status().l2p;
            eprintln!("after a crash start: peak {} cached pages, budget {BUDGET_PAGES}", l2p.peak_cached_pages);
            assert!(l2p.peak_cached_pages <= BUDGET_PAGES + 1, "{l2p:?}");
            // Every page was read (in the background, or by the scan of the collection that
            // reclaims the segment open at the crash): the live counts are exact, as many
            // blocks mapped as read back (the read itself reads every page: counted first).
            let counted = sim.engine.status().mapped_blocks;
            let id = u64::MAX - 4;
            sim.submit(id, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
            let got = sim.run_until_response(id).unwrap().result.unwrap();
            let mapped = got.chunks_exact(BLOCK).filter(|b| b.iter().any(|x| *x != 0)).count() as u64;
            assert_eq!(counted, mapped, "blocks counted live before the read, blocks read back");
        }
        check_written(&mut sim, &model, &format!("stop at once: {stop_at_once}"));
    }
}

#[test]
fn a_checkpoint_after_a_full_replay_holds_every_recovered_entry() {
    let (config, mut rng, mut model, mut sim) =
        fresh(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 }, 13);
    write_random(&mut sim, &mut model, &mut rng, LOGICAL_BLOCKS, 1);
    // A crash: the next start replays everything into the recovery overlay.
    let drives = sim.power_cut().unwrap();
    let sim = Simulator::recover(geometry(), config, drives).unwrap();
    assert_eq!(sim.recovery_report.checkpoint_generation, None);
    // Discards are not durable across the crash: the model takes what the replay found.
    let mut sim = sim;
    let id = u64::MAX - 3;
    sim.submit(id, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
    let got = sim.run_until_response(id).unwrap().result.unwrap();
    let model: HashMap<u64, Vec<u8>> = (0..LOGICAL_BLOCKS)
        .map(|lba| (lba, got[lba as usize * BLOCK..][..BLOCK].to_vec()))
        .filter(|(_, b)| b.iter().any(|x| *x != 0))
        .collect();
    // The stop writes every page the overlay touches back.
    let (drives, image) = stop_and_checkpoint(sim);
    let generation = image.generation;
    let mut sim = Simulator::recover_with_checkpoint(geometry(), config, drives, &[], Some(image)).unwrap();
    assert_eq!(sim.recovery_report.checkpoint_generation, Some(generation));
    check_reads(&mut sim, &model, "after a checkpoint taken over a full replay");
}

#[test]
fn a_checkpointed_start_with_a_failed_drive_reads_every_block() {
    for (level, mode) in schemes() {
        let (config, mut rng, mut model, mut sim) = fresh(level, mode, 14);
        write_random(&mut sim, &mut model, &mut rng, 2 * LOGICAL_BLOCKS, 1);
        let (mut drives, image) = stop_and_checkpoint(sim);
        let generation = image.generation;
        drives[1].fail();
        let mut sim = Simulator::recover_with_checkpoint(geometry(), config, drives, &[1], Some(image)).unwrap();
        assert_eq!(sim.recovery_report.checkpoint_generation, Some(generation), "{mode:?}");
        check_reads(&mut sim, &model, &format!("{mode:?} degraded, from the checkpoint"));
    }
}

/// Under garbage collection, with no clean stop at all: the engine takes checkpoints while
/// it runs (resets wait for them), so a crash starts from the newest one, replaying only
/// the segments opened since and those it found open, and reads less than a full replay
/// of the same drives (the same run twice: the simulation is deterministic). Every
/// written block reads back, and the array keeps going.
#[test]
fn under_garbage_collection_a_crash_starts_from_a_checkpoint_taken_while_running() {
    for (level, mode) in schemes() {
        let crashed = |offer: bool| {
            let (config, mut rng, mut model, mut sim) = fresh(level, mode, 21);
            let mut newest = None;
            for round in 1..=4 {
                write_random(&mut sim, &mut model, &mut rng, LOGICAL_BLOCKS, round);
                newest = sim.take_running_checkpoint().or(newest);
            }
            let status = sim.engine.status();
            assert!(status.segments_reclaimed > 0, "{mode:?}: garbage collection ran: {status:?}");
            let image: CheckpointImage = newest.expect("checkpoints were taken while running");
            assert!(image.segments.iter().any(|s| s.appending), "{mode:?}: it names the open segments");
            let generation = image.generation;
            let drives = sim.power_cut().unwrap();
            let sim =
                Simulator::recover_with_checkpoint(geometry(), config, drives, &[], offer.then_some(image)).unwrap();
            (sim, model, generation, status)
        };
        let (full, _, _, _) = crashed(false);
        let (mut sim, mut model, generation, status) = crashed(true);
        let (reclaimed, l2p) = (status.segments_reclaimed, status.l2p);
        let (report, replayed) = (sim.recovery_report, full.recovery_report);
        eprintln!(
            "{level:?} {mode:?}: {reclaimed} segments reclaimed, no clean stop; start after a crash read {} blocks \
             from checkpoint {generation} (taken while running) and {} segments after or open at it, {} replaying \
             every segment; {} checkpoints taken while running, {} of them incremental, {} bytes of images",
            report.blocks_read,
            report.segments_replayed,
            replayed.blocks_read,
            l2p.checkpoints_running,
            l2p.checkpoints_incremental,
            l2p.checkpoint_image_bytes
        );
        // Garbage collection seals segments with stripe tables between checkpoints: the
        // images after a full one leave out the tables it holds.
        if mode != Mode::ZoneWriteOnly {
            assert!(l2p.checkpoints_incremental > 0, "{mode:?}: {l2p:?}");
        }
        assert_eq!(report.checkpoint_generation, Some(generation), "{mode:?}: {report:?}");
        assert!(report.blocks_read < replayed.blocks_read, "{mode:?}: {report:?} vs {replayed:?}");
        sim.run_until_idle();
        check_written(&mut sim, &model, &format!("{mode:?}: after the crash start"));
        let mut rng = ChaCha8Rng::seed_from_u64(22);
        write_random(&mut sim, &mut model, &mut rng, LOGICAL_BLOCKS, 9);
        // Discards before the crash may be back (not in the log): written blocks compared.
        check_written(&mut sim, &model, &format!("{mode:?}: after more writes"));
    }
}

/// Requests that come while a running checkpoint drains wait for it, in order: a write
/// before a clean stop asked for meanwhile is written, one after it is refused as during
/// a stop, and a scrub asked for meanwhile starts (it would begin once the checkpoint is
/// written; the stop ends it).
#[test]
fn requests_during_a_running_checkpoint_wait_for_it_and_a_stop_asked_for_comes_after() {
    let (level, mode) = (RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 });
    let (_, mut rng, _, mut sim) = fresh(level, mode, 31);
    let mut id = 0;
    while !sim.engine.checkpoint_in_progress() {
        let lba = rng.random_range(0..LOGICAL_BLOCKS);
        sim.submit(id, Request::Write { lba, data: common::named_block(lba, id) });
        id += 1;
        assert!(id < 20 * LOGICAL_BLOCKS, "no checkpoint was taken while running");
        while !sim.engine.checkpoint_in_progress() && sim.step() {}
    }
    let (before, after) = (id, id + 1);
    sim.submit(before, Request::Write { lba: 7, data: common::named_block(7, before) });
    sim.begin_stop();
    sim.submit(after, Request::Write { lba: 8, data: common::named_block(8, after) });
    sim.start_scrub(None).expect("a scrub asked for during a running checkpoint starts");
    assert!(sim.engine.checkpoint_in_progress() && !sim.engine.is_stopped());
    let responses = sim.run_until_idle();
    assert!(sim.engine.is_stopped(), "the stop came after the checkpoint");
    let result = |id| responses.iter().find(|r| r.id == id).map(|r| r.result.is_ok());
    assert_eq!(result(before), Some(true), "the write held before the stop was written");
    assert_eq!(result(after), Some(false), "the write held after the stop was refused");
    assert!(sim.take_running_checkpoint().is_some(), "the checkpoint was written");
}

/// A scrub that runs while the engine takes checkpoints (garbage collection under random
/// writes) pauses for each: the stripes whose reads complete while one drains are read
/// again after it. The scrubs still find the damage planted in a cold segment (data
/// written once, which garbage collection leaves alone) and repair it; a crash then starts
/// from the newest checkpoint and every written block reads back.
#[test]
fn a_scrub_pauses_for_running_checkpoints_and_still_finds_the_damage() {
    const COLD: std::ops::Range<u64> = LOGICAL_BLOCKS / 2..LOGICAL_BLOCKS;
    const BATCHES: u64 = 480;
    let mut read_again_in_all = 0;
    for (level, mode) in schemes() {
        let (config, mut rng, mut model, mut sim) = fresh(level, mode, 31);
        for (id, lba) in (5_000_000..).zip(COLD) {
            let data = common::named_block(lba, id);
            model.insert(lba, data.clone());
            sim.submit(id, Request::Write { lba, data });
            if lba % 8 == 7 {
                sim.run_until_idle().into_iter().for_each(|r| drop(r.result.expect("a cold write failed")));
            }
        }
        sim.run_until_idle().into_iter().for_each(|r| drop(r.result.expect("a cold write failed")));
        // One live cold block damaged, in a segment sealed by now (the cold data's first).
        sim.submit(4_999_999, Request::Read { lba: COLD.start, blocks: 1 }); // its page cached
        sim.run_until_response(4_999_999).expect("answered").result.expect("read");
        let damaged = sim.engine.locate(COLD.start).expect("mapped, its page cached");
        sim.drives[damaged.drive].corrupt_block(geometry().zone_start_lba(damaged.zone) + damaged.offset, 9).unwrap();

        let (mut read_again, mut found, mut rewritten, mut scrubs) = (0, 0, 0, 0);
        let running_before = sim.engine.status().l2p.checkpoints_running;
        for batch in 0..BATCHES {
            if batch % 2 == 0 {
                sim.start_scrub(None).expect("no scrub runs between batches");
            }
            for (id, i) in (6_000_000 + batch * 8..).zip(0..8) {
                let lba = rng.random_range(0..COLD.start);
                let data = common::named_block(lba, id + i);
                model.insert(lba, data.clone());
                sim.submit(id, Request::Write { lba, data });
            }
            sim.run_until_idle().into_iter().for_each(|r| drop(r.result.expect("a hot write failed")));
            let status = sim.engine.scrub_status();
            assert!(status.running.is_none(), "the scrub ends with the batch it ran with");
            if batch % 2 == 0 {
                let report = status.last.expect("a scrub finished");
                assert_eq!(report.blocks_unrecoverable, 0, "{level:?} {mode:?}: {report:?}");
                read_again += report.stripes_read_again;
                found += report.blocks_damaged;
                rewritten += report.blocks_rewritten;
                scrubs += 1;
            }
        }
        let checkpoints = sim.engine.status().l2p.checkpoints_running - running_before;
        eprintln!(
            "{level:?} {mode:?}: {scrubs} scrubs under {} hot writes, {checkpoints} checkpoints taken while running, \
             {read_again} stripes read again after one, {found} damaged blocks found, {rewritten} rewritten",
            BATCHES * 8
        );
        read_again_in_all += read_again;
        assert!(found >= 1 && rewritten >= 1, "{level:?} {mode:?}: the planted damage was not found and repaired");
        let newest = sim.take_running_checkpoint().expect("checkpoints were taken while running");
        let drives = sim.power_cut().unwrap();
        let mut sim = Simulator::recover_with_checkpoint(geometry(), config, drives, &[], Some(newest)).unwrap();
        assert!(sim.recovery_report.checkpoint_generation.is_some(), "{:?}", sim.recovery_report);
        check_written(&mut sim, &model, &format!("{level:?} {mode:?}: after the crash"));
    }
    assert!(read_again_in_all > 0, "no scrub read overlapped a running checkpoint");
}
