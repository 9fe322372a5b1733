//! Recovery: rebuilding the engine's in-memory state from the drives alone (paper section
//! 3.4), as a sans-I/O state machine like the engine (`poll_command`, `on_completion`).
//!
//! 1. Zone reports of every drive.
//! 2. The header block of every zone written past its header region. Zones some drive
//!    has not written past the header region never received data (the first group waits
//!    for the header) and are reset; headers of another array, of the wrong drive or
//!    inconsistent between drives are errors that name the drive and zone. A header that
//!    does not decode (a damaged block) is tolerated on as many drives as parity still
//!    covers, and counted. The headers give each segment's layout (chunk class and size,
//!    how it is written: an array with hybrid open segments has several), and with it
//!    where its footer is; the first footer block is read next (`phases`).
//! 3. Sealed segments (every zone written past its footer, and a footer that names the
//!    segment on at least one drive): the footer blocks, giving each data block's LBA,
//!    timestamp and stripe ID. Open segments: the data and metadata of every written block
//!    of the data region; blocks that fail their checksum or carry another segment's
//!    sequence are not trusted. A drive whose footer (or stop footer) is damaged is read
//!    like an open segment's instead.
//! 4. Stripes are put together from what was found (`assemble`): a chunk missing on a
//!    drive that wrote it (a damaged block) is rebuilt from parity, up to the parity the
//!    level has per stripe, and counted; a stripe missing more is dropped and its lost
//!    blocks counted and logged. Chunks that were never written (a power cut in the middle
//!    of a stripe) are not losses: a write is acknowledged only when its whole stripe is
//!    persisted.
//! 5. The L2P table (newest timestamp wins; a block garbage collection copied keeps its
//!    timestamp, so between equal timestamps the newer segment wins, and so does a block a
//!    repair rewrote, which may land in the segment of its original: then the later
//!    stripe wins), the compact stripe tables, the free zones, the next sequence number
//!    and timestamp.
//! 6. Recovered open segments are finished and never appended to again: the engine
//!    rewrites their complete stripes' live blocks into a new segment and then resets
//!    their zones (garbage collection, `reclaim_first`), in the background.
//!
//! With a failed drive (one that cannot report its zones, up to the tolerated count), its
//! data blocks' LBAs and timestamps come back per stripe from the parity of those fields
//! that parity blocks carry; reads rebuild their contents.
//!
//! With a checkpoint offered that matches the drives (`checkpoint`), the segments it names
//! are not read past their headers: steps 3 and 4 cover only the segments written after
//! it, whose entries override its pages.
//!
//! The same reading serves a running engine that lost a page of its L2P table (`scan`):
//! the segments it names are read as above, steps 3 and 4 only, and their blocks of the
//! page's LBAs handed back; nothing is reset.
//!
//! Recovery only reads and resets zones that held nothing acknowledged, so it is
//! idempotent and survives a crash of its own at any point.

mod assemble;
mod checkpoint;
mod install;
mod lanes;
mod machine;
mod phases;
mod scan;
mod structures;

pub(crate) use install::{Concluded, Newest};
pub(crate) use machine::Recovered;
pub use machine::{Recovery, RecoveryReport, Repairs};
pub(crate) use scan::ScanSegment;
pub use structures::HEADERS_DISAGREE;
