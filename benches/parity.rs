//! Parity codec throughput: our `ParityCodec` (XOR for m = 1, Reed-Solomon for m >= 2)
//! against the fastest alternative crates that build here, in one run: reed-solomon-simd
//! (an O(n log n) SIMD Reed-Solomon) and rusty_erasure used directly (ISA-L's GF(2^8)
//! kernels remade in Rust, on reed-solomon-erasure's matrix, so its parity is byte-identical
//! to ours; our Reed-Solomon runs on its kernels, so this row is the cost of our wrapper).
//! Our codec as it was before it moved onto those kernels ("before": reed-solomon-erasure's
//! pure-Rust Reed-Solomon, and a plain XOR loop) is measured beside them for reference.
//! Encode, and reconstruct of m lost data chunks, at 4+1, 4+2 and 8+2 with 4, 16 and
//! 64 KiB chunks. Throughput counts the k data chunks of a stripe. After the criterion
//! run, a table prints ours against the best alternative of each cell with the ratio.

mod common;

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput};
use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};
use zapraid::engine::ParityCodec;

/// Stripe shapes measured: (data chunks k, parity chunks m).
const SHAPES: [(usize, usize); 3] = [(4, 1), (4, 2), (8, 2)];
/// Chunk sizes measured.
const CHUNK_KIB: [usize; 3] = [4, 16, 64];
const KIB: usize = 1024;
/// Implementation names, as bench IDs and in the ratio table.
const OURS: &str = "ours";
/// Our `reconstruct`, which allocates the rebuilt chunks (zeroed) itself.
const OURS_NEW_BUFFERS: &str = "ours, new buffers";
const RS_SIMD: &str = "reed-solomon-simd";
const RUSTY_ERASURE: &str = "rusty_erasure";
/// Our codec before it moved onto the SIMD kernels: not an alternative, a reference.
const BEFORE: &str = "before";
const ALTERNATIVES: [&str; 2] = [RS_SIMD, RUSTY_ERASURE];
const OPERATIONS: [&str; 2] = ["encode", "reconstruct"];

/// k data chunks of pseudo-random bytes, then m parity chunks encoded by our codec.
fn stripe(k: usize, m: usize, chunk_bytes: usize) -> Vec<Vec<u8>> {
    const BYTE_VALUES: u64 = 256;
    let bytes = common::addresses(k * chunk_bytes, BYTE_VALUES);
    let mut data: Vec<Vec<u8>> = bytes.chunks(chunk_bytes).map(|c| c.iter().map(|&b| b as u8).collect()).collect();
    let mut parity = vec![vec![0u8; chunk_bytes]; m];
    let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    let mut out: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
    ParityCodec::new(k, m).unwrap().encode(&refs, &mut out);
    data.append(&mut parity);
    data
}

fn group_name(operation: &str, k: usize, m: usize) -> String {
    format!("parity {operation} {k}+{m}")
}

fn size_label(chunk_kib: usize) -> String {
    format!("{chunk_kib} KiB chunks")
}

fn encode(c: &mut Criterion) {
    for (k, m) in SHAPES {
        let mut group = c.benchmark_group(group_name("encode", k, m));
        for chunk_kib in CHUNK_KIB {
            let chunk_bytes = chunk_kib * KIB;
            let full = stripe(k, m, chunk_bytes);
            let data: Vec<&[u8]> = full[..k].iter().map(Vec::as_slice).collect();
            let mut parity = vec![vec![0u8; chunk_bytes]; m];
            group.throughput(Throughput::Bytes((k * chunk_bytes) as u64));
            let label = size_label(chunk_kib);

            let ours = ParityCodec::new(k, m).unwrap();
            group.bench_function(BenchmarkId::new(OURS, &label), |b| {
                b.iter(|| {
                    let mut out: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
                    ours.encode(black_box(&data), &mut out);
                })
            });

            let before = reed_solomon_erasure::galois_8::ReedSolomon::new(k, m).unwrap();
            group.bench_function(BenchmarkId::new(BEFORE, &label), |b| {
                b.iter(|| {
                    let mut out: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
                    if m == 1 {
                        xor_loop(out[0], black_box(&data));
                    } else {
                        before.encode_sep(black_box(&data), &mut out).unwrap();
                    }
                })
            });

            let mut encoder = ReedSolomonEncoder::new(k, m, chunk_bytes).unwrap();
            group.bench_function(BenchmarkId::new(RS_SIMD, &label), |b| {
                b.iter(|| {
                    for d in &data {
                        encoder.add_original_shard(black_box(d)).unwrap();
                    }
                    let result = encoder.encode().unwrap();
                    // The engine needs parity in its own chunk buffers: the copy is counted.
                    for (p, r) in parity.iter_mut().zip(result.recovery_iter()) {
                        p.copy_from_slice(r);
                    }
                })
            });

            let coder = rusty_coder(k, m);
            group.bench_function(BenchmarkId::new(RUSTY_ERASURE, &label), |b| {
                b.iter(|| {
                    let mut out: Vec<&mut [u8]> = parity.iter_mut().map(Vec::as_mut_slice).collect();
                    if m == 1 {
                        // RAID-5: its dispatched XOR kernel.
                        rusty_erasure::raid::xor_gen(black_box(&data), out[0]).unwrap();
                    } else {
                        coder.encode(black_box(&data), &mut out).unwrap();
                    }
                })
            });
            assert!(parity[..] == full[k..], "rusty_erasure's parity is byte-identical to ours");
        }
        group.finish();
    }
}

/// The XOR of `sources` into `out` as our codec computed it before the SIMD kernels: a copy, then
/// one auto-vectorized pass per further source.
fn xor_loop(out: &mut [u8], sources: &[&[u8]]) {
    out.copy_from_slice(sources[0]);
    for source in &sources[1..] {
        out.iter_mut().zip(*source).for_each(|(a, b)| *a ^= b);
    }
}

/// rusty_erasure over reed-solomon-erasure's matrix: the same parity bytes as ours.
fn rusty_coder(k: usize, m: usize) -> rusty_erasure::Coder {
    rusty_erasure::coder(rusty_erasure::compat::reed_solomon_erasure_matrix(k, m).unwrap()).unwrap()
}

fn reconstruct(c: &mut Criterion) {
    for (k, m) in SHAPES {
        let mut group = c.benchmark_group(group_name("reconstruct", k, m));
        // The first m data chunks are lost: the case that needs decoding, not a re-encode.
        let lost: Vec<usize> = (0..m).collect();
        for chunk_kib in CHUNK_KIB {
            let chunk_bytes = chunk_kib * KIB;
            let full = stripe(k, m, chunk_bytes);
            group.throughput(Throughput::Bytes((k * chunk_bytes) as u64));
            let label = size_label(chunk_kib);

            let present: Vec<Option<&[u8]>> =
                full.iter().enumerate().map(|(i, c)| (!lost.contains(&i)).then_some(c.as_slice())).collect();
            let mut restored = vec![vec![0u8; chunk_bytes]; m];

            // Into the caller's buffers, as the alternatives are measured.
            let ours = ParityCodec::new(k, m).unwrap();
            group.bench_function(BenchmarkId::new(OURS, &label), |b| {
                b.iter(|| {
                    let mut out: Vec<&mut [u8]> = restored.iter_mut().map(Vec::as_mut_slice).collect();
                    ours.reconstruct_into(black_box(&present), &mut out).unwrap();
                })
            });
            assert!(restored[0] == full[0], "ours reconstructs");

            // Into new buffers, as degraded reads call it today.
            let mut chunks: Vec<Option<Vec<u8>>> = full.iter().cloned().map(Some).collect();
            group.bench_function(BenchmarkId::new(OURS_NEW_BUFFERS, &label), |b| {
                b.iter(|| {
                    lost.iter().for_each(|&i| chunks[i] = None);
                    ours.reconstruct(black_box(&mut chunks)).unwrap();
                })
            });

            let before = reed_solomon_erasure::galois_8::ReedSolomon::new(k, m).unwrap();
            group.bench_function(BenchmarkId::new(BEFORE, &label), |b| {
                b.iter(|| {
                    lost.iter().for_each(|&i| chunks[i] = None);
                    if m == 1 {
                        let survivors: Vec<&[u8]> = chunks.iter().flatten().map(Vec::as_slice).collect();
                        let mut sum = vec![0u8; chunk_bytes];
                        xor_loop(&mut sum, black_box(&survivors));
                        chunks[0] = Some(sum);
                    } else {
                        before.reconstruct(black_box(&mut chunks)).unwrap();
                    }
                })
            });

            let mut decoder = ReedSolomonDecoder::new(k, m, chunk_bytes).unwrap();
            // Its recovery shards are its own code's, not ours: encode them for it.
            let mut encoder = ReedSolomonEncoder::new(k, m, chunk_bytes).unwrap();
            full[..k].iter().for_each(|d| encoder.add_original_shard(d).unwrap());
            let recovery: Vec<Vec<u8>> = encoder.encode().unwrap().recovery_iter().map(<[u8]>::to_vec).collect();
            group.bench_function(BenchmarkId::new(RS_SIMD, &label), |b| {
                b.iter(|| {
                    for (i, d) in full[..k].iter().enumerate().filter(|(i, _)| !lost.contains(i)) {
                        decoder.add_original_shard(i, black_box(d)).unwrap();
                    }
                    for (i, r) in recovery.iter().enumerate() {
                        decoder.add_recovery_shard(i, black_box(r)).unwrap();
                    }
                    let result = decoder.decode().unwrap();
                    for (out, &i) in restored.iter_mut().zip(&lost) {
                        out.copy_from_slice(result.restored_original(i).unwrap());
                    }
                })
            });
            assert!(restored[0] == full[0], "reed-solomon-simd reconstructs");

            let coder = rusty_coder(k, m);
            group.bench_function(BenchmarkId::new(RUSTY_ERASURE, &label), |b| {
                b.iter(|| {
                    let mut out: Vec<&mut [u8]> = restored.iter_mut().map(Vec::as_mut_slice).collect();
                    if m == 1 {
                        // RAID-5: the lost chunk is the XOR of the survivors.
                        let survivors: Vec<&[u8]> = present.iter().flatten().copied().collect();
                        rusty_erasure::raid::xor_gen(black_box(&survivors), out[0]).unwrap();
                    } else {
                        coder.recover(black_box(&present), &lost, &mut out).unwrap();
                    }
                })
            });
            assert!(restored[0] == full[0], "rusty_erasure reconstructs");
        }
        group.finish();
    }
}

/// Median time of one bench of this run, in ns, from criterion's estimates file.
fn median_ns(group: &str, function: &str, parameter: &str) -> Option<f64> {
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let path = format!("{target}/criterion/{group}/{function}/{parameter}/new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    const MEDIAN_KEY: &str = "\"median\":";
    const POINT_KEY: &str = "\"point_estimate\":";
    let median = &text[text.find(MEDIAN_KEY)? + MEDIAN_KEY.len()..];
    let value = &median[median.find(POINT_KEY)? + POINT_KEY.len()..];
    let end = value.find([',', '}'])?;
    value[..end].trim().parse().ok()
}

/// Ours against the fastest alternative of each cell, in MiB/s of data chunks.
fn print_ratios() {
    const MIB: f64 = (KIB * KIB) as f64;
    const NS_PER_S: f64 = 1e9;
    println!("\nparity: ours vs the best alternative (MiB/s of data; ratio = ours / best)");
    for operation in OPERATIONS {
        for (k, m) in SHAPES {
            let group = group_name(operation, k, m);
            for chunk_kib in CHUNK_KIB {
                let label = size_label(chunk_kib);
                let mib_per_s = |ns: f64| (k * chunk_kib * KIB) as f64 / MIB / (ns / NS_PER_S);
                let Some(ours) = median_ns(&group, OURS, &label).map(mib_per_s) else { continue };
                let best = ALTERNATIVES
                    .iter()
                    .filter_map(|name| median_ns(&group, name, &label).map(|ns| (*name, mib_per_s(ns))))
                    .max_by(|a, b| a.1.total_cmp(&b.1));
                let reference = |name: &str| {
                    median_ns(&group, name, &label)
                        .map_or_else(|| "-".to_string(), |ns| format!("{:.0}", mib_per_s(ns)))
                };
                if let Some((name, alt)) = best {
                    println!(
                        "{group:<24} {chunk_kib:>3} KiB  ours {ours:>7.0}  {name:<18} {alt:>7.0}  ratio {:.2}  \
                         (new buffers: {}, before: {})",
                        ours / alt,
                        reference(OURS_NEW_BUFFERS),
                        reference(BEFORE)
                    );
                }
            }
        }
    }
}

fn main() {
    let mut criterion = common::quick().configure_from_args();
    encode(&mut criterion);
    reconstruct(&mut criterion);
    criterion.final_summary();
    print_ratios();
}
