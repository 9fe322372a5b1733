//! A drive about to join an array (a member at format, a replacement, a hot spare): checked
//! before anything is written to it (`check_new_drive`: not one of the array's, of the
//! array's geometry, and holding nothing unless forced), then emptied (`reset_every_zone`);
//! a replacement is also given the array's reserved zones (`prepare_new_drive`).

use std::path::Path;

use zapraid_zns::{execute, Command, Geometry, ReservedZones, ZoneAction, ZoneTarget};

use crate::drives::{geometry_differences, open_drive_to_erase, Drive};
use crate::error::{Error, Result};
use crate::records::identity::uuid_text;
use crate::records::spare::{read_spare_record, spare_text};
use crate::records::superblock::{examine, read_superblock};

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
        if let Some(record) = read_spare_record(device.as_mut()) {
            return Err(refuse(format!("it is {}; add --force to erase it", spare_text(&record))));
        }
        let remains = examine(device.as_mut()).map_err(|error| Error::Drive { path: path.to_path_buf(), error })?;
        if remains.looks_like_member() || remains.written_zones > 0 {
            let written = remains.written_zones + u32::from(remains.superblock_zone_blocks > 0);
            return Err(refuse(format!("it is not empty ({written} written zone(s)); add --force to erase it")));
        }
    }
    Ok(device)
}

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
