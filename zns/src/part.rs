//! Parts of a split drive: `EmulatedDrive::split` and `NvmeDrive::split` turn one opened
//! drive into `DrivePart`s, each owning a disjoint run of its zones, so that each part can
//! be driven by a thread of its own with nothing locked or shared-and-written per command
//! (engine shards, one thread each, over every drive).
//!
//! A part is a `ZoneWindow` over a device of its own: its zones numbered from 0, commands
//! leaving them and "select all" zone actions refused, reports clamped to them. What it
//! reports as geometry is the drive's but for `zone_count` (its zones): the open and
//! active zone limits are the drive's, shared by all its parts (an emulated drive counts
//! them across parts; a real one enforces them itself), so a part may meet them with
//! fewer zones of its own open. The drive stays locked against other openers while any
//! part of it lives; when the last part is dropped, the lock goes.

use crate::device::{Command, Completion, Tag, ZonedDevice};
use crate::emulator::{EmulatedDrive, PowerCutReport};
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::window::{ZoneSpan, ZoneWindow};
use crate::zone::ZoneState;

/// Zones [first, first + count) of a split drive, as a drive of their own.
pub struct DrivePart<D> {
    window: ZoneWindow<D>,
}

impl<D: ZonedDevice> DrivePart<D> {
    /// The part of a drive that `inner` drives, `span` of its zones (checked by `spans_of`).
    pub(crate) fn new(inner: D, span: ZoneSpan) -> Self {
        DrivePart { window: ZoneWindow::of_span(inner, span) }
    }

    /// Which zones of the drive the part owns.
    pub fn span(&self) -> ZoneSpan {
        self.window.span()
    }
}

// Parts exist to move to threads of their own.
const _: () = {
    const fn send<T: Send>() {}
    send::<DrivePart<EmulatedDrive>>();
    send::<DrivePart<crate::nvme::NvmeDrive>>();
};

/// A part shows as the zones it owns.
impl<D: ZonedDevice> std::fmt::Debug for DrivePart<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrivePart").field("span", &self.window.span()).finish_non_exhaustive()
    }
}

/// The spans of `parts` ((first zone, zone count) each, in the drive's numbering), in the
/// order given: each inside the drive and holding a zone at least, none sharing a zone
/// with another.
pub(crate) fn spans_of(geometry: &Geometry, parts: &[(u32, u32)]) -> Result<Vec<ZoneSpan>> {
    let refuse = |reason: String| Error::CannotSplit { reason };
    if parts.is_empty() {
        return Err(refuse("no parts asked for".into()));
    }
    let spans = parts
        .iter()
        .enumerate()
        .map(|(i, (first, count))| {
            ZoneSpan::new(geometry, *first, *count).map_err(|e| match e {
                Error::InvalidGeometry { reason } => refuse(format!("part {i}: {reason}")),
                other => other,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut by_start: Vec<usize> = (0..spans.len()).collect();
    by_start.sort_by_key(|i| spans[*i].first_zone());
    for pair in by_start.windows(2) {
        let (a, b) = (&spans[pair[0]], &spans[pair[1]]);
        if a.first_zone() + a.zone_count() > b.first_zone() {
            return Err(refuse(format!(
                "parts {} (zones {}..{}) and {} (zones {}..{}) overlap: a zone has one owner",
                pair[0],
                a.first_zone(),
                a.first_zone() + a.zone_count(),
                pair[1],
                b.first_zone(),
                b.first_zone() + b.zone_count()
            )));
        }
    }
    Ok(spans)
}

impl<D: ZonedDevice> ZonedDevice for DrivePart<D> {
    fn geometry(&self) -> Geometry {
        self.window.geometry()
    }

    fn queue_depth(&self) -> usize {
        self.window.queue_depth()
    }

    fn submit(&mut self, tag: Tag, command: Command) {
        self.window.submit(tag, command)
    }

    fn reap(&mut self, out: &mut Vec<Completion>) -> usize {
        self.window.reap(out)
    }

    fn wait(&mut self, out: &mut Vec<Completion>) -> usize {
        self.window.wait(out)
    }

    fn in_flight(&self) -> usize {
        self.window.in_flight()
    }

    fn notify_completions(&mut self, eventfd: std::os::fd::RawFd) -> bool {
        self.window.notify_completions(eventfd)
    }

    fn completes_on_reap(&self) -> bool {
        self.window.completes_on_reap()
    }
}

/// The emulator's faults, on a part: LBAs and zones in the part's numbering.
impl DrivePart<EmulatedDrive> {
    /// The whole drive fails: every part of it completes every command from now on with
    /// `DeviceFailed`.
    pub fn fail(&mut self) {
        self.window.inner_mut().fail();
    }

    pub fn is_failed(&self) -> bool {
        self.window.inner().is_failed()
    }

    /// Reads covering `lba` fail with a media error until its zone is reset.
    pub fn inject_media_error(&mut self, lba: u64) -> Result<()> {
        let lba = self.span().drive_lba(lba)?;
        self.window.inner_mut().inject_media_error(lba);
        Ok(())
    }

    /// Silently flips bit `bit` of the stored block at `lba` (see `EmulatedDrive::corrupt_block`).
    pub fn corrupt_block(&mut self, lba: u64, bit: u64) -> Result<()> {
        let lba = self.span().drive_lba(lba)?;
        self.window.inner_mut().corrupt_block(lba, bit)
    }

    /// Takes a zone of the part offline or read-only.
    pub fn degrade_zone(&mut self, zone: u32, state: ZoneState) -> Result<()> {
        let zone = self.span().drive_zone(zone)?;
        self.window.inner_mut().degrade_zone(zone, state)
    }

    /// Cuts power to the part's commands in flight (see `EmulatedDrive::power_cut`); a
    /// power cut of the drive is one of each of its parts.
    pub fn power_cut(&mut self) -> Result<PowerCutReport> {
        self.window.inner_mut().power_cut()
    }

    /// Identity of the drive.
    pub fn drive_uuid(&self) -> [u8; 16] {
        self.window.inner().drive_uuid()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{execute, Done};
    use crate::zone::{ZoneAction, ZoneTarget};

    fn geometry() -> Geometry {
        Geometry { max_open_zones: Some(8), max_active_zones: Some(10), ..Geometry::small(30, 64, 60) }
    }

    /// A part in the middle of a drive, its neighbours idle, behaves as a drive of its own.
    #[test]
    fn a_part_passes_the_conformance_suite() {
        let mut parts = EmulatedDrive::memory(geometry(), 1).unwrap().split(&[(0, 5), (5, 20), (25, 5)]).unwrap();
        assert_eq!(parts[1].geometry(), Geometry { zone_count: 20, ..geometry() });
        crate::window::conforms_but_for_select_all(&mut parts[1]);
    }

    /// Memory media hand each part the blocks of its zones, and the zones' states go with them.
    #[test]
    fn a_memory_drive_splits_with_its_data() {
        let g = geometry();
        let mut drive = EmulatedDrive::memory(g, 1).unwrap();
        for zone in [4u64, 5, 29] {
            let data = vec![zone as u8; 3 * 4096];
            execute(&mut drive, Command::Write { lba: zone * 64, data, metadata: Vec::new() }).result.unwrap();
        }
        let mut parts = drive.split(&[(5, 25), (0, 5)]).unwrap();
        for (part, zone, drive_zone) in [(1, 4, 4u8), (0, 0, 5), (0, 24, 29)] {
            let read = Command::Read { lba: zone * 64, data: vec![0; 3 * 4096], metadata: Vec::new() };
            let done = execute(&mut parts[part], read);
            assert_eq!(done.result.unwrap(), Done::Read);
            assert!(done.data.iter().all(|b| *b == drive_zone), "part {part} zone {zone}");
            let report = execute(&mut parts[part], Command::ReportZones { start_lba: zone * 64, max_zones: 1 });
            let Ok(Done::Zones(zones)) = report.result else { panic!("{:?}", report.result) };
            assert_eq!((zones[0].state, zones[0].written_blocks()), (ZoneState::ImplicitlyOpen, 3));
        }
    }

    /// The device under a part's window refuses other parts' zones too, should a
    /// command reach it in the drive's numbering.
    #[test]
    fn the_drive_under_a_part_refuses_other_parts_zones() {
        let mut parts = EmulatedDrive::memory(geometry(), 1).unwrap().split(&[(0, 5), (5, 5)]).unwrap();
        let inner = parts[1].window.inner_mut();
        let reset = Command::ManageZone { action: ZoneAction::Reset, target: ZoneTarget::Zone { start_lba: 4 * 64 } };
        let refused = execute(inner, reset).result.unwrap_err();
        assert!(matches!(refused, Error::ZoneNotInPart { zone: 4, first_zone: 5, end_zone: 10 }), "{refused}");
        assert_eq!(inner.zones().len(), 5);
    }
}
