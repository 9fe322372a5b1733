//! Export.

pub mod ublk;
