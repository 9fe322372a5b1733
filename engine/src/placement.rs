//! Declustered placement: which `width` drives (k + m) of an array of `drives` drives each
//! segment takes, so that an array may be wider than its stripes and a failed drive's
//! segments are rebuilt from every survivor at once (issue 35; the LANL study of ZFS
//! dRAID, `../shared/reference/papers/003_*`).
//!
//! A *row* is one zone index across all N drives. Each row is a permutation of the drives;
//! its first G x w positions are G segment *groups* of w drives each, the rest are the
//! row's spare positions (at least S, the distributed spares):
//!
//! ```text
//!   N = 12 drives, stripes of w = 4, S = 2 distributed spares: G = (12 - 2) / 4 = 2
//!
//!   position:    0   1   2   3 |  4   5   6   7 |  8   9  10  11
//!   row r:       d5  d0  d9  d2|  d7 d11  d1  d4|  d3  d8  d6 d10
//!                segment (r, 0)| segment (r, 1) | spare positions (4 >= S)
//!   row r + 1:   d6  d1 d10  d3|  d8  d0  d2  d5|  d4  d9  d7 d11   every drive + 1 mod N
//! ```
//!
//! The permutation of row r is a *development* of a base permutation (PDDL, the layout
//! ZFS dRAID builds on): `drive(r, i) = (base_j[i] + r) mod N`, with base j = (r / N) mod P.
//! Over any N consecutive rows of one base every drive takes every position exactly once,
//! so each drive holds the same share of data, parity and spare space. Two drives a and b
//! meet in a segment of a row of base j as often as the base's groups hold a pair whose
//! difference is (b - a) mod N: the *pair count* of that difference. A failed drive's
//! survivors each read one chunk per segment they share with it, so the rebuild's load on
//! a survivor at distance d is the pair count of d, and the load imbalance (most / mean,
//! the figure dRAID reports: 1.059 at 8 drives, 1.111 at 16) is the largest pair count
//! over the mean.
//!
//! One base cannot balance every difference (a perfect difference family rarely exists),
//! so there are P bases, chosen one after the other from candidates drawn by a fixed
//! generator (`PLACEMENT_SEED`, splitmix64): each is the candidate that leaves the summed
//! pair counts most even (least largest count, then least sum of squares). The choice
//! depends only on (N, w, S) and the generator, so it is deterministic. An array records
//! (N, S) and its bases' CRC32C (`bases_crc32c`) in its superblock; a start makes the
//! placement again from (N, w, S) and refuses one whose CRC differs (`checked`), so a
//! later change of the search can never silently move an existing array's segments: a
//! build whose search differs refuses the array instead.
//!
//! N = w is today's array: one base, the identity, not developed, one group per row, no
//! spare position: every segment on drives 0..w in order, exactly as before.
//!
//! Invariants: every base is a permutation of 0..N; a segment's w drives are distinct; a
//! row's groups and spare positions are disjoint and cover the drives; G >= 1.

use crate::error::{Error, Result};

/// The generator's seed for the bases' search. NEVER CHANGE: arrays record their bases,
/// but a placement made again from (N, w, S), as `format` does, must come out the same.
pub const PLACEMENT_SEED: u64 = 0x7a61_7072_6169_6401;

/// Bases per placement (P): enough that the summed pair counts come within a few percent
/// of even up to 64 drives (the property test's bounds). NEVER CHANGE (as the seed).
pub const PLACEMENT_BASES: usize = 32;

/// Candidates drawn for each base. NEVER CHANGE (as the seed).
const CANDIDATES_PER_BASE: usize = 48;

/// Placements an array may have: format's and three grows (`crate::lanes`, epochs). The
/// superblock records the earlier epochs' drive counts in as many bytes less one
/// (docs/FORMAT.md): never to change without a new superblock layout.
pub const MAX_PLACEMENT_EPOCHS: usize = 4;

/// The most drives an array may have: a drive index fits a byte in the records.
pub const MAX_PLACEMENT_DRIVES: u32 = 255;

/// Which drives each segment of an array of `drives` drives and stripes of `width` takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    drives: u32,
    width: u32,
    distributed_spares: u32,
    /// Segment groups per row (G).
    groups: u32,
    /// The bases, each a permutation of 0..drives.
    bases: Vec<Vec<u8>>,
}

/// A base the search considers: how uneven the summed pair counts are with it
/// (`spread`), and those counts.
struct Candidate {
    spread: (u64, u64),
    base: Vec<u8>,
    summed: Vec<u64>,
}

/// splitmix64: a fixed generator, so that the search gives the same bases on every
/// machine and with every version of every crate.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform permutation of 0..n (Fisher-Yates; the modulo's bias is the same on
    /// every machine, which is all that matters here).
    fn permutation(&mut self, n: u32) -> Vec<u8> {
        let mut p: Vec<u8> = (0..n).map(|d| d as u8).collect();
        for i in (1..p.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            p.swap(i, j);
        }
        p
    }
}

impl Placement {
    /// The placement of an array of `drives` drives, stripes of `width` drives and
    /// `distributed_spares` drives' worth of spare space, its bases found by the search.
    pub fn new(drives: u32, width: u32, distributed_spares: u32) -> Result<Placement> {
        let groups = Self::check(drives, width, distributed_spares)?;
        if drives == width {
            let identity = (0..drives).map(|d| d as u8).collect();
            return Ok(Placement { drives, width, distributed_spares, groups, bases: vec![identity] });
        }
        let mut rng = SplitMix64(PLACEMENT_SEED ^ (u64::from(drives) << 16) ^ (u64::from(width) << 8));
        let mut counts = vec![0u64; drives as usize];
        let mut bases = Vec::with_capacity(PLACEMENT_BASES);
        for _ in 0..PLACEMENT_BASES {
            // The best candidate so far: its spread, the base, the summed counts with it.
            let mut best: Option<Candidate> = None;
            for _ in 0..CANDIDATES_PER_BASE {
                let base = rng.permutation(drives);
                let mut summed = counts.clone();
                add_pair_counts(&base, width, groups, &mut summed);
                let spread = spread(&summed);
                if best.as_ref().is_none_or(|b| spread < b.spread) {
                    best = Some(Candidate { spread, base, summed });
                }
            }
            let best = best.expect("at least one candidate");
            counts = best.summed;
            bases.push(best.base);
        }
        Ok(Placement { drives, width, distributed_spares, groups, bases })
    }

    /// A placement as an array recorded it: its bases checked (each a permutation of the
    /// drives, as many as `new` makes), never trusted.
    pub fn recorded(drives: u32, width: u32, distributed_spares: u32, bases: Vec<Vec<u8>>) -> Result<Placement> {
        let groups = Self::check(drives, width, distributed_spares)?;
        let want = if drives == width { 1 } else { PLACEMENT_BASES };
        if bases.len() != want {
            return Err(invalid(format!("{} placement bases recorded, {want} expected", bases.len())));
        }
        for (b, base) in bases.iter().enumerate() {
            let mut seen = vec![false; drives as usize];
            let ok = base.len() == drives as usize
                && base.iter().all(|&d| (d as u32) < drives && !std::mem::replace(&mut seen[d as usize], true));
            if !ok {
                return Err(invalid(format!("placement base {b} is not a permutation of {drives} drives")));
            }
        }
        Ok(Placement { drives, width, distributed_spares, groups, bases })
    }

    /// The placement an array recorded as (N, w, S) and its bases' CRC32C (the
    /// superblock's `placement_crc32c`): made again by the search, refused if its bases'
    /// CRC differs (the search changed since the array was formatted: its segments would be
    /// looked for on the wrong drives).
    pub fn checked(drives: u32, width: u32, distributed_spares: u32, bases_crc32c: u32) -> Result<Placement> {
        let placement = Placement::new(drives, width, distributed_spares)?;
        let made = placement.bases_crc32c();
        if made != bases_crc32c {
            return Err(invalid(format!(
                "the placement of {drives} drives, stripes of {width}, {distributed_spares} distributed spare(s) \
                 has bases of CRC32C {made:#010x}, the array recorded {bases_crc32c:#010x}: this build's placement \
                 search differs from the one that formatted it"
            )));
        }
        Ok(placement)
    }

    /// CRC32C of the bases' bytes, base after base in order: what an array records of
    /// its placement (`ArraySuperblock::placement_crc32c`). 0 for a classic placement
    /// (N = w), whose segments are on drives 0..w whatever the search.
    pub fn bases_crc32c(&self) -> u32 {
        if self.drives == self.width {
            return 0;
        }
        self.bases.iter().fold(0, |crc, base| crate::crc::crc32c_append(crc, base))
    }

    /// Groups per row, or why the shape cannot be.
    fn check(drives: u32, width: u32, distributed_spares: u32) -> Result<u32> {
        if width == 0 || drives > MAX_PLACEMENT_DRIVES {
            return Err(invalid(format!(
                "{drives} drives, stripes of {width}: stripes take at least 1 drive, arrays at most \
                 {MAX_PLACEMENT_DRIVES}"
            )));
        }
        let for_stripes = drives.checked_sub(distributed_spares).filter(|d| *d >= width).ok_or_else(|| {
            invalid(format!(
                "{drives} drives with {distributed_spares} distributed spare(s) leave {} for stripes of {width}",
                drives.saturating_sub(distributed_spares)
            ))
        })?;
        Ok(for_stripes / width)
    }

    pub fn drives(&self) -> u32 {
        self.drives
    }

    pub fn width(&self) -> u32 {
        self.width
    }

    pub fn distributed_spares(&self) -> u32 {
        self.distributed_spares
    }

    /// Segment groups per row (G).
    pub fn groups_per_row(&self) -> u32 {
        self.groups
    }

    /// Spare positions per row: at least `distributed_spares`.
    pub fn spare_positions_per_row(&self) -> u32 {
        self.drives - self.groups * self.width
    }

    /// The bases, as an array records them.
    pub fn bases(&self) -> &[Vec<u8>] {
        &self.bases
    }

    /// Rows after which the placement repeats: every base developed over every drive.
    pub fn period_rows(&self) -> u64 {
        self.bases.len() as u64 * u64::from(self.drives)
    }

    /// The drive at position `position` of row `row`.
    fn at(&self, row: u64, position: u32) -> u32 {
        if self.drives == self.width {
            // Today's array: every segment on drives 0..w in order, undeveloped.
            return position;
        }
        let n = u64::from(self.drives);
        let base = &self.bases[((row / n) % self.bases.len() as u64) as usize];
        ((u64::from(base[position as usize]) + row % n) % n) as u32
    }

    /// The drives of group `group` of row `row`, in the segment's chunk order.
    pub fn segment_drives(&self, row: u64, group: u32) -> Vec<u32> {
        assert!(group < self.groups, "group {group} of {}", self.groups);
        (group * self.width..(group + 1) * self.width).map(|p| self.at(row, p)).collect()
    }

    /// The drives at row `row`'s spare positions.
    pub fn spare_drives(&self, row: u64) -> Vec<u32> {
        (self.groups * self.width..self.drives).map(|p| self.at(row, p)).collect()
    }

    /// Over one period: per drive, the segments it shares with `failed` (what it reads
    /// when `failed` is rebuilt), 0 for `failed` itself.
    pub fn rebuild_reads(&self, failed: u32) -> Vec<u64> {
        let mut reads = vec![0u64; self.drives as usize];
        for row in 0..self.period_rows() {
            for group in 0..self.groups {
                let members = self.segment_drives(row, group);
                if members.contains(&failed) {
                    for d in members.into_iter().filter(|d| *d != failed) {
                        reads[d as usize] += 1;
                    }
                }
            }
        }
        reads
    }

    /// Over one period, per difference d (mod N), the segments two drives d apart share:
    /// what a survivor d after a failed drive reads in its rebuild (`rebuild_reads`), the
    /// same for every failed drive. Index 0 is 0.
    pub fn pair_counts(&self) -> Vec<u64> {
        let mut counts = vec![0u64; self.drives as usize];
        for base in &self.bases {
            add_pair_counts(base, self.width, self.groups, &mut counts);
        }
        counts
    }

    /// The rebuild's load imbalance when a drive fails: most over mean segments read per
    /// survivor over one period (1.0: every survivor reads as much), from `pair_counts`.
    pub fn rebuild_imbalance(&self) -> f64 {
        let counts = self.pair_counts();
        let survivors = &counts[1..];
        let most = survivors.iter().copied().max().unwrap_or(0);
        let mean = survivors.iter().sum::<u64>() as f64 / survivors.len().max(1) as f64;
        if mean == 0.0 {
            1.0
        } else {
            most as f64 / mean
        }
    }
}

/// Adds one base's pair counts: for each ordered pair of drives in one of its groups,
/// their difference mod N.
fn add_pair_counts(base: &[u8], width: u32, groups: u32, counts: &mut [u64]) {
    let n = counts.len();
    for group in base.chunks_exact(width as usize).take(groups as usize) {
        for &a in group {
            for &b in group {
                if a != b {
                    counts[(b as usize + n - a as usize) % n] += 1;
                }
            }
        }
    }
}

/// How uneven the pair counts of differences 1..N are: the largest, then the sum of
/// squares (smaller is more even).
fn spread(counts: &[u64]) -> (u64, u64) {
    let nonzero = &counts[1..];
    (nonzero.iter().copied().max().unwrap_or(0), nonzero.iter().map(|c| c * c).sum())
}

fn invalid(reason: String) -> Error {
    Error::InvalidConfig { reason }
}

#[cfg(test)]
mod tests;
