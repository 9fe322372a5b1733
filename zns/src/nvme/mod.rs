//! NVMe ZNS drives through io_uring passthrough (`IORING_OP_URING_CMD` on `/dev/ngXnY`).
//!
//! The geometry comes from identify data read with libnvme (namespace and controller,
//! NVM and ZNS command sets) and a zone report. The data path, including zone management
//! send and receive, runs on an io_uring with 128-byte SQEs (the 72-byte
//! `struct nvme_uring_cmd` sits in the SQE's command area) and 32-byte CQEs (Zone
//! Append's LBA comes back in the first extra u64). Submissions are queued in the ring
//! and handed to the kernel in one syscall per `reap`/`wait`.
//!
//! Everything the drive returns is untrusted: zone reports are checked, status codes map
//! to typed errors, and nothing here panics on what a drive says.
//!
//! A namespace splits into parts (`split`), each with an io_uring ring and buffers of its
//! own over the one open (and locked) descriptor, for threads of their own.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use nvme_sys::ioctl::NVME_URING_CMD_IO;
use nvme_sys::libnvme;

use crate::device::{Command, Completion, Done, Tag, ZonedDevice};
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::zone::ZoneTarget;

mod command;
mod extended;
mod metadata_buffer;
mod split;

use metadata_buffer::MetadataBuffer;

pub use command::*;

/// One command owned by the kernel until its completion.
struct Flight {
    tag: Tag,
    command: Command,
    /// The metadata the device reads or writes: a page-aligned copy of the caller's (see
    /// `MetadataBuffer`), or scratch when the caller gave none but the format has some.
    metadata: MetadataBuffer,
    /// On a namespace of extended LBAs, the data and metadata interleaved (`extended`):
    /// what the device reads or writes instead.
    interleaved: Vec<u8>,
    report: Vec<u8>,
    context: CommandContext,
}

/// An NVMe ZNS namespace reached through io_uring passthrough.
pub struct NvmeDrive {
    path: PathBuf,
    /// Shared by the parts of a split namespace (each ring submits on it): the lock goes
    /// with the last of them.
    file: Arc<File>,
    nsid: u32,
    geometry: Geometry,
    ring: IoUring<squeue::Entry128, cqueue::Entry32>,
    /// Commands in the kernel's hands, indexed by their SQE's user data.
    flights: Vec<Option<Flight>>,
    free_slots: Vec<usize>,
    in_kernel: usize,
    backlog: VecDeque<(Tag, Command)>,
    ready: VecDeque<Completion>,
    /// Reused between drains: (user data, result, first big-CQE word).
    cqes: Vec<(u64, i32, u64)>,
    /// Completed commands' metadata storage, for the next commands (`MetadataBuffer`).
    spare_metadata: Vec<Vec<u8>>,
    /// Metadata interleaved with data (extended LBAs, `extended`): as NVMe over Fabrics
    /// carries it.
    interleaved: bool,
}

fn identify(
    file: &File,
    path: &Path,
    cns: libnvme::nvme_identify_cns,
    csi: libnvme::nvme_csi,
    nsid: u32,
) -> Result<Vec<u8>> {
    let mut data = vec![0u8; IDENTIFY_BYTES];
    let mut args = libnvme::nvme_identify_args {
        result: std::ptr::null_mut(),
        data: data.as_mut_ptr().cast(),
        args_size: std::mem::size_of::<libnvme::nvme_identify_args>() as i32,
        fd: file.as_raw_fd(),
        timeout: 0,
        cns,
        csi,
        nsid,
        cntid: 0,
        cns_specific_id: 0,
        uuidx: 0,
    };
    // SAFETY: args points at a live 4 KiB buffer for the whole synchronous call.
    let rc = unsafe { libnvme::nvme_identify(&mut args) };
    match rc {
        0 => Ok(data),
        rc if rc < 0 => Err(Error::Io {
            path: path.to_path_buf(),
            context: "NVMe identify",
            error: std::io::Error::last_os_error(),
        }),
        status => Err(Error::UnsupportedDevice {
            path: path.to_path_buf(),
            reason: format!("identify (CNS {cns:?}, CSI {csi:?}) failed with NVMe status {status:#x}"),
        }),
    }
}

/// Reads a plain-old-data identify structure out of its 4 KiB page.
fn read_struct<T: Copy>(page: &[u8]) -> T {
    assert!(page.len() >= std::mem::size_of::<T>());
    // SAFETY: the identify structures are integer-only C structs no bigger than the page,
    // so any bytes are a valid value; read_unaligned copes with the Vec's alignment.
    unsafe { std::ptr::read_unaligned(page.as_ptr().cast::<T>()) }
}

/// The kernel's own limit on one request to the namespace (`max_hw_sectors_kb`), if sysfs
/// tells it for the block device behind `/dev/ngXnY`.
fn kernel_max_transfer_bytes(path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_str()?.strip_prefix("ng")?;
    let sysfs = format!("/sys/block/nvme{name}/queue/max_hw_sectors_kb");
    let kib: u64 = std::fs::read_to_string(sysfs).ok()?.trim().parse().ok()?;
    Some(kib * 1024)
}

impl NvmeDrive {
    /// Opens a ZNS namespace's generic character device (`/dev/ngXnY`) and reads its
    /// geometry from the drive.
    pub fn open(path: &Path) -> Result<Self> {
        let unsupported = |reason: String| Error::UnsupportedDevice { path: path.to_path_buf(), reason };
        let file = OpenOptions::new().read(true).write(true).open(path).map_err(|error| Error::Io {
            path: path.to_path_buf(),
            context: "opening NVMe device",
            error,
        })?;
        crate::media::lock(&file, path)?;
        let mut nsid = 0u32;
        // SAFETY: plain ioctl on an open descriptor writing one u32.
        if unsafe { libnvme::nvme_get_nsid(file.as_raw_fd(), &mut nsid) } < 0 {
            return Err(unsupported(format!(
                "not an NVMe namespace device ({}); use /dev/ngXnY",
                std::io::Error::last_os_error()
            )));
        }
        use libnvme::nvme_csi::{NVME_CSI_NVM, NVME_CSI_ZNS};
        use libnvme::nvme_identify_cns::*;
        let id_ns: libnvme::nvme_id_ns = read_struct(&identify(&file, path, NVME_IDENTIFY_CNS_NS, NVME_CSI_NVM, nsid)?);
        let id_ctrl: libnvme::nvme_id_ctrl =
            read_struct(&identify(&file, path, NVME_IDENTIFY_CNS_CTRL, NVME_CSI_NVM, 0)?);
        let zns_ns: libnvme::nvme_zns_id_ns = read_struct(
            &identify(&file, path, NVME_IDENTIFY_CNS_CSI_NS, NVME_CSI_ZNS, nsid)
                .map_err(|e| unsupported(format!("not a zoned (ZNS) namespace: {e}")))?,
        );
        let zns_ctrl: libnvme::nvme_zns_id_ctrl =
            read_struct(&identify(&file, path, NVME_IDENTIFY_CNS_CSI_CTRL, NVME_CSI_ZNS, 0)?);

        // flbas: format index in bits 0..3, high bits in 5..6 when more than 16 formats.
        let format = usize::from(id_ns.flbas & 0xf) | (usize::from((id_ns.flbas >> 5) & 0x3) << 4);
        if format > usize::from(id_ns.nlbaf) || format >= id_ns.lbaf.len() {
            return Err(unsupported(format!("LBA format index {format} past the {} formats", id_ns.nlbaf + 1)));
        }
        let interleaved = id_ns.flbas & FLBAS_EXTENDED_METADATA != 0;
        let lbaf = id_ns.lbaf[format];
        let ds = u32::from(lbaf.ds);
        if ds == 0 {
            // Seen through Linux's NVMe target (nvmet passthrough, over TCP): it blanks
            // every LBA format with metadata in what it passes on of Identify Namespace.
            return Err(unsupported(format!(
                "its LBA format {format} is blank (no data size): a fabrics target hid it, as Linux's NVMe \
                 target does with formats that have metadata; zapraid needs per-block metadata \
                 (docs/manual/remote-drives.md)"
            )));
        }
        if !(9..=16).contains(&ds) {
            return Err(unsupported(format!("LBA data size 2^{ds} bytes")));
        }
        let block_size_bytes = 1u32 << ds;
        let zone_size_blocks = u64::from_le(zns_ns.lbafe[format].zsze);
        let namespace_blocks = u64::from_le(id_ns.nsze);
        if zone_size_blocks == 0 || namespace_blocks < zone_size_blocks {
            return Err(unsupported(format!("zone size {zone_size_blocks} blocks, namespace {namespace_blocks}")));
        }
        let limit = |raw: u32| {
            let raw = u32::from_le(raw);
            (raw != NO_RESOURCE_LIMIT).then(|| raw + 1)
        };
        // A transfer of extended LBAs moves each block's metadata with it.
        let metadata_bytes = u64::from(u16::from_le(lbaf.ms));
        let transfer_block_bytes = u64::from(block_size_bytes) + if interleaved { metadata_bytes } else { 0 };
        let pages_to_blocks = |log2_pages: u8| {
            let bytes = MEMORY_PAGE_BYTES << u32::from(log2_pages).min(20);
            (bytes / transfer_block_bytes).max(1)
        };
        // An interleaved buffer (not page-aligned, nor a whole number of pages) may span
        // one page more than its bytes: the kernel's segment limit counts pages.
        let spill = if interleaved { MEMORY_PAGE_BYTES } else { 0 };
        let kernel_blocks =
            kernel_max_transfer_bytes(path).map(|b| (b.saturating_sub(spill) / transfer_block_bytes).max(1));
        let mdts_blocks = (id_ctrl.mdts != 0).then(|| pages_to_blocks(id_ctrl.mdts));
        const FALLBACK_TRANSFER_BYTES: u64 = 128 * 1024;
        let max_transfer_blocks = match (mdts_blocks, kernel_blocks) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => FALLBACK_TRANSFER_BYTES / u64::from(block_size_bytes),
        };
        // A passthrough command's separate metadata: more than a page of it is refused
        // with EINVAL (128 blocks x 64 B on QEMU's NVMe), so a transfer carries at most a
        // page of it. And a transfer of more than 512 B of it that is not a whole multiple
        // of 512 B comes back wrong without any error, written or read, by Zone Write or
        // Zone Append (Linux 6.12 with QEMU 7.2, 64 B per block: every count from 9 to 63
        // blocks that is not a multiple of 8 loses its metadata, 1-8 and every multiple of
        // 8 up to 64 keep it; the conformance check "metadata of every transfer size reads
        // back" finds it). So above 512 B, commands move whole multiples of 512 B of it.
        // (Interleaved metadata travels in the data buffer: neither limit applies.)
        let separate_metadata_bytes = if interleaved { 0 } else { metadata_bytes };
        let max_transfer_blocks = match MEMORY_PAGE_BYTES.checked_div(separate_metadata_bytes) {
            Some(blocks) => max_transfer_blocks.min(blocks.max(1)),
            None => max_transfer_blocks,
        };
        // The granule holds for interleaved metadata too (QEMU 7.2 with mset=1 loses it
        // the same way: 1-8 blocks and multiples of 8 keep it, 9-15 do not; the
        // conformance check finds it).
        let granule_blocks = METADATA_TRANSFER_GRANULE_BYTES.checked_div(metadata_bytes).unwrap_or(0);
        let transfer_granule_blocks =
            if (2..max_transfer_blocks).contains(&granule_blocks) { granule_blocks } else { 0 };
        // The Zone Append size limit counts data only, interleaved metadata or not (as
        // QEMU checks it; the conformance check "append over the size limit fails" finds
        // a drive that counts otherwise).
        let append_blocks = if zns_ctrl.zasl == 0 {
            max_transfer_blocks
        } else {
            let bytes = MEMORY_PAGE_BYTES << u32::from(zns_ctrl.zasl).min(20);
            (bytes / u64::from(block_size_bytes)).max(1).min(max_transfer_blocks)
        };
        let mut geometry = Geometry {
            block_size_bytes,
            metadata_bytes_per_block: u32::from(u16::from_le(lbaf.ms)),
            zone_size_blocks,
            // Capacity comes from the zone report below; the zone size bounds it.
            zone_capacity_blocks: zone_size_blocks,
            zone_count: u32::try_from(namespace_blocks / zone_size_blocks)
                .map_err(|_| unsupported("more than 2^32 zones".into()))?,
            max_open_zones: limit(zns_ns.mor),
            max_active_zones: limit(zns_ns.mar),
            zone_append_max_blocks: u32::try_from(append_blocks).unwrap_or(u32::MAX),
            max_transfer_blocks: u32::try_from(max_transfer_blocks).unwrap_or(u32::MAX),
            transfer_granule_blocks: u32::try_from(transfer_granule_blocks).unwrap_or(0),
        };
        let mut drive = Self::with_ring(path, Arc::new(file), nsid, geometry)?;
        drive.interleaved = interleaved;
        if interleaved {
            tracing::info!(drive = %path.display(), "metadata interleaved with data (extended LBAs)");
        }
        let zone0 = crate::device::execute(&mut drive, Command::ReportZones { start_lba: 0, max_zones: 1 });
        match zone0.result? {
            Done::Zones(zones) if zones.len() == 1 => geometry.zone_capacity_blocks = zones[0].capacity_blocks,
            other => return Err(unsupported(format!("report of zone 0 returned {other:?}"))),
        }
        geometry.validate().map_err(|e| unsupported(format!("drive geometry: {e}")))?;
        drive.geometry = geometry;
        Ok(drive)
    }

    /// A drive of namespace `nsid` on `file` with a ring of its own and nothing in flight.
    fn with_ring(path: &Path, file: Arc<File>, nsid: u32, geometry: Geometry) -> Result<Self> {
        let ring = IoUring::<squeue::Entry128, cqueue::Entry32>::builder().build(RING_ENTRIES).map_err(|error| {
            Error::Io { path: path.to_path_buf(), context: "setting up io_uring (SQE128/CQE32)", error }
        })?;
        Ok(NvmeDrive {
            path: path.to_path_buf(),
            file,
            nsid,
            geometry,
            ring,
            flights: Vec::new(),
            free_slots: Vec::new(),
            in_kernel: 0,
            backlog: VecDeque::new(),
            ready: VecDeque::new(),
            cqes: Vec::with_capacity(RING_ENTRIES as usize),
            spare_metadata: Vec::new(),
            interleaved: false,
        })
    }

    /// Whether the namespace interleaves each block's metadata with its data (extended
    /// LBAs), as NVMe over Fabrics carries it (`extended`).
    pub fn metadata_interleaved(&self) -> bool {
        self.interleaved
    }

    fn context(&self, opcode: u8, lba: u64, blocks: u64) -> CommandContext {
        CommandContext {
            opcode,
            lba,
            blocks,
            zone: self.geometry.zone_of(lba).unwrap_or(u32::MAX),
            zone_state: None,
            action: None,
            append_limit: self.geometry.zone_append_max_blocks,
            lba_is_zone_start: lba.is_multiple_of(self.geometry.zone_size_blocks),
        }
    }

    fn fail_now(&mut self, tag: Tag, command: Command, error: Error) {
        let (data, metadata) = match command {
            Command::Read { data, metadata, .. }
            | Command::Write { data, metadata, .. }
            | Command::Append { data, metadata, .. } => (data, metadata),
            _ => (Vec::new(), Vec::new()),
        };
        self.ready.push_back(Completion { tag, result: Err(error), data, metadata });
    }

    /// Blocks a data command moves, refusing more than one transfer (the metadata of one
    /// transfer fits the one page `MetadataBuffer` gives it) and counts off the granule,
    /// whose metadata the kernel and QEMU would lose without an error.
    fn checked_blocks(&self, data: &[u8], metadata: &[u8]) -> Result<u64> {
        let blocks = self.geometry.blocks_in_buffers(data, metadata)?;
        self.geometry.check_transfer(blocks)?;
        Ok(blocks)
    }

    /// Moves a command into the ring, or back into the backlog if the ring is full.
    fn start(&mut self, tag: Tag, mut command: Command) {
        if self.ring.submission().is_full() {
            self.backlog.push_back((tag, command));
            return;
        }
        let nsid = self.nsid;
        let meta_per_block = self.geometry.metadata_bytes_per_block as usize;
        let block_bytes = self.geometry.block_size_bytes as usize;
        let mut flight_meta = MetadataBuffer::none();
        let mut interleaved = Vec::new();
        let mut report = Vec::new();
        let opcode = if matches!(command, Command::Read { .. }) { opcodes::READ } else { opcodes::WRITE };
        let (cmd, context) = match &mut command {
            Command::Read { lba, data, metadata } | Command::Write { lba, data, metadata } => {
                let blocks = match self.checked_blocks(data, metadata) {
                    Ok(blocks) => blocks,
                    Err(e) => return self.fail_now(tag, command, e),
                };
                if self.interleaved {
                    interleaved = extended::interleave(data, metadata, blocks as usize, block_bytes, meta_per_block);
                    let cmd = data_command(opcode, nsid, *lba, blocks, &mut interleaved, &mut []);
                    (cmd, self.context(opcode, *lba, blocks))
                } else {
                    flight_meta =
                        MetadataBuffer::for_command(metadata, blocks, meta_per_block, &mut self.spare_metadata);
                    let meta = flight_meta.as_mut();
                    (data_command(opcode, nsid, *lba, blocks, data, meta), self.context(opcode, *lba, blocks))
                }
            }
            Command::Append { zone_start_lba, data, metadata } => {
                let blocks = match self.checked_blocks(data, metadata) {
                    Ok(blocks) => blocks,
                    Err(e) => return self.fail_now(tag, command, e),
                };
                let zslba = *zone_start_lba;
                let cmd = if self.interleaved {
                    interleaved = extended::interleave(data, metadata, blocks as usize, block_bytes, meta_per_block);
                    data_command(opcodes::ZONE_APPEND, nsid, zslba, blocks, &mut interleaved, &mut [])
                } else {
                    flight_meta =
                        MetadataBuffer::for_command(metadata, blocks, meta_per_block, &mut self.spare_metadata);
                    data_command(opcodes::ZONE_APPEND, nsid, zslba, blocks, data, flight_meta.as_mut())
                };
                (cmd, self.context(opcodes::ZONE_APPEND, zslba, blocks))
            }
            Command::ManageZone { action, target } => {
                let lba = match target {
                    ZoneTarget::Zone { start_lba } => *start_lba,
                    ZoneTarget::All => 0,
                };
                let mut context = self.context(opcodes::ZONE_MANAGEMENT_SEND, lba, 0);
                context.action = Some(*action);
                (zone_send_command(nsid, *action, *target), context)
            }
            Command::ReportZones { start_lba, max_zones } => {
                let zones = (*max_zones).clamp(1, self.geometry.zone_count) as usize;
                report = vec![0u8; ZONE_REPORT_HEADER_BYTES + zones * ZONE_DESCRIPTOR_BYTES];
                let cmd = zone_report_command(nsid, *start_lba, &mut report);
                (cmd, self.context(opcodes::ZONE_MANAGEMENT_RECEIVE, *start_lba, 0))
            }
        };
        let slot = self.free_slots.pop().unwrap_or_else(|| {
            self.flights.push(None);
            self.flights.len() - 1
        });
        let id = slot as u64;
        let entry = opcode::UringCmd80::new(types::Fd(self.file.as_raw_fd()), NVME_URING_CMD_IO)
            .cmd(encode(&cmd))
            .build()
            .user_data(id);
        // SAFETY: every buffer the command points at is owned by the Flight stored under
        // `id` (Vec heap memory does not move when the Vec does) and stays alive until
        // its completion is reaped; the queue had room (checked above).
        unsafe {
            self.ring.submission().push(&entry).expect("submission queue has room");
        }
        self.flights[slot] = Some(Flight { tag, command, metadata: flight_meta, interleaved, report, context });
        self.in_kernel += 1;
    }

    fn drain_completions(&mut self) {
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.extend(self.ring.completion().map(|cqe| (cqe.user_data(), cqe.result(), cqe.big_cqe()[0])));
        for (id, res, result_qword) in cqes.drain(..) {
            let Some(flight) = self.flights.get_mut(id as usize).and_then(Option::take) else {
                tracing::error!(drive = %self.path.display(), id, "completion for no command in flight");
                continue;
            };
            self.free_slots.push(id as usize);
            self.in_kernel -= 1;
            let outcome = if res < 0 {
                let c = &flight.context;
                tracing::error!(
                    drive = %self.path.display(), opcode = c.opcode, lba = c.lba, blocks = c.blocks,
                    error = %std::io::Error::from_raw_os_error(-res), "the kernel refused an NVMe passthrough command"
                );
                Err(Error::Io {
                    path: self.path.clone(),
                    context: "NVMe passthrough",
                    error: std::io::Error::from_raw_os_error(-res),
                })
            } else if res > 0 {
                Err(status_to_error(res as u16, &flight.context))
            } else {
                Ok(())
            };
            let ctx = flight.context;
            let (result, data, metadata) = match flight.command {
                Command::Read { mut data, mut metadata, .. } => {
                    if self.interleaved {
                        let (bs, ms) =
                            (self.geometry.block_size_bytes as usize, self.geometry.metadata_bytes_per_block);
                        extended::split_interleaved(&flight.interleaved, &mut data, &mut metadata, bs, ms as usize);
                    } else if !metadata.is_empty() {
                        metadata.copy_from_slice(flight.metadata.as_slice());
                    }
                    (outcome.map(|()| Done::Read), data, metadata)
                }
                Command::Write { lba, data, metadata } => {
                    (outcome.map(|()| Done::Written { lba, blocks: ctx.blocks }), data, metadata)
                }
                Command::Append { data, metadata, .. } => {
                    let result = outcome.and_then(|()| {
                        let lba = result_qword;
                        let zone_start = ctx.lba;
                        if lba < zone_start || lba + ctx.blocks > zone_start + self.geometry.zone_size_blocks {
                            return Err(Error::BadZoneReport {
                                reason: format!("append to zone at {zone_start} reported landing at LBA {lba}"),
                            });
                        }
                        Ok(Done::Written { lba, blocks: ctx.blocks })
                    });
                    (result, data, metadata)
                }
                Command::ManageZone { .. } => (outcome.map(|()| Done::ZoneManaged), Vec::new(), Vec::new()),
                Command::ReportZones { .. } => {
                    let result =
                        outcome.and_then(|()| parse_zone_report(&flight.report, &self.geometry).map(Done::Zones));
                    (result, Vec::new(), Vec::new())
                }
            };
            flight.metadata.recycle(&mut self.spare_metadata);
            self.ready.push_back(Completion { tag: flight.tag, result, data, metadata });
        }
        self.cqes = cqes;
        while !self.backlog.is_empty() && !self.ring.submission().is_full() {
            let (tag, command) = self.backlog.pop_front().expect("backlog not empty");
            self.start(tag, command);
        }
    }

    fn kick(&mut self, wait_for: usize) {
        if let Err(e) = self.ring.submit_and_wait(wait_for) {
            if e.raw_os_error() != Some(libc::EINTR) && e.raw_os_error() != Some(libc::EBUSY) {
                tracing::error!(drive = %self.path.display(), error = %e, "io_uring submit failed");
            }
        }
    }
}

impl ZonedDevice for NvmeDrive {
    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn queue_depth(&self) -> usize {
        RING_ENTRIES as usize
    }

    fn submit(&mut self, tag: Tag, command: Command) {
        if self.backlog.is_empty() {
            self.start(tag, command);
        } else {
            self.backlog.push_back((tag, command));
        }
    }

    fn reap(&mut self, out: &mut Vec<Completion>) -> usize {
        if self.in_kernel > 0 {
            self.kick(0);
            self.drain_completions();
            // The drain moves backlog commands into the ring: hand them to the kernel now,
            // so a caller that sleeps on the completion eventfd next is not sleeping on
            // commands the drive never got.
            if !self.ring.submission().is_empty() {
                self.kick(0);
            }
        }
        let n = self.ready.len();
        out.extend(self.ready.drain(..));
        n
    }

    fn wait(&mut self, out: &mut Vec<Completion>) -> usize {
        while self.ready.is_empty() && self.in_kernel > 0 {
            self.kick(1);
            self.drain_completions();
        }
        self.reap(out)
    }

    fn in_flight(&self) -> usize {
        self.in_kernel + self.backlog.len() + self.ready.len()
    }

    fn notify_completions(&mut self, eventfd: std::os::fd::RawFd) -> bool {
        match self.ring.submitter().register_eventfd(eventfd) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(drive = %self.path.display(), error = %e, "cannot register an eventfd on the ring");
                false
            }
        }
    }
}

impl Drop for NvmeDrive {
    fn drop(&mut self) {
        // The kernel may still write into buffers of commands in flight: wait them out.
        while self.in_kernel > 0 {
            self.kick(1);
            self.drain_completions();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_buffers_never_cross_a_page() {
        let page = MEMORY_PAGE_BYTES as usize;
        let mut spare = Vec::new();
        for len in [0, 32, 64, 2688, page] {
            for _ in 0..16 {
                let source: Vec<u8> = (0..len).map(|i| i as u8 | 1).collect();
                let mut b = MetadataBuffer::for_command(&source, 0, 0, &mut spare);
                let start = b.as_mut().as_ptr() as usize;
                assert_eq!(start % page, 0, "page-aligned");
                assert!(len == 0 || start / page == (start + len - 1) / page, "within one page");
                assert_eq!(b.as_slice(), source.as_slice());
                b.recycle(&mut spare);
                // Reused storage held the copy above: a command without metadata gets zeros.
                let zeros = MetadataBuffer::for_command(&[], 2, len / 2, &mut spare);
                assert!(zeros.as_slice().iter().all(|b| *b == 0) && zeros.as_slice().len() == len / 2 * 2);
                zeros.recycle(&mut spare);
            }
        }
        assert_eq!(spare.len(), 1, "one storage served every buffer of at most a page");
    }
}
