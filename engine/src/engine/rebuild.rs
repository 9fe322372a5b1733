//! Full-drive rebuild, online: a failed drive's place gets a new, empty drive, and every
//! segment written before is rebuilt onto it, one at a time, while the array serves I/O.
//!
//! When the rebuild starts, every existing segment marks the drive `absent`: reads rebuild
//! its chunks from the others, as for a failed drive. Segments opened from then on are
//! written to the new drive from the start. Each sealed segment in turn: the new drive's
//! zone is reset (it may hold a part written before a crash), its header is the others'
//! with its own drive index, then chunk position by position (in order, since a zone takes
//! writes only at its write pointer; consecutive chunks go as one write of up to a
//! transfer, `write_ready_chunks`) each chunk is reconstructed from the stripe's other
//! chunks (found by static offset, or where the compact stripe table says with Zone
//! Append), data, parity and the blocks' metadata alike, then the footer (from the
//! reconstructed metadata), and the zone is finished. Only then does the segment stop being
//! `absent`: reads go to the new drive. The segments open when the rebuild starts are
//! retired: their slots open new segments (which include the new drive), and once their
//! stripes in flight are persisted their zones are finished and garbage collection
//! reclaims them first, as it does for segments open at a crash (their live blocks move to
//! segments the new drive holds). Segments recovered open are reclaimed the same way, and
//! so are segments a clean stop closed short of full (their stripes end before the footer
//! region, with a stop footer).
//!
//! With a rate limit (`set_rebuild_rate`), every write to the new drive first takes its
//! bytes from a token bucket (`pace`): the header before the segment is started, each write
//! of chunks before it goes out (the reads stay within a window of the writes, so they are
//! paced too), the footer piece by piece.
//!
//! Invariants: the rebuild does not end over a segment it could not write to the drive and
//! garbage collection could not reclaim (`ending`); a segment being rebuilt is never chosen
//! by garbage collection; the new drive's zone of a segment is written in order and read
//! from only once finished; a chunk that cannot be reconstructed (more chunks lost than
//! parity covers) is written as a block whose metadata does not decode, so reads fail on it
//! rather than return wrong data, and its footer entries are flagged unknown
//! (`FOOTER_ENTRY_UNKNOWN`), so that a start or a page rebuild reading the footer takes it
//! for damaged, never for padding, and name the LBA the table mapped there as lost
//! (`lost::unknown_entries`); with a rate, no write reaches the new drive before the bucket
//! gave its bytes.

mod ending;
mod pace;
mod reconstruct;
mod resume;

use std::collections::BTreeMap;

use zapraid_zns::{Command, Completion, ZoneAction, ZoneTarget};

use crate::format::{FooterEntry, SegmentHeader, NO_LBA};

use super::machine::Engine;
use super::machine::Op;
use super::state::rebuild::ChunkSources;
use super::state::rebuild::DriveRebuild;
use super::state::rebuild::RebuildOp;
use super::state::rebuild::Step;
use super::state::rebuild::ZoneRebuild;
use super::state::segment::SegmentState;
use super::state::stop::StopState;
use crate::drive_command::{chunks_per_transfer, DriveCommand};
use crate::error::{Error, Result};
pub(super) use pace::rebuild_pace;

/// Chunk positions read and reconstructed ahead of the one being written.
const REBUILD_WINDOW_CHUNKS: u64 = 32;

/// Progress of a drive rebuild, for `status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RebuildStatus {
    pub drive: usize,
    /// Segments rebuilt onto the drive, and those it does not hold yet.
    pub segments_rebuilt: u64,
    pub segments_left: u64,
    /// Of `segments_left`, those garbage collection could not reclaim because their live
    /// blocks cannot be written elsewhere (too many drives down), which a rebuild does not
    /// write to the new drive (`ending`): the rebuild waits for them, and does not end
    /// while one is left. Counted once the rebuild has come to wait for them (after one
    /// more try), so that it does not drop back to 0 while they are tried again.
    pub segments_unreclaimable: u64,
    /// Of `segments_rebuilt`, those a rebuild before a restart had completed, checked and
    /// kept (`resume`): done in no time, they say nothing of how long the rest takes.
    pub segments_kept: u64,
    /// Blocks written to the new drive (headers, chunks, footers).
    pub blocks_written: u64,
    /// Blocks that could not be reconstructed (their stripes lost more than parity covers).
    pub blocks_unrecoverable: u64,
}

impl Engine {
    /// Starts rebuilding failed drive `drive` onto the drive now in its place (the caller
    /// swapped it in: an empty drive of at least the old one's geometry). New segments are
    /// written to it at once; existing ones are rebuilt in the background (`status` shows
    /// progress). Refused if the drive has not failed or a rebuild runs.
    pub fn rebuild_drive(&mut self, drive: usize) -> Result<()> {
        self.start_drive_rebuild(drive, false)
    }

    /// Starts a rebuild onto a drive that may hold part of an earlier one (`resume`), or
    /// onto an empty drive.
    fn start_drive_rebuild(&mut self, drive: usize, resuming: bool) -> Result<()> {
        if drive >= self.failed.len() || !self.failed[drive] {
            return Err(Error::InvalidConfig { reason: format!("drive {drive} has not failed: nothing to rebuild") });
        }
        if let Some(r) = &self.drive_rebuild {
            return Err(Error::Unavailable { reason: format!("drive {} is being rebuilt", r.drive) });
        }
        self.failed[drive] = false;
        // A relocated segment whose zones are being reset (on the drives that worked: not
        // this one) is about to leave its zone empty for new segments, which are written
        // to this drive too. A resumed rebuild's drive may hold a part of that segment (the
        // driver resets only the zones that hold no segment): its zone is reset as well.
        if let Some(r) = self.relocation.as_mut().filter(|r| resuming && r.resetting) {
            r.resets_pending += 1;
            let zone = r.zone;
            self.zone_command(drive, zone, ZoneAction::Reset);
        }
        for segment in self.segments.iter_mut().flatten() {
            segment.absent = Some(drive);
            // A relocation that could not write (too few drives) may now: the new drive
            // takes writes. Tried again, or the rebuild would wait for it for ever.
            if std::mem::take(&mut segment.unreclaimable) {
                self.reclaim_pending = true;
                self.gc_check_needed = true;
            }
            if segment.stopped_short && !segment.reclaim_first {
                segment.reclaim_first = true;
                self.reclaim_pending = true;
                self.gc_check_needed = true;
            }
        }
        let open: Vec<u32> = self.slots.iter_mut().filter_map(Option::take).collect();
        self.retiring.extend(open);
        self.forget_checkpoint_base(); // recorded in the superblock: a new generation
        self.drive_rebuild = Some(DriveRebuild {
            drive,
            resuming,
            segments_kept: 0,
            current: None,
            segments_rebuilt: 0,
            blocks_written: 0,
            blocks_unrecoverable: 0,
            retried_unreclaimable: false,
            waiting_unreclaimable: false,
        });
        tracing::info!(drive, resuming, "rebuild started");
        self.settle();
        Ok(())
    }

    /// Progress of the running rebuild, if any.
    pub fn rebuild_status(&self) -> Option<RebuildStatus> {
        let r = self.drive_rebuild.as_ref()?;
        let left = || self.segments.iter().flatten().filter(|s| s.absent == Some(r.drive));
        Some(RebuildStatus {
            drive: r.drive,
            segments_rebuilt: r.segments_rebuilt,
            segments_left: left().count() as u64,
            segments_unreclaimable: if r.waiting_unreclaimable {
                left().filter(|s| s.unreclaimable && s.write_failed).count() as u64
            } else {
                0 // not waited for yet: garbage collection is to try them once more
            },
            segments_kept: r.segments_kept,
            blocks_written: r.blocks_written,
            blocks_unrecoverable: r.blocks_unrecoverable,
        })
    }

    /// The last rebuild that completed since the start, as its progress stood at the end.
    pub fn last_rebuild(&self) -> Option<RebuildStatus> {
        self.last_rebuild
    }

    /// The zone of the segment being rebuilt, which garbage collection leaves alone.
    pub(super) fn zone_being_rebuilt(&self) -> Option<u32> {
        self.drive_rebuild.as_ref()?.current.as_ref().map(|z| z.zone)
    }

    /// Moves the rebuild on: picks the next segment, issues reads within the window and
    /// writes reconstructed chunks in order. Called from `pump`.
    pub(super) fn advance_drive_rebuild(&mut self) {
        self.rebuild_pace.clear_wake();
        self.retire_idle_segments();
        let Some(r) = self.drive_rebuild.as_ref() else { return };
        let drive = r.drive;
        if self.stop != StopState::Running {
            // A stop, or a running checkpoint draining, lets the steps under way complete
            // and starts no other; after a stop the next start resumes the rebuild (the
            // segment checked, or rebuilt from its beginning), after a checkpoint it goes
            // on here.
            return;
        }
        if r.current.is_none() {
            let next = self
                .segments
                .iter()
                .flatten()
                .filter(|s| s.absent == Some(drive) && s.state == SegmentState::Sealed && !s.reclaim_first)
                .map(|s| s.zone)
                .min();
            match next {
                Some(zone) => {
                    // The header is the segment's first write.
                    let header_bytes = self.seg(zone).layout.chunk_blocks * self.block_bytes() as u64;
                    if self.rebuild_pace.take(header_bytes, self.now_ns) {
                        self.start_zone_rebuild(zone);
                    }
                }
                None => self.end_or_wait(drive),
            }
            return;
        }
        self.issue_rebuild_reads();
        self.write_ready_chunks();
        self.write_rebuild_footer();
    }

    fn start_zone_rebuild(&mut self, zone: u32) {
        let drive = self.drive_rebuild.as_ref().expect("a rebuild").drive;
        let layout = self.seg(zone).layout;
        let header_sources: Vec<usize> = (0..layout.drives()).filter(|d| self.holds(zone, *d)).collect();
        let empty_entry =
            FooterEntry { lba: NO_LBA.into(), timestamp: 0.into(), stripe_id: 0.into(), reserved: 0.into() };
        let rebuild = self.drive_rebuild.as_mut().expect("a rebuild");
        rebuild.current = Some(ZoneRebuild {
            zone,
            step: Step::Resetting,
            header_sources,
            next_read: 0,
            next_write: 0,
            reading: BTreeMap::new(),
            ready: BTreeMap::new(),
            writes_in_flight: 0,
            footer: vec![empty_entry; (layout.stripes * layout.chunk_blocks) as usize],
            footer_next: 0,
            checks_pending: 0,
            check_failed: false,
            mapped_here: None,
        });
        if rebuild.resuming {
            self.current().step = Step::Checking;
            return self.check_rebuilt_zone(zone);
        }
        tracing::debug!(drive, zone, "rebuilding a segment");
        self.reset_rebuilt_zone(zone);
    }

    /// Resets the new drive's zone of the segment, the rebuild's first step on it.
    fn reset_rebuilt_zone(&mut self, zone: u32) {
        let drive = self.drive_rebuild.as_ref().expect("a rebuild").drive;
        self.current().step = Step::Resetting;
        let target = ZoneTarget::Zone { start_lba: self.geometry.zone_start_lba(zone) };
        self.rebuild_command(zone, drive, RebuildOp::Reset, Command::ManageZone { action: ZoneAction::Reset, target });
    }

    fn rebuild_command(&mut self, zone: u32, drive: usize, op: RebuildOp, command: Command) {
        self.seg_mut(zone).commands_in_flight += 1;
        let tag = self.new_tag(Op::Rebuild { zone, op });
        self.commands.push_back(DriveCommand { drive, tag, command, delay_ns: 0 });
    }

    fn current(&mut self) -> &mut ZoneRebuild {
        self.drive_rebuild.as_mut().and_then(|r| r.current.as_mut()).expect("a segment being rebuilt")
    }

    /// Reads the header block of the next drive holding the segment.
    fn read_rebuild_header(&mut self, zone: u32) {
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let Some(source) = self.current().header_sources.pop() else {
            return self.abandon_zone_rebuild(zone, "no drive holding the segment has a readable header");
        };
        let lba = self.geometry.zone_start_lba(zone);
        let command = Command::Read { lba, data: vec![0; bs], metadata: vec![0; ms] };
        self.seg_mut(zone).commands_in_flight += 1;
        let tag = self.new_tag(Op::Rebuild { zone, op: RebuildOp::Header });
        self.commands.push_back(DriveCommand { drive: source, tag, command, delay_ns: 0 });
    }

    /// Reads the stripes of the next chunk positions, up to the window. A source drive's
    /// chunks of consecutive positions that lie next to each other on it go as one read of
    /// up to a transfer (`drive_command::chunks_per_transfer`); reads wait for room for a
    /// whole one while others are under way.
    fn issue_rebuild_reads(&mut self) {
        let drive = self.drive_rebuild.as_ref().expect("a rebuild").drive;
        let z = self.current();
        if z.step != Step::Chunks {
            return;
        }
        let zone = z.zone;
        let layout = self.seg(zone).layout;
        let per_read = chunks_per_transfer(&self.geometry, layout.chunk_blocks);
        // At least two commands' worth ahead: one being written, the next being read.
        let window = REBUILD_WINDOW_CHUNKS.max(2 * per_read);
        let z = self.current();
        let room = (z.next_write + window).saturating_sub(z.next_read);
        let left = layout.stripes.saturating_sub(z.next_read);
        if room < per_read.min(left) && !z.reading.is_empty() {
            return;
        }
        // Per source drive, the run of chunks being gathered: (first position, its place
        // on the drive, chunks).
        let mut runs: Vec<Option<(u64, u64, u64)>> = vec![None; layout.drives()];
        loop {
            let z = self.current();
            let position = z.next_read;
            if position >= layout.stripes || position >= z.next_write + window {
                break;
            }
            z.next_read += 1;
            let places = self.stripe_places(zone, drive, position);
            let enough = places.as_ref().is_some_and(|p| p.others.len() >= layout.data_chunks);
            let Some(places) = places.filter(|_| enough && layout.parity_chunks > 0) else {
                self.unrecoverable_chunk(zone, position);
                continue;
            };
            let sources = ChunkSources {
                stripe_number: places.stripe_number,
                shards: (0..layout.drives()).map(|_| None).collect(),
                pending: places.others.len(),
            };
            self.current().reading.insert(position, sources);
            for (source, at) in places.others {
                match &mut runs[source] {
                    Some((first, first_at, chunks))
                        if *first + *chunks == position && *first_at + *chunks == at && *chunks < per_read =>
                    {
                        *chunks += 1
                    }
                    run => {
                        if let Some(done) = run.replace((position, at, 1)) {
                            self.read_run(zone, source, done);
                        }
                    }
                }
            }
        }
        for (source, run) in runs.into_iter().enumerate() {
            if let Some(run) = run {
                self.read_run(zone, source, run);
            }
        }
    }

    /// Reads `chunks` chunks from `source`, of the positions from `position` on, which lie
    /// next to each other on it from place `at`.
    fn read_run(&mut self, zone: u32, source: usize, (position, at, chunks): (u64, u64, u64)) {
        let layout = self.seg(zone).layout;
        let blocks = (chunks * layout.chunk_blocks) as usize;
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let lba = self.geometry.zone_start_lba(zone) + layout.data_start_blocks() + at * layout.chunk_blocks;
        let command = Command::Read { lba, data: vec![0; blocks * bs], metadata: vec![0; blocks * ms] };
        self.rebuild_command(zone, source, RebuildOp::Read { position, source, chunks }, command);
    }

    /// A read of `source`'s chunks of the positions from `position` on completed: each one
    /// intact goes to its stripe's sources, and a stripe with every source read is
    /// reconstructed.
    fn rebuild_read_done(&mut self, zone: u32, position: u64, source: usize, chunks: u64, completion: Completion) {
        let cb = self.seg(zone).layout.chunk_blocks as usize;
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let (chunk_bytes, chunk_meta_bytes) = (cb * bs, cb * ms);
        let Completion { result, mut data, mut metadata, .. } = completion;
        // What a drive returns is checked, never trusted: a short buffer is no chunk.
        let whole = result.is_ok()
            && data.len() == chunks as usize * chunk_bytes
            && metadata.len() == chunks as usize * chunk_meta_bytes;
        for i in 0..chunks {
            let p = position + i;
            let Some(sources) = self.current().reading.get_mut(&p) else { continue };
            sources.pending -= 1;
            let chunk = match (whole, chunks) {
                (false, _) => None,
                (true, 1) => Some((std::mem::take(&mut data), std::mem::take(&mut metadata))),
                (true, _) => {
                    let (from, meta_from) = (i as usize * chunk_bytes, i as usize * chunk_meta_bytes);
                    let chunk_data = data[from..from + chunk_bytes].to_vec();
                    Some((chunk_data, metadata[meta_from..meta_from + chunk_meta_bytes].to_vec()))
                }
            };
            if let Some((d, m)) = chunk.filter(|(d, m)| reconstruct::chunk_blocks_decode(d, m, bs, ms)) {
                sources.shards[source] = Some((d, m));
            }
            if sources.pending == 0 {
                let sources = self.current().reading.remove(&p).expect("being read");
                self.reconstruct_chunk(zone, p, sources);
            }
        }
    }

    /// A chunk no stripe can give back: blocks whose metadata does not decode, so that reads
    /// of them fail instead of returning wrong data.
    fn unrecoverable_chunk(&mut self, zone: u32, position: u64) {
        let cb = self.seg(zone).layout.chunk_blocks as usize;
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let r = self.drive_rebuild.as_mut().expect("a rebuild");
        r.blocks_unrecoverable += cb as u64;
        tracing::error!(drive = r.drive, zone, position, "a chunk cannot be rebuilt: its stripe lost too many chunks");
        self.rebuild_blocks_unrecoverable += cb as u64;
        self.note_holes(zone);
        // Its footer entries say so (`lost::unknown_entries`): a start or a page rebuild
        // reading the footer takes these blocks for damaged ones, never for padding, and
        // records lost the LBAs the table mapped to them.
        let drive = self.drive_rebuild.as_ref().expect("a rebuild").drive;
        let mut mapped = self.current().mapped_here.take().unwrap_or_else(|| self.lbas_mapped_on(zone, drive));
        let first = self.seg(zone).layout.data_start_blocks() + position * cb as u64;
        let entries = self.unknown_entries(zone, drive, first..first + cb as u64, &mut mapped);
        let z = self.current();
        z.mapped_here = Some(mapped);
        let at = position as usize * cb;
        z.footer[at..at + cb].copy_from_slice(&entries);
        z.ready.insert(position, (vec![0; cb * bs], vec![0; cb * ms]));
    }

    /// Writes reconstructed chunks in position order, then the footer. Consecutive ready
    /// chunks go as one Zone Write of up to a transfer (`drive_command::chunks_per_transfer`):
    /// the zone takes one write at a time, so while one is in flight the next waits until
    /// it is full (or reaches the segment's last chunk), and the one after it carries what
    /// came meanwhile.
    fn write_ready_chunks(&mut self) {
        let drive = self.drive_rebuild.as_ref().expect("a rebuild").drive;
        loop {
            let z = self.current();
            if z.step != Step::Chunks {
                return;
            }
            let (zone, first) = (z.zone, z.next_write);
            let layout = self.seg(zone).layout;
            let per_write = chunks_per_transfer(&self.geometry, layout.chunk_blocks);
            let z = self.current();
            let run = (first..layout.stripes).take(per_write as usize).take_while(|p| z.ready.contains_key(p)).count();
            let run = run as u64;
            let ends_segment = first + run == layout.stripes;
            if run == 0 || (z.writes_in_flight > 0 && run < per_write && !ends_segment) {
                break;
            }
            let blocks = run * layout.chunk_blocks;
            if !self.rebuild_pace.take(blocks * self.block_bytes() as u64, self.now_ns) {
                break;
            }
            let z = self.current();
            let parts: Vec<_> = (first..first + run).map(|p| z.ready.remove(&p).expect("ready")).collect();
            z.next_write += run;
            let (data, metadata) = match run {
                1 => parts.into_iter().next().expect("one chunk"),
                _ => {
                    let (bs, ms) = (self.block_bytes(), self.meta_bytes());
                    self.buffers.join(parts, blocks as usize * bs, blocks as usize * ms)
                }
            };
            let lba = self.geometry.zone_start_lba(zone) + layout.data_start_blocks() + first * layout.chunk_blocks;
            self.rebuild_write(zone, drive, blocks, lba, data, metadata);
        }
        let z = self.current();
        let zone = z.zone;
        let layout = self.seg(zone).layout;
        if self.current().next_write < layout.stripes {
            return;
        }
        self.current().step = Step::Footer;
    }

    /// Writes the footer from the reconstructed metadata, piece by piece, once every
    /// chunk's write went out.
    fn write_rebuild_footer(&mut self) {
        let drive = self.drive_rebuild.as_ref().expect("a rebuild").drive;
        let z = self.current();
        if z.step != Step::Footer {
            return;
        }
        let zone = z.zone;
        let (layout, sequence) = (self.seg(zone).layout, self.seg(zone).sequence);
        let footer = std::mem::take(&mut self.current().footer);
        let max_blocks = u64::from(self.geometry.max_transfer_blocks);
        loop {
            let first = self.current().footer_next;
            if first >= layout.footer_blocks {
                break;
            }
            let piece_bytes = (layout.footer_blocks - first).min(max_blocks) * self.block_bytes() as u64;
            if !self.rebuild_pace.take(piece_bytes, self.now_ns) {
                break;
            }
            let (blocks, data, metadata) = self.footer_piece(sequence, drive, first, layout.footer_blocks, &footer);
            let lba = self.geometry.zone_start_lba(zone) + layout.footer_start_blocks() + first;
            self.rebuild_write(zone, drive, blocks, lba, data, metadata);
            self.current().footer_next = first + blocks;
        }
        self.current().footer = footer;
    }

    fn rebuild_write(&mut self, zone: u32, drive: usize, blocks: u64, lba: u64, data: Vec<u8>, metadata: Vec<u8>) {
        self.current().writes_in_flight += 1;
        self.seg_mut(zone).commands_in_flight += 1;
        let op = Op::Rebuild { zone, op: RebuildOp::Write { blocks } };
        self.zone_write(drive, zone, op, Command::Write { lba, data, metadata });
    }

    /// A rebuild command completed.
    pub(super) fn rebuild_done(&mut self, drive: usize, zone: u32, op: RebuildOp, completion: Completion) {
        self.seg_mut(zone).commands_in_flight -= 1;
        if let RebuildOp::Check { footer_first } = op {
            // What the new drive holds is checked, never trusted: a failed read is a zone
            // to rebuild, not a failed drive.
            return self.zone_check_done(zone, footer_first, completion);
        }
        let target = self.drive_rebuild.as_ref().map(|r| r.drive);
        if matches!(op, RebuildOp::Write { .. }) {
            self.zone_write_done(drive, zone);
        }
        if target != Some(drive) && completion.result.is_err() {
            if matches!(completion.result, Err(zapraid_zns::Error::DeviceFailed)) {
                self.fail_drive(drive);
            }
        } else if completion.result.is_err() {
            // The new drive refuses writes: the rebuild cannot go on.
            tracing::error!(drive, zone, "the drive being rebuilt failed; the rebuild stops");
            return self.abandon_drive_rebuild();
        }
        if self.drive_rebuild.as_ref().and_then(|r| r.current.as_ref()).is_none_or(|z| z.zone != zone) {
            return; // abandoned meanwhile
        }
        match op {
            RebuildOp::Reset => {
                self.current().step = Step::Header;
                self.read_rebuild_header(zone);
            }
            RebuildOp::Header => {
                let decoded = completion.result.ok().and_then(|_| SegmentHeader::decode(&completion.data).ok());
                let sequence = self.seg(zone).sequence;
                let Some(mut header) = decoded.filter(|h| h.segment_sequence.get() == sequence) else {
                    return self.read_rebuild_header(zone);
                };
                let drive = target.expect("a rebuild");
                header.drive_index = (drive as u32).into();
                let header = header.seal();
                let layout = self.seg(zone).layout;
                let (data, metadata) = self.header_chunk(&header, layout.chunk_blocks as usize);
                let lba = self.geometry.zone_start_lba(zone);
                self.rebuild_write(zone, drive, layout.chunk_blocks, lba, data, metadata);
                self.current().step = Step::Chunks;
            }
            RebuildOp::Read { position, source, chunks } => {
                self.rebuild_read_done(zone, position, source, chunks, completion);
            }
            RebuildOp::Write { blocks } => {
                self.current().writes_in_flight -= 1;
                self.drive_rebuild.as_mut().expect("a rebuild").blocks_written += blocks;
                let footer_blocks = self.seg(zone).layout.footer_blocks;
                let z = self.current();
                if z.step == Step::Footer && z.writes_in_flight == 0 && z.footer_next >= footer_blocks {
                    z.step = Step::Finishing;
                    let target = ZoneTarget::Zone { start_lba: self.geometry.zone_start_lba(zone) };
                    let command = Command::ManageZone { action: ZoneAction::Finish, target };
                    self.rebuild_command(zone, drive, RebuildOp::Finish, command);
                }
            }
            RebuildOp::Check { .. } => unreachable!("handled above"),
            RebuildOp::Finish => {
                self.seg_mut(zone).absent = None;
                let r = self.drive_rebuild.as_mut().expect("a rebuild");
                r.current = None;
                r.segments_rebuilt += 1;
                self.gc_check_needed = true;
            }
        }
    }

    /// Gives up the segment being rebuilt (it stays `absent`: reads keep rebuilding it).
    fn abandon_zone_rebuild(&mut self, zone: u32, why: &str) {
        tracing::error!(zone, "a segment cannot be rebuilt: {why}");
        self.abandon_drive_rebuild();
    }

    /// Stops the rebuild: the drive counts as failed again (segments written to it since
    /// the start hold its chunks, but nothing is read from a failed drive).
    fn abandon_drive_rebuild(&mut self) {
        if let Some(r) = self.drive_rebuild.take() {
            self.failed[r.drive] = true;
        }
    }
}
