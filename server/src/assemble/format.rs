//! Making an array on drives: `format` writes the array superblock to zone 0 of every
//! drive and empties the rest; `format_with_spares` makes hot spares too (checked with the
//! drives before any is written, then emptied and given their spare records).
//!
//! Everything read from a drive is checked first: a drive of another array or a hot spare
//! (unless forced, or remains of either: `superblock::examine`), a drive named twice,
//! mismatched geometry, too little per-block metadata, or open/active zone limits below
//! what the array writes at once (`zone_limits`) is an error naming the drive. An array
//! has one or more open segments (hybrid segment management, recorded in the superblock);
//! the capacity exported is what garbage collection can always make room for with them
//! (`SegmentPlan::capacity_blocks`). An array of S engine shards records S and the
//! interleave unit; each shard's zones keep their own reserve, so S shards export less
//! than one engine over the same drives (`ShardMap::largest_logical_blocks`).

use std::path::{Path, PathBuf};

use zapraid_engine::format::{ArraySuperblock, SpareRecord, BLOCK_METADATA_BYTES, MAX_ARRAY_DRIVES};
use zapraid_engine::placement::Placement;
use zapraid_engine::shard::{ShardMap, DEFAULT_UNIT_BYTES, MAX_SHARDS};
use zapraid_engine::{Declustering, Mode, OpenSegments, RaidLevel, SegmentPlan, DEFAULT_STRIPE_TIMEOUT_NS};
use zapraid_zns::{execute, Command, Completion, Geometry, ZoneAction, ZoneTarget};

use super::new_drive::{check_new_drive, reset_every_zone};
use super::zone_limits::{check_zone_limits, open_segments_words};
use crate::drives::{geometry_differences, open_drive_to_erase, refuse_repeated_drives, Drive};
use crate::error::{Error, Result};
use crate::records::checkpoint::CheckpointArea;
use crate::records::identity::{new_uuid, unix_now_s, uuid_text};
use crate::records::layout::SUPERBLOCK_ZONES;
use crate::records::names::check_name;
use crate::records::spare::{read_spare_record, spare_text, write_spare_record};
use crate::records::superblock::{examine, read_superblock, superblock_writes};

/// How to format an array.
#[derive(Clone, Debug)]
pub struct FormatOptions {
    pub level: RaidLevel,
    pub mode: Mode,
    /// The chunk size, or with several open segments the small chunk (Cs).
    pub chunk_bytes: u64,
    /// Open segments: Ns of small chunks, Nl of large chunks (Cl) (`OpenSegments::SINGLE`:
    /// one of `chunk_bytes`).
    pub open_segments: OpenSegments,
    pub name: String,
    /// Overwrite drives that hold another array.
    pub force: bool,
    /// The L2P table's memory budget (None or 0: the whole table in memory, and no
    /// checkpoint).
    pub l2p_budget_bytes: Option<u64>,
    /// Engine shards the array runs (0 or 1: one), recorded in the superblock: they decide
    /// where every block is (`zapraid_engine::shard`).
    pub shards: u32,
    /// Over how many drives the stripes (of `level`'s drives) spread, and the distributed
    /// spares (`Declustering::CLASSIC`: every stripe over every drive).
    pub declustering: Declustering,
}

/// What `format` made.
#[derive(Clone, Copy, Debug)]
pub struct Formatted {
    pub uuid: [u8; 16],
    pub logical_blocks: u64,
    pub block_size_bytes: u32,
}

fn check_completion(path: &Path, what: &'static str, c: Completion) -> Result<()> {
    c.result.map(|_| ()).map_err(|error| Error::DriveCommand { path: path.to_path_buf(), what, error })
}

/// The open segments of an array on drives of `raw` geometry (the superblock zones
/// included), and their layouts.
fn segment_plan(
    raw: &Geometry,
    level: RaidLevel,
    mode: Mode,
    chunk_bytes: u64,
    open: OpenSegments,
) -> Result<SegmentPlan> {
    let array_geometry = Geometry { zone_count: raw.zone_count.saturating_sub(SUPERBLOCK_ZONES), ..*raw };
    Ok(SegmentPlan::new(&array_geometry, level, mode, chunk_bytes, open)?)
}

/// The placement of a declustered array of `drives` drives (None: classic, stripes over
/// every drive), or why the shape cannot be.
fn declustered_placement(options: &FormatOptions, drives: usize, shards: u32) -> Result<Option<Placement>> {
    let (k, m) = options.level.shape();
    if options.declustering == Declustering::CLASSIC {
        if k + m != drives {
            return Err(Error::Config { reason: format!("{} needs {} drives, {drives} given", options.level, k + m) });
        }
        return Ok(None);
    }
    let Declustering { drives: wide, distributed_spares, .. } = options.declustering;
    if wide as usize != drives || drives <= k + m || drives > MAX_ARRAY_DRIVES {
        return Err(Error::Config {
            reason: format!(
                "stripes of {} over {drives} drives: a declustered array takes more drives than a stripe, at most                  {MAX_ARRAY_DRIVES}",
                k + m
            ),
        });
    }
    if shards > 1 {
        return Err(Error::Config {
            reason: "a declustered array runs one engine shard (shards over one are not built for it)".into(),
        });
    }
    Ok(Some(Placement::new(drives as u32, (k + m) as u32, distributed_spares)?))
}

/// Formats `paths` as one array; `progress(done, total)` is told as each drive is done.
pub fn format(paths: &[PathBuf], options: &FormatOptions, progress: impl FnMut(usize, usize)) -> Result<Formatted> {
    format_with_spares(paths, &[], options, progress)
}

/// Formats `paths` as one array and makes `spares` its hot spares (`spare`): each is
/// checked with the drives before any is written, emptied, and given its spare record.
pub fn format_with_spares(
    paths: &[PathBuf],
    spares: &[PathBuf],
    options: &FormatOptions,
    mut progress: impl FnMut(usize, usize),
) -> Result<Formatted> {
    check_name(&options.name)?;
    let shards = options.shards.max(1);
    if shards > MAX_SHARDS {
        return Err(Error::Config { reason: format!("{shards} shards: an array runs 1 to {MAX_SHARDS}") });
    }
    // Said in drives for the level as given, before the count below is taken from it.
    options.level.validate()?;
    refuse_repeated_drives(&[paths, spares].concat())?;
    let (k, m) = options.level.shape();
    let placement = declustered_placement(options, paths.len(), shards)?;
    let mut drives = Vec::new();
    let mut geometry: Option<Geometry> = None;
    let mut plan: Option<SegmentPlan> = None;
    for path in paths {
        let mut drive = open_drive_to_erase(path, options.force)?;
        let g = drive.geometry();
        if (g.metadata_bytes_per_block as usize) < BLOCK_METADATA_BYTES {
            return Err(Error::Refused {
                path: path.clone(),
                reason: format!(
                    "its LBA format has {} bytes of per-block metadata; zapraid keeps {BLOCK_METADATA_BYTES} bytes \
                     per block there (format the namespace with a metadata size of at least {BLOCK_METADATA_BYTES}, \
                     e.g. nvme format --lbaf=N)",
                    g.metadata_bytes_per_block
                ),
            });
        }
        match geometry {
            None => geometry = Some(g),
            Some(first) if first != g => {
                return Err(Error::Refused {
                    path: path.clone(),
                    reason: format!(
                        "its geometry differs from the first drive's: {}",
                        geometry_differences(&g, &first)
                    ),
                })
            }
            Some(_) => {}
        }
        let plan = match &plan {
            Some(plan) => plan,
            None => {
                plan.insert(segment_plan(&g, options.level, options.mode, options.chunk_bytes, options.open_segments)?)
            }
        };
        check_zone_limits(path, &g, plan, shards)?;
        if !options.force {
            let reason = match read_superblock(drive.as_mut()) {
                Some(existing) => Some(format!(
                    "it is drive {} of array \"{}\" ({}); add --force to overwrite it",
                    existing.drive_index.get(),
                    existing.name(),
                    uuid_text(&existing.array_uuid)
                )),
                None => match read_spare_record(drive.as_mut()) {
                    Some(record) => Some(format!("it is {}; add --force to overwrite it", spare_text(&record))),
                    None => examine(drive.as_mut())
                        .ok()
                        .filter(|remains| remains.looks_like_member())
                        .map(|remains| format!("{}; add --force to overwrite it", remains.describe())),
                },
            };
            if let Some(reason) = reason {
                return Err(Error::Refused { path: path.clone(), reason });
            }
        }
        drives.push(drive);
    }
    let (Some(raw), Some(plan)) = (geometry, plan) else {
        return Err(Error::Config { reason: "no drives given".into() });
    };
    let mut spare_drives = check_format_spares(spares, &raw, options.force)?;
    // An array with an L2P budget keeps a checkpoint (`checkpoint`) in zones after the
    // superblock's, one area per shard, sized for the largest a shard can have (every zone
    // it may own a segment). A budget of 0 is none (the superblock records it so, and status
    // says so): no zones are set aside for it.
    // A declustered array numbers G segments per zone index (`zapraid_engine::lanes`): its
    // checkpoint holds an entry for each.
    let segments_per_zone = placement.as_ref().map_or(1, Placement::groups_per_row);
    let checkpoint = options.l2p_budget_bytes.filter(|bytes| *bytes > 0).map(|_| {
        if shards == 1 {
            let most_segments = raw.zone_count.saturating_sub(SUPERBLOCK_ZONES) * segments_per_zone;
            CheckpointArea::for_shard(&raw, &plan, most_segments, plan.capacity_blocks(most_segments))
        } else {
            let most_zones = raw.zone_count.saturating_sub(SUPERBLOCK_ZONES).div_ceil(shards);
            CheckpointArea::for_shard(&raw, &plan, most_zones, plan.capacity_blocks(most_zones))
        }
    });
    let reserved_zones = checkpoint.map_or(SUPERBLOCK_ZONES, |area| area.reserved_zones(shards));
    let array_zones = raw.zone_count.saturating_sub(reserved_zones);
    let unit_blocks = if shards > 1 { ShardMap::unit_blocks_of(DEFAULT_UNIT_BYTES, raw.block_size_bytes) } else { 0 };
    // What garbage collection and recovery need stays unexported (engine/src/capacity.rs),
    // in each shard's zones.
    // A declustered array's engine numbers its segments across the drives' zones: each
    // zone index holds a row's segments (`zapraid_engine::lanes`).
    let engine_geometry = Geometry { zone_count: array_zones * segments_per_zone, ..raw };
    let logical_blocks = if array_zones < shards {
        0
    } else {
        ShardMap::largest_logical_blocks(shards, unit_blocks, &engine_geometry, &plan)
    };
    if logical_blocks == 0 {
        let shards_words = if shards > 1 { format!("{shards} shards of ") } else { String::new() };
        let each = if shards > 1 { " each" } else { "" };
        return Err(Error::Config {
            reason: format!(
                "the drives have {} zones; an array of {shards_words}{} needs more than {} ({reserved_zones} for its \
                 superblock and checkpoint, {} kept empty or open for writing, garbage collection and recovery{each})",
                raw.zone_count,
                open_segments_words(&plan),
                reserved_zones + shards * plan.reserved_segments(),
                plan.reserved_segments()
            ),
        });
    }
    if shards > 1 {
        let map = ShardMap::new(shards, unit_blocks, logical_blocks, &engine_geometry)?;
        map.check_capacity(&plan)?;
    }
    let chunk_bytes = u32::try_from(options.chunk_bytes).map_err(|_| Error::Config {
        reason: format!("a chunk of {} B does not fit the superblock (at most 4 GiB)", options.chunk_bytes),
    })?;
    let uuid = new_uuid();
    let mut name = [0u8; 32];
    let bytes = options.name.as_bytes();
    if bytes.len() > name.len() {
        return Err(Error::Config { reason: format!("array name \"{}\" is longer than 32 bytes", options.name) });
    }
    name[..bytes.len()].copy_from_slice(bytes);
    let (mode, group_size) = options.mode.code();
    let total = drives.len();
    for (index, (drive, path)) in drives.iter_mut().zip(paths).enumerate() {
        // Empty every zone, then write the superblock (every copy) at the start of zone 0.
        for zone in 0..raw.zone_count {
            let target = ZoneTarget::Zone { start_lba: raw.zone_start_lba(zone) };
            let c = execute(drive.as_mut(), Command::ManageZone { action: ZoneAction::Reset, target });
            check_completion(path, "zone reset", c)?;
        }
        let mut superblock = ArraySuperblock {
            magic: [0; 8],
            version: 0.into(),
            superblock_bytes: 0.into(),
            array_uuid: uuid,
            drive_index: (index as u32).into(),
            drive_count: (total as u32).into(),
            data_chunks: (k as u32).into(),
            parity_chunks: (m as u32).into(),
            level: options.level.code(),
            mode,
            small_segments: 0,
            large_segments: 0,
            chunk_bytes: chunk_bytes.into(),
            group_size: group_size.into(),
            block_size_bytes: raw.block_size_bytes.into(),
            reserved_zones: reserved_zones.into(),
            logical_blocks: logical_blocks.into(),
            stripe_timeout_ns: DEFAULT_STRIPE_TIMEOUT_NS.into(),
            created_unix_s: unix_now_s().into(),
            name,
            generation: 0.into(),
            failed_drives: 0.into(),
            large_chunk_bytes: 0.into(),
            rebuilding_drives: 0.into(),
            l2p_budget_bytes: options.l2p_budget_bytes.unwrap_or(0).into(),
            shard_count: if shards > 1 { shards } else { 0 }.into(),
            shard_unit_blocks: (unit_blocks as u32).into(),
            distributed_spares: options.declustering.distributed_spares.into(),
            placement_crc32c: placement.as_ref().map_or(0, Placement::bases_crc32c).into(),
            spared_drives: 0.into(),
            grown_from: [0; 4],
            grown_placement_crc32c: [0.into(); 3],
            crc32c: 0.into(),
        };
        // One open segment stays recorded as zeros: a default array's superblock is byte for
        // byte what it always was.
        if options.open_segments.is_hybrid() {
            superblock.set_open_segments(options.open_segments);
        }
        let superblock = superblock.seal();
        for command in superblock_writes(&superblock, &raw, 0) {
            check_completion(path, "superblock write", execute(drive.as_mut(), command))?;
        }
        progress(index + 1, total);
    }
    let record = SpareRecord::new(uuid, &options.name, total as u32, raw.block_size_bytes, unix_now_s());
    write_format_spares(&mut spare_drives, spares, &raw, &record)?;
    Ok(Formatted { uuid, logical_blocks, block_size_bytes: raw.block_size_bytes })
}

/// Opens and checks the spares `zapraid format --spare` was given, before any drive is
/// written: each must have the members' raw geometry `raw` and, unless `force`, hold
/// nothing. (A spare also named as a member was refused as a drive given twice.)
pub fn check_format_spares(spares: &[PathBuf], raw: &Geometry, force: bool) -> Result<Vec<Drive>> {
    // No member has a canonical path to compare with yet: the format names them.
    let not_a_member = |_| String::new();
    spares.iter().map(|path| check_new_drive(path, raw, &[], force, not_a_member)).collect()
}

/// Empties every zone of each spare of a freshly formatted array and writes its record.
pub fn write_format_spares(
    drives: &mut [Drive],
    spares: &[PathBuf],
    raw: &Geometry,
    record: &SpareRecord,
) -> Result<()> {
    for (device, path) in drives.iter_mut().zip(spares) {
        reset_every_zone(device, raw, path)?;
        write_spare_record(device.as_mut(), record, path)?;
    }
    Ok(())
}
