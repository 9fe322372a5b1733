//! Device geometry: the shape and limits of a zoned namespace.
//!
//! Everything the layers above need to know about a drive's layout comes from here and is
//! read from the device (identify data for NVMe, the superblock for emulated drives); no
//! layer may assume a zone size, block size or limit of its own. `validate` is the single
//! gate every geometry passes through before a device is built from it.

use crate::error::{Error, Result};

/// Smallest logical block the device layer accepts (the NVMe minimum).
pub const MIN_BLOCK_SIZE_BYTES: u32 = 512;
/// Largest logical block the device layer accepts.
pub const MAX_BLOCK_SIZE_BYTES: u32 = 64 * 1024;
/// Largest per-block metadata (OOB) area accepted; NVMe allows up to 64 KiB per LBA format,
/// real ZNS drives offer 0, 8, 16 or 64 bytes.
pub const MAX_METADATA_BYTES_PER_BLOCK: u32 = 4096;

/// Shape and limits of one zoned namespace. All sizes are in logical blocks unless the
/// name says otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Geometry {
    /// Logical block (LBA) size in bytes; a power of two.
    pub block_size_bytes: u32,
    /// Per-block metadata (out-of-band) bytes carried in a separate buffer; 0 if none.
    pub metadata_bytes_per_block: u32,
    /// Distance between the start LBAs of consecutive zones.
    pub zone_size_blocks: u64,
    /// Writable blocks per zone (<= zone size); blocks past it are never writable.
    pub zone_capacity_blocks: u64,
    /// Number of zones in the namespace.
    pub zone_count: u32,
    /// Most zones that may be open (implicitly or explicitly) at once; `None`: no limit.
    pub max_open_zones: Option<u32>,
    /// Most zones that may be active (open or closed) at once; `None`: no limit.
    pub max_active_zones: Option<u32>,
    /// Largest Zone Append in blocks (the NVMe ZASL limit).
    pub zone_append_max_blocks: u32,
    /// Largest read or write in blocks (the NVMe MDTS limit).
    pub max_transfer_blocks: u32,
    /// 0: a command may move any count of blocks up to the limits above. g > 0: a command
    /// of more than g blocks must move a whole multiple of g. Passthrough commands with
    /// separate metadata need it on Linux 6.12 with QEMU 7.2, which lose the metadata of
    /// larger transfers that are not whole 512 B of it (`nvme`); `transfer_takes` and
    /// `transfer_blocks_at_most` apply it.
    pub transfer_granule_blocks: u32,
}

impl Geometry {
    /// Checks every internal consistency rule; a geometry that passes can back a device.
    pub fn validate(&self) -> Result<()> {
        let bad = |reason: String| Err(Error::InvalidGeometry { reason });
        if !self.block_size_bytes.is_power_of_two()
            || self.block_size_bytes < MIN_BLOCK_SIZE_BYTES
            || self.block_size_bytes > MAX_BLOCK_SIZE_BYTES
        {
            return bad(format!(
                "block size {} B must be a power of two between {MIN_BLOCK_SIZE_BYTES} and {MAX_BLOCK_SIZE_BYTES}",
                self.block_size_bytes
            ));
        }
        if self.metadata_bytes_per_block > MAX_METADATA_BYTES_PER_BLOCK {
            return bad(format!(
                "metadata of {} B per block exceeds the supported {MAX_METADATA_BYTES_PER_BLOCK} B",
                self.metadata_bytes_per_block
            ));
        }
        if self.zone_size_blocks == 0 {
            return bad("zone size must be at least one block".into());
        }
        if self.zone_capacity_blocks == 0 || self.zone_capacity_blocks > self.zone_size_blocks {
            return bad(format!(
                "zone capacity {} blocks must be between 1 and the zone size ({} blocks)",
                self.zone_capacity_blocks, self.zone_size_blocks
            ));
        }
        if self.zone_count == 0 {
            return bad("a namespace needs at least one zone".into());
        }
        if self.zone_size_blocks.checked_mul(u64::from(self.zone_count)).is_none()
            || self.capacity_bytes_total().is_none()
        {
            return bad("zone size times zone count overflows 64 bits".into());
        }
        if let (Some(open), Some(active)) = (self.max_open_zones, self.max_active_zones) {
            if open > active {
                return bad(format!("max open zones ({open}) cannot exceed max active zones ({active})"));
            }
        }
        for (name, limit) in [("max open", self.max_open_zones), ("max active", self.max_active_zones)] {
            if limit == Some(0) {
                return bad(format!("{name} zones of 0 leaves no zone writable; omit the limit for none"));
            }
        }
        if self.zone_append_max_blocks == 0 {
            return bad("zone append size limit must be at least one block".into());
        }
        if self.max_transfer_blocks == 0 {
            return bad("maximum transfer size must be at least one block".into());
        }
        Ok(())
    }

    /// Whether one read or write of `blocks` blocks is within what the drive takes.
    pub fn transfer_takes(&self, blocks: u64) -> bool {
        blocks >= 1 && self.check_transfer(blocks).is_ok()
    }

    /// Whether one Zone Append of `blocks` blocks is within what the drive takes (ZASL,
    /// one transfer and the granule).
    pub fn append_takes(&self, blocks: u64) -> bool {
        blocks <= u64::from(self.zone_append_max_blocks) && self.transfer_takes(blocks)
    }

    /// The most blocks, at most `blocks` and at least one, that one read or write moves:
    /// how a longer range is cut into commands.
    pub fn transfer_blocks_at_most(&self, blocks: u64) -> u64 {
        self.granule_fit(blocks.min(u64::from(self.max_transfer_blocks)))
    }

    /// `transfer_takes` as an error saying which limit a command of `blocks` blocks breaks.
    pub fn check_transfer(&self, blocks: u64) -> Result<()> {
        if blocks > u64::from(self.max_transfer_blocks) {
            return Err(Error::TransferTooLarge { blocks, limit: self.max_transfer_blocks });
        }
        if !self.granule_allows(blocks) {
            return Err(Error::TransferNotWhole { blocks, granule_blocks: self.transfer_granule_blocks });
        }
        Ok(())
    }

    fn granule_allows(&self, blocks: u64) -> bool {
        let granule = u64::from(self.transfer_granule_blocks);
        granule == 0 || blocks <= granule || blocks.is_multiple_of(granule)
    }

    /// The largest count at most `blocks` (and at least one) the granule allows.
    fn granule_fit(&self, blocks: u64) -> u64 {
        let granule = u64::from(self.transfer_granule_blocks);
        let fitted = if granule == 0 || blocks <= granule { blocks } else { blocks / granule * granule };
        debug_assert!(self.granule_allows(fitted.max(1)));
        fitted.max(1)
    }

    /// First LBA of `zone`.
    pub fn zone_start_lba(&self, zone: u32) -> u64 {
        debug_assert!(zone < self.zone_count);
        u64::from(zone) * self.zone_size_blocks
    }

    /// The zone containing `lba`, or `None` past the namespace end.
    pub fn zone_of(&self, lba: u64) -> Option<u32> {
        let zone = lba / self.zone_size_blocks;
        u32::try_from(zone).ok().filter(|z| *z < self.zone_count)
    }

    /// Total LBAs of the namespace (zone size times zone count).
    pub fn total_blocks(&self) -> u64 {
        self.zone_size_blocks * u64::from(self.zone_count)
    }

    /// Writable bytes over all zones, `None` on overflow.
    pub fn capacity_bytes_total(&self) -> Option<u64> {
        self.zone_capacity_blocks.checked_mul(u64::from(self.zone_count))?.checked_mul(u64::from(self.block_size_bytes))
    }

    /// Bytes of data for `blocks` blocks.
    pub fn data_bytes(&self, blocks: u64) -> usize {
        usize::try_from(blocks * u64::from(self.block_size_bytes)).expect("buffer fits in memory")
    }

    /// Bytes of per-block metadata for `blocks` blocks.
    pub fn metadata_bytes(&self, blocks: u64) -> usize {
        usize::try_from(blocks * u64::from(self.metadata_bytes_per_block)).expect("buffer fits in memory")
    }

    /// Blocks a command's buffers carry: `data` must be whole blocks (at least one), and
    /// `metadata` empty (none wanted or supplied) or exactly that many blocks' metadata.
    pub fn blocks_in_buffers(&self, data: &[u8], metadata: &[u8]) -> Result<u64> {
        let block = self.block_size_bytes as usize;
        if data.is_empty() || !data.len().is_multiple_of(block) {
            let expected = data.len().div_ceil(block).max(1) * block;
            return Err(Error::BufferSize { what: "data", expected, got: data.len() });
        }
        let blocks = (data.len() / block) as u64;
        let want = self.metadata_bytes(blocks);
        if !metadata.is_empty() && metadata.len() != want {
            return Err(Error::BufferSize { what: "metadata", expected: want, got: metadata.len() });
        }
        Ok(blocks)
    }

    /// The geometry of the paper's WD Ultrastar DC ZN540 (4 KiB blocks, 64 B metadata,
    /// 2 GiB zones of 1,077 MiB capacity, 3,690 zones, 14 open/active zones).
    pub fn zn540() -> Self {
        const BLOCK: u32 = 4096;
        const ZONE_SIZE_BYTES: u64 = 2 << 30;
        Geometry {
            block_size_bytes: BLOCK,
            metadata_bytes_per_block: 64,
            zone_size_blocks: ZONE_SIZE_BYTES / u64::from(BLOCK),
            zone_capacity_blocks: 275_712,
            zone_count: 3_690,
            max_open_zones: Some(14),
            max_active_zones: Some(14),
            zone_append_max_blocks: 32,
            max_transfer_blocks: 32,
            transfer_granule_blocks: 0,
        }
    }

    /// A small geometry for tests and demos: 4 KiB blocks, 64 B metadata, zones of
    /// `zone_size_blocks` with capacity `zone_capacity_blocks`.
    pub fn small(zone_count: u32, zone_size_blocks: u64, zone_capacity_blocks: u64) -> Self {
        Geometry {
            block_size_bytes: 4096,
            metadata_bytes_per_block: 64,
            zone_size_blocks,
            zone_capacity_blocks,
            zone_count,
            max_open_zones: Some(14),
            max_active_zones: Some(14),
            zone_append_max_blocks: 32,
            max_transfer_blocks: 64,
            transfer_granule_blocks: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid() {
        Geometry::zn540().validate().unwrap();
        Geometry::small(8, 256, 200).validate().unwrap();
    }

    #[test]
    fn rejects_inconsistent_geometry() {
        let good = Geometry::small(8, 256, 200);
        let cases = [
            Geometry { block_size_bytes: 4000, ..good },
            Geometry { block_size_bytes: 256, ..good },
            Geometry { zone_capacity_blocks: 257, ..good },
            Geometry { zone_capacity_blocks: 0, ..good },
            Geometry { zone_count: 0, ..good },
            Geometry { max_open_zones: Some(15), max_active_zones: Some(14), ..good },
            Geometry { max_open_zones: Some(0), ..good },
            Geometry { zone_append_max_blocks: 0, ..good },
            Geometry { metadata_bytes_per_block: 1 << 20, ..good },
            Geometry { zone_size_blocks: u64::MAX, ..good },
        ];
        for geometry in cases {
            assert!(matches!(geometry.validate(), Err(Error::InvalidGeometry { .. })), "{geometry:?} was accepted");
        }
    }

    #[test]
    fn zone_arithmetic() {
        let g = Geometry::small(4, 100, 80);
        assert_eq!(g.zone_start_lba(3), 300);
        assert_eq!(g.zone_of(299), Some(2));
        assert_eq!(g.zone_of(400), None);
        assert_eq!(g.total_blocks(), 400);
    }

    #[test]
    fn granule_cuts_commands_to_whole_multiples() {
        let any = Geometry::small(4, 100, 80);
        assert!((1..=64).all(|b| any.transfer_takes(b)));
        assert!(!any.transfer_takes(0) && !any.transfer_takes(65));
        assert_eq!(any.transfer_blocks_at_most(13), 13);
        assert!(any.append_takes(32) && !any.append_takes(33));
        let g = Geometry { transfer_granule_blocks: 8, ..any };
        let taken: Vec<u64> = (1..=70).filter(|b| g.transfer_takes(*b)).collect();
        let want: Vec<u64> = (1..=8).chain((16..=64).step_by(8)).collect();
        assert_eq!(taken, want);
        assert!(g.append_takes(24) && !g.append_takes(13) && !g.append_takes(40));
        for blocks in 1..=200 {
            let fitted = g.transfer_blocks_at_most(blocks);
            assert!(g.transfer_takes(fitted) && fitted <= blocks, "{blocks} -> {fitted}");
            assert!((fitted + 1..=blocks).all(|b| !g.transfer_takes(b)), "{blocks}: {fitted} is the largest");
        }
        assert_eq!(g.transfer_blocks_at_most(0), 1);
    }
}
