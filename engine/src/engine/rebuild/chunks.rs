//! A segment's chunks on their way to the new drive: read from the drives holding the
//! stripe (a source drive's chunks of consecutive positions that lie next to each other
//! on it as one read of up to a transfer), reconstructed (`reconstruct`), and written in
//! position order (consecutive ready chunks as one Zone Write of up to a transfer), then
//! the footer from the reconstructed metadata. Each segment being rebuilt runs its own
//! pipeline; several run at once (`Engine::rebuild_segments_at_once`), each in its own zone.
//!
//! Invariants: a segment's reads stay within `REBUILD_WINDOW_CHUNKS` (or two transfers)
//! of its writes; its zone on the new drive is written in order, one write in flight at a
//! time unless the next one is a whole transfer; with a rate, no write goes out before the
//! bucket gave its bytes.

use std::sync::Arc;

use zapraid_zns::{Command, Completion};

use super::MAX_DECLUSTERED_REBUILD_SEGMENTS_AT_ONCE;
use crate::drive_command::{chunks_per_transfer, transfer_chunks_at_most};
use crate::engine::machine::{Engine, Op};
use crate::engine::state::rebuild::{ChunkSources, JobSource, RebuildOp, Step};
use crate::layout::Layout;
use crate::pool::BufferPool;

/// Chunk positions read and reconstructed ahead of the one being written.
const REBUILD_WINDOW_CHUNKS: u64 = 32;

/// Chunk positions a segment reads ahead of the one being written, its reads carrying at
/// most `per_read` chunks: at least two commands' worth, one being written, the next
/// being read.
fn window_chunks(per_read: u64) -> u64 {
    REBUILD_WINDOW_CHUNKS.max(2 * per_read)
}

impl Engine {
    /// The rebuild's own pool of buffers: reads, rebuilt chunks and writes of up to
    /// `MAX_DECLUSTERED_REBUILD_SEGMENTS_AT_ONCE` segments at once (fewer for a classic
    /// array), each a window of chunk positions of k + m chunks (read, and rebuilt) at
    /// most: what it may hold at once is what it keeps, per length and of joined writes.
    pub(super) fn rebuild_buffers_pool(&self) -> BufferPool {
        let segments = if self.lanes.is_classic() {
            self.rebuild_segments_at_once as usize
        } else {
            MAX_DECLUSTERED_REBUILD_SEGMENTS_AT_ONCE
        };
        let bs = self.block_bytes() as u64;
        let held = |layout: &Layout| {
            let per_read = chunks_per_transfer(&self.geometry, layout.chunk_blocks);
            window_chunks(per_read) * layout.drives() as u64 * layout.chunk_blocks * bs
        };
        let per_segment = self.plan.layouts().iter().map(held).max().unwrap_or(0);
        let bytes = usize::try_from(per_segment).unwrap_or(usize::MAX).saturating_mul(segments);
        BufferPool::bounded(bytes, bytes)
    }

    /// The running rebuild's buffers (`rebuild_buffers_pool`).
    pub(super) fn rebuild_buffers(&mut self) -> &mut BufferPool {
        &mut self.drive_rebuild.as_mut().expect("a rebuild").buffers
    }

    /// Reads the stripes of the next chunk positions, up to the window. A source drive's
    /// chunks of consecutive positions that lie next to each other on it go as one read of
    /// up to a transfer (`drive_command::chunks_per_transfer`); reads wait for room for a
    /// whole one while others are under way.
    pub(super) fn issue_rebuild_reads(&mut self, zone: u32) {
        let drive = self.rebuild_lane(zone);
        if self.zone_rebuild(zone).step != Step::Chunks {
            return;
        }
        let layout = self.seg(zone).layout;
        let z = self.zone_rebuild(zone);
        let per_read = z.chunks_per_transfer;
        let window = window_chunks(per_read);
        let room = (z.next_write + window).saturating_sub(z.next_read);
        let left = layout.stripes.saturating_sub(z.next_read);
        if room < per_read.min(left) && !z.reading.is_empty() {
            return;
        }
        // Per source drive, the run of chunks being gathered: (first position, its place
        // on the drive, chunks).
        let mut runs: Vec<Option<(u64, u64, u64)>> = vec![None; layout.drives()];
        loop {
            let z = self.zone_rebuild(zone);
            let position = z.next_read;
            if position >= layout.stripes || position >= z.next_write + window {
                break;
            }
            z.next_read += 1;
            let places = self.rebuild_stripe_places(zone, drive, position);
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
            self.zone_rebuild(zone).reading.insert(position, sources);
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
    /// next to each other on it from place `at`: in one read, or in as few as the drive
    /// takes (a run cut short need not be a count its granule allows).
    fn read_run(&mut self, zone: u32, source: usize, (mut position, mut at, mut left): (u64, u64, u64)) {
        let layout = self.seg(zone).layout;
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        while left > 0 {
            let chunks = transfer_chunks_at_most(&self.geometry, layout.chunk_blocks, left);
            let blocks = (chunks * layout.chunk_blocks) as usize;
            let lba = self.geometry.zone_start_lba(zone) + layout.data_start_blocks() + at * layout.chunk_blocks;
            // Pooled buffers: the drive overwrites them whole (a short read is no chunk).
            let command = Command::Read {
                lba,
                data: self.rebuild_buffers().take(blocks * bs),
                metadata: self.rebuild_buffers().take(blocks * ms),
            };
            self.rebuild_command(zone, source, RebuildOp::Read { position, source, chunks }, command);
            (position, at, left) = (position + chunks, at + chunks, left - chunks);
        }
    }

    /// A read of `source`'s chunks of the positions from `position` on completed: each one
    /// read whole goes to its stripe's sources (checked by its job: `job`), and a stripe
    /// with every source read is reconstructed. The chunks share the read's buffers, which
    /// go back to the pool once the last of them is used.
    pub(super) fn rebuild_read_done(
        &mut self,
        zone: u32,
        position: u64,
        source: usize,
        chunks: u64,
        completion: Completion,
    ) {
        let cb = self.seg(zone).layout.chunk_blocks as usize;
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let (chunk_bytes, chunk_meta_bytes) = (cb * bs, cb * ms);
        let Completion { result, data, metadata, .. } = completion;
        // What a drive returns is checked, never trusted: a short buffer is no chunk.
        let whole = result.is_ok()
            && data.len() == chunks as usize * chunk_bytes
            && metadata.len() == chunks as usize * chunk_meta_bytes;
        let (data, metadata) = (Arc::new(data), Arc::new(metadata));
        for i in 0..chunks {
            let p = position + i;
            let Some(sources) = self.zone_rebuild(zone).reading.get_mut(&p) else { continue };
            sources.pending -= 1;
            if whole {
                sources.shards[source] = Some(JobSource {
                    data: Arc::clone(&data),
                    data_offset: i as usize * chunk_bytes,
                    metadata: Arc::clone(&metadata),
                    metadata_offset: i as usize * chunk_meta_bytes,
                });
            }
            if sources.pending == 0 {
                let sources = self.zone_rebuild(zone).reading.remove(&p).expect("being read");
                self.reconstruct_chunk(zone, p, sources);
            }
        }
        self.give_read_back(data);
        self.give_read_back(metadata);
    }

    /// A read's buffer no chunk uses any longer goes back to the pool.
    pub(super) fn give_read_back(&mut self, read: Arc<Vec<u8>>) {
        if let Ok(data) = Arc::try_unwrap(read) {
            self.rebuild_buffers().give(data);
        }
    }

    /// A chunk no stripe can give back: blocks whose metadata does not decode, so that reads
    /// of them fail instead of returning wrong data.
    pub(super) fn unrecoverable_chunk(&mut self, zone: u32, position: u64) {
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
        let drive = self.rebuild_lane(zone);
        let mut mapped = self.zone_rebuild(zone).mapped_here.take().unwrap_or_else(|| self.lbas_mapped_on(zone, drive));
        let first = self.seg(zone).layout.data_start_blocks() + position * cb as u64;
        let entries = self.unknown_entries(zone, drive, first..first + cb as u64, &mut mapped);
        let z = self.zone_rebuild(zone);
        z.mapped_here = Some(mapped);
        let at = position as usize * cb;
        z.footer[at..at + cb].copy_from_slice(&entries);
        let (data, metadata) =
            (self.rebuild_buffers().take_zeroed(cb * bs), self.rebuild_buffers().take_zeroed(cb * ms));
        self.zone_rebuild(zone).ready.insert(position, (data, metadata));
    }

    /// Writes reconstructed chunks in position order, then the footer. Consecutive ready
    /// chunks go as one Zone Write of up to a transfer (`drive_command::chunks_per_transfer`):
    /// the zone takes one write at a time, so while one is in flight the next waits until
    /// it is full (or reaches the segment's last chunk), and the one after it carries what
    /// came meanwhile.
    pub(super) fn write_ready_chunks(&mut self, zone: u32) {
        let drive = self.rebuild_lane(zone);
        let layout = self.seg(zone).layout;
        let per_write = self.zone_rebuild(zone).chunks_per_transfer;
        loop {
            let z = self.zone_rebuild(zone);
            if z.step != Step::Chunks {
                return;
            }
            let first = z.next_write;
            let run = (first..layout.stripes).take(per_write as usize).take_while(|p| z.ready.contains_key(p)).count();
            let run = run as u64;
            let ends_segment = first + run == layout.stripes;
            if run == 0 || (z.writes_in_flight > 0 && run < per_write && !ends_segment) {
                break;
            }
            // As much of the run as one write takes; the rest goes next time round.
            let run = transfer_chunks_at_most(&self.geometry, layout.chunk_blocks, run);
            let blocks = run * layout.chunk_blocks;
            if !self.rebuild_pace.take(blocks * self.block_bytes() as u64, self.now_ns) {
                break;
            }
            let z = self.zone_rebuild(zone);
            let parts: Vec<_> = (first..first + run).map(|p| z.ready.remove(&p).expect("ready")).collect();
            z.next_write += run;
            let (data, metadata) = match run {
                1 => parts.into_iter().next().expect("one chunk"),
                _ => {
                    let (bs, ms) = (self.block_bytes(), self.meta_bytes());
                    self.rebuild_buffers().join(parts, blocks as usize * bs, blocks as usize * ms)
                }
            };
            let lba = self.geometry.zone_start_lba(zone) + layout.data_start_blocks() + first * layout.chunk_blocks;
            self.rebuild_write(zone, drive, blocks, lba, data, metadata);
        }
        let z = self.zone_rebuild(zone);
        if z.next_write < layout.stripes {
            return;
        }
        z.step = Step::Footer;
    }

    /// Writes the footer from the reconstructed metadata, piece by piece, once every
    /// chunk's write went out.
    pub(super) fn write_rebuild_footer(&mut self, zone: u32) {
        let drive = self.rebuild_lane(zone);
        if self.zone_rebuild(zone).step != Step::Footer {
            return;
        }
        let (layout, sequence) = (self.seg(zone).layout, self.seg(zone).sequence);
        let footer = std::mem::take(&mut self.zone_rebuild(zone).footer);
        loop {
            let first = self.zone_rebuild(zone).footer_next;
            if first >= layout.footer_blocks {
                break;
            }
            let piece_bytes =
                self.geometry.transfer_blocks_at_most(layout.footer_blocks - first) * self.block_bytes() as u64;
            if !self.rebuild_pace.take(piece_bytes, self.now_ns) {
                break;
            }
            let (blocks, data, metadata) = self.footer_piece(sequence, drive, first, layout.footer_blocks, &footer);
            let lba = self.geometry.zone_start_lba(zone) + layout.footer_start_blocks() + first;
            self.rebuild_write(zone, drive, blocks, lba, data, metadata);
            self.zone_rebuild(zone).footer_next = first + blocks;
        }
        self.zone_rebuild(zone).footer = footer;
    }

    pub(super) fn rebuild_write(
        &mut self,
        zone: u32,
        drive: usize,
        blocks: u64,
        lba: u64,
        data: Vec<u8>,
        metadata: Vec<u8>,
    ) {
        self.zone_rebuild(zone).writes_in_flight += 1;
        self.seg_mut(zone).commands_in_flight += 1;
        let op = Op::Rebuild { zone, rebuild: self.rebuild_number(), op: RebuildOp::Write { blocks } };
        self.zone_write(drive, zone, op, Command::Write { lba, data, metadata });
    }
}
