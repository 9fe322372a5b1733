//! The directory of the offloaded L2P table (`l2p`): per page, where its newest persisted
//! mapping block is, 4 bytes per page and always in memory; and the table's side of a
//! checkpoint (`format::checkpoint`): everything written back, the directory taken out at
//! a clean stop and put back at the next start.
//!
//! Invariants: a directory entry is `UNMAPPED` or a packed place inside the array; a
//! table is checkpointed only with nothing cached dirty, nothing being written back and no
//! recovered entry waiting in the overlay, so the directory alone describes it. Recovered
//! entries of a page with a copy on the drives exist only after a start from a checkpoint
//! that replayed segments written after it; reading the page applies them.

use super::*;

impl L2pTable {
    /// Where page `page`'s newest persisted copy is.
    pub fn directory_get(&self, page: PageIndex) -> Option<Physical> {
        match self.directory.get(page as usize) {
            Some(&packed) if packed != UNMAPPED => Some(self.unpack(packed)),
            _ => None,
        }
    }

    pub fn directory_set(&mut self, page: PageIndex, at: Physical) {
        self.pages_on_drives += u64::from(self.directory[page as usize] == UNMAPPED);
        self.directory[page as usize] = self.pack(at);
    }

    /// Page `page` has no persisted copy any more: its mapping block cannot be read and
    /// the page is cached dirty in its place (`Engine::page_lost`), to be written back.
    pub fn directory_forget(&mut self, page: PageIndex) {
        debug_assert!(self.is_cached(page), "a page whose copy is forgotten is cached");
        if std::mem::replace(&mut self.directory[page as usize], UNMAPPED) != UNMAPPED {
            self.pages_on_drives -= 1;
        }
    }

    /// Pages whose persisted copy is in `zone` (garbage collection moves them).
    pub fn directory_in_zone(&self, zone: u32) -> Vec<PageIndex> {
        let per_zone = self.drives * self.zone_capacity_blocks;
        (0..self.directory.len())
            .filter(|&p| self.directory[p] != UNMAPPED && u64::from(self.directory[p]) / per_zone == u64::from(zone))
            .map(|p| p as PageIndex)
            .collect()
    }

    /// Evicts every unpinned clean page and up to `max_dirty` dirty ones, whatever the
    /// budget: the dirty ones' entries, each to be written back (`writing_back`). A clean
    /// stop empties the cache this way before a checkpoint, a batch at a time (each
    /// write-back holds its block and its snapshot until persisted).
    pub fn evict_all(&mut self, max_dirty: usize) -> Vec<(PageIndex, Box<[u32]>)> {
        let mut dirty = Vec::new();
        let mut kept = Vec::new();
        for p in std::mem::take(&mut self.cache) {
            if p.pins > 0 || (p.dirty && dirty.len() == max_dirty) {
                kept.push(p);
                continue;
            }
            self.slots[p.page as usize] = NOT_CACHED;
            self.stats.evictions += 1;
            if p.dirty {
                self.dirty_pages -= 1;
                dirty.push((p.page, p.entries));
            }
        }
        for (slot, p) in kept.iter().enumerate() {
            self.slots[p.page as usize] = slot as u32;
        }
        self.cache = kept;
        self.hand = 0;
        dirty
    }

    /// Up to `limit` pages with recovered entries waiting in the overlay and no copy on
    /// the drives, made resident from memory (and so dirty). Pages with a copy on the
    /// drives (a start from a checkpoint replayed what came after it) are read instead
    /// (`next_overlaid_page_on_drives`).
    pub fn make_overlaid_pages_resident(&mut self, limit: usize) -> usize {
        let mut made = 0;
        let mut from = 0;
        while made < limit {
            let Some(page) = self.next_overlaid_page(from) else { break };
            debug_assert!(!self.is_cached(page));
            from = page + 1;
            if self.directory[page as usize] != UNMAPPED {
                continue;
            }
            let residency = self.ensure(page);
            debug_assert_eq!(residency, Residency::Cached);
            made += 1;
        }
        made
    }

    /// The first page from `from` on with recovered entries waiting in the overlay and a
    /// copy on the drives, and where that copy is: its entries the recovered ones replace
    /// are known only once it is read.
    pub fn next_overlaid_page_on_drives(&self, mut from: PageIndex) -> Option<(PageIndex, Physical)> {
        loop {
            let page = self.next_overlaid_page(from)?;
            if let Some(at) = self.directory_get(page) {
                return Some((page, at));
            }
            from = page + 1;
        }
    }

    /// The first page from `from` on with recovered entries waiting in the overlay.
    fn next_overlaid_page(&self, from: PageIndex) -> Option<PageIndex> {
        let first_lba = u64::from(from) * self.entries_per_page;
        self.overlay.range(first_lba..).next().map(|(&lba, _)| self.page_of(lba))
    }

    /// Whether recovered entries still wait for their pages.
    pub fn has_overlay(&self) -> bool {
        !self.overlay.is_empty()
    }

    /// Pages recovered entries wait for, at most (one per entry, and no more than the
    /// table has).
    pub fn overlaid_pages_at_most(&self) -> usize {
        self.overlay.len().min(self.page_count())
    }

    /// Whether the directory alone describes the table: nothing dirty, nothing being
    /// written back, nothing waiting in the overlay.
    pub fn is_checkpointable(&self) -> bool {
        self.dirty_pages == 0 && self.writing.is_empty() && self.overlay.is_empty()
    }

    /// The directory, packed, `UNMAPPED` for pages never written back.
    pub fn directory_entries(&self) -> &[u32] {
        &self.directory
    }

    /// Puts back a checkpoint's directory into a table with nothing cached and no
    /// directory yet (the overlay may hold entries replayed after the checkpoint: they
    /// replace the pages' when those are read); an error (and nothing changed) if it does
    /// not fit the table.
    pub fn install_directory(&mut self, entries: &[u32]) -> Result<()> {
        debug_assert!(self.cache.is_empty() && self.writing.is_empty() && self.pages_on_drives == 0);
        if entries.len() != self.directory.len() {
            return Err(Error::InvalidConfig {
                reason: format!("a directory of {} pages for a table of {}", entries.len(), self.directory.len()),
            });
        }
        if let Some(bad) = entries.iter().find(|&&e| e != UNMAPPED && !self.packed_in_range(e)) {
            return Err(Error::InvalidConfig { reason: format!("directory entry {bad} lies beyond the array") });
        }
        self.directory.copy_from_slice(entries);
        self.pages_on_drives = entries.iter().filter(|&&e| e != UNMAPPED).count() as u64;
        Ok(())
    }

    /// The zone a packed place is in.
    pub fn zone_of_packed(&self, packed: u32) -> u32 {
        self.unpack(packed).zone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evict_all_hands_back_dirty_pages_and_keeps_pinned_ones() {
        let mut table = L2pTable::new(4 * 1012, 2, 4, 64, 4096).unwrap();
        table.set_budget_pages(Some(8));
        for page in 0..3 {
            assert_eq!(table.ensure(page), Residency::Cached);
        }
        table.set(0, Physical { zone: 1, drive: 0, offset: 3 });
        table.pin(2);
        table.set(2 * 1012, Physical { zone: 2, drive: 1, offset: 5 });
        let dirty = table.evict_all(usize::MAX);
        assert_eq!(dirty.iter().map(|(p, _)| *p).collect::<Vec<_>>(), vec![0]);
        assert!(table.is_cached(2) && !table.is_cached(0) && !table.is_cached(1));
        assert_eq!(table.dirty_pages(), 1, "the pinned page stays, dirty");
        // A batch limit leaves the rest of the dirty pages cached.
        table.unpin(2);
        for page in [0, 1] {
            assert_eq!(table.ensure(page), Residency::Cached);
            table.set(u64::from(page) * 1012, Physical { zone: 1, drive: 0, offset: 9 });
        }
        assert_eq!(table.evict_all(2).len(), 2);
        assert_eq!(table.dirty_pages(), 1);
        assert_eq!(table.evict_all(2).len(), 1);
        assert_eq!((table.dirty_pages(), table.cached_pages()), (0, 0));
    }

    #[test]
    fn a_directory_round_trips_and_one_beyond_the_array_is_refused() {
        let mut table = L2pTable::new(3 * 1012, 2, 4, 64, 4096).unwrap();
        table.directory_set(1, Physical { zone: 3, drive: 1, offset: 7 });
        let saved = table.directory_entries().to_vec();
        let mut fresh = L2pTable::new(3 * 1012, 2, 4, 64, 4096).unwrap();
        fresh.install_directory(&saved).unwrap();
        assert_eq!(fresh.directory_get(1), Some(Physical { zone: 3, drive: 1, offset: 7 }));
        assert_eq!(fresh.pages_on_drives(), 1);
        let mut beyond = saved.clone();
        beyond[0] = (4 * 2 * 64) as u32;
        assert!(L2pTable::new(3 * 1012, 2, 4, 64, 4096).unwrap().install_directory(&beyond).is_err());
        assert!(L2pTable::new(3 * 1012, 2, 4, 64, 4096).unwrap().install_directory(&saved[..2]).is_err());
    }
}
