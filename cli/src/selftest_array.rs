//! An array run for the self-tests (`selftest`, `selftest_random`): started from its
//! drives on a `Session` (no block device), written and read back in requests of many
//! blocks with a pattern each block's LBA and pass can be checked against.

use std::ops::Range;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use zapraid_server::run::{Message, Session};

use crate::hybrid::requests;
use crate::size::format_bytes;
use crate::text::bar;

/// Requests in flight at once while the self-test writes or reads.
const SELFTEST_QUEUE_DEPTH: u64 = 32;
/// Blocks per self-test request.
const SELFTEST_REQUEST_BLOCKS: u64 = 64;

/// A block's expected contents: its LBA and the pass that wrote it, spread over the block.
pub(crate) fn selftest_block(lba: u64, pass: u64, block_bytes: usize) -> Vec<u8> {
    let seed = lba.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ pass;
    (0..block_bytes).map(|i| (seed >> ((i % 8) * 8)) as u8 ^ (i / 8) as u8).collect()
}

/// One running engine (no block device) for the self-test.
pub(crate) struct SelftestArray {
    pub(crate) session: Session,
}

impl SelftestArray {
    pub(crate) fn start(drives: &[PathBuf]) -> Result<Self> {
        Ok(SelftestArray { session: Session::start(zapraid_server::assemble::assemble(drives)?)? })
    }

    /// Writes (`write`) or reads and checks the blocks `lbas` as pass `pass` wrote them.
    pub(crate) fn run(&self, lbas: Range<u64>, pass: u64, write: bool, what: &str) -> Result<()> {
        let blocks = lbas.end - lbas.start;
        let bar = bar(blocks, what);
        let block_bytes = self.session.block_bytes;
        let requests = requests(lbas, SELFTEST_REQUEST_BLOCKS, &self.session.open_segments, block_bytes as u32);
        let count = requests.len() as u64;
        let (mut sent, mut done) = (0u64, 0u64);
        while done < count {
            while sent < count && sent - done < SELFTEST_QUEUE_DEPTH {
                let (lba, n) = requests[sent as usize];
                let request = if write {
                    let data = (lba..lba + n).flat_map(|l| selftest_block(l, pass, block_bytes)).collect();
                    zapraid_engine::Request::Write { lba, data }
                } else {
                    zapraid_engine::Request::Read { lba, blocks: n }
                };
                self.session.send(sent, request)?;
                sent += 1;
            }
            let (tag, result, _) = self.session.recv()?;
            let data = result.with_context(|| format!("{what}: request {tag} failed"))?;
            let Some(&(lba, n)) = requests.get(tag as usize) else {
                bail!("{what}: an answer to request {tag}, which was not sent");
            };
            if !write {
                for (i, got) in data.chunks(block_bytes).enumerate() {
                    let l = lba + i as u64;
                    if got != selftest_block(l, pass, block_bytes).as_slice() {
                        bail!("{what}: block {l} does not hold what was written");
                    }
                }
            }
            done += 1;
            bar.inc(n);
        }
        bar.finish_and_clear();
        println!("{what}: {} ok", format_bytes(blocks * block_bytes as u64));
        Ok(())
    }

    pub(crate) fn fail_drive(&self, drive: usize) -> Result<()> {
        let (done, result) = crossbeam_channel::bounded(1);
        self.session
            .thread
            .tx()
            .send(Message::FailDrive { drive, force: false, done })
            .map_err(|_| zapraid_server::Error::EngineGone)?;
        result.recv()?.map(|_| ()).map_err(anyhow::Error::from)
    }

    pub(crate) fn stop(self) -> Result<()> {
        Ok(self.session.stop()?)
    }
}
