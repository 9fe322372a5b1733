//! NVMe command encoding and decoding for the passthrough drive: opcodes, the 72-byte
//! `struct nvme_uring_cmd` for data and zone management commands, status codes as typed
//! errors, and the zone report parsed and checked. Pure functions of their inputs, no I/O;
//! what a drive returns is untrusted and never panics them.

use nvme_sys::ioctl::nvme_uring_cmd;

use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::zone::{ZoneAction, ZoneDescriptor, ZoneState, ZoneTarget};

/// NVMe I/O opcodes used here (NVM and ZNS command sets).
pub mod opcodes {
    pub const WRITE: u8 = 0x01;
    pub const READ: u8 = 0x02;
    pub const ZONE_MANAGEMENT_SEND: u8 = 0x79;
    pub const ZONE_MANAGEMENT_RECEIVE: u8 = 0x7a;
    pub const ZONE_APPEND: u8 = 0x7d;
}

/// Zone Management Send actions (cdw13 bits 0..7) and the select-all flag (bit 8).
pub(super) const ZSA_CLOSE: u32 = 0x1;
pub(super) const ZSA_FINISH: u32 = 0x2;
pub(super) const ZSA_OPEN: u32 = 0x3;
pub(super) const ZSA_RESET: u32 = 0x4;
pub(super) const ZSA_SELECT_ALL: u32 = 1 << 8;
/// Zone Management Receive: report zones, all states, partial report (cdw13 bit 16).
pub(super) const ZRA_REPORT_PARTIAL: u32 = 1 << 16;
/// Bytes of a zone report header and of each zone descriptor.
pub const ZONE_REPORT_HEADER_BYTES: usize = 64;
pub const ZONE_DESCRIPTOR_BYTES: usize = 64;
/// Zone type "sequential write required", the only one a ZNS namespace has.
pub(super) const ZONE_TYPE_SEQUENTIAL_WRITE_REQUIRED: u8 = 0x2;
/// Identify data is one 4 KiB page.
pub(super) const IDENTIFY_BYTES: usize = 4096;
/// The controller's minimum memory page size, the unit of MDTS and ZASL. It lives in the
/// CAP register, which passthrough cannot read; every ZNS drive known uses 4 KiB.
pub(super) const MEMORY_PAGE_BYTES: u64 = 4096;

/// Above this much metadata a command carries whole multiples of it (see where the
/// transfer limit and granule are set).
pub(super) const METADATA_TRANSFER_GRANULE_BYTES: u64 = 512;
/// MOR/MAR value meaning "no limit".
pub(super) const NO_RESOURCE_LIMIT: u32 = u32::MAX;
/// Entries of the submission queue (and commands worth keeping in flight).
pub(super) const RING_ENTRIES: u32 = 256;
/// flbas bit 4: metadata transferred at the end of each block instead of separately.
pub(super) const FLBAS_EXTENDED_METADATA: u8 = 1 << 4;

/// Status code type and code of an NVMe completion status as the kernel returns it in
/// `cqe.res` (bits 0..7 code, 8..10 type; DNR and more bits above are ignored).
pub(super) fn split_status(status: u16) -> (u8, u8) {
    (((status >> 8) & 0x7) as u8, (status & 0xff) as u8)
}

/// A readable name of an NVMe status, for error messages.
pub fn status_name(status: u16) -> &'static str {
    match split_status(status) {
        (0, 0x02) => "invalid field in command",
        (0, 0x04) => "data transfer error",
        (0, 0x06) => "internal error",
        (0, 0x0b) => "invalid namespace or format",
        (0, 0x80) => "LBA out of range",
        (0, 0x81) => "capacity exceeded",
        (0, 0x82) => "namespace not ready",
        (1, 0xb8) => "zone boundary error",
        (1, 0xb9) => "zone is full",
        (1, 0xba) => "zone is read only",
        (1, 0xbb) => "zone is offline",
        (1, 0xbc) => "zone invalid write",
        (1, 0xbd) => "too many active zones",
        (1, 0xbe) => "too many open zones",
        (1, 0xbf) => "invalid zone state transition",
        (2, 0x80) => "write fault",
        (2, 0x81) => "unrecovered read error",
        (2, 0x86) => "access denied",
        _ => "unknown status",
    }
}

/// What a failed command was about, for the typed error.
#[derive(Clone, Copy, Debug)]
pub struct CommandContext {
    pub opcode: u8,
    pub lba: u64,
    pub blocks: u64,
    pub zone: u32,
    pub zone_state: Option<ZoneState>,
    pub action: Option<ZoneAction>,
    pub append_limit: u32,
    /// Whether `lba` starts a zone (zone management at any other LBA is an invalid field).
    pub lba_is_zone_start: bool,
}

/// Maps an NVMe status to the error the emulator would return for the same mistake.
pub fn status_to_error(status: u16, ctx: &CommandContext) -> Error {
    let CommandContext { opcode, lba, blocks, zone, .. } = *ctx;
    match split_status(status) {
        (1, 0xb8) => Error::ZoneBoundary { zone, lba, blocks },
        (1, 0xb9) => Error::ZoneIsFull { zone },
        (1, 0xba) => Error::ZoneReadOnly { zone },
        (1, 0xbb) => Error::ZoneOffline { zone },
        (1, 0xbc) => Error::ZoneInvalidWrite { zone, lba, write_pointer: u64::MAX },
        (1, 0xbd) => Error::TooManyActiveZones { zone, limit: 0 },
        (1, 0xbe) => Error::TooManyOpenZones { zone, limit: 0 },
        (1, 0xbf) => Error::InvalidZoneStateTransition {
            zone,
            state: ctx.zone_state.unwrap_or(ZoneState::Empty),
            action: ctx.action.unwrap_or(ZoneAction::Open),
        },
        (0, 0x80) => Error::LbaOutOfRange { lba, blocks, total_blocks: 0 },
        // An append over ZASL is refused as an invalid field.
        (0, 0x02) if opcode == opcodes::ZONE_APPEND && blocks > u64::from(ctx.append_limit) => {
            Error::AppendTooLarge { blocks, limit: ctx.append_limit }
        }
        (0, 0x02) if opcode == opcodes::ZONE_MANAGEMENT_SEND && !ctx.lba_is_zone_start => Error::NotZoneStart { lba },
        (2, 0x81) => Error::MediaError { lba },
        _ => Error::NvmeStatus { opcode, lba, status },
    }
}

/// Builds the 80-byte command area of a passthrough SQE.
pub fn encode(cmd: &nvme_uring_cmd) -> [u8; 80] {
    let mut area = [0u8; 80];
    let size = std::mem::size_of::<nvme_uring_cmd>();
    // SAFETY: nvme_uring_cmd is plain old data of `size` (72) bytes, copied into an array
    // of 80 bytes.
    let bytes = unsafe { std::slice::from_raw_parts((cmd as *const nvme_uring_cmd).cast::<u8>(), size) };
    area[..size].copy_from_slice(bytes);
    area
}

pub(super) fn lba_words(lba: u64) -> (u32, u32) {
    (lba as u32, (lba >> 32) as u32)
}

/// A passthrough command for the data path: `blocks` blocks at `lba` (for an append,
/// the zone start), with data and metadata buffers.
pub fn data_command(
    opcode: u8,
    nsid: u32,
    lba: u64,
    blocks: u64,
    data: &mut [u8],
    metadata: &mut [u8],
) -> nvme_uring_cmd {
    debug_assert!(blocks >= 1);
    let (cdw10, cdw11) = lba_words(lba);
    nvme_uring_cmd {
        opcode,
        nsid,
        addr: data.as_mut_ptr() as u64,
        data_len: data.len() as u32,
        metadata: if metadata.is_empty() { 0 } else { metadata.as_mut_ptr() as u64 },
        metadata_len: metadata.len() as u32,
        cdw10,
        cdw11,
        cdw12: (blocks - 1) as u32,
        ..Default::default()
    }
}

/// A Zone Management Send command.
pub fn zone_send_command(nsid: u32, action: ZoneAction, target: ZoneTarget) -> nvme_uring_cmd {
    let (start_lba, all) = match target {
        ZoneTarget::Zone { start_lba } => (start_lba, 0),
        ZoneTarget::All => (0, ZSA_SELECT_ALL),
    };
    let code = match action {
        ZoneAction::Close => ZSA_CLOSE,
        ZoneAction::Finish => ZSA_FINISH,
        ZoneAction::Open => ZSA_OPEN,
        ZoneAction::Reset => ZSA_RESET,
    };
    let (cdw10, cdw11) = lba_words(start_lba);
    nvme_uring_cmd {
        opcode: opcodes::ZONE_MANAGEMENT_SEND,
        nsid,
        cdw10,
        cdw11,
        cdw13: code | all,
        ..Default::default()
    }
}

/// A Zone Management Receive (report zones) into `buffer`.
pub fn zone_report_command(nsid: u32, start_lba: u64, buffer: &mut [u8]) -> nvme_uring_cmd {
    let (cdw10, cdw11) = lba_words(start_lba);
    nvme_uring_cmd {
        opcode: opcodes::ZONE_MANAGEMENT_RECEIVE,
        nsid,
        addr: buffer.as_mut_ptr() as u64,
        data_len: buffer.len() as u32,
        cdw10,
        cdw11,
        cdw12: (buffer.len() / 4 - 1) as u32,
        cdw13: ZRA_REPORT_PARTIAL,
        ..Default::default()
    }
}

pub(super) fn le64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

/// Parses a zone report for a drive of `geometry` (zone capacity may still be unknown:
/// pass 0 to accept any capacity up to the zone size).
pub fn parse_zone_report(buffer: &[u8], geometry: &Geometry) -> Result<Vec<ZoneDescriptor>> {
    let bad = |reason: String| Error::BadZoneReport { reason };
    if buffer.len() < ZONE_REPORT_HEADER_BYTES {
        return Err(bad(format!("{} bytes, shorter than the header", buffer.len())));
    }
    let reported = le64(buffer, 0);
    let room = ((buffer.len() - ZONE_REPORT_HEADER_BYTES) / ZONE_DESCRIPTOR_BYTES) as u64;
    if reported > room {
        return Err(bad(format!("claims {reported} zones in room for {room}")));
    }
    let mut zones = Vec::with_capacity(reported as usize);
    for i in 0..reported as usize {
        let d = &buffer[ZONE_REPORT_HEADER_BYTES + i * ZONE_DESCRIPTOR_BYTES..][..ZONE_DESCRIPTOR_BYTES];
        let zone_type = d[0] & 0xf;
        if zone_type != ZONE_TYPE_SEQUENTIAL_WRITE_REQUIRED {
            return Err(bad(format!("descriptor {i}: zone type {zone_type:#x} is not sequential-write-required")));
        }
        let state = ZoneState::from_nvme(d[1] >> 4)
            .ok_or_else(|| bad(format!("descriptor {i}: reserved zone state {:#x}", d[1] >> 4)))?;
        let capacity_blocks = le64(d, 8);
        let start_lba = le64(d, 16);
        let write_pointer = le64(d, 24);
        if !start_lba.is_multiple_of(geometry.zone_size_blocks) {
            return Err(bad(format!("descriptor {i}: zone start {start_lba} is not zone aligned")));
        }
        let zone = geometry
            .zone_of(start_lba)
            .ok_or_else(|| bad(format!("descriptor {i}: zone start {start_lba} is past the namespace")))?;
        if capacity_blocks == 0 || capacity_blocks > geometry.zone_size_blocks {
            return Err(bad(format!("zone {zone}: capacity {capacity_blocks} blocks")));
        }
        // Write pointers of full, read-only and offline zones are not meaningful.
        let write_pointer = match state {
            ZoneState::Full => start_lba + capacity_blocks,
            ZoneState::Offline => start_lba,
            ZoneState::ReadOnly => write_pointer.clamp(start_lba, start_lba + capacity_blocks),
            _ if write_pointer < start_lba || write_pointer > start_lba + capacity_blocks => {
                return Err(bad(format!("zone {zone}: write pointer {write_pointer} outside the zone")));
            }
            _ => write_pointer,
        };
        zones.push(ZoneDescriptor { zone, state, start_lba, capacity_blocks, write_pointer });
    }
    Ok(zones)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn geometry() -> Geometry {
        Geometry::small(8, 1024, 1000)
    }

    fn descriptor(zone_type: u8, state: u8, cap: u64, start: u64, wp: u64) -> [u8; 64] {
        let mut d = [0u8; 64];
        d[0] = zone_type;
        d[1] = state << 4;
        d[8..16].copy_from_slice(&cap.to_le_bytes());
        d[16..24].copy_from_slice(&start.to_le_bytes());
        d[24..32].copy_from_slice(&wp.to_le_bytes());
        d
    }

    fn report(descs: &[[u8; 64]]) -> Vec<u8> {
        let mut buf = vec![0u8; 64];
        buf[..8].copy_from_slice(&(descs.len() as u64).to_le_bytes());
        for d in descs {
            buf.extend_from_slice(d);
        }
        buf
    }

    #[test]
    fn parses_a_zone_report() {
        let buf = report(&[
            descriptor(2, 1, 1000, 0, 0),
            descriptor(2, 2, 1000, 1024, 1030),
            descriptor(2, 0xe, 1000, 2048, 0),
        ]);
        let zones = parse_zone_report(&buf, &geometry()).unwrap();
        assert_eq!(
            zones[1],
            ZoneDescriptor {
                zone: 1,
                state: ZoneState::ImplicitlyOpen,
                start_lba: 1024,
                capacity_blocks: 1000,
                write_pointer: 1030
            }
        );
        assert_eq!(zones[2].write_pointer, 2048 + 1000, "full zones report their end");
    }

    #[test]
    fn rejects_malformed_reports() {
        let g = geometry();
        for buf in [
            vec![0u8; 10],
            report(&[descriptor(1, 1, 1000, 0, 0)]),
            report(&[descriptor(2, 5, 1000, 0, 0)]),
            report(&[descriptor(2, 1, 2000, 0, 0)]),
            report(&[descriptor(2, 2, 1000, 3, 3)]),
            report(&[descriptor(2, 2, 1000, 0, 1001)]),
            report(&[descriptor(2, 2, 1000, 1 << 40, 1 << 40)]),
            {
                let mut b = report(&[descriptor(2, 1, 1000, 0, 0)]);
                b[0] = 9;
                b
            },
        ] {
            assert!(parse_zone_report(&buf, &g).is_err(), "accepted {:?}", &buf[..buf.len().min(80)]);
        }
    }

    proptest! {
        #[test]
        fn zone_report_parsing_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse_zone_report(&bytes, &geometry());
        }
    }

    #[test]
    fn encodes_commands_as_the_kernel_expects() {
        let mut data = vec![0u8; 8192];
        let mut meta = vec![0u8; 128];
        let cmd = data_command(opcodes::ZONE_APPEND, 1, 0x1_0000_2000, 2, &mut data, &mut meta);
        let area = encode(&cmd);
        assert_eq!(area[0], 0x7d);
        assert_eq!(u32::from_le_bytes(area[4..8].try_into().unwrap()), 1, "nsid");
        assert_eq!(u32::from_le_bytes(area[40..44].try_into().unwrap()), 0x2000, "cdw10: LBA low");
        assert_eq!(u32::from_le_bytes(area[44..48].try_into().unwrap()), 1, "cdw11: LBA high");
        assert_eq!(u32::from_le_bytes(area[48..52].try_into().unwrap()), 1, "cdw12: blocks - 1");
        assert_eq!(u32::from_le_bytes(area[32..36].try_into().unwrap()), 128, "metadata_len");
        assert_eq!(u32::from_le_bytes(area[36..40].try_into().unwrap()), 8192, "data_len");
        let reset_all = encode(&zone_send_command(1, ZoneAction::Reset, ZoneTarget::All));
        assert_eq!(reset_all[0], 0x79);
        assert_eq!(u32::from_le_bytes(reset_all[52..56].try_into().unwrap()), 0x104, "cdw13: reset, select all");
        let mut buf = vec![0u8; 64 + 64 * 4];
        let report = encode(&zone_report_command(1, 0, &mut buf));
        assert_eq!(u32::from_le_bytes(report[48..52].try_into().unwrap()), (320 / 4 - 1) as u32, "cdw12: dwords - 1");
    }

    #[test]
    fn maps_zns_statuses_to_typed_errors() {
        let ctx = CommandContext {
            opcode: opcodes::WRITE,
            lba: 5,
            blocks: 1,
            zone: 0,
            zone_state: None,
            action: None,
            append_limit: 32,
            lba_is_zone_start: false,
        };
        assert!(matches!(status_to_error(0x41bc, &ctx), Error::ZoneInvalidWrite { lba: 5, .. }));
        assert!(matches!(status_to_error(0x01b9, &ctx), Error::ZoneIsFull { .. }));
        assert!(matches!(status_to_error(0x01b8, &ctx), Error::ZoneBoundary { .. }));
        assert!(matches!(status_to_error(0x01be, &ctx), Error::TooManyOpenZones { .. }));
        assert!(matches!(status_to_error(0x01bd, &ctx), Error::TooManyActiveZones { .. }));
        assert!(matches!(status_to_error(0x0281, &ctx), Error::MediaError { lba: 5 }));
        let append = CommandContext { opcode: opcodes::ZONE_APPEND, blocks: 33, ..ctx };
        assert!(matches!(status_to_error(0x4002, &append), Error::AppendTooLarge { blocks: 33, limit: 32 }));
        assert!(matches!(status_to_error(0x0002, &ctx), Error::NvmeStatus { status: 2, .. }));
        let send = CommandContext { opcode: opcodes::ZONE_MANAGEMENT_SEND, lba: 1, ..ctx };
        assert!(matches!(status_to_error(0x4002, &send), Error::NotZoneStart { lba: 1 }));
    }
}
