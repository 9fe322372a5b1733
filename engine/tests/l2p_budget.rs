//! The L2P cache's memory bound when the work touches many pages within one event: a
//! garbage collection scan after a restart, when every recovered entry waits for its page
//! to be made, must not make every such page resident before evicting.

use zapraid_engine::{Config, L2pConfig, Mode, RaidLevel, Request, Simulator};

mod common;
use common::BLOCK;

/// A logical space of many pages, so that making all of them resident is far above the
/// budget plus what relocations in flight may pin.
const LOGICAL_BLOCKS: u64 = 4096;
const PAGE_ENTRIES: u64 = 16;
const BUDGET_PAGES: u64 = 4;
/// Enough zones for the logical space and a few segments to spare, so that overwrites
/// soon need garbage collection.
const ZONES: u32 = 40;
/// Reads a garbage collection keeps in flight (each pins its page) and writes in flight
/// (each pins its pages): the most the cache may hold beyond the budget.
const PINNED_PAGES_AT_MOST: u64 = 64 + 16;

fn config() -> Config {
    let base = common::config(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 }, 1, LOGICAL_BLOCKS);
    let l2p = L2pConfig {
        budget_bytes: Some(BUDGET_PAGES * BLOCK as u64),
        page_entries: Some(PAGE_ENTRIES),
        checkpoint: false,
    };
    Config { l2p, ..base }
}

fn fill(lba: u64, round: u64) -> Vec<u8> {
    common::named_block(lba, round)
}

#[test]
fn garbage_collection_after_a_restart_stays_within_the_l2p_budget() {
    let geometry = || common::geometry(ZONES, 8, 10);
    let mut sim = Simulator::new(geometry(), config(), 3, None).unwrap();
    let mut id = 0;
    for lba in (0..LOGICAL_BLOCKS).step_by(8) {
        let data: Vec<u8> = (lba..lba + 8).flat_map(|l| fill(l, 1)).collect();
        sim.submit(id, Request::Write { lba, data });
        id += 1;
    }
    sim.run_until_idle();
    let mut sim = Simulator::recover(geometry(), config(), sim.power_cut().unwrap()).unwrap();
    let before = sim.engine.status();
    // Overwrites spread over the space until segments are reclaimed: each scan walks pages
    // whose entries wait in the recovery overlay.
    let mut lba = 0;
    while sim.engine.status().segments_reclaimed < before.segments_reclaimed + 3 {
        sim.submit(id, Request::Write { lba, data: fill(lba, 2) });
        id += 1;
        lba = (lba + 97) % LOGICAL_BLOCKS;
        if id % 16 == 0 {
            sim.run_until_idle();
        }
        assert!(id < 20 * LOGICAL_BLOCKS, "no segment reclaimed after {id} writes");
    }
    sim.run_until_idle();
    let l2p = sim.engine.status().l2p;
    let pages = LOGICAL_BLOCKS / PAGE_ENTRIES;
    eprintln!(
        "peak {} of {pages} pages cached (budget {BUDGET_PAGES}), {} mapping reads, {} writes",
        l2p.peak_cached_pages, l2p.mapping_reads, l2p.mapping_writes
    );
    assert!(
        l2p.peak_cached_pages <= BUDGET_PAGES + PINNED_PAGES_AT_MOST,
        "{} pages were cached at once, budget {BUDGET_PAGES}",
        l2p.peak_cached_pages
    );
    // Every block reads back.
    let mut expect: Vec<u8> = (0..LOGICAL_BLOCKS).flat_map(|l| fill(l, 1)).collect();
    let mut l = 0;
    for _ in 0..id - LOGICAL_BLOCKS / 8 {
        expect[l as usize * BLOCK..][..BLOCK].copy_from_slice(&fill(l, 2));
        l = (l + 97) % LOGICAL_BLOCKS;
    }
    sim.submit(id, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
    let got = sim.run_until_response(id).unwrap().result.unwrap();
    assert!(got == expect, "data changed");
}

/// A write taken while the array runs, waiting for its page to be read when a clean stop
/// begins, is written and acknowledged before the stop ends (a write submitted after the
/// stop began is refused), and reads back after the next start.
#[test]
fn a_write_waiting_for_its_page_when_a_stop_begins_is_written() {
    let geometry = || common::geometry(ZONES, 8, 10);
    let mut sim = Simulator::new(geometry(), config(), 5, None).unwrap();
    // Every page made and most evicted to the drives.
    let mut id = 0;
    for lba in (0..LOGICAL_BLOCKS).step_by(PAGE_ENTRIES as usize) {
        sim.submit(id, Request::Write { lba, data: fill(lba, 1) });
        id += 1;
    }
    sim.run_until_idle();
    sim.take_responses();
    let before = sim.engine.status().l2p;
    // LBA 0 is mapped, but its page is not cached: only on the drives.
    assert!(sim.engine.locate(0).is_none() && before.pages_on_drives > 0, "{before:?}");
    let waiting = id;
    sim.submit(waiting, Request::Write { lba: 0, data: fill(0, 2) });
    assert!(sim.take_responses().is_empty(), "the write waits for its page");
    sim.begin_stop();
    sim.submit(waiting + 1, Request::Write { lba: 8, data: fill(8, 2) });
    sim.stop();
    let responses = sim.take_responses();
    let result = |id| responses.iter().find(|r| r.id == id).map(|r| r.result.is_ok());
    assert_eq!(result(waiting), Some(true), "the waiting write was acknowledged");
    assert_eq!(result(waiting + 1), Some(false), "the write after the stop began was refused");
    assert!(sim.engine.status().l2p.mapping_reads > before.mapping_reads, "its page was read");
    let mut sim = Simulator::recover(geometry(), config(), std::mem::take(&mut sim.drives)).unwrap();
    sim.submit(waiting + 2, Request::Read { lba: 0, blocks: 1 });
    assert!(sim.run_until_response(waiting + 2).unwrap().result.unwrap() == fill(0, 2), "the write reads back");
}
