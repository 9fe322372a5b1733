//! The one error type of the zoned-device layer.
//!
//! Command errors mirror the NVMe ZNS status codes a real drive returns (so the engine
//! handles emulated and real drives alike) and carry the zone and LBA they concern.
//! Errors about drive files carry the path. Nothing read from a drive file may panic:
//! every decode failure is one of these variants.
//!
//! Each error's text is whole: a variant that carries a lower error (`error` fields)
//! prints it and does not also return it from `source()`, so each thing is said once
//! whether the error is printed alone (`{}`: logs, control socket answers) or as a chain
//! (anyhow's `{:#}`, which would repeat a source the text already holds).

use std::path::PathBuf;

use crate::zone::{ZoneAction, ZoneState};

/// Result alias of the zoned-device layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every failure of the zoned-device layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid geometry: {reason}")]
    InvalidGeometry { reason: String },

    #[error("zone {zone}: write at LBA {lba} is not at the write pointer (LBA {write_pointer})")]
    ZoneInvalidWrite { zone: u32, lba: u64, write_pointer: u64 },

    #[error("zone {zone} is full")]
    ZoneIsFull { zone: u32 },

    #[error("zone {zone}: {blocks} blocks at LBA {lba} cross the zone's capacity or boundary")]
    ZoneBoundary { zone: u32, lba: u64, blocks: u64 },

    #[error("zone {zone} is read-only")]
    ZoneReadOnly { zone: u32 },

    #[error("zone {zone} is offline")]
    ZoneOffline { zone: u32 },

    #[error("zone {zone}: too many open zones (limit {limit})")]
    TooManyOpenZones { zone: u32, limit: u32 },

    #[error("zone {zone}: too many active zones (limit {limit})")]
    TooManyActiveZones { zone: u32, limit: u32 },

    #[error("zone {zone}: cannot {action} a zone that is {state}")]
    InvalidZoneStateTransition { zone: u32, state: ZoneState, action: ZoneAction },

    #[error("LBA {lba} is not the start of a zone")]
    NotZoneStart { lba: u64 },

    #[error("zone append of {blocks} blocks exceeds the drive's limit of {limit} blocks")]
    AppendTooLarge { blocks: u64, limit: u32 },

    #[error("transfer of {blocks} blocks exceeds the drive's limit of {limit} blocks")]
    TransferTooLarge { blocks: u64, limit: u32 },

    #[error("transfer of {blocks} blocks is not a whole multiple of the drive's granule of {granule_blocks} blocks")]
    TransferNotWhole { blocks: u64, granule_blocks: u32 },

    #[error("{blocks} blocks at LBA {lba} lie outside the namespace ({total_blocks} blocks)")]
    LbaOutOfRange { lba: u64, blocks: u64, total_blocks: u64 },

    #[error("{what} buffer is {got} bytes, expected {expected}")]
    BufferSize { what: &'static str, expected: usize, got: usize },

    #[error("malformed zone report: {reason}")]
    BadZoneReport { reason: String },

    #[error("unrecovered read error at LBA {lba}")]
    MediaError { lba: u64 },

    #[error("NVMe command {opcode:#04x} at LBA {lba} failed with status {status:#06x} ({})", crate::nvme::status_name(*status))]
    NvmeStatus { opcode: u8, lba: u64, status: u16 },

    #[error("{}: {reason}", path.display())]
    UnsupportedDevice { path: PathBuf, reason: String },

    #[error("the drive has failed")]
    DeviceFailed,

    /// A command reached a part of a split drive (`part`) for a zone another part owns.
    #[error("zone {zone} belongs to another part of the drive (this part has zones {first_zone}..{end_zone})")]
    ZoneNotInPart { zone: u32, first_zone: u32, end_zone: u32 },

    #[error("cannot split the drive into parts: {reason}")]
    CannotSplit { reason: String },

    #[error("zone {zone}: a Zone Write is already in flight; a zone takes one at a time")]
    ZoneWriteInFlight { zone: u32 },

    #[error("{context} ({}): {error}", path.display())]
    Io { path: PathBuf, context: &'static str, error: std::io::Error },

    #[error("{}: {reason}", path.display())]
    BadDriveFile { path: PathBuf, reason: String },

    /// Both copies of a zone's record are damaged: the file no longer says what that zone
    /// holds, so it cannot be driven as it is; it can be re-initialised
    /// (`EmulatedDrive::reinitialize_file`), which empties every zone.
    #[error(
        "{}: zone {zone} record (every copy): {reason}; the drive file does not say what that zone holds \
         (`zapraid format --force`, or `replace --force` onto it, re-initialises it, erasing it)",
        path.display()
    )]
    ZoneRecordLost { path: PathBuf, zone: u32, reason: String },

    #[error("{}: not a zapraid emulated drive file (it starts with \"{}\", not \"ZRAIDEMU\")", path.display(), found.escape_ascii())]
    NotAnEmulatedDrive { path: PathBuf, found: [u8; 8] },

    #[error("{}: drive file format version {found}, this build reads version {supported}", path.display())]
    UnsupportedVersion { path: PathBuf, found: u32, supported: u32 },

    #[error("{}: drive is in use by another process", path.display())]
    DriveInUse { path: PathBuf },

    #[error("{}: {reason}", path.display())]
    BadDirectory { path: PathBuf, reason: String },
}

impl Error {
    /// The drive file or device the error names in its text, if it names one: a caller
    /// that knows the path adds it only when the error does not say it already.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            Error::UnsupportedDevice { path, .. }
            | Error::Io { path, .. }
            | Error::BadDriveFile { path, .. }
            | Error::ZoneRecordLost { path, .. }
            | Error::NotAnEmulatedDrive { path, .. }
            | Error::UnsupportedVersion { path, .. }
            | Error::DriveInUse { path }
            | Error::BadDirectory { path, .. } => Some(path),
            _ => None,
        }
    }
}
