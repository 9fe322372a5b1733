//! Media in a drive file (see `drive_file` for its layout), locked for exclusive use
//! while open (while any part of it is).
//!
//! Blocks, their metadata and zone records are written through a shared mapping of the
//! file (`mapping`) where the kernel offers one: a write is a copy into the page cache,
//! with no system call and no lock in the kernel. `pwrite` would take the file's inode
//! lock for every command, which every part of a split drive (every engine shard) shares;
//! and each data write also moves its zone's write pointer, a record written twice. A
//! zone's pages are populated for writing (`MADV_POPULATE_WRITE`) a little ahead of its
//! writes, and never written through the mapping before, so that a full file system fails
//! a write with an error rather than killing the process with SIGBUS. Reads go through `pread` (no inode lock). Where
//! mapping or populating is not supported, every write is a `pwrite`.

use std::fs::{File, OpenOptions, TryLockError};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use zerocopy::IntoBytes;

use super::mapping::{Mapping, Populate};
use super::{Media, StoredZone};
use crate::drive_file::{
    DecodeError, FileLayout, Superblock, ZoneRecord, SUPERBLOCK_COPY_OFFSET_BYTES, SUPERBLOCK_REGION_BYTES,
    ZONE_RECORD_BYTES,
};
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::zone::ZoneState;

/// Blocks of a zone populated at a time ahead of its writes (256 KiB of 4 KiB blocks):
/// one `madvise` per so many blocks written, short enough not to hold up the writes that
/// wait behind it (a whole zone at once held them up for about 240 ms).
const POPULATE_AHEAD_BLOCKS: u64 = 64;

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
    zone_capacity_blocks: u64,
    update_sequence: Vec<u64>,
    zero_metadata: Vec<u8>,
    /// The file mapped, its zone tables populated; None where the kernel maps or
    /// populates none (every write is then a `pwrite`).
    map: Option<Arc<Mapping>>,
    /// By zone: the blocks from its start whose pages (data and metadata) were populated
    /// since open.
    populated_blocks: Vec<u64>,
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
    /// Has the file system back every page of the drive file at `path` now, its contents
    /// unchanged: a file on tmpfs otherwise allocates and clears each page at its first
    /// write, a cost of emulating a drive in memory that a real drive's media does not
    /// have (`zapraid bench cpu` measures the server path without it).
    pub(crate) fn populate_all(path: &Path) -> Result<()> {
        let file =
            OpenOptions::new().read(true).write(true).open(path).map_err(io_error(path, "opening drive file"))?;
        let len_bytes = file.metadata().map_err(io_error(path, "reading drive file size"))?.len();
        let unsupported = || std::io::Error::from(std::io::ErrorKind::Unsupported);
        let map =
            Mapping::new(&file, len_bytes).ok_or_else(unsupported).map_err(io_error(path, "mapping drive file"))?;
        match map.populate(0, len_bytes) {
            Populate::Done => Ok(()),
            Populate::Unsupported => Err(io_error(path, "populating drive file")(unsupported())),
            Populate::Failed(error) => Err(io_error(path, "populating drive file")(error)),
        }
    }

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
        let mapped_bytes = layout.file_bytes;
        Ok(Self::from_parts(path, file, layout, true, mapped_bytes, geometry, vec![0; geometry.zone_count as usize]))
    }

    fn from_parts(
        path: &Path,
        file: File,
        layout: FileLayout,
        zone_table_copy: bool,
        file_bytes: u64,
        geometry: &Geometry,
        update_sequence: Vec<u64>,
    ) -> Self {
        let table_bytes = u64::from(geometry.zone_count) * ZONE_RECORD_BYTES as u64;
        let tables = [Some(layout.zone_table_offset), zone_table_copy.then_some(layout.zone_table_copy_offset)];
        let map = Mapping::new(&file, file_bytes).filter(|map| {
            tables.into_iter().flatten().all(|offset| matches!(map.populate(offset, table_bytes), Populate::Done))
        });
        if map.is_none() {
            tracing::debug!(path = %path.display(), "drive file not mapped: every write is a pwrite");
        }
        FileMedia {
            path: path.to_path_buf(),
            file: Arc::new(file),
            layout,
            zone_table_copy,
            block_bytes: u64::from(geometry.block_size_bytes),
            metadata_bytes: u64::from(geometry.metadata_bytes_per_block),
            zone_capacity_blocks: geometry.zone_capacity_blocks,
            update_sequence,
            zero_metadata: Vec::new(),
            map: map.map(Arc::new),
            populated_blocks: vec![0; geometry.zone_count as usize],
        }
    }

    /// Populates the pages of `zone`'s first `end_blocks` blocks for writing through the
    /// mapping; where the kernel cannot populate, drops the mapping (every write is a
    /// `pwrite` from then on). Pages are populated `POPULATE_AHEAD_BLOCKS` at a time
    /// ahead of the writes: a whole zone at once would stall its first write for as long
    /// as allocating a gibibyte takes.
    fn populate_for(&mut self, zone: usize, end_blocks: u64) -> Result<()> {
        let Some(map) = self.map.as_deref() else { return Ok(()) };
        let populated = self.populated_blocks[zone];
        if end_blocks > populated {
            let until = end_blocks.max(populated + POPULATE_AHEAD_BLOCKS).min(self.zone_capacity_blocks);
            let first = zone as u64 * self.zone_capacity_blocks + populated;
            let blocks = until - populated;
            let ranges = [
                (self.data_offset(first), blocks * self.block_bytes),
                (self.metadata_offset(first), blocks * self.metadata_bytes),
            ];
            for (offset, bytes) in ranges.into_iter().filter(|(_, bytes)| *bytes > 0) {
                match map.populate(offset, bytes) {
                    Populate::Done => {}
                    Populate::Unsupported => {
                        tracing::debug!(path = %self.path.display(), "cannot populate the mapped drive file: pwrite");
                        self.map = None;
                        return Ok(());
                    }
                    Populate::Failed(error) => {
                        return Err(Error::Io { path: self.path.clone(), context: "allocating a zone's space", error })
                    }
                }
            }
            self.populated_blocks[zone] = until;
        }
        Ok(())
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
            media: Self::from_parts(path, file, layout, zone_table_copy, file_len, &geometry, sequences),
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
        let blocks = data.len() as u64 / self.block_bytes;
        if self.metadata_bytes > 0 && metadata.is_empty() {
            self.zero_metadata.resize((blocks * self.metadata_bytes) as usize, 0);
        }
        let zone = (index / self.zone_capacity_blocks) as usize;
        let end_blocks = index % self.zone_capacity_blocks + blocks;
        debug_assert!(end_blocks <= self.zone_capacity_blocks, "a write within one zone");
        let (data_at, metadata_at) = (self.data_offset(index), self.metadata_offset(index));
        self.populate_for(zone, end_blocks)?;
        let meta = match (self.metadata_bytes, metadata.is_empty()) {
            (0, _) => None,
            (_, true) => Some(&self.zero_metadata[..]),
            (_, false) => Some(metadata),
        };
        match self.map.as_deref() {
            Some(map) => {
                map.write(data_at, data);
                if let Some(meta) = meta {
                    map.write(metadata_at, meta);
                }
            }
            None => {
                self.file.write_all_at(data, data_at).map_err(io_error(&self.path, "writing data"))?;
                if let Some(meta) = meta {
                    self.file.write_all_at(meta, metadata_at).map_err(io_error(&self.path, "writing metadata"))?;
                }
            }
        }
        Ok(())
    }

    fn store_zone(&mut self, zone: u32, stored: StoredZone) -> Result<()> {
        let sequence = &mut self.update_sequence[zone as usize];
        *sequence += 1;
        let record = ZoneRecord::new(stored.state, stored.written_blocks, *sequence);
        let at = u64::from(zone) * ZONE_RECORD_BYTES as u64;
        // The primary first, then the copy: a record torn in the middle (a crash) is
        // found by its checksum, and its copy, one update behind, is taken.
        let copies = [
            (Some(self.layout.zone_table_offset), "writing zone record"),
            (self.zone_table_copy.then_some(self.layout.zone_table_copy_offset), "writing zone record copy"),
        ];
        for (offset, context) in copies.into_iter().filter_map(|(offset, context)| Some((offset? + at, context))) {
            match self.map.as_deref() {
                Some(map) => map.write(offset, record.as_bytes()),
                None => self.file.write_all_at(record.as_bytes(), offset).map_err(io_error(&self.path, context))?,
            }
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
        // Writes to one file (or its mapping) at disjoint offsets need no coordination:
        // each part keeps its zones' update sequences and writes only its zones' bytes.
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
                    zone_capacity_blocks: self.zone_capacity_blocks,
                    update_sequence: self.update_sequence.clone(),
                    zero_metadata: Vec::new(),
                    map: self.map.clone(),
                    populated_blocks: self.populated_blocks.clone(),
                }) as Box<dyn Media>
            })
            .collect()
    }
}
