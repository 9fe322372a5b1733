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
//! split drive: file media share the open file (and its lock) and write at the offsets
//! of their zones only (each zone record is a write of its own, never a sector or table
//! rewritten around it, so parts never write the same bytes); memory media hand each
//! part the chunks of its zones (a chunk never spans two zones).

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use zerocopy::IntoBytes;

use crate::drive_file::{
    DecodeError, FileLayout, Superblock, ZoneRecord, SUPERBLOCK_COPY_OFFSET_BYTES, SUPERBLOCK_REGION_BYTES,
    ZONE_RECORD_BYTES,
};
use crate::error::{Error, Result};
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

/// Media in a drive file, locked for exclusive use while open (while any part of it is).
pub(crate) struct FileMedia {
    path: PathBuf,
    /// Shared by the parts of a split drive: the lock goes with the last of them.
    file: Arc<File>,
    layout: FileLayout,
    /// Whether the file has the zone table copy (files made before it do not).
    zone_table_copy: bool,
    block_bytes: u64,
    metadata_bytes: u64,
    update_sequence: Vec<u64>,
    zero_metadata: Vec<u8>,
}

/// What opening a drive file yields.
pub(crate) struct OpenedFile {
    pub media: FileMedia,
    pub geometry: Geometry,
    pub zones: Vec<StoredZone>,
    pub landing_seed: u64,
    pub drive_uuid: [u8; 16],
}

fn io_error<'a>(path: &'a Path, context: &'static str) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |error| Error::Io { path: path.to_path_buf(), context, error }
}

/// Takes an exclusive advisory lock on a drive (a drive file or an NVMe character device),
/// so that two zapraid processes never drive it at once.
pub(crate) fn lock(file: &File, path: &Path) -> Result<()> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(Error::DriveInUse { path: path.to_path_buf() }),
        Err(TryLockError::Error(error)) => {
            Err(Error::Io { path: path.to_path_buf(), context: "locking drive file", error })
        }
    }
}

impl FileMedia {
    /// Creates a new drive file (which must not exist) with every zone empty.
    pub(crate) fn create(path: &Path, geometry: &Geometry, drive_uuid: [u8; 16], landing_seed: u64) -> Result<Self> {
        geometry.validate()?;
        let layout = FileLayout::new(geometry)
            .ok_or_else(|| Error::InvalidGeometry { reason: "drive file would exceed 64-bit offsets".into() })?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io_error(path, "creating drive file"))?;
        lock(&file, path)?;
        file.set_len(layout.file_bytes).map_err(io_error(path, "sizing drive file"))?;
        let mut table = Vec::with_capacity(geometry.zone_count as usize * ZONE_RECORD_BYTES);
        for _ in 0..geometry.zone_count {
            table.extend_from_slice(ZoneRecord::new(ZoneState::Empty, 0, 0).as_bytes());
        }
        for offset in [layout.zone_table_offset, layout.zone_table_copy_offset] {
            file.write_all_at(&table, offset).map_err(io_error(path, "writing zone table"))?;
        }
        // The superblock goes last: a file without one is never taken for a drive.
        let sb = Superblock::new(geometry, drive_uuid, landing_seed);
        for offset in [0, SUPERBLOCK_COPY_OFFSET_BYTES] {
            file.write_all_at(sb.as_bytes(), offset).map_err(io_error(path, "writing superblock"))?;
        }
        file.sync_all().map_err(io_error(path, "syncing drive file"))?;
        Ok(Self::from_parts(path, file, layout, true, geometry, vec![0; geometry.zone_count as usize]))
    }

    fn from_parts(
        path: &Path,
        file: File,
        layout: FileLayout,
        zone_table_copy: bool,
        geometry: &Geometry,
        update_sequence: Vec<u64>,
    ) -> Self {
        FileMedia {
            path: path.to_path_buf(),
            file: Arc::new(file),
            layout,
            zone_table_copy,
            block_bytes: u64::from(geometry.block_size_bytes),
            metadata_bytes: u64::from(geometry.metadata_bytes_per_block),
            update_sequence,
            zero_metadata: Vec::new(),
        }
    }

    /// Opens an existing drive file, checking every structure in it (and taking the valid
    /// copy of each).
    pub(crate) fn open(path: &Path) -> Result<OpenedFile> {
        let bad = |reason: String| Error::BadDriveFile { path: path.to_path_buf(), reason };
        let file =
            OpenOptions::new().read(true).write(true).open(path).map_err(io_error(path, "opening drive file"))?;
        lock(&file, path)?;
        let file_len = file.metadata().map_err(io_error(path, "reading drive file size"))?.len();
        let mut region = vec![0u8; SUPERBLOCK_REGION_BYTES as usize];
        let got = read_prefix(&file, &mut region, 0).map_err(io_error(path, "reading superblock"))?;
        let sb = match Superblock::decode_region(&region[..got]) {
            Ok((sb, from_copy)) => {
                if from_copy {
                    tracing::warn!(path = %path.display(), "drive file superblock damaged: opened from its copy");
                }
                sb
            }
            Err(DecodeError::Magic(found)) => {
                return Err(Error::NotAnEmulatedDrive { path: path.to_path_buf(), found })
            }
            Err(DecodeError::Short { .. }) => {
                let mut found = [0u8; 8];
                let n = got.min(8);
                found[..n].copy_from_slice(&region[..n]);
                return Err(Error::NotAnEmulatedDrive { path: path.to_path_buf(), found });
            }
            Err(DecodeError::Version(found)) => {
                return Err(Error::UnsupportedVersion {
                    path: path.to_path_buf(),
                    found,
                    supported: crate::drive_file::DRIVE_FORMAT_VERSION,
                })
            }
            Err(other) => return Err(bad(format!("superblock: {other}"))),
        };
        let geometry = sb.geometry();
        geometry.validate().map_err(|e| bad(format!("superblock geometry: {e}")))?;
        let layout = FileLayout::new(&geometry).ok_or_else(|| bad("geometry overflows file offsets".into()))?;
        if file_len < layout.minimum_file_bytes {
            return Err(bad(format!("file is {file_len} bytes, the geometry needs {}", layout.minimum_file_bytes)));
        }
        let zone_table_copy = file_len >= layout.file_bytes;
        let table_bytes = geometry.zone_count as usize * ZONE_RECORD_BYTES;
        let mut table = vec![0u8; table_bytes];
        file.read_exact_at(&mut table, layout.zone_table_offset).map_err(io_error(path, "reading zone table"))?;
        let mut copy = vec![0u8; if zone_table_copy { table_bytes } else { 0 }];
        file.read_exact_at(&mut copy, layout.zone_table_copy_offset)
            .map_err(io_error(path, "reading zone table copy"))?;
        let mut zones = Vec::with_capacity(geometry.zone_count as usize);
        let mut sequences = Vec::with_capacity(geometry.zone_count as usize);
        for (zone, bytes) in table.chunks_exact(ZONE_RECORD_BYTES).enumerate() {
            let copy = copy.get(zone * ZONE_RECORD_BYTES..(zone + 1) * ZONE_RECORD_BYTES);
            let (state, written_blocks, sequence) =
                ZoneRecord::decode_pair(bytes, copy, geometry.zone_capacity_blocks).map_err(|e| {
                    Error::ZoneRecordLost { path: path.to_path_buf(), zone: zone as u32, reason: e.to_string() }
                })?;
            zones.push(StoredZone { state, written_blocks });
            sequences.push(sequence);
        }
        Ok(OpenedFile {
            media: Self::from_parts(path, file, layout, zone_table_copy, &geometry, sequences),
            geometry,
            zones,
            landing_seed: sb.landing_seed.get(),
            drive_uuid: sb.drive_uuid,
        })
    }

    /// Re-initialises an existing drive file whose superblock is valid: both copies of
    /// its zone table are written anew with every zone empty (what zone resets would leave),
    /// whatever they held. For a file that cannot be opened because a zone's record is
    /// damaged in both copies (`Error::ZoneRecordLost`); the caller erases it on purpose.
    pub(crate) fn reinitialize(path: &Path) -> Result<()> {
        let bad = |reason: String| Error::BadDriveFile { path: path.to_path_buf(), reason };
        let file =
            OpenOptions::new().read(true).write(true).open(path).map_err(io_error(path, "opening drive file"))?;
        lock(&file, path)?;
        let mut region = vec![0u8; SUPERBLOCK_REGION_BYTES as usize];
        let got = read_prefix(&file, &mut region, 0).map_err(io_error(path, "reading superblock"))?;
        let (sb, _) = Superblock::decode_region(&region[..got]).map_err(|e| bad(format!("superblock: {e}")))?;
        let geometry = sb.geometry();
        geometry.validate().map_err(|e| bad(format!("superblock geometry: {e}")))?;
        let layout = FileLayout::new(&geometry).ok_or_else(|| bad("geometry overflows file offsets".into()))?;
        let file_len = file.metadata().map_err(io_error(path, "reading drive file size"))?.len();
        if file_len < layout.minimum_file_bytes {
            return Err(bad(format!("file is {file_len} bytes, the geometry needs {}", layout.minimum_file_bytes)));
        }
        let mut table = Vec::with_capacity(geometry.zone_count as usize * ZONE_RECORD_BYTES);
        for _ in 0..geometry.zone_count {
            table.extend_from_slice(ZoneRecord::new(ZoneState::Empty, 0, 0).as_bytes());
        }
        let copy = (file_len >= layout.file_bytes).then_some(layout.zone_table_copy_offset);
        for offset in [Some(layout.zone_table_offset), copy].into_iter().flatten() {
            file.write_all_at(&table, offset).map_err(io_error(path, "writing zone table"))?;
        }
        file.sync_all().map_err(io_error(path, "syncing drive file"))
    }

    fn data_offset(&self, index: u64) -> u64 {
        self.layout.data_offset + index * self.block_bytes
    }

    fn metadata_offset(&self, index: u64) -> u64 {
        self.layout.metadata_offset + index * self.metadata_bytes
    }
}

/// Reads as much of `buf` as the file holds at `offset`.
fn read_prefix(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

impl Media for FileMedia {
    fn read(&mut self, index: u64, data: &mut [u8], metadata: &mut [u8]) -> Result<()> {
        self.file.read_exact_at(data, self.data_offset(index)).map_err(io_error(&self.path, "reading data"))?;
        if !metadata.is_empty() {
            self.file
                .read_exact_at(metadata, self.metadata_offset(index))
                .map_err(io_error(&self.path, "reading metadata"))?;
        }
        Ok(())
    }

    fn write(&mut self, index: u64, data: &[u8], metadata: &[u8]) -> Result<()> {
        self.file.write_all_at(data, self.data_offset(index)).map_err(io_error(&self.path, "writing data"))?;
        if self.metadata_bytes > 0 {
            let blocks = data.len() as u64 / self.block_bytes;
            let meta = if metadata.is_empty() {
                self.zero_metadata.resize((blocks * self.metadata_bytes) as usize, 0);
                &self.zero_metadata[..]
            } else {
                metadata
            };
            self.file
                .write_all_at(meta, self.metadata_offset(index))
                .map_err(io_error(&self.path, "writing metadata"))?;
        }
        Ok(())
    }

    fn store_zone(&mut self, zone: u32, stored: StoredZone) -> Result<()> {
        let sequence = &mut self.update_sequence[zone as usize];
        *sequence += 1;
        let record = ZoneRecord::new(stored.state, stored.written_blocks, *sequence);
        let at = u64::from(zone) * ZONE_RECORD_BYTES as u64;
        self.file
            .write_all_at(record.as_bytes(), self.layout.zone_table_offset + at)
            .map_err(io_error(&self.path, "writing zone record"))?;
        if self.zone_table_copy {
            self.file
                .write_all_at(record.as_bytes(), self.layout.zone_table_copy_offset + at)
                .map_err(io_error(&self.path, "writing zone record copy"))?;
        }
        Ok(())
    }

    fn discard_zone(&mut self, _zone: u32) -> Result<()> {
        Ok(())
    }

    fn flip_bit(&mut self, index: u64, bit: u64) -> Result<()> {
        let bit = bit % (self.block_bytes * 8);
        let offset = self.data_offset(index) + bit / 8;
        let mut byte = [0u8; 1];
        self.file.read_exact_at(&mut byte, offset).map_err(io_error(&self.path, "reading data"))?;
        byte[0] ^= 1 << (bit % 8);
        self.file.write_all_at(&byte, offset).map_err(io_error(&self.path, "writing data"))
    }

    fn split(self: Box<Self>, parts: &[Range<u32>]) -> Vec<Box<dyn Media>> {
        // pread and pwrite on one file at disjoint offsets need no coordination: each
        // part keeps its zones' update sequences and writes only its zones' bytes.
        parts
            .iter()
            .map(|_| {
                Box::new(FileMedia {
                    path: self.path.clone(),
                    file: Arc::clone(&self.file),
                    layout: self.layout,
                    zone_table_copy: self.zone_table_copy,
                    block_bytes: self.block_bytes,
                    metadata_bytes: self.metadata_bytes,
                    update_sequence: self.update_sequence.clone(),
                    zero_metadata: Vec::new(),
                }) as Box<dyn Media>
            })
            .collect()
    }
}
