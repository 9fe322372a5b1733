//! Degraded assembly: which of an array's drives are absent at start (not given, or given
//! but unusable: unopenable, or without a valid superblock of this array), whether the
//! array may start without them, and recording them failed before anything is written.
//!
//! Rules (as `mdadm --run`): drives failed (recorded in the newest superblock) and absent
//! together may number at most what the level survives (`RaidLevel::tolerated_failures`);
//! a drive absent that the superblock does not record failed (newly missing) is accepted
//! only when asked (`NewlyMissing::RecordFailed`, `zapraid start --degraded`), so a drive
//! left out by mistake does not degrade the array silently. A newly missing drive is
//! recorded failed in a new superblock generation on every live drive before the array
//! is recovered (recovery resets zones) or written: a drive recorded failed stays failed,
//! even if it comes back, so it never serves blocks it missed. A start refused because
//! one drive's segment headers disagree with the others' (a stale copy) says how to
//! start without that drive (`stale_drive_hint`).

use std::path::PathBuf;

use zapraid_engine::format::ArraySuperblock;
use zapraid_engine::RaidLevel;
use zapraid_zns::{execute, ReservedZones, ZonedDevice};

use crate::drives::Drive;
use crate::error::{Error, Result};
use crate::records::superblock::{superblock_writes, SUPERBLOCK_COPIES};

/// What to do with a drive absent at start that the superblock does not record failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NewlyMissing {
    /// Refuse to start, saying to add `--degraded` (a cabling mistake should not degrade
    /// the array).
    #[default]
    Refuse,
    /// Record it failed and start degraded (`--degraded`).
    RecordFailed,
}

/// A drive given at start and not used: it could not be opened, or holds no valid
/// superblock. Which of the array's drives it was, if any, cannot be told.
#[derive(Debug)]
pub struct UnusableDrive {
    pub path: PathBuf,
    pub error: Error,
}

impl UnusableDrive {
    /// Its path and why it is not used, the path said once.
    pub fn text(&self) -> String {
        match &self.error {
            Error::Refused { reason, .. } => format!("{}: {reason}", self.path.display()),
            other => other.to_string(),
        }
    }
}

/// A drive of the array that is absent at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbsentDrive {
    pub index: usize,
    /// The newest superblock recorded it failed already (else it is recorded at this start).
    pub recorded_before: bool,
    /// A declustered array's drive whose chunks were all rebuilt into distributed spare
    /// space: the array needs nothing from it.
    pub in_spare_space: bool,
}

/// Decides whether an array of `level` may start with the drives `absent` missing and
/// `recorded_failed` failed per its newest superblock (`rebuilding`, of those, had a
/// rebuild onto them not finished); returns the absent drives, each said recorded failed
/// before or not. `unusable` (given, not used) is only said in the
/// refusal, as what may have been meant.
pub fn check_absent(
    name: &str,
    level: RaidLevel,
    recorded_failed: &[usize],
    rebuilding: &[usize],
    absent: &[usize],
    unusable: &[UnusableDrive],
    newly_missing: NewlyMissing,
) -> Result<Vec<AbsentDrive>> {
    let drives: Vec<AbsentDrive> = absent
        .iter()
        .map(|&index| AbsentDrive { index, recorded_before: recorded_failed.contains(&index), in_spare_space: false })
        .collect();
    let mut down: Vec<usize> = recorded_failed.iter().chain(absent).copied().collect();
    down.sort_unstable();
    down.dedup();
    let given = given_text(unusable);
    let tolerated = level.tolerated_failures();
    if down.len() > tolerated {
        let each: Vec<String> = down
            .iter()
            .map(|d| match (absent.contains(d), recorded_failed.contains(d)) {
                (true, true) => format!("drive {d} missing (recorded failed before)"),
                (true, false) => format!("drive {d} missing"),
                _ if rebuilding.contains(d) => format!("drive {d} being rebuilt, not whole yet"),
                _ => format!("drive {d} recorded failed"),
            })
            .collect();
        return Err(Error::MissingDrives {
            array: name.to_string(),
            reason: format!(
                "{level} survives {}, and {} {} missing or failed ({}{}): its data cannot be read",
                failures_text(tolerated),
                drives_text(&down),
                if down.len() == 1 { "is" } else { "are" },
                each.join(", "),
                given.as_deref().map_or_else(String::new, |g| format!("; {g}"))
            ),
        });
    }
    let newly: Vec<usize> = drives.iter().filter(|d| !d.recorded_before).map(|d| d.index).collect();
    if !newly.is_empty() && newly_missing == NewlyMissing::Refuse {
        let them = drives_text(&newly);
        return Err(Error::MissingDrives {
            array: name.to_string(),
            reason: format!(
                "{them} {} missing{}. If {} gone, add --degraded to start the array without {}: {them} {} \
                 then recorded failed, and {} failed even if {} back (`zapraid replace` rebuilds a failed drive \
                 onto a new one once the array runs)",
                if newly.len() == 1 { "is" } else { "are" },
                given.as_deref().map_or_else(String::new, |g| format!(" ({g})")),
                if newly.len() == 1 { "it is" } else { "they are" },
                if newly.len() == 1 { "it" } else { "them" },
                if newly.len() == 1 { "is" } else { "are" },
                if newly.len() == 1 { "stays" } else { "stay" },
                if newly.len() == 1 { "it comes" } else { "they come" },
            ),
        });
    }
    Ok(drives)
}

/// The line a degraded start says: which drives are missing, and which drives given were
/// not used; `None` when no drive is missing.
pub fn absent_line(name: &str, absent: &[AbsentDrive], unusable: &[UnusableDrive]) -> Option<String> {
    if absent.is_empty() {
        return None;
    }
    let each: Vec<String> = absent
        .iter()
        .map(|d| {
            let when = match (d.in_spare_space, d.recorded_before) {
                (true, _) => "its chunks in distributed spare space",
                (false, true) => "recorded failed before",
                (false, false) => "recorded failed now",
            };
            format!("drive {} missing ({when})", d.index)
        })
        .collect();
    let given = given_text(unusable).map_or_else(String::new, |g| format!("; {g}"));
    // Drives in spare space hold nothing the array needs: without others it is whole.
    let runs =
        if absent.iter().all(|d| d.in_spare_space) { "runs without drives it needs no more" } else { "runs degraded" };
    Some(format!("array \"{name}\" {runs}: {}{given}", each.join(", ")))
}

/// "given but not used: PATH: REASON, PATH: REASON" for drives given and not used.
fn given_text(unusable: &[UnusableDrive]) -> Option<String> {
    if unusable.is_empty() {
        return None;
    }
    let each: Vec<String> = unusable.iter().map(UnusableDrive::text).collect();
    Some(format!("given but not used: {}", each.join(", ")))
}

/// A recovery error naming one drive whose segment header disagrees with the other
/// drives' (`HEADERS_DISAGREE`): most likely a stale copy of that drive (put back after
/// the array wrote on without it), which the array starts without. The error then says
/// so, naming the drive and the way: leave it out with `--degraded`, then replace it.
pub fn stale_drive_hint(error: Error, name: &str, paths: &[Option<PathBuf>]) -> Error {
    let Error::Engine(zapraid_engine::Error::Corrupt { drive, reason, .. }) = &error else { return error };
    if !reason.starts_with(zapraid_engine::recovery::HEADERS_DISAGREE) {
        return error;
    }
    let Some(Some(path)) = paths.get(*drive) else { return error };
    let others: Vec<String> = paths
        .iter()
        .enumerate()
        .filter(|(i, _)| i != drive)
        .filter_map(|(_, p)| p.as_ref().map(|p| p.display().to_string()))
        .collect();
    Error::Config {
        reason: format!(
            "{error}. Drive {drive} ({path}) is most likely a stale copy: it missed writes the other drives have. \
             Start the array without it: zapraid start --degraded {} (it is recorded failed and its blocks are \
             rebuilt from the others on read); then replace it: zapraid replace {name} {drive} NEW-DRIVE",
            others.join(" "),
            path = path.display()
        ),
    }
}

/// "drive 1", "drives 0 and 2", "drives 0, 1 and 3".
pub fn drives_text(drives: &[usize]) -> String {
    match drives {
        [] => "no drive".into(),
        [one] => format!("drive {one}"),
        [first @ .., last] => {
            let first: Vec<String> = first.iter().map(usize::to_string).collect();
            format!("drives {} and {last}", first.join(", "))
        }
    }
}

/// "no failed drive", "1 failed drive", "2 failed drives".
fn failures_text(count: usize) -> String {
    match count {
        0 => "no failed drive".into(),
        1 => "1 failed drive".into(),
        n => format!("{n} failed drives"),
    }
}

/// Records the drives `newly` failed: a new generation of `superblock` (with their bits
/// set), every copy, appended to zone 0 of every drive not failed in it, each at its
/// `next_lba` (advanced). Returns the generation written. Nothing is written to a failed
/// drive, present or not.
pub fn record_failed(
    drives: &mut [ReservedZones<Drive>],
    paths: &[Option<PathBuf>],
    superblock: &ArraySuperblock,
    next_lba: &mut [u64],
    newly: &[usize],
) -> Result<ArraySuperblock> {
    let mut sb = *superblock;
    let failed = newly.iter().fold(sb.failed_drives.get(), |mask, d| mask | 1 << d);
    sb.generation = (sb.generation.get() + 1).into();
    sb.failed_drives = failed.into();
    let sb = sb.seal();
    for (i, drive) in drives.iter_mut().enumerate() {
        if failed >> i & 1 == 1 {
            continue;
        }
        let path = paths.get(i).cloned().flatten().unwrap_or_else(|| PathBuf::from(format!("drive {i}")));
        let raw = drive.inner_mut();
        let g = raw.geometry();
        let lba = next_lba[i];
        if lba + SUPERBLOCK_COPIES > g.zone_capacity_blocks {
            return Err(Error::Refused {
                path,
                reason: format!(
                    "zone 0 is full ({lba} of {} blocks written): the missing drives cannot be recorded failed on it",
                    g.zone_capacity_blocks
                ),
            });
        }
        let mut own = sb;
        own.drive_index = (i as u32).into();
        for command in superblock_writes(&own.seal(), &g, lba) {
            let c = execute(raw, command);
            c.result.map_err(|error| Error::DriveCommand { path: path.clone(), what: "superblock write", error })?;
        }
        next_lba[i] = lba + SUPERBLOCK_COPIES;
    }
    tracing::warn!(
        generation = sb.generation.get(),
        failed_drives = failed,
        "missing drives recorded failed in the superblock"
    );
    Ok(sb)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAID5: RaidLevel = RaidLevel::Raid5 { drives: 4 };
    const RAID6: RaidLevel = RaidLevel::Raid6 { drives: 5 };

    fn absent(index: usize, recorded_before: bool) -> AbsentDrive {
        AbsentDrive { index, recorded_before, in_spare_space: false }
    }

    #[test]
    fn a_newly_missing_drive_needs_the_flag() {
        let e = check_absent("a", RAID5, &[], &[], &[1], &[], NewlyMissing::Refuse).unwrap_err().to_string();
        assert_eq!(
            e,
            "array \"a\" cannot start: drive 1 is missing. If it is gone, add --degraded to start the array without \
             it: drive 1 is then recorded failed, and stays failed even if it comes back (`zapraid replace` rebuilds \
             a failed drive onto a new one once the array runs)"
        );
        assert!(matches!(
            check_absent("a", RAID5, &[], &[], &[1], &[], NewlyMissing::RecordFailed).as_deref(),
            Ok([AbsentDrive { index: 1, recorded_before: false, in_spare_space: false }])
        ));
        let e = check_absent("a", RAID6, &[], &[], &[0, 4], &[], NewlyMissing::Refuse).unwrap_err().to_string();
        assert!(e.contains("drives 0 and 4 are missing. If they are gone,"), "{e}");
        assert!(e.contains("drives 0 and 4 are then recorded failed, and stay failed even if they come back"), "{e}");
    }

    #[test]
    fn a_drive_recorded_failed_may_be_absent_without_the_flag() {
        let got = check_absent("a", RAID5, &[2], &[], &[2], &[], NewlyMissing::Refuse).unwrap();
        assert_eq!(got, [absent(2, true)]);
        // One recorded, one new: the new one still needs the flag.
        let e = check_absent("a", RAID6, &[2], &[], &[2, 3], &[], NewlyMissing::Refuse).unwrap_err().to_string();
        assert!(e.contains(": drive 3 is missing."), "{e}");
        let got = check_absent("a", RAID6, &[2], &[], &[2, 3], &[], NewlyMissing::RecordFailed).unwrap();
        assert_eq!(got, [absent(2, true), absent(3, false)]);
    }

    #[test]
    fn more_missing_or_failed_than_the_level_survives_is_refused_naming_them() {
        for newly_missing in [NewlyMissing::Refuse, NewlyMissing::RecordFailed] {
            let e = check_absent("a", RAID5, &[1], &[], &[2], &[], newly_missing).unwrap_err().to_string();
            assert_eq!(
                e,
                "array \"a\" cannot start: RAID-5 (3+1) survives 1 failed drive, and drives 1 and 2 are missing or \
                 failed (drive 1 recorded failed, drive 2 missing): its data cannot be read"
            );
        }
        let e =
            check_absent("a", RAID6, &[], &[], &[0, 1, 3], &[], NewlyMissing::RecordFailed).unwrap_err().to_string();
        assert!(e.contains("survives 2 failed drives, and drives 0, 1 and 3 are missing or failed"), "{e}");
        let raid0 = RaidLevel::Raid0 { drives: 4 };
        let e = check_absent("a", raid0, &[3], &[], &[], &[], NewlyMissing::Refuse).unwrap_err().to_string();
        assert!(e.contains("survives no failed drive, and drive 3 is missing or failed (drive 3 recorded"), "{e}");
    }

    #[test]
    fn drives_given_but_unusable_are_said_with_their_reason() {
        let unusable = [UnusableDrive {
            path: "d/x.zns".into(),
            error: Error::Refused { path: "d/x.zns".into(), reason: "it is blank".into() },
        }];
        let e = check_absent("a", RAID5, &[], &[], &[0], &unusable, NewlyMissing::Refuse).unwrap_err().to_string();
        assert!(e.contains("drive 0 is missing (given but not used: d/x.zns: it is blank). If it"), "{e}");
        let line = absent_line("a", &[absent(0, false), absent(3, true)], &unusable).unwrap();
        assert_eq!(
            line,
            "array \"a\" runs degraded: drive 0 missing (recorded failed now), drive 3 missing (recorded failed \
             before); given but not used: d/x.zns: it is blank"
        );
        let e =
            check_absent("a", RAID5, &[1], &[], &[0], &unusable, NewlyMissing::RecordFailed).unwrap_err().to_string();
        assert!(
            e.contains("(drive 0 missing, drive 1 recorded failed; given but not used: d/x.zns: it is blank): its"),
            "{e}"
        );
        assert_eq!(absent_line("a", &[], &unusable), None);
    }
}
