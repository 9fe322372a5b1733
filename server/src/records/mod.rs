//! Records.

pub mod checkpoint;
pub mod names;
pub mod spare;
pub mod superblock;
