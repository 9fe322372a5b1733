//! Runs a zapraid array on drives: `array` (format, recover), `assembly` (the drives given
//! at start put in array order), `degraded` (drives absent at start: whether the array may
//! start without them, and recording them failed), `superblock` (the array superblock's
//! copies on one drive, and what a drive without one holds), `driver` (the engine on its
//! own thread over the drives, fed through bounded channels), `ublk` (the Linux block
//! device), `control` (the socket `zapraid stop/status/fail/replace` talk to), `names` (which
//! names an array may have), `failures` (which drive failures asked for are carried out),
//! `replace` (a new drive in a failed one's place, the rebuild onto it recorded in the
//! superblock, and resumed at start), `scrub` (the socket's scrub command and its status),
//! `session` (an array run without a block device, asked requests directly: selftest, tests),
//! superblock, and resumed at start), `spare` (a hot spare's record on its drive) and
//! `spare_pool` (a running array's spares, and the rebuild onto one started by itself),
//! `run_dir` (the directory of the control sockets and logs: made 0700, checked, written
//! without following links), `zone_limits` (whether drives allow the zones an array keeps
//! open).

pub mod array;
pub mod assembly;
pub mod checkpoint;
pub mod control;
pub mod degraded;
pub mod driver;
pub mod error;
pub mod failures;
pub mod l2p;
pub mod names;
pub mod replace;
pub mod run_dir;
pub mod scrub;
pub mod service;
pub mod session;
pub mod spare;
pub mod spare_pool;
pub mod superblock;
pub mod ublk;
pub mod wake;
pub mod zone_limits;

pub use error::{Error, Result};
