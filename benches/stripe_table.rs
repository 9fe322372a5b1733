//! Compact stripe table of one full ZN540 segment of (3+1)-RAID-5 with 4 KiB chunks, at
//! G = 256 and G = 4096: one entry's lookup, and the degraded-read query the paper times
//! (find the stripe of a chunk, then scan the group on every other drive for its chunks).

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use zapraid::engine::stripe_table::CompactStripeTable;
use zapraid::engine::{Layout, Mode, RaidLevel};
use zapraid::zns::Geometry;

const GROUP_SIZES: [u32; 2] = [256, 4096];
const CHUNK_BYTES: u64 = 4096;
const LEVEL: RaidLevel = RaidLevel::Raid5 { drives: 4 };
/// Lookups or queries per timed iteration.
const BATCH: usize = 256;

/// A table with every chunk recorded; the stripes of each group land on each drive in a
/// different rotation of group order, as concurrent appends scatter them.
fn full_table(layout: &Layout) -> CompactStripeTable {
    let mut table = CompactStripeTable::new(layout).unwrap();
    for drive in 0..layout.drives() {
        for position in 0..layout.stripes {
            let in_group = position % layout.group_size;
            let group_stripes = layout.group_stripes(position / layout.group_size);
            table.set(drive, position, ((in_group + drive as u64 * 7) % group_stripes) as u32);
        }
    }
    table
}

/// Where the other drives keep the chunks of the stripe whose chunk `drive` holds at
/// `position`: the scan a degraded read does.
fn query(table: &CompactStripeTable, layout: &Layout, drive: usize, position: u64) -> u64 {
    let id = table.get(drive, position).unwrap();
    let group = position / layout.group_size;
    let first = group * layout.group_size;
    let last = first + layout.group_stripes(group);
    (0..layout.drives())
        .filter(|&other| other != drive)
        .map(|other| (first..last).find(|&p| table.get(other, p) == Some(id)).unwrap())
        .sum()
}

fn stripe_table(c: &mut Criterion) {
    let geometry = Geometry::zn540();
    let mut group = c.benchmark_group("compact stripe table, (3+1)-RAID-5 ZN540 segment");
    group.throughput(Throughput::Elements(BATCH as u64));
    for group_size in GROUP_SIZES {
        let layout = Layout::new(&geometry, LEVEL, Mode::ZapRaid { group_size }, CHUNK_BYTES).unwrap();
        let table = full_table(&layout);
        let places: Vec<(usize, u64)> = common::addresses(BATCH, layout.stripes * layout.drives() as u64)
            .into_iter()
            .map(|i| ((i / layout.stripes) as usize, i % layout.stripes))
            .collect();
        let label = format!("G = {group_size}");
        group.bench_function(BenchmarkId::new("lookup", &label), |b| {
            b.iter(|| places.iter().map(|&(d, p)| table.get(black_box(d), black_box(p)).unwrap()).sum::<u32>())
        });
        group.bench_function(BenchmarkId::new("degraded-read query", &label), |b| {
            b.iter(|| places.iter().map(|&(d, p)| query(&table, &layout, black_box(d), black_box(p))).sum::<u64>())
        });
    }
    group.finish();
}

criterion_group! { name = benches; config = common::quick(); targets = stripe_table }
criterion_main!(benches);
