//! Checksums done on the frontend's thread: writes that bring their blocks' CRC32C
//! (`Request::WriteWithChecksums`) and reads whose checksums the frontend verifies
//! (`Request::ReadUnverified`), against the engine's own checks.
//!
//! Every stripe these tests write also checks, in the engine (debug builds), that each
//! block's CRC32C (the frontend's, or derived for XOR and copied parity) is its data's.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zapraid_engine::{BlockChecksums, Mode, RaidLevel, ReadChecks, Request, Simulator};

mod common;

use common::BLOCK;

const ZONES: u32 = 12;
const LOGICAL_BLOCKS: u64 = 120;
const WRITES: u64 = 150;

fn simulator(level: RaidLevel, chunk_blocks: u64) -> Simulator {
    let config = common::config(level, Mode::ZapRaid { group_size: 4 }, chunk_blocks, LOGICAL_BLOCKS);
    Simulator::new(common::geometry(ZONES, 8, 10), config, 5, None).unwrap()
}

/// Writes random runs of blocks with the frontend's checksums; returns what each LBA holds.
fn write_all(sim: &mut Simulator) -> Vec<Option<Vec<u8>>> {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut expected = vec![None; LOGICAL_BLOCKS as usize];
    for id in 0..WRITES {
        let blocks = rng.random_range(1..=3u64);
        let lba = rng.random_range(0..LOGICAL_BLOCKS - blocks);
        let data: Vec<u8> = (lba..lba + blocks).flat_map(|l| common::named_block(l, id)).collect();
        let checksums = BlockChecksums::of(&data, BLOCK);
        sim.submit(id, Request::WriteWithChecksums { lba, data: data.clone(), checksums });
        let given_back = sim.run_until_response(id).expect("write answered").result.expect("write acknowledged");
        assert_eq!(given_back.len(), data.len(), "a write's response gives a buffer of its length back");
        for (i, l) in (lba..lba + blocks).enumerate() {
            expected[l as usize] = Some(data[i * BLOCK..(i + 1) * BLOCK].to_vec());
        }
    }
    sim.run_until_idle();
    expected
}

/// Reads one run with `ReadUnverified`: the data and the checks to run on it.
fn read_unverified(sim: &mut Simulator, id: u64, lba: u64, blocks: u64) -> (Vec<u8>, ReadChecks) {
    sim.submit(id, Request::ReadUnverified { lba, blocks, buffer: Vec::new() });
    let response = sim.run_until_response(id).expect("read answered");
    let data = response.result.expect("read succeeds");
    (data, response.checks.expect("an unverified read comes with its checks"))
}

fn read_checked(sim: &mut Simulator, id: u64, lba: u64) -> Vec<u8> {
    sim.submit(id, Request::Read { lba, blocks: 1 });
    sim.run_until_response(id).expect("read answered").result.expect("read succeeds")
}

#[test]
fn frontend_checksums_write_blocks_that_read_back_and_rebuild_from_parity() {
    let levels = [
        RaidLevel::Raid5 { drives: 4 },
        // An even number of data chunks: XOR parity's CRC needs the zero block's term.
        RaidLevel::Raid5 { drives: 5 },
        RaidLevel::Raid6 { drives: 6 },
        RaidLevel::Raid01 { drives: 4 },
        RaidLevel::Raid1 { drives: 3 },
    ];
    for level in levels {
        for chunk_blocks in [1, 2] {
            let mut sim = simulator(level, chunk_blocks);
            let expected = write_all(&mut sim);
            let mut id = 1_000;
            for (lba, want) in expected.iter().enumerate() {
                id += 1;
                let (data, checks) = read_unverified(&mut sim, id, lba as u64, 1);
                assert_eq!(checks.verify(&data, BLOCK), Ok(()), "{level} chunk {chunk_blocks}: LBA {lba} verifies");
                match want {
                    Some(want) => assert_eq!(&data, want, "{level} chunk {chunk_blocks}: LBA {lba}"),
                    None => assert!(data.iter().all(|b| *b == 0), "an unwritten block reads as zeros"),
                }
            }
            // Several blocks at once: one check per block.
            let (data, checks) = read_unverified(&mut sim, 2_000, 10, 7);
            assert_eq!(checks.blocks(), 7);
            assert_eq!(checks.verify(&data, BLOCK), Ok(()));
            // With a drive failed, lost blocks come from parity whose checksums were
            // derived from the data blocks' (XOR, copies) or computed (Reed-Solomon).
            sim.engine.fail_drive(0);
            for (lba, want) in expected.iter().enumerate() {
                id += 1;
                let Some(want) = want else { continue };
                assert_eq!(&read_checked(&mut sim, id, lba as u64), want, "{level} degraded: LBA {lba}");
            }
        }
    }
}

/// Submits `write`, which must be refused (`why`), then a flush, which must complete.
fn refused_without_holding_up_a_flush(write: Request, why: &str) {
    let mut sim = simulator(RaidLevel::Raid5 { drives: 4 }, 1);
    sim.submit(1, write);
    assert!(sim.run_until_response(1).expect("answered").result.is_err(), "{why}");
    sim.submit(2, Request::Flush);
    sim.run_until_response(2).expect("a flush after a refused write completes").result.unwrap();
}

#[test]
fn a_write_of_part_of_a_block_fails_without_holding_up_a_flush() {
    let write = Request::Write { lba: 3, data: vec![7u8; BLOCK + BLOCK / 2] };
    refused_without_holding_up_a_flush(write, "a block and a half");
}

#[test]
fn checksums_that_do_not_fit_the_data_fail_the_write() {
    let data = vec![7u8; 2 * BLOCK];
    let checksums = BlockChecksums::of(&data[..BLOCK], BLOCK);
    let write = Request::WriteWithChecksums { lba: 3, data, checksums };
    refused_without_holding_up_a_flush(write, "one checksum for two blocks");
}

#[test]
fn a_damaged_block_fails_the_frontends_check_and_a_checked_read_repairs_it() {
    let mut sim = simulator(RaidLevel::Raid5 { drives: 4 }, 1);
    let expected = write_all(&mut sim);
    let lba = expected.iter().position(Option::is_some).expect("a written block") as u64;
    let place = sim.engine.locate(lba).expect("written blocks are mapped");
    let geometry = common::geometry(ZONES, 8, 10);
    sim.drives[place.drive].corrupt_block(geometry.zone_start_lba(place.zone) + place.offset, 77).unwrap();

    let (data, checks) = read_unverified(&mut sim, 9_000, lba, 1);
    assert_eq!(checks.verify(&data, BLOCK), Err(0), "the frontend finds the damage");
    let repaired_before = sim.engine.status().read_blocks_repaired;
    let again = read_checked(&mut sim, 9_001, lba);
    assert_eq!(Some(again), expected[lba as usize], "read again, checked: rebuilt from its stripe");
    assert_eq!(sim.engine.status().read_blocks_repaired, repaired_before + 1);
}
