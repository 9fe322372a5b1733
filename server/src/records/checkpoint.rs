//! Where an array keeps its checkpoint (`zapraid_engine::format::checkpoint`): the zones
//! right after the superblock zone, set aside at format for an array with an L2P memory
//! budget. Two copies of `zones_per_copy` zones each, used in turn by generation (even
//! generations in the first, odd in the second), on every drive (mirrored: any drive's
//! readable copy serves).
//!
//! A copy is written whole after a clean stop or while running (its zones reset, then its
//! blocks from the first one on, the last zone finished); not after a clean stop that
//! changed nothing since the newest checkpoint on the drives (`CheckpointMark`), which
//! still describes them. It is read at start: the valid
//! copy with the highest generation on any drive, made whole from the other copy when it
//! is incremental (its base, the full image there), is offered to recovery, which uses it only if it
//! matches the drives (every segment it names still there, every other one written after
//! it). A start that uses it keeps it, so a crash of the engine it starts begins from it
//! again; a start that refuses it empties both copies. A torn or damaged copy fails its
//! CRC and is passed over; the other copy is older, used if it still matches the drives
//! and refused as stale otherwise, so the worst a lost checkpoint costs is a full replay.
//!
//! An array of S engine shards keeps S such areas, one per shard, one after the other
//! (shard 0's first): each shard checkpoints its own engine.
//!
//! Invariants: an array's reserved zones are 1 (no checkpoint) or 1 + S * 2 * zones_per_copy;
//! a copy's image fits its zones (checked at format with the largest image the array can
//! have, and again before each write).

use zapraid_engine::format::{checkpoint_image_bytes, mapping_entries_per_block, CheckpointImage};
use zapraid_engine::stripe_table::CompactStripeTable;
use zapraid_engine::SegmentPlan;
use zapraid_zns::{execute, Command, Done, Geometry, ReservedZones, ZoneAction, ZoneTarget, ZonedDevice};

use super::layout::SUPERBLOCK_ZONES;
use crate::drives::Drive;

/// Where the checkpoint copies are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointArea {
    /// The first zone of its first copy (raw numbering): right after the superblock zone
    /// for an array of one shard; shard s's after the areas of shards 0..s.
    pub first_zone: u32,
    pub zones_per_copy: u32,
}

/// The area, and the generation the next checkpoint gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointPlace {
    pub area: CheckpointArea,
    pub next_generation: u64,
    /// The superblock generation of the last full image this engine wrote, that the
    /// engine's incremental ones build on (None before one): once the superblock moves on,
    /// the engine is told to write a full one (`Engine::forget_checkpoint_base`).
    pub base_superblock_generation: Option<u64>,
    /// While the newest checkpoint on the drives still describes them (the one the start
    /// began from with nothing replayed, or the last one written to every working drive):
    /// what it describes. A clean stop with nothing changed since leaves it, instead of
    /// writing the same image again as a new generation.
    pub on_drives: Option<CheckpointMark>,
}

/// What the newest checkpoint on the drives describes: the array at this superblock
/// generation, after this many of the engine thread's drive-changing commands
/// (`changes_drive`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointMark {
    pub superblock_generation: u64,
    pub engine_writes: u64,
}

/// Whether an engine's command changes what a drive's zones hold (a checkpoint taken
/// before it may no longer describe them): a write, an append or a reset. Finishing,
/// opening or closing a zone leaves its blocks as they are (every start finishes the
/// zones of the segments the last stop closed with a stop footer).
pub fn changes_drive(command: &Command) -> bool {
    match command {
        Command::Write { .. } | Command::Append { .. } => true,
        Command::ManageZone { action, .. } => *action == ZoneAction::Reset,
        Command::Read { .. } | Command::ReportZones { .. } => false,
    }
}

impl CheckpointPlace {
    /// After a start that used the checkpoint of `generation`, built on `base` when it was
    /// incremental: the next generation lands in the copy that keeps what a crash during
    /// its write would still need (the full image the start used or built on), past every
    /// generation on the drives.
    pub fn keep_after_start(&mut self, generation: u64, base: Option<u64>) {
        let keep = base.unwrap_or(generation);
        if self.next_generation % 2 == keep % 2 {
            self.next_generation += 1;
        }
    }

    /// Whether the newest checkpoint on the drives still describes the array at
    /// `superblock_generation` after `engine_writes` drive-changing commands.
    pub fn is_current(&self, superblock_generation: u64, engine_writes: u64) -> bool {
        self.on_drives == Some(CheckpointMark { superblock_generation, engine_writes })
    }
}

impl CheckpointArea {
    /// The area of an array with `reserved_zones` (None: it keeps no checkpoint).
    /// Shard `shard`'s area of an array of `shards` shards with `reserved_zones` reserved
    /// zones (its superblock zone and every shard's two copies, shard by shard), if the
    /// array keeps checkpoints.
    pub fn of(reserved_zones: u32, shards: u32, shard: u32) -> Option<Self> {
        debug_assert!(shard < shards.max(1));
        let extra = reserved_zones.checked_sub(SUPERBLOCK_ZONES)?;
        let per_shard = 2 * shards.max(1);
        (extra >= per_shard && extra % per_shard == 0).then(|| {
            let zones_per_copy = extra / per_shard;
            CheckpointArea { first_zone: SUPERBLOCK_ZONES + shard * 2 * zones_per_copy, zones_per_copy }
        })
    }

    /// Zones per copy a shard needs for its largest checkpoint: every zone it owns a
    /// segment (`segments`), each with the largest stripe table its layouts have, and a
    /// directory entry per page of its `logical_blocks`. The area of shard 0.
    pub fn for_shard(raw: &Geometry, plan: &SegmentPlan, segments: u32, logical_blocks: u64) -> Self {
        let segments = segments as usize;
        let table_bytes = plan.layouts().iter().map(CompactStripeTable::encoded_bytes).max().unwrap_or(0) as u64;
        let per_page = mapping_entries_per_block(raw.block_size_bytes).max(1) as u64;
        let pages = logical_blocks.div_ceil(per_page) as usize;
        let bytes = checkpoint_image_bytes(segments, pages, segments as u64 * table_bytes);
        let zone_bytes = raw.zone_capacity_blocks * u64::from(raw.block_size_bytes);
        CheckpointArea { first_zone: SUPERBLOCK_ZONES, zones_per_copy: bytes.div_ceil(zone_bytes).max(1) as u32 }
    }

    /// Which copy a drive zone (raw numbering) belongs to, and whether it is the copy's
    /// first zone (where its header is); None outside the area.
    pub fn copy_of_zone(&self, zone: u32) -> Option<(u32, bool)> {
        let index = zone.checked_sub(self.first_zone)?;
        (index < 2 * self.zones_per_copy).then(|| (index / self.zones_per_copy, index % self.zones_per_copy == 0))
    }

    /// The zones before the first segment zone of an array of `shards` shards, each with
    /// an area the size of this one.
    pub fn reserved_zones(&self, shards: u32) -> u32 {
        SUPERBLOCK_ZONES + shards.max(1) * 2 * self.zones_per_copy
    }

    /// The area's zones (raw numbering).
    pub fn zones(&self) -> std::ops::Range<u32> {
        self.first_zone..self.first_zone + 2 * self.zones_per_copy
    }

    fn first_zone(&self, generation: u64) -> u32 {
        self.first_zone + (generation % 2) as u32 * self.zones_per_copy
    }

    fn capacity_blocks(&self, raw: &Geometry) -> u64 {
        u64::from(self.zones_per_copy) * raw.zone_capacity_blocks
    }

    /// The raw LBA of block `index` of the copy starting at zone `first_zone`.
    fn lba(&self, raw: &Geometry, first_zone: u32, index: u64) -> u64 {
        let zone = first_zone + (index / raw.zone_capacity_blocks) as u32;
        raw.zone_start_lba(zone) + index % raw.zone_capacity_blocks
    }
}

/// A drive as the checkpoint reads and writes it: its zones numbered as the area's
/// `first_zone` is (a whole drive, or the part of it a shard owns its area in).
pub trait CheckpointDrive {
    fn raw_zones(&mut self) -> &mut dyn ZonedDevice;
}

/// The engine's view of a drive, whose reserved zones hold the area.
impl CheckpointDrive for ReservedZones<Drive> {
    fn raw_zones(&mut self) -> &mut dyn ZonedDevice {
        self.inner_mut().as_mut()
    }
}

/// A drive (or a part of one) numbered as the area is.
impl CheckpointDrive for Drive {
    fn raw_zones(&mut self) -> &mut dyn ZonedDevice {
        self.as_mut()
    }
}

/// What `read_newest` found.
pub struct Found {
    pub newest: Option<CheckpointImage>,
    /// The highest generation seen (the next one goes past it).
    pub highest_generation: u64,
    pub blocks_read: u64,
}

/// The newest checkpoint any drive not in `skip` holds for array `uuid`, whole: an
/// incremental one is resolved from its base, the full image in the other copy. Reads the
/// first block of each copy on every drive, then, per copy, the whole image of the drive
/// whose header has the highest generation, passing over to the next when it does not
/// decode (a torn or damaged copy, or one a failed write left older on one drive). When the
/// newest cannot be resolved (its base torn or overwritten), the other copy is offered if
/// it is whole by itself: older, and judged by recovery as any checkpoint is.
pub fn read_newest<D: CheckpointDrive>(
    drives: &mut [D],
    skip: &[usize],
    area: CheckpointArea,
    uuid: [u8; 16],
) -> Found {
    let mut blocks_read = 0;
    let mut candidates: [Vec<Candidate>; 2] = [Vec::new(), Vec::new()];
    for (copy, found) in candidates.iter_mut().enumerate() {
        for (index, drive) in drives.iter_mut().enumerate() {
            if skip.contains(&index) {
                continue;
            }
            let inner = drive.raw_zones();
            let first = read_blocks(inner, area, copy as u64, 0, 1, &mut blocks_read);
            match first.and_then(|block| CheckpointImage::header(&block).map(|h| (h, block)).map_err(|e| e.to_string()))
            {
                Ok((header, block)) if header.array_uuid == uuid => {
                    found.push(Candidate { generation: header.generation.get(), drive: index, first_block: block })
                }
                Ok(_) => tracing::warn!(drive = index, copy, "a checkpoint of another array: passed over"),
                Err(reason) => tracing::debug!(drive = index, copy, "no checkpoint read: {reason}"),
            }
        }
        found.sort_by_key(|c| std::cmp::Reverse(c.generation)); // stable: lower drives first
    }
    let [first, second] =
        [0, 1].map(|copy| newest_of_copy(drives, area, copy, &candidates[copy], None, &mut blocks_read));
    let highest = first.iter().chain(&second).map(|image| image.generation).max().unwrap_or(0);
    let (newest, mut other) = match (first, second) {
        (Some(a), Some(b)) if a.generation < b.generation => (Some(b), Some(a)),
        (Some(a), b) => (Some(a), b),
        (None, b) => (b, None),
    };
    // The other copy's newest that decodes is not the base: the base may still be on a
    // drive whose header said so and that was not read (a drive holding a newer image
    // there came first).
    if let Some(base) = newest.as_ref().and_then(|n| n.base_generation) {
        let untried = other.as_ref().is_some_and(|o| o.generation > base);
        if untried {
            let copy = (base % 2) as usize;
            if let Some(image) = newest_of_copy(drives, area, copy, &candidates[copy], Some(base), &mut blocks_read) {
                other = Some(image);
            }
        }
    }
    let newest = newest.and_then(|image| {
        let generation = image.generation;
        match image.resolve(other.as_ref()) {
            Ok(whole) => Some(whole),
            Err(e) => {
                tracing::warn!(generation, "the newest checkpoint is incremental and its base is not whole ({e})");
                other.and_then(|o| o.resolve(None).ok())
            }
        }
    });
    Found { newest, highest_generation: highest, blocks_read }
}

/// A drive whose copy's first block holds a checkpoint header of the array.
struct Candidate {
    generation: u64,
    drive: usize,
    first_block: Vec<u8>,
}

/// The first image of `candidates` (newest first) that reads whole and decodes, of
/// generation `generation` if given.
fn newest_of_copy<D: CheckpointDrive>(
    drives: &mut [D],
    area: CheckpointArea,
    copy: usize,
    candidates: &[Candidate],
    generation: Option<u64>,
    blocks_read: &mut u64,
) -> Option<CheckpointImage> {
    for c in candidates.iter().filter(|c| generation.is_none_or(|g| g == c.generation)) {
        let drive = drives[c.drive].raw_zones();
        match read_image(drive, area, copy as u64, c.first_block.clone(), blocks_read) {
            Ok(image) => return Some(image),
            Err(reason) => tracing::warn!(
                drive = c.drive,
                copy,
                generation = c.generation,
                "checkpoint copy passed over: {reason}"
            ),
        }
    }
    None
}

/// Blocks of a copy from block `index` on that one command moves: within one zone and
/// one transfer, and not past `blocks`.
fn transfer_blocks(raw: &Geometry, index: u64, blocks: u64) -> u64 {
    let left_in_zone = raw.zone_capacity_blocks - index % raw.zone_capacity_blocks;
    raw.transfer_blocks_at_most((blocks - index).min(left_in_zone))
}

/// `blocks` blocks of a copy from block `index` on, in one command.
fn read_blocks(
    drive: &mut dyn ZonedDevice,
    area: CheckpointArea,
    copy: u64,
    index: u64,
    blocks: u64,
    blocks_read: &mut u64,
) -> Result<Vec<u8>, String> {
    let raw = drive.geometry();
    let (bs, ms) = (raw.block_size_bytes as usize, raw.metadata_bytes_per_block as usize);
    *blocks_read += blocks;
    let lba = area.lba(&raw, area.first_zone(copy), index);
    let command = Command::Read { lba, data: vec![0; blocks as usize * bs], metadata: vec![0; blocks as usize * ms] };
    let completion = execute(drive, command);
    match completion.result {
        Ok(Done::Read) => Ok(completion.data),
        Ok(other) => Err(format!("unexpected answer {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

/// The image of a copy whose first block is `first_block`: the rest read, then decoded.
fn read_image(
    drive: &mut dyn ZonedDevice,
    area: CheckpointArea,
    copy: u64,
    first_block: Vec<u8>,
    blocks_read: &mut u64,
) -> Result<CheckpointImage, String> {
    let raw = drive.geometry();
    let bs = u64::from(raw.block_size_bytes);
    let image_bytes = CheckpointImage::image_bytes(&first_block).map_err(|e| e.to_string())?;
    let blocks = image_bytes.div_ceil(bs);
    if blocks > area.capacity_blocks(&raw) {
        return Err(format!("{image_bytes} bytes recorded, more than the copy's zones hold"));
    }
    let mut image = first_block;
    let mut index = 1;
    while index < blocks {
        let count = transfer_blocks(&raw, index, blocks);
        image.extend(read_blocks(drive, area, copy, index, count, blocks_read)?);
        index += count;
    }
    CheckpointImage::decode(&image).map_err(|e| e.to_string())
}

/// Empties both copies on every drive not in `skip`: a start does this once recovery has
/// refused the checkpoint (stale for good: a newer superblock, a segment it names reset),
/// so that later starts need not read it. A start that used it keeps it, for a crash of
/// the engine it starts. A drive whose zones cannot be reset keeps its copy: the
/// recovery's checks still judge it.
pub fn invalidate<D: CheckpointDrive>(drives: &mut [D], skip: &[usize], area: CheckpointArea) {
    for (index, drive) in drives.iter_mut().enumerate() {
        if skip.contains(&index) {
            continue;
        }
        let inner = drive.raw_zones();
        let raw = inner.geometry();
        for zone in area.zones() {
            let target = ZoneTarget::Zone { start_lba: raw.zone_start_lba(zone) };
            if let Err(e) = execute(inner, Command::ManageZone { action: ZoneAction::Reset, target }).result {
                tracing::warn!(drive = index, zone, "the checkpoint zone could not be reset: {e}");
            }
        }
    }
}

/// Writes `image` as its generation's copy on every drive not in `skip`: resets the
/// copy's zones, then writes its blocks, and finishes the last zone written (a partly
/// written zone would hold an active zone the array's zone limits do not count). Returns
/// the drives that hold it, and an error naming each drive that does not (the others are
/// still written).
pub fn write<D: CheckpointDrive>(
    drives: &mut [D],
    skip: &[usize],
    area: CheckpointArea,
    image: &CheckpointImage,
) -> (usize, Result<(), String>) {
    let mut errors = Vec::new();
    let mut written = 0;
    for (index, drive) in drives.iter_mut().enumerate() {
        if skip.contains(&index) {
            continue;
        }
        match write_copy(drive.raw_zones(), area, image) {
            Ok(()) => written += 1,
            Err(e) => errors.push(format!("drive {index}: {e}")),
        }
    }
    let result = if errors.is_empty() { Ok(()) } else { Err(errors.join("; ")) };
    (written, result)
}

fn write_copy(drive: &mut dyn ZonedDevice, area: CheckpointArea, image: &CheckpointImage) -> Result<(), String> {
    let raw = drive.geometry();
    let bs = raw.block_size_bytes as usize;
    let bytes = image.encode(raw.block_size_bytes);
    let blocks = (bytes.len() / bs) as u64;
    if blocks > area.capacity_blocks(&raw) {
        return Err(format!("a checkpoint of {blocks} blocks does not fit {} zones", area.zones_per_copy));
    }
    let first_zone = area.first_zone(image.generation);
    let check = |c: zapraid_zns::Completion, what: &str| c.result.map(|_| ()).map_err(|e| format!("{what}: {e}"));
    for zone in first_zone..first_zone + area.zones_per_copy {
        let target = ZoneTarget::Zone { start_lba: raw.zone_start_lba(zone) };
        check(execute(drive, Command::ManageZone { action: ZoneAction::Reset, target }), "zone reset")?;
    }
    let mut index = 0;
    while index < blocks {
        let count = transfer_blocks(&raw, index, blocks);
        let data = bytes[index as usize * bs..(index + count) as usize * bs].to_vec();
        let metadata = vec![0; count as usize * raw.metadata_bytes_per_block as usize];
        let lba = area.lba(&raw, first_zone, index);
        check(execute(drive, Command::Write { lba, data, metadata }), "checkpoint write")?;
        index += count;
    }
    if !blocks.is_multiple_of(raw.zone_capacity_blocks) {
        let zone = first_zone + (blocks / raw.zone_capacity_blocks) as u32;
        let target = ZoneTarget::Zone { start_lba: raw.zone_start_lba(zone) };
        check(execute(drive, Command::ManageZone { action: ZoneAction::Finish, target }), "zone finish")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn areas_are_two_copies_after_the_superblock_zone() {
        assert_eq!(CheckpointArea::of(1, 1, 0), None);
        assert_eq!(CheckpointArea::of(2, 1, 0), None);
        assert_eq!(CheckpointArea::of(5, 1, 0), Some(CheckpointArea { first_zone: 1, zones_per_copy: 2 }));
        let area = CheckpointArea { first_zone: 1, zones_per_copy: 3 };
        assert_eq!(area.reserved_zones(1), 7);
        assert_eq!((area.first_zone(4), area.first_zone(7)), (1, 4));
        assert_eq!(area.copy_of_zone(0), None);
        assert_eq!(area.copy_of_zone(1), Some((0, true)));
        assert_eq!(area.copy_of_zone(3), Some((0, false)));
        assert_eq!(area.copy_of_zone(4), Some((1, true)));
        assert_eq!(area.copy_of_zone(7), None);
    }

    #[test]
    fn shards_keep_their_areas_one_after_the_other() {
        // 3 shards of 2 zones per copy: 1 + 3 * 4 reserved zones.
        assert_eq!(CheckpointArea::of(13, 3, 0), Some(CheckpointArea { first_zone: 1, zones_per_copy: 2 }));
        let last = CheckpointArea::of(13, 3, 2).unwrap();
        assert_eq!((last.first_zone, last.zones_per_copy, last.zones()), (9, 2, 9..13));
        assert_eq!(last.reserved_zones(3), 13);
        assert_eq!((last.copy_of_zone(8), last.copy_of_zone(11), last.copy_of_zone(13)), (None, Some((1, true)), None));
        assert_eq!(CheckpointArea::of(11, 3, 0), None, "not a whole number of areas");
    }

    #[test]
    fn after_a_start_the_next_generation_spares_the_full_image_a_crash_would_need() {
        let area = CheckpointArea { first_zone: 1, zones_per_copy: 1 };
        let place = |next_generation| CheckpointPlace {
            area,
            next_generation,
            base_superblock_generation: None,
            on_drives: None,
        };
        // From full image 6 (the newest): the next goes to the other copy.
        let mut p = place(7);
        p.keep_after_start(6, None);
        assert_eq!(p.next_generation, 7);
        // From full image 5 while incremental 6 did not resolve: 6's copy, not 5's.
        let mut p = place(7);
        p.keep_after_start(5, None);
        assert_eq!(p.next_generation, 8);
        // From incremental 8 on base 5: 8's copy is overwritten, the base kept.
        let mut p = place(9);
        p.keep_after_start(8, Some(5));
        assert_eq!(p.next_generation, 10);
    }

    #[test]
    fn the_checkpoint_on_the_drives_is_current_until_the_engine_writes_or_the_superblock_moves() {
        let target = ZoneTarget::Zone { start_lba: 0 };
        let zone = |action| Command::ManageZone { action, target };
        assert!(changes_drive(&zone(ZoneAction::Reset)));
        assert!(changes_drive(&Command::Write { lba: 0, data: vec![0; 4096], metadata: Vec::new() }));
        assert!(!changes_drive(&zone(ZoneAction::Finish)));
        assert!(!changes_drive(&Command::Read { lba: 0, data: vec![0; 4096], metadata: Vec::new() }));
        let mut place = CheckpointPlace {
            area: CheckpointArea { first_zone: 1, zones_per_copy: 1 },
            next_generation: 2,
            base_superblock_generation: None,
            on_drives: None,
        };
        assert!(!place.is_current(3, 0), "none known to describe the drives");
        place.on_drives = Some(CheckpointMark { superblock_generation: 3, engine_writes: 5 });
        assert!(place.is_current(3, 5));
        assert!(!place.is_current(3, 6), "the engine wrote since");
        assert!(!place.is_current(4, 5), "a failure or rebuild recorded since");
    }
}
