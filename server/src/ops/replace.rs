//! Replacing a failed drive (`zapraid replace`) and rebuilding onto it: the new drive,
//! made ready by `assemble::new_drive::prepare_new_drive` (checked, emptied), swapped into
//! the running engine thread (`swap_in`, which a hot spare taken by itself goes through
//! too, `spare_pool`). The engine thread's side (the swap, the superblock generations that
//! say a drive is being rebuilt and then that it is not) is `run::thread::rebuild`'s; the
//! rebuild resumed at start is `assemble::recover`'s.
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

use zapraid_zns::ReservedZones;

use super::identity::Identity;
use crate::drives::Drive;
use crate::error::{Error, Result};
use crate::run::message::{EngineSender, Message};

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
    let path_buf = path.to_path_buf();
    let message =
        Message::ReplaceDrive { drive, device, path: path_buf, checkpoint_part: None, rebuild_rate_bytes_per_s, done };
    engine.send(message).map_err(|_| Error::EngineGone)?;
    result.recv().map_err(|_| Error::EngineGone)??;
    let mut id = identity.lock().expect("identity");
    id.drives[drive] = Some(path.display().to_string());
    id.canonical_drives[drive] =
        Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string());
    Ok(())
}
