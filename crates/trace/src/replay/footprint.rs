//! A trace's footprint: the distinct blocks its replayed requests touch, as sorted runs of
//! consecutive blocks, in the trace's block addresses or in the array's (after mapping).
//! It is what a prefill writes before the clock starts, what `--utilization` sizes the
//! simulated array by, and what `MapMode::Compact` packs onto the array: a block's place
//! there is its rank in the footprint, so every request, whose blocks are all in the
//! footprint, stays one contiguous range.
//!
//! Memory grows with the number of runs, not with the trace: runs are merged every
//! `MERGE_EVERY_RUNS` requests.

use crate::error::Result;
use crate::record::{Op, TraceRecord};

use super::map::{trace_blocks, AddressMap, MapStats, Mapped};
use super::ReplayConfig;

/// Runs collected before they are sorted and merged into the footprint so far.
const MERGE_EVERY_RUNS: usize = 1 << 20;

/// Distinct blocks as sorted, disjoint, non-adjacent runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Footprint {
    /// (first block, blocks), sorted by first block.
    runs: Vec<(u64, u64)>,
    /// Blocks in the runs before each run: its first block's rank.
    ranks: Vec<u64>,
    blocks: u64,
}

impl Footprint {
    /// The footprint of these runs of blocks (any order, overlapping or not).
    pub fn from_runs(runs: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let mut builder = FootprintBuilder::default();
        for (first, blocks) in runs {
            builder.add(first, blocks);
        }
        builder.finish()
    }

    /// Distinct blocks.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// The runs of consecutive blocks, in address order: (first block, blocks).
    pub fn runs(&self) -> &[(u64, u64)] {
        &self.runs
    }

    /// How many blocks of the footprint come before `block`, if it is in the footprint.
    pub fn rank(&self, block: u64) -> Option<u64> {
        let i = self.runs.partition_point(|&(first, _)| first <= block).checked_sub(1)?;
        let (first, blocks) = self.runs[i];
        (block - first < blocks).then(|| self.ranks[i] + block - first)
    }
}

/// Collects runs of blocks into a `Footprint`.
#[derive(Default)]
struct FootprintBuilder {
    merged: Vec<(u64, u64)>,
    pending: Vec<(u64, u64)>,
}

impl FootprintBuilder {
    fn add(&mut self, first: u64, blocks: u64) {
        if blocks == 0 {
            return;
        }
        self.pending.push((first, blocks));
        if self.pending.len() >= MERGE_EVERY_RUNS {
            self.merge();
        }
    }

    /// Sorts the pending runs into the merged ones, joining overlapping and adjacent runs.
    fn merge(&mut self) {
        let mut all = std::mem::take(&mut self.merged);
        all.append(&mut self.pending);
        all.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(all.len());
        for (first, blocks) in all {
            let end = first.saturating_add(blocks);
            match merged.last_mut() {
                Some((last_first, last_blocks)) if first <= *last_first + *last_blocks => {
                    *last_blocks = (*last_blocks).max(end - *last_first);
                }
                _ => merged.push((first, end - first)),
            }
        }
        self.merged = merged;
    }

    fn finish(mut self) -> Footprint {
        self.merge();
        let mut ranks = Vec::with_capacity(self.merged.len());
        let mut blocks = 0u64;
        for &(_, run) in &self.merged {
            ranks.push(blocks);
            blocks += run;
        }
        debug_assert!(self.merged.windows(2).all(|w| w[0].0 + w[0].1 < w[1].0), "runs are disjoint, not adjacent");
        Footprint { runs: self.merged, ranks, blocks }
    }
}

/// The requests a replay of `config` issues: every one, but reads with `writes_only`, up
/// to `limit`.
fn replayed(
    records: impl Iterator<Item = Result<TraceRecord>>,
    config: &ReplayConfig,
    mut each: impl FnMut(&TraceRecord),
) -> Result<()> {
    let mut issued = 0u64;
    for record in records {
        if config.limit.is_some_and(|limit| issued >= limit) {
            break;
        }
        let record = record?;
        if config.writes_only && record.op == Op::Read {
            continue;
        }
        each(&record);
        issued += 1;
    }
    Ok(())
}

/// The blocks, in the trace's own addresses (widened to whole blocks of `block_bytes`, cut
/// as the replay cuts long requests), that a replay of `config` reads or writes.
pub fn trace_footprint(
    records: impl Iterator<Item = Result<TraceRecord>>,
    config: &ReplayConfig,
    block_bytes: u64,
) -> Result<Footprint> {
    let mut builder = FootprintBuilder::default();
    replayed(records, config, |r| {
        let (first, blocks) = trace_blocks(r.offset_bytes, r.length_bytes, block_bytes);
        builder.add(first, blocks);
    })?;
    Ok(builder.finish())
}

/// The array blocks a replay of `config` through `map` reads or writes: what a prefill
/// writes so that no read finds a block never written.
pub fn array_footprint(
    records: impl Iterator<Item = Result<TraceRecord>>,
    config: &ReplayConfig,
    map: &AddressMap,
) -> Result<Footprint> {
    let mut builder = FootprintBuilder::default();
    let mut stats = MapStats::default();
    replayed(records, config, |r| {
        let Mapped { lba, blocks } = map.map(r.offset_bytes, r.length_bytes, &mut stats);
        builder.add(lba, blocks);
    })?;
    Ok(builder.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_and_rank() {
        let f = Footprint::from_runs([(10, 5), (0, 2), (12, 6), (18, 1), (30, 1), (1, 1)]);
        assert_eq!(f.runs(), &[(0, 2), (10, 9), (30, 1)]);
        assert_eq!(f.blocks(), 12);
        assert_eq!(f.rank(0), Some(0));
        assert_eq!(f.rank(1), Some(1));
        assert_eq!(f.rank(2), None);
        assert_eq!(f.rank(10), Some(2));
        assert_eq!(f.rank(18), Some(10));
        assert_eq!(f.rank(30), Some(11));
        assert_eq!(f.rank(31), None);
        assert_eq!(Footprint::from_runs([]).rank(0), None);
    }

    #[test]
    fn many_runs_merge_in_rounds() {
        let f = Footprint::from_runs((0..(MERGE_EVERY_RUNS as u64 * 2 + 7)).rev().map(|i| (i * 2, 1)));
        assert_eq!(f.blocks(), MERGE_EVERY_RUNS as u64 * 2 + 7);
        assert_eq!(f.rank(8), Some(4));
        assert_eq!(f.rank(9), None);
    }
}
