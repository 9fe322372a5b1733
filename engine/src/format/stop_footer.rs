//! The stop footer (docs/FORMAT.md): footer blocks a clean stop writes after an open
//! segment's data, each with block metadata of kind `Footer`. A start reads the last written
//! block of the zone and takes it for a stop footer only if it names this segment and drive
//! and the blocks it implies end exactly at the write pointer; anything else (a crash, a torn
//! or stale block) makes the start scan every block's metadata instead. The block is read
//! from a drive: untrusted, every rule broken is a typed error, never a panic.

use super::block_metadata::{BlockKind, BlockMetadata};
use super::footer::{decode_footer_block, footer_entries_per_block};
use super::record::DecodeError;

/// Where a stop footer is looked for: the segment and drive it must name, the zone-relative
/// block where the segment's data region starts, and the zone's write pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopFooterPlace {
    pub segment_sequence: u64,
    pub drive_index: usize,
    pub data_start_blocks: u64,
    pub written_blocks: u64,
}

/// Checks that the block at the write pointer (`data` one whole block, `oob` its metadata)
/// is the last block of a stop footer of `place`, and returns the zone-relative block where
/// the stop footer starts (where the segment's data ends).
pub fn decode_stop_footer(data: &[u8], oob: &[u8], place: &StopFooterPlace) -> Result<u64, DecodeError> {
    let (meta, kind) = BlockMetadata::decode(data, oob)?;
    if kind != BlockKind::Footer {
        return Err(DecodeError::Field(format!("block kind {kind:?}, not a footer")));
    }
    let sequence = place.segment_sequence;
    if u64::from(meta.segment_sequence_low.get()) != sequence & u64::from(u32::MAX) {
        return Err(DecodeError::Field(format!(
            "metadata of segment {:#x} (low 32 bits), expected segment {sequence}",
            meta.segment_sequence_low.get()
        )));
    }
    let (header, entries) = decode_footer_block(data)?;
    if header.segment_sequence.get() != sequence || header.drive_index.get() as usize != place.drive_index {
        return Err(DecodeError::Field(format!(
            "footer of segment {} drive {}, expected segment {sequence} drive {}",
            header.segment_sequence.get(),
            header.drive_index.get(),
            place.drive_index
        )));
    }
    // A block too small for one entry holds no stop footer (and must not divide by zero).
    let per_block = footer_entries_per_block(data.len() as u32) as u64;
    let first_entry = u64::from(header.first_block.get());
    if per_block == 0 || !first_entry.is_multiple_of(per_block) {
        return Err(DecodeError::Field(format!(
            "first block {first_entry} is not a multiple of the {per_block} entries a footer block holds"
        )));
    }
    let blocks = first_entry / per_block + 1;
    let total_entries = first_entry + entries.len() as u64;
    let data_end = place.data_start_blocks + total_entries;
    match place.written_blocks.checked_sub(blocks) {
        Some(start) if start == data_end => Ok(start),
        _ => Err(DecodeError::Field(format!(
            "{blocks} footer blocks for data ending at block {data_end} do not end at the write pointer {}",
            place.written_blocks
        ))),
    }
}
