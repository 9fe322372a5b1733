//! The segment header: the first chunk of every zone of a segment, giving the segment's
//! array, sequence, shape and zones.

use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::record::{check_sealed, drive_shape_is_valid, read, DecodeError, FORMAT_VERSION, MAX_DRIVES};

pub const SEGMENT_HEADER_MAGIC: [u8; 8] = *b"ZRAIDSEG";

/// The header written as the first chunk of every zone of a segment.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct SegmentHeader {
    pub magic: [u8; 8],
    pub version: U32,
    pub header_bytes: U32,
    pub array_uuid: [u8; 16],
    pub segment_sequence: U64,
    pub drive_index: U32,
    pub drive_count: U32,
    pub data_chunks: U32,
    pub parity_chunks: U32,
    pub level: u8,
    /// How this segment is written: 0 stripe groups (Zone Append), 1 Zone Write, 2 one
    /// group of the whole segment (Zone Append).
    pub mode: u8,
    /// 0 small chunks, 1 large chunks (`hybrid::ChunkClass`).
    pub segment_class: u8,
    pub reserved0: u8,
    pub chunk_blocks: U32,
    pub group_size: U32,
    pub block_size_bytes: U32,
    pub stripes: U64,
    pub created_timestamp: U64,
    /// Zone of each drive of the segment (entries past drive_count are 0).
    pub zones: [U32; MAX_DRIVES],
    pub reserved1: U32,
    pub crc32c: U32,
}

pub const SEGMENT_HEADER_BYTES: usize = 240;
const _: () = assert!(std::mem::size_of::<SegmentHeader>() == SEGMENT_HEADER_BYTES);

impl SegmentHeader {
    /// Seals the header: sets the CRC over everything before it.
    pub fn seal(mut self) -> Self {
        self.magic = SEGMENT_HEADER_MAGIC;
        self.version = FORMAT_VERSION.into();
        self.header_bytes = (SEGMENT_HEADER_BYTES as u32).into();
        self.crc32c = crate::crc::crc32c(&self.as_bytes()[..SEGMENT_HEADER_BYTES - 4]).into();
        self
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let h: SegmentHeader = read(bytes)?;
        check_sealed(
            h.magic,
            SEGMENT_HEADER_MAGIC,
            h.version.get(),
            &h.as_bytes()[..SEGMENT_HEADER_BYTES - 4],
            h.crc32c.get(),
        )?;
        let drives = h.drive_count.get() as usize;
        if h.header_bytes.get() as usize != SEGMENT_HEADER_BYTES
            || !drive_shape_is_valid(drives, h.drive_index.get(), h.data_chunks.get(), h.parity_chunks.get())
            || h.chunk_blocks.get() == 0
            || h.group_size.get() == 0
        {
            return Err(DecodeError::Field(format!(
                "inconsistent shape: drive {} of {drives}, {}+{}, chunk {} blocks, group {}",
                h.drive_index.get(),
                h.data_chunks.get(),
                h.parity_chunks.get(),
                h.chunk_blocks.get(),
                h.group_size.get()
            )));
        }
        Ok(h)
    }
}
