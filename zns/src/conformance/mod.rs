//! The device conformance suite: what every zoned backend (emulated memory or file, real
//! NVMe ZNS through passthrough) must do, checked through the device interface alone.
//!
//! `run` is destructive: it resets every zone. Each check uses zones of its own, so one
//! failure does not cascade; checks that need more zones or limits than the device has
//! are reported as skipped, never as passed. `check_after_crash` is what a drive must
//! satisfy after power loss (or a killed process, for file-backed drives).

mod checks;
use std::fmt;

use crate::device::{execute, report_all_zones, Command, Completion, Done, ZonedDevice};
use crate::error::Error;
use crate::geometry::Geometry;
use crate::zone::{ZoneAction, ZoneDescriptor, ZoneState, ZoneTarget};

/// How one check ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed(String),
    Skipped(String),
}

/// One check's name and outcome.
#[derive(Clone, Debug)]
pub struct CheckResult {
    pub name: &'static str,
    pub outcome: Outcome,
}

/// All checks of a run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub results: Vec<CheckResult>,
}

impl Report {
    /// True when no check failed.
    pub fn passed(&self) -> bool {
        self.failed() == 0
    }

    pub fn failed(&self) -> usize {
        self.results.iter().filter(|r| matches!(r.outcome, Outcome::Failed(_))).count()
    }

    pub fn skipped(&self) -> usize {
        self.results.iter().filter(|r| matches!(r.outcome, Outcome::Skipped(_))).count()
    }

    fn record(&mut self, name: &'static str, outcome: Result<(), Check>) {
        let outcome = match outcome {
            Ok(()) => Outcome::Passed,
            Err(Check::Fail(why)) => Outcome::Failed(why),
            Err(Check::Skip(why)) => Outcome::Skipped(why),
        };
        self.results.push(CheckResult { name, outcome });
    }

    fn merge(&mut self, other: Report) {
        self.results.extend(other.results);
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for r in &self.results {
            match &r.outcome {
                Outcome::Passed => writeln!(f, "  pass  {}", r.name)?,
                Outcome::Failed(why) => writeln!(f, "  FAIL  {}: {why}", r.name)?,
                Outcome::Skipped(why) => writeln!(f, "  skip  {}: {why}", r.name)?,
            }
        }
        let total = self.results.len();
        writeln!(
            f,
            "{} passed, {} failed, {} skipped",
            total - self.failed() - self.skipped(),
            self.failed(),
            self.skipped()
        )
    }
}

/// Checks one block read back after a crash: `(lba, data, metadata)`, Err says why not.
pub type BlockVerifier<'a> = dyn FnMut(u64, &[u8], &[u8]) -> Result<(), String> + 'a;

/// Why a check did not pass.
enum Check {
    Fail(String),
    Skip(String),
}

type CheckResultOf<T = ()> = Result<T, Check>;

fn fail<T>(why: impl Into<String>) -> CheckResultOf<T> {
    Err(Check::Fail(why.into()))
}

fn ensure(condition: bool, why: impl FnOnce() -> String) -> CheckResultOf {
    if condition {
        Ok(())
    } else {
        Err(Check::Fail(why()))
    }
}

/// Deterministic block contents: every block of every check differs.
pub fn pattern_block(geometry: &Geometry, lba: u64, salt: u64) -> (Vec<u8>, Vec<u8>) {
    let mut state = lba.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ salt.wrapping_add(0x2545_f491_4f6c_dd1d);
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let data: Vec<u8> = (0..geometry.block_size_bytes / 8).flat_map(|_| next().to_le_bytes()).collect();
    let meta: Vec<u8> = (0..geometry.metadata_bytes_per_block as usize).map(|_| next() as u8).collect();
    (data, meta)
}

fn pattern(geometry: &Geometry, lba: u64, blocks: u64, salt: u64) -> (Vec<u8>, Vec<u8>) {
    let mut data = Vec::with_capacity(geometry.data_bytes(blocks));
    let mut meta = Vec::with_capacity(geometry.metadata_bytes(blocks));
    for i in 0..blocks {
        let (d, m) = pattern_block(geometry, lba + i, salt);
        data.extend_from_slice(&d);
        meta.extend_from_slice(&m);
    }
    (data, meta)
}

struct Suite<'a, D: ZonedDevice + ?Sized> {
    device: &'a mut D,
    geometry: Geometry,
}

/// Runs the whole suite. Destructive: every zone is reset, before and after.
pub fn run<D: ZonedDevice + ?Sized>(device: &mut D) -> Report {
    let geometry = device.geometry();
    let mut report = Report::default();
    let mut suite = Suite { device, geometry };
    report.record("geometry is valid", geometry.validate().or_else(|e| fail(e.to_string())));
    report.record("zone report is consistent", suite.report_is_consistent());
    report.record("reset all empties every zone", suite.reset_all_empties_zones());
    // One zone per check (zone 0 is left for boundary checks), so failures stay local.
    for (i, (name, check)) in zone_checks().into_iter().enumerate() {
        let zone = i as u32 + 1;
        let outcome = suite.need_zones(zone + 1).and_then(|()| check(&mut suite, zone));
        // Leave no active zone behind: small active limits would fail the next check.
        let cleanup = match outcome {
            Err(Check::Skip(_)) => Ok(()),
            _ => suite.manage(zone, ZoneAction::Reset),
        };
        report.record(name, outcome.and(cleanup));
    }
    report.record("metadata of every transfer size reads back", suite.every_transfer_size_reads_back());
    report.record("a reset leaves other zones' data and metadata", suite.reset_leaves_other_zones());
    report.record("zone and namespace boundaries are enforced", suite.boundaries_are_enforced());
    report.record("partial zone report", suite.partial_report());
    report.record("zone report is consistent after use", suite.report_is_consistent());
    report.record("open zone limit is enforced", suite.open_limit_is_enforced(1));
    report.record("active zone limit is enforced", suite.active_limit_is_enforced(1));
    report.record("reset all at the end", suite.reset_all_empties_zones());
    report
}

type ZoneCheck<'s, D> = fn(&mut Suite<'s, D>, u32) -> CheckResultOf;

fn zone_checks<'s, D: ZonedDevice + ?Sized>() -> [(&'static str, ZoneCheck<'s, D>); 9] {
    [
        ("write at the write pointer reads back", Suite::write_and_read_back),
        ("write off the write pointer fails", Suite::write_off_write_pointer_fails),
        ("unwritten blocks read as zeros", Suite::unwritten_blocks_read_as_zeros),
        ("append returns the LBA it landed at", Suite::append_returns_landing_lba),
        ("concurrent appends land once each", Suite::concurrent_appends_land_once_each),
        ("append over the size limit fails", Suite::oversized_append_fails),
        ("zone capacity is enforced", Suite::capacity_is_enforced),
        ("finish then reset", Suite::finish_then_reset),
        ("open and close transitions", Suite::open_close_transitions),
    ]
}

/// Checks a drive after power loss without touching its data: the zone report is
/// consistent and nothing is left open, every block below each write pointer passes
/// `verify(lba, data, metadata)`, and the block at each write pointer reads as zeros.
pub fn check_after_crash<D: ZonedDevice + ?Sized>(device: &mut D, verify: &mut BlockVerifier<'_>) -> Report {
    let geometry = device.geometry();
    let mut report = Report::default();
    let mut suite = Suite { device, geometry };
    report.record("zone report is consistent after power loss", suite.report_is_consistent());
    let zones = match report_all_zones(suite.device) {
        Ok(zones) => zones,
        Err(e) => {
            report.record("zones readable after power loss", fail(e.to_string()));
            return report;
        }
    };
    report.record(
        "no zone is open after power loss",
        match zones.iter().find(|z| z.state.is_open()) {
            Some(z) => fail(format!("zone {} is {}", z.zone, z.state)),
            None => Ok(()),
        },
    );
    let mut check_blocks = || -> CheckResultOf {
        for z in &zones {
            if matches!(z.state, ZoneState::Offline | ZoneState::Empty) {
                continue;
            }
            let written = if z.state == ZoneState::Full { z.capacity_blocks } else { z.written_blocks() };
            let mut done = 0;
            while done < written {
                let blocks = geometry.transfer_blocks_at_most(written - done);
                let lba = z.start_lba + done;
                let (data, metadata) = suite.read(lba, blocks)?;
                let block = geometry.block_size_bytes as usize;
                let meta = geometry.metadata_bytes_per_block as usize;
                for i in 0..blocks as usize {
                    verify(lba + i as u64, &data[i * block..(i + 1) * block], &metadata[i * meta..(i + 1) * meta])
                        .or_else(|why| fail(format!("zone {} LBA {}: {why}", z.zone, lba + i as u64)))?;
                }
                done += blocks;
            }
            if written < z.capacity_blocks {
                suite.verify_zeros(z.start_lba + written, 1)?;
            }
        }
        Ok(())
    };
    report.record("every block below the write pointers is intact", check_blocks());
    report
}

/// Runs `check_after_crash`, then the whole suite (is the drive still fully usable?).
pub fn check_after_crash_then_run<D: ZonedDevice + ?Sized>(device: &mut D, verify: &mut BlockVerifier<'_>) -> Report {
    let mut report = check_after_crash(device, verify);
    report.merge(run(device));
    report
}
