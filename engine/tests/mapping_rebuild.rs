//! A page of the offloaded L2P table whose mapping block is damaged beyond what parity
//! rebuilds is rebuilt from the segments' footers: every block it maps reads back, the
//! rebuild is counted, and the rebuilt page is written back (a start from the next
//! checkpoint reads it without rebuilding it again).

use zapraid_engine::format::BlockKind;
use zapraid_engine::{Config, L2pConfig, Mode, RaidLevel, Request, Simulator};

mod common;
use common::BLOCK;

const LOGICAL_BLOCKS: u64 = 1024;
const PAGE_ENTRIES: u64 = 16;
const BUDGET_PAGES: u64 = 4;
const ZONES: u32 = 40;

fn config() -> Config {
    let base = common::config(RaidLevel::Raid6 { drives: 6 }, Mode::ZoneWriteOnly, 1, LOGICAL_BLOCKS);
    let l2p = L2pConfig {
        budget_bytes: Some(BUDGET_PAGES * BLOCK as u64),
        page_entries: Some(PAGE_ENTRIES),
        checkpoint: true,
    };
    Config { l2p, ..base }
}

#[test]
fn a_mapping_block_damaged_beyond_parity_is_rebuilt_from_the_footers() {
    let geometry = || common::geometry(ZONES, 8, 10);
    let mut sim = Simulator::new(geometry(), config(), 5, None).unwrap();
    let mut id = 0;
    // Two rounds, the second over half the space, so that pages map into several segments
    // and older copies are there to lose against newer ones.
    for (round, step) in [(1, 1), (2, 2)] {
        for lba in (0..LOGICAL_BLOCKS).step_by(8 * step) {
            let data: Vec<u8> = (lba..lba + 8).flat_map(|l| common::named_block(l, round)).collect();
            sim.submit(id, Request::Write { lba, data });
            id += 1;
        }
        sim.run_until_idle();
    }
    let expect = |lba: u64| common::named_block(lba, if lba % 16 < 8 { 2 } else { 1 });
    assert!(sim.engine.status().l2p.pages_on_drives > BUDGET_PAGES, "pages were offloaded");

    // The first page with a mapping block: damage it and the two parity blocks of its row
    // (the same offset on each drive, Zone Write), three chunks of a RAID-6 stripe.
    let page = (0..(LOGICAL_BLOCKS / PAGE_ENTRIES) as u32).find(|p| sim.engine.locate_page(*p).is_some()).unwrap();
    let at = sim.engine.locate_page(page).unwrap();
    let lba = geometry().zone_start_lba(at.zone) + at.offset;
    assert_eq!(common::kind_of(&mut sim.drives[at.drive], lba), Some(BlockKind::Mapping));
    let mut damaged = vec![at.drive];
    for drive in (0..6).filter(|d| *d != at.drive) {
        if common::kind_of(&mut sim.drives[drive], lba) == Some(BlockKind::Parity) {
            damaged.push(drive);
        }
    }
    assert_eq!(damaged.len(), 3, "the mapping block and the two parity blocks of its row");
    for drive in damaged {
        sim.drives[drive].corrupt_block(lba, 11).unwrap();
    }

    common::read_all_checked(&mut sim, &mut id, LOGICAL_BLOCKS, PAGE_ENTRIES, expect);
    let status = sim.engine.status();
    assert_eq!(status.l2p.pages_rebuilt, 1, "the damaged page was rebuilt once");
    assert_eq!(status.mapped_blocks, LOGICAL_BLOCKS, "every block is still counted live");

    // The rebuilt page went back to the drives: a start from the stop's checkpoint reads
    // it, no rebuild needed.
    sim.stop();
    let checkpoint = sim.stop_checkpoint();
    assert!(checkpoint.is_some(), "the stop left a checkpoint");
    let drives = sim.power_cut().unwrap();
    let mut sim = Simulator::recover_with_checkpoint(geometry(), config(), drives, &[], checkpoint).unwrap();
    assert!(sim.recovery_report.checkpoint_generation.is_some(), "started from the checkpoint");
    common::read_all_checked(&mut sim, &mut id, LOGICAL_BLOCKS, PAGE_ENTRIES, expect);
    assert_eq!(sim.engine.status().l2p.pages_rebuilt, 0);
}
