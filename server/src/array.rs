//! Arrays on drives: `format` writes the array superblock to zone 0 of every drive (and
//! empties the rest); `assemble` reads the superblocks back, puts the drives in array
//! order whatever order they were named in, and `recover` rebuilds the engine from them.
//!
//! Drives are NVMe ZNS namespaces (`/dev/ngXnY`, io_uring passthrough) or emulated drive
//! files. Everything read from a drive is checked: a drive of another array, a repeated
//! or missing drive index, mismatched geometry, or open/active zone limits below what the
//! array writes at once (`zone_limits`) is an error naming the drive. An array has one or
//! more open segments (hybrid segment management, recorded in the superblock); the
//! capacity exported is what garbage collection can always make room for with them
//! (`SegmentPlan::capacity_blocks`).

use std::path::{Path, PathBuf};

use zapraid_engine::format::{ArraySuperblock, BLOCK_METADATA_BYTES};
use zapraid_engine::recovery::Recovery;
use zapraid_engine::{
    Config, Engine, Mode, OpenSegments, RaidLevel, SegmentPlan, DEFAULT_STRIPE_TIMEOUT_NS, PAPER_LOOKUP_PS_PER_ENTRY,
};
use zapraid_zns::{
    execute, Command, Completion, EmulatedDrive, Geometry, NvmeDrive, ReservedZones, ZoneAction, ZoneTarget,
    ZonedDevice,
};

use crate::error::{Error, Result};
pub use crate::superblock::{failed_drives, read_superblock, read_superblock_at};
use crate::superblock::{missing_superblock_reason, superblock_writes};
pub use crate::zone_limits::check_zone_limits;

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
pub fn format(paths: &[PathBuf], options: &FormatOptions, mut progress: impl FnMut(usize, usize)) -> Result<Formatted> {
    crate::names::check_name(&options.name)?;
    // Said in drives for the level as given, before the count below is taken from it.
    options.level.validate()?;
    refuse_repeated_drives(paths)?;
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
        let mut drive = open_drive(path)?;
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
                None => crate::superblock::examine(drive.as_mut())
                    .ok()
                    .filter(|remains| remains.looks_like_member())
                    .map(|remains| format!("{}; add --force to overwrite it", remains.describe())),
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
    // What garbage collection and recovery need stays unexported (engine/src/capacity.rs).
    let logical_blocks = plan.capacity_blocks(raw.zone_count.saturating_sub(SUPERBLOCK_ZONES));
    if logical_blocks == 0 {
        return Err(Error::Config {
            reason: format!(
                "the drives have {} zones; an array of {} needs more than {} ({SUPERBLOCK_ZONES} for its superblock, \
                 {} kept empty or open for writing, garbage collection and recovery)",
                raw.zone_count,
                crate::zone_limits::open_segments_words(&plan),
                SUPERBLOCK_ZONES + plan.reserved_segments(),
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
            reserved_zones: SUPERBLOCK_ZONES.into(),
            logical_blocks: logical_blocks.into(),
            stripe_timeout_ns: DEFAULT_STRIPE_TIMEOUT_NS.into(),
            created_unix_s: unix_now_s().into(),
            name,
            generation: 0.into(),
            failed_drives: 0.into(),
            large_chunk_bytes: 0.into(),
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
    Ok(Formatted { uuid, logical_blocks, block_size_bytes: raw.block_size_bytes })
}

/// An array's drives in array order, and what it is.
pub struct Assembled {
    pub drives: Vec<ReservedZones<Drive>>,
    /// The newest superblock (any drive's), and where each drive's next one goes.
    pub superblock: ArraySuperblock,
    pub superblock_next_lba: Vec<u64>,
    /// Drives the superblock records as failed.
    pub failed: Vec<usize>,
    pub paths: Vec<PathBuf>,
    pub geometry: Geometry,
    pub config: Config,
    pub name: String,
}

/// Opens `paths`, reads their superblocks and orders them as the array's drives.
pub fn assemble(paths: &[PathBuf]) -> Result<Assembled> {
    refuse_repeated_drives(paths)?;
    let mut found: Vec<(ArraySuperblock, Drive, PathBuf)> = Vec::new();
    let mut next_lba = Vec::new();
    for path in paths {
        let mut drive = open_drive(path)?;
        let Some((sb, next)) = read_superblock_at(drive.as_mut()) else {
            return Err(Error::Refused { path: path.clone(), reason: missing_superblock_reason(drive.as_mut()) });
        };
        next_lba.push((sb.drive_index.get(), next));
        found.push((sb, drive, path.clone()));
    }
    let superblocks: Vec<(&ArraySuperblock, &Path)> = found.iter().map(|(sb, _, path)| (sb, path.as_path())).collect();
    refuse_mixed_arrays(&superblocks)?;
    for (i, (sb, _, path)) in found.iter().enumerate() {
        if let Some((_, _, other)) = found[..i].iter().find(|(s, _, _)| s.drive_index.get() == sb.drive_index.get()) {
            return Err(Error::Refused {
                path: path.clone(),
                reason: format!("it is drive {} of the array, as is {}", sb.drive_index.get(), other.display()),
            });
        }
    }
    next_lba.sort_unstable();
    let newest = found.iter().map(|(s, _, _)| *s).max_by_key(|s| s.generation.get());
    let Some((first, _, _)) = found.first() else {
        return Err(Error::Config { reason: "no drives given".into() });
    };
    let first = newest.unwrap_or(*first);
    let drive_count = first.drive_count.get() as usize;
    if found.len() != drive_count {
        let missing: Vec<u32> =
            (0..drive_count as u32).filter(|i| !found.iter().any(|(s, _, _)| s.drive_index.get() == *i)).collect();
        return Err(Error::Config {
            reason: format!(
                "array \"{}\" has {drive_count} drives, {} given (missing drive indexes {})",
                first.name(),
                found.len(),
                missing.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            ),
        });
    }
    found.sort_by_key(|(s, _, _)| s.drive_index.get());
    let level = RaidLevel::from_code(first.level, drive_count, first.parity_chunks.get() as usize)
        .ok_or_else(|| Error::Config { reason: format!("unknown RAID level code {}", first.level) })?;
    let mode = Mode::from_code(first.mode, first.group_size.get())
        .ok_or_else(|| Error::Config { reason: format!("unknown mode code {}", first.mode) })?;
    let config = Config {
        level,
        mode,
        chunk_bytes: u64::from(first.chunk_bytes.get()),
        open_segments: first.open_segments(),
        stripe_timeout_ns: first.stripe_timeout_ns.get(),
        logical_blocks: first.logical_blocks.get(),
        lookup_ps_per_entry: PAPER_LOOKUP_PS_PER_ENTRY,
        array_uuid: first.array_uuid,
    };
    let mut drives = Vec::new();
    let mut ordered_paths = Vec::new();
    let mut geometry = None;
    for (sb, drive, path) in found {
        let reserved = ReservedZones::new(drive, sb.reserved_zones.get())
            .map_err(|error| Error::Drive { path: path.clone(), error })?;
        let g = reserved.geometry();
        if *geometry.get_or_insert(g) != g {
            return Err(Error::Refused { path, reason: "its geometry differs from the other drives'".into() });
        }
        drives.push(reserved);
        ordered_paths.push(path);
    }
    let geometry = geometry.expect("drives");
    let plan = SegmentPlan::new(&geometry, level, mode, config.chunk_bytes, config.open_segments)?;
    for (drive, path) in drives.iter().zip(&ordered_paths) {
        check_zone_limits(path, &drive.geometry(), &plan)?;
    }
    let capacity = plan.capacity_blocks(geometry.zone_count);
    if config.logical_blocks > capacity {
        tracing::warn!(
            exported_blocks = config.logical_blocks,
            capacity_blocks = capacity,
            "the array exports more than garbage collection can always make room for (formatted by an older \
             zapraid): filled near its size it may report itself full; reformat it to be safe"
        );
    }
    Ok(Assembled {
        drives,
        superblock: first,
        superblock_next_lba: next_lba.into_iter().map(|(_, lba)| lba).collect(),
        failed: failed_drives(&first),
        paths: ordered_paths,
        geometry,
        config,
        name: first.name(),
    })
}

/// Refuses drives of more than one array. The odd one out is named: a drive of another
/// array than most of the drives given belong to, wherever it was listed; with no such
/// majority, each array's drives.
fn refuse_mixed_arrays(drives: &[(&ArraySuperblock, &Path)]) -> Result<()> {
    // Each array's superblock (the first drive's of it) and its drives, in the order given.
    let mut arrays: Vec<(&ArraySuperblock, Vec<&Path>)> = Vec::new();
    for &(sb, path) in drives {
        match arrays.iter_mut().find(|(a, _)| a.array_uuid == sb.array_uuid) {
            Some((_, paths)) => paths.push(path),
            None => arrays.push((sb, vec![path])),
        }
    }
    if arrays.len() < 2 {
        return Ok(());
    }
    let named = |sb: &ArraySuperblock| format!("array {} (\"{}\")", uuid_text(&sb.array_uuid), sb.name());
    let most = arrays.iter().map(|(_, paths)| paths.len()).max().unwrap_or(0);
    let mut largest = arrays.iter().filter(|(_, paths)| paths.len() == most);
    if let (Some((majority, _)), None) = (largest.next(), largest.next()) {
        if let Some((odd, path)) = drives.iter().find(|(sb, _)| sb.array_uuid != majority.array_uuid) {
            return Err(Error::Refused {
                path: path.to_path_buf(),
                reason: format!(
                    "it belongs to {}, while {most} of the {} drives given belong to {}",
                    named(odd),
                    drives.len(),
                    named(majority)
                ),
            });
        }
    }
    let groups: Vec<String> = arrays
        .iter()
        .map(|(sb, paths)| {
            let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            format!("{} to {}", paths.join(", "), named(sb))
        })
        .collect();
    Err(Error::Config {
        reason: format!("the drives given belong to different arrays: {}; give one array's drives", groups.join("; ")),
    })
}

/// Rebuilds the engine from the drives (after a clean stop or a crash). Errors name zones
/// as the drives number them (`zapraid inspect`), not as the engine does.
pub fn recover(assembled: &mut Assembled) -> Result<Engine> {
    let reserved_zones = assembled.superblock.reserved_zones.get();
    let with_drive_zones = |error| engine_error_on_drive_zones(error, reserved_zones);
    let mut recovery = Recovery::with_failed_drives(assembled.geometry, assembled.config, &assembled.failed)
        .map_err(with_drive_zones)?;
    while !recovery.is_done() {
        recovery.run_round(&mut assembled.drives).map_err(with_drive_zones)?;
    }
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

/// What differs between two drives' geometries, in words ("zone capacity 480 vs 240
/// blocks").
fn geometry_differences(g: &Geometry, first: &Geometry) -> String {
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

fn unix_now_s() -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn superblock(uuid: u8, name: &str) -> ArraySuperblock {
        let mut sb = <ArraySuperblock as zerocopy::FromZeros>::new_zeroed();
        sb.array_uuid = [uuid; 16];
        sb.name[..name.len()].copy_from_slice(name.as_bytes());
        sb
    }

    /// The drive of another array is named wherever it was listed (listed first, it made
    /// the healthy second drive the one refused).
    #[test]
    fn the_odd_drive_out_is_named() {
        let (a, b) = (superblock(0xaa, "a"), superblock(0xbb, "b"));
        let paths: Vec<PathBuf> = (0..4).map(|i| PathBuf::from(format!("d{i}"))).collect();
        fn given<'a>(sbs: [&'a ArraySuperblock; 4], paths: &'a [PathBuf]) -> Vec<(&'a ArraySuperblock, &'a Path)> {
            sbs.into_iter().zip(paths).map(|(sb, p)| (sb, p.as_path())).collect()
        }
        assert!(refuse_mixed_arrays(&given([&a, &a, &a, &a], &paths)).is_ok());
        let e = refuse_mixed_arrays(&given([&b, &a, &a, &a], &paths)).unwrap_err().to_string();
        assert!(e.starts_with("d0 refused: it belongs to array bbbbbbbb-"), "{e}");
        assert!(e.contains("(\"b\"), while 3 of the 4 drives given belong to array aaaaaaaa-"), "{e}");
        let e = refuse_mixed_arrays(&given([&a, &a, &b, &a], &paths)).unwrap_err().to_string();
        assert!(e.starts_with("d2 refused: it belongs to array bbbbbbbb-"), "{e}");
        let e = refuse_mixed_arrays(&given([&b, &a, &b, &a], &paths)).unwrap_err().to_string();
        assert!(e.starts_with("the drives given belong to different arrays: d0, d2 to array bbbbbbbb-"), "{e}");
        assert!(e.contains("; d1, d3 to array aaaaaaaa-"), "{e}");
    }
}
