//! Drives, the lowest room (above only `error`): the `Drive` type the rooms above take, opening
//! one (an NVMe ZNS namespace, `/dev/ngXnY`, through io_uring passthrough, or an emulated
//! drive file; either is locked against a second opener by `zapraid_zns`), refusing a drive
//! named twice, and saying how two drives' geometries differ. Nothing here reads or writes
//! what a drive holds: the records on it are `records`', the arrays `assemble`'s.

use std::path::{Path, PathBuf};

use zapraid_zns::{EmulatedDrive, Geometry, NvmeDrive, ZonedDevice};

use crate::error::{Error, Result};

/// A drive as the array uses it.
pub type Drive = Box<dyn ZonedDevice + Send>;

/// What a drive's path names.
enum DriveKind {
    /// An NVMe namespace's character device (`/dev/ngXnY`).
    Nvme,
    /// An emulated drive file.
    File,
}

/// Whether `path` is an NVMe namespace or an emulated drive file; refused otherwise.
fn drive_kind(path: &Path) -> Result<DriveKind> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(path).map_err(|error| Error::Io {
        path: path.to_path_buf(),
        context: "cannot open",
        error,
    })?;
    if meta.file_type().is_char_device() {
        Ok(DriveKind::Nvme)
    } else if meta.is_file() {
        Ok(DriveKind::File)
    } else {
        Err(Error::Refused {
            path: path.to_path_buf(),
            reason: "neither an NVMe namespace (/dev/ngXnY) nor an emulated drive file".into(),
        })
    }
}

/// Opens an NVMe namespace (a character device) or an emulated drive file.
pub fn open_drive(path: &Path) -> Result<Drive> {
    let drive_error = |error| Error::Drive { path: path.to_path_buf(), error };
    Ok(match drive_kind(path)? {
        DriveKind::Nvme => Box::new(NvmeDrive::open(path).map_err(drive_error)?),
        DriveKind::File => Box::new(EmulatedDrive::open_file(path).map_err(drive_error)?),
    })
}

/// Opens a drive about to be erased (a member being formatted, a new drive or a spare
/// taken with `--force`): with `force`, an emulated drive file that cannot be opened
/// because a zone's record is damaged in both copies is re-initialised first (every zone
/// empty; what it held is being erased anyway).
pub fn open_drive_to_erase(path: &Path, force: bool) -> Result<Drive> {
    match open_drive(path) {
        Err(Error::Drive { error: zapraid_zns::Error::ZoneRecordLost { zone, .. }, .. }) if force => {
            tracing::warn!(path = %path.display(), zone, "a zone record is damaged in both copies: re-initialising the drive file");
            let drive = EmulatedDrive::reinitialize_file(path)
                .map_err(|error| Error::Drive { path: path.to_path_buf(), error })?;
            Ok(Box::new(drive))
        }
        other => other,
    }
}

/// Refuses a drive named twice (however spelled: paths are compared canonicalized).
/// Checked before any drive is opened: the second open of one drive would fail on the
/// first's lock, as if another process held it.
pub fn refuse_repeated_drives(paths: &[PathBuf]) -> Result<()> {
    // A path that cannot be canonicalized (missing) is compared as given; opening it
    // reports why.
    let canonical: Vec<PathBuf> =
        paths.iter().map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())).collect();
    for (i, path) in paths.iter().enumerate() {
        if let Some(first) = (0..i).find(|j| canonical[*j] == canonical[i]) {
            let reason = if paths[first].as_os_str() == path.as_os_str() {
                format!("drive {} given twice", path.display())
            } else {
                format!("drive {} given twice (also as {})", path.display(), paths[first].display())
            };
            return Err(Error::Config { reason });
        }
    }
    Ok(())
}

/// What differs between two drives' geometries, in words ("zone capacity (blocks) 480 vs
/// 240"): only the fields that differ.
pub(crate) fn geometry_differences(g: &Geometry, first: &Geometry) -> String {
    let limit = |l: Option<u32>| l.map_or("none".to_string(), |v| v.to_string());
    let fields = [
        ("block size (B)", g.block_size_bytes.to_string(), first.block_size_bytes.to_string()),
        ("metadata per block (B)", g.metadata_bytes_per_block.to_string(), first.metadata_bytes_per_block.to_string()),
        ("zone size (blocks)", g.zone_size_blocks.to_string(), first.zone_size_blocks.to_string()),
        ("zone capacity (blocks)", g.zone_capacity_blocks.to_string(), first.zone_capacity_blocks.to_string()),
        ("zones", g.zone_count.to_string(), first.zone_count.to_string()),
        ("max open zones", limit(g.max_open_zones), limit(first.max_open_zones)),
        ("max active zones", limit(g.max_active_zones), limit(first.max_active_zones)),
        ("Zone Append limit (blocks)", g.zone_append_max_blocks.to_string(), first.zone_append_max_blocks.to_string()),
        ("transfer limit (blocks)", g.max_transfer_blocks.to_string(), first.max_transfer_blocks.to_string()),
        ("transfer granule (blocks)", g.transfer_granule_blocks.to_string(), first.transfer_granule_blocks.to_string()),
    ];
    fields
        .iter()
        .filter(|(_, a, b)| a != b)
        .map(|(what, a, b)| format!("{what} {a} vs {b}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Opens the drive at `path` split into parts, each `spans` of its zones ((first zone,
/// zone count), the drive's numbering, none sharing a zone), each numbered from its
/// first zone and driven by a thread of its own (`zapraid_zns`'s drive parts): the
/// shards of an array each drive their own zones of every drive.
pub fn open_drive_parts(path: &Path, spans: &[(u32, u32)]) -> Result<Vec<Drive>> {
    let parts = match drive_kind(path)? {
        DriveKind::Nvme => boxed_parts(NvmeDrive::open(path).and_then(|d| d.split(spans))),
        DriveKind::File => boxed_parts(EmulatedDrive::open_file(path).and_then(|d| d.split(spans))),
    };
    parts.map_err(|error| Error::Drive { path: path.to_path_buf(), error })
}

fn boxed_parts<D: ZonedDevice + Send + 'static>(
    parts: zapraid_zns::Result<Vec<zapraid_zns::DrivePart<D>>>,
) -> zapraid_zns::Result<Vec<Drive>> {
    Ok(parts?.into_iter().map(|part| Box::new(part) as Drive).collect())
}
