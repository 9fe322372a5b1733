//! Ops.

pub mod replace;
pub mod spare_pool;
