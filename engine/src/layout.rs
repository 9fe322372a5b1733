//! Where everything of a segment lives. A segment is one zone on each of the k + m drives:
//! a header region (one chunk), a data region of S stripes in stripe groups of G stripes,
//! and a footer region (a footer entry for every data-region block). Sizes derive from
//! the drive's zone capacity, block size and the chunk size; nothing here is a constant of
//! the hardware.
//!
//! Chunk `c` of stripe `s` (data chunks first, then parity) sits on drive
//! `(c + rotation(s)) % n`: parity rotates for RAID-5/6 and general k+m, and stays on the
//! last drives for RAID-4 and the mirrored levels.
//!
//! The RAID levels live here too, each with the parity code it takes
//! (`ParityCodec::for_level`; the codes themselves are `parity`'s).

use zapraid_zns::Geometry;

use crate::error::{Error, Result};
use crate::format::{footer_entries_per_block, BLOCK_METADATA_BYTES, MAX_DRIVES};
use crate::parity::{ParityCodec, MAX_DATA_CHUNKS, MAX_PARITY_CHUNKS};

/// RAID schemes of the paper's Exp#4 and general k+m.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaidLevel {
    /// Striping, no redundancy.
    Raid0 { drives: usize },
    /// Every drive holds a copy.
    Raid1 { drives: usize },
    /// Striping over mirrored halves: chunk i of the second half copies chunk i.
    Raid01 { drives: usize },
    /// One XOR parity drive, fixed.
    Raid4 { drives: usize },
    /// One XOR parity chunk per stripe, rotating.
    Raid5 { drives: usize },
    /// Two Reed-Solomon parity chunks per stripe, rotating.
    Raid6 { drives: usize },
    /// k data and m Reed-Solomon parity chunks, rotating.
    Erasure { k: usize, m: usize },
}

impl RaidLevel {
    /// (k, m): data and redundancy chunks per stripe.
    pub fn shape(self) -> (usize, usize) {
        match self {
            RaidLevel::Raid0 { drives } => (drives, 0),
            RaidLevel::Raid1 { drives } => (1, drives.saturating_sub(1)),
            RaidLevel::Raid01 { drives } => (drives / 2, drives / 2),
            RaidLevel::Raid4 { drives } | RaidLevel::Raid5 { drives } => (drives.saturating_sub(1), 1),
            RaidLevel::Raid6 { drives } => (drives.saturating_sub(2), 2),
            RaidLevel::Erasure { k, m } => (k, m),
        }
    }

    /// Drive failures survived whichever drives fail: m, except RAID-01, which loses data
    /// when both copies of a chunk go.
    pub fn tolerated_failures(self) -> usize {
        match self {
            RaidLevel::Raid01 { .. } => 1,
            _ => self.shape().1,
        }
    }

    /// Whether parity stays on fixed drives instead of rotating.
    pub fn fixed_parity(self) -> bool {
        matches!(
            self,
            RaidLevel::Raid4 { .. } | RaidLevel::Raid1 { .. } | RaidLevel::Raid01 { .. } | RaidLevel::Raid0 { .. }
        )
    }

    /// The code of the level, stored in segment headers.
    pub fn code(self) -> u8 {
        match self {
            RaidLevel::Raid0 { .. } => 0,
            RaidLevel::Raid1 { .. } => 1,
            RaidLevel::Raid01 { .. } => 10,
            RaidLevel::Raid4 { .. } => 4,
            RaidLevel::Raid5 { .. } => 5,
            RaidLevel::Raid6 { .. } => 6,
            RaidLevel::Erasure { .. } => 100,
        }
    }

    /// The level a `code` names, for an array of `drives` drives of which `parity` hold
    /// parity (the inverse of `code` with the shape).
    pub fn from_code(code: u8, drives: usize, parity: usize) -> Option<Self> {
        Some(match code {
            0 => RaidLevel::Raid0 { drives },
            1 => RaidLevel::Raid1 { drives },
            10 => RaidLevel::Raid01 { drives },
            4 => RaidLevel::Raid4 { drives },
            5 => RaidLevel::Raid5 { drives },
            6 => RaidLevel::Raid6 { drives },
            100 => RaidLevel::Erasure { k: drives.checked_sub(parity)?, m: parity },
            _ => return None,
        })
    }

    /// The level's usual name without its shape ("RAID-5"), for messages about the
    /// level itself.
    pub fn label(self) -> &'static str {
        match self {
            RaidLevel::Raid0 { .. } => "RAID-0",
            RaidLevel::Raid1 { .. } => "RAID-1",
            RaidLevel::Raid01 { .. } => "RAID-01",
            RaidLevel::Raid4 { .. } => "RAID-4",
            RaidLevel::Raid5 { .. } => "RAID-5",
            RaidLevel::Raid6 { .. } => "RAID-6",
            RaidLevel::Erasure { .. } => "Reed-Solomon",
        }
    }

    /// The level's name in machine-read output (status JSON); the command line's
    /// `--level` names where it has one.
    pub fn name(self) -> &'static str {
        match self {
            RaidLevel::Raid0 { .. } => "raid0",
            RaidLevel::Raid1 { .. } => "raid1",
            RaidLevel::Raid01 { .. } => "raid01",
            RaidLevel::Raid4 { .. } => "raid4",
            RaidLevel::Raid5 { .. } => "raid5",
            RaidLevel::Raid6 { .. } => "raid6",
            RaidLevel::Erasure { .. } => "erasure",
        }
    }

    /// The level `name` names (the inverse of `name`) with `data` data and `parity`
    /// redundancy drives; `None` for an unknown name or a shape the level cannot have.
    pub fn from_name(name: &str, data: usize, parity: usize) -> Option<Self> {
        let drives = data.checked_add(parity)?;
        let level = match name {
            "raid0" => RaidLevel::Raid0 { drives },
            "raid1" => RaidLevel::Raid1 { drives },
            "raid01" => RaidLevel::Raid01 { drives },
            "raid4" => RaidLevel::Raid4 { drives },
            "raid5" => RaidLevel::Raid5 { drives },
            "raid6" => RaidLevel::Raid6 { drives },
            "erasure" => RaidLevel::Erasure { k: data, m: parity },
            _ => return None,
        };
        (level.shape() == (data, parity)).then_some(level)
    }

    /// The most drives the level takes: what the array format holds (`MAX_DRIVES`) and
    /// its code encodes (`MAX_DATA_CHUNKS` data and `MAX_PARITY_CHUNKS` redundancy chunks
    /// per stripe).
    pub fn max_drives(self) -> usize {
        let most = match self {
            RaidLevel::Raid0 { .. } => MAX_DATA_CHUNKS,
            RaidLevel::Raid1 { .. } => 1 + MAX_PARITY_CHUNKS,
            RaidLevel::Raid01 { .. } => 2 * MAX_PARITY_CHUNKS,
            RaidLevel::Raid4 { .. } | RaidLevel::Raid5 { .. } => MAX_DATA_CHUNKS + 1,
            RaidLevel::Raid6 { .. } => MAX_DATA_CHUNKS + 2,
            RaidLevel::Erasure { .. } => MAX_DRIVES,
        };
        most.min(MAX_DRIVES)
    }

    /// Whether an array of this level can be made: enough drives for it, not more than it
    /// takes. The reason is said in drives, as the level is given.
    pub fn validate(self) -> Result<()> {
        let bad = |reason: String| Err(Error::InvalidConfig { reason });
        match self {
            RaidLevel::Raid01 { drives } if drives < 2 || !drives.is_multiple_of(2) => {
                return bad(format!("RAID-01 needs an even number of drives, at least 2 ({drives} given)"))
            }
            RaidLevel::Raid0 { drives } if drives < 1 => return bad("RAID-0 needs at least 1 drive".into()),
            RaidLevel::Raid1 { drives } if drives < 2 => {
                return bad(format!("RAID-1 needs at least 2 drives ({drives} given)"))
            }
            RaidLevel::Raid4 { drives } | RaidLevel::Raid5 { drives } if drives < 3 => {
                return bad(format!("{} needs at least 3 drives ({drives} given)", self.label()))
            }
            RaidLevel::Raid6 { drives } if drives < 4 => {
                return bad(format!("RAID-6 needs at least 4 drives ({drives} given)"))
            }
            RaidLevel::Erasure { k, m }
                if k == 0 || k > MAX_DATA_CHUNKS || m > MAX_PARITY_CHUNKS || k + m > MAX_DRIVES =>
            {
                return bad(format!(
                    "{k}+{m}: a stripe takes 1 to {MAX_DATA_CHUNKS} data chunks and at most {MAX_PARITY_CHUNKS} \
                     parity chunks, on at most {MAX_DRIVES} drives"
                ))
            }
            _ => {}
        }
        let (k, m) = self.shape();
        if k + m > self.max_drives() {
            return bad(format!("{} takes at most {} drives ({} given)", self.label(), self.max_drives(), k + m));
        }
        Ok(())
    }
}

impl ParityCodec {
    /// The code of a RAID level.
    pub fn for_level(level: RaidLevel) -> Result<Self> {
        let (k, m) = level.shape();
        match level {
            RaidLevel::Raid01 { .. } => Self::pairwise_mirror(k),
            _ => Self::new(k, m),
        }
    }
}

/// How stripes are written, for the paper's comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Stripe groups of G stripes written with Zone Append (the paper's design).
    ZapRaid { group_size: u32 },
    /// Every stripe at a fixed offset with Zone Write (G = 1).
    ZoneWriteOnly,
    /// All of a segment's stripes in one group written with Zone Append (G = S).
    ZoneAppendOnly,
}

impl Mode {
    /// The mode's name in machine-read output (status JSON): the command line's `--mode`
    /// names.
    pub fn name(self) -> &'static str {
        match self {
            Mode::ZapRaid { .. } => "zapraid",
            Mode::ZoneWriteOnly => "zone-write",
            Mode::ZoneAppendOnly => "zone-append",
        }
    }

    /// The stripe group size chosen at format, for the one mode that takes one (the
    /// others imply theirs: 1, or a whole segment).
    pub fn group_size(self) -> Option<u32> {
        match self {
            Mode::ZapRaid { group_size } => Some(group_size),
            Mode::ZoneWriteOnly | Mode::ZoneAppendOnly => None,
        }
    }

    /// The mode `name` names (the inverse of `name` and `group_size`).
    pub fn from_name(name: &str, group_size: Option<u32>) -> Option<Self> {
        match (name, group_size) {
            ("zapraid", Some(group_size)) => Some(Mode::ZapRaid { group_size }),
            ("zone-write", _) => Some(Mode::ZoneWriteOnly),
            ("zone-append", _) => Some(Mode::ZoneAppendOnly),
            _ => None,
        }
    }

    /// The code of the mode and the group size stored with it in the array superblock.
    pub fn code(self) -> (u8, u32) {
        match self {
            Mode::ZapRaid { group_size } => (0, group_size),
            Mode::ZoneWriteOnly => (1, 1),
            Mode::ZoneAppendOnly => (2, 1),
        }
    }

    /// The mode a superblock's code and group size name (the inverse of `code`).
    pub fn from_code(code: u8, group_size: u32) -> Option<Self> {
        match code {
            0 => Some(Mode::ZapRaid { group_size }),
            1 => Some(Mode::ZoneWriteOnly),
            2 => Some(Mode::ZoneAppendOnly),
            _ => None,
        }
    }
}

/// The level and its shape as people write them: "RAID-5 (3+1)", "RAID-1 (3 copies)".
impl std::fmt::Display for RaidLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (k, m) = self.shape();
        let text = match self {
            RaidLevel::Raid0 { drives } => format!("RAID-0 ({drives})"),
            RaidLevel::Raid1 { drives } => format!("RAID-1 ({drives} copies)"),
            _ => format!("{} ({k}+{m})", self.label()),
        };
        // pad, not write: table columns set widths.
        f.pad(&text)
    }
}

/// The mode as the paper names it: "ZapRAID G=256", "ZoneWrite-Only", "ZoneAppend-Only".
impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::ZapRaid { group_size } => f.pad(&format!("ZapRAID G={group_size}")),
            Mode::ZoneWriteOnly => f.pad("ZoneWrite-Only"),
            Mode::ZoneAppendOnly => f.pad("ZoneAppend-Only"),
        }
    }
}

/// Default stripe group size (the paper's choice).
pub const DEFAULT_GROUP_SIZE: u32 = 256;

/// The shape of every segment of an array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub level: RaidLevel,
    pub mode: Mode,
    pub data_chunks: usize,
    pub parity_chunks: usize,
    pub block_size_bytes: u32,
    pub chunk_blocks: u64,
    /// Stripes per stripe group (G); 1 for Zone Write segments.
    pub group_size: u64,
    /// Stripes per segment (S).
    pub stripes: u64,
    pub header_blocks: u64,
    pub footer_blocks: u64,
    pub zone_capacity_blocks: u64,
}

impl Layout {
    /// Derives the layout for drives of `geometry`.
    pub fn new(geometry: &Geometry, level: RaidLevel, mode: Mode, chunk_bytes: u64) -> Result<Self> {
        level.validate()?;
        let (k, m) = level.shape();
        let bad = |reason: String| Err(Error::InvalidConfig { reason });
        let block = u64::from(geometry.block_size_bytes);
        if chunk_bytes == 0 || !chunk_bytes.is_multiple_of(block) {
            return bad(format!("chunk size {chunk_bytes} B is not a whole number of {block} B blocks"));
        }
        if (geometry.metadata_bytes_per_block as usize) < BLOCK_METADATA_BYTES {
            return bad(format!(
                "the drives carry {} B of metadata per block; zapraid needs at least {BLOCK_METADATA_BYTES} \
                 (reformat them with an LBA format that has 64 B of separate metadata, e.g. \
                 `nvme format /dev/nvmeXnY --lbaf=N` with N a format whose ms is 64)",
                geometry.metadata_bytes_per_block
            ));
        }
        let chunk_blocks = chunk_bytes / block;
        // Groups of one stripe are written with Zone Write at fixed offsets, whatever the
        // mode is called; only real groups need Zone Append.
        let uses_append = !matches!(mode, Mode::ZoneWriteOnly | Mode::ZapRaid { group_size: 1 });
        let limit = if uses_append { geometry.zone_append_max_blocks } else { geometry.max_transfer_blocks };
        if chunk_blocks > u64::from(limit) {
            return bad(format!(
                "chunk of {chunk_blocks} blocks exceeds the drive's {} limit of {limit} blocks",
                if uses_append { "Zone Append" } else { "transfer" }
            ));
        }
        if !geometry.transfer_takes(chunk_blocks) {
            let granule = geometry.transfer_granule_blocks;
            return bad(format!(
                "chunk of {chunk_blocks} blocks: the drives take commands of more than {granule} blocks only in \
                 whole multiples of {granule} (choose a chunk of at most {granule} blocks or a multiple of it)"
            ));
        }
        let cap = geometry.zone_capacity_blocks;
        let header_blocks = chunk_blocks;
        let entries_per_block = footer_entries_per_block(geometry.block_size_bytes) as u64;
        let footer_for = |stripes: u64| (stripes * chunk_blocks).div_ceil(entries_per_block);
        // Largest S with header + S chunks + footer within the capacity.
        let room = cap.saturating_sub(header_blocks);
        let mut stripes = room * entries_per_block / (chunk_blocks * (entries_per_block + 1));
        while stripes > 0 && header_blocks + stripes * chunk_blocks + footer_for(stripes) > cap {
            stripes -= 1;
        }
        while header_blocks + (stripes + 1) * chunk_blocks + footer_for(stripes + 1) <= cap {
            stripes += 1;
        }
        if stripes == 0 {
            return bad(format!("a zone of {cap} blocks cannot hold a header, a stripe and a footer"));
        }
        let group_size = match mode {
            Mode::ZapRaid { group_size: 0 } => return bad("stripe group size must be at least 1".into()),
            Mode::ZapRaid { group_size } => u64::from(group_size).min(stripes),
            Mode::ZoneWriteOnly => 1,
            Mode::ZoneAppendOnly => stripes,
        };
        Ok(Layout {
            level,
            mode,
            data_chunks: k,
            parity_chunks: m,
            block_size_bytes: geometry.block_size_bytes,
            chunk_blocks,
            group_size,
            stripes,
            header_blocks,
            footer_blocks: footer_for(stripes),
            zone_capacity_blocks: cap,
        })
    }

    pub fn drives(&self) -> usize {
        self.data_chunks + self.parity_chunks
    }

    /// Whether stripes are written with Zone Append.
    pub fn uses_append(&self) -> bool {
        self.group_size > 1
    }

    /// Zone-relative first block of the data region.
    pub fn data_start_blocks(&self) -> u64 {
        self.header_blocks
    }

    /// Zone-relative first block of the footer region.
    pub fn footer_start_blocks(&self) -> u64 {
        self.header_blocks + self.stripes * self.chunk_blocks
    }

    /// Number of stripe groups per segment (the last may be short).
    pub fn groups(&self) -> u64 {
        self.stripes.div_ceil(self.group_size)
    }

    /// Stripes of group `group`.
    pub fn group_stripes(&self, group: u64) -> u64 {
        debug_assert!(group < self.groups());
        (self.stripes - group * self.group_size).min(self.group_size)
    }

    /// Zone-relative first block of group `group`'s region on every drive.
    pub fn group_start_blocks(&self, group: u64) -> u64 {
        self.data_start_blocks() + group * self.group_size * self.chunk_blocks
    }

    fn rotation(&self, stripe: u64) -> usize {
        if self.level.fixed_parity() {
            0
        } else {
            (stripe % self.drives() as u64) as usize
        }
    }

    /// Drive holding chunk `chunk` (data chunks 0..k, then parity) of stripe `stripe`.
    pub fn drive_of(&self, stripe: u64, chunk: usize) -> usize {
        debug_assert!(chunk < self.drives());
        (chunk + self.rotation(stripe)) % self.drives()
    }

    /// Which chunk of stripe `stripe` drive `drive` holds.
    pub fn chunk_on(&self, stripe: u64, drive: usize) -> usize {
        debug_assert!(drive < self.drives());
        (drive + self.drives() - self.rotation(stripe)) % self.drives()
    }

    /// User data blocks per segment.
    pub fn data_blocks_per_segment(&self) -> u64 {
        self.stripes * self.chunk_blocks * self.data_chunks as u64
    }

    /// Bits of a stripe ID within a group (ceil(log2 G)); 0 when G = 1.
    pub fn stripe_id_bits(&self) -> u32 {
        if self.group_size <= 1 {
            0
        } else {
            64 - (self.group_size - 1).leading_zeros()
        }
    }
}

#[cfg(test)]
mod tests;
