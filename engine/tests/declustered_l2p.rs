//! A declustered array with a bounded L2P table (issue 35): pages of the table offloaded
//! to the drives as mapping blocks while a drive is rebuilt into distributed spare space;
//! a mapping block damaged beyond parity is rebuilt from the segments' footers, read
//! through the lanes as they stand (moved ones included); every block reads back, also
//! after a clean stop and a start from its checkpoint, the drive still in spare space.

use zapraid_engine::format::BlockKind;
use zapraid_engine::l2p::Physical;
use zapraid_engine::{Config, Declustering, L2pConfig, Mode, RaidLevel, Request, Simulator};

mod common;
use common::BLOCK;

const LOGICAL_BLOCKS: u64 = 1024;
const PAGE_ENTRIES: u64 = 16;
const BUDGET_PAGES: u64 = 4;
/// Each drive's zones: with two segments per zone index, the array has twice as many.
const ZONES: u32 = 24;
/// RAID-6 4+2 over 13 drives, one distributed spare: two segments per zone index.
const DRIVES: u32 = 13;
const STRIPE: usize = 6;

fn geometry() -> zapraid_zns::Geometry {
    common::geometry(ZONES, 8, 10)
}

fn config() -> Config {
    let base = common::config(RaidLevel::Raid6 { drives: STRIPE }, Mode::ZoneWriteOnly, 1, LOGICAL_BLOCKS);
    let l2p = L2pConfig {
        budget_bytes: Some(BUDGET_PAGES * BLOCK as u64),
        page_entries: Some(PAGE_ENTRIES),
        checkpoint: true,
    };
    Config { l2p, declustering: Declustering::wide(DRIVES, 1), ..base }
}

#[test]
fn a_declustered_arrays_mapping_block_damaged_beyond_parity_is_rebuilt_from_the_footers() {
    let mut sim = Simulator::new(geometry(), config(), 5, None).unwrap();
    let mut id = 0;
    let write_round = |sim: &mut Simulator, id: &mut u64, round: u64, step: u64| {
        for lba in (0..LOGICAL_BLOCKS).step_by(8 * step as usize) {
            let data: Vec<u8> = (lba..lba + 8).flat_map(|l| common::named_block(l, round)).collect();
            sim.submit(*id, Request::Write { lba, data });
            *id += 1;
        }
        sim.run_until_idle();
    };
    write_round(&mut sim, &mut id, 1, 1);
    // A drive fails and is rebuilt into spare space: lanes move.
    let failed = 3;
    sim.drives[failed].fail();
    sim.engine.fail_drive(failed);
    sim.rebuild_into_spares(failed).unwrap();
    sim.run_until_idle();
    assert_eq!(sim.engine.drives_in_spare_space(), vec![failed]);
    // The second round over half the space: pages map into several segments, older
    // copies there to lose against newer ones, some segments with a lane in spare space.
    write_round(&mut sim, &mut id, 2, 2);
    let expect = |lba: u64| common::named_block(lba, if lba % 16 < 8 { 2 } else { 1 });
    assert!(sim.engine.status().l2p.pages_on_drives > BUDGET_PAGES, "pages were offloaded");
    common::read_all_checked(&mut sim, &mut id, LOGICAL_BLOCKS, PAGE_ENTRIES, expect);

    // A page's mapping block and the two parity blocks of its row (the same offset in each
    // lane, Zone Write): three chunks of a RAID-6 stripe, wherever its lanes lie.
    let page = (0..(LOGICAL_BLOCKS / PAGE_ENTRIES) as u32).find(|p| sim.engine.locate_page(*p).is_some()).unwrap();
    let at = sim.engine.locate_page(page).unwrap();
    let (drive, lba) = sim.engine.drive_block(at);
    assert_eq!(common::kind_of(&mut sim.drives[drive], lba), Some(BlockKind::Mapping));
    let mut damaged = vec![(drive, lba)];
    for lane in (0..STRIPE).filter(|l| *l != at.drive) {
        let (drive, lba) = sim.engine.drive_block(Physical { drive: lane, ..at });
        if common::kind_of(&mut sim.drives[drive], lba) == Some(BlockKind::Parity) {
            damaged.push((drive, lba));
        }
    }
    assert_eq!(damaged.len(), 3, "the mapping block and the two parity blocks of its row");
    for (drive, lba) in damaged {
        sim.drives[drive].corrupt_block(lba, 11).unwrap();
    }
    // Pushed out of memory by reading the others: read again, its block is found damaged.
    common::read_all_checked(&mut sim, &mut id, LOGICAL_BLOCKS, PAGE_ENTRIES, expect);
    let status = sim.engine.status();
    assert_eq!(status.l2p.pages_rebuilt, 1, "the damaged page was rebuilt once");
    assert_eq!(status.mapped_blocks, LOGICAL_BLOCKS, "every block is still counted live");

    // A start from the stop's checkpoint, told the drive is in spare space, reads the
    // rebuilt page from the drives.
    sim.stop();
    let checkpoint = sim.stop_checkpoint();
    assert!(checkpoint.is_some(), "the stop left a checkpoint");
    let drives = sim.power_cut().unwrap();
    let spared = [failed];
    let mut sim = Simulator::recover_with_spared(geometry(), config(), drives, &spared, &spared, checkpoint).unwrap();
    assert!(sim.recovery_report.checkpoint_generation.is_some(), "started from the checkpoint");
    common::read_all_checked(&mut sim, &mut id, LOGICAL_BLOCKS, PAGE_ENTRIES, expect);
    assert_eq!(sim.engine.status().l2p.pages_rebuilt, 0);
}
