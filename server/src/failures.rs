//! Drive failures asked for (`zapraid fail`, the control socket's `fail N`, the
//! self-test): which ones the engine thread carries out. A drive the array does not have,
//! or one that has failed already, is refused; so is a failure beyond what the RAID level
//! survives, which would lose the array's data (it could neither serve it nor start
//! again), unless forced.

use zapraid_engine::RaidLevel;

use crate::error::{Error, Result};

/// What a drive failure that was carried out leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailOutcome {
    /// The array runs degraded: the failed drives' blocks are rebuilt from the others.
    Degraded,
    /// Forced beyond what the level survives: the array's data is lost.
    DataLost,
}

/// Whether drive `drive` of an array of `level` may be failed, with `failed` failed
/// already; `force` accepts losing the array's data.
pub fn check_fail(level: RaidLevel, failed: &[usize], drive: usize, force: bool) -> Result<FailOutcome> {
    let (data, parity) = level.shape();
    let drives = data + parity;
    if drive >= drives {
        return Err(Error::NoSuchDrive { drive, drives });
    }
    if failed.contains(&drive) {
        return Err(Error::AlreadyFailed { drive });
    }
    if failed.len() < level.tolerated_failures() {
        return Ok(FailOutcome::Degraded);
    }
    if force {
        return Ok(FailOutcome::DataLost);
    }
    Err(Error::Unsurvivable { level, failed: failed.to_vec(), drive })
}

/// Why a failure is refused: what the level survives, what failed already, what failing
/// `drive` would do.
pub fn unsurvivable_text(level: RaidLevel, failed: &[usize], drive: usize) -> String {
    let survives = match level.tolerated_failures() {
        0 => "no failed drive".to_string(),
        1 => "1 failed drive".to_string(),
        n => format!("{n} failed drives"),
    };
    let already = match failed {
        [] => String::new(),
        [one] => format!(", and drive {one} has failed already"),
        [first @ .., last] => {
            let first: Vec<String> = first.iter().map(usize::to_string).collect();
            format!(", and drives {} and {last} have failed already", first.join(", "))
        }
    };
    let too = if failed.is_empty() { "" } else { " too" };
    format!(
        "{level} survives {survives}{already}: failing drive {drive}{too} would lose the array's data (reads and \
         writes would fail, and it would not start again); add --force to fail it anyway"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_within_the_level_are_carried_out() {
        let raid6 = RaidLevel::Raid6 { drives: 5 };
        assert_eq!(check_fail(raid6, &[], 0, false).unwrap(), FailOutcome::Degraded);
        assert_eq!(check_fail(raid6, &[0], 4, false).unwrap(), FailOutcome::Degraded);
        let raid1 = RaidLevel::Raid1 { drives: 3 };
        assert_eq!(check_fail(raid1, &[2], 1, false).unwrap(), FailOutcome::Degraded);
    }

    #[test]
    fn failures_beyond_the_level_are_refused_unless_forced() {
        let raid0 = RaidLevel::Raid0 { drives: 4 };
        let e = check_fail(raid0, &[], 1, false).unwrap_err().to_string();
        assert_eq!(
            e,
            "RAID-0 (4) survives no failed drive: failing drive 1 would lose the array's data (reads and writes \
             would fail, and it would not start again); add --force to fail it anyway"
        );
        assert_eq!(check_fail(raid0, &[], 1, true).unwrap(), FailOutcome::DataLost);
        let raid5 = RaidLevel::Raid5 { drives: 4 };
        let e = check_fail(raid5, &[2], 1, false).unwrap_err().to_string();
        assert!(
            e.starts_with("RAID-5 (3+1) survives 1 failed drive, and drive 2 has failed already: failing drive 1 too"),
            "{e}"
        );
        let raid6 = RaidLevel::Raid6 { drives: 6 };
        let e = check_fail(raid6, &[0, 3], 5, false).unwrap_err().to_string();
        assert!(e.contains("survives 2 failed drives, and drives 0 and 3 have failed already"), "{e}");
        // RAID-01 survives one failure whichever drive it is, and no more.
        let raid01 = RaidLevel::Raid01 { drives: 4 };
        assert!(check_fail(raid01, &[0], 3, false).is_err());
    }

    #[test]
    fn unknown_and_failed_drives_are_said_as_such() {
        let raid5 = RaidLevel::Raid5 { drives: 4 };
        assert_eq!(check_fail(raid5, &[], 4, true).unwrap_err().to_string(), "no drive 4: the array has drives 0 to 3");
        assert_eq!(check_fail(raid5, &[2], 2, true).unwrap_err().to_string(), "drive 2 has failed already");
    }
}
