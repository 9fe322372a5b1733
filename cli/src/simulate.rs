//! `zapraid simulate`: an array of emulated in-memory drives driven by the engine in the
//! deterministic simulator: write data, read it back and verify, fail drives, read
//! degraded and verify. A self-check and a demonstration of the engine. With several
//! open segments (`hybrid`), small and large writes alternate, so both kinds of segment
//! are written.

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use zapraid_engine::{
    ChunkClass, Config, Mode, RaidLevel, Request, Simulator, DEFAULT_STRIPE_TIMEOUT_NS, PAPER_LOOKUP_PS_PER_ENTRY,
};
use zapraid_zns::{Geometry, TimingParams};

use crate::hybrid::{chunks_text, requests, OpenSegmentArgs};
use crate::size::{format_bytes, parse_bytes};

#[derive(Clone, Copy, ValueEnum)]
pub enum Level {
    Raid0,
    Raid1,
    Raid01,
    Raid4,
    Raid5,
    Raid6,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum WriteMode {
    /// Stripe groups written with Zone Append (the paper's design).
    Zapraid,
    /// Every stripe at a fixed offset with Zone Write.
    ZoneWrite,
    /// One group per segment, Zone Append.
    ZoneAppend,
}

#[derive(Args)]
pub struct SimulateArgs {
    #[arg(long, value_enum, default_value = "raid5")]
    level: Level,
    /// Drives in the array.
    #[arg(long, default_value_t = 4)]
    drives: usize,
    #[arg(long, value_enum, default_value = "zapraid")]
    mode: WriteMode,
    /// Stripe group size for --mode zapraid.
    #[arg(long, default_value_t = 256)]
    group_size: u32,
    /// Data to write and verify.
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    size: u64,
    /// Drives to fail before reading back degraded (at most the array's drives; more than
    /// the level survives shows the reads failing).
    #[arg(long, default_value_t = 1)]
    fail: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Then overwrite the first half, cut power in the middle, recover from the drives
    /// alone (with the failed drives still failed) and check every acknowledged write.
    #[arg(long)]
    crash: bool,
    /// Chunk sizes and open segments, as `zapraid format` takes them.
    #[command(flatten)]
    segments: OpenSegmentArgs,
}

/// Blocks per write request (with several open segments, every other one is small).
const REQUEST_BLOCKS: u64 = 32;

/// Drives of the QEMU-like geometry, in memory.
fn geometry() -> Geometry {
    Geometry { zone_append_max_blocks: 32, max_transfer_blocks: 128, ..Geometry::small(64, 16384, 15872) }
}

fn block_pattern(lba: u64, seed: u64, block: usize) -> Vec<u8> {
    let mut state = lba.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ seed | 1;
    (0..block / 8)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()
        })
        .collect()
}

/// The RAID level a command line names, over `drives` drives.
pub fn raid_level(level: Level, drives: usize) -> RaidLevel {
    match level {
        Level::Raid0 => RaidLevel::Raid0 { drives },
        Level::Raid1 => RaidLevel::Raid1 { drives },
        Level::Raid01 => RaidLevel::Raid01 { drives },
        Level::Raid4 => RaidLevel::Raid4 { drives },
        Level::Raid5 => RaidLevel::Raid5 { drives },
        Level::Raid6 => RaidLevel::Raid6 { drives },
    }
}

/// The write mode a command line names.
pub fn write_mode(mode: WriteMode, group_size: u32) -> Mode {
    match mode {
        WriteMode::Zapraid => Mode::ZapRaid { group_size },
        WriteMode::ZoneWrite => Mode::ZoneWriteOnly,
        WriteMode::ZoneAppend => Mode::ZoneAppendOnly,
    }
}

pub fn run(args: SimulateArgs) -> Result<()> {
    let level = raid_level(args.level, args.drives);
    level.validate()?;
    if args.fail > args.drives {
        bail!("--fail {}: the array has only {} drives to fail", args.fail, args.drives);
    }
    let tolerated = level.tolerated_failures();
    let mode = write_mode(args.mode, args.group_size);
    let g = geometry();
    let block = u64::from(g.block_size_bytes);
    let blocks = args.size.div_ceil(block);
    if blocks == 0 {
        bail!("--size must be at least one block");
    }
    let open_segments = args.segments.open_segments(mode)?;
    let chunk_bytes = args.segments.small_chunk_bytes;
    let config = Config {
        level,
        mode,
        chunk_bytes,
        open_segments,
        stripe_timeout_ns: DEFAULT_STRIPE_TIMEOUT_NS,
        logical_blocks: blocks,
        array_uuid: [1; 16],
        lookup_ps_per_entry: PAPER_LOOKUP_PS_PER_ENTRY,
        merge_appends: true,
        declustering: Default::default(),
        l2p: zapraid_engine::L2pConfig::default(),
    };
    let mut sim = Simulator::new(g, config, args.seed, Some(TimingParams::zn540()))?;
    let layout = *sim.engine.layout();
    let plan = sim.engine.plan();
    let stripes = if plan.has_class(ChunkClass::Small) && plan.has_class(ChunkClass::Large) {
        let of = |class| plan.class_layout(class).stripes;
        format!(
            "{} stripes per small-chunk segment, {} per large-chunk one",
            of(ChunkClass::Small),
            of(ChunkClass::Large)
        )
    } else {
        format!("{} stripes per segment", layout.stripes)
    };
    println!(
        "array: {level}, {mode}, {}, {} drives x {} zones of {} (emulated, ZN540 timing); {stripes}",
        chunks_text(chunk_bytes, &open_segments),
        layout.drives(),
        g.zone_count,
        format_bytes(g.zone_capacity_blocks * block),
    );
    println!("{}", sim.engine_core());
    let mut id = 0;
    for (lba, n) in requests(0..blocks, REQUEST_BLOCKS, &open_segments, g.block_size_bytes) {
        let data: Vec<u8> = (lba..lba + n).flat_map(|l| block_pattern(l, args.seed, block as usize)).collect();
        sim.submit(id, Request::Write { lba, data });
        id += 1;
    }
    let written_at = sim.now_ns();
    for r in sim.run_until_idle() {
        if let Err(e) = r.result {
            bail!("write {} failed: {e}", r.id);
        }
    }
    let seconds = (sim.now_ns() - written_at) as f64 / 1e9;
    println!(
        "wrote {} in {id} requests: {:.1} MiB/s in virtual time",
        format_bytes(blocks * block),
        (blocks * block) as f64 / 1048576.0 / seconds
    );
    let verify = |sim: &mut Simulator, what: &str, id: u64| -> Result<usize> {
        sim.submit(id, Request::Read { lba: 0, blocks });
        let response = sim.run_until_response(id).expect("the read is answered");
        let data = match response.result {
            Ok(data) => data,
            Err(e) => {
                println!("{what}: read failed: {e}");
                return Ok(usize::MAX);
            }
        };
        let bad = (0..blocks)
            .filter(|l| {
                data[(*l * block) as usize..((*l + 1) * block) as usize]
                    != block_pattern(*l, args.seed, block as usize)[..]
            })
            .count();
        println!("{what}: read {} back, {bad} blocks differ", format_bytes(blocks * block));
        Ok(bad)
    };
    if verify(&mut sim, "normal read", id)? != 0 {
        bail!("data read back differs from what was written");
    }
    if args.fail > tolerated {
        println!(
            "failing {} drives, more than the {tolerated} {level} survives: the degraded read is expected to fail",
            args.fail
        );
    }
    for drive in 0..args.fail {
        sim.drives[drive].fail();
    }
    let bad = verify(&mut sim, &format!("degraded read, {} failed drive(s)", args.fail), id + 1)?;
    match (bad, args.fail <= tolerated) {
        (0, _) => println!("every block verified"),
        (usize::MAX, false) => {
            println!("as expected: {} failures exceed the {tolerated} the level tolerates", args.fail)
        }
        _ => bail!("degraded read returned wrong data"),
    }
    if args.crash {
        if args.fail <= tolerated {
            crash_and_recover(sim, g, config, blocks, block, id + 2, args.seed)?;
        } else {
            println!("no crash and recovery: the array has lost more drives than it survives");
        }
    }
    Ok(())
}

/// Overwrites the first half with new contents, cuts power once half of those writes are
/// acknowledged, recovers, and checks: acknowledged blocks hold the new contents, the
/// others hold the old or the new, nothing else.
fn crash_and_recover(
    mut sim: Simulator,
    g: Geometry,
    config: Config,
    blocks: u64,
    block: u64,
    first_id: u64,
    seed: u64,
) -> Result<()> {
    const REQUEST_BLOCKS: u64 = 8;
    let new_seed = seed.wrapping_add(1);
    let half = (blocks / 2).max(1);
    let mut requests = Vec::new();
    for (i, lba) in (0..half).step_by(REQUEST_BLOCKS as usize).enumerate() {
        let n = REQUEST_BLOCKS.min(half - lba);
        let data: Vec<u8> = (lba..lba + n).flat_map(|l| block_pattern(l, new_seed, block as usize)).collect();
        sim.submit(first_id + i as u64, Request::Write { lba, data });
        requests.push((lba, n));
    }
    let mut acked = vec![false; half as usize];
    let mut acked_requests = 0;
    while acked_requests < requests.len() / 2 && sim.step() {
        for r in sim.take_responses() {
            if r.result.is_ok() {
                let (lba, n) = requests[(r.id - first_id) as usize];
                (lba..lba + n).for_each(|l| acked[l as usize] = true);
                acked_requests += 1;
            }
        }
    }
    let drives = sim.power_cut()?;
    println!("power cut with {acked_requests} of {} overwrite requests acknowledged", requests.len());
    let mut sim = Simulator::recover(g, config, drives)?;
    println!("recovered from the drives alone ({} failed drive(s) still failed)", sim.engine.failed_drives());
    let id = first_id + requests.len() as u64;
    sim.submit(id, Request::Read { lba: 0, blocks });
    let data = sim.run_until_response(id).expect("the read is answered").result?;
    let (mut new, mut old) = (0, 0);
    for l in 0..blocks {
        let got = &data[(l * block) as usize..((l + 1) * block) as usize];
        let is_new = got == block_pattern(l, new_seed, block as usize).as_slice();
        let is_old = got == block_pattern(l, seed, block as usize).as_slice();
        let acked_new = l < half && acked[l as usize];
        let allowed = if acked_new { is_new } else { is_new || is_old };
        if !allowed {
            let what = if acked_new { "an old value for an acknowledged write" } else { "garbage" };
            bail!("after recovery, block {l} holds {what}");
        }
        new += usize::from(is_new);
        old += usize::from(is_old && !is_new);
    }
    let acked_blocks = acked.iter().filter(|a| **a).count();
    println!(
        "after recovery: all {acked_blocks} acknowledged overwritten blocks hold their new contents; \
         {new} blocks new, {old} old, none anything else"
    );
    Ok(())
}
