//! Assembling.

pub mod assembly;
pub mod degraded;
pub mod format;
pub mod zone_limits;
