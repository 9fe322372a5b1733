//! Where an emulated drive file keeps its blocks, to damage or copy them behind the
//! drive's back: at the offsets `zns/src/drive_file.rs` gives them (the data area holds
//! block `zone x capacity + offset`).
#![allow(dead_code)] // not every test binary uses every helper

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use zapraid_zns::drive_file::{FileLayout, Superblock, ZoneRecord, SUPERBLOCK_REGION_BYTES, ZONE_RECORD_BYTES};
use zapraid_zns::Geometry;

/// A byte of a zone record's write pointer (`drive_file::ZoneRecord`).
const ZONE_RECORD_WRITTEN_BYTE: u64 = 8;

/// Where a drive file keeps its blocks.
pub struct DriveFile {
    pub path: PathBuf,
    pub geometry: Geometry,
    pub layout: FileLayout,
}

impl DriveFile {
    pub fn open(path: &Path) -> Self {
        let file = std::fs::File::open(path).unwrap();
        let mut region = vec![0u8; SUPERBLOCK_REGION_BYTES as usize];
        file.read_exact_at(&mut region, 0).unwrap();
        let (sb, _) = Superblock::decode_region(&region).unwrap();
        let geometry = sb.geometry();
        DriveFile { path: path.to_path_buf(), geometry, layout: FileLayout::new(&geometry).unwrap() }
    }

    pub fn index(&self, zone: u32, block: u64) -> u64 {
        u64::from(zone) * self.geometry.zone_capacity_blocks + block
    }

    pub fn data_offset(&self, zone: u32, block: u64) -> u64 {
        self.layout.data_offset + self.index(zone, block) * u64::from(self.geometry.block_size_bytes)
    }

    pub fn metadata_offset(&self, zone: u32, block: u64) -> u64 {
        self.layout.metadata_offset + self.index(zone, block) * u64::from(self.geometry.metadata_bytes_per_block)
    }

    pub fn written_blocks(&self, zone: u32) -> u64 {
        let file = std::fs::File::open(&self.path).unwrap();
        let mut record = [0u8; ZONE_RECORD_BYTES];
        file.read_exact_at(&mut record, self.layout.zone_table_offset + u64::from(zone) * ZONE_RECORD_BYTES as u64)
            .unwrap();
        ZoneRecord::decode(&record, self.geometry.zone_capacity_blocks).unwrap().1
    }

    /// Flips one bit of a block's data, behind the drive's back.
    pub fn damage(&self, zone: u32, block: u64, byte: u64) {
        let file = OpenOptions::new().read(true).write(true).open(&self.path).unwrap();
        let offset = self.data_offset(zone, block) + byte;
        let mut b = [0u8];
        file.read_exact_at(&mut b, offset).unwrap();
        b[0] ^= 1;
        file.write_all_at(&b, offset).unwrap();
    }

    /// Flips a bit of zone `zone`'s record (its write pointer) in both copies of the zone
    /// table.
    pub fn damage_zone_record(&self, zone: u32) {
        let file = OpenOptions::new().read(true).write(true).open(&self.path).unwrap();
        for table in [self.layout.zone_table_offset, self.layout.zone_table_copy_offset] {
            let offset = table + u64::from(zone) * ZONE_RECORD_BYTES as u64 + ZONE_RECORD_WRITTEN_BYTE;
            let mut b = [0u8];
            file.read_exact_at(&mut b, offset).unwrap();
            b[0] ^= 1;
            file.write_all_at(&b, offset).unwrap();
        }
    }

    /// Puts `from`'s block (data and metadata) in place of this drive's.
    pub fn copy_block_from(&self, from: &DriveFile, zone: u32, block: u64) {
        let (bs, ms) = (self.geometry.block_size_bytes as usize, self.geometry.metadata_bytes_per_block as usize);
        let source = std::fs::File::open(&from.path).unwrap();
        let (mut data, mut metadata) = (vec![0u8; bs], vec![0u8; ms]);
        source.read_exact_at(&mut data, from.data_offset(zone, block)).unwrap();
        source.read_exact_at(&mut metadata, from.metadata_offset(zone, block)).unwrap();
        let target = OpenOptions::new().write(true).open(&self.path).unwrap();
        target.write_all_at(&data, self.data_offset(zone, block)).unwrap();
        target.write_all_at(&metadata, self.metadata_offset(zone, block)).unwrap();
    }
}
