//! A drive with its first zones set aside: `ReservedZones` shows the rest as a drive of
//! its own (zone 0 is the first zone after the reserved ones), so an array keeps its
//! superblock in zone 0 of each drive and the engine never sees it.
//!
//! LBAs are shifted on the way in (commands) and out (append results, zone reports).
//! "Select all" zone actions are refused: on the real drive they would reach the
//! reserved zones too.

use crate::device::{Command, Completion, Done, Tag, ZonedDevice};
use crate::error::Error;
use crate::geometry::Geometry;
use crate::zone::ZoneTarget;

pub struct ReservedZones<D> {
    inner: D,
    reserved_zones: u32,
    offset_blocks: u64,
    /// Completions of commands refused here, handed out at the next reap.
    refused: Vec<Completion>,
}

impl<D: ZonedDevice> ReservedZones<D> {
    /// Hides the first `reserved_zones` zones of `inner`; an error if that leaves none.
    pub fn new(inner: D, reserved_zones: u32) -> Result<Self, Error> {
        let g = inner.geometry();
        if reserved_zones >= g.zone_count {
            return Err(Error::InvalidGeometry {
                reason: format!("{reserved_zones} reserved zones leave none of the drive's {}", g.zone_count),
            });
        }
        let offset_blocks = u64::from(reserved_zones) * g.zone_size_blocks;
        Ok(ReservedZones { inner, reserved_zones, offset_blocks, refused: Vec::new() })
    }

    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The same reservation over the drive `f` makes of this one (a wrapper around it).
    pub fn map_inner<E: ZonedDevice>(self, f: impl FnOnce(D) -> E) -> ReservedZones<E> {
        assert!(self.refused.is_empty(), "map_inner with refused commands not handed out");
        ReservedZones {
            inner: f(self.inner),
            reserved_zones: self.reserved_zones,
            offset_blocks: self.offset_blocks,
            refused: Vec::new(),
        }
    }

    fn shift_out(&self, completion: &mut Completion) {
        match &mut completion.result {
            // A write into the reserved zones, submitted to the inner drive directly
            // (`inner_mut`), keeps its LBA.
            Ok(Done::Written { lba, .. }) => *lba = lba.checked_sub(self.offset_blocks).unwrap_or(*lba),
            Ok(Done::Zones(zones)) => {
                for z in zones {
                    z.zone -= self.reserved_zones;
                    z.start_lba -= self.offset_blocks;
                    z.write_pointer -= self.offset_blocks;
                }
            }
            _ => {}
        }
    }
}

impl<D: ZonedDevice> ZonedDevice for ReservedZones<D> {
    fn geometry(&self) -> Geometry {
        let g = self.inner.geometry();
        Geometry { zone_count: g.zone_count - self.reserved_zones, ..g }
    }

    fn queue_depth(&self) -> usize {
        self.inner.queue_depth()
    }

    fn submit(&mut self, tag: Tag, command: Command) {
        let off = self.offset_blocks;
        let command = match command {
            Command::Read { lba, data, metadata } => Command::Read { lba: lba + off, data, metadata },
            Command::Write { lba, data, metadata } => Command::Write { lba: lba + off, data, metadata },
            Command::Append { zone_start_lba, data, metadata } => {
                Command::Append { zone_start_lba: zone_start_lba + off, data, metadata }
            }
            Command::ManageZone { action, target: ZoneTarget::Zone { start_lba } } => {
                Command::ManageZone { action, target: ZoneTarget::Zone { start_lba: start_lba + off } }
            }
            Command::ManageZone { target: ZoneTarget::All, .. } => {
                let error = Error::InvalidGeometry {
                    reason: "a \"select all\" zone action would reach the array's reserved zones".into(),
                };
                self.refused.push(Completion { tag, result: Err(error), data: Vec::new(), metadata: Vec::new() });
                return;
            }
            Command::ReportZones { start_lba, max_zones } => {
                Command::ReportZones { start_lba: start_lba + off, max_zones }
            }
        };
        self.inner.submit(tag, command);
    }

    fn reap(&mut self, out: &mut Vec<Completion>) -> usize {
        let first = out.len();
        out.append(&mut self.refused);
        self.inner.reap(out);
        for c in &mut out[first..] {
            self.shift_out(c);
        }
        out.len() - first
    }

    fn wait(&mut self, out: &mut Vec<Completion>) -> usize {
        if !self.refused.is_empty() {
            return self.reap(out);
        }
        let first = out.len();
        self.inner.wait(out);
        for c in &mut out[first..] {
            self.shift_out(c);
        }
        out.len() - first
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.refused.len()
    }

    // Refused commands complete inside `submit`, before any sleep: `reap` finds them.
    fn notify_completions(&mut self, eventfd: std::os::fd::RawFd) -> bool {
        self.inner.notify_completions(eventfd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance;
    use crate::emulator::EmulatedDrive;

    /// Everything but "select all" (refused by design) behaves as on a drive of its own.
    #[test]
    fn a_drive_with_reserved_zones_passes_the_conformance_suite() {
        let g = Geometry { max_open_zones: Some(8), max_active_zones: Some(10), ..Geometry::small(21, 64, 60) };
        let mut drive = ReservedZones::new(EmulatedDrive::memory(g, 1).unwrap(), 1).unwrap();
        assert_eq!(drive.geometry().zone_count, 20);
        let report = conformance::run(&mut drive);
        let refused = |r: &&conformance::CheckResult| match &r.outcome {
            conformance::Outcome::Failed(why) => why.contains("\"select all\""),
            _ => false,
        };
        assert!(report.results.iter().filter(refused).count() >= 1, "{report:?}");
        let passed = report.results.iter().filter(|r| matches!(r.outcome, conformance::Outcome::Passed)).count();
        assert_eq!(passed + report.results.iter().filter(refused).count(), report.results.len(), "{report:?}");
    }

    #[test]
    fn reserving_every_zone_is_refused() {
        let g = Geometry::small(2, 64, 60);
        assert!(ReservedZones::new(EmulatedDrive::memory(g, 1).unwrap(), 2).is_err());
    }
}
