//! Starting an assembled array's engine: `recover` rebuilds it from the drives (after a
//! clean stop or a crash), from the checkpoint the array keeps if it matches the drives
//! (`records::checkpoint`), else by replaying every segment. Errors name zones as the
//! drives number them (`zapraid inspect`), not as the engine does.
//!
//! A rebuild cut short (the superblock records a drive rebuilding) resumes: recovery counts
//! the drive failed, `reset_unused_zones` empties its zones that hold no segment, and the
//! engine checks the others as it resumes (`Engine::resume_drive_rebuild`), never trusting
//! them as they are.

use zapraid_engine::recovery::Recovery;
use zapraid_engine::{Engine, RecoveryReport};
use zapraid_zns::{execute, Command, ReservedZones, ZoneAction, ZoneTarget, ZonedDevice};

use super::assembly::Assembled;
use crate::drives::Drive;
use crate::error::{Error, Result};
use crate::records::checkpoint::{invalidate, read_newest, CheckpointDrive, CheckpointMark, CheckpointPlace};
use crate::records::superblock::spared_drives;

/// Rebuilds the engine from the drives (after a clean stop or a crash). Errors name zones
/// as the drives number them (`zapraid inspect`), not as the engine does.
pub fn recover(assembled: &mut Assembled) -> Result<Engine> {
    let spared = spared_drives(&assembled.superblock);
    let input = EngineStart {
        geometry: assembled.geometry,
        config: assembled.config,
        failed: &assembled.failed,
        spared: &spared,
        superblock_generation: assembled.superblock.generation.get(),
        drive_zone_offset: assembled.superblock.reserved_zones.get(),
    };
    let (engine, report) =
        recover_engine::<Drive>(&mut assembled.drives, CheckpointDrives::Same, &mut assembled.checkpoint, input)?;
    assembled.recovery_report = Some(report);
    Ok(engine)
}

/// What one engine's recovery starts from.
#[derive(Clone, Copy)]
pub struct EngineStart<'a> {
    /// The drives as the engine sees them, and its configuration.
    pub geometry: zapraid_zns::Geometry,
    pub config: zapraid_engine::Config,
    pub failed: &'a [usize],
    /// Of those, a declustered array's drives in distributed spare space.
    pub spared: &'a [usize],
    pub superblock_generation: u64,
    /// The drive's zone number of the engine's zone 0 (errors name the drive's).
    pub drive_zone_offset: u32,
}

/// Where the engine's checkpoint area is: in the drives the engine recovers from (their
/// reserved zones), or in other parts of them.
pub enum CheckpointDrives<'a, C> {
    Same,
    Parts(&'a mut [C]),
}

/// Rebuilds one engine from `drives` (from the checkpoint at `checkpoint` if it matches
/// them, else by replaying every segment), and says what it read.
pub fn recover_engine<C: CheckpointDrive>(
    drives: &mut [ReservedZones<Drive>],
    mut checkpoint_drives: CheckpointDrives<'_, C>,
    checkpoint: &mut Option<CheckpointPlace>,
    input: EngineStart<'_>,
) -> Result<(Engine, RecoveryReport)> {
    let with_drive_zones = |error| engine_error_on_drive_zones(error, input.drive_zone_offset);
    let mut recovery =
        Recovery::with_failed_drives(input.geometry, input.config, input.failed).map_err(with_drive_zones)?;
    recovery.set_spared_drives(input.spared).map_err(with_drive_zones)?;
    // A rebuild in progress is no reason to replay: the drive being rebuilt counts failed,
    // and the rebuild checks what it holds of each segment as it resumes (a checkpoint
    // taken while it ran carries the open segments' stripe tables, as with a failed drive).
    // The checkpoint area, emptied once the start knows recovery did not use what it holds
    // (stale for good: a newer superblock, a segment it names gone, ...).
    let mut stale_checkpoint = None;
    let mut offered = None;
    if let Some(place) = checkpoint.as_mut() {
        let uuid = input.config.array_uuid;
        let found = match &mut checkpoint_drives {
            CheckpointDrives::Same => read_newest(drives, input.failed, place.area, uuid),
            CheckpointDrives::Parts(parts) => read_newest(parts, input.failed, place.area, uuid),
        };
        place.next_generation = place.next_generation.max(found.highest_generation + 1);
        // Also when none was read: a copy unreadable now may read again later, and must not
        // win over the copies later stops write with generations counted from 1.
        stale_checkpoint = Some(place.area);
        let superblock_generation = input.superblock_generation;
        offered = found.newest.as_ref().map(|image| (image.generation, image.base_generation));
        match found.newest {
            Some(image) if image.superblock_generation != superblock_generation => {
                tracing::warn!(
                    generation = image.generation,
                    "the checkpoint goes with superblock generation {}, the array is at {superblock_generation} (a \
                     drive failed or was rebuilt since): replaying every segment",
                    image.superblock_generation
                );
                recovery.pass_over_checkpoint(&image);
            }
            Some(image) => recovery.use_checkpoint(image, found.blocks_read),
            None => tracing::info!("no checkpoint found: every segment is replayed"),
        }
    }
    while !recovery.is_done() {
        recovery.run_round(drives).map_err(with_drive_zones)?;
    }
    let report = recovery.report();
    match report.checkpoint_generation {
        // Kept: a crash of the engine this start begins finds it again, and replays only
        // the segments written after it (a start from it needs every segment it names, so
        // it goes stale by itself once garbage collection resets one).
        Some(generation) => {
            tracing::info!(
                generation,
                segments_replayed = report.segments_replayed,
                blocks_read = report.blocks_read,
                "started from the checkpoint"
            );
            let base = offered.filter(|(g, _)| *g == generation).and_then(|(_, base)| base);
            let superblock_generation = input.superblock_generation;
            if let Some(place) = checkpoint.as_mut() {
                place.keep_after_start(generation, base);
                // The engine starts where the checkpoint left the array: until it writes,
                // a clean stop need not write the same again.
                if report.segments_replayed == 0 && report.damaged_headers == 0 {
                    place.on_drives = Some(CheckpointMark { superblock_generation, engine_writes: 0 });
                }
            }
        }
        None => {
            tracing::info!(blocks_read = report.blocks_read, "started by replaying every segment");
            if let Some(area) = stale_checkpoint {
                match &mut checkpoint_drives {
                    CheckpointDrives::Same => invalidate(drives, input.failed, area),
                    CheckpointDrives::Parts(parts) => invalidate(parts, input.failed, area),
                }
            }
        }
    }
    let engine = recovery.finish().map_err(with_drive_zones)?;
    Ok((engine, report))
}

/// An engine error over drives with `reserved_zones` hidden (`ReservedZones`), its zone
/// numbered as on the drive: the engine numbers the zones after the reserved ones from 0.
fn engine_error_on_drive_zones(error: zapraid_engine::Error, reserved_zones: u32) -> Error {
    match error {
        zapraid_engine::Error::Corrupt { drive, zone, offset_blocks, structure, reason } => {
            let zone = zone.saturating_add(reserved_zones);
            Error::Engine(zapraid_engine::Error::Corrupt { drive, zone, offset_blocks, structure, reason })
        }
        other => Error::Engine(other),
    }
}

/// The present drive the superblock records as being rebuilt, whose rebuild resumes (one
/// at a time; any other stays failed).
pub fn rebuilding_drive(assembled: &Assembled) -> Option<usize> {
    let rebuilding = assembled.superblock.rebuilding_drives.get();
    (0..assembled.drives.len()).find(|d| rebuilding >> d & 1 == 1 && assembled.paths[*d].is_some())
}

/// Resets every zone (but the superblock zones) of drive `drive` (being rebuilt) that is
/// not in `keep` (`Engine::zones_holding_segments`): new segments are written to it from
/// the start. The zones kept are checked by the engine as the rebuild resumes
/// (`Engine::resume_drive_rebuild`), never trusted as they are.
pub fn reset_unused_zones(assembled: &mut Assembled, drive: usize, keep: &[u32]) -> Result<()> {
    let Some(path) = assembled.paths[drive].clone() else { return Ok(()) };
    reset_zones_but(&mut assembled.drives[drive], keep).map_err(|error| Error::DriveCommand {
        path,
        what: "zone reset",
        error,
    })
}

/// Resets every zone of `device` (as the engine numbers them) that is not in `keep`: the
/// zones of a drive being rebuilt that hold no segment of the engine over them.
pub fn reset_zones_but(device: &mut dyn ZonedDevice, keep: &[u32]) -> std::result::Result<(), zapraid_zns::Error> {
    let g = device.geometry();
    for zone in (0..g.zone_count).filter(|z| !keep.contains(z)) {
        let target = ZoneTarget::Zone { start_lba: g.zone_start_lba(zone) };
        execute(device, Command::ManageZone { action: ZoneAction::Reset, target }).result?;
    }
    Ok(())
}
