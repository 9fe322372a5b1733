//! The array superblock on one drive: where its generations go in zone 0, how they are
//! written and read back, and what a drive without a valid one holds.
//!
//! Every generation is written as `SUPERBLOCK_COPIES` identical blocks, one after the
//! other at zone 0's write pointer (one write command when the drive takes that many
//! blocks at once). Reading takes, among the last blocks of zone 0, the valid superblock
//! with the highest generation: a torn or damaged copy falls back to its twin, then to
//! older generations. Arrays written with one copy per generation read the same way.
//!
//! A drive without a valid superblock is examined before anyone is told to format it:
//! a drive whose zone 0 was written, or whose zones hold segment headers, is an array
//! member with a damaged superblock, and formatting would erase it; unless zone 0 holds
//! only blocks of a hot spare's record (its magic, none valid) and nothing else is
//! written: a spare whose record is damaged, which holds no array data.

use zapraid_engine::format::{ArraySuperblock, SegmentHeader, ARRAY_SUPERBLOCK_MAGIC, SPARE_RECORD_MAGIC};
use zapraid_zns::{execute, report_all_zones, Command, Done, Geometry, ZonedDevice};

use super::identity::uuid_text;
use super::layout::SUPERBLOCK_ZONES;

/// Identical blocks each superblock generation is written as.
pub const SUPERBLOCK_COPIES: u64 = 2;

/// Generations read back from the end of zone 0 before giving up (torn newest ones fall
/// back to the ones before).
const SUPERBLOCK_READ_BACK_GENERATIONS: u64 = 4;

/// Blocks read back from the end of zone 0: as many generations of one copy each (arrays
/// made before the copies) as of `SUPERBLOCK_COPIES` copies.
pub(crate) const SUPERBLOCK_READ_BACK_BLOCKS: u64 = SUPERBLOCK_READ_BACK_GENERATIONS * SUPERBLOCK_COPIES;

/// The block a superblock copy is written as.
pub fn superblock_block(sb: &ArraySuperblock, block_size_bytes: usize) -> Vec<u8> {
    record_block(zerocopy::IntoBytes::as_bytes(sb), block_size_bytes)
}

/// The block a record of zone 0 (a superblock, a spare record) is written as: its bytes,
/// then zeros.
fn record_block(record: &[u8], block_size_bytes: usize) -> Vec<u8> {
    let mut data = vec![0u8; block_size_bytes];
    data[..record.len()].copy_from_slice(record);
    data
}

/// The writes that put one generation, every copy, at `lba` of a raw drive of geometry
/// `g`: one command if the drive takes that many blocks at once, else one per copy (to be
/// issued in order, each after the one before completed).
pub fn superblock_writes(sb: &ArraySuperblock, g: &Geometry, lba: u64) -> Vec<Command> {
    record_writes(zerocopy::IntoBytes::as_bytes(sb), g, lba)
}

/// As `superblock_writes`, for any record of zone 0 (`SUPERBLOCK_COPIES` copies of it).
pub fn record_writes(record: &[u8], g: &Geometry, lba: u64) -> Vec<Command> {
    let block = record_block(record, g.block_size_bytes as usize);
    let metadata = vec![0u8; g.metadata_bytes_per_block as usize];
    if g.transfer_takes(SUPERBLOCK_COPIES) {
        let data = block.repeat(SUPERBLOCK_COPIES as usize);
        vec![Command::Write { lba, data, metadata: metadata.repeat(SUPERBLOCK_COPIES as usize) }]
    } else {
        (0..SUPERBLOCK_COPIES)
            .map(|copy| Command::Write { lba: lba + copy, data: block.clone(), metadata: metadata.clone() })
            .collect()
    }
}

/// Blocks written in zone 0 of a raw drive, if it can tell.
pub(crate) fn superblock_zone_written_blocks(drive: &mut dyn ZonedDevice) -> Option<u64> {
    match execute(drive, Command::ReportZones { start_lba: 0, max_zones: 1 }).result {
        Ok(Done::Zones(zones)) => zones.first().map(|z| z.written_blocks()),
        _ => None,
    }
}

/// One block of a raw drive, if it reads.
pub(crate) fn read_block(drive: &mut dyn ZonedDevice, lba: u64) -> Option<Vec<u8>> {
    let g = drive.geometry();
    let c = execute(
        drive,
        Command::Read {
            lba,
            data: vec![0; g.block_size_bytes as usize],
            metadata: vec![0; g.metadata_bytes_per_block as usize],
        },
    );
    c.result.ok().map(|_| c.data)
}

/// Reads the newest valid superblock of a raw drive, if it has one, and the LBA where the
/// next generation goes (zone 0's write pointer).
pub fn read_superblock_at(drive: &mut dyn ZonedDevice) -> Option<(ArraySuperblock, u64)> {
    let written = superblock_zone_written_blocks(drive)?;
    let mut newest: Option<ArraySuperblock> = None;
    for lba in written.saturating_sub(SUPERBLOCK_READ_BACK_BLOCKS)..written {
        let Some(sb) = read_block(drive, lba).and_then(|data| ArraySuperblock::decode(&data).ok()) else {
            continue;
        };
        if newest.is_none_or(|n| sb.generation.get() > n.generation.get()) {
            newest = Some(sb);
        }
    }
    newest.map(|sb| (sb, written))
}

/// Reads the newest valid superblock of a raw drive, if it has one.
pub fn read_superblock(drive: &mut dyn ZonedDevice) -> Option<ArraySuperblock> {
    read_superblock_at(drive).map(|(sb, _)| sb)
}

/// The drives a superblock says have failed.
pub fn failed_drives(sb: &ArraySuperblock) -> Vec<usize> {
    drives_in(sb.failed_drives.get(), sb)
}

/// The drives a superblock says are in distributed spare space (failed too).
pub fn spared_drives(sb: &ArraySuperblock) -> Vec<usize> {
    drives_in(sb.spared_drives.get(), sb)
}

/// The drives of `sb`'s array whose bit is set in `mask`.
fn drives_in(mask: u64, sb: &ArraySuperblock) -> Vec<usize> {
    (0..sb.drive_count.get() as usize).filter(|d| mask >> d & 1 == 1).collect()
}

/// What a drive without a valid array superblock holds.
#[derive(Clone, Debug, Default)]
pub struct Remains {
    /// Blocks written in zone 0, where the superblock generations go.
    pub superblock_zone_blocks: u64,
    /// Of the last of them (`SUPERBLOCK_READ_BACK_BLOCKS`), those that start with a spare
    /// record's magic, and those with an array superblock's.
    pub spare_magic_blocks: u64,
    pub superblock_magic_blocks: u64,
    /// Zones written after the superblock zones.
    pub written_zones: u32,
    /// The first of them whose first block is a valid segment header: (drive zone, header).
    pub segment: Option<(u32, SegmentHeader)>,
}

impl Remains {
    /// Whether the drive looks like a member of an array whose superblock is damaged.
    pub fn looks_like_member(&self) -> bool {
        (self.superblock_zone_blocks > 0 || self.segment.is_some()) && !self.looks_like_damaged_spare()
    }

    /// Whether the drive looks like a hot spare whose record is damaged: zone 0 holds
    /// blocks of a spare record and none of a superblock, and nothing else is written.
    pub fn looks_like_damaged_spare(&self) -> bool {
        self.spare_magic_blocks > 0
            && self.superblock_magic_blocks == 0
            && self.written_zones == 0
            && self.segment.is_none()
    }

    /// Why the drive cannot be assembled, for the user: formatting is advised only for a
    /// drive that holds nothing of an array.
    pub fn describe(&self) -> String {
        if self.looks_like_damaged_spare() {
            return format!(
                "it holds no valid zapraid array superblock, and looks like a hot spare whose spare record is \
                 damaged: zone 0 holds {} block(s), {} of them a spare record's, none valid, and no other zone is \
                 written (it holds no array data)",
                self.superblock_zone_blocks, self.spare_magic_blocks
            );
        }
        if !self.looks_like_member() {
            return match self.written_zones {
                0 => "it holds no zapraid array superblock: it is blank (run zapraid format first)".into(),
                n => format!(
                    "it holds no zapraid array superblock and no zapraid segments, but {n} written zone(s) of \
                     something else (zapraid format would erase them)"
                ),
            };
        }
        let mut found = Vec::new();
        if self.superblock_zone_blocks > 0 {
            found.push(format!(
                "zone 0 holds {} block(s) where the superblock goes, none of them a valid superblock",
                self.superblock_zone_blocks
            ));
        }
        if let Some((zone, h)) = &self.segment {
            found.push(format!(
                "{} zone(s) after it are written; zone {zone} starts with a segment header of drive {} of {} of \
                 array {}",
                self.written_zones,
                h.drive_index.get(),
                h.drive_count.get(),
                uuid_text(&h.array_uuid)
            ));
        }
        format!(
            "it holds no valid zapraid array superblock, yet looks like an array member whose superblock is \
             damaged: {}. Formatting it would erase what it holds",
            found.join("; ")
        )
    }
}

/// Looks at what a drive without a valid array superblock holds: zone reports, and the
/// first block of written zones until one is a segment header.
pub fn examine(drive: &mut dyn ZonedDevice) -> zapraid_zns::Result<Remains> {
    let zones = report_all_zones(drive)?;
    let mut remains = Remains::default();
    for z in &zones {
        let written = z.written_blocks();
        if z.zone < SUPERBLOCK_ZONES {
            remains.superblock_zone_blocks += written;
            for block in written.saturating_sub(SUPERBLOCK_READ_BACK_BLOCKS)..written {
                match read_block(drive, z.start_lba + block).as_deref().and_then(|data| data.get(..8)) {
                    Some(magic) if magic == SPARE_RECORD_MAGIC => remains.spare_magic_blocks += 1,
                    Some(magic) if magic == ARRAY_SUPERBLOCK_MAGIC => remains.superblock_magic_blocks += 1,
                    _ => {}
                }
            }
            continue;
        }
        if written == 0 {
            continue;
        }
        remains.written_zones += 1;
        if remains.segment.is_none() {
            let header = read_block(drive, z.start_lba).and_then(|data| SegmentHeader::decode(&data).ok());
            remains.segment = header.map(|h| (z.zone, h));
        }
    }
    Ok(remains)
}

#[cfg(test)]
mod tests {
    use super::*;
    use zapraid_zns::EmulatedDrive;

    fn superblock(generation: u64) -> ArraySuperblock {
        ArraySuperblock {
            magic: [0; 8],
            version: 0.into(),
            superblock_bytes: 0.into(),
            array_uuid: [3; 16],
            drive_index: 1.into(),
            drive_count: 4.into(),
            data_chunks: 3.into(),
            parity_chunks: 1.into(),
            level: 5,
            mode: 0,
            small_segments: 0,
            large_segments: 0,
            chunk_bytes: 4096.into(),
            group_size: 8.into(),
            block_size_bytes: 4096.into(),
            reserved_zones: SUPERBLOCK_ZONES.into(),
            logical_blocks: 1000.into(),
            stripe_timeout_ns: 1.into(),
            created_unix_s: 1.into(),
            name: [0; 32],
            generation: generation.into(),
            failed_drives: 0.into(),
            large_chunk_bytes: 0.into(),
            rebuilding_drives: 0.into(),
            l2p_budget_bytes: 0.into(),
            shard_count: 0.into(),
            shard_unit_blocks: 0.into(),
            distributed_spares: 0.into(),
            placement_crc32c: 0.into(),
            spared_drives: 0.into(),
            grown_from: [0; 4],
            grown_placement_crc32c: [0.into(); 3],
            crc32c: 0.into(),
        }
        .seal()
    }

    fn write(drive: &mut EmulatedDrive, lba: u64, data: Vec<u8>) {
        let g = drive.geometry();
        let metadata = vec![0; g.metadata_bytes_per_block as usize];
        execute(drive, Command::Write { lba, data, metadata }).result.unwrap();
    }

    fn generation(drive: &mut EmulatedDrive) -> Option<(u64, u64)> {
        read_superblock_at(drive).map(|(sb, next)| (sb.generation.get(), next))
    }

    #[test]
    fn the_newest_generation_with_a_valid_copy_is_read() {
        // One block per command, so every copy is a command of its own.
        let g = Geometry { max_transfer_blocks: 1, ..Geometry::small(4, 64, 60) };
        let mut drive = EmulatedDrive::memory(g, 1).unwrap();
        assert_eq!(generation(&mut drive), None);
        for generation in 0..3 {
            let lba = generation * SUPERBLOCK_COPIES;
            for command in superblock_writes(&superblock(generation), &g, lba) {
                execute(&mut drive, command).result.unwrap();
            }
        }
        assert_eq!(generation(&mut drive), Some((2, 6)));
        // Generation 3's first copy written, its second torn (garbage): the first stands.
        let mut torn = superblock_block(&superblock(3), g.block_size_bytes as usize);
        write(&mut drive, 6, torn.clone());
        torn[ARRAY_UUID_BYTE] ^= 1;
        write(&mut drive, 7, torn.clone());
        assert_eq!(generation(&mut drive), Some((3, 8)));
        // Generation 4 torn in both copies: generation 3 stands.
        let mut torn = superblock_block(&superblock(4), g.block_size_bytes as usize);
        torn[ARRAY_UUID_BYTE] ^= 1;
        write(&mut drive, 8, torn.clone());
        write(&mut drive, 9, torn);
        assert_eq!(generation(&mut drive), Some((3, 10)));
    }

    /// Arrays made before the copies: one block per generation.
    #[test]
    fn one_copy_per_generation_is_still_read() {
        let g = Geometry::small(4, 64, 60);
        let mut drive = EmulatedDrive::memory(g, 1).unwrap();
        for generation in 0..2 {
            write(&mut drive, generation, superblock_block(&superblock(generation), g.block_size_bytes as usize));
        }
        assert_eq!(generation(&mut drive), Some((1, 2)));
        let mut torn = superblock_block(&superblock(2), g.block_size_bytes as usize);
        torn[ARRAY_UUID_BYTE] ^= 1;
        write(&mut drive, 2, torn);
        assert_eq!(generation(&mut drive), Some((1, 3)));
    }

    /// A byte of the array UUID, covered by the superblock's CRC.
    const ARRAY_UUID_BYTE: usize = 20;
}
