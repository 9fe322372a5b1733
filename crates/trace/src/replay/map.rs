//! Where a trace request lands in the array: byte ranges widened to whole blocks, then
//! mapped into the array's logical blocks by wrapping (modulo the array), scaling (the
//! trace's address span onto the array) or packing (the trace's footprint onto the
//! array's first blocks, in address order). Every change to a request is counted.
//! Invariant: a mapped request lies wholly inside the array and has at least one block.

/// The largest request replayed: longer ones are cut to it (and counted), so that one
/// absurd length in a trace cannot make the replay allocate gigabytes.
pub const MAX_REQUEST_BYTES: u64 = 8 << 20;

use std::sync::Arc;

use super::footprint::Footprint;

/// How trace addresses beyond the array are brought into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapMode {
    /// Block address modulo the array's blocks.
    Wrap,
    /// Block address times array blocks over the trace's span (the end of its furthest
    /// request, found by a first pass over the trace).
    Scale { span_bytes: u64 },
    /// A block's rank in the trace's footprint (`footprint::trace_footprint` of the same
    /// trace and replay): distinct blocks stay distinct, requests stay contiguous, and
    /// the footprint takes the array's first `footprint.blocks()` blocks.
    Compact { footprint: Arc<Footprint> },
}

/// Counts of what mapping did to requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapStats {
    /// Requests not aligned to blocks at start or end, widened to whole blocks.
    pub widened: u64,
    /// Requests starting beyond the array, wrapped into it (`Wrap`).
    pub wrapped: u64,
    /// Requests that would have run past the array's end, moved back to end at it.
    pub moved_from_end: u64,
    /// Requests longer than the whole array or than `MAX_REQUEST_BYTES`, cut to that.
    pub clipped: u64,
}

/// A request's place in the array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapped {
    pub lba: u64,
    pub blocks: u64,
}

/// The trace blocks a request of `length_bytes` at `offset_bytes` covers, widened to whole
/// blocks of `block_bytes` and cut to `MAX_REQUEST_BYTES`: (first block, blocks, whether it
/// was widened).
fn widened(offset_bytes: u64, length_bytes: u64, block_bytes: u64) -> (u64, u64, bool) {
    let bb = block_bytes.max(1);
    let end_bytes = offset_bytes.saturating_add(length_bytes.max(1));
    let widened = !offset_bytes.is_multiple_of(bb) || !end_bytes.is_multiple_of(bb);
    let first = offset_bytes / bb;
    (first, end_bytes.div_ceil(bb) - first, widened)
}

/// The trace blocks a request covers, as the replay widens and cuts it (before it is
/// brought into the array): (first block, blocks).
pub fn trace_blocks(offset_bytes: u64, length_bytes: u64, block_bytes: u64) -> (u64, u64) {
    let (first, blocks, _) = widened(offset_bytes, length_bytes, block_bytes);
    (first, blocks.min((MAX_REQUEST_BYTES / block_bytes.max(1)).max(1)))
}

#[derive(Clone, Debug)]
pub struct AddressMap {
    mode: MapMode,
    array_blocks: u64,
    block_bytes: u64,
}

impl AddressMap {
    /// A map into an array of `array_blocks` (> 0) blocks of `block_bytes` (> 0).
    pub fn new(mode: MapMode, array_blocks: u64, block_bytes: u64) -> Self {
        AddressMap { mode, array_blocks: array_blocks.max(1), block_bytes: block_bytes.max(1) }
    }

    /// Maps `length_bytes` (> 0) at `offset_bytes`, counting what was changed in `stats`.
    pub fn map(&self, offset_bytes: u64, length_bytes: u64, stats: &mut MapStats) -> Mapped {
        let bb = self.block_bytes;
        let (first, mut blocks, widened) = widened(offset_bytes, length_bytes, bb);
        if widened {
            stats.widened += 1;
        }
        let most = self.array_blocks.min((MAX_REQUEST_BYTES / bb).max(1));
        if blocks > most {
            stats.clipped += 1;
            blocks = most;
        }
        let mut lba = match &self.mode {
            MapMode::Wrap => {
                if first >= self.array_blocks {
                    stats.wrapped += 1;
                }
                first % self.array_blocks
            }
            MapMode::Scale { span_bytes } => {
                let span_blocks = span_bytes.div_ceil(bb).max(1);
                (u128::from(first) * u128::from(self.array_blocks) / u128::from(span_blocks)) as u64
            }
            MapMode::Compact { footprint } => match footprint.rank(first) {
                Some(rank) if rank < self.array_blocks => rank,
                // Only a footprint of another trace or replay misses a block: the replay
                // goes on, wrapping it, and says so.
                _ => {
                    stats.wrapped += 1;
                    first % self.array_blocks
                }
            },
        };
        if lba + blocks > self.array_blocks {
            stats.moved_from_end += 1;
            lba = self.array_blocks - blocks;
        }
        Mapped { lba, blocks }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widens_wraps_and_moves() {
        let map = AddressMap::new(MapMode::Wrap, 100, 4096);
        let mut s = MapStats::default();
        assert_eq!(map.map(4096, 8192, &mut s), Mapped { lba: 1, blocks: 2 });
        assert_eq!(s, MapStats::default());
        assert_eq!(map.map(4095, 2, &mut s), Mapped { lba: 0, blocks: 2 });
        assert_eq!(s.widened, 1);
        assert_eq!(map.map(4096 * 105, 4096, &mut s), Mapped { lba: 5, blocks: 1 });
        assert_eq!(s.wrapped, 1);
        assert_eq!(map.map(4096 * 99, 4096 * 3, &mut s), Mapped { lba: 97, blocks: 3 });
        assert_eq!(s.moved_from_end, 1);
        assert_eq!(map.map(0, 4096 * 1000, &mut s), Mapped { lba: 0, blocks: 100 });
        assert_eq!(s.clipped, 1);
        let large = AddressMap::new(MapMode::Wrap, 1 << 30, 4096);
        assert_eq!(large.map(0, u64::MAX / 2, &mut s).blocks, MAX_REQUEST_BYTES / 4096);
        assert_eq!(s.clipped, 2);
    }

    #[test]
    fn packs_the_footprint_onto_the_array() {
        let footprint = Footprint::from_runs([(1000, 4), (5000, 2)]);
        let map = AddressMap::new(MapMode::Compact { footprint: Arc::new(footprint) }, 8, 4096);
        let mut s = MapStats::default();
        assert_eq!(map.map(4096 * 1001, 4096 * 3, &mut s), Mapped { lba: 1, blocks: 3 });
        assert_eq!(map.map(4096 * 5000, 4096 * 2, &mut s), Mapped { lba: 4, blocks: 2 });
        assert_eq!(s, MapStats::default());
        assert_eq!(map.map(4096 * 7, 4096, &mut s), Mapped { lba: 7, blocks: 1 });
        assert_eq!(s.wrapped, 1);
    }

    #[test]
    fn scales_the_span_onto_the_array() {
        let map = AddressMap::new(MapMode::Scale { span_bytes: 4096 * 1000 }, 100, 4096);
        let mut s = MapStats::default();
        assert_eq!(map.map(4096 * 500, 4096, &mut s).lba, 50);
        assert_eq!(map.map(4096 * 999, 4096, &mut s).lba, 99);
        assert_eq!(s, MapStats::default());
    }
}
