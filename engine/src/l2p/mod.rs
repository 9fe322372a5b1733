//! The L2P table: logical block -> physical block, 4 bytes per logical block, in pages of
//! one mapping block each (`format::mapping`).
//!
//! Without a memory budget every page the array touched stays in memory (as the flat
//! table did). With one (`L2pTable::with_budget`), pages past the budget are evicted by
//! CLOCK (a reference bit per cached page); a dirty page evicted is handed to the engine
//! to write to the log as a mapping block, and the directory (page -> the place of its
//! newest persisted copy, 4 bytes per page, always in memory) says where to read it back.
//! A page whose copy cannot be read is made again from the log by the engine
//! (`install_rebuilt`).
//!
//! Invariants: `get`/`set`/`clear` touch only cached pages (the engine makes a page
//! resident first, `ensure`); a page is in at most one of: cached, being written back
//! (its snapshot kept until the copy is persisted, so a reload never reads a stale copy),
//! or only on the drives; recovered entries whose page is not cached wait in the overlay
//! and are applied when it is made resident. Pinned pages are never evicted: the budget
//! is exceeded only while every cached page is pinned by requests in flight, or dirty
//! while the engine cannot write them back (more drives failed than parity covers).
//!
//! A physical block is packed as `(zone * drives + drive) * zone_capacity + offset`; the
//! engine keeps a segment on the same zone index of every drive, so the zone names the
//! segment. `UNMAPPED` marks blocks never written (they read as zeros).

mod directory;

use std::collections::{BTreeMap, HashMap};

use crate::error::{Error, Result};
use crate::format::{decode_mapping_block, encode_mapping_block, mapping_entries_per_block, DecodeError};

/// Physical address of an unmapped logical block.
pub const UNMAPPED: u32 = u32::MAX;

/// Asks the CPU to load the cache line holding `value`.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
fn prefetch_line<T>(value: &T) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: a prefetch never faults and changes no memory; the pointer comes from a
    // reference, and SSE (which provides the instruction) is part of every x86-64 CPU.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(value).cast()) }
}

#[cfg(not(target_arch = "x86_64"))]
fn prefetch_line<T>(_value: &T) {}
/// Slot of a page not cached.
const NOT_CACHED: u32 = u32::MAX;

/// Where a logical block lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Physical {
    pub zone: u32,
    pub drive: usize,
    /// Zone-relative block.
    pub offset: u64,
}

/// Index of a page of the table (a mapping block's worth of entries).
pub type PageIndex = u32;

struct Page {
    page: PageIndex,
    entries: Box<[u32]>,
    dirty: bool,
    referenced: bool,
    pins: u32,
}

/// What making a page resident needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Residency {
    /// Cached now (it was, or it was made from memory: a snapshot, the overlay, empty).
    Cached,
    /// Its only copy is on the drives, here: read it and `install` it.
    OnDrive(Physical),
}

/// Counters for status and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct L2pStats {
    pub lookups: u64,
    pub hits: u64,
    pub mapping_reads: u64,
    pub mapping_writes: u64,
    pub evictions: u64,
    /// Most pages ever cached at once, pinned ones included: what the budget bounds (with
    /// the pins of requests and relocations in flight on top).
    pub peak_cached_pages: u64,
}

pub struct L2pTable {
    logical_blocks: u64,
    drives: u64,
    zone_capacity_blocks: u64,
    /// Physical blocks of the array: packed entries are below it.
    physical_blocks: u64,
    entries_per_page: u64,
    /// Most pages cached at once (pinned pages aside); None: no eviction.
    budget_pages: Option<usize>,
    /// Per page, its index in `cache`, or `NOT_CACHED` (an array index, not a hash, on the
    /// hot path, and 4 bytes per page however large the array).
    slots: Vec<u32>,
    /// The cached pages, which are also the CLOCK ring, and its hand.
    cache: Vec<Page>,
    hand: usize,
    dirty_pages: usize,
    /// Cached pages with a pin.
    pinned_pages: usize,
    pages_on_drives: u64,
    /// Per page, where its newest persisted copy is (packed), or `UNMAPPED`.
    directory: Vec<u32>,
    /// Pages evicted dirty whose copy is not persisted yet: the timestamp of the newest
    /// write-back and the entries it carries.
    writing: HashMap<PageIndex, (u64, Box<[u32]>)>,
    /// Entries recovery found whose page is not cached yet.
    overlay: BTreeMap<u64, u32>,
    stats: L2pStats,
}

impl L2pTable {
    /// A table for `logical_blocks` over `zones` zones of `zone_capacity_blocks` on each of
    /// `drives` drives, pages of blocks of `block_size_bytes`, every page kept in memory;
    /// an error if physical addresses would not fit in 32 bits.
    pub fn new(
        logical_blocks: u64,
        drives: usize,
        zones: u32,
        zone_capacity_blocks: u64,
        block_size_bytes: u32,
    ) -> Result<Self> {
        let physical = u64::from(zones) * drives as u64 * zone_capacity_blocks;
        if physical >= u64::from(UNMAPPED) {
            return Err(Error::InvalidConfig {
                reason: format!("{physical} physical blocks do not fit the 4-byte L2P entries"),
            });
        }
        let entries_per_page = mapping_entries_per_block(block_size_bytes) as u64;
        if entries_per_page == 0 {
            return Err(Error::InvalidConfig { reason: format!("{block_size_bytes}-byte blocks hold no L2P entries") });
        }
        let page_count = usize::try_from(logical_blocks.div_ceil(entries_per_page))
            .map_err(|_| Error::InvalidConfig { reason: format!("{logical_blocks} logical blocks") })?;
        Ok(L2pTable {
            logical_blocks,
            drives: drives as u64,
            zone_capacity_blocks,
            physical_blocks: physical,
            entries_per_page,
            budget_pages: None,
            slots: vec![NOT_CACHED; page_count],
            cache: Vec::new(),
            hand: 0,
            dirty_pages: 0,
            pinned_pages: 0,
            pages_on_drives: 0,
            directory: vec![UNMAPPED; page_count],
            writing: HashMap::new(),
            overlay: BTreeMap::new(),
            stats: L2pStats::default(),
        })
    }

    /// Physical addresses over `zones` zones from now on (a grown array numbers more
    /// segments; existing addresses pack as before); an error if they would not fit.
    pub fn set_zones(&mut self, zones: u32) -> Result<()> {
        self.physical_blocks = self.physical_blocks.max(self.check_zones(zones)?);
        Ok(())
    }

    /// The physical blocks of `zones` zones, if their addresses fit the entries.
    pub fn check_zones(&self, zones: u32) -> Result<u64> {
        let physical = u64::from(zones) * self.drives * self.zone_capacity_blocks;
        if physical >= u64::from(UNMAPPED) {
            return Err(Error::InvalidConfig {
                reason: format!("{physical} physical blocks do not fit the 4-byte L2P entries"),
            });
        }
        Ok(physical)
    }

    /// Keeps at most `budget_pages` pages cached (at least one), the rest on the drives.
    pub fn set_budget_pages(&mut self, budget_pages: Option<usize>) {
        self.budget_pages = budget_pages.map(|b| b.max(1));
    }

    pub fn budget_pages(&self) -> Option<usize> {
        self.budget_pages
    }

    pub fn logical_blocks(&self) -> u64 {
        self.logical_blocks
    }

    pub fn page_count(&self) -> usize {
        self.slots.len()
    }

    /// Makes pages of `entries` entries (at most what a mapping block holds), so that small
    /// tables have many pages (tests exercise eviction this way). Only while the table
    /// has no page in memory or on the drives.
    pub fn set_page_entries(&mut self, entries: u64) -> Result<()> {
        let fits = entries > 0 && entries <= self.entries_per_page;
        let untouched =
            self.cache.is_empty() && self.writing.is_empty() && self.directory.iter().all(|d| *d == UNMAPPED);
        if !fits || !untouched {
            return Err(Error::InvalidConfig { reason: format!("L2P pages of {entries} entries") });
        }
        let page_count = self.logical_blocks.div_ceil(entries) as usize;
        self.entries_per_page = entries;
        self.slots = vec![NOT_CACHED; page_count];
        self.directory = vec![UNMAPPED; page_count];
        Ok(())
    }

    pub fn entries_per_page(&self) -> u64 {
        self.entries_per_page
    }

    pub fn page_of(&self, lba: u64) -> PageIndex {
        (lba / self.entries_per_page) as PageIndex
    }

    /// The pages holding LBAs `lba..lba + blocks`.
    pub fn pages_of(&self, lba: u64, blocks: u64) -> std::ops::RangeInclusive<PageIndex> {
        self.page_of(lba)..=self.page_of(lba + blocks.max(1) - 1)
    }

    pub fn cached_pages(&self) -> usize {
        self.cache.len()
    }

    /// Pages whose newest persisted copy is a mapping block (kept counted: O(1)).
    pub fn pages_on_drives(&self) -> u64 {
        self.pages_on_drives
    }

    /// More pages cached than the budget, some of them not pinned: evicting would help.
    pub fn over_budget(&self) -> bool {
        self.budget_pages.is_some_and(|b| self.cache.len() > b && self.cache.len() > self.pinned_pages)
    }

    /// Pages reads may still bring into the cache (cached pages and snapshots being written
    /// back count): up to one past the budget, as a request's page read may go (eviction
    /// follows, so a cache that sits at its budget still takes one at a time); unbounded
    /// without a budget.
    pub fn room_pages(&self) -> usize {
        self.budget_pages.map_or(usize::MAX, |b| (b + 1).saturating_sub(self.cache.len() + self.writing.len()))
    }

    pub fn dirty_pages(&self) -> usize {
        self.dirty_pages
    }

    pub fn stats(&self) -> L2pStats {
        self.stats
    }

    pub fn is_cached(&self, page: PageIndex) -> bool {
        self.slots[page as usize] != NOT_CACHED
    }

    fn cached(&self, page: usize) -> Option<&Page> {
        self.cache.get(self.slots[page] as usize)
    }

    fn cached_mut(&mut self, page: usize) -> Option<&mut Page> {
        self.cache.get_mut(self.slots[page] as usize)
    }

    /// Makes `page` cached if memory holds it; else says where to read it.
    pub fn ensure(&mut self, page: PageIndex) -> Residency {
        self.stats.lookups += 1;
        if let Some(p) = self.cached_mut(page as usize) {
            p.referenced = true;
            self.stats.hits += 1;
            return Residency::Cached;
        }
        if let Some((_, entries)) = self.writing.get(&page) {
            let entries = entries.clone();
            let replaced = self.insert(page, entries, true);
            debug_assert!(replaced.is_empty(), "a page written back had its recovered entries applied");
            return Residency::Cached;
        }
        match self.directory[page as usize] {
            UNMAPPED => {
                let entries = vec![UNMAPPED; self.page_len(page)].into_boxed_slice();
                let replaced = self.insert(page, entries, false);
                debug_assert!(replaced.is_empty(), "an empty page replaces nothing");
                Residency::Cached
            }
            packed => Residency::OnDrive(self.unpack(packed)),
        }
    }

    /// Caches `page` from its mapping block as read from the drives (unless something
    /// cached it meanwhile); a block that does not decode is an error, never entries.
    /// Returns the page's entries that recovered ones waiting in the overlay replaced (a
    /// start from a checkpoint replayed what came after it): the caller unmaps them from
    /// their segments' live counts.
    pub fn install(&mut self, page: PageIndex, block: &[u8], array_uuid: [u8; 16]) -> Result<Vec<u32>, DecodeError> {
        self.stats.mapping_reads += 1;
        let entries = decode_mapping_block(block, array_uuid, u64::from(page))?;
        if entries.len() != self.page_len(page) {
            return Err(DecodeError::Field(format!(
                "{} entries, page {page} has {}",
                entries.len(),
                self.page_len(page)
            )));
        }
        if entries.iter().any(|&e| e != UNMAPPED && !self.packed_in_range(e)) {
            return Err(DecodeError::Field("an entry beyond the array".into()));
        }
        if self.is_cached(page) {
            return Ok(Vec::new());
        }
        Ok(self.insert(page, entries.into_boxed_slice(), false))
    }

    /// Caches `page` with entries rebuilt from the log (its mapping block could not be
    /// read), dirty, so that it is written back again (unless something cached it
    /// meanwhile). Returns the entries recovered ones waiting in the overlay replaced.
    pub fn install_rebuilt(&mut self, page: PageIndex, entries: Box<[u32]>) -> Vec<u32> {
        debug_assert_eq!(entries.len(), self.page_len(page));
        debug_assert!(entries.iter().all(|&e| e == UNMAPPED || self.packed_in_range(e)));
        if self.is_cached(page) {
            return Vec::new();
        }
        self.insert(page, entries, true)
    }

    /// Caches a page and applies the overlay's entries for it (which make it dirty).
    /// Returns the mapped entries they replaced.
    fn insert(&mut self, page: PageIndex, mut entries: Box<[u32]>, mut dirty: bool) -> Vec<u32> {
        debug_assert!(!self.is_cached(page));
        let first = u64::from(page) * self.entries_per_page;
        let mut replaced = Vec::new();
        while let Some((&lba, &packed)) = self.overlay.range(first..first + entries.len() as u64).next() {
            self.overlay.remove(&lba);
            let old = std::mem::replace(&mut entries[(lba - first) as usize], packed);
            if old != UNMAPPED && old != packed {
                replaced.push(old);
            }
            dirty = true;
        }
        self.dirty_pages += usize::from(dirty);
        self.slots[page as usize] = self.cache.len() as u32;
        self.cache.push(Page { page, entries, dirty, referenced: true, pins: 0 });
        self.stats.peak_cached_pages = self.stats.peak_cached_pages.max(self.cache.len() as u64);
        replaced
    }

    pub fn pin(&mut self, page: PageIndex) {
        let p = self.cached_mut(page as usize).expect("pinned pages are cached");
        p.pins += 1;
        let first = p.pins == 1;
        self.pinned_pages += usize::from(first);
    }

    pub fn unpin(&mut self, page: PageIndex) {
        let p = self.cached_mut(page as usize).expect("pinned pages stay cached");
        debug_assert!(p.pins > 0);
        p.pins -= 1;
        let last = p.pins == 0;
        self.pinned_pages -= usize::from(last);
    }

    /// Evicts pages past the budget (CLOCK): returns the dirty ones' entries, each to be
    /// written back (`writing_back`). Pinned pages stay, and with `keep_dirty` (nothing
    /// could write them back) dirty ones too.
    pub fn evict(&mut self, keep_dirty: bool) -> Vec<(PageIndex, Box<[u32]>)> {
        let mut dirty = Vec::new();
        let Some(budget) = self.budget_pages else { return dirty };
        // Two sweeps clear every reference bit: a third finds a victim unless all are pinned.
        let mut steps_left = 3 * self.cache.len();
        while self.cache.len() > budget && steps_left > 0 {
            steps_left -= 1;
            self.hand %= self.cache.len();
            let p = &mut self.cache[self.hand];
            if p.pins > 0 || (keep_dirty && p.dirty) || std::mem::take(&mut p.referenced) {
                self.hand += 1;
                continue;
            }
            let p = self.cache.swap_remove(self.hand);
            self.slots[p.page as usize] = NOT_CACHED;
            if let Some(moved) = self.cache.get(self.hand) {
                self.slots[moved.page as usize] = self.hand as u32;
            }
            let page = p.page;
            self.stats.evictions += 1;
            if p.dirty {
                self.dirty_pages -= 1;
                dirty.push((page, p.entries));
            }
        }
        dirty
    }

    /// Takes `page` out of the cache whatever the budget, dirty or not, unless it is pinned
    /// or not cached: its entries, to be written back (`writing_back`). For a page whose
    /// copy on the drives cannot be read and keeps its segment from being reclaimed.
    pub fn evict_page(&mut self, page: PageIndex) -> Option<Box<[u32]>> {
        let slot = self.slots[page as usize];
        if self.cache.get(slot as usize).is_none_or(|p| p.pins > 0) {
            return None;
        }
        let p = self.cache.swap_remove(slot as usize);
        self.slots[page as usize] = NOT_CACHED;
        if let Some(moved) = self.cache.get(slot as usize) {
            self.slots[moved.page as usize] = slot;
        }
        self.stats.evictions += 1;
        self.dirty_pages -= usize::from(p.dirty);
        Some(p.entries)
    }

    /// Encodes a page's entries as its mapping block.
    pub fn encode(&self, page: PageIndex, entries: &[u32], array_uuid: [u8; 16], block: &mut [u8]) {
        encode_mapping_block(array_uuid, u64::from(page), entries, block);
    }

    /// A write-back of `page` with these entries is issued with `timestamp`.
    pub fn writing_back(&mut self, page: PageIndex, timestamp: u64, entries: Box<[u32]>) {
        self.stats.mapping_writes += 1;
        self.writing.insert(page, (timestamp, entries));
    }

    /// Whether a write-back of `page` is on its way to the drives.
    pub fn being_written_back(&self, page: PageIndex) -> bool {
        self.writing.contains_key(&page)
    }

    /// The write-back of `page` with `timestamp` is persisted: whether it is the newest
    /// (the directory is to point at it; its snapshot is dropped).
    pub fn written_back(&mut self, page: PageIndex, timestamp: u64) -> bool {
        match self.writing.get(&page) {
            Some((newest, _)) if *newest == timestamp => {
                self.writing.remove(&page);
                true
            }
            _ => false,
        }
    }

    /// The write-back of `page` with `timestamp` failed: the page comes back cached and
    /// dirty, to be written again later.
    pub fn write_back_failed(&mut self, page: PageIndex, timestamp: u64) {
        if self.writing.get(&page).is_some_and(|(newest, _)| *newest == timestamp) {
            let (_, entries) = self.writing.remove(&page).expect("present");
            if !self.is_cached(page) {
                let replaced = self.insert(page, entries, true);
                debug_assert!(replaced.is_empty(), "a page written back had its recovered entries applied");
            }
        }
    }

    /// Whether page `page` may map anything: cached, being written, on the drives, or with
    /// recovered entries waiting (a page none of these is maps nothing).
    pub fn may_map(&self, page: PageIndex) -> bool {
        let first = u64::from(page) * self.entries_per_page;
        self.is_cached(page)
            || self.writing.contains_key(&page)
            || self.directory[page as usize] != UNMAPPED
            || self.overlay.range(first..first + self.entries_per_page).next().is_some()
    }

    /// A recovered entry: applied now if its page is cached, else when it is made resident.
    /// Returns the entry it replaced, if its page was cached.
    pub fn recover(&mut self, lba: u64, at: Physical) {
        let page = self.page_of(lba);
        if self.is_cached(page) {
            self.set(lba, at);
        } else {
            self.overlay.insert(lba, self.pack(at));
        }
    }

    /// Starts bringing `lba`'s entry into the CPU cache, for a lookup or update that comes
    /// later (a write's, when its stripe persists): at random LBAs over a large table the
    /// entry is a cache miss otherwise, paid where it is used. A hint only: no effect on
    /// what any lookup returns.
    pub fn prefetch(&self, lba: u64) {
        if lba >= self.logical_blocks {
            return;
        }
        let (page, index) = self.split(lba);
        if let Some(entry) = self.cached(page).and_then(|p| p.entries.get(index)) {
            prefetch_line(entry);
        }
    }

    /// Where `lba` lives; its page must be cached.
    pub fn get(&self, lba: u64) -> Option<Physical> {
        if lba >= self.logical_blocks {
            return None;
        }
        let (page, index) = self.split(lba);
        let p = self.cached(page);
        debug_assert!(p.is_some(), "L2P lookup of LBA {lba} on a page not cached");
        match p.map_or(UNMAPPED, |p| p.entries[index]) {
            UNMAPPED => None,
            packed => Some(self.unpack(packed)),
        }
    }

    /// Where `lba` lives, looked up wherever memory holds it (cached, being written back,
    /// recovered); None if only the drives know. For tests and tools, not the data path.
    pub fn peek(&self, lba: u64) -> Option<Option<Physical>> {
        if lba >= self.logical_blocks {
            return Some(None);
        }
        let (page, index) = self.split(lba);
        let packed = if let Some(p) = self.cached(page) {
            p.entries[index]
        } else if let Some((_, entries)) = self.writing.get(&(page as PageIndex)) {
            entries[index]
        } else if let Some(&packed) = self.overlay.get(&lba) {
            packed
        } else if self.directory[page] == UNMAPPED {
            UNMAPPED
        } else {
            return None;
        };
        Some((packed != UNMAPPED).then(|| self.unpack(packed)))
    }

    pub fn set(&mut self, lba: u64, at: Physical) {
        debug_assert!(at.offset < self.zone_capacity_blocks && (at.drive as u64) < self.drives);
        let packed = self.pack(at);
        self.store(lba, packed);
    }

    /// Forgets where `lba` lives: it reads as zeros until written again.
    pub fn clear(&mut self, lba: u64) {
        self.store(lba, UNMAPPED);
    }

    fn store(&mut self, lba: u64, packed: u32) {
        let (page, index) = self.split(lba);
        let p = self.cached_mut(page).expect("L2P updates touch cached pages");
        p.entries[index] = packed;
        p.referenced = true;
        if !p.dirty {
            p.dirty = true;
            self.dirty_pages += 1;
        }
    }

    /// Bytes of memory the cached pages and the directory take.
    pub fn memory_bytes(&self) -> usize {
        let entry = std::mem::size_of::<u32>();
        (self.cache.len() * self.entries_per_page as usize + self.directory.len() + self.slots.len()) * entry
    }

    fn page_len(&self, page: PageIndex) -> usize {
        let first = u64::from(page) * self.entries_per_page;
        (self.logical_blocks - first).min(self.entries_per_page) as usize
    }

    fn split(&self, lba: u64) -> (usize, usize) {
        ((lba / self.entries_per_page) as usize, (lba % self.entries_per_page) as usize)
    }

    pub(crate) fn pack(&self, at: Physical) -> u32 {
        let packed = (u64::from(at.zone) * self.drives + at.drive as u64) * self.zone_capacity_blocks + at.offset;
        debug_assert!(packed < u64::from(UNMAPPED));
        packed as u32
    }

    pub(crate) fn packed_in_range(&self, packed: u32) -> bool {
        u64::from(packed) < self.physical_blocks
    }

    pub(crate) fn unpack(&self, packed: u32) -> Physical {
        let packed = u64::from(packed);
        let offset = packed % self.zone_capacity_blocks;
        let zone_drive = packed / self.zone_capacity_blocks;
        Physical { zone: (zone_drive / self.drives) as u32, drive: (zone_drive % self.drives) as usize, offset }
    }
}

#[cfg(test)]
mod tests;
