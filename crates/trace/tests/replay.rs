//! Replay against the simulator: closed and open loop, writes only, mapping, and
//! determinism (the same trace and seed give the same report).

use std::path::Path;

use zapraid_engine::{Config, Mode, OpenSegments, RaidLevel, Simulator, DEFAULT_STRIPE_TIMEOUT_NS};
use zapraid_trace::replay::{replay, MapMode, Pacing, ReplayConfig, Report};
use zapraid_trace::{ReadOptions, TraceReader};
use zapraid_zns::{Geometry, TimingParams};

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/alibaba2020_sample.csv");

fn simulator() -> Simulator {
    simulator_of(Geometry::small(16, 4096, 4096))
}

fn simulator_of(geometry: Geometry) -> Simulator {
    let mut config = Config {
        level: RaidLevel::Raid5 { drives: 4 },
        mode: Mode::ZapRaid { group_size: 256 },
        chunk_bytes: 4096,
        open_segments: OpenSegments::SINGLE,
        stripe_timeout_ns: DEFAULT_STRIPE_TIMEOUT_NS,
        logical_blocks: 1,
        array_uuid: [7; 16],
        lookup_ps_per_entry: 0,
        merge_appends: true,
        declustering: Default::default(),
        l2p: zapraid_engine::L2pConfig::default(),
    };
    let capacity =
        zapraid_engine::Engine::format(geometry, config).unwrap().plan().capacity_blocks(geometry.zone_count);
    config.logical_blocks = capacity;
    Simulator::new(geometry, config, 1, Some(TimingParams::zn540())).unwrap()
}

fn run(config: &ReplayConfig, text: Option<&str>) -> Report {
    let mut sim = simulator();
    let reader = match text {
        Some(text) => TraceReader::from_reader(std::io::Cursor::new(text.to_string()), ReadOptions::default()),
        None => TraceReader::open(Path::new(SAMPLE), ReadOptions::default()),
    }
    .unwrap();
    replay(&mut sim, reader, config, &mut |_| {}).unwrap()
}

const CLOSED: ReplayConfig =
    ReplayConfig { pacing: Pacing::Closed { queue_depth: 4 }, writes_only: false, map: MapMode::Wrap, limit: None };

#[test]
fn replays_the_sample_closed_loop() {
    let report = run(&CLOSED, None);
    assert_eq!((report.requests, report.reads, report.writes), (13, 7, 6));
    assert_eq!(report.latency.count, 13);
    assert!(report.elapsed_ns > 0 && report.mib_per_s() > 0.0);
    // Offsets of hundreds of GiB land in an array of a few hundred MiB.
    assert!(report.map.wrapped > 0, "{:?}", report.map);
    assert_eq!(report.timeline.iter().map(|b| b.requests()).sum::<u64>(), 13);
    assert_eq!(run(&CLOSED, None), report, "same trace, same seed: same figures");
}

#[test]
fn open_loop_follows_the_trace_clock() {
    let open = ReplayConfig { pacing: Pacing::Open { speed: 1.0, max_in_flight: 64 }, ..CLOSED };
    let report = run(&open, None);
    assert_eq!(report.requests, 13);
    // The sample spans 144.36 s of trace time; the replay lasts as long, plus the last
    // request's latency.
    let span_s = (1_577_808_144_361_031u64 - 1_577_808_000_000_046) as f64 / 1e6;
    assert!(report.elapsed_s() >= span_s && report.elapsed_s() < span_s + 0.1, "{}", report.elapsed_s());
    let faster = run(&ReplayConfig { pacing: Pacing::Open { speed: 100.0, max_in_flight: 64 }, ..CLOSED }, None);
    assert!(faster.elapsed_s() < span_s / 99.0, "{}", faster.elapsed_s());
    assert_eq!(run(&open, None), report);
}

#[test]
fn writes_only_drops_reads_and_unaligned_requests_are_widened() {
    let report = run(&ReplayConfig { writes_only: true, ..CLOSED }, None);
    assert_eq!((report.requests, report.reads, report.reads_dropped), (6, 0, 7));
    let text = "0,W,100,10,1\n0,W,4096,4096,2\n0,R,0,4096,3\n";
    let report = run(&CLOSED, Some(text));
    assert_eq!(report.map.widened, 1);
    assert_eq!(report.write_bytes, 2 * 4096);
    assert_eq!(report.gc.expect("the simulator shows GC").user_blocks_written, 2);
}

#[test]
fn scale_maps_the_span_onto_the_array() {
    let span = zapraid_trace::address_span_bytes(Path::new(SAMPLE), ReadOptions::default()).unwrap();
    assert_eq!(span, 350_868_463_616 + 8192);
    let report = run(&ReplayConfig { map: MapMode::Scale { span_bytes: span }, ..CLOSED }, None);
    assert_eq!(report.map.wrapped, 0);
    assert_eq!(report.requests, 13);
}

#[test]
fn a_read_only_trace_with_writes_only_is_an_error() {
    let mut sim = simulator();
    let reader =
        TraceReader::from_reader(std::io::Cursor::new("0,R,0,4096,1\n".to_string()), ReadOptions::default()).unwrap();
    let error = replay(&mut sim, reader, &ReplayConfig { writes_only: true, ..CLOSED }, &mut |_| {}).unwrap_err();
    assert!(error.to_string().contains("only reads"), "{error}");
}

/// Random overwrites of a small array: garbage collection runs, and its write
/// amplification is counted.
#[test]
fn overwrites_show_garbage_collection() {
    let mut sim = simulator_of(Geometry::small(16, 1024, 1024));
    let blocks = sim.engine.logical_blocks();
    let mut text = String::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..(3 * blocks / 4) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        text += &format!("0,W,{},16384,{i}\n", (x % (blocks / 4)) * 16384);
    }
    let reader = TraceReader::from_reader(std::io::Cursor::new(text), ReadOptions::default()).unwrap();
    let report =
        replay(&mut sim, reader, &ReplayConfig { pacing: Pacing::Closed { queue_depth: 32 }, ..CLOSED }, &mut |_| {})
            .unwrap();
    let gc = report.gc.expect("the simulator shows garbage collection");
    assert!(gc.segments_reclaimed > 0, "{gc:?}");
    assert!(gc.write_amplification > 1.0, "{gc:?}");
}

/// A trace that would run past what the virtual clock holds at the speed asked is an
/// error, not an overflow.
#[test]
fn a_speed_too_slow_for_the_clock_is_an_error() {
    let mut sim = simulator();
    let text = "0,W,0,4096,1\n0,W,0,4096,18000000000000000\n".to_string();
    let reader = TraceReader::from_reader(std::io::Cursor::new(text), ReadOptions::default()).unwrap();
    let slow = ReplayConfig { pacing: Pacing::Open { speed: 0.001, max_in_flight: 4 }, ..CLOSED };
    let error = replay(&mut sim, reader, &slow, &mut |_| {}).unwrap_err();
    assert!(error.to_string().contains("raise --speed"), "{error}");
}
