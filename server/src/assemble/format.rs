//! Arrays on drives: `format` writes the array superblock to zone 0 of every drive (and
//! empties the rest; `format_with_spares` makes hot spares too); `assemble` (in `assembly`, re-exported here) reads the superblocks
//! back and puts the drives in array order, standing in for absent ones (`degraded`), and
//! `recover` rebuilds the engine from them.
//!
//! Drives are NVMe ZNS namespaces (`/dev/ngXnY`, io_uring passthrough) or emulated drive
//! files. Everything read from a drive is checked: a drive of another array, a repeated
//! drive index, mismatched geometry, or open/active zone limits below what the array
//! writes at once (`zone_limits`) is an error naming the drive. An array has one or more
//! open segments (hybrid segment management, recorded in the superblock); the capacity
//! exported is what garbage collection can always make room for with them
//! (`SegmentPlan::capacity_blocks`).

use std::path::{Path, PathBuf};

use zapraid_engine::format::{ArraySuperblock, SpareRecord, BLOCK_METADATA_BYTES};
use zapraid_engine::recovery::Recovery;
use zapraid_engine::{Engine, Mode, OpenSegments, RaidLevel, SegmentPlan, DEFAULT_STRIPE_TIMEOUT_NS};
use zapraid_zns::{
    execute, Command, Completion, EmulatedDrive, Geometry, NvmeDrive, ZoneAction, ZoneTarget, ZonedDevice,
};

pub use crate::assemble::assembly::{assemble, assemble_with, Assembled};
use crate::records::checkpoint::{invalidate, read_newest, CheckpointArea, CheckpointMark};
pub use crate::assemble::degraded::NewlyMissing;
use crate::error::{Error, Result};
use crate::records::superblock::superblock_writes;
pub use crate::records::superblock::{failed_drives, read_superblock, read_superblock_at};
pub use crate::assemble::zone_limits::check_zone_limits;

/// Zones at the start of each drive kept for the array superblock.
pub const SUPERBLOCK_ZONES: u32 = 1;

/// A drive as the array uses it.
pub type Drive = Box<dyn ZonedDevice + Send>;

/// Opens an NVMe namespace (a character device) or an emulated drive file.
pub fn open_drive(path: &Path) -> Result<Drive> {
    let meta = std::fs::metadata(path).map_err(|error| Error::Io {
        path: path.to_path_buf(),
        context: "cannot open",
        error,
    })?;
    use std::os::unix::fs::FileTypeExt;
    let device: Drive = if meta.file_type().is_char_device() {
        Box::new(NvmeDrive::open(path).map_err(|error| Error::Drive { path: path.to_path_buf(), error })?)
    } else if meta.is_file() {
        Box::new(EmulatedDrive::open_file(path).map_err(|error| Error::Drive { path: path.to_path_buf(), error })?)
    } else {
        return Err(Error::Refused {
            path: path.to_path_buf(),
            reason: "neither an NVMe namespace (/dev/ngXnY) nor an emulated drive file".into(),
        });
    };
    Ok(device)
}

/// Opens a drive about to be erased (a member being formatted, a new drive or a spare
/// taken with `--force`): with `force`, an emulated drive file that cannot be opened
/// because a zone's record is damaged in both copies is re-initialised first (every zone
/// empty; what it held is being erased anyway).
pub fn open_drive_to_erase(path: &Path, force: bool) -> Result<Drive> {
    match open_drive(path) {
        Err(Error::Drive { error: zapraid_zns::Error::ZoneRecordLost { zone, .. }, .. }) if force => {
            tracing::warn!(path = %path.display(), zone, "a zone record is damaged in both copies: re-initialising the drive file");
            let drive = EmulatedDrive::reinitialize_file(path)
                .map_err(|error| Error::Drive { path: path.to_path_buf(), error })?;
            Ok(Box::new(drive))
        }
        other => other,
    }
}

/// Refuses a drive named twice (however spelled: paths are compared canonicalized).
/// Checked before any drive is opened: the second open of one drive would fail on the
/// first's lock, as if another process held it.
pub fn refuse_repeated_drives(paths: &[PathBuf]) -> Result<()> {
    // A path that cannot be canonicalized (missing) is compared as given; opening it
    // reports why.
    let canonical: Vec<PathBuf> =
        paths.iter().map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())).collect();
    for (i, path) in paths.iter().enumerate() {
        if let Some(first) = (0..i).find(|j| canonical[*j] == canonical[i]) {
            let reason = if paths[first].as_os_str() == path.as_os_str() {
                format!("drive {} given twice", path.display())
            } else {
                format!("drive {} given twice (also as {})", path.display(), paths[first].display())
            };
            return Err(Error::Config { reason });
        }
    }
    Ok(())
}

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
    crate::records::names::check_name(&options.name)?;
    // Said in drives for the level as given, before the count below is taken from it.
    options.level.validate()?;
    refuse_repeated_drives(&[paths, spares].concat())?;
    let (k, m) = options.level.shape();
    if k + m != paths.len() {
        return Err(Error::Config {
            reason: format!("{} needs {} drives, {} given", options.level, k + m, paths.len()),
        });
    }
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
        check_zone_limits(path, &g, plan)?;
        if !options.force {
            let reason = match read_superblock(drive.as_mut()) {
                Some(existing) => Some(format!(
                    "it is drive {} of array \"{}\" ({}); add --force to overwrite it",
                    existing.drive_index.get(),
                    existing.name(),
                    uuid_text(&existing.array_uuid)
                )),
                None => match crate::records::spare::read_spare_record(drive.as_mut()) {
                    Some(record) => {
                        Some(format!("it is {}; add --force to overwrite it", crate::records::spare::spare_text(&record)))
                    }
                    None => crate::records::superblock::examine(drive.as_mut())
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
    let mut spare_drives = crate::records::spare::check_format_spares(spares, &raw, options.force)?;
    // An array with an L2P budget keeps a checkpoint (`checkpoint`) in zones after the
    // superblock's, sized for the largest it can have. A budget of 0 is none (the
    // superblock records it so, and status says so): no zones are set aside for it.
    let checkpoint = options.l2p_budget_bytes.filter(|bytes| *bytes > 0).map(|_| {
        let most_logical = plan.capacity_blocks(raw.zone_count.saturating_sub(SUPERBLOCK_ZONES));
        CheckpointArea::for_array(&raw, &plan, most_logical)
    });
    let reserved_zones = checkpoint.map_or(SUPERBLOCK_ZONES, |area| area.reserved_zones());
    // What garbage collection and recovery need stays unexported (engine/src/capacity.rs).
    let logical_blocks = plan.capacity_blocks(raw.zone_count.saturating_sub(reserved_zones));
    if logical_blocks == 0 {
        return Err(Error::Config {
            reason: format!(
                "the drives have {} zones; an array of {} needs more than {} ({reserved_zones} for its superblock \
                 and checkpoint, {} kept empty or open for writing, garbage collection and recovery)",
                raw.zone_count,
                crate::assemble::zone_limits::open_segments_words(&plan),
                reserved_zones + plan.reserved_segments(),
                plan.reserved_segments()
            ),
        });
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
    crate::records::spare::write_format_spares(&mut spare_drives, spares, &raw, &record)?;
    Ok(Formatted { uuid, logical_blocks, block_size_bytes: raw.block_size_bytes })
}

/// Rebuilds the engine from the drives (after a clean stop or a crash). Errors name zones
/// as the drives number them (`zapraid inspect`), not as the engine does.
pub fn recover(assembled: &mut Assembled) -> Result<Engine> {
    let reserved_zones = assembled.superblock.reserved_zones.get();
    let with_drive_zones = |error| engine_error_on_drive_zones(error, reserved_zones);
    let mut recovery = Recovery::with_failed_drives(assembled.geometry, assembled.config, &assembled.failed)
        .map_err(with_drive_zones)?;
    // A rebuild in progress is no reason to replay: the drive being rebuilt counts failed,
    // and the rebuild checks what it holds of each segment as it resumes (a checkpoint
    // taken while it ran carries the open segments' stripe tables, as with a failed drive).
    // The checkpoint area, emptied once the start knows recovery did not use what it holds
    // (stale for good: a newer superblock, a segment it names gone, ...).
    let mut stale_checkpoint = None;
    let mut offered = None;
    if let Some(place) = assembled.checkpoint.as_mut() {
        let uuid = assembled.config.array_uuid;
        let found = read_newest(&mut assembled.drives, &assembled.failed, place.area, uuid);
        place.next_generation = place.next_generation.max(found.highest_generation + 1);
        // Also when none was read: a copy unreadable now may read again later, and must not
        // win over the copies later stops write with generations counted from 1.
        stale_checkpoint = Some(place.area);
        let superblock_generation = assembled.superblock.generation.get();
        offered = found.newest.as_ref().map(|image| (image.generation, image.base_generation));
        match found.newest {
            Some(image) if image.superblock_generation != superblock_generation => {
                tracing::warn!(
                    generation = image.generation,
                    "the checkpoint goes with superblock generation {}, the array is at {superblock_generation} (a \
                     drive failed or was rebuilt since): replaying every segment",
                    image.superblock_generation
                );
                recovery.pass_over_checkpoint(&image);
            }
            Some(image) => recovery.use_checkpoint(image, found.blocks_read),
            None => tracing::info!("no checkpoint found: every segment is replayed"),
        }
    }
    while !recovery.is_done() {
        recovery.run_round(&mut assembled.drives).map_err(with_drive_zones)?;
    }
    let report = recovery.report();
    match report.checkpoint_generation {
        // Kept: a crash of the engine this start begins finds it again, and replays only
        // the segments written after it (a start from it needs every segment it names, so
        // it goes stale by itself once garbage collection resets one).
        Some(generation) => {
            tracing::info!(
                generation,
                segments_replayed = report.segments_replayed,
                blocks_read = report.blocks_read,
                "started from the checkpoint"
            );
            let base = offered.filter(|(g, _)| *g == generation).and_then(|(_, base)| base);
            let superblock_generation = assembled.superblock.generation.get();
            if let Some(place) = assembled.checkpoint.as_mut() {
                place.keep_after_start(generation, base);
                // The engine starts where the checkpoint left the array: until it writes,
                // a clean stop need not write the same again.
                if report.segments_replayed == 0 && report.damaged_headers == 0 {
                    place.on_drives = Some(CheckpointMark { superblock_generation, engine_writes: 0 });
                }
            }
        }
        None => {
            tracing::info!(blocks_read = report.blocks_read, "started by replaying every segment");
            if let Some(area) = stale_checkpoint {
                invalidate(&mut assembled.drives, &assembled.failed, area);
            }
        }
    }
    assembled.recovery_report = Some(report);
    recovery.finish().map_err(with_drive_zones)
}

/// An engine error over drives with `reserved_zones` hidden (`ReservedZones`), its zone
/// numbered as on the drive: the engine numbers the zones after the reserved ones from 0.
fn engine_error_on_drive_zones(error: zapraid_engine::Error, reserved_zones: u32) -> Error {
    match error {
        zapraid_engine::Error::Corrupt { drive, zone, offset_blocks, structure, reason } => {
            let zone = zone.saturating_add(reserved_zones);
            Error::Engine(zapraid_engine::Error::Corrupt { drive, zone, offset_blocks, structure, reason })
        }
        other => Error::Engine(other),
    }
}

/// What differs between two drives' geometries, in words ("zone capacity (blocks) 480 vs
/// 240"): only the fields that differ.
pub(crate) fn geometry_differences(g: &Geometry, first: &Geometry) -> String {
    let limit = |l: Option<u32>| l.map_or("none".to_string(), |v| v.to_string());
    let fields = [
        ("block size (B)", g.block_size_bytes.to_string(), first.block_size_bytes.to_string()),
        ("metadata per block (B)", g.metadata_bytes_per_block.to_string(), first.metadata_bytes_per_block.to_string()),
        ("zone size (blocks)", g.zone_size_blocks.to_string(), first.zone_size_blocks.to_string()),
        ("zone capacity (blocks)", g.zone_capacity_blocks.to_string(), first.zone_capacity_blocks.to_string()),
        ("zones", g.zone_count.to_string(), first.zone_count.to_string()),
        ("max open zones", limit(g.max_open_zones), limit(first.max_open_zones)),
        ("max active zones", limit(g.max_active_zones), limit(first.max_active_zones)),
        ("Zone Append limit (blocks)", g.zone_append_max_blocks.to_string(), first.zone_append_max_blocks.to_string()),
        ("transfer limit (blocks)", g.max_transfer_blocks.to_string(), first.max_transfer_blocks.to_string()),
    ];
    fields
        .iter()
        .filter(|(_, a, b)| a != b)
        .map(|(what, a, b)| format!("{what} {a} vs {b}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn unix_now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A random array identity, from the kernel's random source.
fn new_uuid() -> [u8; 16] {
    let mut uuid = [0u8; 16];
    if let Ok(bytes) = std::fs::read("/proc/sys/kernel/random/uuid") {
        let hex: Vec<u8> = bytes.iter().copied().filter(u8::is_ascii_hexdigit).collect();
        for (i, pair) in hex.chunks(2).take(16).enumerate() {
            uuid[i] = u8::from_str_radix(std::str::from_utf8(pair).unwrap_or("0"), 16).unwrap_or(0);
        }
    }
    if uuid == [0; 16] {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        uuid = (nanos ^ u128::from(std::process::id()) << 64).to_le_bytes();
    }
    uuid
}

/// A UUID in its usual text form.
pub fn uuid_text(uuid: &[u8; 16]) -> String {
    let h: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}
