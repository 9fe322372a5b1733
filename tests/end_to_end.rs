//! End to end through the facade's public API: an array over emulated drives is
//! formatted, written, cut off (a power cut, a clean stop, a failed drive), recovered from
//! the drives alone and verified against what was acknowledged.

use std::collections::HashMap;

use zapraid::engine::{Config, Layout, Mode, RaidLevel, Request, Simulator, DEFAULT_STRIPE_TIMEOUT_NS};
use zapraid::zns::{EmulatedDrive, Geometry};

/// Small drives: 512 B blocks, 60-block zones, so that runs seal several segments quickly.
fn geometry() -> Geometry {
    Geometry {
        block_size_bytes: 512,
        metadata_bytes_per_block: 32,
        zone_size_blocks: 64,
        zone_capacity_blocks: 60,
        zone_count: 24,
        max_open_zones: Some(8),
        max_active_zones: Some(10),
        zone_append_max_blocks: 8,
        max_transfer_blocks: 16,
        transfer_granule_blocks: 0,
    }
}

fn config(level: RaidLevel, mode: Mode) -> Config {
    let g = geometry();
    let layout = Layout::new(&g, level, mode, u64::from(g.block_size_bytes)).expect("layout");
    Config {
        level,
        mode,
        chunk_bytes: u64::from(g.block_size_bytes),
        open_segments: zapraid::engine::OpenSegments::SINGLE,
        stripe_timeout_ns: DEFAULT_STRIPE_TIMEOUT_NS,
        logical_blocks: layout.capacity_blocks(g.zone_count) / 2,
        array_uuid: [1; 16],
        lookup_ps_per_entry: 0,
        merge_appends: true,
        declustering: Default::default(),
        l2p: zapraid::engine::L2pConfig::default(),
    }
}

fn block(lba: u64, version: u64) -> Vec<u8> {
    (0..512u64).map(|i| (lba.wrapping_mul(131) ^ version.wrapping_mul(7) ^ i) as u8).collect()
}

/// Writes `writes` blocks at pseudo-random LBAs, each waited for; returns what each LBA holds.
fn write(sim: &mut Simulator, logical_blocks: u64, writes: u64, first_version: u64) -> HashMap<u64, Vec<u8>> {
    let mut expected = HashMap::new();
    for i in 0..writes {
        let version = first_version + i;
        let lba = version.wrapping_mul(2_654_435_761) % logical_blocks;
        sim.submit(version, Request::Write { lba, data: block(lba, version) });
        let response = sim.run_until_response(version).expect("answered");
        response.result.expect("write acknowledged");
        expected.insert(lba, block(lba, version));
    }
    expected
}

fn verify(sim: &mut Simulator, expected: &HashMap<u64, Vec<u8>>, when: &str) {
    for (&lba, want) in expected {
        let id = u64::MAX - lba;
        sim.submit(id, Request::Read { lba, blocks: 1 });
        let got = sim.run_until_response(id).expect("answered").result;
        assert!(got.as_ref().is_ok_and(|data| data == want), "{when}: LBA {lba} does not read back");
    }
}

fn recover(drives: Vec<EmulatedDrive>, config: Config) -> Simulator {
    Simulator::recover(geometry(), config, drives).expect("recovery from the drives alone")
}

#[test]
fn format_write_crash_recover_verify() {
    for (level, mode) in [
        (RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 }),
        (RaidLevel::Raid6 { drives: 5 }, Mode::ZoneWriteOnly),
    ] {
        let config = config(level, mode);
        let mut sim = Simulator::new(geometry(), config, 3, None).expect("format");
        let mut expected = write(&mut sim, config.logical_blocks, 600, 1);
        let mut sim = recover(sim.power_cut().expect("power cut"), config);
        verify(&mut sim, &expected, "after a power cut");
        expected.extend(write(&mut sim, config.logical_blocks, 200, 10_000));
        sim.stop();
        let mut sim = recover(sim.drives, config);
        verify(&mut sim, &expected, "after a clean stop");
        assert_eq!(sim.engine.status().blocks_relocated, 0, "a start after a clean stop rewrites nothing");
    }
}

#[test]
fn a_failed_drive_is_rebuilt_from_parity_after_recovery() {
    let config = config(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 });
    let mut sim = Simulator::new(geometry(), config, 5, None).expect("format");
    let expected = write(&mut sim, config.logical_blocks, 500, 1);
    let mut drives = sim.power_cut().expect("power cut");
    drives[2].fail();
    let mut sim = Simulator::recover_with_failed(geometry(), config, drives, &[2]).expect("degraded recovery");
    sim.run_until_idle();
    assert_eq!(sim.engine.status().failed_drives, vec![2]);
    verify(&mut sim, &expected, "degraded, after a power cut");
}
