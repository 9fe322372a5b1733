//! Run.

pub mod failures;
pub mod session;
pub mod thread;
pub mod wake;
