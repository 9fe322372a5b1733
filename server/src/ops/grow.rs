//! Growing a running declustered array (`zapraid grow`): each new drive is checked and
//! emptied as a replacement is (`assemble::new_drive`: not a member, the array's geometry,
//! holding nothing unless forced, every zone reset), then all of them go to the engine
//! thread together (`run::thread::grow`: one new placement for all), and the array's drive
//! list names them.
//!
//! Invariants: nothing is written to any drive before every new drive passed its checks
//! and the array's status says it may grow (declustered, no drive rebuild running: the
//! engine thread asks the engine again, `Engine::check_grow`); a drive named twice, or a
//! hot spare of the array, is refused.

use std::path::PathBuf;
use std::sync::Mutex;

use super::identity::Identity;
use crate::assemble::new_drive::{check_new_drive, reset_every_zone};
use crate::error::{Error, Result};
use crate::run::message::{query_status, EngineSender, Message};

/// Adds the drives at `paths` to the array: returns how many drives it has now.
pub fn grow(identity: &Mutex<Identity>, engine: &EngineSender, paths: &[PathBuf], force: bool) -> Result<usize> {
    let (geometry, mut members, reserved_zones) = {
        let id = identity.lock().expect("identity");
        (id.drive_geometry, id.canonical_drives.clone(), id.reserved_zones)
    };
    // Refused before a forced drive is erased: the engine thread checks again.
    let status = query_status(engine).ok_or(Error::EngineGone)?;
    let placements = status.engine.declustered.as_ref().map_or(0, |d| d.placements as usize);
    if placements >= zapraid_engine::lanes::MAX_PLACEMENT_EPOCHS {
        return Err(Error::Config {
            reason: format!("the array has grown {} times already, the most it records", placements - 1),
        });
    }
    if status.engine.declustered.is_none() {
        return Err(Error::Config {
            reason: format!(
                "the array is as wide as its stripes ({} drives): only a declustered array grows (format with \
                 --stripe-width)",
                members.len()
            ),
        });
    }
    if let Some(r) = status.engine.rebuild {
        return Err(Error::Config {
            reason: format!("drive {} is being rebuilt: grow the array once it is done", r.drive),
        });
    }
    let mut checked = Vec::with_capacity(paths.len());
    let array_drives = members.len();
    for path in paths {
        let member = |index: usize| match index < array_drives {
            true => format!("it is drive {index} of this array; give drives the array does not have"),
            false => "it is named twice".to_string(),
        };
        let device = check_new_drive(path, &geometry, &members, force, member)?;
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
        members.push(Some(canonical.display().to_string()));
        checked.push((device, path.clone()));
    }
    let mut devices = Vec::with_capacity(checked.len());
    for (mut device, path) in checked {
        reset_every_zone(&mut device, &geometry, &path)?;
        let zones = zapraid_zns::ReservedZones::new(device, reserved_zones)
            .map_err(|error| Error::Drive { path: path.clone(), error })?;
        devices.push((zones, path));
    }
    let (done, answer) = crossbeam_channel::bounded(1);
    engine.send(Message::Grow { devices, done }).map_err(|_| Error::EngineGone)?;
    let drives = answer.recv().map_err(|_| Error::EngineGone)??;
    let mut id = identity.lock().expect("identity");
    for path in paths {
        id.drives.push(Some(path.display().to_string()));
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        id.canonical_drives.push(Some(canonical.display().to_string()));
    }
    debug_assert_eq!(id.drives.len(), drives);
    Ok(drives)
}
