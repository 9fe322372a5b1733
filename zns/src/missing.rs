//! A stand-in for a drive that is absent: `MissingDrive` has the geometry the array's other
//! drives have and answers every command with `Error::DeviceFailed`, as a drive that died
//! would. An array assembled without one of its drives (a degraded start) holds one in that
//! drive's place, so every drive index still has a device.
//!
//! It owns no file, descriptor or memory of a drive: nothing is ever read from or written to
//! wherever the absent drive used to be. Invariants: every command submitted completes (with
//! `DeviceFailed`, its buffers handed back) at the next `reap` or `wait`; `in_flight` is the
//! number submitted and not yet reaped; with an eventfd registered (`notify_completions`),
//! each submission signals it once, since its completion is ready at once.

use std::collections::VecDeque;
use std::os::fd::RawFd;

use crate::device::{Command, Completion, Tag, ZonedDevice};
use crate::error::Error;
use crate::geometry::Geometry;

/// Commands a missing drive keeps in flight at most before its owner should reap (it takes
/// more: they only wait in its queue).
const MISSING_DRIVE_QUEUE_DEPTH: usize = 64;

/// An absent drive: every command fails with `Error::DeviceFailed`.
pub struct MissingDrive {
    geometry: Geometry,
    /// Completions of the commands submitted, in submission order, until reaped.
    completions: VecDeque<Completion>,
    /// The eventfd to signal when a command completes, once asked to.
    eventfd: Option<RawFd>,
}

impl MissingDrive {
    /// A missing drive that claims `geometry` (the other drives' geometry).
    pub fn new(geometry: Geometry) -> Self {
        MissingDrive { geometry, completions: VecDeque::new(), eventfd: None }
    }
}

/// The buffers a command carries, handed back in its completion.
fn buffers(command: Command) -> (Vec<u8>, Vec<u8>) {
    match command {
        Command::Read { data, metadata, .. }
        | Command::Write { data, metadata, .. }
        | Command::Append { data, metadata, .. } => (data, metadata),
        Command::ManageZone { .. } | Command::ReportZones { .. } => (Vec::new(), Vec::new()),
    }
}

/// What an eventfd's counter is raised by per completion.
const EVENTFD_INCREMENT: u64 = 1;

impl ZonedDevice for MissingDrive {
    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn queue_depth(&self) -> usize {
        MISSING_DRIVE_QUEUE_DEPTH
    }

    fn submit(&mut self, tag: Tag, command: Command) {
        let (data, metadata) = buffers(command);
        self.completions.push_back(Completion { tag, result: Err(Error::DeviceFailed), data, metadata });
        if let Some(fd) = self.eventfd {
            let bytes = EVENTFD_INCREMENT.to_ne_bytes();
            // SAFETY: writes 8 bytes from a live array to a descriptor the caller registered
            // as an eventfd and keeps open while this drive may complete commands.
            let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
            if written != bytes.len() as isize {
                tracing::warn!(fd, "missing drive: cannot signal the completion eventfd");
            }
        }
    }

    fn reap(&mut self, out: &mut Vec<Completion>) -> usize {
        let n = self.completions.len();
        out.extend(self.completions.drain(..));
        n
    }

    fn wait(&mut self, out: &mut Vec<Completion>) -> usize {
        // Every completion is ready the moment its command is submitted.
        self.reap(out)
    }

    fn in_flight(&self) -> usize {
        self.completions.len()
    }

    fn notify_completions(&mut self, eventfd: RawFd) -> bool {
        self.eventfd = Some(eventfd);
        true
    }

    fn completes_on_reap(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::execute;
    use crate::zone::{ZoneAction, ZoneTarget};

    fn geometry() -> Geometry {
        Geometry { metadata_bytes_per_block: 16, ..Geometry::small(8, 64, 60) }
    }

    fn block(g: &Geometry) -> (Vec<u8>, Vec<u8>) {
        (vec![7; g.block_size_bytes as usize], vec![3; g.metadata_bytes_per_block as usize])
    }

    #[test]
    fn every_command_fails_as_a_failed_drive_and_hands_its_buffers_back() {
        let g = geometry();
        let mut drive = MissingDrive::new(g);
        assert_eq!(drive.geometry(), g, "the geometry it was given");
        let (data, metadata) = block(&g);
        let commands = vec![
            Command::Read { lba: 0, data: data.clone(), metadata: metadata.clone() },
            Command::Write { lba: 0, data: data.clone(), metadata: metadata.clone() },
            Command::Append { zone_start_lba: 0, data: data.clone(), metadata: metadata.clone() },
            Command::ManageZone { action: ZoneAction::Reset, target: ZoneTarget::Zone { start_lba: 0 } },
            Command::ReportZones { start_lba: 0, max_zones: 8 },
        ];
        for command in commands {
            let carries_data = matches!(command, Command::Read { .. } | Command::Write { .. } | Command::Append { .. });
            let name = command.name();
            let c = execute(&mut drive, command);
            assert!(matches!(c.result, Err(Error::DeviceFailed)), "{name}: {:?}", c.result);
            if carries_data {
                assert_eq!((c.data, c.metadata), (data.clone(), metadata.clone()), "{name}: buffers handed back");
            } else {
                assert!(c.data.is_empty() && c.metadata.is_empty(), "{name}");
            }
        }
        assert_eq!(drive.in_flight(), 0);
    }

    #[test]
    fn completions_come_in_submission_order_and_in_flight_counts_them() {
        let g = geometry();
        let mut drive = MissingDrive::new(g);
        let mut out = Vec::new();
        assert_eq!(drive.wait(&mut out), 0, "nothing in flight: wait returns at once");
        for tag in [5, 1, 9] {
            let (data, metadata) = block(&g);
            drive.submit(tag, Command::Read { lba: tag, data, metadata });
        }
        assert_eq!(drive.in_flight(), 3);
        assert_eq!(drive.reap(&mut out), 3);
        assert_eq!(out.iter().map(|c| c.tag).collect::<Vec<_>>(), [5, 1, 9]);
        assert_eq!(drive.in_flight(), 0);
        assert_eq!(drive.reap(&mut out), 0);
    }

    #[test]
    fn a_registered_eventfd_is_signalled_once_per_command() {
        // SAFETY: creates a non-blocking eventfd owned (and closed) by this test.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK) };
        assert!(fd >= 0, "eventfd: {}", std::io::Error::last_os_error());
        let read_counter = || {
            let mut bytes = [0u8; 8];
            // SAFETY: reads 8 bytes from the test's eventfd into a live array.
            let n = unsafe { libc::read(fd, bytes.as_mut_ptr().cast(), bytes.len()) };
            if n == 8 {
                u64::from_ne_bytes(bytes)
            } else {
                0
            }
        };
        let g = geometry();
        let mut drive = MissingDrive::new(g);
        assert!(drive.notify_completions(fd), "a missing drive can signal its completions");
        assert_eq!(read_counter(), 0, "nothing submitted, nothing signalled");
        for tag in 0..2 {
            drive.submit(tag, Command::ReportZones { start_lba: 0, max_zones: 1 });
        }
        assert_eq!(read_counter(), 2);
        let mut out = Vec::new();
        assert_eq!(drive.reap(&mut out), 2);
        // SAFETY: closes the eventfd this test created; the drive is not used after.
        unsafe { libc::close(fd) };
    }
}
