//! The L2P cache's traffic with the drives (`l2p`): frontend requests wait, inside the
//! engine, until the pages of the table they touch are cached (a page only on the drives
//! is read like any block, degraded if need be, while other requests proceed; one that
//! cannot be read even from parity is rebuilt from the log, `page_rebuild`); pages past
//! the memory budget are evicted after each event, the dirty ones written to the log as
//! mapping blocks; a persisted mapping block moves the directory, if it is the page's
//! newest write-back.
//!
//! Invariants: a request runs only once every page it touches is cached, and it pins
//! them (a write until each block is mapped); requests are admitted in submission order
//! among those sharing a page, so a later request never overtakes an earlier one on the
//! same LBAs; at most one read (or rebuild) per page is in flight.

use std::collections::HashSet;

use crate::error::{Error, Result};
use crate::format::{mapping_page_of, MAPPING_LBA_FLAG};
use crate::hybrid::ChunkClass;
use crate::l2p::{PageIndex, Physical, Residency};

use super::machine::Engine;
use super::request::{Request, RequestId, Response};
use super::state::mapping::Parked;
use super::state::read::ReadOrigin;
use super::state::stop::StopState;
use super::state::stripe::{BlockInfo, Fill};

/// Page reads in flight at once while the pages of a start from a checkpoint are read for
/// the recovered entries that replace theirs.
const DRAIN_MAX_LOADS: usize = 16;

/// Pages (of a block each) a budget of `bytes` keeps cached: at least one.
pub(super) fn budget_pages(bytes: u64, block_size_bytes: u32) -> usize {
    (bytes / u64::from(block_size_bytes.max(1))).max(1) as usize
}

/// The LBA field of page `page`'s mapping block.
pub(super) fn mapping_lba(page: PageIndex) -> u64 {
    MAPPING_LBA_FLAG | u64::from(page)
}

impl Engine {
    /// Keeps at most `bytes` of L2P pages cached (None: all of them). Takes effect at the
    /// next event.
    pub fn set_l2p_budget(&mut self, bytes: Option<u64>) {
        self.config.l2p.budget_bytes = bytes;
        self.l2p.set_budget_pages(bytes.map(|b| budget_pages(b, self.geometry.block_size_bytes)));
    }

    /// The L2P memory budget in bytes, if there is one.
    pub fn l2p_budget_bytes(&self) -> Option<u64> {
        self.l2p.budget_pages().map(|p| p as u64 * u64::from(self.geometry.block_size_bytes))
    }

    /// Takes a frontend request that touches the L2P table: it runs now if its pages are
    /// cached, else waits for them.
    pub(super) fn admit(&mut self, id: RequestId, request: Request) {
        let (lba, blocks) = match &request {
            Request::Write { lba, data } | Request::WriteWithChecksums { lba, data, .. } => {
                (*lba, (data.len() / self.block_bytes()) as u64)
            }
            Request::Read { lba, blocks }
            | Request::ReadUnverified { lba, blocks, .. }
            | Request::Discard { lba, blocks } => (*lba, *blocks),
            Request::Flush => unreachable!("flushes touch no page"),
        };
        if self.check_range(lba, blocks).is_err() || blocks == 0 {
            return self.run_admitted(id, request, None); // it fails there, with the reason
        }
        // A flush submitted after a write waits for it, parked or not.
        let seq = request.is_write().then(|| self.outstanding_writes.taken());
        let pages = self.l2p.pages_of(lba, blocks);
        let page = *pages.start();
        if self.mapping.parked.is_empty() && page == *pages.end() && self.l2p.is_cached(page) {
            // The common case, without the parked request's bookkeeping: one page, cached,
            // nothing waiting ahead. Pinned while it runs, as `try_run` does.
            let cached = self.l2p.ensure(page);
            debug_assert_eq!(cached, Residency::Cached);
            self.l2p.pin(page);
            self.run_admitted(id, request, seq);
            return self.l2p.unpin(page);
        }
        let parked = Parked { id, request, seq, pages, pinned: std::mem::take(&mut self.mapping.spare_pinned) };
        if !self.mapping.parked.is_empty() {
            let busy: HashSet<PageIndex> = self.mapping.parked.iter().flat_map(|p| p.pages.clone()).collect();
            if parked.pages.clone().any(|p| busy.contains(&p)) {
                return self.mapping.parked.push_back(parked); // behind an earlier one
            }
        }
        if let Some(parked) = self.try_run(parked) {
            self.mapping.parked.push_back(parked);
        }
    }

    /// Pins what is cached of a parked request's pages and reads the rest; runs it if all
    /// are cached. Returns it if it must wait.
    fn try_run(&mut self, mut parked: Parked) -> Option<Parked> {
        let mut waiting = false;
        for page in parked.pages.clone() {
            if parked.pinned.contains(&page) {
                continue;
            }
            match self.l2p.ensure(page) {
                Residency::Cached => {
                    self.l2p.pin(page);
                    parked.pinned.push(page);
                }
                Residency::OnDrive(at) => {
                    waiting = true;
                    self.load_page(page, at);
                    let failed = self.mapping.failed_loads.iter().position(|(failed, _)| *failed == page);
                    if let Some((_, error)) = failed.map(|at| self.mapping.failed_loads.swap_remove(at)) {
                        for pinned in parked.pinned.drain(..) {
                            self.l2p.unpin(pinned);
                        }
                        if let Some(seq) = parked.seq {
                            self.outstanding_writes.answered(seq);
                        }
                        self.responses.push_back(Response::new(parked.id, Err(error)));
                        self.complete_flushes();
                        return None;
                    }
                }
            }
        }
        if waiting {
            return Some(parked);
        }
        self.run_admitted(parked.id, parked.request, parked.seq);
        for page in parked.pinned.drain(..) {
            self.l2p.unpin(page);
        }
        self.mapping.spare_pinned = parked.pinned;
        None
    }

    /// Runs a request whose pages are cached; `seq`: a write's sequence number among
    /// outstanding writes, None if it was refused before it got one.
    fn run_admitted(&mut self, id: RequestId, request: Request, seq: Option<u64>) {
        match request {
            Request::Write { lba, data } => self.write(id, lba, data, None, seq),
            Request::WriteWithChecksums { lba, data, checksums } => self.write(id, lba, data, Some(checksums), seq),
            Request::Read { lba, blocks } => self.read(id, lba, blocks, false),
            Request::ReadUnverified { lba, blocks, buffer } => {
                // Into the pool, where the read takes its buffers from; only a block's
                // length, so that frontends' buffers of every length do not take the
                // pool's few lengths.
                if buffer.len() == self.block_bytes() {
                    self.buffers.give(buffer);
                }
                self.read(id, lba, blocks, true)
            }
            Request::Discard { lba, blocks } => {
                let result = self.check_range(lba, blocks).map(|()| {
                    for lba in lba..lba + blocks {
                        self.unmap_lba(lba);
                    }
                    Vec::new()
                });
                self.responses.push_back(Response::new(id, result));
            }
            Request::Flush => unreachable!("flushes are not admitted"),
        }
    }

    /// No request waits for a page, no page is being rebuilt.
    pub(super) fn mapping_idle(&self) -> bool {
        self.mapping.parked.is_empty() && self.page_rebuilds_idle()
    }

    /// No page is left to read for recovered entries (`MappingIo::drain_from`).
    pub(super) fn overlay_drained(&self) -> bool {
        self.mapping.drain_from.is_none()
    }

    /// Reads pages that recovered entries replace entries of (`MappingIo::drain_from`),
    /// with at most `DRAIN_MAX_LOADS` page reads in flight and no more than `room` (the
    /// pages the cache may still take): while running, what the budget leaves, so that the
    /// reads never push the cache past it (eviction makes room, and the loop comes back);
    /// during a clean stop, a batch (`write_back_for_checkpoint`). Whether it issued a read.
    pub(super) fn drain_overlay(&mut self, room: usize) -> bool {
        let mut issued = false;
        while let Some(from) = self.mapping.drain_from {
            let loading = self.mapping.loading.len();
            if loading >= DRAIN_MAX_LOADS || loading >= room {
                break;
            }
            match self.l2p.next_overlaid_page_on_drives(from) {
                Some((page, at)) => {
                    self.mapping.drain_from = Some(page + 1);
                    self.load_page(page, at);
                    issued = true;
                }
                None => {
                    self.mapping.drain_from = None;
                    tracing::debug!("every page with recovered entries is read: the live counts are exact");
                }
            }
        }
        issued
    }

    /// Page entries recovered ones replaced as the page was read: their blocks are no
    /// longer live where they were.
    pub(super) fn unmap_replaced(&mut self, replaced: Vec<u32>) {
        for packed in replaced {
            let at = self.l2p.unpack(packed);
            let rebuilt = self.live_counts_inexact();
            match self.segments.get_mut(at.zone as usize).and_then(Option::as_mut) {
                // After a page was rebuilt, counts may be one short (`page_rebuild`).
                Some(segment) if segment.valid_blocks > 0 || rebuilt => {
                    segment.valid_blocks = segment.valid_blocks.saturating_sub(1);
                    self.gc_check_needed = true;
                }
                // The checkpoint the start began from counted it there, and its segments
                // stay until garbage collection has read every page (`scan`).
                _ => {
                    debug_assert!(false, "a replaced entry at {at:?} was not counted live");
                    tracing::error!(?at, "a page entry replaced after a start was not counted live in its segment");
                }
            }
        }
    }

    /// Makes `page` cached for garbage collection, a scrub or a repair: true if it is, else
    /// its read is on the way or failed (`mapping_load_failed`).
    pub(super) fn page_ready(&mut self, page: PageIndex) -> bool {
        match self.l2p.ensure(page) {
            Residency::Cached => true,
            Residency::OnDrive(at) => {
                self.load_page(page, at);
                // The load may have ended before it returned, with no read in flight to
                // come back: its mapping block unreadable and the page recorded lost
                // (`lost::page_lost`), cached now. A caller told to wait would wait for
                // nothing (an idle array has no later event to run it again).
                self.l2p.is_cached(page)
            }
        }
    }

    fn load_page(&mut self, page: PageIndex, at: Physical) {
        if self.mapping.loading.insert(page) {
            self.mapping.failed_loads.retain(|(failed, _)| *failed != page);
            self.start_read_at(ReadOrigin::Mapping(page), mapping_lba(page), vec![Some(at)]);
        }
    }

    /// Why the last read of `page`'s mapping block failed, if it did and no read of it
    /// is on the way.
    pub(super) fn mapping_load_failed(&self, page: PageIndex) -> Option<&Error> {
        if self.mapping.loading.contains(&page) {
            return None;
        }
        self.mapping.failed_loads.iter().find(|(failed, _)| *failed == page).map(|(_, e)| e)
    }

    /// A page's mapping block was read (or could not be, even from parity: the page is
    /// rebuilt from the log, and stays loading meanwhile).
    pub(super) fn mapping_loaded(&mut self, page: PageIndex, result: Result<Vec<u8>>) {
        let installed = result.and_then(|block| {
            self.l2p.install(page, &block, self.config.array_uuid).map_err(|e| {
                let at = self.l2p.directory_get(page).expect("a page read from the drives has a place");
                Error::Corrupt {
                    drive: at.drive,
                    zone: at.zone,
                    offset_blocks: at.offset,
                    structure: "mapping block",
                    reason: e.to_string(),
                }
            })
        });
        match installed {
            Ok(replaced) => {
                self.mapping.loading.remove(&page);
                self.unmap_replaced(replaced);
                self.release_parked();
            }
            Err(e) => self.rebuild_page(page, e),
        }
    }

    /// Page `page` can be neither read nor rebuilt: what waits for it fails with `e`.
    pub(super) fn page_unreadable(&mut self, page: PageIndex, e: Error) {
        tracing::error!(page, error = %e, "a page of the L2P table cannot be read");
        self.fail_parked_on(page, &e);
        if let Some(r) = self.relocation.as_mut() {
            r.failed = true;
        }
        self.scrub_page_unreadable(page, &e);
        self.drop_repairs_waiting_on(page, &e);
        self.moving_out_failed(page);
        self.mapping.failed_loads.push((page, e));
    }

    /// Requests waiting for an unreadable page fail with its error.
    fn fail_parked_on(&mut self, page: PageIndex, error: &Error) {
        let parked = std::mem::take(&mut self.mapping.parked);
        for p in parked {
            if !p.pages.contains(&page) {
                self.mapping.parked.push_back(p);
                continue;
            }
            for pinned in &p.pinned {
                self.l2p.unpin(*pinned);
            }
            if let Some(seq) = p.seq {
                self.outstanding_writes.answered(seq);
            }
            self.responses.push_back(Response::new(p.id, Err(error.duplicate())));
        }
        self.complete_flushes();
    }

    /// Runs the parked requests whose pages are all cached now, in order, none ahead of
    /// an earlier one sharing a page.
    pub(super) fn release_parked(&mut self) {
        let parked = std::mem::take(&mut self.mapping.parked);
        let mut blocked: HashSet<PageIndex> = HashSet::new();
        for p in parked {
            if p.pages.clone().any(|page| blocked.contains(&page)) {
                blocked.extend(p.pages.clone());
                self.mapping.parked.push_back(p);
                continue;
            }
            if let Some(p) = self.try_run(p) {
                blocked.extend(p.pages.clone());
                self.mapping.parked.push_back(p);
            }
        }
        if self.stop.is_draining() {
            // The stop (or running checkpoint) padded the open stripes when it began: writes that waited for
            // their pages are padded out too, so that the stop can end.
            self.pad_frontend_stripes();
        }
    }

    /// Whether mapping blocks can be written: no more drives failed than parity covers.
    /// Beyond that every stripe fails, and a dirty page evicted would come back dirty
    /// from its failed mapping block, to be written again at the next event (a stripe
    /// timeout is one), and again, for ever: dirty pages stay cached past the budget
    /// until drives are back, and scans do not wait for them to leave (`scan`).
    pub(super) fn may_write_back(&self) -> bool {
        self.failed_drives() <= self.codec.parity_chunks()
    }

    /// Evicts pages past the budget and writes the dirty ones to the log (dirty ones only
    /// if they can be written: `may_write_back`), and the pages moving out of kept
    /// segments. Not while the array stops: its last stripes are being written.
    pub(super) fn write_back_evicted(&mut self) -> bool {
        if self.stop != StopState::Running {
            return false;
        }
        let moved = self.move_out_of_kept_segments();
        let evicted = self.l2p.evict(!self.may_write_back());
        if evicted.is_empty() {
            return moved; // every pass of the engine's loop without a budget comes here
        }
        self.write_back(evicted);
        true
    }

    /// Moves the pages of `MappingIo::moving_out` out of their segments: one cached (and
    /// not pinned) is written back at once, one only on the drives is read first (the read
    /// fails again: the page is rebuilt from the log, or its LBAs are recorded lost and its
    /// copy forgotten, `page_rebuild`), one being read or written back is waited for. Once
    /// a page's copy left its segment, garbage collection looks at the segment again.
    /// Whether a write-back was issued or a page left: the engine is to run again.
    fn move_out_of_kept_segments(&mut self) -> bool {
        if self.mapping.moving_out.is_empty() {
            return false;
        }
        let mut loads = Vec::new();
        let mut writes = Vec::new();
        let mut left = Vec::new();
        let mut moved = false;
        for (page, zone) in std::mem::take(&mut self.mapping.moving_out) {
            if self.l2p.directory_get(page).is_none_or(|at| at.zone != zone) {
                tracing::debug!(page, zone, "a page of the L2P table left the segment kept for it");
                self.reclaim_pending = true;
                self.gc_check_needed = true;
                moved = true;
                continue;
            }
            left.push((page, zone));
            if self.mapping.loading.contains(&page) || self.l2p.being_written_back(page) {
                continue; // the read or write-back under way decides
            }
            match self.l2p.ensure(page) {
                Residency::Cached => writes.extend(self.l2p.evict_page(page).map(|entries| (page, entries))),
                Residency::OnDrive(at) => loads.push((page, at)),
            }
        }
        self.mapping.moving_out = left;
        let written = !writes.is_empty();
        self.write_back(writes);
        // After the list is back: a read that fails at once ends here (`page_unreadable`).
        for (page, at) in loads {
            self.load_page(page, at);
        }
        written || moved
    }

    /// A page moving out of a kept segment can be neither read nor rebuilt, or its
    /// write-back failed (too many drives down, or no room): the segment is left as one
    /// whose blocks could not be written elsewhere, which garbage collection tries again
    /// when a rebuild starts or is about to end (`lost::retry_unreclaimable`).
    fn moving_out_failed(&mut self, page: PageIndex) {
        let Some(at) = self.mapping.moving_out.iter().position(|(p, _)| *p == page) else { return };
        let (_, zone) = self.mapping.moving_out.swap_remove(at);
        let Some(seg) = self.segments.get_mut(zone as usize).and_then(Option::as_mut) else { return };
        tracing::warn!(page, zone, "a page of the L2P table cannot leave the segment kept for it; the segment stays");
        seg.unreclaimable = true;
        seg.write_failed = true;
    }

    /// Has page `page`, whose mapping block in the segment in `zone` cannot be read even
    /// from parity, written back elsewhere (`move_out_of_kept_segments`), once.
    pub(super) fn move_page_out(&mut self, page: PageIndex, zone: u32) {
        if !self.mapping.moving_out.contains(&(page, zone)) {
            tracing::warn!(page, zone, "a mapping block cannot be read: its page is rebuilt and written elsewhere");
            self.mapping.moving_out.push((page, zone));
        }
    }

    /// Whether the segment in `zone` waits for a page of the table to leave it.
    pub(super) fn kept_for_pages(&self, zone: u32) -> bool {
        self.mapping.moving_out.iter().any(|(_, z)| *z == zone)
    }

    /// The chunk class mapping blocks are written in: that of a one-block write.
    pub(super) fn mapping_class(&self) -> ChunkClass {
        self.plan.class_of_write(self.block_bytes() as u64)
    }

    /// Writes evicted dirty pages to the log as mapping blocks, each with a timestamp of
    /// its own (the newest write-back of a page is the one the directory follows).
    pub(super) fn write_back(&mut self, evicted: Vec<(PageIndex, Box<[u32]>)>) {
        let fill = Fill::Frontend(self.mapping_class());
        for (page, entries) in evicted {
            let mut block = vec![0; self.block_bytes()];
            self.l2p.encode(page, &entries, self.config.array_uuid, &mut block);
            let timestamp = self.next_timestamp;
            self.next_timestamp += 1;
            self.l2p.writing_back(page, timestamp, entries);
            let info = BlockInfo {
                lba: mapping_lba(page),
                timestamp,
                request: None,
                relocated_from: None,
                repair: false,
                data_crc: crate::crc::crc32c(&block),
            };
            self.add_block(info, block, fill);
        }
    }

    /// A block with no request and not relocated was persisted at `at`: a mapping block
    /// write-back (padding aside).
    pub(super) fn mapping_persisted(&mut self, lba: u64, timestamp: u64, at: Physical) {
        let Some(page) = mapping_page_of(lba) else { return };
        if self.l2p.written_back(page as PageIndex, timestamp) {
            self.map_lba(lba, at);
        }
    }

    /// A mapping block's stripe failed: its page comes back cached and dirty.
    pub(super) fn mapping_write_failed(&mut self, lba: u64, timestamp: u64) {
        if let Some(page) = mapping_page_of(lba) {
            self.l2p.write_back_failed(page as PageIndex, timestamp);
            if !self.l2p.being_written_back(page as PageIndex) {
                self.moving_out_failed(page as PageIndex); // its newest write-back failed
            }
            self.mapping.write_backs_failed += 1;
            self.mapping.checkpoint_abandoned |= self.stop.is_draining();
        }
    }

    /// Where a block named by its LBA field is: a logical block (its page cached) or a
    /// mapping block (the directory).
    pub(super) fn mapped(&self, lba: u64) -> Option<Physical> {
        match mapping_page_of(lba) {
            Some(page) => self.l2p.directory_get(page as PageIndex),
            None => self.l2p.get(lba),
        }
    }
}
