//! The compact stripe table of a Zone Append segment: for every chunk in the data region
//! of every drive, the ID (within its stripe group) of the stripe it belongs to, which
//! Zone Append decided by where the chunk landed. ceil(log2 G) bits per chunk, bit-packed,
//! so a table takes exactly the paper's (k + m) * S * ceil(log2 G) bits per segment.
//!
//! Zone Write segments (G = 1) need no table: stripe s sits at offset s on every drive.

use crate::layout::Layout;

/// Sentinel for a chunk position not (yet) holding a chunk of a known stripe.
const UNSET: u32 = u32::MAX;

/// Stripe IDs of one segment's chunks, indexed by (drive, chunk position in the data region).
#[derive(Clone, Debug)]
pub struct CompactStripeTable {
    bits: u32,
    chunks_per_drive: u64,
    words: Vec<u64>,
    /// Positions recorded so far (bit-packed entries cannot hold an "unset" value).
    recorded: Vec<u64>,
}

impl CompactStripeTable {
    /// An empty table for a segment of `layout`; `None` for Zone Write segments.
    pub fn new(layout: &Layout) -> Option<Self> {
        let bits = layout.stripe_id_bits();
        if bits == 0 {
            return None;
        }
        let entries = layout.stripes * layout.drives() as u64;
        let words = (entries * u64::from(bits)).div_ceil(64) as usize;
        Some(CompactStripeTable {
            bits,
            chunks_per_drive: layout.stripes,
            words: vec![0; words],
            recorded: vec![0; (entries as usize).div_ceil(64)],
        })
    }

    fn index(&self, drive: usize, position: u64) -> u64 {
        debug_assert!(position < self.chunks_per_drive);
        drive as u64 * self.chunks_per_drive + position
    }

    /// Records that the chunk at `position` of `drive`'s data region belongs to stripe
    /// `stripe_id` of its group.
    pub fn set(&mut self, drive: usize, position: u64, stripe_id: u32) {
        assert!(u64::from(stripe_id) < 1 << self.bits, "stripe ID {stripe_id} wider than {} bits", self.bits);
        let i = self.index(drive, position);
        let bit = i * u64::from(self.bits);
        let (word, shift) = ((bit / 64) as usize, (bit % 64) as u32);
        let mask = (1u64 << self.bits) - 1;
        self.words[word] = (self.words[word] & !(mask << shift)) | (u64::from(stripe_id) << shift);
        let spill = shift + self.bits;
        if spill > 64 {
            let high_bits = spill - 64;
            let high_mask = (1u64 << high_bits) - 1;
            self.words[word + 1] =
                (self.words[word + 1] & !high_mask) | (u64::from(stripe_id) >> (self.bits - high_bits));
        }
        self.recorded[(i / 64) as usize] |= 1 << (i % 64);
    }

    /// The stripe ID recorded for a chunk position, if any.
    pub fn get(&self, drive: usize, position: u64) -> Option<u32> {
        let i = self.index(drive, position);
        if self.recorded[(i / 64) as usize] & (1 << (i % 64)) == 0 {
            return None;
        }
        let bit = i * u64::from(self.bits);
        let (word, shift) = ((bit / 64) as usize, (bit % 64) as u32);
        let mask = (1u64 << self.bits) - 1;
        let mut value = self.words[word] >> shift;
        if shift + self.bits > 64 {
            value |= self.words[word + 1] << (64 - shift);
        }
        let id = (value & mask) as u32;
        debug_assert_ne!(id, UNSET);
        Some(id)
    }

    /// Bytes of the packed stripe IDs: the paper's memory formula for one segment.
    pub fn packed_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Bytes `encode` gives for a table of `layout`'s segments (0: Zone Write, no table).
    pub fn encoded_bytes(layout: &Layout) -> usize {
        Self::new(layout).map_or(0, |t| (t.words.len() + t.recorded.len()) * 8)
    }

    /// The table as a checkpoint stores it: the packed stripe IDs, then the bitmap of
    /// positions recorded, each as little-endian 64-bit words.
    pub fn encode(&self, out: &mut Vec<u8>) {
        for word in self.words.iter().chain(&self.recorded) {
            out.extend_from_slice(&word.to_le_bytes());
        }
    }

    /// A table of `layout`'s segments from `encode`'s bytes; None if they are not exactly
    /// that long (read from a drive: untrusted, but any bits make some table).
    pub fn decode(layout: &Layout, bytes: &[u8]) -> Option<Self> {
        let mut table = Self::new(layout)?;
        if bytes.len() != Self::encoded_bytes(layout) {
            return None;
        }
        let mut words = bytes.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().expect("8-byte chunks")));
        for word in table.words.iter_mut().chain(table.recorded.iter_mut()) {
            *word = words.next()?;
        }
        Some(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Mode, RaidLevel};
    use zapraid_zns::Geometry;

    #[test]
    fn encodes_and_decodes_what_was_recorded() {
        let g = Geometry { zone_append_max_blocks: 64, ..Geometry::small(4, 8192, 8000) };
        let layout = Layout::new(&g, RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 17 }, 4096).unwrap();
        let mut t = CompactStripeTable::new(&layout).unwrap();
        t.set(0, 0, 16);
        t.set(3, layout.stripes - 1, 5);
        let mut bytes = Vec::new();
        t.encode(&mut bytes);
        assert_eq!(bytes.len(), CompactStripeTable::encoded_bytes(&layout));
        let back = CompactStripeTable::decode(&layout, &bytes).unwrap();
        for drive in 0..4 {
            for position in 0..layout.stripes {
                assert_eq!(back.get(drive, position), t.get(drive, position));
            }
        }
        assert!(CompactStripeTable::decode(&layout, &bytes[1..]).is_none());
    }

    #[test]
    fn stores_every_width_exactly() {
        let g = Geometry { zone_append_max_blocks: 64, ..Geometry::small(4, 8192, 8000) };
        for group_size in [2u32, 3, 4, 5, 17, 256, 1000, 4096] {
            let layout = Layout::new(&g, RaidLevel::Raid6 { drives: 5 }, Mode::ZapRaid { group_size }, 4096).unwrap();
            let mut t = CompactStripeTable::new(&layout).unwrap();
            let g_eff = layout.group_size;
            let id = |d: usize, p: u64| ((p * 7 + d as u64 * 13) % g_eff) as u32;
            assert_eq!(t.get(0, 0), None);
            for d in 0..5 {
                for p in 0..layout.stripes {
                    t.set(d, p, id(d, p));
                }
            }
            for d in 0..5 {
                for p in 0..layout.stripes {
                    assert_eq!(t.get(d, p), Some(id(d, p)), "G={group_size} drive {d} position {p}");
                }
            }
        }
    }

    /// The paper's testbed: 4 ZN540 drives, (3+1)-RAID-5, 4 KiB chunks: 3.77 GiB of compact
    /// stripe tables at G = 256 and 8.95 GiB at G = S, from (k + m) * S * Z * ceil(log2 G) bits.
    #[test]
    fn memory_matches_the_papers_formula() {
        let g = Geometry::zn540();
        const GIB: f64 = (1u64 << 30) as f64;
        for (mode, paper_gib) in [(Mode::ZapRaid { group_size: 256 }, 3.77), (Mode::ZoneAppendOnly, 8.95)] {
            let layout = Layout::new(&g, RaidLevel::Raid5 { drives: 4 }, mode, 4096).unwrap();
            let bits = u64::from(layout.stripe_id_bits());
            let formula_bits = layout.drives() as u64 * layout.stripes * bits;
            let table = CompactStripeTable::new(&layout).unwrap();
            assert_eq!(table.packed_bytes() as u64, formula_bits.div_ceil(64) * 8, "{mode:?}");
            let total_gib = table.packed_bytes() as f64 * f64::from(g.zone_count) / GIB;
            assert!(
                (total_gib - paper_gib).abs() / paper_gib < 0.01,
                "{mode:?}: {total_gib:.3} GiB vs paper {paper_gib}"
            );
        }
    }

    #[test]
    fn zone_write_segments_need_no_table() {
        let g = Geometry::small(4, 1024, 1000);
        let layout = Layout::new(&g, RaidLevel::Raid5 { drives: 4 }, Mode::ZoneWriteOnly, 4096).unwrap();
        assert!(CompactStripeTable::new(&layout).is_none());
    }
}
