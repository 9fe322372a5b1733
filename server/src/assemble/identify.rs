//! What a drive given holds when it has no valid array superblock, as a start or a
//! command sees it: a hot spare (its record), a spare whose record is damaged, or anything
//! else, said for the user (`superblock::Remains::describe`); and the superblock of the
//! first drive given that has one (`first_superblock`), for the array's name before it
//! is assembled.

use std::path::PathBuf;

use zapraid_engine::format::{ArraySuperblock, SpareRecord};
use zapraid_zns::ZonedDevice;

use crate::drives::open_drive;
use crate::error::{Error, Result};
use crate::records::spare::{read_spare_record, spare_text};
use crate::records::superblock::{examine, read_superblock};

/// What a drive without a valid array superblock holds, as a start sees it.
pub enum WithoutSuperblock {
    /// A hot spare: its record.
    Spare(SpareRecord),
    /// A hot spare whose record is damaged (`Remains::looks_like_damaged_spare`), and
    /// what was found.
    DamagedSpare(String),
    /// Anything else, and why it cannot be used as it is.
    Other(String),
}

/// Looks at a drive without a valid array superblock: a spare (its record read), a spare
/// whose record is damaged, or something else (`Remains::describe`).
pub fn without_superblock(drive: &mut dyn ZonedDevice) -> WithoutSuperblock {
    if let Some(record) = read_spare_record(drive) {
        return WithoutSuperblock::Spare(record);
    }
    match examine(drive) {
        Ok(remains) if remains.looks_like_damaged_spare() => WithoutSuperblock::DamagedSpare(remains.describe()),
        Ok(remains) => WithoutSuperblock::Other(remains.describe()),
        Err(e) => WithoutSuperblock::Other(format!(
            "it holds no valid zapraid array superblock, and its zones cannot be reported ({e})"
        )),
    }
}

/// Why a drive without a valid array superblock cannot be used as it is, for the user.
pub fn missing_superblock_reason(drive: &mut dyn ZonedDevice) -> String {
    match without_superblock(drive) {
        WithoutSuperblock::Spare(record) => {
            format!("it holds no array superblock: it is {}", spare_text(&record))
        }
        WithoutSuperblock::DamagedSpare(reason) | WithoutSuperblock::Other(reason) => reason,
    }
}

/// The superblock of the first of `paths` that has a valid one (one drive's damaged
/// superblock, or a drive gone, does not hide the array); if none has, why the first
/// drive has none (or cannot be opened).
pub fn first_superblock(paths: &[PathBuf]) -> Result<ArraySuperblock> {
    let mut first_error = None;
    for path in paths {
        match open_drive(path) {
            Ok(mut drive) => {
                if let Some(sb) = read_superblock(drive.as_mut()) {
                    return Ok(sb);
                }
                if first_error.is_none() {
                    let reason = missing_superblock_reason(drive.as_mut());
                    first_error = Some(Error::Refused { path: path.clone(), reason });
                }
            }
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    Err(first_error.unwrap_or_else(|| Error::Config { reason: "no drives given".into() }))
}
