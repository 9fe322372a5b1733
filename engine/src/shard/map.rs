//! The shard map itself (`shard`): which shard an LBA is in and where, each shard's zones,
//! logical blocks and configuration, and whether S shards fit the drives.

use std::ops::Range;

use zapraid_zns::Geometry;

use crate::engine::Config;
use crate::error::{Error, Result};
use crate::hybrid::SegmentPlan;

/// The interleave unit an array uses unless told otherwise, in bytes: the largest request
/// the block device takes (`zapraid-server`'s ublk `max_io_bytes`), so that an aligned
/// request is one engine's work, while a sequential stream moves to the next shard every
/// request.
pub const DEFAULT_UNIT_BYTES: u64 = 512 << 10;

pub use crate::format::MAX_SHARDS;

/// Where each logical block and zone of an array of S shards belongs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardMap {
    pub(super) shards: u32,
    pub(super) unit_blocks: u64,
    pub(super) logical_blocks: u64,
    pub(super) zone_count: u32,
    pub(super) block_bytes: usize,
}

impl ShardMap {
    /// `shards` shards interleaved in units of `unit_blocks` over `logical_blocks` logical
    /// blocks and drives of `geometry` (the zones the engine sees: after any reserved).
    pub fn new(shards: u32, unit_blocks: u64, logical_blocks: u64, geometry: &Geometry) -> Result<Self> {
        let bad = |reason: String| Err(Error::InvalidConfig { reason });
        if shards == 0 || shards > MAX_SHARDS {
            return bad(format!("{shards} shards: an array runs 1 to {MAX_SHARDS}"));
        }
        if unit_blocks == 0 {
            return bad("an interleave unit of 0 blocks: shards take at least one block at a time".into());
        }
        if geometry.zone_count < shards {
            return bad(format!(
                "{shards} shards over drives of {} zones: each shard needs zones",
                geometry.zone_count
            ));
        }
        let map = ShardMap {
            shards,
            unit_blocks,
            logical_blocks,
            zone_count: geometry.zone_count,
            block_bytes: geometry.block_size_bytes as usize,
        };
        if map.logical_blocks_of(map.shards() - 1) == 0 {
            let last = shards - 1;
            return bad(format!(
                "{logical_blocks} logical blocks leave shard {last} none: {shards} shards in units of {unit_blocks} \
                 blocks need more than {}",
                u64::from(last) * unit_blocks
            ));
        }
        Ok(map)
    }

    /// The most logical blocks `shards` shards in units of `unit_blocks` can export over
    /// drives of `geometry` (the zones the engine sees) with `plan`: every shard's zones
    /// hold its blocks with its own reserve (`check_capacity` holds). One shard exports
    /// what one engine does (`SegmentPlan::capacity_blocks` of every zone); S shards
    /// S·U·⌊c/U⌋, c the least any shard's zones hold, so that every shard has as many.
    pub fn largest_logical_blocks(shards: u32, unit_blocks: u64, geometry: &Geometry, plan: &SegmentPlan) -> u64 {
        if shards <= 1 {
            return plan.capacity_blocks(geometry.zone_count);
        }
        let zones_of = |s: u64| {
            let at = |s: u64| s * u64::from(geometry.zone_count) / u64::from(shards);
            (at(s + 1) - at(s)) as u32
        };
        let least = (0..u64::from(shards)).map(|s| plan.capacity_blocks(zones_of(s))).min().unwrap_or(0);
        u64::from(shards) * unit_blocks.max(1) * (least / unit_blocks.max(1))
    }

    /// The interleave unit of `unit_bytes` (`DEFAULT_UNIT_BYTES`) in blocks of
    /// `block_bytes`, at least one.
    pub fn unit_blocks_of(unit_bytes: u64, block_bytes: u32) -> u64 {
        (unit_bytes / u64::from(block_bytes)).max(1)
    }

    pub fn shards(&self) -> usize {
        self.shards as usize
    }

    pub fn unit_blocks(&self) -> u64 {
        self.unit_blocks
    }

    /// The array's logical blocks.
    pub fn logical_blocks(&self) -> u64 {
        self.logical_blocks
    }

    pub(crate) fn block_bytes(&self) -> usize {
        self.block_bytes
    }

    /// The shard array LBA `lba` is in, and its LBA there.
    pub fn locate(&self, lba: u64) -> (usize, u64) {
        let unit = lba / self.unit_blocks;
        let shards = u64::from(self.shards);
        ((unit % shards) as usize, unit / shards * self.unit_blocks + lba % self.unit_blocks)
    }

    /// The array LBA of LBA `local` of shard `shard`.
    pub fn array_lba(&self, shard: usize, local: u64) -> u64 {
        debug_assert!(shard < self.shards());
        (local / self.unit_blocks * u64::from(self.shards) + shard as u64) * self.unit_blocks + local % self.unit_blocks
    }

    /// Logical blocks of the array in shard `shard`.
    pub fn logical_blocks_of(&self, shard: usize) -> u64 {
        let round = self.unit_blocks * u64::from(self.shards);
        let rest = (self.logical_blocks % round).saturating_sub(shard as u64 * self.unit_blocks);
        self.logical_blocks / round * self.unit_blocks + rest.min(self.unit_blocks)
    }

    /// The zones of every drive shard `shard` owns (in the engine's numbering).
    pub fn zones_of(&self, shard: usize) -> Range<u32> {
        let at = |s: u64| (s * u64::from(self.zone_count) / u64::from(self.shards)) as u32;
        at(shard as u64)..at(shard as u64 + 1)
    }

    /// Shard `shard`'s engine configuration: the array's, with its own logical blocks and
    /// UUID (see the module documentation).
    /// Refuses what shards cannot run: a declustered array (`Config::declustering`): each
    /// shard's drive parts would need the array's placement over every shard's zones.
    pub fn check_config(&self, array: &Config) -> Result<()> {
        if self.shards > 1 && array.declustering != crate::config::Declustering::CLASSIC {
            return Err(Error::InvalidConfig {
                reason: format!(
                    "{} shards over a declustered array: sharding a declustered array is not built yet",
                    self.shards
                ),
            });
        }
        Ok(())
    }

    pub fn shard_config(&self, shard: usize, array: Config) -> Config {
        let mut array_uuid = array.array_uuid;
        if self.shards > 1 {
            array_uuid[14] ^= self.shards as u8;
            array_uuid[15] ^= shard as u8;
        }
        Config { logical_blocks: self.logical_blocks_of(shard), array_uuid, ..array }
    }

    /// Refuses drives whose open or active zone limits cannot hold what S shards of
    /// `plan` write into at once (`SegmentPlan::active_zones_needed` each), plus
    /// `other_active_zones` the array keeps active besides (a superblock zone): which
    /// limit, and by how much it falls short.
    pub fn check_zone_limits(&self, geometry: &Geometry, plan: &SegmentPlan, other_active_zones: u32) -> Result<()> {
        let per_shard = plan.active_zones_needed();
        let engines = per_shard * self.shards;
        let shards = if self.shards == 1 { "1 shard".to_string() } else { format!("{} shards", self.shards) };
        let segments = plan.open_segments();
        let each = format!(
            "{shards} of {segments} open segment{} need {engines} ({per_shard} each: a zone being written and one \
             being sealed per open segment)",
            if segments == 1 { "" } else { "s" }
        );
        let limits = [
            ("open", geometry.max_open_zones, engines, each.clone()),
            ("active", geometry.max_active_zones, engines + other_active_zones, each),
        ];
        for (what, limit, needed, words) in limits {
            if let Some(limit) = limit.filter(|limit| *limit < needed) {
                let other = match (what, other_active_zones) {
                    ("active", 1) => " + 1 other active zone".to_string(),
                    ("active", n) if n > 1 => format!(" + {n} other active zones"),
                    _ => String::new(),
                };
                return Err(Error::InvalidConfig {
                    reason: format!(
                        "the drives allow {limit} {what} zone{}; {words}{other}: {} short",
                        if limit == 1 { "" } else { "s" },
                        needed - limit
                    ),
                });
            }
        }
        Ok(())
    }

    /// Refuses a map whose shards' zones cannot hold their logical blocks (each shard
    /// keeps its own reserve of zones for garbage collection and recovery): the first
    /// shard short, and by how much.
    pub fn check_capacity(&self, plan: &SegmentPlan) -> Result<()> {
        for shard in 0..self.shards() {
            let zones = self.zones_of(shard);
            let capacity = plan.capacity_blocks(zones.len() as u32);
            let needed = self.logical_blocks_of(shard);
            if needed > capacity {
                return Err(Error::InvalidConfig {
                    reason: format!(
                        "shard {shard} of {} holds {needed} logical blocks; its {} zones (zones {}..{}) export \
                         {capacity}: {} short",
                        self.shards,
                        zones.len(),
                        zones.start,
                        zones.end,
                        needed - capacity
                    ),
                });
            }
        }
        Ok(())
    }

    /// `error` of shard `shard` as the array says it: an LBA it names is the array's, a
    /// zone the engine's zone of the whole drive.
    pub fn array_error(&self, shard: usize, error: Error) -> Error {
        match error {
            Error::Lost { lba } => Error::Lost { lba: self.array_lba(shard, lba) },
            Error::Corrupt { drive, zone, offset_blocks, structure, reason } => {
                Error::Corrupt { drive, zone: zone + self.zones_of(shard).start, offset_blocks, structure, reason }
            }
            other => other,
        }
    }
}
