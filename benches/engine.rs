//! The engine's write path on one core: 4 KiB random writes at queue depth 64 through the
//! whole engine (stripe assembly, parity, block metadata, L2P, compact stripe table, group
//! scheduling), (3+1)-RAID-5 and (4+2)-RAID-6, G = 256, two ways: the engine alone over
//! instant drives that keep no data (`zapraid bench cpu`'s write run, `zapraid_experiments::cpu::writes`:
//! the engine thread's time only, the frontend's CRC32C and the drives' work timed apart
//! and left out), and the engine in the deterministic simulator over in-memory emulated drives that
//! complete at once (a fresh array per timed batch keeps the memory bounded; building it
//! is not timed).

mod common;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use zapraid::engine::{
    Config, L2pConfig, Mode, OpenSegments, RaidLevel, Request, RequestId, Simulator, DEFAULT_STRIPE_TIMEOUT_NS,
    PAPER_LOOKUP_PS_PER_ENTRY,
};
use zapraid::zns::Geometry;
use zapraid_experiments::cpu;

use common::BLOCK_BYTES;

const LOGICAL_BLOCKS: u64 = 1 << 16;
/// Zones per drive: enough for the writes of a batch without garbage collection.
const ZONES: u32 = 64;
const GROUP_SIZE: u32 = 256;
const QUEUE_DEPTH: u64 = 64;
/// Writes per timed batch (64 MiB).
const WRITES: u64 = 16_384;
const SEED: u64 = 1;
const LEVELS: [RaidLevel; 2] = [RaidLevel::Raid5 { drives: 4 }, RaidLevel::Raid6 { drives: 6 }];
/// Samples per level: each is a whole batch of writes.
const SAMPLES: usize = 10;

fn array(level: RaidLevel) -> Simulator {
    let config = Config {
        level,
        mode: Mode::ZapRaid { group_size: GROUP_SIZE },
        chunk_bytes: BLOCK_BYTES as u64,
        open_segments: OpenSegments::SINGLE,
        stripe_timeout_ns: DEFAULT_STRIPE_TIMEOUT_NS,
        logical_blocks: LOGICAL_BLOCKS,
        lookup_ps_per_entry: PAPER_LOOKUP_PS_PER_ENTRY,
        merge_appends: true,
        declustering: Default::default(),
        l2p: L2pConfig::default(),
        array_uuid: [0x2a; 16],
    };
    Simulator::new(Geometry { zone_count: ZONES, ..Geometry::zn540() }, config, SEED, None).unwrap()
}

/// Keeps `QUEUE_DEPTH` random 4 KiB writes in flight until `WRITES` have completed.
fn random_writes(sim: &mut Simulator, lbas: &[u64], data: &[u8]) {
    let mut submitted: RequestId = 0;
    let mut completed = 0;
    let submit = |sim: &mut Simulator, id: RequestId| {
        sim.submit(id, Request::Write { lba: lbas[id as usize], data: data.to_vec() });
    };
    while submitted < QUEUE_DEPTH {
        submit(sim, submitted);
        submitted += 1;
    }
    while completed < WRITES {
        assert!(sim.step(), "the simulation stalled with writes in flight");
        for response in sim.take_responses() {
            response.result.unwrap();
            completed += 1;
            if submitted < WRITES {
                submit(sim, submitted);
                submitted += 1;
            }
        }
    }
}

fn engine(c: &mut Criterion) {
    let lbas = common::addresses(WRITES as usize, LOGICAL_BLOCKS);
    let data = vec![0x5a; BLOCK_BYTES];
    let mut group = c.benchmark_group("engine, 4 KiB random writes, QD 64, G = 256");
    group.sample_size(SAMPLES).throughput(Throughput::Elements(WRITES));
    for level in LEVELS {
        let label = level.to_string();
        group.bench_function(BenchmarkId::new("engine alone", &label), |b| {
            b.iter_custom(|iterations| {
                (0..iterations)
                    .map(|_| {
                        let figure = cpu::writes(level, WRITES, SEED, &|| None).unwrap();
                        Duration::from_secs_f64(WRITES as f64 / figure.requests_per_s)
                    })
                    .sum()
            })
        });
        group.bench_function(BenchmarkId::new("simulator, memory drives", &label), |b| {
            b.iter_batched_ref(|| array(level), |sim| random_writes(sim, &lbas, &data), BatchSize::PerIteration)
        });
    }
    group.finish();
}

criterion_group! { name = benches; config = common::quick(); targets = engine }
criterion_main!(benches);
