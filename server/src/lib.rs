//! Runs a zapraid array on drives: `array` (format, assemble, recover), `superblock` (the
//! array superblock's copies on one drive, and what a drive without one holds), `driver`
//! (the engine on its own thread over the drives, fed through bounded channels), `ublk`
//! (the Linux block device), `control` (the socket `zapraid stop/status/fail` talk to),
//! `names` (which names an array may have), `failures` (which drive failures asked for are
//! carried out), `zone_limits` (whether drives allow the zones an array keeps open).

pub mod array;
pub mod control;
pub mod driver;
pub mod error;
pub mod failures;
pub mod names;
pub mod service;
pub mod superblock;
pub mod ublk;
pub mod wake;
pub mod zone_limits;

pub use error::{Error, Result};
