//! The device interface every zoned backend implements, shaped like an NVMe queue pair:
//! submit commands with a tag, reap completions.
//!
//! Commands own their buffers and completions hand them back, so a caller can reuse them
//! and no buffer is shared with a device while a command is in flight. Command failures
//! come back in completions (as on a real drive); `submit` itself cannot fail.

use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::zone::{ZoneAction, ZoneDescriptor, ZoneTarget};

/// Caller-chosen identifier of a command, returned with its completion.
pub type Tag = u64;

/// A command to a zoned device.
#[derive(Debug)]
pub enum Command {
    /// Read `data.len() / block_size` blocks at `lba`; `metadata` is empty (not wanted) or
    /// exactly `blocks * metadata_bytes_per_block` bytes.
    Read { lba: u64, data: Vec<u8>, metadata: Vec<u8> },
    /// Zone Write at `lba`, which must be the zone's write pointer.
    Write { lba: u64, data: Vec<u8>, metadata: Vec<u8> },
    /// Zone Append to the zone starting at `zone_start_lba`; the device picks the LBA.
    Append { zone_start_lba: u64, data: Vec<u8>, metadata: Vec<u8> },
    /// Zone Management Send.
    ManageZone { action: ZoneAction, target: ZoneTarget },
    /// Zone Management Receive: up to `max_zones` descriptors from the zone holding
    /// `start_lba` on.
    ReportZones { start_lba: u64, max_zones: u32 },
}

impl Command {
    /// A short name for logs and tables.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Read { .. } => "read",
            Command::Write { .. } => "write",
            Command::Append { .. } => "append",
            Command::ManageZone { .. } => "zone-management",
            Command::ReportZones { .. } => "report-zones",
        }
    }
}

/// What a successful command produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Done {
    Read,
    /// `blocks` blocks written at `lba` (for appends: the LBA the device chose).
    Written {
        lba: u64,
        blocks: u64,
    },
    ZoneManaged,
    Zones(Vec<ZoneDescriptor>),
}

/// The completion of one command; the command's buffers come back whether it succeeded
/// or not (empty for commands without data).
#[derive(Debug)]
pub struct Completion {
    pub tag: Tag,
    pub result: Result<Done>,
    pub data: Vec<u8>,
    pub metadata: Vec<u8>,
}

/// A zoned block device with a submission/completion interface.
pub trait ZonedDevice {
    /// Shape and limits, as the device reports them.
    fn geometry(&self) -> Geometry;

    /// Most commands worth keeping in flight; more are accepted but wait in the backend.
    fn queue_depth(&self) -> usize;

    /// Queues a command. Failures arrive as its completion.
    fn submit(&mut self, tag: Tag, command: Command);

    /// Moves completions that are ready into `out` without blocking; returns how many.
    fn reap(&mut self, out: &mut Vec<Completion>) -> usize;

    /// Blocks (or, for a virtual-time device, advances time) until at least one completion
    /// is ready, then reaps like `reap`. Returns 0 only when nothing is in flight.
    fn wait(&mut self, out: &mut Vec<Completion>) -> usize;

    /// Commands submitted and not yet reaped.
    fn in_flight(&self) -> usize;

    /// Asks the device to signal `eventfd` (add to its counter) whenever a command
    /// completes, so one thread can sleep on one descriptor for several devices and
    /// other wake-ups. Returns false when the device cannot: it then completes commands
    /// only inside `reap` and `wait` (emulated drives), and the caller must use `wait`.
    fn notify_completions(&mut self, _eventfd: std::os::fd::RawFd) -> bool {
        false
    }

    /// Whether every command submitted completes at the next `reap`, never later (an
    /// emulated drive without a timing model): a caller that reaps until nothing is in
    /// flight never needs to wait on the device.
    fn completes_on_reap(&self) -> bool {
        false
    }
}

/// Runs one command to completion on an idle device: a convenience for control paths
/// and tests, not for the data path.
pub fn execute<D: ZonedDevice + ?Sized>(device: &mut D, command: Command) -> Completion {
    assert_eq!(device.in_flight(), 0, "execute() needs an idle device");
    const TAG: Tag = 0;
    device.submit(TAG, command);
    let mut out = Vec::with_capacity(1);
    while out.is_empty() {
        let reaped = device.wait(&mut out);
        assert!(reaped > 0 || !out.is_empty(), "device lost a command");
    }
    assert_eq!(out.len(), 1);
    let completion = out.pop().expect("one completion");
    assert_eq!(completion.tag, TAG);
    completion
}

/// Reads every zone descriptor of the device.
pub fn report_all_zones<D: ZonedDevice + ?Sized>(device: &mut D) -> Result<Vec<ZoneDescriptor>> {
    let geometry = device.geometry();
    let mut zones = Vec::with_capacity(geometry.zone_count as usize);
    while zones.len() < geometry.zone_count as usize {
        let start_lba = geometry.zone_start_lba(zones.len() as u32);
        let remaining = geometry.zone_count - zones.len() as u32;
        match execute(device, Command::ReportZones { start_lba, max_zones: remaining }).result? {
            Done::Zones(batch) if !batch.is_empty() => zones.extend(batch),
            other => {
                return Err(Error::BadZoneReport { reason: format!("report at LBA {start_lba} returned {other:?}") })
            }
        }
    }
    Ok(zones)
}

/// A boxed device is a device (arrays hold drives of different kinds side by side).
impl<D: ZonedDevice + ?Sized> ZonedDevice for Box<D> {
    fn geometry(&self) -> Geometry {
        (**self).geometry()
    }

    fn queue_depth(&self) -> usize {
        (**self).queue_depth()
    }

    fn submit(&mut self, tag: Tag, command: Command) {
        (**self).submit(tag, command)
    }

    fn reap(&mut self, out: &mut Vec<Completion>) -> usize {
        (**self).reap(out)
    }

    fn wait(&mut self, out: &mut Vec<Completion>) -> usize {
        (**self).wait(out)
    }

    fn in_flight(&self) -> usize {
        (**self).in_flight()
    }

    fn notify_completions(&mut self, eventfd: std::os::fd::RawFd) -> bool {
        (**self).notify_completions(eventfd)
    }

    fn completes_on_reap(&self) -> bool {
        (**self).completes_on_reap()
    }
}
