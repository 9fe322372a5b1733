//! Stripe assembly and encoding: written blocks (and blocks garbage collection moves, in
//! stripes of their own) fill an open stripe of k chunks; a full stripe, or one whose
//! timeout passed (padded), is encoded into k data and m parity chunks and queued.
//!
//! Parity chunks' metadata carries the parity of the data blocks' (LBA, timestamp) fields,
//! so a lost block's identity is rebuilt with its contents. Every block of a request gets
//! its own timestamp, in submission order: recovery keeps the newest.

use crate::error::Error;
use crate::format::NO_LBA;
use crate::l2p::Physical;

use super::*;

#[derive(Clone, Copy, Debug)]
pub(super) struct BlockInfo {
    pub(super) lba: u64,
    pub(super) timestamp: u64,
    pub(super) request: Option<RequestId>,
    /// A block moved by garbage collection: where it was. It keeps its timestamp, so that
    /// a newer write of the same LBA still wins in recovery.
    pub(super) relocated_from: Option<Physical>,
    /// Moved by a repair (`scrub`), not by a relocation.
    pub(super) repair: bool,
}

impl BlockInfo {
    const PADDING: BlockInfo =
        BlockInfo { lba: NO_LBA, timestamp: 0, request: None, relocated_from: None, repair: false };
}

/// Which open stripe a block fills: frontend writes by chunk class (`hybrid`), or the
/// relocation's, of the plan's `gc_class`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fill {
    Frontend(ChunkClass),
    Relocation,
}

pub(super) struct OpenStripe {
    pub(super) blocks: Vec<(BlockInfo, Vec<u8>)>,
    pub(super) started_ns: u64,
}

/// A stripe encoded and waiting for (or in) its group.
pub(super) struct Stripe {
    /// The chunk class: which slots may take it (its chunk size is theirs).
    pub(super) class: ChunkClass,
    /// The zone of the segment it was issued into.
    pub(super) segment: Option<u32>,
    pub(super) infos: Vec<BlockInfo>,
    /// All k + m chunks (data then parity), with their metadata; taken when issued.
    pub(super) chunks: Vec<(Vec<u8>, Vec<u8>)>,
    pub(super) pending_chunks: usize,
    /// Stripe ID within the group and stripe number within the segment, once grouped.
    pub(super) id: u32,
    pub(super) number: u64,
    /// Where each drive's chunk landed (zone-relative chunk position), once persisted.
    pub(super) positions: Vec<Option<u64>>,
    /// Per parity chunk, the parity of the data blocks' (LBA, timestamp) fields, 16 bytes
    /// per block offset: written into the parity blocks' metadata and footer entries.
    pub(super) parity_fields: Vec<Vec<u8>>,
}

impl Engine {
    pub(super) fn write(&mut self, id: RequestId, lba: u64, data: Vec<u8>) {
        let bs = self.block_bytes();
        let blocks = (data.len() / bs) as u64;
        if data.is_empty() || !data.len().is_multiple_of(bs) {
            let reason = format!("write of {} bytes is not whole {bs}-byte blocks", data.len());
            return self.responses.push_back(Response { id, result: Err(Error::InvalidConfig { reason }) });
        }
        if let Err(e) = self.check_range(lba, blocks) {
            self.outstanding_writes.remove(&id);
            return self.responses.push_back(Response { id, result: Err(e) });
        }
        // Writes are refused at `submit` once a stop begins; one admitted before it may run
        // while the stop drains (it waited for its L2P page), and is padded out then.
        debug_assert!(self.stop == StopState::Running || self.stop == StopState::Draining);
        self.outstanding_writes.insert(id);
        self.write_blocks_left.insert(id, blocks as usize);
        let fill = Fill::Frontend(self.plan.class_of_write(data.len() as u64));
        for (i, block) in data.chunks_exact(bs).enumerate() {
            let timestamp = self.next_timestamp;
            self.next_timestamp += 1;
            let lba = lba + i as u64;
            self.in_flight_lbas.entry(lba).or_insert((0, 0)).1 += 1;
            // Its page stays cached until the block is mapped (`release_lba`).
            self.l2p.pin(self.l2p.page_of(lba));
            let info = BlockInfo { lba, timestamp, request: Some(id), relocated_from: None, repair: false };
            self.add_block(info, block.to_vec(), fill);
        }
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

    /// Adds a block to an open stripe; a full stripe is sealed.
    pub(super) fn add_block(&mut self, info: BlockInfo, block: Vec<u8>, fill: Fill) {
        let now = self.now_ns;
        let want = self.plan.class_layout(self.class_of(fill)).stripe_data_blocks() as usize;
        let slot = self.open_stripe_mut(fill);
        let open = slot.get_or_insert_with(|| OpenStripe { blocks: Vec::new(), started_ns: now });
        open.blocks.push((info, block));
        if open.blocks.len() == want {
            let open = slot.take().expect("an open stripe");
            self.seal_stripe(open, fill);
        }
    }

    /// Pads an incomplete open stripe and seals it.
    pub(super) fn pad_open_stripe(&mut self, fill: Fill) {
        let Some(mut open) = self.open_stripe_mut(fill).take() else { return };
        let want = self.plan.class_layout(self.class_of(fill)).stripe_data_blocks() as usize;
        let bs = self.geometry.block_size_bytes as usize;
        while open.blocks.len() < want {
            open.blocks.push((BlockInfo::PADDING, vec![0; bs]));
        }
        self.seal_stripe(open, fill);
    }

    /// Pads and seals every frontend open stripe (a flush or a stop).
    pub(super) fn pad_frontend_stripes(&mut self) {
        for class in [ChunkClass::Small, ChunkClass::Large] {
            self.pad_open_stripe(Fill::Frontend(class));
        }
    }

    /// Encodes a full stripe and queues it.
    pub(super) fn seal_stripe(&mut self, open: OpenStripe, fill: Fill) {
        let class = self.class_of(fill);
        let layout = *self.plan.class_layout(class);
        let (k, m, cb) = (layout.data_chunks, layout.parity_chunks, layout.chunk_blocks as usize);
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let infos: Vec<BlockInfo> = open.blocks.iter().map(|(i, _)| *i).collect();
        let mut data_chunks: Vec<Vec<u8>> = vec![Vec::with_capacity(cb * bs); k];
        for (i, (_, block)) in open.blocks.into_iter().enumerate() {
            data_chunks[i / cb].extend_from_slice(&block);
        }
        let mut parity_chunks = vec![vec![0u8; cb * bs]; m];
        {
            let refs: Vec<&[u8]> = data_chunks.iter().map(Vec::as_slice).collect();
            let mut prefs: Vec<&mut [u8]> = parity_chunks.iter_mut().map(Vec::as_mut_slice).collect();
            self.codec.encode(&refs, &mut prefs);
        }
        // Parity of the data blocks' (LBA, timestamp) fields, block offset by block offset,
        // so a lost block's identity is rebuilt with it.
        let mut parity_fields = vec![vec![0u8; 16 * cb]; m];
        {
            let fields: Vec<Vec<u8>> = (0..k)
                .map(|c| {
                    (0..cb)
                        .flat_map(|o| {
                            let info = infos[c * cb + o];
                            info.lba.to_le_bytes().into_iter().chain(info.timestamp.to_le_bytes())
                        })
                        .collect()
                })
                .collect();
            let refs: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
            let mut prefs: Vec<&mut [u8]> = parity_fields.iter_mut().map(Vec::as_mut_slice).collect();
            self.codec.encode(&refs, &mut prefs);
        }
        let number = self.next_stripe;
        self.next_stripe += 1;
        let mut chunks = Vec::with_capacity(k + m);
        for data in data_chunks {
            chunks.push((data, vec![0u8; cb * ms]));
        }
        for parity in parity_chunks {
            chunks.push((parity, vec![0u8; cb * ms]));
        }
        // Metadata is written when the stripe joins a group (it needs the stripe ID and
        // segment); keep the parity fields in the parity chunks' metadata buffers for now.
        for (p, fields) in parity_fields.iter().enumerate() {
            let meta = &mut chunks[k + p].1;
            for o in 0..cb {
                meta[o * ms..o * ms + 16].copy_from_slice(&fields[o * 16..o * 16 + 16]);
            }
        }
        let stripe = Stripe {
            class,
            segment: None,
            infos,
            chunks,
            pending_chunks: 0,
            id: 0,
            number: 0,
            positions: vec![None; k + m],
            parity_fields,
        };
        self.stripes.insert(number, stripe);
        match fill {
            Fill::Relocation => self.gc_queued.push_back(number),
            Fill::Frontend(class) => self.queued[class.index()].push_back(number),
        }
    }
}
