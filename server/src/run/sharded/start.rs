//! Starting an assembled array of S engine shards: every drive opened again as parts
//! (`drives::open_drive_parts`: zone 0 for the record, each shard's checkpoint area, each
//! shard's zones), then every shard's recovery at once, each on its own thread over its
//! own parts (from its checkpoint if it matches its zones, else by replaying its
//! segments), so a start takes about what the largest shard's recovery takes.
//!
//! Invariant: the parts of a drive never share a zone (`zapraid_zns` refuses overlapping
//! spans), so the shards' threads and the record never write the same zone.

use std::path::PathBuf;
use std::sync::Arc;

use zapraid_engine::shard::ShardMap;
use zapraid_engine::{Engine, RecoveryReport};
use zapraid_zns::{Geometry, MissingDrive, ReservedZones};

use super::array::{ShardStart, ShardedArray};
use crate::assemble::assembly::Assembled;
use crate::assemble::recover::{recover_engine, CheckpointDrives, EngineStart};
use crate::drives::{open_drive_parts, Drive};
use crate::error::{Error, Result};
use crate::records::checkpoint::{CheckpointArea, CheckpointPlace};
use crate::records::layout::SUPERBLOCK_ZONES;
use crate::run::record::{FailureRecord, SharedRecord};

/// An array of shards recovered and ready to run.
pub struct RecoveredShards {
    pub map: ShardMap,
    pub shards: Vec<ShardStart>,
    pub record: Arc<SharedRecord>,
    /// Each shard's recovery, in shard order.
    pub reports: Vec<RecoveryReport>,
}

/// Each drive's parts, by role.
struct DriveParts {
    zone0: Drive,
    checkpoint: Vec<Drive>,
    shards: Vec<Drive>,
}

/// Opens `assembled`'s drives again as parts and recovers every shard's engine. The
/// drives `assembled` holds are closed first (their locks released for the parts).
pub fn recover_shards(assembled: &mut Assembled) -> Result<RecoveredShards> {
    let sb = assembled.superblock;
    let shards = sb.shards();
    let map = ShardMap::new(
        shards,
        u64::from(sb.shard_unit_blocks.get()),
        assembled.config.logical_blocks,
        &assembled.geometry,
    )?;
    if sb.rebuilding_drives.get() != 0 {
        return Err(Error::Config {
            reason: format!(
                "the superblock records a drive being rebuilt; an array of {shards} engine shards does not rebuild \
                 yet (not built)"
            ),
        });
    }
    let reserved = sb.reserved_zones.get();
    let areas: Vec<CheckpointArea> = (0..shards).filter_map(|s| CheckpointArea::of(reserved, shards, s)).collect();
    let mut spans = vec![(0, SUPERBLOCK_ZONES)];
    spans.extend(areas.iter().map(|a| (a.first_zone, a.zones().len() as u32)));
    spans.extend((0..map.shards()).map(|s| map.zones_of(s)).map(|z| (reserved + z.start, z.end - z.start)));
    let raw = Geometry { zone_count: assembled.geometry.zone_count + reserved, ..assembled.geometry };
    // The whole drives go first: the parts open each drive again.
    drop(std::mem::take(&mut assembled.drives));
    let mut parts: Vec<DriveParts> = assembled
        .paths
        .iter()
        .map(|path| drive_parts(path.as_ref(), &spans, &raw, areas.len()))
        .collect::<Result<_>>()?;
    let record = FailureRecord::of(assembled);
    let superblock_generation = sb.generation.get();
    // Per shard, its parts of every drive.
    let mut by_shard: Vec<(Vec<Drive>, Vec<Drive>)> = (0..map.shards()).map(|_| (Vec::new(), Vec::new())).collect();
    let mut zone0 = Vec::new();
    for drive in &mut parts {
        for (s, part) in std::mem::take(&mut drive.shards).into_iter().enumerate() {
            by_shard[s].0.push(part);
        }
        for (s, part) in std::mem::take(&mut drive.checkpoint).into_iter().enumerate() {
            by_shard[s].1.push(part);
        }
    }
    for drive in parts {
        zone0.push(drive.zone0);
    }
    let failed = assembled.failed.clone();
    let (geometry, config) = (assembled.geometry, assembled.config);
    let recovered: Vec<Result<(ShardStart, RecoveryReport)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = by_shard
            .into_iter()
            .enumerate()
            .map(|(s, (data, mut checkpoint_drives))| {
                let failed = &failed;
                let zones = map.zones_of(s);
                let area = areas.get(s).map(|a| CheckpointArea { first_zone: 0, zones_per_copy: a.zones_per_copy });
                let input = EngineStart {
                    geometry: Geometry { zone_count: zones.end - zones.start, ..geometry },
                    config: map.shard_config(s, config),
                    failed,
                    superblock_generation,
                    drive_zone_offset: reserved + zones.start,
                };
                let mut record = FailureRecord { checkpoint: None, ..record.clone() };
                std::thread::Builder::new()
                    .name(format!("zapraid-recover{s}"))
                    .spawn_scoped(scope, move || {
                        let mut drives = window_all(data)?;
                        let mut place = area.map(|area| CheckpointPlace {
                            area,
                            next_generation: 1,
                            base_superblock_generation: None,
                            on_drives: None,
                        });
                        let checkpoints = CheckpointDrives::Parts(&mut checkpoint_drives[..]);
                        let (engine, report): (Engine, RecoveryReport) =
                            recover_engine(&mut drives, checkpoints, &mut place, input)?;
                        record.checkpoint = place;
                        Ok((ShardStart { engine, drives, checkpoint_drives, record }, report))
                    })
                    .map_err(|error| Error::Io { path: "recovery thread".into(), context: "cannot start", error })
            })
            .collect();
        handles.into_iter().map(|h| h.and_then(|h| h.join().unwrap_or_else(|_| Err(Error::EngineGone)))).collect()
    });
    let mut shards_started = Vec::new();
    let mut reports = Vec::new();
    for (s, result) in recovered.into_iter().enumerate() {
        let (shard, report) = result.map_err(|e| Error::Config { reason: format!("shard {s}: {e}") })?;
        shards_started.push(shard);
        reports.push(report);
    }
    let record = Arc::new(SharedRecord::new(record, zone0, map.shards(), 0));
    Ok(RecoveredShards { map, shards: shards_started, record, reports })
}

/// Drive `path`'s parts (`spans`, raw numbering: zone 0, then `areas` checkpoint areas,
/// then each shard's zones); an absent drive's are missing drives of the same shapes.
fn drive_parts(path: Option<&PathBuf>, spans: &[(u32, u32)], raw: &Geometry, areas: usize) -> Result<DriveParts> {
    let mut parts = match path {
        Some(path) => open_drive_parts(path, spans)?,
        None => spans
            .iter()
            .map(|(_, zones)| Box::new(MissingDrive::new(Geometry { zone_count: *zones, ..*raw })) as Drive)
            .collect(),
    };
    let shards = parts.split_off(1 + areas);
    let checkpoint = parts.split_off(1);
    let zone0 = parts.pop().expect("zone 0's part");
    Ok(DriveParts { zone0, checkpoint, shards })
}

/// Parts as the engine sees them: every zone of them its own (none reserved).
fn window_all(parts: Vec<Drive>) -> Result<Vec<ReservedZones<Drive>>> {
    parts
        .into_iter()
        .map(|d| ReservedZones::new(d, 0))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|error| Error::Config { reason: format!("a part of a drive has no zones: {error}") })
}

impl ShardedArray {
    /// Recovers every shard of `assembled` and starts their threads.
    pub fn start(assembled: &mut Assembled) -> Result<(ShardedArray, Vec<RecoveryReport>)> {
        let level = assembled.config.level;
        let block_size_bytes = assembled.geometry.block_size_bytes;
        let recovered = recover_shards(assembled)?;
        let array = ShardedArray::spawn(recovered.map, level, recovered.shards, recovered.record, block_size_bytes)?;
        Ok((array, recovered.reports))
    }
}
