//! `zapraid selftest`: the engine end to end on drives, without a block device (no ublk
//! needed): format, write a pattern, read it back, stop, start, verify, fail a drive (if
//! the level survives one), read and write degraded, stop, start, verify everything
//! again. It says what it really writes and verifies: `--size` is capped at what the
//! array holds. With several open segments (`hybrid`), small and large requests
//! alternate, so every kind of segment is written, read back and recovered.

use std::ops::Range;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use zapraid_server::assemble::format::{format, FormatOptions};
use zapraid_server::run::thread::Message;
use zapraid_server::run::session::Session;

use crate::array::{bar, DEFAULT_GROUP_SIZE};
use crate::hybrid::{chunks_text, requests, OpenSegmentArgs};
use crate::simulate::{raid_level, write_mode, Level, WriteMode};
use crate::size::{format_bytes, parse_bytes};

#[derive(Args)]
pub struct SelftestArgs {
    /// Data to write and verify (at most what the array holds: less is written if the
    /// drives are small, and said).
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    size: u64,
    /// RAID level.
    #[arg(long, value_enum, default_value = "raid5")]
    level: Level,
    /// Confirm that the drives' contents may be erased (they are formatted).
    #[arg(long)]
    erase: bool,
    /// Drives (NVMe /dev/ngXnY or emulated drive files).
    #[arg(required = true)]
    drives: Vec<PathBuf>,
    /// Chunk sizes and open segments of the array formatted, as `zapraid format` takes
    /// them.
    #[command(flatten)]
    segments: OpenSegmentArgs,
    /// Instead of the pattern of --size: this many single-block writes at random LBAs
    /// over the whole array, a stop and a start, and every one read back; prints the
    /// resident size (with --l2p-memory, the bounded L2P table's figures).
    #[arg(long, value_name = "N")]
    random_writes: Option<u64>,
    /// The L2P table's memory budget of the array formatted (`format --l2p-memory`).
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    l2p_memory: Option<u64>,
}

/// Requests in flight at once while the self-test writes or reads.
const SELFTEST_QUEUE_DEPTH: u64 = 32;
/// Blocks per self-test request.
const SELFTEST_REQUEST_BLOCKS: u64 = 64;
/// The drive the self-test fails (any would do; the first is left alone).
const SELFTEST_FAILED_DRIVE: usize = 1;

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
        Ok(SelftestArray { session: Session::start(zapraid_server::assemble::format::assemble(drives)?)? })
    }

    /// Writes (`write`) or reads and checks the blocks `lbas` as pass `pass` wrote them.
    fn run(&self, lbas: Range<u64>, pass: u64, write: bool, what: &str) -> Result<()> {
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

    fn fail_drive(&self, drive: usize) -> Result<()> {
        let (done, result) = crossbeam_channel::bounded(1);
        self.session
            .thread
            .tx
            .send(Message::FailDrive { drive, force: false, done })
            .map_err(|_| zapraid_server::Error::EngineGone)?;
        result.recv()?.map(|_| ()).map_err(anyhow::Error::from)
    }

    pub(crate) fn stop(self) -> Result<()> {
        Ok(self.session.stop()?)
    }
}

/// The engine end to end on drives, without a block device: format, write, read back,
/// stop, start, verify, fail a drive, verify degraded, stop, start, verify again.
pub fn run_selftest(args: SelftestArgs) -> Result<()> {
    if !args.erase {
        bail!("selftest formats the drives and erases what they hold: add --erase to confirm");
    }
    let level = raid_level(args.level, args.drives.len());
    let mode = write_mode(WriteMode::Zapraid, DEFAULT_GROUP_SIZE);
    let options = FormatOptions {
        level,
        mode,
        chunk_bytes: args.segments.small_chunk_bytes,
        open_segments: args.segments.open_segments(mode)?,
        name: "selftest".into(),
        force: true,
        l2p_budget_bytes: args.l2p_memory,
    };
    let formatted = format(&args.drives, &options, |_, _| {})?;
    if let Some(writes) = args.random_writes {
        println!("formatted {level} over {} drives", args.drives.len());
        return crate::selftest_random::run_random(&args.drives, writes, formatted.logical_blocks);
    }
    let block_bytes = u64::from(formatted.block_size_bytes);
    let blocks = (args.size / block_bytes).min(formatted.logical_blocks);
    if blocks == 0 {
        bail!("--size is smaller than one block ({})", format_bytes(block_bytes));
    }
    let size = format_bytes(blocks * block_bytes);
    let capped = if blocks == formatted.logical_blocks && args.size / block_bytes > blocks {
        format!(" (all the array holds: --size {} is more)", format_bytes(args.size))
    } else {
        String::new()
    };
    // Said only for several open segments: the default array reads as it always did.
    let open = if options.open_segments.is_hybrid() {
        format!(", {}", chunks_text(options.chunk_bytes, &options.open_segments))
    } else {
        String::new()
    };
    println!("formatted {level} over {} drives{open}; writing {size}{capped}", args.drives.len());
    let all = 0..blocks;
    let array = SelftestArray::start(&args.drives)?;
    array.run(all.clone(), 1, true, "write")?;
    array.run(all.clone(), 1, false, "read back")?;
    array.stop()?;
    let array = SelftestArray::start(&args.drives)?;
    array.run(all.clone(), 1, false, "verify after stop and start")?;
    // With a drive failed, the first half is written again (pass 2) degraded.
    let half = blocks / 2;
    let degraded = level.tolerated_failures() > 0;
    if degraded {
        array.fail_drive(SELFTEST_FAILED_DRIVE)?;
        println!("drive {SELFTEST_FAILED_DRIVE} ({}) marked failed", args.drives[SELFTEST_FAILED_DRIVE].display());
        array.run(all.clone(), 1, false, "degraded read")?;
        array.run(0..half, 2, true, "degraded write of the first half")?;
        array.run(0..half, 2, false, "degraded read of the first half")?;
    } else {
        println!("{level} survives no failed drive: no drive is failed");
    }
    array.stop()?;
    let array = SelftestArray::start(&args.drives)?;
    if degraded {
        let what = "verify after restart (failed drive recorded)";
        array.run(0..half, 2, false, &format!("{what}, first half (written degraded)"))?;
        array.run(half..blocks, 1, false, &format!("{what}, second half"))?;
    } else {
        array.run(all, 1, false, "verify after a second stop and start")?;
    }
    array.stop()?;
    println!("selftest passed: {size} written and verified");
    Ok(())
}
