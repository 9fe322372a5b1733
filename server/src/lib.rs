//! Runs a zapraid array on drives.

pub mod assemble;
pub mod control;
pub mod error;
pub mod export;
pub mod ops;
pub mod records;
pub mod run;
pub mod service;

pub use error::{Error, Result};

// The paths cli/src/replay_targets.rs takes these by (another change is editing it): to
// go once it takes them from the rooms.
pub use assemble::format as array;
pub use run::session;
pub use run::thread as driver;
