//! A hot spare on one drive: its spare record (`SpareRecord`, "spare of array <uuid>
//! <name>", docs/FORMAT.md) in zone 0, read, written and erased here. Which drives
//! `zapraid format --spare` makes spares is `assemble::format`'s; what a running array does
//! with its spares is `ops::spare_pool`'s.
//!
//! Invariants: a spare record is written only to a drive checked as a replacement is (not
//! a member, the array's geometry, empty unless forced), at the start of an empty zone 0
//! (`SUPERBLOCK_COPIES` copies, as a superblock generation), and nothing else is written
//! to a spare. A spare becomes a member only by a rebuild onto it, which resets every zone
//! of it first (the record goes) and then writes its first array superblock.

use std::path::{Path, PathBuf};

use zapraid_engine::format::SpareRecord;
use zapraid_zns::{execute, Command, ZoneAction, ZoneTarget, ZonedDevice};
use zerocopy::IntoBytes;

use super::identity::uuid_text;
use super::superblock::{read_block, record_writes, superblock_zone_written_blocks, SUPERBLOCK_READ_BACK_BLOCKS};
use crate::drives::Drive;
use crate::error::{Error, Result};

/// A drive given at start that looks like a hot spare whose record is damaged
/// (`superblock::Remains::looks_like_damaged_spare`): the array starts without it, and
/// keeps it open (listed as an unusable spare) so that `remove-spare` can erase it.
pub struct DamagedSpare {
    pub path: PathBuf,
    /// What was found on it (`Remains::describe`).
    pub reason: String,
    pub drive: Drive,
}

/// What a spare record says, for people: `a spare of array "rp" (uuid)`.
pub fn spare_text(record: &SpareRecord) -> String {
    format!("a spare of array \"{}\" ({})", record.name(), uuid_text(&record.array_uuid))
}

/// The spare record of a raw drive, if zone 0 holds a valid one (among its last written
/// blocks, as superblocks are read: a damaged copy falls back to its twin).
pub fn read_spare_record(drive: &mut dyn ZonedDevice) -> Option<SpareRecord> {
    let written = superblock_zone_written_blocks(drive)?;
    (written.saturating_sub(SUPERBLOCK_READ_BACK_BLOCKS)..written)
        .rev()
        .find_map(|lba| read_block(drive, lba).and_then(|data| SpareRecord::decode(&data).ok()))
}

/// Writes `record` (every copy) at the start of zone 0 of a raw drive, which must be empty.
pub fn write_spare_record(drive: &mut dyn ZonedDevice, record: &SpareRecord, path: &Path) -> Result<()> {
    let g = drive.geometry();
    for command in record_writes(record.as_bytes(), &g, 0) {
        let c = execute(drive, command);
        c.result.map_err(|error| Error::DriveCommand {
            path: path.to_path_buf(),
            what: "spare record write",
            error,
        })?;
    }
    Ok(())
}

/// Erases a spare's record (resets zone 0): the drive is blank again.
pub fn erase_spare_record(drive: &mut dyn ZonedDevice, path: &Path) -> Result<()> {
    let target = ZoneTarget::Zone { start_lba: 0 };
    let c = execute(drive, Command::ManageZone { action: ZoneAction::Reset, target });
    c.result.map_err(|error| Error::DriveCommand { path: path.to_path_buf(), what: "zone reset", error })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use zapraid_zns::{EmulatedDrive, Geometry};

    #[test]
    fn a_spare_record_is_written_read_back_and_erased() {
        let g = Geometry { metadata_bytes_per_block: 64, ..Geometry::small(4, 64, 60) };
        let mut drive = EmulatedDrive::memory(g, 1).unwrap();
        let path = Path::new("spare.zns");
        assert!(read_spare_record(&mut drive).is_none());
        let record = SpareRecord::new([4; 16], "rp", 4, g.block_size_bytes, 1);
        write_spare_record(&mut drive, &record, path).unwrap();
        let read = read_spare_record(&mut drive).expect("a record");
        assert_eq!(read.as_bytes(), record.as_bytes());
        assert!(spare_text(&read).starts_with("a spare of array \"rp\" (04040404-"), "{}", spare_text(&read));
        // Not an array superblock: read_superblock sees none.
        assert!(crate::records::superblock::read_superblock(&mut drive).is_none());
        erase_spare_record(&mut drive, path).unwrap();
        assert!(read_spare_record(&mut drive).is_none());
    }

    /// A damaged copy falls back to its twin; both damaged, no record.
    #[test]
    fn a_damaged_copy_falls_back_to_its_twin() {
        let g = Geometry { metadata_bytes_per_block: 64, max_transfer_blocks: 1, ..Geometry::small(4, 64, 60) };
        let mut drive = EmulatedDrive::memory(g, 1).unwrap();
        let record = SpareRecord::new([4; 16], "rp", 4, g.block_size_bytes, 1);
        let mut damaged = vec![0u8; g.block_size_bytes as usize];
        damaged[..record.as_bytes().len()].copy_from_slice(record.as_bytes());
        damaged[20] ^= 1;
        let metadata = vec![0u8; g.metadata_bytes_per_block as usize];
        execute(&mut drive, Command::Write { lba: 0, data: damaged.clone(), metadata: metadata.clone() })
            .result
            .unwrap();
        assert!(read_spare_record(&mut drive).is_none());
        let mut good = vec![0u8; g.block_size_bytes as usize];
        good[..record.as_bytes().len()].copy_from_slice(record.as_bytes());
        execute(&mut drive, Command::Write { lba: 1, data: good, metadata }).result.unwrap();
        assert_eq!(read_spare_record(&mut drive).map(|r| r.array_uuid), Some([4; 16]));
    }
}
