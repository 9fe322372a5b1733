//! A page of the L2P table whose mapping block sits in a segment that was open when a drive
//! rebuild started (retired: closed short, to be reclaimed), the block damaged so that with
//! the drive being rebuilt its row lost more than parity covers. The page is rebuilt from
//! the log; the other blocks of that row are intact, and the retired segment's footer
//! records (never written to the drives: its stripes end short of the footer region) say
//! what each holds, so no LBA is reported lost: an index lost is not data lost. With Zone
//! Append, the scan places the chunks of the drive being rebuilt where the engine's stripe
//! table says, not where the drives' records would guess.

use zapraid_engine::{Config, L2pConfig, Mode, RaidLevel, Request, Simulator};
use zapraid_zns::ZoneState;

mod common;
use common::BLOCK;

const LOGICAL_BLOCKS: u64 = 1024;
const PAGE_ENTRIES: u64 = 16;

fn config(mode: Mode) -> Config {
    let base = common::config(RaidLevel::Raid5 { drives: 4 }, mode, 1, LOGICAL_BLOCKS);
    let l2p = L2pConfig { budget_bytes: Some(4 * BLOCK as u64), page_entries: Some(PAGE_ENTRIES), checkpoint: true };
    Config { l2p, ..base }
}

/// The write round whose data LBA `lba` holds last (rounds 1, 2, 3 over every 8th, 16th,
/// 32nd run of 8 blocks).
fn round_of(lba: u64) -> u64 {
    if lba % 32 < 8 {
        3
    } else if lba % 16 < 8 {
        2
    } else {
        1
    }
}

#[test]
fn a_mapping_block_lost_in_a_retired_segment_loses_no_data() {
    for mode in [Mode::ZoneWriteOnly, Mode::ZapRaid { group_size: 4 }] {
        let geometry = || common::geometry(48, 8, 10);
        let mut sim = Simulator::new(geometry(), config(mode), 3, None).unwrap();
        let mut id = 0;
        for (round, step) in [(1u64, 8usize), (2, 16), (3, 32)] {
            for lba in (0..LOGICAL_BLOCKS).step_by(step) {
                let data: Vec<u8> = (lba..lba + 8).flat_map(|l| common::named_block(l, round)).collect();
                sim.submit(id, Request::Write { lba, data });
                id += 1;
            }
            sim.run_until_idle();
        }
        // A page whose mapping block is in the segment still open.
        let open = |sim: &Simulator, zone: u32| sim.drives[2].zones()[zone as usize].state != ZoneState::Full;
        let (_, at) = (0..(LOGICAL_BLOCKS / PAGE_ENTRIES) as u32)
            .filter_map(|p| sim.engine.locate_page(p).map(|at| (p, at)))
            .find(|(_, at)| open(&sim, at.zone))
            .expect("a mapping block in the open segment");
        sim.drives[0].fail();
        sim.engine.fail_drive(0);
        sim.replace_drive(0, 9).unwrap();
        // Drive 0 is absent from the retired segment; the mapping block (or, on drive 0,
        // another chunk of its row) damaged too: two chunks of the row are missing.
        let lba = geometry().zone_start_lba(at.zone) + at.offset;
        sim.drives[if at.drive == 0 { 1 } else { at.drive }].corrupt_block(lba, 11).unwrap();
        for lba in 0..LOGICAL_BLOCKS {
            sim.submit(id, Request::Read { lba, blocks: 1 });
            let got = sim.run_until_response(id).expect("answered").result;
            id += 1;
            let got = got.unwrap_or_else(|e| panic!("{mode:?}: LBA {lba}: {e}"));
            assert!(got == common::named_block(lba, round_of(lba)), "{mode:?}: LBA {lba} reads other data");
        }
        sim.run_until_idle();
        let status = sim.engine.status();
        assert_eq!(status.blocks_lost, 0, "{mode:?}: {status:?}");
        assert!(status.rebuild.is_none(), "{mode:?}: the rebuild ended: {status:?}");
    }
}
