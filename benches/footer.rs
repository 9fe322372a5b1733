//! Segment footer codec: one full 4 KiB footer block (header, as many entries as fit, CRC32C)
//! encoded and decoded, as segments are sealed and recovery reads them back.

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use zapraid::engine::format::{
    decode_footer_block, encode_footer_block, footer_entries_per_block, FooterBlockHeader, FooterEntry,
};

const BLOCK_BYTES: u32 = 4096;

fn footer(c: &mut Criterion) {
    let count = footer_entries_per_block(BLOCK_BYTES);
    let entries: Vec<FooterEntry> = (0..count as u64)
        .map(|i| FooterEntry {
            lba: (1000 + i).into(),
            timestamp: i.into(),
            stripe_id: (i as u32).into(),
            reserved: 0.into(),
        })
        .collect();
    let header = FooterBlockHeader {
        magic: [0; 8],
        version: 0.into(),
        drive_index: 1.into(),
        segment_sequence: 3.into(),
        first_block: 0.into(),
        entries: 0.into(),
    };
    let mut block = vec![0u8; BLOCK_BYTES as usize];
    let mut group = c.benchmark_group(format!("footer block, {count} entries"));
    group.throughput(Throughput::Elements(count as u64));
    group.bench_function("encode", |b| b.iter(|| encode_footer_block(header, black_box(&entries), &mut block)));
    group.bench_function("decode", |b| b.iter(|| decode_footer_block(black_box(&block)).unwrap()));
    group.finish();
}

criterion_group! { name = benches; config = common::quick(); targets = footer }
criterion_main!(benches);
