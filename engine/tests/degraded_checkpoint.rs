//! Checkpoints taken while running with a drive failed, or while a failed drive is
//! rebuilt onto a new one, and the starts after a crash that begin from them.

use zapraid_engine::format::CheckpointImage;
use zapraid_engine::{Mode, Simulator};

#[allow(dead_code)] // this binary uses part of what the checkpoint tests share
#[path = "common/checkpointed/mod.rs"]
mod checkpointed;
mod common;
use checkpointed::*;

/// A drive fails while the array runs under garbage collection: the engine keeps taking
/// checkpoints while running, and those name the open segments with their stripe tables
/// as far as written (with Zone Append, where the failed drive's chunks went is known
/// only to the engine). A crash then starts from the newest one with the drive still
/// failed, reads less than a full replay, and every written block reads back (rebuilt
/// from parity where it was on the failed drive).
#[test]
fn with_a_drive_failed_a_crash_starts_from_a_checkpoint_taken_while_running() {
    const FAILED: usize = 1;
    const BATCH_WRITES: u64 = 64;
    const MAX_BATCHES: u64 = 200;
    const MIN_LIVE_APPENDING: u64 = 32;
    for ((level, mode), seed) in schemes().into_iter().zip(33..) {
        let crashed = |offer: bool| {
            let (config, mut rng, mut model, mut sim) = fresh(level, mode, seed);
            write_random(&mut sim, &mut model, &mut rng, LOGICAL_BLOCKS / 2, 1);
            sim.drives[FAILED].fail();
            write_random(&mut sim, &mut model, &mut rng, LOGICAL_BLOCKS / 2, 2);
            let before = sim.engine.status().l2p;
            assert_eq!(sim.engine.status().failed_drives, vec![FAILED], "{mode:?}: the failure was noticed");
            // Batches until garbage collection ran and the newest checkpoint maps blocks
            // into a segment it names appending: its pages point at chunks of the failed
            // drive that only its tables place.
            let mut newest: Option<CheckpointImage> = None;
            let mut live_appending = 0;
            for batch in 0..MAX_BATCHES {
                write_random(&mut sim, &mut model, &mut rng, BATCH_WRITES, 3 + batch);
                newest = sim.take_running_checkpoint().or(newest);
                let segments = newest.iter().flat_map(|image| &image.segments);
                live_appending = segments.filter(|s| s.appending).map(|s| s.live_blocks).sum();
                if sim.engine.status().segments_reclaimed > 0 && live_appending >= MIN_LIVE_APPENDING {
                    break;
                }
            }
            assert!(
                live_appending >= MIN_LIVE_APPENDING,
                "{mode:?}: {live_appending} blocks mapped into open segments"
            );
            let status = sim.engine.status();
            assert!(status.segments_reclaimed > 0, "{mode:?}: garbage collection ran: {status:?}");
            let degraded = status.l2p.checkpoints_running - before.checkpoints_running;
            assert!(degraded > 0, "{mode:?}: no checkpoint taken while the drive was failed: {:?}", status.l2p);
            let image: CheckpointImage = newest.expect("checkpoints were taken while running");
            let generation = image.generation;
            let sim = crash_and_start(sim, config, mode, image, FAILED, offer);
            (sim, model, generation, degraded, live_appending)
        };
        let (full, _, _, _, _) = crashed(false);
        let (mut sim, model, generation, degraded, live_appending) = crashed(true);
        let (report, replayed) = (sim.recovery_report, full.recovery_report);
        eprintln!(
            "{level:?} {mode:?}, drive {FAILED} failed: {degraded} checkpoints taken while running with it failed; \
             the start after a crash read {} blocks from checkpoint {generation} (its pages mapping \
             {live_appending} blocks into the open segments it names) and {} segments after or open at it, {} \
             replaying every segment",
            report.blocks_read, report.segments_replayed, replayed.blocks_read
        );
        assert_eq!(report.checkpoint_generation, Some(generation), "{mode:?}: {report:?}");
        assert!(report.blocks_read < replayed.blocks_read, "{mode:?}: {report:?} vs {replayed:?}");
        assert_eq!(sim.engine.status().failed_drives, vec![FAILED]);
        // Right after the start (reads rebuild blocks of the failed drive in the stripes the
        // tables name), and once the segment open at the crash is rewritten elsewhere.
        check_written(&mut sim, &model, &format!("{mode:?}: after the crash start with drive {FAILED} failed"));
        sim.run_until_idle();
        check_written(&mut sim, &model, &format!("{mode:?}: after the crash start, once idle"));
    }
}

/// A failed drive is replaced and rebuilt while writes go on under garbage collection: the
/// engine takes checkpoints while the rebuild runs (their images carry the open segments'
/// stripe tables, since a start after a crash counts the drive being rebuilt failed). A
/// crash during the rebuild starts from the newest of them with the drive counted failed
/// and reads less than a full replay; every written block reads back; the rebuild resumes
/// (checking what the new drive holds of each segment), completes, and every block reads
/// back again.
#[test]
fn during_a_rebuild_a_crash_starts_from_a_checkpoint_taken_while_it_ran() {
    const REPLACED: usize = 2;
    const REBUILD_RATE_BYTES_PER_S: u64 = 1 << 20;
    const STEPS_BETWEEN_BATCHES: usize = 64;
    const BATCH_WRITES: u64 = 64;
    const MAX_BATCHES: u64 = 200;
    for ((level, mode), seed) in schemes().into_iter().zip(41..) {
        let crashed = |offer: bool| {
            let (config, mut rng, mut model, mut sim) = fresh(level, mode, seed);
            write_random(&mut sim, &mut model, &mut rng, 2 * LOGICAL_BLOCKS, 1);
            sim.drives[REPLACED].fail();
            write_random(&mut sim, &mut model, &mut rng, BATCH_WRITES, 2);
            assert_eq!(sim.engine.status().failed_drives, vec![REPLACED], "{mode:?}: the failure was noticed");
            // Paced: the writes (on drives that take no virtual time) go on while it waits.
            sim.set_rebuild_rate(Some(REBUILD_RATE_BYTES_PER_S));
            sim.replace_drive(REPLACED, seed).unwrap();
            let mut newest: Option<CheckpointImage> = None;
            let mut batches = 0;
            // Until a checkpoint was taken while the rebuild ran, and it has rebuilt a
            // segment: between batches time passes (a few steps) and the rebuild goes on.
            let rebuilt = |sim: &Simulator| sim.engine.status().rebuild.is_some_and(|r| r.segments_rebuilt > 0);
            while batches < MAX_BATCHES && !(newest.is_some() && rebuilt(&sim)) {
                let mut take_newest = |sim: &mut Simulator| {
                    let during_rebuild = sim.running_checkpoint_during_rebuild();
                    newest = sim.take_running_checkpoint().filter(|_| during_rebuild).or(newest.take());
                };
                write_random_as(&mut sim, &mut model, &mut rng, (BATCH_WRITES, 3 + batches), Pace::OneAtATime);
                take_newest(&mut sim);
                for _ in 0..STEPS_BETWEEN_BATCHES {
                    if !sim.step() {
                        break;
                    }
                }
                take_newest(&mut sim);
                batches += 1;
            }
            let image = newest.unwrap_or_else(|| panic!("{mode:?}: no checkpoint taken while the rebuild ran"));
            let status = sim.engine.status();
            let rebuild = status.rebuild.unwrap_or_else(|| panic!("{mode:?}: the rebuild ended before the cut"));
            let generation = image.generation;
            let sim = crash_and_start(sim, config, mode, image, REPLACED, offer);
            (sim, model, generation, rebuild)
        };
        let (full, _, _, _) = crashed(false);
        let (mut sim, model, generation, rebuild) = crashed(true);
        let (report, replayed) = (sim.recovery_report, full.recovery_report);
        eprintln!(
            "{level:?} {mode:?}, drive {REPLACED} replaced: a crash with {} segments rebuilt and {} left; the start \
             read {} blocks from checkpoint {generation} (taken while the rebuild ran) and {} segments after or \
             open at it, {} replaying every segment",
            rebuild.segments_rebuilt,
            rebuild.segments_left,
            report.blocks_read,
            report.segments_replayed,
            replayed.blocks_read
        );
        assert_eq!(report.checkpoint_generation, Some(generation), "{mode:?}: {report:?}");
        assert!(report.blocks_read < replayed.blocks_read, "{mode:?}: {report:?} vs {replayed:?}");
        check_written(&mut sim, &model, &format!("{mode:?}: after the crash start during the rebuild"));
        sim.resume_rebuild(REPLACED).unwrap();
        // The segment rebuilt before the crash is checked on the new drive and kept: the
        // checkpoint's tables place its chunks as that rebuild wrote them.
        let mut kept = 0;
        while sim.step() {
            kept = kept.max(sim.engine.rebuild_segments_kept().unwrap_or(0));
        }
        assert!(kept >= rebuild.segments_rebuilt, "{mode:?}: {kept} segments kept of {}", rebuild.segments_rebuilt);
        let status = sim.engine.status();
        assert!(status.rebuild.is_none() && status.failed_drives.is_empty(), "{mode:?}: {status:?}");
        check_written(&mut sim, &model, &format!("{mode:?}: once the rebuild resumed and completed"));
    }
}

/// Checks that `image` (taken while `drive` was failed or being rebuilt) names the open
/// segments with their stripe tables (Zone Append: the drive's chunks placed where only
/// they say), then cuts the power and starts with `drive` counted failed, offered `image`
/// if `offer` (else replaying every segment, for comparison).
fn crash_and_start(
    sim: Simulator,
    config: zapraid_engine::Config,
    mode: Mode,
    image: CheckpointImage,
    drive: usize,
    offer: bool,
) -> Simulator {
    let appending: Vec<_> = image.segments.iter().filter(|s| s.appending).collect();
    assert!(!appending.is_empty(), "{mode:?}: it names the open segments");
    let tabled = mode != Mode::ZoneWriteOnly;
    assert!(appending.iter().all(|s| s.table.is_empty() != tabled), "{mode:?}: their tables kept: {image:?}");
    let drives = sim.power_cut().unwrap();
    Simulator::recover_with_checkpoint(geometry(), config, drives, &[drive], offer.then_some(image)).unwrap()
}
