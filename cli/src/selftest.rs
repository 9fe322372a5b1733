//! `zapraid selftest`: the engine end to end on drives, without a block device (no ublk
//! needed): format, write a pattern, read it back, stop, start, verify, fail a drive (if
//! the level survives one), read and write degraded, stop, start, verify everything
//! again. It says what it really writes and verifies: `--size` is capped at what the
//! array holds. With several open segments (`hybrid`), small and large requests
//! alternate, so every kind of segment is written, read back and recovered.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use zapraid_engine::Declustering;
use zapraid_server::assemble::{format, FormatOptions};

use crate::array::DEFAULT_GROUP_SIZE;
use crate::hybrid::{chunks_text, OpenSegmentArgs};
use crate::selftest_array::SelftestArray;
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
    /// Format the array with this many engine shards (`format --shards`): each a thread of
    /// its own over its own part of every drive.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=255))]
    shards: u32,
}

/// The drive the self-test fails (any would do; the first is left alone).
const SELFTEST_FAILED_DRIVE: usize = 1;

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
        shards: args.shards,
        declustering: Declustering::CLASSIC,
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
