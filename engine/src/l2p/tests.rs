//! Tests of the L2P table: entries, pages, the budget and the directory.

use super::*;

const BLOCK_BYTES: u32 = 4096;

fn at(zone: u32, offset: u64) -> Physical {
    Physical { zone, drive: 1, offset }
}

#[test]
fn round_trips_and_starts_unmapped() {
    let mut t = L2pTable::new(100, 4, 31, 15872, BLOCK_BYTES).unwrap();
    assert_eq!(t.ensure(0), Residency::Cached);
    assert_eq!(t.get(5), None);
    let at = Physical { zone: 30, drive: 3, offset: 15871 };
    t.set(5, at);
    assert_eq!(t.get(5), Some(at));
    assert_eq!(t.get(1000), None);
}

#[test]
fn refuses_arrays_too_big_for_four_bytes() {
    assert!(L2pTable::new(10, 8, 3690, 275_712, BLOCK_BYTES).is_err());
    assert!(L2pTable::new(10, 4, 3690, 275_712, BLOCK_BYTES).is_ok(), "the paper's testbed fits");
}

#[test]
fn evicts_by_clock_and_reads_back_what_it_wrote() {
    let mut t = L2pTable::new(10_000, 4, 8, 1000, BLOCK_BYTES).unwrap();
    t.set_budget_pages(Some(2));
    let per_page = t.entries_per_page();
    for page in 0..3u32 {
        assert_eq!(t.ensure(page), Residency::Cached);
        t.set(u64::from(page) * per_page, at(page, 7));
    }
    let evicted = t.evict(false);
    assert_eq!(evicted.len(), 1, "one page over the budget");
    assert_eq!(t.cached_pages(), 2);
    let (page, entries) = evicted.into_iter().next().unwrap();
    // Until its copy is persisted a reload comes from the snapshot.
    t.writing_back(page, 9, entries.clone());
    assert!(!t.is_cached(page));
    assert_eq!(t.peek(u64::from(page) * per_page), Some(Some(at(page, 7))));
    assert!(t.written_back(page, 9));
    t.directory_set(page, at(5, 3));
    assert_eq!(t.ensure(page), Residency::OnDrive(at(5, 3)));
    assert_eq!(t.peek(u64::from(page) * per_page), None);
    let mut block = vec![0; BLOCK_BYTES as usize];
    t.encode(page, &entries, [1; 16], &mut block);
    t.install(page, &block, [1; 16]).unwrap();
    assert_eq!(t.get(u64::from(page) * per_page), Some(at(page, 7)));
    assert_eq!(t.directory_in_zone(5), vec![page]);
}

#[test]
fn pinned_pages_stay_and_overlay_applies_on_load() {
    let mut t = L2pTable::new(10_000, 4, 8, 1000, BLOCK_BYTES).unwrap();
    t.set_budget_pages(Some(1));
    let per_page = t.entries_per_page();
    t.recover(per_page + 3, at(2, 2));
    assert!(t.may_map(1) && !t.may_map(2));
    t.ensure(0);
    t.pin(0);
    t.ensure(1);
    t.pin(1);
    assert!(t.evict(false).is_empty() && t.cached_pages() == 2, "both pinned");
    assert_eq!(t.get(per_page + 3), Some(at(2, 2)));
    t.unpin(0);
    let evicted = t.evict(false);
    assert!(evicted.is_empty(), "page 0 was clean: dropped, not written");
    assert!(t.is_cached(1) && !t.is_cached(0));
}

#[test]
fn dirty_pages_stay_past_the_budget_when_asked() {
    let mut t = L2pTable::new(10_000, 4, 8, 1000, BLOCK_BYTES).unwrap();
    t.set_budget_pages(Some(1));
    let per_page = t.entries_per_page();
    t.ensure(0);
    t.ensure(1);
    t.set(per_page, at(1, 1));
    t.ensure(2);
    assert!(t.evict(true).is_empty(), "the dirty page is kept, the clean ones dropped");
    assert_eq!(t.cached_pages(), 1);
    assert!(t.is_cached(1) && !t.over_budget());
    t.ensure(0);
    t.set(0, at(0, 1));
    assert!(t.evict(true).is_empty() && t.cached_pages() == 2, "both dirty: kept past the budget");
    let evicted = t.evict(false);
    assert_eq!((evicted.len(), t.cached_pages()), (1, 1), "written back when they can be");
}
