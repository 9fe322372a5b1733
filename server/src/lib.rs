//! Runs a zapraid array on drives. The crate is in rooms, each a folder whose `mod.rs` says
//! what it owns; a room takes only from the rooms below it, never from one above, and the
//! files within a room take from each other one way. From the bottom up:
//!
//! 1. `error`: the crate's one error type.
//! 2. `drives`: the `Drive` type, opening a drive (a ZNS namespace or a drive file), a
//!    drive named twice, how geometries differ.
//! 3. `records`: the bytes zapraid keeps on one drive (superblock generations, a spare's
//!    record, the checkpoint area), the array's name and identity stamps.
//! 4. `assemble`: arrays from drives: format, assembly in array order, degraded starts,
//!    zone limits, a drive about to join, and recovery of the engine.
//! 5. `run`: the engine thread over the drives, its messages and status, the failures it
//!    carries out, wake-ups, and sessions (an array asked requests directly).
//! 6. `export`: the ways in: the ublk block device.
//! 7. `ops`: what an operator asks a running array: replace a drive, hot spares.
//! 8. `control`: the control socket, its commands and status document, the run directory.
//! 9. `service`: one running array, all of the above put together (`zapraid start`).

pub mod assemble;
pub mod control;
pub mod drives;
pub mod error;
pub mod export;
pub mod ops;
pub mod records;
pub mod run;
pub mod service;

pub use error::{Error, Result};
