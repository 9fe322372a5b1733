//! Where an emulated drive keeps its blocks, per-block metadata and zone records: in
//! memory (sparse, allocated on first write) or in a drive file (see `drive_file`).
//!
//! Media address blocks by physical index `zone * zone_capacity + offset`; only written
//! blocks are ever read back (the emulator returns zeros above the write pointer), so a
//! reset need not erase anything on file media.
//!
//! File media write the drive file's superblock and every zone record twice (primary,
//! then copy: see `drive_file`), and on open take the valid copy of each.
//!
//! Media split into parts of disjoint runs of zones (`Media::split`), one per part of a
//! split drive: file media share the open file, its mapping and its lock, and write at
//! the offsets of their zones only (each zone record is a write of its own, never a
//! sector or table rewritten around it, so parts never write the same bytes); memory
//! media hand each part the chunks of its zones (a chunk never spans two zones).

use std::collections::HashMap;
use std::ops::Range;

use crate::error::Result;
use crate::geometry::Geometry;
use crate::zone::ZoneState;

/// Persistent zone state as media store it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StoredZone {
    pub state: ZoneState,
    pub written_blocks: u64,
}

pub(crate) trait Media: Send {
    /// Reads whole blocks at physical index `index`; `metadata` may be empty.
    fn read(&mut self, index: u64, data: &mut [u8], metadata: &mut [u8]) -> Result<()>;
    /// Writes whole blocks; an empty `metadata` stores zeroed metadata.
    fn write(&mut self, index: u64, data: &[u8], metadata: &[u8]) -> Result<()>;
    /// Persists one zone's state.
    fn store_zone(&mut self, zone: u32, stored: StoredZone) -> Result<()>;
    /// Forgets the contents of a zone (reset).
    fn discard_zone(&mut self, zone: u32) -> Result<()>;
    /// Flips one bit of a stored block, behind the emulator's back (silent corruption).
    fn flip_bit(&mut self, index: u64, bit: u64) -> Result<()>;
    /// The media of each of `parts` (disjoint runs of zones), in order: each reaches only
    /// the blocks and zone records of its zones.
    fn split(self: Box<Self>, parts: &[Range<u32>]) -> Vec<Box<dyn Media>>;
}

/// Most blocks per allocation unit of memory media.
const MEMORY_CHUNK_BLOCKS: u64 = 256;

/// Sparse in-memory media, in chunks of one zone each (so that a reset frees a zone's
/// memory, and parts of a split drive own whole chunks).
pub(crate) struct MemoryMedia {
    block_bytes: usize,
    metadata_bytes: usize,
    zone_capacity_blocks: u64,
    chunk_blocks: u64,
    chunks_per_zone: u64,
    /// By chunk number: zone * chunks_per_zone + chunk in the zone.
    chunks: HashMap<u64, Chunk>,
}

/// Blocks and metadata of one allocation unit.
struct Chunk {
    data: Box<[u8]>,
    metadata: Box<[u8]>,
}

impl MemoryMedia {
    pub(crate) fn new(geometry: &Geometry) -> Self {
        MemoryMedia {
            block_bytes: geometry.block_size_bytes as usize,
            metadata_bytes: geometry.metadata_bytes_per_block as usize,
            zone_capacity_blocks: geometry.zone_capacity_blocks,
            chunk_blocks: MEMORY_CHUNK_BLOCKS.min(geometry.zone_capacity_blocks),
            chunks_per_zone: geometry.zone_capacity_blocks.div_ceil(MEMORY_CHUNK_BLOCKS),
            chunks: HashMap::new(),
        }
    }

    fn chunk(&mut self, index: u64) -> (&mut [u8], &mut [u8], usize) {
        let (block_bytes, metadata_bytes, chunk_blocks) = (self.block_bytes, self.metadata_bytes, self.chunk_blocks);
        let (zone, offset) = (index / self.zone_capacity_blocks, index % self.zone_capacity_blocks);
        let number = zone * self.chunks_per_zone + offset / chunk_blocks;
        let chunk = self.chunks.entry(number).or_insert_with(|| Chunk {
            data: vec![0; block_bytes * chunk_blocks as usize].into_boxed_slice(),
            metadata: vec![0; metadata_bytes * chunk_blocks as usize].into_boxed_slice(),
        });
        (&mut chunk.data, &mut chunk.metadata, (offset % chunk_blocks) as usize)
    }
}

impl Media for MemoryMedia {
    fn read(&mut self, index: u64, data: &mut [u8], metadata: &mut [u8]) -> Result<()> {
        let (bb, mb) = (self.block_bytes, self.metadata_bytes);
        for (i, block) in data.chunks_exact_mut(bb).enumerate() {
            let (chunk_data, chunk_meta, at) = self.chunk(index + i as u64);
            block.copy_from_slice(&chunk_data[at * bb..(at + 1) * bb]);
            if !metadata.is_empty() {
                metadata[i * mb..(i + 1) * mb].copy_from_slice(&chunk_meta[at * mb..(at + 1) * mb]);
            }
        }
        Ok(())
    }

    fn write(&mut self, index: u64, data: &[u8], metadata: &[u8]) -> Result<()> {
        let (bb, mb) = (self.block_bytes, self.metadata_bytes);
        for (i, block) in data.chunks_exact(bb).enumerate() {
            let (chunk_data, chunk_meta, at) = self.chunk(index + i as u64);
            chunk_data[at * bb..(at + 1) * bb].copy_from_slice(block);
            let meta = &mut chunk_meta[at * mb..(at + 1) * mb];
            if metadata.is_empty() {
                meta.fill(0);
            } else {
                meta.copy_from_slice(&metadata[i * mb..(i + 1) * mb]);
            }
        }
        Ok(())
    }

    fn store_zone(&mut self, _zone: u32, _stored: StoredZone) -> Result<()> {
        Ok(())
    }

    fn discard_zone(&mut self, zone: u32) -> Result<()> {
        let first = u64::from(zone) * self.chunks_per_zone;
        for chunk in first..first + self.chunks_per_zone {
            self.chunks.remove(&chunk);
        }
        Ok(())
    }

    fn flip_bit(&mut self, index: u64, bit: u64) -> Result<()> {
        let bb = self.block_bytes;
        let (data, _, at) = self.chunk(index);
        let bit = (bit % (bb as u64 * 8)) as usize;
        data[at * bb + bit / 8] ^= 1 << (bit % 8);
        Ok(())
    }

    fn split(self: Box<Self>, parts: &[Range<u32>]) -> Vec<Box<dyn Media>> {
        let MemoryMedia { block_bytes, metadata_bytes, zone_capacity_blocks, chunk_blocks, chunks_per_zone, chunks } =
            *self;
        let mut parted: Vec<HashMap<u64, Chunk>> = parts.iter().map(|_| HashMap::new()).collect();
        // Chunks of zones no part owns go: nothing can reach them any more.
        for (number, chunk) in chunks {
            let zone = (number / chunks_per_zone) as u32;
            if let Some(part) = parts.iter().position(|zones| zones.contains(&zone)) {
                parted[part].insert(number, chunk);
            }
        }
        parted
            .into_iter()
            .map(|chunks| {
                Box::new(MemoryMedia {
                    block_bytes,
                    metadata_bytes,
                    zone_capacity_blocks,
                    chunk_blocks,
                    chunks_per_zone,
                    chunks,
                }) as Box<dyn Media>
            })
            .collect()
    }
}

/// Media that keep zone state but drop data: reads of written blocks return zeros.
/// For timing-only experiments (calibration, paper-scale benchmarks), where copying
/// terabytes would cost more than the model.
pub(crate) struct DiscardMedia;

impl Media for DiscardMedia {
    fn read(&mut self, _index: u64, data: &mut [u8], metadata: &mut [u8]) -> Result<()> {
        data.fill(0);
        metadata.fill(0);
        Ok(())
    }

    fn write(&mut self, _index: u64, _data: &[u8], _metadata: &[u8]) -> Result<()> {
        Ok(())
    }

    fn store_zone(&mut self, _zone: u32, _stored: StoredZone) -> Result<()> {
        Ok(())
    }

    fn discard_zone(&mut self, _zone: u32) -> Result<()> {
        Ok(())
    }

    fn flip_bit(&mut self, _index: u64, _bit: u64) -> Result<()> {
        Ok(())
    }

    fn split(self: Box<Self>, parts: &[Range<u32>]) -> Vec<Box<dyn Media>> {
        parts.iter().map(|_| Box::new(DiscardMedia) as Box<dyn Media>).collect()
    }
}

mod file;
mod mapping;

pub(crate) use file::{lock, FileMedia};
