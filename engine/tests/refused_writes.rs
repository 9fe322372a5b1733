//! Writes the engine refuses after it counted them outstanding never hold up a flush, and
//! a second write under the id of one in progress is refused rather than lost track of.
//! Both hung every later flush before they were found in a review. Writes queued behind a
//! stripe that no drive can hold (every one failed) are answered too.

use zapraid_engine::{Config, L2pConfig, Mode, RaidLevel, Request, Response, Simulator};

mod common;
use common::BLOCK;

fn answered(responses: &[Response], id: u64) -> Option<bool> {
    responses.iter().find(|r| r.id == id).map(|r| r.result.is_ok())
}

#[test]
fn a_second_write_under_the_id_of_one_in_progress_is_refused_and_flushes_complete() {
    let config = common::config(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 }, 1, 120);
    let mut sim = Simulator::new(common::geometry(12, 8, 10), config, 5, None).unwrap();
    sim.submit(1, Request::Write { lba: 0, data: vec![1u8; BLOCK] });
    sim.submit(1, Request::Write { lba: 5, data: vec![2u8; BLOCK] });
    sim.submit(2, Request::Flush);
    let responses = sim.run_until_idle();
    let for_one: Vec<bool> = responses.iter().filter(|r| r.id == 1).map(|r| r.result.is_ok()).collect();
    assert_eq!(for_one, [false, true], "the second write refused at once, the first written");
    assert_eq!(answered(&responses, 2), Some(true), "the flush completes");
    sim.submit(3, Request::Read { lba: 0, blocks: 1 });
    sim.submit(4, Request::Read { lba: 5, blocks: 1 });
    let reads = sim.run_until_idle();
    let data = |id| reads.iter().find(|r| r.id == id).unwrap().result.as_ref().unwrap().clone();
    assert_eq!((data(3), data(4)), (vec![1u8; BLOCK], vec![0u8; BLOCK]), "only the first write landed");
}

#[test]
fn a_write_refused_after_waiting_for_its_l2p_page_does_not_hold_up_a_flush() {
    const LOGICAL_BLOCKS: u64 = 1024;
    const PAGE_ENTRIES: u64 = 16;
    let base = common::config(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 4 }, 1, LOGICAL_BLOCKS);
    let l2p = L2pConfig { budget_bytes: Some(2 * BLOCK as u64), page_entries: Some(PAGE_ENTRIES), checkpoint: false };
    let mut sim = Simulator::new(common::geometry(40, 8, 10), Config { l2p, ..base }, 3, None).unwrap();
    let mut id = 0;
    for lba in (0..LOGICAL_BLOCKS).step_by(PAGE_ENTRIES as usize) {
        sim.submit(id, Request::Write { lba, data: vec![5u8; PAGE_ENTRIES as usize * BLOCK] });
        id += 1;
    }
    sim.run_until_idle();
    // Pages of the second half cached one by one: the first half's go to the drives.
    for lba in (LOGICAL_BLOCKS / 2..LOGICAL_BLOCKS).step_by(PAGE_ENTRIES as usize) {
        sim.submit(id, Request::Read { lba, blocks: 1 });
        id += 1;
        sim.run_until_idle();
    }
    // A block and a half at LBA 3: counted as one block, parked for its page, refused.
    sim.submit(10_000, Request::Write { lba: 3, data: vec![7u8; BLOCK + BLOCK / 2] });
    sim.submit(10_001, Request::Flush);
    let responses = sim.run_until_idle();
    assert_eq!(answered(&responses, 10_000), Some(false), "refused: not whole blocks");
    assert_eq!(answered(&responses, 10_001), Some(true), "the flush does not wait for it");
}

/// Found by the hostile model test (RAID-1 of 3 drives, Zone Write, every drive failed
/// before the engine knew): the first stripe found every drive failed when it was issued
/// and was refused, but still counted in flight in its group, so the group was never done
/// and the writes queued behind it were never answered. Every Zone Write and Zone Append
/// layout alike.
#[test]
fn writes_queued_behind_a_stripe_no_drive_can_hold_are_answered() {
    for mode in [Mode::ZoneWriteOnly, Mode::ZoneAppendOnly, Mode::ZapRaid { group_size: 4 }] {
        for level in [RaidLevel::Raid1 { drives: 3 }, RaidLevel::Raid5 { drives: 4 }] {
            let config = common::config(level, mode, 1, 96);
            let mut sim = Simulator::new(common::geometry(6, 6, 8), config, 0, None).unwrap();
            for drive in &mut sim.drives {
                drive.fail();
            }
            let writes = 6;
            for id in 0..writes {
                sim.submit(id, Request::Write { lba: id % 2, data: vec![id as u8; BLOCK] });
            }
            sim.submit(writes, Request::Flush);
            let responses = sim.run_until_idle();
            for id in 0..writes {
                assert_eq!(answered(&responses, id), Some(false), "{level:?} {mode:?}: write {id}");
            }
            // Nothing it waits for is outstanding any more (the writes were answered).
            assert!(answered(&responses, writes).is_some(), "{level:?} {mode:?}: the flush");
        }
    }
}
