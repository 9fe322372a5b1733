//! Replacing a failed drive (`zapraid replace`) and rebuilding onto it: the checks of the
//! new drive, its swap into the running engine thread (`swap_in`, which a hot spare taken
//! by itself goes through too, `spare_pool`), the superblock generations that say a drive
//! is being rebuilt and then that it is not, and the rebuild resumed at start.
//!
//! Invariants: the new drive is taken only if it is not one of the array's, has the
//! array's geometry, and holds nothing (no array superblock of any array, no spare record,
//! no written zone) unless forced; every zone of it is reset before it is swapped in. The drive it
//! replaces (failed, or a `MissingDrive`) has nothing in flight when swapped out. From the
//! swap until the rebuild completes, the superblock records the drive both failed and
//! rebuilding, so a restart never trusts the new drive's zones as they are: recovery reads
//! nothing from it, `start` resets its zones that hold no segment (`reset_unused_zones`)
//! and the engine resumes the rebuild, keeping the segments whose zone it finds completed
//! by the earlier rebuild and rebuilding the others (`Engine::resume_drive_rebuild`).
//! Only when the engine says the rebuild is done (and the drive not failed) is a
//! generation recorded with neither bit.

use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use zapraid_zns::{execute, Command, Geometry, ReservedZones, ZoneAction, ZoneTarget, ZonedDevice};

use crate::assemble::format::{geometry_differences, open_drive_to_erase, uuid_text, Assembled, Drive};
use crate::control::Identity;
use crate::run::thread::{EngineLoop, EngineSender, Message};
use crate::error::{Error, Result};
use crate::records::superblock::{examine, read_superblock};

/// Opens the drive at `path` to take failed drive `drive`'s place in an array whose drives
/// have the raw geometry `raw` (superblock zones included) and are at `members`
/// (canonical paths), checks it, and resets every zone of it. Unless `force`, a drive
/// that holds anything (an array superblock, a spare record, written zones) is refused.
pub fn prepare_new_drive(
    path: &Path,
    drive: usize,
    raw: &Geometry,
    reserved_zones: u32,
    members: &[Option<String>],
    force: bool,
) -> Result<ReservedZones<Drive>> {
    let member =
        |index: usize| format!("it is drive {index} of this array; give a new drive to rebuild drive {drive} onto");
    let mut device = check_new_drive(path, raw, members, force, member)?;
    reset_every_zone(&mut device, raw, path)?;
    ReservedZones::new(device, reserved_zones).map_err(|error| Error::Drive { path: path.to_path_buf(), error })
}

/// Opens the drive at `path` to join an array whose drives have the raw geometry `raw`
/// and are at `members` (canonical paths), and checks it: not a member (`member(index)`
/// says why not), the array's geometry, and unless `force` holding nothing (an array
/// superblock, a spare record, written zones). Nothing is written to it.
pub fn check_new_drive(
    path: &Path,
    raw: &Geometry,
    members: &[Option<String>],
    force: bool,
    member: impl Fn(usize) -> String,
) -> Result<Drive> {
    let refuse = |reason: String| Error::Refused { path: path.to_path_buf(), reason };
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if let Some(index) = members.iter().position(|m| m.as_deref() == canonical.to_str()) {
        return Err(refuse(member(index)));
    }
    let mut device = open_drive_to_erase(path, force)?;
    check_geometry(&device.geometry(), raw).map_err(refuse)?;
    if !force {
        if let Some(sb) = read_superblock(device.as_mut()) {
            return Err(refuse(format!(
                "it is drive {} of array \"{}\" ({}); add --force to erase it",
                sb.drive_index.get(),
                sb.name(),
                uuid_text(&sb.array_uuid)
            )));
        }
        if let Some(record) = crate::records::spare::read_spare_record(device.as_mut()) {
            return Err(refuse(format!("it is {}; add --force to erase it", crate::records::spare::spare_text(&record))));
        }
        let remains = examine(device.as_mut()).map_err(|error| Error::Drive { path: path.to_path_buf(), error })?;
        if remains.looks_like_member() || remains.written_zones > 0 {
            let written = remains.written_zones + u32::from(remains.superblock_zone_blocks > 0);
            return Err(refuse(format!("it is not empty ({written} written zone(s)); add --force to erase it")));
        }
    }
    Ok(device)
}

/// Resets every zone of a raw drive of geometry `raw`, zone 0 too: the first superblock
/// generation (or spare record) goes to its start (a forced drive's old superblocks could
/// otherwise outrank it).
pub fn reset_every_zone(device: &mut Drive, raw: &Geometry, path: &Path) -> Result<()> {
    for zone in 0..raw.zone_count {
        let target = ZoneTarget::Zone { start_lba: raw.zone_start_lba(zone) };
        let c = execute(device.as_mut(), Command::ManageZone { action: ZoneAction::Reset, target });
        c.result.map_err(|error| Error::DriveCommand { path: path.to_path_buf(), what: "zone reset", error })?;
    }
    Ok(())
}

/// Swaps `device` (every zone of it reset, at `path`) into failed drive `drive`'s place on
/// the engine thread, which starts the rebuild onto it; the array's drive list then
/// names `path` for the drive; with a rate, rebuilds are limited to it from then on
/// (`None` keeps the array's limit). What `zapraid replace` and a spare taken by itself do.
pub fn swap_in(
    identity: &Mutex<Identity>,
    engine: &EngineSender,
    drive: usize,
    device: ReservedZones<Drive>,
    path: &Path,
    rebuild_rate_bytes_per_s: Option<u64>,
) -> Result<()> {
    let (done, result) = crossbeam_channel::bounded(1);
    let message = Message::ReplaceDrive { drive, device, rebuild_rate_bytes_per_s, done };
    engine.send(message).map_err(|_| Error::EngineGone)?;
    result.recv().map_err(|_| Error::EngineGone)??;
    let mut id = identity.lock().expect("identity");
    id.drives[drive] = Some(path.display().to_string());
    id.canonical_drives[drive] =
        Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string());
    Ok(())
}

/// Whether a drive of geometry `new` can take the place of one of `raw`: why not, if not.
/// Assembly wants every drive of an array to have one geometry, so it must be the same.
fn check_geometry(new: &Geometry, raw: &Geometry) -> std::result::Result<(), String> {
    if new.block_size_bytes != raw.block_size_bytes || new.metadata_bytes_per_block != raw.metadata_bytes_per_block {
        return Err(format!(
            "its blocks are {} B with {} B of metadata; the array's drives have {} B with {} B",
            new.block_size_bytes, new.metadata_bytes_per_block, raw.block_size_bytes, raw.metadata_bytes_per_block
        ));
    }
    if new.zone_count < raw.zone_count || new.zone_capacity_blocks < raw.zone_capacity_blocks {
        return Err(format!(
            "it is too small: {} zones of {} blocks; the array's drives have {} zones of {} blocks",
            new.zone_count, new.zone_capacity_blocks, raw.zone_count, raw.zone_capacity_blocks
        ));
    }
    if new != raw {
        return Err(format!(
            "its geometry differs from the array's drives' ({}): an array's drives must all have one geometry",
            geometry_differences(new, raw)
        ));
    }
    Ok(())
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
    let device = &mut assembled.drives[drive];
    let g = device.geometry();
    for zone in (0..g.zone_count).filter(|z| !keep.contains(z)) {
        let target = ZoneTarget::Zone { start_lba: g.zone_start_lba(zone) };
        let c = execute(device, Command::ManageZone { action: ZoneAction::Reset, target });
        c.result.map_err(|error| Error::DriveCommand { path: path.clone(), what: "zone reset", error })?;
    }
    Ok(())
}

impl EngineLoop {
    /// Swaps `device` into failed drive `drive`'s place, records the drive rebuilding
    /// (the new drive gets its first superblock), and starts the rebuild, at most at
    /// `rebuild_rate_bytes_per_s` if given (0: unlimited; else the array's limit stays).
    pub(crate) fn replace_drive(
        &mut self,
        drive: usize,
        mut device: ReservedZones<Drive>,
        rebuild_rate_bytes_per_s: Option<u64>,
    ) -> Result<()> {
        let drives = self.drives.len();
        if drive >= drives {
            return Err(Error::NoSuchDrive { drive, drives });
        }
        if let Some(r) = self.engine.rebuild_status() {
            return Err(Error::Config {
                reason: format!("drive {} is being rebuilt: one rebuild runs at a time (see zapraid status)", r.drive),
            });
        }
        if !self.engine.is_failed(drive) {
            return Err(Error::Config {
                reason: format!(
                    "drive {drive} has not failed: only a failed drive is replaced (zapraid fail marks one)"
                ),
            });
        }
        if self.drives[drive].in_flight() > 0 {
            return Err(Error::Config {
                reason: format!("drive {drive} still has commands in flight; try again in a moment"),
            });
        }
        if self.notified && !device.notify_completions(self.wake.raw()) {
            return Err(Error::Config {
                reason: "the new drive cannot signal its completions as the array's drives do (an NVMe namespace \
                         and a drive file cannot be mixed)"
                    .into(),
            });
        }
        self.drives[drive] = device;
        self.record.next_lba[drive] = 0;
        self.rebuilding |= 1 << drive;
        // On the drives before the rebuild writes anything to the new one.
        self.record_failures();
        let rate_before = self.engine.rebuild_rate_bytes_per_s();
        if let Some(rate) = rebuild_rate_bytes_per_s {
            self.engine.set_rebuild_rate(Some(rate).filter(|r| *r > 0));
        }
        if let Err(e) = self.engine.rebuild_drive(drive) {
            self.engine.set_rebuild_rate(rate_before);
            self.rebuilding &= !(1 << drive);
            self.record_failures();
            return Err(e.into());
        }
        self.rebuild_started = Some(Instant::now());
        tracing::warn!(
            drive,
            rate_bytes_per_s = self.engine.rebuild_rate_bytes_per_s(),
            "drive replaced: rebuild started"
        );
        Ok(())
    }

    /// Whether every drive recorded as being rebuilt still is in the engine (a rebuild that
    /// ended is noticed by `watch_rebuild`; while a replace records the new drive, its
    /// rebuild is not started yet either).
    pub(crate) fn rebuilds_noticed(&self) -> bool {
        let running = self.engine.rebuild_status().map_or(0, |r| 1u64 << r.drive);
        self.rebuilding & !running == 0
    }

    /// Notices a rebuild that ended: completed (the drive serves again), or stopped
    /// because the new drive failed. Either way it is no longer recorded rebuilding.
    pub(crate) fn watch_rebuild(&mut self) {
        if self.rebuilding == 0 {
            return;
        }
        let running = self.engine.rebuild_status().map(|r| r.drive);
        for drive in 0..self.drives.len() {
            if self.rebuilding >> drive & 1 == 0 || running == Some(drive) {
                continue;
            }
            self.rebuilding &= !(1 << drive);
            self.rebuild_started = None;
            if self.engine.is_failed(drive) {
                tracing::error!(drive, "rebuild stopped: the new drive failed");
            } else {
                tracing::warn!(drive, "rebuild complete: the array is optimal again");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_geometry_mismatch_names_only_the_fields_that_differ() {
        let raw = Geometry::zn540();
        let new = Geometry { max_open_zones: None, zone_count: raw.zone_count + 1, ..raw };
        let said = check_geometry(&new, &raw).unwrap_err();
        let max_open = raw.max_open_zones.map_or("none".to_string(), |n| n.to_string());
        assert_eq!(
            said,
            format!(
                "its geometry differs from the array's drives' (zones {} vs {}, max open zones none vs {max_open}): an \
                 array's drives must all have one geometry",
                raw.zone_count + 1,
                raw.zone_count
            )
        );
        assert!(!said.contains("zone size") && !said.contains("capacity"), "{said}");
        assert_eq!(check_geometry(&raw, &raw), Ok(()));
    }
}
