//! Rewrites of damaged blocks (`Repairs`): those in flight and those waiting for their L2P
//! page, and a damaged stripe row with its live blocks (`Row`, `RowLive`, `RowRewrite`).
//! Rewriting is `repair`'s.

use std::collections::HashMap;

use crate::l2p::Physical;

/// Repairs scheduled (scrub's and reads'), keyed by the damaged place.
#[derive(Default)]
pub(in crate::engine) struct Repairs {
    /// Per place being rewritten (or waiting for its page): whether the scrub (not a read)
    /// asked for it.
    pub(in crate::engine) pending: HashMap<Physical, bool>,
    /// Rewrites waiting for the page of their entry to be read.
    pub(in crate::engine) waiting: Vec<WaitingRepair>,
    /// Blocks whose rewrite reads added to a stripe (damaged ones and the other live
    /// blocks of their rows), and of those the ones persisted and mapped.
    pub(in crate::engine) read_repairs_done: u64,
    pub(in crate::engine) read_repairs_scheduled: u64,
    /// Blocks added to the relocation stripe that no relocation will pad.
    pub(in crate::engine) unpadded: bool,
}

pub(in crate::engine) struct WaitingRepair {
    pub(in crate::engine) lba: u64,
    pub(in crate::engine) timestamp: u64,
    pub(in crate::engine) from: Physical,
    pub(in crate::engine) data: Vec<u8>,
}

/// A row of a stripe (the same block offset of each of its chunks) as read, indexed by
/// chunk (data chunks first, then parity).
pub(in crate::engine) struct Row {
    /// Where each block is, on a drive holding the segment (None: a failed drive, or one
    /// a rebuild has not given the segment yet).
    pub(in crate::engine) places: Vec<Option<Physical>>,
    /// Each block's contents and (LBA, timestamp) fields, for those that passed their
    /// checks (None: damaged, or not read).
    pub(in crate::engine) data: Vec<Option<Vec<u8>>>,
    pub(in crate::engine) fields: Vec<Option<Vec<u8>>>,
}

/// Which blocks of a row are live.
pub(in crate::engine) enum RowLive {
    /// The data chunks whose place the L2P maps, and the LBA it maps there (a scrub's scan).
    Known(Vec<(usize, u64)>),
    /// Whichever LBA each data block says (a read knows no place's LBA): its rewrite is
    /// added only if the L2P maps that LBA at its place then.
    Said,
}

/// What rewriting a row came to, in blocks.
#[derive(Default)]
pub(in crate::engine) struct RowRewrite {
    pub(in crate::engine) scheduled: u64,
    /// Live blocks that cannot be rewritten: damaged beyond what parity covers, or
    /// rebuilt saying another LBA than the one mapped there.
    pub(in crate::engine) unrecoverable: u64,
}
