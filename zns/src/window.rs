//! A window onto a run of a drive's zones: `ZoneWindow` shows zones [first, first + count)
//! of a drive as a drive of their own (zone 0 is the window's first zone). An array hides
//! its superblock zones this way (`ReservedZones`: every zone from the first after them),
//! and an array of engine shards gives each shard its own run of every drive's zones.
//!
//! `ZoneSpan` is the arithmetic alone, with no drive: LBAs shifted on the way in
//! (commands) and out (append results, zone reports), and commands that would leave the
//! window refused, so that a window never reaches its neighbours' zones. A driver that
//! multiplexes several windows over one drive (the sharded simulator) uses it directly.
//! "Select all" zone actions are refused: on the real drive they would reach every zone.
//! A window reports the drive's open and active zone limits as they are: windows over one
//! drive share them, and whoever splits a drive checks that the parts fit. The parts of
//! a split drive (`part`) are windows too, each over a drive of its own zones.

use crate::device::{Command, Completion, Done, Tag, ZonedDevice};
use crate::error::Error;
use crate::geometry::Geometry;
use crate::zone::ZoneTarget;

/// Zones [first, first + count) of a drive: where they start and how commands and
/// completions are shifted between the window's numbering and the drive's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZoneSpan {
    first_zone: u32,
    zone_count: u32,
    zone_size_blocks: u64,
    block_size_bytes: u32,
}

impl ZoneSpan {
    /// Zones [first_zone, first_zone + zone_count) of a drive of `geometry`; an error if
    /// that is empty or passes the drive's last zone.
    pub fn new(geometry: &Geometry, first_zone: u32, zone_count: u32) -> Result<Self, Error> {
        let end = first_zone.checked_add(zone_count);
        if zone_count == 0 || end.is_none_or(|end| end > geometry.zone_count) {
            return Err(Error::InvalidGeometry {
                reason: format!(
                    "a window of {zone_count} zones from zone {first_zone} does not fit the drive's {} zones \
                     (it needs at least one)",
                    geometry.zone_count
                ),
            });
        }
        Ok(ZoneSpan {
            first_zone,
            zone_count,
            zone_size_blocks: geometry.zone_size_blocks,
            block_size_bytes: geometry.block_size_bytes,
        })
    }

    /// The drive's first zone in the window.
    pub fn first_zone(&self) -> u32 {
        self.first_zone
    }

    pub fn zone_count(&self) -> u32 {
        self.zone_count
    }

    /// The window's geometry over a drive of `drive`: its zones, the drive's limits.
    pub fn geometry(&self, drive: Geometry) -> Geometry {
        Geometry { zone_count: self.zone_count, ..drive }
    }

    fn offset_blocks(&self) -> u64 {
        u64::from(self.first_zone) * self.zone_size_blocks
    }

    fn window_blocks(&self) -> u64 {
        u64::from(self.zone_count) * self.zone_size_blocks
    }

    /// The drive's LBA of window LBA `lba`, or the error that refuses it for leaving the
    /// window.
    pub fn drive_lba(&self, lba: u64) -> Result<u64, Error> {
        self.shift_in(lba, 1)
    }

    /// The drive's zone of window zone `zone`, or the error that refuses it for leaving
    /// the window.
    pub fn drive_zone(&self, zone: u32) -> Result<u32, Error> {
        let lba = self.drive_lba(u64::from(zone) * self.zone_size_blocks)?;
        Ok((lba / self.zone_size_blocks) as u32)
    }

    /// `blocks` blocks at window LBA `lba` shifted to the drive's, or the error that
    /// refuses them for leaving the window.
    fn shift_in(&self, lba: u64, blocks: u64) -> Result<u64, Error> {
        let total_blocks = self.window_blocks();
        match lba.checked_add(blocks.max(1)) {
            Some(end) if end <= total_blocks => Ok(lba + self.offset_blocks()),
            _ => Err(Error::LbaOutOfRange { lba, blocks, total_blocks }),
        }
    }

    /// `command` in the drive's numbering, or its completion if the window refuses it (it
    /// leaves the window, or selects all zones), its buffers handed back.
    #[allow(clippy::result_large_err)] // the refusal is the completion, buffers and all
    pub fn command_in(&self, tag: Tag, command: Command) -> Result<Command, Completion> {
        let block = u64::from(self.block_size_bytes);
        let refuse = |error, data, metadata| Completion { tag, result: Err(error), data, metadata };
        match command {
            Command::Read { lba, data, metadata } => match self.shift_in(lba, (data.len() as u64).div_ceil(block)) {
                Ok(lba) => Ok(Command::Read { lba, data, metadata }),
                Err(error) => Err(refuse(error, data, metadata)),
            },
            Command::Write { lba, data, metadata } => match self.shift_in(lba, (data.len() as u64).div_ceil(block)) {
                Ok(lba) => Ok(Command::Write { lba, data, metadata }),
                Err(error) => Err(refuse(error, data, metadata)),
            },
            Command::Append { zone_start_lba, data, metadata } => match self.shift_in(zone_start_lba, 1) {
                Ok(zone_start_lba) => Ok(Command::Append { zone_start_lba, data, metadata }),
                Err(error) => Err(refuse(error, data, metadata)),
            },
            Command::ManageZone { action, target: ZoneTarget::Zone { start_lba } } => match self.shift_in(start_lba, 1)
            {
                Ok(start_lba) => Ok(Command::ManageZone { action, target: ZoneTarget::Zone { start_lba } }),
                Err(error) => Err(refuse(error, Vec::new(), Vec::new())),
            },
            Command::ManageZone { target: ZoneTarget::All, .. } => {
                let reason = "a \"select all\" zone action would reach zones outside this window of the drive".into();
                Err(refuse(Error::InvalidGeometry { reason }, Vec::new(), Vec::new()))
            }
            Command::ReportZones { start_lba, max_zones } => match self.shift_in(start_lba, 1) {
                Ok(drive_lba) => {
                    // Never past the window's last zone: the next ones are not its own.
                    let left = self.zone_count - (start_lba / self.zone_size_blocks) as u32;
                    Ok(Command::ReportZones { start_lba: drive_lba, max_zones: max_zones.min(left) })
                }
                Err(error) => Err(refuse(error, Vec::new(), Vec::new())),
            },
        }
    }

    /// `completion` in the window's numbering. A zone report naming a zone outside the
    /// window (the drive's answer is not trusted) becomes an error.
    pub fn completion_out(&self, completion: &mut Completion) {
        let offset = self.offset_blocks();
        let zones = self.first_zone..self.first_zone + self.zone_count;
        match &mut completion.result {
            // A write outside the window (submitted to the drive directly: the superblock
            // zones before `ReservedZones`) keeps its LBA.
            Ok(Done::Written { lba, .. }) => *lba = lba.checked_sub(offset).unwrap_or(*lba),
            Ok(Done::Zones(reported)) => {
                if let Some(stray) = reported.iter().find(|z| !zones.contains(&z.zone) || z.start_lba < offset) {
                    let reason = format!(
                        "zone {} reported through a window of zones {}..{}",
                        stray.zone, zones.start, zones.end
                    );
                    completion.result = Err(Error::BadZoneReport { reason });
                    return;
                }
                for z in reported {
                    z.zone -= self.first_zone;
                    z.start_lba -= offset;
                    z.write_pointer = z.write_pointer.saturating_sub(offset);
                }
            }
            _ => {}
        }
    }
}

/// A drive seen through a `ZoneSpan`: a zoned device of the window's zones.
pub struct ZoneWindow<D> {
    inner: D,
    span: ZoneSpan,
    /// Completions of commands refused here, handed out at the next reap.
    refused: Vec<Completion>,
}

impl<D: ZonedDevice> ZoneWindow<D> {
    /// Every zone of `inner` from `first_zone` on (the ones before are hidden); an error if
    /// that leaves none.
    pub fn new(inner: D, first_zone: u32) -> Result<Self, Error> {
        let count = inner.geometry().zone_count.saturating_sub(first_zone);
        Self::of_zones(inner, first_zone, count)
    }

    /// Zones [first_zone, first_zone + zone_count) of `inner`.
    pub fn of_zones(inner: D, first_zone: u32, zone_count: u32) -> Result<Self, Error> {
        let span = ZoneSpan::new(&inner.geometry(), first_zone, zone_count)?;
        Ok(Self::of_span(inner, span))
    }

    /// `span` (made for a drive of `inner`'s geometry) of `inner`.
    pub(crate) fn of_span(inner: D, span: ZoneSpan) -> Self {
        debug_assert_eq!(ZoneSpan::new(&inner.geometry(), span.first_zone, span.zone_count).ok(), Some(span));
        ZoneWindow { inner, span, refused: Vec::new() }
    }

    pub fn span(&self) -> ZoneSpan {
        self.span
    }

    /// The drive itself, in its own numbering.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The drive itself, in its own numbering (for the zones outside the window).
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The same window over the drive `f` makes of this one (a wrapper around it).
    pub fn map_inner<E: ZonedDevice>(self, f: impl FnOnce(D) -> E) -> ZoneWindow<E> {
        assert!(self.refused.is_empty(), "map_inner with refused commands not handed out");
        ZoneWindow { inner: f(self.inner), span: self.span, refused: Vec::new() }
    }

    fn shift_out(&self, out: &mut [Completion]) {
        for completion in out {
            self.span.completion_out(completion);
        }
    }
}

impl<D: ZonedDevice> ZonedDevice for ZoneWindow<D> {
    fn geometry(&self) -> Geometry {
        self.span.geometry(self.inner.geometry())
    }

    fn queue_depth(&self) -> usize {
        self.inner.queue_depth()
    }

    fn submit(&mut self, tag: Tag, command: Command) {
        match self.span.command_in(tag, command) {
            Ok(command) => self.inner.submit(tag, command),
            Err(refused) => self.refused.push(refused),
        }
    }

    fn reap(&mut self, out: &mut Vec<Completion>) -> usize {
        let first = out.len();
        out.append(&mut self.refused);
        self.inner.reap(out);
        self.shift_out(&mut out[first..]);
        out.len() - first
    }

    fn wait(&mut self, out: &mut Vec<Completion>) -> usize {
        if !self.refused.is_empty() {
            return self.reap(out);
        }
        let first = out.len();
        self.inner.wait(out);
        self.shift_out(&mut out[first..]);
        out.len() - first
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.refused.len()
    }

    // Refused commands complete inside `submit`, before any sleep: `reap` finds them.
    fn notify_completions(&mut self, eventfd: std::os::fd::RawFd) -> bool {
        self.inner.notify_completions(eventfd)
    }

    fn completes_on_reap(&self) -> bool {
        self.inner.completes_on_reap()
    }
}

/// Asserts that `drive` passes the conformance suite but for "select all" zone actions,
/// which a window refuses by design (at least one check meets that refusal).
#[cfg(test)]
pub(crate) fn conforms_but_for_select_all<D: ZonedDevice>(drive: &mut D) {
    let report = crate::conformance::run(drive);
    let refused = |r: &&crate::conformance::CheckResult| match &r.outcome {
        crate::conformance::Outcome::Failed(why) => why.contains("\"select all\""),
        _ => false,
    };
    let refusals = report.results.iter().filter(refused).count();
    let passed = report.results.iter().filter(|r| matches!(r.outcome, crate::conformance::Outcome::Passed)).count();
    assert!(refusals >= 1, "{report:?}");
    assert_eq!(passed + refusals, report.results.len(), "{report:?}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::execute;
    use crate::emulator::EmulatedDrive;
    use crate::zone::ZoneAction;

    fn geometry() -> Geometry {
        Geometry { max_open_zones: Some(8), max_active_zones: Some(10), ..Geometry::small(30, 64, 60) }
    }

    /// A window in the middle of a drive passes the suite.
    #[test]
    fn a_window_in_the_middle_of_a_drive_passes_the_conformance_suite() {
        let mut drive = ZoneWindow::of_zones(EmulatedDrive::memory(geometry(), 1).unwrap(), 5, 20).unwrap();
        assert_eq!(drive.geometry().zone_count, 20);
        conforms_but_for_select_all(&mut drive);
    }

    /// Windows side by side over one drive never reach each other's zones, and an append
    /// lands at the window's LBA.
    #[test]
    fn neighbouring_windows_stay_apart() {
        let g = geometry();
        let mut drive = EmulatedDrive::memory(g, 1).unwrap();
        let span = ZoneSpan::new(&g, 10, 10).unwrap();
        let data = vec![7u8; g.block_size_bytes as usize];
        // Past the window's last zone: refused here, not written into zone 20.
        let past = Command::Write { lba: 10 * 64, data: data.clone(), metadata: Vec::new() };
        let refused = span.command_in(3, past).unwrap_err();
        assert!(matches!(refused.result, Err(Error::LbaOutOfRange { lba: 640, .. })), "{refused:?}");
        assert_eq!((refused.tag, refused.data.len()), (3, data.len()), "the buffer comes back");
        let append = Command::Append { zone_start_lba: 64, data, metadata: Vec::new() };
        let mut done = execute(&mut drive, span.command_in(4, append).unwrap());
        assert_eq!(done.result.as_ref().unwrap(), &Done::Written { lba: 11 * 64, blocks: 1 });
        span.completion_out(&mut done);
        assert_eq!(done.result.unwrap(), Done::Written { lba: 64, blocks: 1 });
        // A report from the window's last zone stops there.
        let report = Command::ReportZones { start_lba: 9 * 64, max_zones: 5 };
        let mut done = execute(&mut drive, span.command_in(5, report).unwrap());
        span.completion_out(&mut done);
        let Ok(Done::Zones(zones)) = done.result else { panic!("{:?}", done.result) };
        assert_eq!(zones.iter().map(|z| (z.zone, z.start_lba)).collect::<Vec<_>>(), vec![(9, 9 * 64)]);
        let all = Command::ManageZone { action: ZoneAction::Reset, target: ZoneTarget::All };
        assert!(span.command_in(6, all).is_err());
    }

    /// A report the drive answers with a zone outside the window is an error, not a panic.
    #[test]
    fn a_stray_zone_in_a_report_is_an_error() {
        let g = geometry();
        let mut drive = EmulatedDrive::memory(g, 1).unwrap();
        let mut done = execute(&mut drive, Command::ReportZones { start_lba: 0, max_zones: 2 });
        ZoneSpan::new(&g, 1, 4).unwrap().completion_out(&mut done);
        assert!(matches!(done.result, Err(Error::BadZoneReport { .. })), "{:?}", done.result);
    }

    #[test]
    fn windows_outside_the_drive_are_refused() {
        let g = geometry();
        assert!(ZoneSpan::new(&g, 25, 6).is_err());
        assert!(ZoneSpan::new(&g, 3, 0).is_err());
        assert!(ZoneSpan::new(&g, u32::MAX, 2).is_err());
        assert!(ZoneSpan::new(&g, 25, 5).is_ok());
    }
}
