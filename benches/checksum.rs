//! Per-block checksum cost: CRC32C of one 4 KiB block by each of the engine's two
//! implementations (the CPU's crc32 instruction, and a slicing-by-16 table; the engine
//! uses whichever measures faster, `zapraid_engine::crc`), and the block metadata the
//! engine writes beside every block (fields plus that CRC) encoded and verified.

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use zapraid::engine::crc::CrcImplementation;
use zapraid::engine::format::{BlockKind, BlockMetadata, BLOCK_METADATA_BYTES};

use common::BLOCK_BYTES;

const BYTE_VALUES: u64 = 256;

fn checksum(c: &mut Criterion) {
    let block: Vec<u8> = common::addresses(BLOCK_BYTES, BYTE_VALUES).into_iter().map(|b| b as u8).collect();
    let mut group = c.benchmark_group("checksum, 4 KiB block");
    group.throughput(Throughput::Bytes(BLOCK_BYTES as u64));
    for implementation in [CrcImplementation::Instruction, CrcImplementation::Table] {
        let name = format!("crc32c by {}", implementation.name());
        group.bench_function(name, |b| b.iter(|| implementation.append(0, black_box(&block))));
    }

    let mut oob = vec![0u8; BLOCK_METADATA_BYTES];
    let metadata = BlockMetadata::new(42, 7, 3, 9, BlockKind::Data);
    group.bench_function("block metadata encode", |b| b.iter(|| metadata.encode(black_box(&block), &mut oob)));
    group.bench_function("block metadata decode and verify", |b| {
        b.iter(|| BlockMetadata::decode(black_box(&block), black_box(&oob)).unwrap())
    });
    group.finish();
}

criterion_group! { name = benches; config = common::quick(); targets = checksum }
criterion_main!(benches);
