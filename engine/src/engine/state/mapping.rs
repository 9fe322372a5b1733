//! The L2P cache's state in the engine (`MappingIo`): requests parked waiting for pages
//! (`Parked`), pages loading, failed and written back, and a page being rebuilt from the log
//! (`PageRebuild`). The cache's I/O is `mapping`'s, the rebuilding `page_rebuild`'s.

use std::collections::{HashSet, VecDeque};
use std::ops::{Range, RangeInclusive};

use crate::engine::request::{Request, RequestId};
use crate::error::Error;
use crate::l2p::PageIndex;
use crate::recovery::{Newest, Recovery};

/// A frontend request waiting for pages of the table.
pub(in crate::engine) struct Parked {
    pub(in crate::engine) id: RequestId,
    pub(in crate::engine) request: Request,
    /// A write's sequence number among outstanding writes (`flush`).
    pub(in crate::engine) seq: Option<u64>,
    pub(in crate::engine) pages: RangeInclusive<PageIndex>,
    /// Pages it pinned while it waits (cached ones stay cached for it).
    pub(in crate::engine) pinned: Vec<PageIndex>,
}

/// The L2P cache's state in the engine.
#[derive(Default)]
pub(in crate::engine) struct MappingIo {
    pub(in crate::engine) parked: VecDeque<Parked>,
    /// Pages with a read in flight, or being rebuilt from the log (`page_rebuild`).
    pub(in crate::engine) loading: HashSet<PageIndex>,
    /// An emptied `Parked::pinned` for the next request: none allocates one of its own.
    pub(in crate::engine) spare_pinned: Vec<PageIndex>,
    /// A mapping block failed while a clean stop drained (the array full: no empty zone
    /// beyond the reserve, and garbage collection does not run during a stop): the stop
    /// writes nothing back for a checkpoint any more and ends without one, instead of
    /// writing the pages that came back dirty again and again.
    pub(in crate::engine) checkpoint_abandoned: bool,
    /// Mapping blocks whose stripe failed (their pages came back dirty), since the start.
    pub(in crate::engine) write_backs_failed: u64,
    /// After a start from a checkpoint that replayed segments written after it: the next
    /// page to look from for recovered entries whose page is on the drives (None once every
    /// such page was read). Until such a page is read, the entries it holds that the
    /// recovered ones replace still count as live in their segments, so garbage collection
    /// would see those segments fuller than they are: the pages are read in the
    /// background, a few at a time, and a clean stop waits for them.
    pub(in crate::engine) drain_from: Option<PageIndex>,
    /// Pages whose read failed, and why, until read again: a read that fails before
    /// `load_page` returns (no drive holds the block, nothing rebuilds it) finds no
    /// request parked on it yet, so the request that asked fails when `load_page` returns
    /// (`try_run`). Per page: such a failure may run other requests' loads meanwhile.
    pub(in crate::engine) failed_loads: Vec<(PageIndex, Error)>,
    /// The page being rebuilt from the log (its mapping block unreadable), and the pages
    /// waiting for their turn with why their read failed (`page_rebuild`).
    pub(in crate::engine) rebuild: Option<PageRebuild>,
    pub(in crate::engine) rebuild_queue: VecDeque<(PageIndex, Error)>,
    /// Pages rebuilt from the log since the start.
    pub(in crate::engine) pages_rebuilt: u64,
    /// Pages that could be neither read nor rebuilt, their LBAs recorded lost
    /// (`lost::page_lost`), since the start.
    pub(in crate::engine) pages_lost: u64,
    /// Pages whose mapping block garbage collection could not read (its stripe lost beyond
    /// parity), with the zone of the segment kept for it: each is written back anew,
    /// whatever the budget, so that its copy leaves the segment, which garbage collection
    /// then takes again (`move_out_of_kept_segments`).
    pub(in crate::engine) moving_out: Vec<(PageIndex, u32)>,
}

/// A page being rebuilt.
pub(in crate::engine) struct PageRebuild {
    pub(in crate::engine) page: PageIndex,
    pub(in crate::engine) lbas: Range<u64>,
    /// Why its mapping block could not be read.
    pub(in crate::engine) read_error: Error,
    pub(in crate::engine) scan: Recovery,
    /// Newest copies found so far (the in-memory footer records, at the start).
    pub(in crate::engine) newest: Newest,
}
