//! Scrub and read repair: silent corruption found and moved off before it adds up.
//!
//! A scrub walks the segments holding data when it started one at a time: sealed ones
//! whole, open ones as far as their groups are done (every stripe of those persisted). The
//! L2P table says which of a segment's blocks are live; then stripe by stripe (a window
//! of them in flight) every chunk is read from every drive holding the segment, and each
//! block is checked: its metadata decodes (checksum of data and metadata), it belongs to
//! this segment (sequence) and stripe (stripe ID), its kind matches its chunk (data or
//! padding in data chunks, parity in parity chunks), and a live block says the LBA the
//! L2P table maps there. A row of a stripe (the same block offset of every chunk) whose
//! blocks all pass has its parity recomputed from the data blocks (contents and the
//! (LBA, timestamp) fields parity blocks carry) and compared.
//!
//! Repair (`repair`), as garbage collection moves blocks: a zone is written only at its
//! write pointer, so nothing is fixed in place. Every live block of a row that is damaged
//! or whose parity disagrees is rewritten (reconstructed if it was the damaged one) with
//! its timestamp into a relocation stripe; the L2P entry follows only if it still points
//! at the old place. The damaged copy stays behind, no longer live, until garbage
//! collection resets its zone, so a later scrub does not count it again (damage in rows
//! with no live block is reported apart). A frontend read that had to rebuild a damaged
//! block from its stripe rewrites its row the same way (`Engine::rewrite_row`).
//!
//! Invariants: garbage collection does not take the segment being scrubbed; a repair
//! rewrite never maps an LBA a newer write or a relocation moved meanwhile; a scrub issues
//! reads only while the array runs and within its rate (bytes read over virtual time).

use std::collections::{BTreeMap, HashMap, VecDeque};

use zapraid_zns::{Command, Completion};

use crate::drive_command::DriveCommand;
use crate::error::{Error, Result};
use crate::format::{encode_fields, BlockKind, BlockMetadata, LOST_LBA_FLAG};
use crate::l2p::{PageIndex, Physical};

use super::machine::{Engine, Op};
use super::mapping;
use super::state::repair::{Row, RowLive};
use super::state::scan::{LiveScan, ScanStep};
use super::state::scrub::{ChunkRead, Scrub, ScrubRead, ScrubReport, ScrubStatus, SegmentScrub, StripeRead};
use super::state::segment::SegmentState;
use super::state::stop::StopState;

/// Stripes read ahead at once: bounds the memory a scrub holds.
const SCRUB_WINDOW_STRIPES: usize = 16;

/// A rate-limited scrub may read ahead of its average rate by this long (one burst).
const SCRUB_BURST_NS: u64 = 10_000_000;

const NS_PER_S: u128 = 1_000_000_000;

/// One block of a row as checked: intact (its metadata), or not usable.
type RowBlock = Option<BlockMetadata>;

impl Engine {
    /// Starts a scrub of every segment holding data (open ones as far as their groups are
    /// done), reading at most `rate_bytes_per_s` (None:
    /// as fast as the drives go). Refused while one runs or the array stops.
    pub fn start_scrub(&mut self, rate_bytes_per_s: Option<u64>) -> Result<()> {
        if self.scrub.is_some() {
            return Err(Error::Unavailable { reason: "a scrub is running".into() });
        }
        if self.stop != StopState::Running && !self.checkpoint_in_progress() {
            return Err(Error::Unavailable { reason: "it is stopping".into() });
        }
        let zones: VecDeque<u32> =
            self.segments.iter().flatten().filter(|s| s.state != SegmentState::Relocating).map(|s| s.zone).collect();
        tracing::info!(segments = zones.len(), "scrub started");
        self.scrub = Some(Scrub {
            report: ScrubReport { segments_left: zones.len() as u64, ..Default::default() },
            zones,
            current: None,
            rate_bytes_per_s: rate_bytes_per_s.filter(|r| *r > 0),
            paced_bytes: 0,
            paced_since_ns: self.now_ns,
        });
        self.settle();
        Ok(())
    }

    /// Changes the running scrub's rate limit (None: unlimited).
    pub fn set_scrub_rate(&mut self, rate_bytes_per_s: Option<u64>) {
        if let Some(s) = self.scrub.as_mut() {
            s.rate_bytes_per_s = rate_bytes_per_s.filter(|r| *r > 0);
            s.paced_since_ns = self.now_ns;
            s.paced_bytes = 0;
        }
        self.settle();
    }

    pub fn scrub_status(&self) -> ScrubStatus {
        ScrubStatus {
            running: self.scrub.as_ref().map(|s| s.report),
            last: self.last_scrub,
            rate_bytes_per_s: self.scrub.as_ref().and_then(|s| s.rate_bytes_per_s),
            read_repairs_scheduled: self.repairs.read_repairs_scheduled,
            read_repairs_done: self.repairs.read_repairs_done,
            repairs_in_flight: self.repairs_in_flight(),
        }
    }

    /// The zone of the segment being scrubbed, which garbage collection leaves alone.
    pub(super) fn zone_being_scrubbed(&self) -> Option<u32> {
        self.scrub.as_ref()?.current.as_ref().map(|s| s.zone)
    }

    /// When a rate-limited scrub may read again, if it waits for that.
    pub(super) fn scrub_timer_ns(&self) -> Option<u64> {
        let s = self.scrub.as_ref()?;
        let rate = u128::from(s.rate_bytes_per_s?);
        let due = u128::from(s.paced_since_ns) + u128::from(s.paced_bytes) * NS_PER_S / rate;
        let due = due.saturating_sub(u128::from(SCRUB_BURST_NS));
        let due = u64::try_from(due).unwrap_or(u64::MAX);
        (due > self.now_ns).then_some(due)
    }

    /// Moves the scrub on: the next segment, reads within the window and the rate; the
    /// end. Called from `pump`.
    pub(super) fn advance_scrub(&mut self) {
        if self.scrub.is_none() {
            return;
        }
        if self.checkpoint_in_progress() {
            return; // it goes on once the checkpoint is written (one started meanwhile)
        }
        if self.stop != StopState::Running {
            // Reads in flight complete and are dropped; the report says how far it got.
            if self.scrub.as_ref().and_then(|s| s.current.as_ref()).is_none_or(|c| c.reading.is_empty()) {
                self.finish_scrub();
            }
            return;
        }
        loop {
            let s = self.scrub.as_mut().expect("a scrub");
            if s.current.is_none() {
                let Some(zone) = s.zones.pop_front() else {
                    return self.finish_scrub();
                };
                self.start_segment_scrub(zone);
                continue;
            }
            let c = s.current.as_mut().expect("a segment");
            let end = c.end; // a check may have found the data ending before them
            c.again.retain(|p| *p < end);
            if c.scan.is_some() {
                if self.scan_scrubbed_segment() {
                    continue;
                }
                return;
            }
            if c.next_position >= c.end && c.reading.is_empty() && c.again.is_empty() {
                debug_assert!(
                    c.done.iter().take(c.end as usize).all(|d| *d),
                    "zone {}: a stripe before {} was neither checked nor passed over",
                    c.zone,
                    c.end
                );
                let s = self.scrub.as_mut().expect("a scrub");
                let repaired = s.current.take().is_some_and(|c| c.repaired);
                s.report.segments_checked += 1;
                s.report.segments_left -= 1;
                // The segment's repairs fill relocation stripes; the last one is padded.
                self.repairs.unpadded |= repaired;
                // Garbage collection passes over the segment being scrubbed: one found
                // with holes is its to reclaim now.
                self.gc_check_needed = true;
                continue;
            }
            let more = c.next_position < c.end || !c.again.is_empty();
            if !more || c.reading.len() >= SCRUB_WINDOW_STRIPES || self.scrub_timer_ns().is_some() {
                return;
            }
            self.issue_scrub_stripe();
        }
    }

    /// Fills the segment's live map from the L2P table as far as it can now: true once
    /// the scan is done.
    fn scan_scrubbed_segment(&mut self) -> bool {
        let mut scan = self.scrub_segment().scan.expect("scanning");
        scan.begin_round();
        loop {
            let step = self.scan_step(&mut scan);
            // A page read that failed at once (its mapping block beyond what parity covers)
            // may have ended the scrub already (`scrub_page_unreadable`).
            if self.scrub.as_ref().is_none_or(|s| s.current.is_none()) {
                return false;
            }
            match step {
                ScanStep::Live { lba, at, .. } => {
                    self.scrub_segment().live.insert((at.drive, at.offset), lba);
                }
                ScanStep::Wait => {
                    self.scrub_segment().scan = Some(scan);
                    // Such a failure came before the scan was stored at its page, so it
                    // did not end the scrub; nothing is in flight to move it on: end it.
                    let page = self.l2p.page_of(scan.next_lba);
                    let failed = self.mapping_load_failed(page).map(Error::duplicate);
                    if let Some(error) =
                        failed.filter(|_| !scan.waiting_room && !scan.is_done(self.l2p.logical_blocks()))
                    {
                        self.scrub_page_unreadable(page, &error);
                    }
                    return false;
                }
                ScanStep::Done => {
                    self.scrub_segment().scan = None;
                    return true;
                }
            }
        }
    }

    /// A page of the L2P table could not be read: a scrub whose scan waits for it stops
    /// there (it cannot tell which blocks are live), with what it found so far.
    pub(super) fn scrub_page_unreadable(&mut self, page: PageIndex, error: &Error) {
        let logical_blocks = self.l2p.logical_blocks();
        let waits =
            self.scrub_scan().is_some_and(|s| !s.is_done(logical_blocks) && self.l2p.page_of(s.next_lba) == page);
        if waits {
            tracing::error!(page, error = %error, "scrub stopped: a page of the L2P table cannot be read");
            self.finish_scrub();
        }
    }

    /// A scrub's repair was persisted: counted in the running scrub, or the last one.
    pub(super) fn count_scrub_rewrite(&mut self) {
        if let Some(s) = self.scrub.as_mut() {
            s.report.blocks_rewritten += 1;
        } else if let Some(last) = self.last_scrub.as_mut() {
            last.blocks_rewritten += 1;
        }
    }

    /// The L2P scan of the segment being scrubbed, while it runs.
    pub(super) fn scrub_scan(&self) -> Option<LiveScan> {
        self.scrub.as_ref()?.current.as_ref()?.scan
    }

    fn finish_scrub(&mut self) {
        let Some(s) = self.scrub.take() else { return };
        let r = s.report;
        tracing::info!(
            segments = r.segments_checked,
            blocks = r.blocks_checked,
            damaged = r.blocks_damaged,
            parity_mismatches = r.parity_mismatches,
            rewritten = r.blocks_rewritten,
            unrecoverable = r.blocks_unrecoverable,
            "scrub finished"
        );
        self.last_scrub = Some(r);
    }

    /// Takes the next segment: skipped if garbage collection took it (relocating, or gone)
    /// or a drive being rebuilt does not hold it yet (its chunks there do not exist).
    fn start_segment_scrub(&mut self, zone: u32) {
        let usable =
            self.segment_of_zone(zone).is_some_and(|s| s.state != SegmentState::Relocating && s.absent.is_none());
        let scan_drive = (0..self.layout.drives()).find(|d| self.holds(zone, *d));
        let (true, Some(scan_drive)) = (usable, scan_drive) else {
            let s = self.scrub.as_mut().expect("a scrub");
            s.report.segments_left -= 1;
            return;
        };
        let mut live = HashMap::new();
        for page in self.l2p.directory_in_zone(zone) {
            let p = self.l2p.directory_get(page).expect("in the directory");
            live.insert((p.drive, p.offset), mapping::mapping_lba(page));
        }
        // An open segment is read only as far as its groups are done: their stripes are all
        // persisted, and nothing more is written there.
        let seg = self.seg(zone);
        let end = match seg.state {
            SegmentState::Open => (seg.group * seg.layout.group_size).min(seg.layout.stripes),
            _ => seg.layout.stripes,
        };
        self.scrub.as_mut().expect("a scrub").current = Some(SegmentScrub {
            zone,
            scan_drive,
            next_position: 0,
            end,
            live,
            scan: Some(LiveScan::new(zone)),
            reading: BTreeMap::new(),
            again: Vec::new(),
            done: vec![false; end as usize],
            repaired: false,
        });
    }

    fn scrub_segment(&mut self) -> &mut SegmentScrub {
        self.scrub.as_mut().and_then(|s| s.current.as_mut()).expect("a segment being scrubbed")
    }

    /// Reads every chunk of the stripe at the scan drive's next position.
    fn issue_scrub_stripe(&mut self) {
        let c = self.scrub_segment();
        let (zone, scan_drive) = (c.zone, c.scan_drive);
        let position = c.again.pop().unwrap_or_else(|| {
            c.next_position += 1;
            c.next_position - 1
        });
        let Some(places) = self.stripe_places(zone, scan_drive, position) else {
            return self.scrub_segment().mark_done(position);
        };
        let layout = self.seg(zone).layout;
        let n = layout.drives();
        let mut chunks: Vec<Option<(u64, Option<ChunkRead>)>> = vec![None; n];
        chunks[scan_drive] = Some((position, None));
        for (drive, at) in places.others {
            chunks[drive] = Some((at, None));
        }
        let (cb, bs, ms) = (layout.chunk_blocks as usize, self.block_bytes(), self.meta_bytes());
        let zone_start = self.geometry.zone_start_lba(zone) + layout.data_start_blocks();
        let reads: Vec<(usize, u64)> =
            chunks.iter().enumerate().filter_map(|(d, c)| c.as_ref().map(|(p, _)| (d, *p))).collect();
        self.scrub_segment()
            .reading
            .insert(position, StripeRead { stripe_number: places.stripe_number, chunks, pending: reads.len() });
        let s = self.scrub.as_mut().expect("a scrub");
        s.report.bytes_read += (reads.len() * cb * bs) as u64;
        s.paced_bytes += (reads.len() * cb * bs) as u64;
        for (drive, at) in reads {
            let lba = zone_start + at * cb as u64;
            self.seg_mut(zone).commands_in_flight += 1;
            let tag = self.new_tag(Op::Scrub(ScrubRead { zone, position }));
            let command = Command::Read { lba, data: vec![0; cb * bs], metadata: vec![0; cb * ms] };
            self.commands.push_back(DriveCommand { drive, tag, command, delay_ns: 0 });
        }
    }

    /// A scrub read completed.
    pub(super) fn scrub_read_done(&mut self, drive: usize, read: ScrubRead, completion: Completion) {
        self.seg_mut(read.zone).commands_in_flight -= 1;
        if matches!(completion.result, Err(zapraid_zns::Error::DeviceFailed)) {
            self.fail_lane(read.zone, drive);
        }
        let Some(c) = self.scrub.as_mut().and_then(|s| s.current.as_mut()).filter(|c| c.zone == read.zone) else {
            return;
        };
        let Some(stripe) = c.reading.get_mut(&read.position) else { return };
        stripe.pending -= 1;
        if completion.result.is_ok() {
            if let Some((_, got)) = stripe.chunks[drive].as_mut() {
                *got = Some((completion.data, completion.metadata));
            }
        }
        if stripe.pending > 0 {
            return;
        }
        let stripe = self.scrub_segment().reading.remove(&read.position).expect("being read");
        if self.checkpoint_in_progress() {
            if let Some(s) = self.scrub.as_mut() {
                s.report.stripes_read_again += 1;
            }
            return self.scrub_segment().again.push(read.position);
        }
        self.scrub_segment().mark_done(read.position);
        // A rebuild that started meanwhile rewrites a drive's zone of this segment: what
        // was read from it is not the segment's.
        if self.stop == StopState::Running && self.seg(read.zone).absent.is_none() {
            self.check_stripe(read.zone, read.position, stripe);
        }
    }

    /// Checks a stripe read whole, row by row, and schedules the repairs it needs.
    fn check_stripe(&mut self, zone: u32, position: u64, stripe: StripeRead) {
        let seg = self.seg(zone);
        let (layout, sequence) = (seg.layout, seg.sequence);
        let (n, k, cb) = (layout.drives(), layout.data_chunks, layout.chunk_blocks as usize);
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let number = stripe.stripe_number;
        let stripe_id = (number % layout.group_size) as u32;
        let past_the_data = stripe.chunks.iter().flatten().all(|(_, got)| {
            got.as_ref().is_some_and(|(d, m)| is_blank(m) || is_stop_footer(&d[..bs], &m[..ms], sequence))
        });
        if past_the_data {
            // Never written, or the stop footer that a clean stop wrote after the last
            // stripe (every drive's chunk starts with it): the segment's data ends here.
            let c = self.scrub_segment();
            c.end = c.end.min(position);
            return;
        }
        let zone_data_start = layout.data_start_blocks();
        let mut report = ScrubReport { stripes_checked: 1, ..Default::default() };
        let mut repaired = false;
        for o in 0..cb {
            // Per chunk index: the drive, the place, the block as read and whether it passed.
            let mut places: Vec<Option<Physical>> = vec![None; n];
            let mut data: Vec<Option<Vec<u8>>> = vec![None; n];
            let mut fields: Vec<Option<Vec<u8>>> = vec![None; n];
            let mut metas: Vec<RowBlock> = vec![None; n];
            let mut damaged = 0u64;
            let mut missing = 0usize;
            for (drive, chunk) in stripe.chunks.iter().enumerate() {
                let c = layout.chunk_on(number, drive);
                let Some((at, got)) = chunk.as_ref().filter(|_| self.holds(zone, drive)) else {
                    missing += 1; // a failed drive (perhaps since the read was issued)
                    continue;
                };
                let offset = zone_data_start + at * cb as u64 + o as u64;
                places[c] = Some(Physical { zone, drive, offset });
                report.blocks_checked += 1;
                // A live block recorded lost is its marker: its LBA field is flagged.
                let expected_lba = self.scrub_segment_ref().live.get(&(drive, offset)).copied();
                let expected_lba = expected_lba.map(|l| if self.is_lost(l) { LOST_LBA_FLAG | l } else { l });
                let block = got.as_ref().and_then(|(d, m)| {
                    let (d, m) = (&d[o * bs..(o + 1) * bs], &m[o * ms..(o + 1) * ms]);
                    let (meta, kind) = BlockMetadata::decode(d, m).ok()?;
                    let kind_ok = if c < k { kind != BlockKind::Parity } else { kind == BlockKind::Parity };
                    let ok = kind_ok
                        && u64::from(meta.segment_sequence_low.get()) == sequence & u64::from(u32::MAX)
                        && meta.stripe_id.get() == stripe_id
                        && expected_lba.is_none_or(|l| l == meta.lba.get());
                    ok.then(|| (d.to_vec(), meta))
                });
                match block {
                    Some((d, meta)) => {
                        data[c] = Some(d);
                        fields[c] = Some(encode_fields(meta.lba.get(), meta.timestamp.get()));
                        metas[c] = Some(meta);
                    }
                    None => damaged += 1,
                }
            }
            let live_in_row: Vec<(usize, u64)> = (0..k)
                .filter_map(|c| places[c].map(|p| (c, p)))
                .filter_map(|(c, p)| self.scrub_segment_ref().live.get(&(p.drive, p.offset)).map(|l| (c, *l)))
                .collect();
            if live_in_row.is_empty() {
                report.stale_blocks_damaged += damaged;
                continue;
            }
            report.blocks_damaged += damaged;
            let mut rewrite = damaged > 0;
            if damaged == 0 && missing == 0 && layout.parity_chunks > 0 && !self.row_parity_holds(&data, &fields) {
                report.parity_mismatches += 1;
                rewrite = true;
            }
            if !rewrite {
                continue;
            }
            let row = Row { places, data, fields };
            let rewritten = self.rewrite_row(row, RowLive::Known(live_in_row), true);
            report.blocks_unrecoverable += rewritten.unrecoverable;
            repaired |= rewritten.scheduled > 0;
        }
        let s = self.scrub.as_mut().expect("a scrub");
        add_report(&mut s.report, &report);
        if let Some(c) = s.current.as_mut() {
            c.repaired |= repaired;
        }
    }

    fn scrub_segment_ref(&self) -> &SegmentScrub {
        self.scrub.as_ref().and_then(|s| s.current.as_ref()).expect("a segment being scrubbed")
    }

    /// Whether a row's parity blocks (contents and fields) are what its data blocks give.
    fn row_parity_holds(&self, data: &[Option<Vec<u8>>], fields: &[Option<Vec<u8>>]) -> bool {
        let (k, m) = (self.codec.data_chunks(), self.codec.parity_chunks());
        for shards in [data, fields] {
            let Some(all) = shards.iter().map(|s| s.as_deref()).collect::<Option<Vec<&[u8]>>>() else {
                return false;
            };
            let len = all[0].len();
            let mut parity = vec![vec![0u8; len]; m];
            let mut outs: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
            self.codec.encode(&all[..k], &mut outs);
            if parity.iter().zip(&all[k..]).any(|(computed, read)| computed.as_slice() != *read) {
                return false;
            }
        }
        true
    }
}

fn add_report(total: &mut ScrubReport, add: &ScrubReport) {
    total.stripes_checked += add.stripes_checked;
    total.blocks_checked += add.blocks_checked;
    total.blocks_damaged += add.blocks_damaged;
    total.parity_mismatches += add.parity_mismatches;
    total.blocks_unrecoverable += add.blocks_unrecoverable;
    total.stale_blocks_damaged += add.stale_blocks_damaged;
}

/// Whether a block is a footer block of the segment of `sequence`: in the data region, only
/// a clean stop's footer, written after the segment's last stripe.
fn is_stop_footer(data: &[u8], metadata: &[u8], sequence: u64) -> bool {
    BlockMetadata::decode(data, metadata).is_ok_and(|(meta, kind)| {
        kind == BlockKind::Footer && u64::from(meta.segment_sequence_low.get()) == sequence & u64::from(u32::MAX)
    })
}

/// Whether a chunk's metadata is all zeros: the blocks were never written.
fn is_blank(metadata: &[u8]) -> bool {
    metadata.iter().all(|b| *b == 0)
}
