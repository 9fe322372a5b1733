//! The server crate's errors: each names the drive (by path) or the setting at fault,
//! once. An error that carries a lower one prints it and does not also return it from
//! `source()` (anyhow's `{:#}` would print it again), and a drive's path is added only
//! when the drive's own error does not name it already. The bottom of the crate: it
//! imports nothing of it.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {context}: {error}", path.display())]
    Io { path: PathBuf, context: &'static str, error: std::io::Error },

    #[error("{}{error}", drive_prefix(path, error))]
    Drive { path: PathBuf, error: zapraid_zns::Error },

    #[error("{}{what} failed: {error}", drive_prefix(path, error))]
    DriveCommand { path: PathBuf, what: &'static str, error: zapraid_zns::Error },

    #[error("{} refused: {reason}", path.display())]
    Refused { path: PathBuf, reason: String },

    #[error("{reason}")]
    Config { reason: String },

    /// An array name that cannot be one (`names`); shown escaped, so a control
    /// character in it is seen.
    #[error("array name \"{}\" {problem}", name.escape_debug())]
    Name { name: String, problem: String },

    #[error(transparent)]
    Engine(#[from] zapraid_engine::Error),

    #[error("no drive {drive}: the array has drives 0 to {}", drives.saturating_sub(1))]
    NoSuchDrive { drive: usize, drives: usize },

    #[error("drive {drive} has failed already")]
    AlreadyFailed { drive: usize },

    /// A drive failure the level cannot survive, asked for without force
    /// (`run::failures`).
    #[error("{}", unsurvivable_text(*level, failed, *rebuilding, *drive))]
    Unsurvivable { level: zapraid_engine::RaidLevel, failed: Vec<usize>, rebuilding: Option<usize>, drive: usize },

    /// A drive failure that would leave segments of a declustered array short of more
    /// chunks than parity covers, asked for without force (`run::failures`).
    #[error(
        "failing drive {drive} would leave {segments} segment(s) of the {level} declustered array short of more \
         chunks than parity covers (their other drives failed, or hold chunks a rebuild has not written yet): \
         their blocks would read as errors; wait for the rebuild to end (zapraid status), or add --force to fail \
         it anyway"
    )]
    SegmentsBeyondParity { level: zapraid_engine::RaidLevel, drive: usize, segments: u64 },

    /// Drives absent at start that the array may not start without (`degraded`).
    #[error("array \"{array}\" cannot start: {reason}")]
    MissingDrives { array: String, reason: String },

    #[error("ublk: {reason}")]
    Ublk { reason: String },

    #[error("the engine thread has stopped")]
    EngineGone,
}

pub type Result<T> = std::result::Result<T, Error>;

/// Why a failure is refused: what the level survives, what failed already or is being
/// rebuilt, what failing `drive` would do.
fn unsurvivable_text(
    level: zapraid_engine::RaidLevel,
    failed: &[usize],
    rebuilding: Option<usize>,
    drive: usize,
) -> String {
    let survives = match level.tolerated_failures() {
        0 => "no failed drive".to_string(),
        1 => "1 failed drive".to_string(),
        n => format!("{n} failed drives"),
    };
    let already = match failed {
        [] => String::new(),
        [one] => format!(", and drive {one} has failed already"),
        [first @ .., last] => {
            let first: Vec<String> = first.iter().map(usize::to_string).collect();
            format!(", and drives {} and {last} have failed already", first.join(", "))
        }
    };
    let rebuilt = match rebuilding {
        Some(r) if r != drive => format!(
            "{} drive {r} is being rebuilt (it holds only what the rebuild gave it so far)",
            if already.is_empty() { "," } else { ", and" }
        ),
        _ => String::new(),
    };
    let too = if failed.is_empty() && rebuilt.is_empty() { "" } else { " too" };
    format!(
        "{level} survives {survives}{already}{rebuilt}: failing drive {drive}{too} would lose the array's data \
         (blocks of the stripes it would leave short read as errors, and with no drive to spare the array \
         would not start again); add --force to fail it anyway"
    )
}

/// "path: " before a drive's error, unless the error names the path itself (errors of
/// opening a drive file do).
fn drive_prefix(path: &Path, error: &zapraid_zns::Error) -> String {
    if error.path() == Some(path) {
        String::new()
    } else {
        format!("{}: ", path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drive_path_is_said_once() {
        let path = PathBuf::from("drives/drive0.zns");
        let in_use = zapraid_zns::Error::DriveInUse { path: path.clone() };
        let e = Error::Drive { path: path.clone(), error: in_use };
        assert_eq!(e.to_string(), "drives/drive0.zns: drive is in use by another process");
        assert!(std::error::Error::source(&e).is_none(), "the text holds the drive's error already");
        let e = Error::DriveCommand {
            path: path.clone(),
            what: "zone reset",
            error: zapraid_zns::Error::ZoneIsFull { zone: 3 },
        };
        assert_eq!(e.to_string(), "drives/drive0.zns: zone reset failed: zone 3 is full");
        let other = zapraid_zns::Error::DriveInUse { path: "drives/drive1.zns".into() };
        let e = Error::Drive { path, error: other };
        assert_eq!(e.to_string(), "drives/drive0.zns: drives/drive1.zns: drive is in use by another process");
    }
}
