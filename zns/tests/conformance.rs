//! The conformance suite against every emulated backend, and the post-crash checks after
//! in-process power cuts and after killing a process that writes to a drive file.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zapraid_zns::conformance::{self, Report};
use zapraid_zns::{Command, EmulatedDrive, Geometry, TimingParams, ZonedDevice};

fn assert_passed(what: &str, report: &Report) {
    assert!(report.passed(), "{what}:\n{report}");
    assert!(report.results.len() > 10, "{what}: too few checks ran:\n{report}");
}

fn geometries() -> Vec<Geometry> {
    let base = Geometry::small(24, 64, 60);
    vec![
        base,
        Geometry { metadata_bytes_per_block: 16, ..base },
        Geometry { metadata_bytes_per_block: 0, ..base },
        Geometry { max_open_zones: Some(3), max_active_zones: Some(5), ..base },
        Geometry { max_open_zones: None, max_active_zones: None, ..base },
        Geometry { block_size_bytes: 512, metadata_bytes_per_block: 8, zone_append_max_blocks: 8, ..base },
    ]
}

#[test]
fn memory_backend_conforms() {
    for (i, geometry) in geometries().into_iter().enumerate() {
        let mut drive = EmulatedDrive::memory(geometry, i as u64).unwrap();
        let report = conformance::run(&mut drive);
        assert_passed(&format!("memory {geometry:?}"), &report);
        let limits_absent =
            usize::from(geometry.max_open_zones.is_none()) + usize::from(geometry.max_active_zones.is_none());
        assert_eq!(report.skipped(), limits_absent, "{report}");
    }
}

/// A drive that takes commands of more than 8 blocks only in whole multiples of 8, as
/// NVMe passthrough does with 64 B of metadata per block: every check sizes its commands
/// to that. (Memory only: a drive file does not record the granule.)
#[test]
fn a_backend_with_a_transfer_granule_conforms() {
    let geometry = Geometry { transfer_granule_blocks: 8, ..Geometry::small(24, 64, 60) };
    let mut drive = EmulatedDrive::memory(geometry, 9).unwrap();
    assert_passed(&format!("memory {geometry:?}"), &conformance::run(&mut drive));
}

#[test]
fn virtual_time_backend_conforms() {
    let mut drive =
        EmulatedDrive::memory(Geometry::small(24, 64, 60), 3).unwrap().with_timing(TimingParams::zn540()).unwrap();
    assert_passed("virtual time", &conformance::run(&mut drive));
    assert!(drive.now_ns() > 0, "virtual time did not advance");
}

#[test]
fn file_backend_conforms_and_persists() {
    let dir = tempfile::tempdir().unwrap();
    for (i, geometry) in geometries().into_iter().enumerate() {
        let path = dir.path().join(format!("d{i}.zns"));
        let mut drive = EmulatedDrive::create_file(&path, geometry, i as u64).unwrap();
        assert_passed(&format!("file {geometry:?}"), &conformance::run(&mut drive));
        // Leave data behind, reopen, find it again.
        let lba = geometry.zone_start_lba(2);
        let (data, metadata) = conformance::pattern_block(&geometry, lba, 77);
        let c =
            zapraid_zns::execute(&mut drive, Command::Write { lba, data: data.clone(), metadata: metadata.clone() });
        c.result.unwrap();
        drop(drive);
        let mut drive = EmulatedDrive::open_file(&path).unwrap();
        assert_eq!(drive.geometry(), geometry);
        let zone = drive.zones()[2];
        assert_eq!(zone.write_pointer, lba + 1);
        assert_eq!(zone.state, zapraid_zns::ZoneState::Closed, "an open zone comes back closed");
        let c = zapraid_zns::execute(
            &mut drive,
            Command::Read { lba, data: vec![0; data.len()], metadata: vec![0; metadata.len()] },
        );
        c.result.unwrap();
        assert_eq!((c.data, c.metadata), (data, metadata));
        assert_passed("file reopened", &conformance::run(&mut drive));
    }
}

#[test]
fn file_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.zns");
    let _drive = EmulatedDrive::create_file(&path, Geometry::small(4, 16, 16), 1).unwrap();
    match EmulatedDrive::open_file(&path) {
        Err(zapraid_zns::Error::DriveInUse { .. }) => {}
        other => panic!("second open: {:?}", other.map(|_| ())),
    }
}

mod crash_workload;
use crash_workload::{crash_blocks, crash_workload, verify_crash_block};

#[test]
fn power_cut_leaves_a_drive_that_passes_post_crash_checks() {
    let dir = tempfile::tempdir().unwrap();
    for seed in 0..12u64 {
        let geometry = Geometry::small(8, 32, 30);
        let mut drive = if seed % 2 == 0 {
            EmulatedDrive::memory(geometry, seed).unwrap()
        } else {
            EmulatedDrive::create_file(&dir.path().join(format!("p{seed}.zns")), geometry, seed).unwrap()
        };
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let rounds = rng.random_range(1..12);
        crash_workload(&mut drive, &mut rng, rounds, |_| {});
        // Now leave a batch in flight and cut power under it.
        let g = drive.geometry();
        for zone in 0..g.zone_count {
            let z = drive.zones()[zone as usize];
            if z.written_blocks() + 4 <= g.zone_capacity_blocks {
                let (data, metadata) = crash_blocks(&g, 999_000 + u64::from(zone) * 10, 4);
                drive.submit(u64::from(zone), Command::Append { zone_start_lba: z.start_lba, data, metadata });
            }
        }
        let cut = drive.power_cut().unwrap();
        assert_eq!(drive.in_flight(), 0);
        let report = conformance::check_after_crash_then_run(&mut drive, &mut |_, d, m| verify_crash_block(d, m));
        assert_passed(&format!("seed {seed} after {cut:?}"), &report);
    }
}
