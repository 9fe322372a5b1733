//! The segment header: the first chunk of every zone of a segment, giving the segment's
//! array, sequence, shape and zones and, for a segment of a declustered array, its number
//! and the array drive of each of its lanes.
//!
//! Two layouts, told apart by `header_bytes` (byte tables in docs/FORMAT.md):
//!
//! ```text
//!   240 bytes  common fields 0..232 | reserved1 (0)      | crc32c          classic arrays, and
//!                                   232                  236             every header before
//!   280 bytes  common fields 0..232 | segment_number | array_drives | lane_drives[36] | crc32c
//!                                   232              236            240               276
//! ```
//!
//! `SegmentHeader` is the 240-byte layout and holds the fields both share; `SegmentLanes`
//! holds what the 280-byte layout adds, which a 240-byte header implies: lane i on drive i
//! of drive_count drives, the segment numbered as its zone. A classic array (N = k + m)
//! keeps writing 240 bytes, so that nothing changes on its drives and a zapraid built
//! before declustered arrays still reads them; a declustered array writes 280
//! (`SegmentHeader::sealed_bytes` chooses). In both, `drive_index` is the chunk's lane:
//! its place in the stripe (for a classic array also its drive).

use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::record::{
    check_sealed, drive_shape_is_valid, read, DecodeError, FORMAT_VERSION, MAX_ARRAY_DRIVES, MAX_DRIVES,
};

pub const SEGMENT_HEADER_MAGIC: [u8; 8] = *b"ZRAIDSEG";

/// The header written as the first chunk of every zone of a segment; as a value, the
/// fields both layouts share (and the 240-byte layout's bytes).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct SegmentHeader {
    pub magic: [u8; 8],
    pub version: U32,
    /// 240 (`SEGMENT_HEADER_BYTES`) or 280 (`DECLUSTERED_SEGMENT_HEADER_BYTES`): the layout.
    pub header_bytes: U32,
    pub array_uuid: [u8; 16],
    pub segment_sequence: U64,
    /// This chunk's lane: its place in the stripe, below `drive_count` (on a classic array
    /// also its drive; on a declustered one `SegmentLanes::lane_drives` names the drive).
    pub drive_index: U32,
    /// k + m: the segment's lanes.
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
    /// Zone of each lane's drive holding the segment (entries past drive_count are 0).
    pub zones: [U32; MAX_DRIVES],
    /// Always 0. In the 280-byte layout these bytes hold `SegmentLanes::segment_number`,
    /// and a header decoded from that layout has 0 here.
    pub reserved1: U32,
    /// In a header decoded from the 280-byte layout, the CRC that layout stored.
    pub crc32c: U32,
}

pub const SEGMENT_HEADER_BYTES: usize = 240;
const _: () = assert!(std::mem::size_of::<SegmentHeader>() == SEGMENT_HEADER_BYTES);

/// What a declustered segment's header adds: the segment's number and the array drive of
/// each lane. A 240-byte header implies them (`SegmentLanes::implied_by`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct SegmentLanes {
    /// e, the segment's number: row x G + group of its placement (`crate::lanes`); a
    /// 240-byte header's zone.
    pub segment_number: U32,
    /// N, the array's drives: at least `drive_count`, at most `MAX_ARRAY_DRIVES`.
    pub array_drives: U32,
    /// The array drive of each lane, distinct and below N; entries past drive_count 0.
    pub lane_drives: [u8; MAX_DRIVES],
}

pub const SEGMENT_LANES_BYTES: usize = 44;
const _: () = assert!(std::mem::size_of::<SegmentLanes>() == SEGMENT_LANES_BYTES);

/// Where `SegmentLanes` starts in the 280-byte layout: at the 240-byte layout's
/// `reserved1`, after the zones.
pub const SEGMENT_LANES_OFFSET: usize = std::mem::offset_of!(SegmentHeader, reserved1);
const _: () = assert!(SEGMENT_LANES_OFFSET == 232);

/// The 280-byte layout: the shared fields before `reserved1`, the lanes, the CRC.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
struct DeclusteredRecord {
    common: [u8; SEGMENT_LANES_OFFSET],
    lanes: SegmentLanes,
    crc32c: U32,
}

/// The header's size in the layout of a declustered array's segments.
pub const DECLUSTERED_SEGMENT_HEADER_BYTES: usize = 280;
const _: () = assert!(std::mem::size_of::<DeclusteredRecord>() == DECLUSTERED_SEGMENT_HEADER_BYTES);

impl SegmentLanes {
    /// A classic segment's lanes: lane i on drive i of `drives`, the segment numbered
    /// `zone`.
    pub fn classic(drives: u32, zone: u32) -> Self {
        let mut lane_drives = [0u8; MAX_DRIVES];
        for (lane, drive) in lane_drives.iter_mut().enumerate().take(drives as usize) {
            *drive = lane as u8;
        }
        SegmentLanes { segment_number: zone.into(), array_drives: drives.into(), lane_drives }
    }

    /// A declustered segment's lanes: segment `segment_number` of an array of
    /// `array_drives` drives, lane i on drive `lane_drives[i]` (as
    /// `Placement::segment_drives` gives them). Panics on more than `MAX_DRIVES` lanes or a
    /// drive past a byte: the placement never makes them.
    pub fn new(segment_number: u32, array_drives: u32, lane_drives: &[u32]) -> Self {
        assert!(lane_drives.len() <= MAX_DRIVES, "{} lanes, at most {MAX_DRIVES}", lane_drives.len());
        let mut lanes = [0u8; MAX_DRIVES];
        for (lane, &drive) in lanes.iter_mut().zip(lane_drives) {
            *lane = u8::try_from(drive).expect("a drive index fits a byte");
        }
        SegmentLanes { segment_number: segment_number.into(), array_drives: array_drives.into(), lane_drives: lanes }
    }

    /// What a 240-byte header says of its lanes: lane i on drive i of its drive_count
    /// drives, the segment numbered as its zone (`zones[drive_index]`; 0 if the index is
    /// past the table).
    pub fn implied_by(header: &SegmentHeader) -> Self {
        let zone = header.zones.get(header.drive_index.get() as usize).map_or(0, |z| z.get());
        SegmentLanes::classic(header.drive_count.get().min(MAX_DRIVES as u32), zone)
    }

    /// The array drive holding lane `lane` (None past the table).
    pub fn drive_of_lane(&self, lane: usize) -> Option<u32> {
        self.lane_drives.get(lane).map(|d| u32::from(*d))
    }

    /// The lane array drive `drive` holds among the first `lanes` (None if it holds none).
    pub fn lane_of_drive(&self, drive: u32, lanes: usize) -> Option<usize> {
        self.lane_drives.iter().take(lanes).position(|d| u32::from(*d) == drive)
    }

    /// Why the lanes cannot be those of a header of `lanes` lanes, if they cannot: N from
    /// `lanes` to `MAX_ARRAY_DRIVES`, each lane on a distinct drive below N, the entries
    /// past the lanes 0.
    fn refusal(&self, lanes: usize) -> Option<String> {
        let drives = self.array_drives.get();
        if !(lanes as u64..=MAX_ARRAY_DRIVES as u64).contains(&u64::from(drives)) {
            return Some(format!("segment lanes: an array of {drives} drives for stripes of {lanes}"));
        }
        let (used, unused) = self.lane_drives.split_at(lanes.min(MAX_DRIVES));
        let mut seen = 0u64;
        for &drive in used {
            // Below N <= 64: the shift is in range.
            if u32::from(drive) >= drives || seen >> drive & 1 == 1 {
                return Some(format!("segment lanes: lane drives {used:?} are not distinct drives below {drives}"));
            }
            seen |= 1 << drive;
        }
        if unused.iter().any(|d| *d != 0) {
            return Some(format!("segment lanes: lane drive entries past {lanes} lanes are not 0: {unused:?}"));
        }
        None
    }
}

impl SegmentHeader {
    /// Seals the header in the 240-byte layout: sets magic, version, size and the CRC over
    /// everything before it.
    pub fn seal(mut self) -> Self {
        self.magic = SEGMENT_HEADER_MAGIC;
        self.version = FORMAT_VERSION.into();
        self.header_bytes = (SEGMENT_HEADER_BYTES as u32).into();
        self.crc32c = crate::crc::crc32c(&self.as_bytes()[..SEGMENT_HEADER_BYTES - 4]).into();
        self
    }

    /// The header sealed in the 280-byte layout with `lanes` (this header's `reserved1` and
    /// `crc32c` are not part of it).
    pub fn seal_declustered(self, lanes: &SegmentLanes) -> [u8; DECLUSTERED_SEGMENT_HEADER_BYTES] {
        let mut header = self;
        header.magic = SEGMENT_HEADER_MAGIC;
        header.version = FORMAT_VERSION.into();
        header.header_bytes = (DECLUSTERED_SEGMENT_HEADER_BYTES as u32).into();
        let mut common = [0u8; SEGMENT_LANES_OFFSET];
        common.copy_from_slice(&header.as_bytes()[..SEGMENT_LANES_OFFSET]);
        let mut record = DeclusteredRecord { common, lanes: *lanes, crc32c: 0.into() };
        record.crc32c = crate::crc::crc32c(&record.as_bytes()[..DECLUSTERED_SEGMENT_HEADER_BYTES - 4]).into();
        let mut bytes = [0u8; DECLUSTERED_SEGMENT_HEADER_BYTES];
        bytes.copy_from_slice(record.as_bytes());
        bytes
    }

    /// The header as the engine writes it: the 240-byte layout when `lanes` are what it
    /// implies (a classic array's segment: N = k + m, lane i on drive i, numbered as its
    /// zone), so classic arrays write what they always did; else the 280-byte layout.
    pub fn sealed_bytes(self, lanes: &SegmentLanes) -> Vec<u8> {
        if *lanes == SegmentLanes::implied_by(&self) {
            self.seal().as_bytes().to_vec()
        } else {
            self.seal_declustered(lanes).to_vec()
        }
    }

    /// Whether the header was decoded from the 280-byte layout (a declustered array's).
    pub fn is_declustered(&self) -> bool {
        self.header_bytes.get() as usize == DECLUSTERED_SEGMENT_HEADER_BYTES
    }

    /// A header of either layout, the fields both share (`decode_with_lanes` gives the
    /// lanes too).
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        Self::decode_with_lanes(bytes).map(|(header, _)| header)
    }

    /// A header of either layout and its lanes (those a 240-byte header implies, or those
    /// a 280-byte one records), its CRC and every field checked: the bytes are untrusted.
    pub fn decode_with_lanes(bytes: &[u8]) -> Result<(Self, SegmentLanes), DecodeError> {
        // `header_bytes` follows the magic and the version.
        let size = bytes.get(12..16).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        let (h, lanes) = if size == Some(DECLUSTERED_SEGMENT_HEADER_BYTES) {
            let record: DeclusteredRecord = read(bytes)?;
            // The shared fields as the 240-byte layout holds them, `reserved1` 0.
            let mut widened = [0u8; SEGMENT_HEADER_BYTES];
            widened[..SEGMENT_LANES_OFFSET].copy_from_slice(&record.common);
            widened[SEGMENT_HEADER_BYTES - 4..].copy_from_slice(record.crc32c.as_bytes());
            let h: SegmentHeader = read(&widened)?;
            let covered = &record.as_bytes()[..DECLUSTERED_SEGMENT_HEADER_BYTES - 4];
            check_sealed(h.magic, SEGMENT_HEADER_MAGIC, h.version.get(), covered, record.crc32c.get())?;
            (h, record.lanes)
        } else {
            let h: SegmentHeader = read(bytes)?;
            let covered = &h.as_bytes()[..SEGMENT_HEADER_BYTES - 4];
            check_sealed(h.magic, SEGMENT_HEADER_MAGIC, h.version.get(), covered, h.crc32c.get())?;
            (h, SegmentLanes::implied_by(&h))
        };
        let drives = h.drive_count.get() as usize;
        if !matches!(h.header_bytes.get() as usize, SEGMENT_HEADER_BYTES | DECLUSTERED_SEGMENT_HEADER_BYTES)
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
        if h.is_declustered() {
            if let Some(reason) = lanes.refusal(drives) {
                return Err(DecodeError::Field(reason));
            }
        }
        Ok((h, lanes))
    }
}
