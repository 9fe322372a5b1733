//! What a frontend asks of the engine (`Request`) and what it answers (`Response`).

use crate::checksum::{BlockChecksums, ReadChecks};
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
    /// A read whose blocks' checksums the frontend verifies on its own thread: the engine
    /// checks each block's metadata (kind, LBA, segment) and answers with it
    /// (`Response::checks`); a block that fails `ReadChecks::verify` is to be read again
    /// with `Request::Read`, which checks it here and rebuilds it from its stripe.
    /// `buffer`: one the frontend is done with (an earlier answer's, any length, or empty),
    /// for the engine to read into, so that reads cost no allocation in steady state.
    ReadUnverified {
        lba: u64,
        blocks: u64,
        buffer: Vec<u8>,
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

/// The answer to a request: read data; for a `WriteWithChecksums`, a buffer of the
/// write's length (its own, or one of the engine's; contents unspecified) for the
/// frontend to reuse; nothing for other writes, flushes and discards.
#[derive(Debug)]
pub struct Response {
    pub id: RequestId,
    pub result: Result<Vec<u8>>,
    /// For a `Request::ReadUnverified` that succeeded: what the frontend must check.
    pub checks: Option<ReadChecks>,
}

impl Response {
    /// A response with nothing for the frontend to check.
    pub(crate) fn new(id: RequestId, result: Result<Vec<u8>>) -> Response {
        Response { id, result, checks: None }
    }
}

impl Request {
    /// A write, with or without the frontend's checksums.
    pub fn is_write(&self) -> bool {
        matches!(self, Request::Write { .. } | Request::WriteWithChecksums { .. })
    }
}
