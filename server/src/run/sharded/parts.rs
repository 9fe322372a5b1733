//! How an array of shards splits each drive (`PartLayout`): zone 0 for the superblock
//! record, each shard's checkpoint area, each shard's zones, in the drive's numbering, and
//! a drive opened as those parts (`DriveParts`), at start and for a new drive replacing one.
//!
//! Invariant: the spans never share a zone (`zapraid_zns` refuses them otherwise).

use std::path::Path;

use zapraid_engine::shard::ShardMap;
use zapraid_zns::{Geometry, MissingDrive};

use crate::drives::{open_drive_parts, Drive};
use crate::error::Result;
use crate::records::checkpoint::CheckpointArea;
use crate::records::layout::SUPERBLOCK_ZONES;

/// The parts every drive of an array of shards is split into.
#[derive(Clone, Debug)]
pub struct PartLayout {
    /// (first zone, zone count), the drive's numbering: zone 0, then `areas` checkpoint
    /// areas (one per shard, when the array keeps them), then each shard's zones.
    spans: Vec<(u32, u32)>,
    areas: usize,
    /// The whole drive's geometry.
    raw: Geometry,
}

/// Each drive's parts, by role.
pub struct DriveParts {
    pub zone0: Drive,
    pub checkpoint: Vec<Drive>,
    pub shards: Vec<Drive>,
}

impl PartLayout {
    /// The layout of `map`'s shards over drives whose engine zones (`engine`) follow
    /// `reserved` zones holding `areas`.
    pub fn of(map: &ShardMap, reserved: u32, areas: &[CheckpointArea], engine: Geometry) -> Self {
        let mut spans = vec![(0, SUPERBLOCK_ZONES)];
        spans.extend(areas.iter().map(|a| (a.first_zone, a.zones().len() as u32)));
        spans.extend((0..map.shards()).map(|s| map.zones_of(s)).map(|z| (reserved + z.start, z.end - z.start)));
        PartLayout { spans, areas: areas.len(), raw: Geometry { zone_count: engine.zone_count + reserved, ..engine } }
    }

    /// The drive at `path` opened as its parts; an absent drive's (None) are missing
    /// drives of the same shapes.
    pub fn open(&self, path: Option<&Path>) -> Result<DriveParts> {
        let mut parts = match path {
            Some(path) => open_drive_parts(path, &self.spans)?,
            None => self
                .spans
                .iter()
                .map(|(_, zones)| Box::new(MissingDrive::new(Geometry { zone_count: *zones, ..self.raw })) as Drive)
                .collect(),
        };
        let shards = parts.split_off(1 + self.areas);
        let checkpoint = parts.split_off(1);
        let zone0 = parts.pop().expect("zone 0's part");
        Ok(DriveParts { zone0, checkpoint, shards })
    }
}
