//! The one error type of the RAID engine. As in the zoned-device layer, an error that
//! carries a lower one prints it and does not also return it from `source()`: said once.

use zapraid_zns as zns;

/// Result alias of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every failure of the RAID engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid array configuration: {reason}")]
    InvalidConfig { reason: String },

    #[error("{lost} of {total} chunks of a stripe are lost; the code tolerates {tolerated}")]
    TooManyErasures { lost: usize, total: usize, tolerated: usize },

    #[error("drive {drive}: {structure} at zone {zone}, offset {offset_blocks}: {reason}")]
    Corrupt { drive: usize, zone: u32, offset_blocks: u64, structure: &'static str, reason: String },

    #[error("drive {drive}: {error}")]
    Device { drive: usize, error: zns::Error },

    /// No empty zone left and nothing to reclaim.
    #[error("the array is full: {reason}")]
    ArrayFull { reason: String },

    /// A logical block recorded lost (`engine::lost`): it could not be read or rebuilt.
    #[error(
        "LBA {lba} is lost: its block could not be read or rebuilt (more of its stripe damaged or on failed \
         drives than parity covers); writing it again makes it whole"
    )]
    Lost { lba: u64 },

    /// The array cannot take the request now (stopping, or its engine is gone).
    #[error("the array is unavailable: {reason}")]
    Unavailable { reason: String },
}

impl Error {
    /// The same failure again, for each of several requests it ends (errors that carry a
    /// device error keep its text).
    pub fn duplicate(&self) -> Error {
        match self {
            Error::InvalidConfig { reason } => Error::InvalidConfig { reason: reason.clone() },
            Error::TooManyErasures { lost, total, tolerated } => {
                Error::TooManyErasures { lost: *lost, total: *total, tolerated: *tolerated }
            }
            Error::Corrupt { drive, zone, offset_blocks, structure, reason } => Error::Corrupt {
                drive: *drive,
                zone: *zone,
                offset_blocks: *offset_blocks,
                structure,
                reason: reason.clone(),
            },
            Error::Device { .. } => Error::Unavailable { reason: self.to_string() },
            Error::ArrayFull { reason } => Error::ArrayFull { reason: reason.clone() },
            Error::Lost { lba } => Error::Lost { lba: *lba },
            Error::Unavailable { reason } => Error::Unavailable { reason: reason.clone() },
        }
    }
}
