//! The L2P table: logical block -> physical block, 4 bytes per logical block.
//!
//! A physical block is packed as `(zone * drives + drive) * zone_capacity + offset`; the
//! engine keeps a segment on the same zone index of every drive, so the zone names the
//! segment. `UNMAPPED` marks blocks never written (they read as zeros).

use crate::error::{Error, Result};

/// Physical address of an unmapped logical block.
const UNMAPPED: u32 = u32::MAX;

/// Where a logical block lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Physical {
    pub zone: u32,
    pub drive: usize,
    /// Zone-relative block.
    pub offset: u64,
}

pub struct L2pTable {
    entries: Vec<u32>,
    drives: u64,
    zone_capacity_blocks: u64,
}

impl L2pTable {
    /// A table for `logical_blocks` over `zones` zones of `zone_capacity_blocks` on each of
    /// `drives` drives; an error if physical addresses would not fit in 32 bits.
    pub fn new(logical_blocks: u64, drives: usize, zones: u32, zone_capacity_blocks: u64) -> Result<Self> {
        let physical = u64::from(zones) * drives as u64 * zone_capacity_blocks;
        if physical >= u64::from(UNMAPPED) {
            return Err(Error::InvalidConfig {
                reason: format!("{physical} physical blocks do not fit the 4-byte L2P entries"),
            });
        }
        let entries = usize::try_from(logical_blocks)
            .map_err(|_| Error::InvalidConfig { reason: format!("{logical_blocks} logical blocks") })?;
        Ok(L2pTable { entries: vec![UNMAPPED; entries], drives: drives as u64, zone_capacity_blocks })
    }

    pub fn logical_blocks(&self) -> u64 {
        self.entries.len() as u64
    }

    pub fn get(&self, lba: u64) -> Option<Physical> {
        let packed = *self.entries.get(lba as usize)?;
        if packed == UNMAPPED {
            return None;
        }
        let packed = u64::from(packed);
        let offset = packed % self.zone_capacity_blocks;
        let zone_drive = packed / self.zone_capacity_blocks;
        Some(Physical { zone: (zone_drive / self.drives) as u32, drive: (zone_drive % self.drives) as usize, offset })
    }

    pub fn set(&mut self, lba: u64, at: Physical) {
        debug_assert!(at.offset < self.zone_capacity_blocks && (at.drive as u64) < self.drives);
        let packed = (u64::from(at.zone) * self.drives + at.drive as u64) * self.zone_capacity_blocks + at.offset;
        debug_assert!(packed < u64::from(UNMAPPED));
        self.entries[lba as usize] = packed as u32;
    }

    /// Forgets where `lba` lives: it reads as zeros until written again.
    pub fn clear(&mut self, lba: u64) {
        self.entries[lba as usize] = UNMAPPED;
    }

    /// Bytes of memory the table takes.
    pub fn memory_bytes(&self) -> usize {
        self.entries.len() * std::mem::size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_starts_unmapped() {
        let mut t = L2pTable::new(100, 4, 31, 15872).unwrap();
        assert_eq!(t.get(5), None);
        let at = Physical { zone: 30, drive: 3, offset: 15871 };
        t.set(5, at);
        assert_eq!(t.get(5), Some(at));
        assert_eq!(t.get(1000), None);
        assert_eq!(t.memory_bytes(), 400);
    }

    #[test]
    fn refuses_arrays_too_big_for_four_bytes() {
        assert!(L2pTable::new(10, 8, 3690, 275_712).is_err());
        assert!(L2pTable::new(10, 4, 3690, 275_712).is_ok(), "the paper's testbed fits");
    }
}
