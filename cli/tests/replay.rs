//! `zapraid replay`: every trace format replays against the simulator in closed and open
//! loop; bad lines are named by number; an empty or ambiguous trace is an error; the same
//! trace twice gives the same figures; a 2,000,000-line gzipped Alibaba trace streams
//! through in bounded memory; the prefill leaves no read of a block never written;
//! `--utilization` makes garbage collection run.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Output;

use common::text;
use common::traces::{one_of_each_format, write, PACINGS, SAMPLE};
use serde_json::Value;

/// A small array so that each replay takes well under a second.
const SMALL_ARRAY: [&str; 2] = ["--zones", "8"];

fn zapraid(args: &[&str]) -> Output {
    let run_dir = tempfile::tempdir().unwrap();
    common::zapraid_in(run_dir.path(), args)
}

fn replay(trace: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["replay", trace.to_str().unwrap()];
    args.extend_from_slice(&SMALL_ARRAY);
    args.extend_from_slice(extra);
    zapraid(&args)
}

fn replay_json(trace: &Path, extra: &[&str]) -> Value {
    let mut extra = extra.to_vec();
    extra.push("--json");
    let out = replay(trace, &extra);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
}

#[test]
fn every_format_replays_in_closed_and_open_loop() {
    let dir = tempfile::tempdir().unwrap();
    let traces = one_of_each_format(dir.path());
    for (path, format, requests) in traces {
        for pacing in PACINGS {
            let report = replay_json(&path, pacing);
            assert_eq!(report["trace"]["format"], format, "{path:?} {pacing:?}");
            assert_eq!(report["requests"], requests, "{path:?} {pacing:?}: {report}");
            assert_eq!(report["target"], "simulator");
            assert!(report["latency"]["p99_9_us"].as_f64().is_some());
        }
        let named = replay_json(&path, &["--format", format]);
        assert_eq!(named["requests"], requests);
    }
    let out = replay(Path::new(SAMPLE), &["--writes-only", "--timeline"]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    for wanted in ["6 writes", "7 reads left out", "p99.9 us", "write amplification", "timeline", "peak resident size"]
    {
        assert!(shown.contains(wanted), "{wanted}: {shown}");
    }
}

#[test]
fn a_bad_line_is_named_or_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let good = "0,W,4096,4096,1577808000000046\n";
    let path = write(dir.path(), "bad.csv", &format!("{good}{good}0,W,4096,four,1577808000000050\n{good}"));
    let out = replay(&path, &["--format", "alibaba"]);
    let shown = text(&out);
    assert!(!out.status.success(), "{shown}");
    assert!(shown.contains("line 3: length 'four' is not a whole number"), "{shown}");
    assert!(shown.contains("0,W,4096,four,1577808000000050"), "{shown}");
    let report = replay_json(&path, &["--format", "alibaba", "--skip-bad"]);
    assert_eq!(report["trace"]["bad_lines_skipped"], 1);
    assert_eq!(report["requests"], 3);
    let wrong_fields = write(dir.path(), "fields.csv", &format!("{good}0,W,4096\n"));
    let shown = text(&replay(&wrong_fields, &["--format", "alibaba"]));
    assert!(shown.contains("line 2: expected 5 comma-separated fields"), "{shown}");
    let opcode = write(dir.path(), "opcode.csv", &format!("{good}0,D,4096,4096,1\n"));
    let shown = text(&replay(&opcode, &["--format", "alibaba"]));
    assert!(shown.contains("line 2: unknown opcode 'D'"), "{shown}");
}

#[test]
fn empty_and_ambiguous_traces_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in [("empty.csv", ""), ("header-only.log", "fio version 3 iolog\n0 f add\n")] {
        let out = replay(&write(dir.path(), name, content), &[]);
        let shown = text(&out);
        assert!(!out.status.success() && shown.contains("no requests to replay"), "{name}: {shown}");
    }
    let mixed = write(dir.path(), "mixed.csv", "0,R,126703661056,4096,1577808000000046\n1538323200,2048,16,1,1063\n");
    let shown = text(&replay(&mixed, &[]));
    assert!(shown.contains("cannot tell the trace's format") && shown.contains("--format"), "{shown}");
    let shown = text(&replay(Path::new(SAMPLE), &["--volume", "424242"]));
    assert!(shown.contains("no requests to replay") && shown.contains("13 requests of other volumes"), "{shown}");
}

#[test]
fn the_prefill_leaves_no_read_of_a_block_never_written() {
    let prefilled = replay_json(Path::new(SAMPLE), &[]);
    assert_eq!(prefilled["reads"], 7, "{prefilled}");
    assert_eq!(prefilled["reads_of_unwritten_blocks"], 0, "{prefilled}");
    let blocks = prefilled["prefill"]["blocks"].as_u64().unwrap_or(0);
    assert!(blocks > 0, "{prefilled}");
    assert_eq!(prefilled["prefill"]["bytes"], blocks * 4096);
    assert_eq!(prefilled["prefill"]["counted_in_figures"], false);
    // Read from the drives, not from the mapping table in no time.
    let read_p50_us = prefilled["read_latency"]["p50_us"].as_f64().unwrap();
    assert!(read_p50_us > 10.0, "reads after the prefill: {prefilled}");
    let shown = text(&replay(Path::new(SAMPLE), &[]));
    assert!(shown.contains(&format!("prefill: {blocks} blocks")) && shown.contains("not counted"), "{shown}");
    assert!(shown.contains("reads of blocks never written: 0"), "{shown}");
    let empty = replay_json(Path::new(SAMPLE), &["--no-prefill"]);
    assert!(empty["prefill"].is_null(), "{empty}");
    assert!(empty["reads_of_unwritten_blocks"].as_u64().unwrap() > 0, "{empty}");
    // The prefill is not in the figures: the same requests, in as many bytes.
    for field in ["requests", "reads", "writes", "read_bytes", "write_bytes"] {
        assert_eq!(prefilled[field], empty[field], "{field}");
    }
}

/// Writes an Alibaba trace of `writes` 4 KiB writes (and a read every fourth line) at
/// pseudo-random places among `blocks` blocks far apart in the trace's addresses: each
/// block is written several times over.
fn overwriting_trace(path: &Path, blocks: u64, writes: u64) {
    let mut text = String::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..writes {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let op = if i % 4 == 3 { 'R' } else { 'W' };
        let offset = (1 << 40) + (x % blocks) * 4096;
        text += &format!("3,{op},{offset},4096,{}\n", 1_577_808_000_000_000 + i * 10);
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn utilization_makes_garbage_collection_run() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("overwrites.csv");
    overwriting_trace(&trace, 2_000, 10_000);
    let full = zapraid(&["replay", trace.to_str().unwrap(), "--utilization", "0.8", "--json"]);
    assert!(full.status.success(), "{}", text(&full));
    let full: Value = serde_json::from_slice(&full.stdout).unwrap();
    let footprint = full["utilization"]["footprint_blocks"].as_u64().unwrap();
    assert!((1_900..=2_000).contains(&footprint), "{full}");
    let utilization = full["utilization"]["utilization"].as_f64().unwrap();
    assert!((utilization - 0.8).abs() < 0.001, "{full}");
    assert_eq!(full["map"]["mode"], "compact");
    assert_eq!(full["prefill"]["blocks"], footprint, "the whole footprint is prefilled: {full}");
    assert!(full["gc"]["segments_reclaimed"].as_u64().unwrap() > 0, "{full}");
    assert!(full["gc"]["blocks_relocated"].as_u64().unwrap() > 0, "{full}");
    assert!(full["gc"]["write_amplification"].as_f64().unwrap() > 1.0, "{full}");
    // The same trace on the default array (16 zones of 62 MiB) never needs to collect.
    let roomy = replay_json(&trace, &[]);
    assert_eq!(roomy["gc"]["blocks_relocated"], 0, "{roomy}");
    assert_eq!(roomy["gc"]["write_amplification"], 1.0, "{roomy}");
    let shown = text(&zapraid(&["replay", trace.to_str().unwrap(), "--utilization", "0.8"]));
    assert!(shown.contains("fill 80.0% of the array's") && shown.contains("sized for --utilization"), "{shown}");
    for (extra, refusal) in [
        (&["--utilization", "1.5"][..], "above 0 and at most 1"),
        (&["--utilization", "0.8", "--map", "wrap"][..], "needs --map compact"),
        (&["--map", "compact"][..], ""),
    ] {
        let out = replay(&trace, extra);
        if refusal.is_empty() {
            assert!(out.status.success(), "{extra:?}: {}", text(&out));
        } else {
            assert!(!out.status.success() && text(&out).contains(refusal), "{extra:?}: {}", text(&out));
        }
    }
}

/// The figures, without what depends on the machine (wall time, resident size).
fn figures(mut report: Value) -> Value {
    let object = report.as_object_mut().unwrap();
    object.remove("wall_s");
    object.remove("peak_resident_bytes");
    report
}

#[test]
fn the_same_trace_twice_gives_the_same_figures() {
    for pacing in [&["--queue-depth", "8"][..], &["--speed", "50"][..]] {
        let first = figures(replay_json(Path::new(SAMPLE), pacing));
        let second = figures(replay_json(Path::new(SAMPLE), pacing));
        assert_eq!(first, second, "{pacing:?}");
    }
}

/// Lines of the generated Alibaba trace, and the volumes they spread over: the one
/// replayed gets a hundredth of them.
const GENERATED_LINES: u64 = 2_000_000;
const GENERATED_VOLUMES: u64 = 100;

/// Writes `lines` Alibaba lines, gzipped: a deterministic mix of reads and writes of 4 to
/// 32 KiB, some unaligned, over `GENERATED_VOLUMES` devices, 10 us apart.
fn generate_alibaba_gz(path: &Path, lines: u64) {
    // Lines are buffered before the compressor: it is slow at many small writes.
    let file = std::fs::File::create(path).unwrap();
    let mut gz = std::io::BufWriter::new(flate2::write::GzEncoder::new(file, flate2::Compression::fast()));
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..lines {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let op = if x.is_multiple_of(3) { 'R' } else { 'W' };
        let length = 4096 * (1 + (x >> 8) % 8);
        let offset = ((x >> 16) % (1 << 24)) * 4096 + if x.is_multiple_of(97) { 512 } else { 0 };
        writeln!(gz, "{},{op},{offset},{length},{}", i % GENERATED_VOLUMES, 1_577_808_000_000_000 + i * 10).unwrap();
    }
    gz.into_inner().map_err(|e| e.into_error()).unwrap().finish().unwrap().flush().unwrap();
}

#[test]
fn a_two_million_line_gzipped_trace_streams_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("alibaba-2m.csv.gz");
    generate_alibaba_gz(&path, GENERATED_LINES);
    // Without a prefill: it would add the footprint's data (some 350 MiB here) to what the
    // simulated drives hold, which is not what this test bounds.
    let report = replay_json(&path, &["--volume", "7", "--queue-depth", "32", "--no-prefill"]);
    assert_eq!(report["trace"]["lines"], GENERATED_LINES);
    assert_eq!(report["requests"], GENERATED_LINES / GENERATED_VOLUMES);
    assert_eq!(report["trace"]["other_volume_requests"], GENERATED_LINES - GENERATED_LINES / GENERATED_VOLUMES);
    assert!(report["map"]["widened"].as_u64().unwrap() > 0);
    let peak = report["peak_resident_bytes"].as_u64().unwrap();
    println!(
        "2,000,000-line gzipped trace: peak resident size {} MiB, {:.1} s wall",
        peak >> 20,
        report["wall_s"].as_f64().unwrap()
    );
    // The simulator keeps the data written (tens of MiB here); reading the trace adds
    // buffers of a few MiB, whatever its length.
    const PEAK_BOUND_BYTES: u64 = 512 << 20;
    assert!(peak < PEAK_BOUND_BYTES, "peak resident size {peak} bytes");
}
