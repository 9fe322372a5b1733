//! The engine's state, one file per role, below the `Engine` struct that holds it
//! (`machine`) and the `impl Engine` files that act on it (they import from here, never
//! the other way).
//! - `segment`: a segment in a zone, its stripe table and live count;
//! - `stripe`: open stripes filling, encoded stripes in flight, writes in flight, and the
//!   buffers reused by the data path;
//! - `read`: reads in flight and blocks being rebuilt from their stripes;
//! - `relocation`: garbage collection's victim being moved;
//! - `rebuild`: the drive rebuild and the segment it is at; `pace`: its rate limit;
//! - `repair`: rewrites of damaged blocks waiting and the rows they come from;
//! - `scrub`: the scrub, the segment it reads, its report;
//! - `scan`: a scan of the L2P table for one segment's live blocks;
//! - `stop`: where a clean stop stands;
//! - `mapping`: requests waiting for L2P pages, page reads, pages rebuilt from the log;
//! - `checkpoints`: running checkpoints and the base incremental ones build on;
//! - `flush`: outstanding writes, for flushes; `tags`: the tags of commands in flight;
//! - `append`: chunk appends gathered in a scheduling pass, to go out merged per drive.

pub(super) mod append;
pub(super) mod checkpoints;
pub(super) mod flush;
pub(super) mod mapping;
pub(super) mod pace;
pub(super) mod read;
pub(super) mod rebuild;
pub(super) mod relocation;
pub(super) mod repair;
pub(super) mod scan;
pub(super) mod scrub;
pub(super) mod segment;
pub(super) mod stop;
pub(super) mod stripe;
pub(super) mod tags;
