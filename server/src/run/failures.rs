//! Drive failures asked for (`zapraid fail`, the control socket's `fail N`, the
//! self-test): which ones the engine thread carries out. A drive the array does not have,
//! or one that has failed already, is refused; so is a failure beyond what the RAID level
//! survives, which would lose the array's data, unless forced. A drive being rebuilt
//! counts as failed here: until its rebuild ends it holds only part of what it should, so
//! a second failure loses every stripe it has not been given yet.
//!
//! A declustered array (wider than its stripes) survives as its segments do: each has its
//! own k + m drives, so a failure is refused when some segment would lack more chunks than
//! parity covers (`Engine::segments_beyond_parity`), whatever the count of failed drives
//! (drives rebuilt into distributed spare space hold no chunk any more).

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
/// already and `rebuilding` being rebuilt (it counts as failed); `force` accepts losing
/// the array's data.
pub fn check_fail(
    level: RaidLevel,
    failed: &[usize],
    rebuilding: Option<usize>,
    drive: usize,
    force: bool,
) -> Result<FailOutcome> {
    let (data, parity) = level.shape();
    let drives = data + parity;
    if drive >= drives {
        return Err(Error::NoSuchDrive { drive, drives });
    }
    if failed.contains(&drive) {
        return Err(Error::AlreadyFailed { drive });
    }
    let down = failed.len() + usize::from(rebuilding.is_some_and(|r| r != drive));
    if down < level.tolerated_failures() {
        return Ok(FailOutcome::Degraded);
    }
    if force {
        return Ok(FailOutcome::DataLost);
    }
    Err(Error::Unsurvivable { level, failed: failed.to_vec(), rebuilding, drive })
}

/// Whether drive `drive` of a declustered array of `drives` drives and stripes of `level`
/// may be failed, with `failed` failed already, when failing it would leave
/// `segments_beyond_parity` segments short of more chunks than parity covers.
pub fn check_declustered_fail(
    level: RaidLevel,
    drives: usize,
    failed: &[usize],
    drive: usize,
    segments_beyond_parity: u64,
    force: bool,
) -> Result<FailOutcome> {
    if drive >= drives {
        return Err(Error::NoSuchDrive { drive, drives });
    }
    if failed.contains(&drive) {
        return Err(Error::AlreadyFailed { drive });
    }
    match (segments_beyond_parity, force) {
        (0, _) => Ok(FailOutcome::Degraded),
        (_, true) => Ok(FailOutcome::DataLost),
        (segments, false) => Err(Error::SegmentsBeyondParity { level, drive, segments }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_within_the_level_are_carried_out() {
        let raid6 = RaidLevel::Raid6 { drives: 5 };
        assert_eq!(check_fail(raid6, &[], None, 0, false).unwrap(), FailOutcome::Degraded);
        assert_eq!(check_fail(raid6, &[0], None, 4, false).unwrap(), FailOutcome::Degraded);
        let raid1 = RaidLevel::Raid1 { drives: 3 };
        assert_eq!(check_fail(raid1, &[2], None, 1, false).unwrap(), FailOutcome::Degraded);
    }

    #[test]
    fn failures_beyond_the_level_are_refused_unless_forced() {
        let raid0 = RaidLevel::Raid0 { drives: 4 };
        let e = check_fail(raid0, &[], None, 1, false).unwrap_err().to_string();
        assert_eq!(
            e,
            "RAID-0 (4) survives no failed drive: failing drive 1 would lose the array's data (blocks of the \
             stripes it would leave short read as errors, and with no drive to spare the array would not start \
             again); add --force to fail it anyway"
        );
        assert_eq!(check_fail(raid0, &[], None, 1, true).unwrap(), FailOutcome::DataLost);
        let raid5 = RaidLevel::Raid5 { drives: 4 };
        let e = check_fail(raid5, &[2], None, 1, false).unwrap_err().to_string();
        assert!(
            e.starts_with("RAID-5 (3+1) survives 1 failed drive, and drive 2 has failed already: failing drive 1 too"),
            "{e}"
        );
        let raid6 = RaidLevel::Raid6 { drives: 6 };
        let e = check_fail(raid6, &[0, 3], None, 5, false).unwrap_err().to_string();
        assert!(e.contains("survives 2 failed drives, and drives 0 and 3 have failed already"), "{e}");
        // RAID-01 survives one failure whichever drive it is, and no more.
        let raid01 = RaidLevel::Raid01 { drives: 4 };
        assert!(check_fail(raid01, &[0], None, 3, false).is_err());
    }

    #[test]
    fn a_drive_being_rebuilt_counts_as_failed() {
        let raid5 = RaidLevel::Raid5 { drives: 4 };
        let e = check_fail(raid5, &[], Some(1), 0, false).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "RAID-5 (3+1) survives 1 failed drive, drive 1 is being rebuilt (it holds only what the \
                 rebuild gave it so far): failing drive 0 too would lose"
            ),
            "{e}"
        );
        assert_eq!(check_fail(raid5, &[], Some(1), 0, true).unwrap(), FailOutcome::DataLost);
        // The drive being rebuilt itself may fail: that only stops its rebuild.
        assert_eq!(check_fail(raid5, &[], Some(1), 1, false).unwrap(), FailOutcome::Degraded);
        let raid6 = RaidLevel::Raid6 { drives: 6 };
        assert_eq!(check_fail(raid6, &[], Some(2), 0, false).unwrap(), FailOutcome::Degraded);
        let e = check_fail(raid6, &[0], Some(2), 3, false).unwrap_err().to_string();
        assert!(e.contains("and drive 0 has failed already, and drive 2 is being rebuilt"), "{e}");
    }

    #[test]
    fn a_declustered_array_refuses_a_failure_by_its_segments() {
        let raid5 = RaidLevel::Raid5 { drives: 5 };
        // Two drives down of eight, but no segment lacks two chunks: carried out.
        assert_eq!(check_declustered_fail(raid5, 8, &[1], 4, 0, false).unwrap(), FailOutcome::Degraded);
        let e = check_declustered_fail(raid5, 8, &[1], 4, 3, false).unwrap_err().to_string();
        assert!(e.starts_with("failing drive 4 would leave 3 segment(s) of the RAID-5 (4+1) declustered array"), "{e}");
        assert_eq!(check_declustered_fail(raid5, 8, &[1], 4, 3, true).unwrap(), FailOutcome::DataLost);
        assert_eq!(
            check_declustered_fail(raid5, 8, &[], 8, 0, false).unwrap_err().to_string(),
            "no drive 8: the array has drives 0 to 7"
        );
        assert!(check_declustered_fail(raid5, 8, &[1], 1, 0, false).is_err());
    }

    #[test]
    fn unknown_and_failed_drives_are_said_as_such() {
        let raid5 = RaidLevel::Raid5 { drives: 4 };
        assert_eq!(
            check_fail(raid5, &[], None, 4, true).unwrap_err().to_string(),
            "no drive 4: the array has drives 0 to 3"
        );
        assert_eq!(check_fail(raid5, &[2], None, 2, true).unwrap_err().to_string(), "drive 2 has failed already");
    }
}
