//! On-disk structures of a zapraid array, byte by byte in docs/FORMAT.md: the array
//! superblock (zone 0 of every drive), the spare record (zone 0 of a hot spare), the segment
//! header (first chunk of each zone of a segment), footer blocks (LBA, timestamp and
//! stripe ID of every data-region block, written when a segment is sealed, and as a stop
//! footer at a clean stop), the per-block metadata in each block's out-of-band area, the
//! checkpoint image and the mapping block.
//!
//! All little-endian, fixed-size, with a magic, a format version and a CRC32C. Decoding
//! is total: any bytes give a value or a typed reason, never a panic.

mod block_metadata;
mod checkpoint;
mod footer;
mod mapping;
mod record;
mod segment_header;
mod spare;
mod stop_footer;
mod superblock;

pub use block_metadata::*;
pub use checkpoint::*;
pub use footer::*;
pub use mapping::*;
pub use record::*;
pub use segment_header::*;
pub use spare::*;
pub use stop_footer::*;
pub use superblock::*;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod fuzz_tests;
