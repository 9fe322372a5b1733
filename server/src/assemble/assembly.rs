//! Assembling an array from the drives given at start: their superblocks are read back,
//! the drives put in array order whatever order they were named in, and the array's
//! configuration taken from the newest superblock generation.
//!
//! Everything read is checked: drives of more than one array, a drive index held by two
//! drives, mismatched geometry, or open/active zone limits below what the array keeps open
//! (`zone_limits`) is an error naming the drive. A drive given that cannot be opened (but
//! is not in use by another process) or holds no valid superblock is not used; the array's
//! drives not found are absent, and whether the array may start without them is decided
//! and recorded by `degraded`. A drive holding a spare record of the array is kept apart
//! as a hot spare (`spare_pool`), never a member; one of another array, or of another
//! geometry, is refused. A spare whose record is damaged (and which holds nothing else)
//! costs the spare, not the array: it is kept apart too, not used, and the start says so. Invariant of `Assembled`: one device per drive index, an
//! absent drive's being a `MissingDrive` (nothing is read from or written to where it
//! was), and every absent drive is failed in `superblock` before anything else is written.

use std::path::{Path, PathBuf};

use zapraid_engine::format::ArraySuperblock;
use zapraid_engine::placement::Placement;
use zapraid_engine::{Config, Declustering, Mode, RaidLevel, SegmentPlan, PAPER_LOOKUP_PS_PER_ENTRY};
use zapraid_zns::{Geometry, MissingDrive, ReservedZones, ZonedDevice};

use super::degraded::{check_absent, record_failed, AbsentDrive, NewlyMissing, UnusableDrive};
use super::identify::{without_superblock, WithoutSuperblock};
use super::zone_limits::check_zone_limits;
use crate::drives::{geometry_differences, open_drive, refuse_repeated_drives, Drive};
use crate::error::{Error, Result};
use crate::records::checkpoint::{CheckpointArea, CheckpointPlace};
use crate::records::identity::uuid_text;
use crate::records::spare::{spare_text, DamagedSpare};
use crate::records::superblock::{failed_drives, read_superblock_at, spared_drives};

/// An array's drives in array order, and what it is.
pub struct Assembled {
    /// One per drive index; an absent drive's is a `MissingDrive`.
    pub drives: Vec<ReservedZones<Drive>>,
    /// The newest superblock (any drive's; the one this start wrote if it recorded absent
    /// drives failed), and per drive where its next one goes (0 for absent drives).
    pub superblock: ArraySuperblock,
    pub superblock_next_lba: Vec<u64>,
    /// Where the array keeps its checkpoint, if it does (`checkpoint`), and the next
    /// checkpoint's generation (known once `recover` has read them).
    pub checkpoint: Option<CheckpointPlace>,
    /// What the start's recovery read (`recover` sets it): from a checkpoint or not.
    pub recovery_report: Option<zapraid_engine::RecoveryReport>,
    /// Drives the superblock records as failed (the absent ones among them).
    pub failed: Vec<usize>,
    /// Drives absent at this start, and drives given that were not used.
    pub absent: Vec<AbsentDrive>,
    pub unusable: Vec<UnusableDrive>,
    /// Per drive index, the path it was given as (`None`: absent).
    pub paths: Vec<Option<PathBuf>>,
    pub geometry: Geometry,
    pub config: Config,
    pub name: String,
    /// The array's hot spares given (their spare records name it), opened, with their paths.
    pub spares: Vec<(PathBuf, Drive)>,
    /// Drives given that look like hot spares whose record is damaged: not used.
    pub damaged_spares: Vec<DamagedSpare>,
}

/// Opens `paths`, reads their superblocks and orders them as the array's drives; a drive
/// absent that the superblock does not record failed is refused (`NewlyMissing::Refuse`).
pub fn assemble(paths: &[PathBuf]) -> Result<Assembled> {
    assemble_with(paths, NewlyMissing::Refuse)
}

/// A drive given at start, as read.
enum Given {
    Member { superblock: ArraySuperblock, next_lba: u64, drive: Drive },
    Spare { record: zapraid_engine::format::SpareRecord, drive: Drive },
    DamagedSpare { reason: String, drive: Drive },
    Unusable(Error),
}

/// Opens a drive and reads its newest superblock. A drive in use by another process is an
/// error (it is there, and another program has it: perhaps this array, running); any
/// other failure to open it, or no valid superblock, makes it unusable.
fn read_given(path: &Path) -> Result<Given> {
    let mut drive = match open_drive(path) {
        Ok(drive) => drive,
        Err(error @ Error::Drive { error: zapraid_zns::Error::DriveInUse { .. }, .. }) => return Err(error),
        Err(error) => return Ok(Given::Unusable(error)),
    };
    Ok(match read_superblock_at(drive.as_mut()) {
        Some((superblock, next_lba)) => Given::Member { superblock, next_lba, drive },
        None => match without_superblock(drive.as_mut()) {
            WithoutSuperblock::Spare(record) => Given::Spare { record, drive },
            WithoutSuperblock::DamagedSpare(reason) => Given::DamagedSpare { reason, drive },
            WithoutSuperblock::Other(reason) => Given::Unusable(Error::Refused { path: path.to_path_buf(), reason }),
        },
    })
}

/// As `assemble`, with `newly_missing` saying what to do with a drive absent that the
/// superblock does not record failed (`zapraid start --degraded`: record it failed).
pub fn assemble_with(paths: &[PathBuf], newly_missing: NewlyMissing) -> Result<Assembled> {
    refuse_repeated_drives(paths)?;
    let mut found: Vec<(ArraySuperblock, u64, Drive, PathBuf)> = Vec::new();
    let mut unusable = Vec::new();
    let mut spares = Vec::new();
    let mut damaged_spares = Vec::new();
    for path in paths {
        match read_given(path)? {
            Given::Member { superblock, next_lba, drive } => found.push((superblock, next_lba, drive, path.clone())),
            Given::Spare { record, drive } => spares.push((record, drive, path.clone())),
            Given::DamagedSpare { reason, drive } => {
                damaged_spares.push(DamagedSpare { path: path.clone(), reason, drive });
            }
            // Closed at once: nothing more is read from it.
            Given::Unusable(error) => unusable.push(UnusableDrive { path: path.clone(), error }),
        }
    }
    let Some(newest) = found.iter().map(|(s, _, _, _)| *s).max_by_key(|s| s.generation.get()) else {
        if let Some((record, _, path)) = spares.first() {
            return Err(Error::Refused {
                path: path.clone(),
                reason: format!("it is {}: give the array's drives too", spare_text(record)),
            });
        }
        // No drive of any array: why the first one given is not.
        let damaged = damaged_spares.into_iter().next().map(|d| Error::Refused { path: d.path, reason: d.reason });
        return Err(unusable
            .into_iter()
            .next()
            .map(|u| u.error)
            .or(damaged)
            .unwrap_or_else(|| Error::Config { reason: "no drives given".into() }));
    };
    let superblocks: Vec<(&ArraySuperblock, &Path)> =
        found.iter().map(|(sb, _, _, path)| (sb, path.as_path())).collect();
    refuse_mixed_arrays(&superblocks)?;
    for (i, (sb, _, _, path)) in found.iter().enumerate() {
        let index = sb.drive_index.get();
        if let Some((_, _, _, other)) = found[..i].iter().find(|(s, _, _, _)| s.drive_index.get() == index) {
            return Err(Error::Refused {
                path: path.clone(),
                reason: format!("it is drive {index} of the array, as is {}", other.display()),
            });
        }
    }
    let drive_count = newest.drive_count.get() as usize;
    let width = newest.stripe_width() as usize;
    let level = RaidLevel::from_code(newest.level, width, newest.parity_chunks.get() as usize)
        .ok_or_else(|| Error::Config { reason: format!("unknown RAID level code {}", newest.level) })?;
    let declustering = if newest.is_declustered() {
        let spares = newest.distributed_spares.get();
        // The placement is made again from (N, w, S); a CRC that differs from the one
        // recorded means this zapraid would place segments elsewhere: refused.
        Placement::checked(drive_count as u32, width as u32, spares, newest.placement_crc32c.get())?;
        // And each placement before a grow, which some rows may still be in.
        let earlier = newest.grown_from();
        for (n, crc) in earlier.iter().zip(newest.grown_placement_crc32c) {
            Placement::checked(*n, width as u32, spares, crc.get())?;
        }
        let mut declustering = Declustering::wide(drive_count as u32, spares);
        for (slot, n) in declustering.grown_from.iter_mut().zip(earlier) {
            *slot = n as u8;
        }
        declustering
    } else {
        Declustering::CLASSIC
    };
    let mode = Mode::from_code(newest.mode, newest.group_size.get())
        .ok_or_else(|| Error::Config { reason: format!("unknown mode code {}", newest.mode) })?;
    let config = Config {
        level,
        mode,
        chunk_bytes: u64::from(newest.chunk_bytes.get()),
        open_segments: newest.open_segments(),
        stripe_timeout_ns: newest.stripe_timeout_ns.get(),
        logical_blocks: newest.logical_blocks.get(),
        lookup_ps_per_entry: PAPER_LOOKUP_PS_PER_ENTRY,
        merge_appends: true,
        declustering,
        l2p: zapraid_engine::L2pConfig {
            budget_bytes: Some(newest.l2p_budget_bytes.get()).filter(|b| *b > 0),
            page_entries: None,
            checkpoint: CheckpointArea::of(newest.reserved_zones.get(), newest.shards(), 0).is_some(),
        },
        array_uuid: newest.array_uuid,
    };
    let absent_indexes: Vec<usize> =
        (0..drive_count).filter(|i| !found.iter().any(|(s, _, _, _)| s.drive_index.get() as usize == *i)).collect();
    // Every drive is here: a drive given besides them is a mistake, said as it is.
    if absent_indexes.is_empty() && !unusable.is_empty() {
        return Err(unusable.swap_remove(0).error);
    }
    // A declustered array's drives in distributed spare space hold nothing: they count
    // neither against the level nor as newly missing.
    let spared = spared_drives(&newest);
    let recorded_failed: Vec<usize> = failed_drives(&newest).into_iter().filter(|d| !spared.contains(d)).collect();
    let rebuilding_mask = newest.rebuilding_drives.get();
    let rebuilding: Vec<usize> = (0..drive_count).filter(|d| rebuilding_mask >> d & 1 == 1).collect();
    let (absent_spared, absent_holding): (Vec<usize>, Vec<usize>) =
        absent_indexes.iter().partition(|d| spared.contains(d));
    let mut absent =
        check_absent(&newest.name(), level, &recorded_failed, &rebuilding, &absent_holding, &unusable, newly_missing)?;
    absent.extend(absent_spared.into_iter().map(|index| AbsentDrive {
        index,
        recorded_before: true,
        in_spare_space: true,
    }));
    found.sort_by_key(|(s, _, _, _)| s.drive_index.get());
    // The raw geometry (superblock zones included) a missing drive stands in with, and the
    // array's (`ReservedZones`), the same on every drive present.
    let raw = found[0].2.geometry();
    let reserved_zones = newest.reserved_zones.get();
    let mut drives = Vec::with_capacity(drive_count);
    let mut ordered_paths = Vec::with_capacity(drive_count);
    let mut next_lba = vec![0; drive_count];
    let mut present = found.into_iter().peekable();
    for (index, next_lba_of_drive) in next_lba.iter_mut().enumerate() {
        let member = present.next_if(|(s, _, _, _)| s.drive_index.get() as usize == index);
        let (drive, path) = match member {
            Some((sb, next, drive, path)) => {
                *next_lba_of_drive = next;
                let reserved = ReservedZones::new(drive, sb.reserved_zones.get())
                    .map_err(|error| Error::Drive { path: path.clone(), error })?;
                (reserved, Some(path))
            }
            None => {
                let missing: Drive = Box::new(MissingDrive::new(raw));
                let reserved = ReservedZones::new(missing, reserved_zones)
                    .map_err(|error| Error::Config { reason: format!("drive {index} (missing): {error}") })?;
                (reserved, None)
            }
        };
        drives.push(drive);
        ordered_paths.push(path);
    }
    let geometry = drives[0].geometry();
    for (drive, path) in drives.iter().zip(&ordered_paths) {
        if let Some(path) = path {
            if drive.geometry() != geometry {
                return Err(Error::Refused {
                    path: path.clone(),
                    reason: format!(
                        "its geometry differs from the other drives': {}",
                        geometry_differences(&drive.geometry(), &geometry)
                    ),
                });
            }
        }
    }
    let spares = array_spares(spares, &newest, &raw)?;
    let plan = SegmentPlan::new(&geometry, level, mode, config.chunk_bytes, config.open_segments)?;
    for (drive, path) in drives.iter().zip(&ordered_paths) {
        if let Some(path) = path {
            check_zone_limits(path, &drive.geometry(), &plan, newest.shards())?;
        }
    }
    let capacity = plan.capacity_blocks(geometry.zone_count * declustering.segments_per_zone(width));
    if config.logical_blocks > capacity {
        tracing::warn!(
            exported_blocks = config.logical_blocks,
            capacity_blocks = capacity,
            "the array exports more than garbage collection can always make room for (formatted by an older \
             zapraid): filled near its size it may report itself full; reformat it to be safe"
        );
    }
    let newly: Vec<usize> = absent.iter().filter(|d| !d.recorded_before).map(|d| d.index).collect();
    let superblock = if newly.is_empty() {
        newest
    } else {
        record_failed(&mut drives, &ordered_paths, &newest, &mut next_lba, &newly)?
    };
    Ok(Assembled {
        drives,
        superblock,
        superblock_next_lba: next_lba,
        checkpoint: CheckpointArea::of(reserved_zones, superblock.shards(), 0).map(|area| CheckpointPlace {
            area,
            next_generation: 1,
            base_superblock_generation: None,
            on_drives: None,
        }),
        recovery_report: None,
        failed: failed_drives(&superblock),
        absent,
        unusable,
        paths: ordered_paths,
        geometry,
        config,
        name: superblock.name(),
        spares,
        damaged_spares,
    })
}

/// The spares given at start, if they are all the array's (their records name its UUID)
/// and of its drives' raw geometry `raw`: a spare of another array, or of another
/// geometry, is a mistake, said as such.
fn array_spares(
    spares: Vec<(zapraid_engine::format::SpareRecord, Drive, PathBuf)>,
    array: &ArraySuperblock,
    raw: &Geometry,
) -> Result<Vec<(PathBuf, Drive)>> {
    let mut kept = Vec::with_capacity(spares.len());
    for (record, drive, path) in spares {
        let reason = if record.array_uuid != array.array_uuid {
            format!(
                "it is {}, not of array \"{}\" ({}) whose drives were given",
                spare_text(&record),
                array.name(),
                uuid_text(&array.array_uuid)
            )
        } else if drive.geometry() != *raw {
            format!(
                "it is a spare of the array, but its geometry differs from the array's drives': {}",
                geometry_differences(&drive.geometry(), raw)
            )
        } else {
            kept.push((path, drive));
            continue;
        };
        return Err(Error::Refused { path, reason });
    }
    Ok(kept)
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
