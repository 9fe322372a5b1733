//! The one error type of the RAID engine.

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

    #[error("drive {drive}: {source}")]
    Device { drive: usize, source: zns::Error },
}
