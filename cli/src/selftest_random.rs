//! `zapraid selftest --random-writes N`: single-block writes at random LBAs spread over the
//! whole logical space (each LBA once), then a clean stop, a start, and every block read
//! back and checked. With `--l2p-memory` the L2P table is bounded: the run prints the
//! process's resident size after each phase and the table's cache figures, so a huge
//! array (`emu create --preset zn540`) shows the table staying within its budget.

use std::collections::HashSet;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};
use zapraid_server::run::Message;

use crate::selftest_array::{selftest_block, SelftestArray};
use crate::size::format_bytes;
use crate::text::bar;

/// Requests in flight at once.
const RANDOM_QUEUE_DEPTH: usize = 64;
/// The seed of the LBAs drawn: the same run every time.
const RANDOM_SEED: u64 = 0x5e1f_7e57;
/// The pass number written into the blocks' contents.
const RANDOM_PASS: u64 = 7;

/// Draws `count` distinct LBAs below `logical_blocks`, in random order.
fn random_lbas(count: u64, logical_blocks: u64) -> Vec<u64> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(RANDOM_SEED);
    let mut seen = HashSet::with_capacity(count as usize);
    let mut lbas = Vec::with_capacity(count as usize);
    while (lbas.len() as u64) < count {
        let lba = rng.random_range(0..logical_blocks);
        if seen.insert(lba) {
            lbas.push(lba);
        }
    }
    lbas
}

/// The process's resident size now and at its peak, in bytes (Linux /proc).
fn resident_bytes() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kib| kib.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn print_resident(phase: &str) {
    let (now, peak) = resident_bytes();
    println!("{phase}: resident {}, peak {}", format_bytes(now), format_bytes(peak));
}

fn print_l2p(array: &SelftestArray) -> Result<()> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    array.session.thread.tx().send(Message::Status(tx)).map_err(|_| zapraid_server::Error::EngineGone)?;
    let status = rx.recv().context("the engine thread ended")?;
    let l = status.engine.l2p;
    let budget = l.budget_bytes.map_or_else(|| "none (the whole table in memory)".to_string(), format_bytes);
    println!(
        "  L2P table: budget {budget}; {} pages of {} entries, {} cached ({} dirty), {} on the drives; {} in \
         memory; hit rate {:.1}%; {} mapping blocks read, {} written",
        l.pages,
        l.entries_per_page,
        l.cached_pages,
        l.dirty_pages,
        l.pages_on_drives,
        format_bytes(l.memory_bytes),
        l.hit_rate_percent(),
        l.mapping_reads,
        l.mapping_writes
    );
    Ok(())
}

/// Writes (`write`) or reads back every LBA of `lbas`, one block per request.
fn run(array: &SelftestArray, lbas: &[u64], write: bool, what: &str) -> Result<()> {
    let block_bytes = array.session.block_bytes;
    let bar = bar(lbas.len() as u64, what);
    let started = std::time::Instant::now();
    let (mut sent, mut done) = (0usize, 0usize);
    while done < lbas.len() {
        while sent < lbas.len() && sent - done < RANDOM_QUEUE_DEPTH {
            let lba = lbas[sent];
            let request = if write {
                zapraid_engine::Request::Write { lba, data: selftest_block(lba, RANDOM_PASS, block_bytes) }
            } else {
                zapraid_engine::Request::Read { lba, blocks: 1 }
            };
            array.session.send(sent as u64, request)?;
            sent += 1;
        }
        let (tag, result, _) = array.session.recv()?;
        let data = result.with_context(|| format!("{what}: request {tag} failed"))?;
        let Some(&lba) = lbas.get(tag as usize) else { bail!("{what}: an answer to request {tag}, not sent") };
        if !write && data != selftest_block(lba, RANDOM_PASS, block_bytes) {
            bail!("{what}: block {lba} does not hold what was written");
        }
        done += 1;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    println!("{what}: {} blocks in {seconds:.1} s ({:.0} blocks/s)", lbas.len(), lbas.len() as f64 / seconds);
    Ok(())
}

/// The random-write self-test on drives already formatted (`selftest` formats them).
pub fn run_random(drives: &[PathBuf], writes: u64, logical_blocks: u64) -> Result<()> {
    if writes == 0 || writes > logical_blocks / 2 {
        bail!("--random-writes {writes}: give 1 to half the array's {logical_blocks} logical blocks");
    }
    let lbas = random_lbas(writes, logical_blocks);
    println!("{writes} single-block writes at random LBAs over {logical_blocks} logical blocks");
    let array = SelftestArray::start(drives)?;
    run(&array, &lbas, true, "random writes")?;
    print_resident("after the writes");
    print_l2p(&array)?;
    array.stop()?;
    let started = std::time::Instant::now();
    let array = SelftestArray::start(drives)?;
    let start = array.session.status()?.engine.start;
    let from = match start.checkpoint_generation {
        Some(generation) => format!("from checkpoint {generation}"),
        None => "replaying every segment".to_string(),
    };
    println!(
        "start (recovery) took {:.1} s, {from}, {} blocks read",
        started.elapsed().as_secs_f64(),
        start.blocks_read
    );
    print_resident("after the start");
    run(&array, &lbas, false, "read back after stop and start")?;
    print_resident("after the read-back");
    print_l2p(&array)?;
    array.stop()?;
    println!("selftest passed: {writes} random blocks written and verified after a restart");
    Ok(())
}
