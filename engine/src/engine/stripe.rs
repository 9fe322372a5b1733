//! Stripe assembly and encoding: written blocks (and blocks garbage collection moves, in
//! stripes of their own) fill an open stripe of k chunks; a full stripe, or one whose
//! timeout passed (padded), is encoded into k data and m parity chunks and queued.
//!
//! A block is copied once, from the request straight into its place in an open stripe's
//! data chunk, or not at all where a chunk is one block and the block comes in a buffer of
//! its own (a one-block write with the frontend's checksums, a relocated block, a mapping
//! block): that buffer becomes the chunk's. Chunk, parity and metadata buffers come from
//! the engine's `BufferPool` and go back to it with the chunk writes' completions, and a
//! finished stripe's vectors are kept for the next one, so a stripe costs no heap
//! allocation in steady state. Pooled
//! buffers hold old bytes: padding blocks are zeroed, and the parity and metadata are
//! written whole before they go out.
//!
//! Parity chunks' metadata carries the parity of the data blocks' (LBA, timestamp) fields,
//! so a lost block's identity is rebuilt with its contents. Every block of a request gets
//! its own timestamp, in submission order: recovery keeps the newest.

use crate::checksum::BlockChecksums;
use crate::error::Error;
use crate::format::{field_bytes, FIELD_BYTES, MAX_DRIVES};
use crate::hybrid::ChunkClass;
use crate::parity::shard_slices_mut;

use super::machine::Engine;
use super::request::{RequestId, Response};
use super::state::stop::StopState;
use super::state::stripe::{BlockInfo, ChunkBuffers, Fill, OpenStripe, Stripe, StripeVecs, WriteInFlight};

/// Finished stripes' vectors kept at most: more than stripes in flight is never needed.
const MAX_SPARE_STRIPES: usize = 4096;

/// How a block goes into its open stripe (`place_block`).
enum Placed<'a> {
    /// Its bytes are copied into the data chunk's buffer.
    Copy(&'a [u8]),
    /// Its buffer, exactly one block, becomes a one-block chunk's.
    Whole(Vec<u8>),
}

impl Engine {
    /// A frontend write; `checksums`, the frontend's CRC32C of each block, spare the
    /// engine thread reading the data for them.
    /// `seq`: its sequence number among outstanding writes (`admit` numbers every write
    /// whose range is valid).
    pub(super) fn write(
        &mut self,
        id: RequestId,
        lba: u64,
        data: Vec<u8>,
        checksums: Option<BlockChecksums>,
        seq: Option<u64>,
    ) {
        let bs = self.block_bytes();
        let blocks = (data.len() / bs) as u64;
        let refused = if data.is_empty() || !data.len().is_multiple_of(bs) {
            let reason = format!("write of {} bytes is not whole {bs}-byte blocks", data.len());
            Some(Error::InvalidConfig { reason })
        } else if self.write_blocks_left.contains_key(&id) {
            // Its blocks would be counted under the other write's entry, and that write's
            // sequence number lost: every later flush would wait for ever.
            let reason = format!("request id {id} already names a write in progress");
            Some(Error::InvalidConfig { reason })
        } else {
            let checked = checksums.as_ref().map_or(Ok(()), |c| c.check(&data, bs));
            checked.and_then(|()| self.check_range(lba, blocks)).err()
        };
        if let Some(error) = refused {
            // `admit` counted it outstanding if it held a whole block in range: a flush
            // must not wait for it, and one that waited only for it completes now.
            if let Some(seq) = seq {
                self.outstanding_writes.answered(seq);
            }
            self.responses.push_back(Response::new(id, Err(error)));
            return self.complete_flushes();
        }
        // Writes are refused at `submit` once a stop begins; one admitted before it may run
        // while the stop drains (it waited for its L2P page), and is padded out then.
        debug_assert!(self.stop == StopState::Running || self.stop.is_draining());
        let seq = seq.expect("admit numbers every write of whole blocks in range");
        // A frontend that brings checksums (the ublk queues) gets a buffer of the write's
        // length back with the response, for its next write: freed here, it would be a
        // free per write on this thread and an allocation on the other. Other callers
        // (simulations, tests) may hold many responses, so theirs is freed now, as before.
        let give_back_bytes = if checksums.is_some() { data.len() } else { 0 };
        self.write_blocks_left
            .insert(id, WriteInFlight { blocks_left: blocks as usize, buffer: Vec::new(), give_back_bytes, seq });
        let fill = Fill::Frontend(self.plan.class_of_write(data.len() as u64));
        if let (1, Some(checksums)) = (blocks, &checksums) {
            // One block: its buffer may become its chunk (`add_block`), and the response
            // gives back one of the pool's buffers of its length.
            let info = self.frontend_block(id, lba, checksums.get(0));
            return self.add_block(info, data, fill);
        }
        for (i, block) in data.chunks_exact(bs).enumerate() {
            let data_crc = checksums.as_ref().map_or_else(|| crate::crc::crc32c(block), |c| c.get(i));
            let info = self.frontend_block(id, lba + i as u64, data_crc);
            self.add_block_bytes(info, block, fill);
        }
        if give_back_bytes > 0 {
            if let Some(w) = self.write_blocks_left.get_mut(&id) {
                w.buffer = data;
            }
        }
    }

    /// A frontend block of write `id` at `lba`: it gets the next timestamp, counts as in
    /// flight for its LBA, and pins its L2P page until it is mapped (`release_lba`).
    fn frontend_block(&mut self, id: RequestId, lba: u64, data_crc: u32) -> BlockInfo {
        let timestamp = self.next_timestamp;
        self.next_timestamp += 1;
        self.checkpoints.blocks_written += 1;
        self.in_flight_lbas.entry(lba).or_insert((0, 0)).1 += 1;
        self.l2p.pin(self.l2p.page_of(lba));
        self.l2p.prefetch(lba); // mapped when its stripe persists
        BlockInfo { lba, timestamp, request: Some(id), relocated_from: None, repair: false, data_crc }
    }

    /// The chunk class of the stripes `fill` makes.
    pub(super) fn class_of(&self, fill: Fill) -> ChunkClass {
        match fill {
            Fill::Frontend(class) => class,
            Fill::Relocation => self.plan.gc_class(),
        }
    }

    fn open_stripe_mut(&mut self, fill: Fill) -> &mut Option<OpenStripe> {
        match fill {
            Fill::Frontend(class) => &mut self.open_stripes[class.index()],
            Fill::Relocation => &mut self.gc_open_stripe,
        }
    }

    /// Adds a block to an open stripe (its buffer goes back to the pool); a full stripe is
    /// sealed.
    pub(super) fn add_block(&mut self, info: BlockInfo, block: Vec<u8>, fill: Fill) {
        let chunk_blocks = self.plan.class_layout(self.class_of(fill)).chunk_blocks;
        if chunk_blocks != 1 || block.len() != self.block_bytes() {
            self.place_block(info, fill, Placed::Copy(&block));
            return self.buffers.give(block);
        }
        // A chunk of one block: the block's buffer becomes the chunk's (no copy).
        self.place_block(info, fill, Placed::Whole(block));
    }

    /// Copies a block into its place in an open stripe's data chunk; a full stripe is
    /// sealed.
    pub(super) fn add_block_bytes(&mut self, info: BlockInfo, block: &[u8], fill: Fill) {
        debug_assert_eq!(block.len(), self.block_bytes(), "one block");
        self.place_block(info, fill, Placed::Copy(block));
    }

    /// Puts a block in the next place of `fill`'s open stripe; a full stripe is sealed. A
    /// data chunk's buffer is taken from the pool when the first block is copied into it,
    /// not before: a one-block chunk takes its block's buffer instead.
    fn place_block(&mut self, info: BlockInfo, fill: Fill, block: Placed) {
        let layout = *self.plan.class_layout(self.class_of(fill));
        let (want, cb, bs) = (layout.stripe_data_blocks() as usize, layout.chunk_blocks as usize, self.block_bytes());
        // Out of `self` while it is filled, so that the pool can be used beside it.
        let mut open = match self.open_stripe_mut(fill).take() {
            Some(open) => open,
            None => self.new_open_stripe(layout.data_chunks),
        };
        let i = open.infos.len();
        let chunk = &mut open.chunks[i / cb];
        match block {
            Placed::Whole(buffer) => {
                debug_assert!(cb == 1 && buffer.len() == bs && chunk.data.is_empty(), "a one-block chunk, new");
                chunk.data = buffer;
            }
            Placed::Copy(bytes) => {
                let at = (i % cb) * bs;
                chunk.data_or_take(&mut self.buffers, cb * bs)[at..at + bs].copy_from_slice(bytes);
            }
        }
        debug_assert_eq!(chunk.data.len(), cb * bs, "a chunk keeps its length");
        open.infos.push(info);
        if open.infos.len() == want {
            self.seal_stripe(open, fill);
        } else {
            *self.open_stripe_mut(fill) = Some(open);
        }
    }

    /// An empty open stripe of `data_chunks` chunks (their buffers come with their first
    /// block), in reused vectors where there are some.
    fn new_open_stripe(&mut self, data_chunks: usize) -> OpenStripe {
        let vecs = self.spare.stripes.pop().unwrap_or_else(|| StripeVecs {
            infos: Vec::new(),
            chunks: Vec::new(),
            positions: Vec::new(),
        });
        let mut chunks = vecs.chunks;
        debug_assert!(
            vecs.infos.is_empty() && chunks.is_empty() && vecs.positions.is_empty(),
            "spare vectors are empty"
        );
        chunks.resize_with(data_chunks, || ChunkBuffers { data: Vec::new(), metadata: Vec::new() });
        OpenStripe { infos: vecs.infos, chunks, positions: vecs.positions, started_ns: self.now_ns }
    }

    /// Keeps a finished stripe's vectors (emptied) for the next one; its chunk buffers
    /// were handed on with their commands.
    pub(super) fn spare_stripe(&mut self, stripe: Stripe) {
        let Stripe { mut infos, mut chunks, mut positions, parity_fields, .. } = stripe;
        for chunk in chunks.drain(..) {
            self.buffers.give(chunk.data);
            self.buffers.give(chunk.metadata);
        }
        self.buffers.give(parity_fields);
        if self.spare.stripes.len() < MAX_SPARE_STRIPES {
            infos.clear();
            positions.clear();
            self.spare.stripes.push(StripeVecs { infos, chunks, positions });
        }
    }

    /// Pads an incomplete open stripe and seals it.
    pub(super) fn pad_open_stripe(&mut self, fill: Fill) {
        let Some(mut open) = self.open_stripe_mut(fill).take() else { return };
        let layout = *self.plan.class_layout(self.class_of(fill));
        let (want, cb, bs) = (layout.stripe_data_blocks() as usize, layout.chunk_blocks as usize, self.block_bytes());
        // The pool's buffers hold old data: the padding blocks are zeroed. A chunk no
        // block reached has no buffer yet.
        for i in open.infos.len()..want {
            let at = (i % cb) * bs;
            open.chunks[i / cb].data_or_take(&mut self.buffers, cb * bs)[at..at + bs].fill(0);
        }
        open.infos.resize(want, BlockInfo::padding(self.zero_block_crc));
        self.seal_stripe(open, fill);
    }

    /// Pads and seals every frontend open stripe (a flush or a stop).
    pub(super) fn pad_frontend_stripes(&mut self) {
        for class in [ChunkClass::Small, ChunkClass::Large] {
            self.pad_open_stripe(Fill::Frontend(class));
        }
    }

    /// Encodes a full stripe (parity into pooled buffers) and queues it.
    pub(super) fn seal_stripe(&mut self, open: OpenStripe, fill: Fill) {
        let class = self.class_of(fill);
        let layout = *self.plan.class_layout(class);
        let (k, m, cb) = (layout.data_chunks, layout.parity_chunks, layout.chunk_blocks as usize);
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let OpenStripe { infos, mut chunks, mut positions, .. } = open;
        debug_assert_eq!((infos.len(), chunks.len()), (k * cb, k), "a sealed stripe is full");
        for _ in 0..m {
            chunks.push(ChunkBuffers { data: self.buffers.take(cb * bs), metadata: Vec::new() });
        }
        for chunk in chunks.iter_mut() {
            chunk.metadata = self.buffers.take(cb * ms);
        }
        {
            let (data, parity) = chunks.split_at_mut(k);
            let mut refs: [&[u8]; MAX_DRIVES] = [&[]; MAX_DRIVES];
            refs.iter_mut().zip(data.iter()).for_each(|(r, d)| *r = &d.data);
            let mut prefs = shard_slices_mut(parity.iter_mut().map(|p| &mut p.data[..]));
            self.codec.encode(&refs[..k], &mut prefs[..m]);
        }
        // Parity of the data blocks' (LBA, timestamp) fields, block offset by block offset,
        // so a lost block's identity is rebuilt with it.
        let field_chunk_bytes = FIELD_BYTES * cb;
        let mut fields = self.buffers.take(field_chunk_bytes * k);
        for (i, info) in infos.iter().enumerate() {
            let at = i * FIELD_BYTES;
            fields[at..at + FIELD_BYTES].copy_from_slice(&field_bytes(info.lba, info.timestamp));
        }
        let mut parity_fields = self.buffers.take(field_chunk_bytes * m);
        if m > 0 {
            let mut refs: [&[u8]; MAX_DRIVES] = [&[]; MAX_DRIVES];
            refs.iter_mut().zip(fields.chunks_exact(field_chunk_bytes)).for_each(|(r, f)| *r = f);
            let mut prefs = shard_slices_mut(parity_fields.chunks_exact_mut(field_chunk_bytes));
            self.codec.encode(&refs[..k], &mut prefs[..m]);
        }
        self.buffers.give(fields);
        // Metadata is written when the stripe joins a group (it needs the stripe ID and
        // segment); keep the parity fields in the parity chunks' metadata buffers for now.
        for p in 0..m {
            let meta = &mut chunks[k + p].metadata;
            for o in 0..cb {
                let at = (p * cb + o) * FIELD_BYTES;
                meta[o * ms..o * ms + FIELD_BYTES].copy_from_slice(&parity_fields[at..at + FIELD_BYTES]);
            }
        }
        let number = self.next_stripe;
        self.next_stripe += 1;
        positions.resize(k + m, None);
        let stripe = Stripe {
            class,
            segment: None,
            infos,
            chunks,
            pending_chunks: 0,
            id: 0,
            number: 0,
            positions,
            parity_fields,
        };
        self.stripes.insert(number, stripe);
        match fill {
            Fill::Relocation => self.gc_queued.push_back(number),
            Fill::Frontend(class) => self.queued[class.index()].push_back(number),
        }
    }
}
