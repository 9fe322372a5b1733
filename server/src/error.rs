//! The server crate's errors: each names the drive (by path) or the setting at fault.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {context}: {source}", path.display())]
    Io { path: PathBuf, context: &'static str, source: std::io::Error },

    #[error("{}: {source}", path.display())]
    Drive { path: PathBuf, source: zapraid_zns::Error },

    #[error("{}: {what} failed: {source}", path.display())]
    DriveCommand { path: PathBuf, what: &'static str, source: zapraid_zns::Error },

    #[error("{} refused: {reason}", path.display())]
    Refused { path: PathBuf, reason: String },

    #[error("{reason}")]
    Config { reason: String },

    #[error(transparent)]
    Engine(#[from] zapraid_engine::Error),

    #[error("ublk: {reason}")]
    Ublk { reason: String },

    #[error("the engine thread has stopped")]
    EngineGone,
}

pub type Result<T> = std::result::Result<T, Error>;
