//! What the checkpoint test binaries share: a small array that keeps a checkpoint, with a
//! budget of a few pages, written at random and checked against a model of what each LBA
//! holds.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zapraid_engine::format::CheckpointImage;
use zapraid_engine::{Config, L2pConfig, Mode, RaidLevel, Request, Simulator};

use crate::common;
use crate::common::BLOCK;

pub const LOGICAL_BLOCKS: u64 = 2048;
pub const PAGE_ENTRIES: u64 = 16;
pub const BUDGET_PAGES: u64 = 4;
pub const ZONES: u32 = 48;

pub fn geometry() -> zapraid_zns::Geometry {
    common::geometry(ZONES, 8, 10)
}

pub fn config(level: RaidLevel, mode: Mode) -> Config {
    let base = common::config(level, mode, 1, LOGICAL_BLOCKS);
    let l2p = L2pConfig {
        budget_bytes: Some(BUDGET_PAGES * BLOCK as u64),
        page_entries: Some(PAGE_ENTRIES),
        checkpoint: true,
    };
    Config { l2p, ..base }
}

/// A new array of `level` and `mode`: its config, a random source, an empty model of what
/// it holds, and its simulator, all from `seed`.
pub fn fresh(level: RaidLevel, mode: Mode, seed: u64) -> (Config, ChaCha8Rng, HashMap<u64, Vec<u8>>, Simulator) {
    let config = config(level, mode);
    let sim = Simulator::new(geometry(), config, seed, None).unwrap();
    (config, ChaCha8Rng::seed_from_u64(seed), HashMap::new(), sim)
}

/// Request `i` of round `round`: a write of a random block or, every 37th with
/// `discards`, a discard of one; `model` records what the LBA then holds.
pub fn random_request(
    model: &mut HashMap<u64, Vec<u8>>,
    rng: &mut ChaCha8Rng,
    round: u64,
    i: u64,
    discards: bool,
) -> Request {
    let lba = rng.random_range(0..LOGICAL_BLOCKS);
    if discards && i % 37 == 36 {
        model.remove(&lba);
        return Request::Discard { lba, blocks: 1 };
    }
    let data = common::named_block(lba, round * 100_000 + i);
    model.insert(lba, data.clone());
    Request::Write { lba, data }
}

/// Writes `count` random blocks (batches of concurrent writes), some discards, and
/// records what each LBA holds.
pub fn write_random(
    sim: &mut Simulator,
    model: &mut HashMap<u64, Vec<u8>>,
    rng: &mut ChaCha8Rng,
    count: u64,
    round: u64,
) {
    write_random_as(sim, model, rng, (count, round), Pace::Batches);
}

/// How random writes are run.
pub enum Pace {
    /// Batches of 8 concurrent requests, some discards, each batch run until idle.
    Batches,
    /// Writes one at a time, each run only until it is answered: work waiting for a timer
    /// (a paced rebuild) does not go on meanwhile, as runs until idle would let it.
    OneAtATime,
}

/// Writes `count` random blocks of round `round` as `pace` says, and records what each
/// LBA holds.
pub fn write_random_as(
    sim: &mut Simulator,
    model: &mut HashMap<u64, Vec<u8>>,
    rng: &mut ChaCha8Rng,
    (count, round): (u64, u64),
    pace: Pace,
) {
    for (id, i) in (round * 1_000_000..).zip(0..count) {
        match pace {
            Pace::Batches => {
                sim.submit(id, random_request(model, rng, round, i, true));
                if i % 8 == 7 {
                    for r in sim.run_until_idle() {
                        r.result.expect("a write or discard failed");
                    }
                }
            }
            Pace::OneAtATime => {
                sim.submit(id, random_request(model, rng, round, i, false));
                let response = sim.run_until_response(id).expect("the write is answered");
                response.result.expect("a write failed");
            }
        }
    }
    if matches!(pace, Pace::Batches) {
        for r in sim.run_until_idle() {
            r.result.expect("a write or discard failed");
        }
    }
}

pub fn check_reads(sim: &mut Simulator, model: &HashMap<u64, Vec<u8>>, what: &str) {
    let id = u64::MAX - 1;
    sim.submit(id, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
    let got = sim.run_until_response(id).expect("the read is answered").result;
    let got = got.unwrap_or_else(|e| panic!("{what}: the read failed: {e}"));
    for lba in 0..LOGICAL_BLOCKS {
        let block = &got[lba as usize * BLOCK..][..BLOCK];
        match model.get(&lba) {
            Some(data) => assert!(block == &data[..], "{what}: LBA {lba} does not read back"),
            None => assert!(block.iter().all(|b| *b == 0), "{what}: discarded or unwritten LBA {lba} reads data"),
        }
    }
}

/// Stops `sim` and takes the checkpoint the stop leaves, as the next start reads it back
/// from its copies (through their bytes; an incremental one resolved from its base).
pub fn stop_and_checkpoint(mut sim: Simulator) -> (Vec<zapraid_zns::EmulatedDrive>, CheckpointImage) {
    sim.stop();
    let image = sim.stop_checkpoint().expect("a stopped engine that keeps one has a checkpoint");
    (sim.power_cut().unwrap(), image)
}

pub fn schemes() -> [(RaidLevel, Mode); 3] {
    [
        (RaidLevel::Raid5 { drives: 4 }, Mode::ZoneWriteOnly),
        (RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 }),
        (RaidLevel::Raid6 { drives: 6 }, Mode::ZapRaid { group_size: 4 }),
    ]
}

/// Every written block reads back. Discards are not durable across a crash (a replay finds
/// the old copy), so only the written blocks are compared, and discarded ones read as zeros
/// or old data.
pub fn check_written(sim: &mut Simulator, model: &HashMap<u64, Vec<u8>>, what: &str) {
    let id = u64::MAX - 2;
    sim.submit(id, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
    let got = sim.run_until_response(id).unwrap().result.unwrap();
    for (lba, data) in model {
        assert!(got[*lba as usize * BLOCK..][..BLOCK] == data[..], "{what}: LBA {lba} lost");
    }
}
