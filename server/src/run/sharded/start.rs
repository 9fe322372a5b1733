//! Starting an assembled array of S engine shards: every drive opened again as parts
//! (`drives::open_drive_parts`: zone 0 for the record, each shard's checkpoint area, each
//! shard's zones), then every shard's recovery at once, each on its own thread over its
//! own parts (from its checkpoint if it matches its zones, else by replaying its
//! segments), so a start takes about what the largest shard's recovery takes. A rebuild
//! cut short resumes in every shard, over its part of the drive.
//!
//! Invariant: the parts of a drive never share a zone (`zapraid_zns` refuses overlapping
//! spans), so the shards' threads and the record never write the same zone.

use std::sync::Arc;

use zapraid_engine::shard::ShardMap;
use zapraid_engine::{Engine, RecoveryReport};
use zapraid_zns::{Geometry, ReservedZones};

use super::array::{ShardStart, ShardedArray};
use super::parts::{DriveParts, PartLayout};
use crate::assemble::assembly::Assembled;
use crate::assemble::recover::{rebuilding_drive, recover_engine, reset_zones_but, CheckpointDrives, EngineStart};
use crate::drives::Drive;
use crate::error::{Error, Result};
use crate::records::checkpoint::{CheckpointArea, CheckpointPlace};
use crate::run::record::{FailureRecord, SharedRecord};

/// An array of shards recovered and ready to run.
pub struct RecoveredShards {
    pub map: ShardMap,
    pub layout: PartLayout,
    pub shards: Vec<ShardStart>,
    pub record: Arc<SharedRecord>,
    /// Each shard's recovery, in shard order.
    pub reports: Vec<RecoveryReport>,
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
    // A drive being rebuilt: every shard's recovery counts it failed, then each resumes
    // its rebuild over its own part of it (`resume`).
    let resumed = rebuilding_drive(assembled);
    let reserved = sb.reserved_zones.get();
    let areas: Vec<CheckpointArea> = (0..shards).filter_map(|s| CheckpointArea::of(reserved, shards, s)).collect();
    let layout = PartLayout::of(&map, reserved, &areas, assembled.geometry);
    // The whole drives go first: the parts open each drive again.
    drop(std::mem::take(&mut assembled.drives));
    let mut parts: Vec<DriveParts> =
        assembled.paths.iter().map(|path| layout.open(path.as_deref())).collect::<Result<_>>()?;
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
                    config: shard_config(&map, s, config),
                    failed,
                    // Shards run classic arrays only (`ShardMap::check_config`).
                    spared: &[],
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
                        let (mut engine, report): (Engine, RecoveryReport) =
                            recover_engine(&mut drives, checkpoints, &mut place, input)?;
                        engine.share_drives_with(map.shards() as u32);
                        if let Some(drive) = resumed {
                            resume(&mut engine, &mut drives[drive], drive)?;
                        }
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
    let rebuilding = resumed.map_or(0, |drive| 1u64 << drive);
    let record = Arc::new(SharedRecord::new(record, zone0, map.shards(), rebuilding));
    Ok(RecoveredShards { map, layout, shards: shards_started, record, reports })
}

/// Shard `shard`'s engine configuration: the map's, with the array's L2P memory budget
/// shared among the shards (each keeps its own table), so that the array holds to the
/// budget it was given.
fn shard_config(map: &ShardMap, shard: usize, array: zapraid_engine::Config) -> zapraid_engine::Config {
    let mut config = map.shard_config(shard, array);
    let shards = map.shards() as u64;
    config.l2p.budget_bytes = array.l2p.budget_bytes.map(|bytes| bytes.div_ceil(shards));
    config
}

/// Resumes a shard's rebuild of `drive` cut short, over its part `part` of it: its zones
/// that hold none of the shard's segments are reset (new segments are written there
/// from the start); the others the engine checks as it resumes, never trusting them.
fn resume(engine: &mut Engine, part: &mut ReservedZones<Drive>, drive: usize) -> Result<()> {
    reset_zones_but(part, &engine.zones_holding_segments())
        .map_err(|error| Error::Config { reason: format!("drive {drive} being rebuilt: zone reset: {error}") })?;
    engine.resume_drive_rebuild(drive)?;
    tracing::warn!(drive, "a shard's rebuild cut short resumes");
    Ok(())
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
        let array = ShardedArray::spawn(
            recovered.map,
            recovered.layout,
            level,
            recovered.shards,
            recovered.record,
            block_size_bytes,
        )?;
        Ok((array, recovered.reports))
    }
}
