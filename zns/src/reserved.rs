//! A drive with its first zones set aside: `ReservedZones` shows the rest as a drive of
//! its own (zone 0 is the first zone after the reserved ones), so an array keeps its
//! superblock in zone 0 of each drive and the engine never sees it. It is a `ZoneWindow`
//! of every zone after the reserved ones (`ReservedZones::new(drive, reserved_zones)`):
//! LBAs shifted both ways, "select all" zone actions refused (on the real drive they
//! would reach the reserved zones too).

/// A drive minus its first zones (`ZoneWindow::new`).
pub type ReservedZones<D> = crate::window::ZoneWindow<D>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emulator::EmulatedDrive;
    use crate::geometry::Geometry;
    use crate::ZonedDevice;

    /// Everything but "select all" (refused by design) behaves as on a drive of its own.
    #[test]
    fn a_drive_with_reserved_zones_passes_the_conformance_suite() {
        let g = Geometry { max_open_zones: Some(8), max_active_zones: Some(10), ..Geometry::small(21, 64, 60) };
        let mut drive = ReservedZones::new(EmulatedDrive::memory(g, 1).unwrap(), 1).unwrap();
        assert_eq!(drive.geometry().zone_count, 20);
        crate::window::conforms_but_for_select_all(&mut drive);
    }

    #[test]
    fn reserving_every_zone_is_refused() {
        let g = Geometry::small(2, 64, 60);
        assert!(ReservedZones::new(EmulatedDrive::memory(g, 1).unwrap(), 2).is_err());
    }
}
