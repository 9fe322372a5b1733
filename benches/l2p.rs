//! L2P table: updates and lookups of random logical blocks in a table of 2^20 blocks
//! (4 GiB of 4 KiB blocks), every page cached beforehand, through `L2pTable::get/set`.

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use zapraid::engine::l2p::{L2pTable, Physical};

const LOGICAL_BLOCKS: u64 = 1 << 20;
const DRIVES: usize = 4;
const ZONES: u32 = 256;
/// A ZN540 zone's capacity.
const ZONE_CAPACITY_BLOCKS: u64 = 275_712;
/// Updates or lookups per timed iteration.
const BATCH: usize = 1024;

fn physical_of(lba: u64) -> Physical {
    Physical {
        zone: (lba % u64::from(ZONES)) as u32,
        drive: (lba % DRIVES as u64) as usize,
        offset: lba % ZONE_CAPACITY_BLOCKS,
    }
}

fn l2p(c: &mut Criterion) {
    let mut table =
        L2pTable::new(LOGICAL_BLOCKS, DRIVES, ZONES, ZONE_CAPACITY_BLOCKS, common::BLOCK_BYTES as u32).unwrap();
    // Updates and lookups need their page cached: cache every page first (no budget, so
    // none is evicted), untimed.
    (0..table.page_count()).for_each(|page| {
        table.ensure(page as _);
    });
    (0..LOGICAL_BLOCKS).for_each(|lba| table.set(lba, physical_of(lba)));
    let lbas = common::addresses(BATCH, LOGICAL_BLOCKS);
    let targets: Vec<Physical> = lbas.iter().map(|&lba| physical_of(lba.wrapping_mul(7))).collect();

    let mut group = c.benchmark_group("L2P, 2^20 logical blocks, random");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("update", |b| {
        b.iter(|| lbas.iter().zip(&targets).for_each(|(&lba, &at)| table.set(black_box(lba), at)))
    });
    group.bench_function("lookup", |b| {
        b.iter(|| lbas.iter().map(|&lba| table.get(black_box(lba)).map_or(0, |p| p.offset)).sum::<u64>())
    });
    group.finish();
}

criterion_group! { name = benches; config = common::quick(); targets = l2p }
criterion_main!(benches);
