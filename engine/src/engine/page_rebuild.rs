//! A page of the L2P table whose mapping block cannot be read, even from parity, is
//! rebuilt from the log: an index lost is not data lost. For the page's LBAs, the newest
//! copy (highest timestamp, then the newer segment, then the later stripe:
//! `recovery::Newest`, as a start decides) among what the footers of the segments on the
//! drives say, read the way a start reads them (`Recovery::scan_segments`: footers, stop
//! footers or every block's metadata, damaged ones rebuilt from the parity of their
//! fields), and the footer records open and sealing segments keep in memory. Requests waiting for the page wait for the
//! rebuild; the rebuilt page is cached dirty, so it is written back as a new mapping block
//! when evicted. Pages rebuilt are counted (`L2pStatus::pages_rebuilt`).
//!
//! Why the log gives the page: while a page is only on the drives, nothing in flight maps
//! into it (a write or relocation pins its page until its blocks are mapped), so each
//! block it maps is persisted, in a segment the engine holds, and is the newest copy of
//! its LBA; a segment reset while the scan runs held nothing the page maps (its
//! relocation read the page first), so such segments are left out. What the log cannot
//! say: a discard is not in it, so a block discarded since it was written comes back, as
//! after a full replay; its segment's live count did not count it, and stays one short
//! (live counts saturate at zero once a page was rebuilt: `Engine::uncount`).
//!
//! A rebuild that cannot be sure of the page (the segments' footers and blocks damaged
//! beyond parity: an LBA whose newest copy is there is unknown; a drive lost beyond
//! tolerance) never installs entries that might be stale: when the mapping block is gone
//! for good (its stripe lost beyond parity) and stripes can be written, the page's LBAs
//! are recorded lost (`lost::page_lost`); otherwise the requests waiting for it fail with
//! an error saying so. One page is rebuilt at a time, others wait in line; a
//! page stays `loading` (`MappingIo`) until its rebuild ends.

use std::ops::Range;

use zapraid_zns::{Command, Completion, Geometry, Tag};

use crate::drive_command::DriveCommand;
use crate::error::Error;
use crate::l2p::{PageIndex, Physical, UNMAPPED};
use crate::recovery::{Newest, Recovery, ScanSegment};

use super::machine::{Engine, Op};
use super::state::mapping::PageRebuild;
use super::state::segment::Segment;

impl Engine {
    /// Page `page`'s mapping block could not be read (`error`): rebuild it from the log, or
    /// wait in line behind the page being rebuilt.
    pub(super) fn rebuild_page(&mut self, page: PageIndex, error: Error) {
        debug_assert!(self.mapping.loading.contains(&page), "a page being rebuilt counts as loading");
        if self.mapping.rebuild.is_some() {
            return self.mapping.rebuild_queue.push_back((page, error));
        }
        tracing::warn!(page, error = %error, "a page of the L2P table cannot be read: rebuilding it from the log");
        let per_page = self.l2p.entries_per_page();
        let first = u64::from(page) * per_page;
        let lbas = first..(first + per_page).min(self.l2p.logical_blocks());
        let mut newest = Newest::default();
        let mut on_drives = Vec::new();
        for seg in self.segments.iter().flatten() {
            if seg.footer.is_empty() {
                let (zone, sequence, layout, class) = (seg.zone, seg.sequence, seg.layout, seg.class);
                // A declustered array's lane being rebuilt is the segment's own (a classic
                // array's drive being rebuilt is passed as failed, below).
                let absent = seg.absent.filter(|_| !self.lanes.is_classic());
                on_drives.push(ScanSegment { zone, sequence, layout, class, table: seg.table.clone(), absent });
            } else {
                offer_footer_records(seg, &lbas, &mut newest);
            }
        }
        // A drive being rebuilt does not hold every segment's chunks yet: read like a failed
        // one (a declustered array's: the segments' absent lanes, above).
        let rebuilding = self.drive_rebuild.as_ref().map(|r| r.drive).filter(|_| self.lanes.is_classic());
        let failed: Vec<usize> = (0..self.failed.len()).filter(|&d| self.failed[d] || Some(d) == rebuilding).collect();
        // A scan, as a start, is given the drives' geometry (a declustered array's engine
        // numbers more segments than the drives have zones).
        let drives = Geometry { zone_count: self.lanes.rows(), ..self.geometry };
        match Recovery::scan_segments(drives, self.config, &failed, &self.lanes, &on_drives) {
            Ok(scan) => {
                self.mapping.rebuild = Some(PageRebuild { page, lbas, read_error: error, scan, newest });
                self.pump_page_rebuild();
            }
            Err(e) => self.page_rebuild_failed(page, &error, &e),
        }
    }

    /// Sends what the rebuild's scan asks for; finishes the rebuild once it is done.
    fn pump_page_rebuild(&mut self) {
        let Some(rebuild) = self.mapping.rebuild.as_mut() else { return };
        let mut commands = Vec::new();
        while let Some(c) = rebuild.scan.poll_command() {
            commands.push(c);
        }
        let done = rebuild.scan.is_done();
        for c in commands {
            debug_assert!(matches!(c.command, Command::Read { .. } | Command::ReportZones { .. }), "a scan only reads");
            // Its segment's zones are not reset while the read is in flight.
            let zone = match &c.command {
                Command::Read { lba, .. } => {
                    self.geometry.zone_of(*lba).filter(|z| self.segments[*z as usize].is_some())
                }
                _ => None,
            };
            if let Some(zone) = zone {
                self.seg_mut(zone).commands_in_flight += 1;
            }
            let tag = self.new_tag(Op::PageRebuild { tag: c.tag, zone });
            self.commands.push_back(DriveCommand { drive: c.drive, tag, command: c.command, delay_ns: 0 });
        }
        if done {
            self.finish_page_rebuild();
        }
    }

    /// A command of the rebuild's scan completed (its own tag `tag`).
    pub(super) fn page_rebuild_completion(
        &mut self,
        drive: usize,
        tag: Tag,
        zone: Option<u32>,
        completion: Completion,
    ) {
        if let Some(zone) = zone {
            self.seg_mut(zone).commands_in_flight -= 1;
        }
        let Some(rebuild) = self.mapping.rebuild.as_mut() else {
            debug_assert!(false, "a scan's command completed with no rebuild running");
            return;
        };
        rebuild.scan.on_completion(drive, Completion { tag, ..completion });
        self.pump_page_rebuild();
    }

    /// The scan is done: the page is made of the newest copies, or the rebuild fails.
    fn finish_page_rebuild(&mut self) {
        let PageRebuild { page, lbas, read_error, scan, mut newest } =
            self.mapping.rebuild.take().expect("a rebuild is running");
        let result = scan.finish_scan(lbas.clone()).and_then(|scanned| {
            for s in scanned {
                let held = self.segments[s.zone as usize].as_ref().is_some_and(|seg| seg.sequence == s.sequence);
                if !held {
                    continue; // reset while the scan ran: it held nothing of the page
                }
                if s.unknown_blocks > 0 {
                    return Err(Error::Corrupt {
                        drive: 0,
                        zone: s.zone,
                        offset_blocks: 0,
                        structure: "segment footer",
                        reason: format!(
                            "{} blocks of this segment have footer entries and metadata damaged beyond what \
                             parity rebuilds: the LBAs they hold are unknown",
                            s.unknown_blocks
                        ),
                    });
                }
                for b in s.blocks {
                    newest.offer(b.field, b.timestamp, s.sequence, b.stripe, b.at);
                }
            }
            Ok(newest)
        });
        match result {
            Ok(newest) => self.install_rebuilt_page(page, &lbas, newest),
            Err(e) => self.page_rebuild_failed(page, &read_error, &e),
        }
        if let Some((page, error)) = self.mapping.rebuild_queue.pop_front() {
            self.rebuild_page(page, error);
        }
    }

    fn install_rebuilt_page(&mut self, page: PageIndex, lbas: &Range<u64>, newest: Newest) {
        let mut entries = vec![UNMAPPED; (lbas.end - lbas.start) as usize].into_boxed_slice();
        let mut mapped = 0;
        for (lba, at) in newest.into_mappings() {
            debug_assert!(lbas.contains(&lba));
            entries[(lba - lbas.start) as usize] = self.l2p.pack(at);
            mapped += 1;
        }
        let replaced = self.l2p.install_rebuilt(page, entries);
        self.mapping.loading.remove(&page);
        self.mapping.pages_rebuilt += 1;
        tracing::warn!(
            page,
            mapped,
            "a page of the L2P table was rebuilt from the log; it is written back when evicted"
        );
        self.unmap_replaced(replaced);
        self.release_parked();
    }

    fn page_rebuild_failed(&mut self, page: PageIndex, read_error: &Error, error: &Error) {
        let at = self.l2p.directory_get(page).expect("a page read from the drives has a place");
        let e = Error::Corrupt {
            drive: at.drive,
            zone: at.zone,
            offset_blocks: at.offset,
            structure: "mapping block",
            reason: format!(
                "page {page} of the L2P table cannot be read ({read_error}) nor rebuilt from the segments' \
                 footers ({error})"
            ),
        };
        // Its mapping block is gone for good (its stripe lost more than parity covers) and
        // the log cannot say which blocks are the newest of its LBAs: they are lost. Only
        // while stripes can be written (failed drives within parity; a drive being rebuilt
        // takes new stripes): the page is cached dirty, and beyond that its write-back
        // would fail again and again; meanwhile requests fail and a later load tries again.
        if Self::beyond_parity(read_error) && self.failed_drives() <= self.codec.parity_chunks() {
            return self.page_lost(page, &e);
        }
        self.mapping.loading.remove(&page);
        self.page_unreadable(page, e);
        self.release_parked();
    }

    /// No page is being rebuilt or waits for a rebuild.
    pub(super) fn page_rebuilds_idle(&self) -> bool {
        self.mapping.rebuild.is_none() && self.mapping.rebuild_queue.is_empty()
    }
}

/// Offers the data blocks of `lbas` that an open or sealing segment's footer records (in
/// memory, filled as its stripes are persisted) hold.
fn offer_footer_records(seg: &Segment, lbas: &Range<u64>, newest: &mut Newest) {
    let layout = &seg.layout;
    let (cb, k) = (layout.chunk_blocks, layout.data_chunks);
    for (drive, records) in seg.footer.iter().enumerate() {
        for (index, entry) in records.iter().enumerate() {
            let lba = entry.lba.get();
            // A lost-block marker's field is its LBA flagged (`lost`); `offer` reads it.
            if !lbas.contains(&crate::format::split_lost_lba(lba).0) {
                continue; // padding, unwritten, or another page's
            }
            let position = index as u64 / cb;
            // Which stripe the chunk at this place belongs to decides whether it holds data
            // or the parity of the data blocks' fields (which may look like any LBA).
            let number = if layout.uses_append() {
                position / layout.group_size * layout.group_size + u64::from(entry.stripe_id.get())
            } else {
                position
            };
            if layout.chunk_on(number, drive) >= k {
                continue;
            }
            let at = Physical { zone: seg.zone, drive, offset: layout.data_start_blocks() + index as u64 };
            newest.offer(lba, entry.timestamp.get(), seg.sequence, number, at);
        }
    }
}
