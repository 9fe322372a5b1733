//! CPU cost of the emulated drive: how many 4 KiB commands per second one core can push
//! through it (instant mode, memory media), and the cost of the timing model. These bound
//! how fast simulations and emulated arrays can run; criterion prints the figures.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use zapraid::zns::{Command, EmulatedDrive, Geometry, TimingParams, ZoneAction, ZoneTarget, ZonedDevice};

const BATCH: u64 = 64;

fn geometry() -> Geometry {
    Geometry::small(16, 65_536, 65_536)
}

fn run_batch(drive: &mut EmulatedDrive, append: bool, next_lba: &mut u64) {
    let g = drive.geometry();
    for tag in 0..BATCH {
        let data = vec![0x5a; g.block_size_bytes as usize];
        let command = if append {
            Command::Append { zone_start_lba: 0, data, metadata: Vec::new() }
        } else {
            // Zone Writes go one per zone: spread the batch over zones.
            let zone = (tag % u64::from(g.zone_count)) as u32;
            let lba = g.zone_start_lba(zone) + *next_lba;
            if zone + 1 == g.zone_count {
                *next_lba += 1;
            }
            Command::Write { lba, data, metadata: Vec::new() }
        };
        drive.submit(tag, command);
        if !append && (tag + 1) % u64::from(g.zone_count) == 0 {
            let mut out = Vec::new();
            while drive.in_flight() > 0 {
                drive.wait(&mut out);
            }
        }
    }
    let mut out = Vec::with_capacity(BATCH as usize);
    while drive.in_flight() > 0 {
        drive.wait(&mut out);
    }
    assert!(out.iter().all(|c| c.result.is_ok()));
}

fn fresh(timing: bool) -> EmulatedDrive {
    let drive = EmulatedDrive::memory(geometry(), 1).unwrap();
    if timing {
        drive.with_timing(TimingParams::zn540()).unwrap()
    } else {
        drive
    }
}

fn emulator(c: &mut Criterion) {
    let mut group = c.benchmark_group("emulated drive, 4 KiB");
    group.throughput(Throughput::Elements(BATCH));
    for (name, append, timing) in [
        ("zone append, instant", true, false),
        ("zone append, timing model", true, true),
        ("zone write, instant", false, false),
    ] {
        group.bench_function(name, |b| {
            b.iter_batched_ref(
                || (fresh(timing), 0u64),
                |(drive, next_lba)| {
                    run_batch(drive, append, next_lba);
                    drive.submit(0, Command::ManageZone { action: ZoneAction::Reset, target: ZoneTarget::All });
                    let mut out = Vec::new();
                    drive.wait(&mut out);
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, emulator);
criterion_main!(benches);
