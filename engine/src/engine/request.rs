//! What a frontend asks of the engine (`Request`) and what it answers (`Response`).

use crate::checksum::BlockChecksums;
use crate::error::Result;

/// Frontend request identifier, chosen by the caller.
pub type RequestId = u64;

/// What a frontend asks of the array. LBAs and lengths are in blocks of the drives' size.
#[derive(Debug)]
pub enum Request {
    /// The engine computes each block's CRC32C on its own thread.
    Write {
        lba: u64,
        data: Vec<u8>,
    },
    /// A write whose blocks' CRC32C the frontend computed on its own thread
    /// (`BlockChecksums::of`), so the engine thread does not read the data for them. A
    /// count that does not fit the data fails the request (so does a wrong value, in
    /// debug builds).
    WriteWithChecksums {
        lba: u64,
        data: Vec<u8>,
        checksums: BlockChecksums,
    },
    Read {
        lba: u64,
        blocks: u64,
    },
    /// Completes when every write submitted before it is persisted.
    Flush,
    /// The blocks read as zeros from now on (their L2P entries are dropped, so garbage
    /// collection need not move them). Not persisted: after a restart a discarded block
    /// may read as its old contents again, as a drive's discard allows.
    Discard {
        lba: u64,
        blocks: u64,
    },
}

/// The answer to a request: read data; for a write, its data buffer given back (its
/// contents as written) for the frontend to reuse; nothing for flushes and discards.
#[derive(Debug)]
pub struct Response {
    pub id: RequestId,
    pub result: Result<Vec<u8>>,
}

impl Request {
    /// A write, with or without the frontend's checksums.
    pub fn is_write(&self) -> bool {
        matches!(self, Request::Write { .. } | Request::WriteWithChecksums { .. })
    }
}
