//! Segment footer codec: one full 4 KiB footer block (header, as many entries as fit, CRC32C)
//! encoded and decoded, as segments are sealed and recovery reads them back.

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use zapraid::engine::format::{
    decode_footer_block, encode_footer_block, footer_entries_per_block, FooterBlockHeader, FooterEntry,
};
use zerocopy::FromZeros;

const FIRST_LBA: u64 = 1000;

fn footer(c: &mut Criterion) {
    let count = footer_entries_per_block(common::BLOCK_BYTES as u32);
    // Fields the codec sets itself (magic, version, entry count) and reserved ones stay zero.
    let entries: Vec<FooterEntry> = (0..count as u64)
        .map(|i| FooterEntry { lba: (FIRST_LBA + i).into(), timestamp: i.into(), ..FooterEntry::new_zeroed() })
        .collect();
    let header = FooterBlockHeader::new(1, 3, 0);
    let mut block = vec![0u8; common::BLOCK_BYTES];
    let mut group = c.benchmark_group(format!("footer block, {count} entries"));
    group.throughput(Throughput::Elements(count as u64));
    group.bench_function("encode", |b| b.iter(|| encode_footer_block(header, black_box(&entries), &mut block)));
    group.bench_function("decode", |b| b.iter(|| decode_footer_block(black_box(&block)).unwrap()));
    group.finish();
}

criterion_group! { name = benches; config = common::quick(); targets = footer }
criterion_main!(benches);
