//! zapraid: a log-structured RAID engine for Zoned Namespace (ZNS) SSDs, after the
//! ZapRAID paper (Li, Wang, Han, Lee). This facade re-exports the member crates:
//!
//! - [`zns`]: the zoned-device layer (zone model, device interface, emulated ZNS drives,
//!   timing model, conformance suite).
//! - [`engine`]: the RAID engine (being built; see the README's status section).

pub use zapraid_engine as engine;
pub use zapraid_zns as zns;
