//! Stripe assembly at recovery: from the blocks found in one segment (footer entries or
//! per-block metadata, per drive), the stripes they form, where each chunk sits, and which
//! data blocks the L2P table gets.
//!
//! Invariants and rules:
//! - A chunk is the blocks found at one (drive, chunk position) with one stripe ID; a block
//!   whose stripe ID is outside its group is not trusted.
//! - Row `o` of a stripe is block `o` of each of its chunks. A row missing blocks is rebuilt
//!   from parity when at least k of its n blocks were found; a missing block is *damaged*
//!   when a working drive wrote its place (before that drive's data end) and *unwritten*
//!   otherwise (a power cut in the middle of the stripe; such a stripe was never
//!   acknowledged). Blocks of failed drives are neither: they are expected to be missing.
//! - Every data block found intact is mapped, also in a stripe that cannot be rebuilt: an
//!   acknowledged stripe damaged beyond parity keeps what is left of it. A rebuilt data
//!   block is mapped only if its place was written (or its drive failed): an unwritten
//!   place belongs to a stripe never acknowledged, and blocks garbage collection was
//!   moving into it keep their intact old copies.
//! - A damaged block whose metadata still decodes (its checksum fails: `damaged`) gives its
//!   row its fields, not its data. So a row that lost more data than parity covers may
//!   still give back the fields of a block on a failed drive (or of a written block whose
//!   metadata is gone): such a block is `unreadable`, its LBA known and its data not, and
//!   a start records that LBA lost rather than forgetting it (a damaged row with a drive
//!   failed or being rebuilt would otherwise read as zeros or an older version).
//! - With Zone Append, a power cut may land an append in part (a prefix of its chunk) and
//!   others in flight after it, which then straddle chunk positions: a position holding
//!   blocks of two stripes. Everything from the first such position on a drive landed at
//!   the power cut (chunks that completed before it are aligned), so belongs to stripes
//!   never acknowledged: it counts as unwritten, never pairs with other drives' chunks.
//! - With Zone Append, a missing chunk's place is not recorded anywhere: it takes a place of
//!   its group on that drive that no found chunk claims. When several are missing there, the
//!   pairing may be wrong, which is safe: reads check each block's LBA, segment and checksum
//!   and rebuild from the stripe the compact stripe table names for that place.
//! - Except where a checkpoint recorded it: a segment appending at a running checkpoint
//!   taken while a drive was failed comes with the places the engine had given its chunks
//!   then (`recorded`), which the checkpoint's pages point at. A missing chunk of a stripe
//!   written before the checkpoint takes its recorded place (unless a found chunk holds
//!   it: data read from the drives wins over an image), and those places are handed to no
//!   other stripe.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::machine::Found;
use crate::format::{decode_fields, encode_fields};
use crate::l2p::Physical;
use crate::layout::Layout;
use crate::parity::ParityCodec;
use crate::stripe_table::CompactStripeTable;

/// LBA and timestamp, the per-block fields that parity blocks carry the parity of.
type Fields = (u64, u64);

/// A data block of a segment, found or rebuilt from parity.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DataBlock {
    /// Its LBA field: a logical block, or a lost-block marker's flagged one.
    pub field: u64,
    pub timestamp: u64,
    /// The number of its stripe in the segment. Stripes are numbered as they are issued,
    /// so of two copies of a block in one segment with one timestamp (a repair rewrites a
    /// block into the open segment, which may hold the damaged original), the later
    /// stripe's is the newer.
    pub stripe: u64,
    pub at: Physical,
}

/// What one segment's stripes gave.
pub(super) struct Assembled {
    pub table: Option<CompactStripeTable>,
    /// Data blocks, found or rebuilt from parity.
    pub blocks: Vec<DataBlock>,
    /// Damaged blocks whose fields parity rebuilt.
    pub repaired: u64,
    /// Damaged blocks in rows that lost more than parity covers.
    pub lost: u64,
    /// Data blocks of such rows whose fields parity rebuilt (from the other blocks'
    /// metadata, damaged ones' included) but whose data it cannot: (LBA, timestamp, place).
    pub unreadable: Vec<(u64, u64, Physical)>,
}

/// One chunk found on a drive: its stripe ID and its blocks' fields, by row, each with
/// whether the block is intact (false: its checksum failed, its metadata did not).
struct Chunk {
    stripe_id: u32,
    rows: Vec<Option<(Fields, bool)>>,
}

/// Where each stripe's chunks are: per stripe key, drive -> position.
type Stripes = BTreeMap<(u64, u32), BTreeMap<usize, u64>>;

/// Chunk places a checkpoint recorded: (drive, group, stripe ID within the group) -> position.
type Recorded = HashMap<(usize, u64, u32), u64>;

/// Assembles the stripes of the segment in `zone` from `found`. `failed[d]` says drive d
/// failed (nothing was read from it); `data_end[d]` is where drive d's data region ends
/// (zone-relative blocks). `recorded` is the stripe table a checkpoint kept of the segment
/// while it was appending (see the module documentation), if any. `damaged` are blocks
/// whose checksum failed but whose metadata names the segment: their fields only count.
#[allow(clippy::too_many_arguments)] // each is a distinct input of the assembly
pub(super) fn assemble_zone(
    layout: &Layout,
    codec: &ParityCodec,
    zone: u32,
    found: &[Found],
    damaged: &[Found],
    failed: &[bool],
    data_end: &[u64],
    recorded: Option<&CompactStripeTable>,
) -> Assembled {
    let (n, k) = (layout.drives(), layout.data_chunks);
    let cb = layout.chunk_blocks;
    let data_start = layout.data_start_blocks();
    let append = layout.uses_append();
    debug_assert_eq!(failed.len(), n);
    debug_assert_eq!(data_end.len(), n);
    let mut data_end = data_end.to_vec();
    if append {
        cut_straddling_appends(layout, zone, found, &mut data_end);
    }
    let data_end = &data_end[..];

    let mut chunks: HashMap<(usize, u64), Chunk> = HashMap::new();
    // Intact blocks first: a damaged one only fills a row nothing intact holds.
    let blocks = found.iter().map(|f| (f, true)).chain(damaged.iter().map(|f| (f, false)));
    for (f, intact) in blocks {
        if f.drive >= n || f.offset >= data_end[f.drive] {
            continue;
        }
        let Some(relative) = f.offset.checked_sub(data_start) else { continue };
        let (position, row) = (relative / cb, (relative % cb) as usize);
        if position >= layout.stripes {
            continue;
        }
        if append && u64::from(f.stripe_id) >= layout.group_stripes(position / layout.group_size) {
            continue;
        }
        let chunk = chunks
            .entry((f.drive, position))
            .or_insert_with(|| Chunk { stripe_id: f.stripe_id, rows: vec![None; cb as usize] });
        if chunk.stripe_id == f.stripe_id && (intact || chunk.rows[row].is_none()) {
            chunk.rows[row] = Some(((f.lba, f.timestamp), intact));
        }
    }

    // Stripes: (group, stripe ID within the group) with Zone Append, (group, position)
    // with Zone Write.
    let mut stripes: Stripes = BTreeMap::new();
    for (&(drive, position), chunk) in &chunks {
        let group = position / layout.group_size;
        let key = if append { chunk.stripe_id } else { position as u32 };
        stripes.entry((group, key)).or_default().insert(drive, position);
    }
    let recorded = match recorded {
        Some(table) if append => recorded_places(layout, table),
        _ => Recorded::new(),
    };
    let places = if append { append_places(layout, &stripes, &recorded) } else { HashMap::new() };

    let mut assembled = Assembled {
        table: CompactStripeTable::new(layout),
        blocks: Vec::new(),
        repaired: 0,
        lost: 0,
        unreadable: Vec::new(),
    };
    // A chunk of before the checkpoint not found keeps its recorded place also when its
    // stripe was found nowhere (below, only stripes found are placed); a chunk found is
    // placed where it was found.
    if let Some(table) = assembled.table.as_mut() {
        for (&(drive, group, key), &position) in &recorded {
            let found = stripes.get(&(group, key)).is_some_and(|members| members.contains_key(&drive));
            if !found {
                table.set(drive, position, key);
            }
        }
    }
    for (&(group, key), members) in &stripes {
        let number = if append { group * layout.group_size + u64::from(key) } else { u64::from(key) };
        // Every drive's place for this stripe: where its chunk was found, else assigned.
        let place = |drive: usize| -> Option<u64> {
            match members.get(&drive) {
                Some(&position) => Some(position),
                None if append => places.get(&(drive, group, key)).copied(),
                None => Some(u64::from(key)),
            }
        };
        if let Some(table) = assembled.table.as_mut() {
            for drive in 0..n {
                if let Some(position) = place(drive) {
                    table.set(drive, position, key);
                }
            }
        }
        for row in 0..cb {
            let mut fields: Vec<Option<Vec<u8>>> = vec![None; n];
            let mut missing = Vec::new();
            for drive in 0..n {
                let found_row = members.get(&drive).and_then(|p| chunks[&(drive, *p)].rows[row as usize]);
                let chunk = layout.chunk_on(number, drive);
                match (found_row, place(drive)) {
                    (Some((f, intact)), Some(position)) => {
                        fields[chunk] = Some(encode_fields(f.0, f.1));
                        if !intact {
                            missing.push(drive);
                        } else if chunk < k {
                            let at = Physical { zone, drive, offset: data_start + position * cb + row };
                            assembled.blocks.push(DataBlock { field: f.0, timestamp: f.1, stripe: number, at });
                        }
                    }
                    _ => missing.push(drive),
                }
            }
            if missing.is_empty() {
                continue;
            }
            let written = |d: usize| place(d).is_some_and(|p| data_start + p * cb + row < data_end[d]);
            let damaged = missing.iter().filter(|&&d| !failed[d] && written(d)).count() as u64;
            let parity = layout.parity_chunks > 0;
            let rebuilt = parity && n - missing.len() >= k && codec.reconstruct(&mut fields).is_ok();
            if !rebuilt {
                assembled.lost += damaged;
                // The data is gone, but the fields may not be: damaged blocks' metadata
                // can make up what the missing chunks took. A block whose own metadata is
                // intact is the caller's (`damaged`); the others' LBAs are told here.
                if parity && codec.reconstruct(&mut fields).is_ok() {
                    for &drive in &missing {
                        let chunk = layout.chunk_on(number, drive);
                        let own =
                            members.get(&drive).is_some_and(|p| chunks[&(drive, *p)].rows[row as usize].is_some());
                        let (Some(position), true, false) = (place(drive), chunk < k, own) else { continue };
                        if !failed[drive] && !written(drive) {
                            continue; // never written: a stripe never acknowledged
                        }
                        let Some((lba, timestamp)) = fields[chunk].as_deref().and_then(decode_fields) else { continue };
                        let physical = Physical { zone, drive, offset: data_start + position * cb + row };
                        assembled.unreadable.push((lba, timestamp, physical));
                    }
                }
                continue;
            }
            assembled.repaired += damaged;
            for &drive in &missing {
                let chunk = layout.chunk_on(number, drive);
                let (Some(position), true) = (place(drive), chunk < k) else { continue };
                // A place its drive never wrote: the stripe was never acknowledged, and its
                // blocks' older copies (garbage collection keeps timestamps) must win.
                if !failed[drive] && data_start + position * cb + row >= data_end[drive] {
                    continue;
                }
                let Some((field, timestamp)) = fields[chunk].as_deref().and_then(decode_fields) else { continue };
                let at = Physical { zone, drive, offset: data_start + position * cb + row };
                assembled.blocks.push(DataBlock { field, timestamp, stripe: number, at });
            }
        }
    }
    assembled
}

/// Lowers each drive's data end to its first chunk position holding blocks of more than
/// one stripe (see the module documentation).
fn cut_straddling_appends(layout: &Layout, zone: u32, found: &[Found], data_end: &mut [u64]) {
    let data_start = layout.data_start_blocks();
    let mut ids: BTreeMap<(usize, u64), u32> = BTreeMap::new();
    let mut first_mixed: BTreeMap<usize, u64> = BTreeMap::new();
    for f in found {
        let Some(relative) = f.offset.checked_sub(data_start) else { continue };
        let position = relative / layout.chunk_blocks;
        if *ids.entry((f.drive, position)).or_insert(f.stripe_id) != f.stripe_id {
            let first = first_mixed.entry(f.drive).or_insert(position);
            *first = (*first).min(position);
        }
    }
    for (drive, position) in first_mixed {
        let Some(end) = data_end.get_mut(drive) else { continue };
        let cut = data_start + position * layout.chunk_blocks;
        if cut < *end {
            tracing::warn!(
                drive,
                zone,
                position,
                "appends landed in part at the power cut: blocks from this chunk position on were never \
                 acknowledged and are not used"
            );
            *end = cut;
        }
    }
}

/// The places a checkpoint's table of an appending segment recorded, by stripe. Read from
/// a drive: an ID beyond its group's stripes is not trusted, nor a second place of one
/// stripe on one drive.
fn recorded_places(layout: &Layout, table: &CompactStripeTable) -> Recorded {
    let mut recorded = Recorded::new();
    for drive in 0..layout.drives() {
        for position in 0..layout.stripes {
            let group = position / layout.group_size;
            let Some(key) = table.get(drive, position) else { continue };
            if u64::from(key) < layout.group_stripes(group) {
                recorded.entry((drive, group, key)).or_insert(position);
            }
        }
    }
    recorded
}

/// With Zone Append, the place of each chunk not found: its recorded place, if the
/// checkpoint recorded one no found chunk holds; otherwise, per drive and group, the
/// positions neither a found chunk nor a recorded place claims, handed out in order to the
/// group's stripes missing a chunk there.
fn append_places(layout: &Layout, stripes: &Stripes, recorded: &Recorded) -> HashMap<(usize, u64, u32), u64> {
    let n = layout.drives();
    let mut claimed: HashMap<(usize, u64), Vec<u64>> = HashMap::new();
    for (&(group, _), members) in stripes {
        for (&drive, &position) in members {
            claimed.entry((drive, group)).or_default().push(position);
        }
    }
    for positions in claimed.values_mut() {
        positions.sort_unstable();
    }
    let found_at = |drive: usize, group: u64, position: u64| {
        claimed.get(&(drive, group)).is_some_and(|taken| taken.binary_search(&position).is_ok())
    };
    let reserved: HashSet<(usize, u64)> =
        recorded.iter().map(|(&(drive, _, _), &position)| (drive, position)).collect();
    let mut places = HashMap::new();
    let mut free: HashMap<(usize, u64), std::vec::IntoIter<u64>> = HashMap::new();
    // Unclaimed places are handed out lowest first, and the lowest are the written ones
    // (a power cut leaves unwritten places at the end): stripes found on the most drives,
    // the ones most likely complete and acknowledged with a damaged chunk, take them first;
    // stripes a power cut tore get the places never written, whose blocks are not mapped.
    let mut order: Vec<_> = stripes.iter().collect();
    order.sort_by_key(|(&(group, key), members)| (group, std::cmp::Reverse(members.len()), key));
    for (&(group, key), members) in order {
        for drive in (0..n).filter(|d| !members.contains_key(d)) {
            if let Some(&position) = recorded.get(&(drive, group, key)).filter(|&&p| !found_at(drive, group, p)) {
                places.insert((drive, group, key), position);
                continue;
            }
            let unclaimed = free.entry((drive, group)).or_insert_with(|| {
                let first = group * layout.group_size;
                let open: Vec<u64> = (first..first + layout.group_stripes(group))
                    .filter(|&p| !found_at(drive, group, p) && !reserved.contains(&(drive, p)))
                    .collect();
                open.into_iter()
            });
            if let Some(position) = unclaimed.next() {
                places.insert((drive, group, key), position);
            }
        }
    }
    places
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{Mode, RaidLevel};
    use zapraid_zns::Geometry;

    /// Group 0 of a (3+1)-RAID-5 segment with 1-block chunks, drive 0 written up to its
    /// third place: stripe 2's chunk on drive 0 was written and is damaged (the other three
    /// drives have theirs), stripe 1 was torn by a power cut (found on drives 1 and 2 only).
    /// The damaged chunk must take the written place and be rebuilt there; the torn stripe
    /// gets the unwritten place, and nothing of it is mapped there.
    #[test]
    fn a_damaged_chunk_takes_the_written_place_before_a_torn_stripe() {
        let level = RaidLevel::Raid5 { drives: 4 };
        let layout = Layout::new(&Geometry::small(8, 64, 60), level, Mode::ZapRaid { group_size: 4 }, 4096).unwrap();
        let codec = ParityCodec::for_level(level).unwrap();
        let start = layout.data_start_blocks();
        let fields = |stripe: u64, chunk: usize| (100 * stripe + chunk as u64, 7 + stripe);
        let mut found = Vec::new();
        let mut add = |drive: usize, position: u64, stripe: u32| {
            let number = u64::from(stripe);
            let chunk = layout.chunk_on(number, drive);
            let (lba, timestamp) = if chunk < layout.data_chunks {
                fields(number, chunk)
            } else {
                (0..layout.data_chunks).map(|c| fields(number, c)).fold((0, 0), |(a, b), (l, t)| (a ^ l, b ^ t))
            };
            found.push(Found { drive, offset: start + position, lba, timestamp, stripe_id: stripe });
        };
        // Drive 0: stripes 0 and 3 at places 0 and 1; place 2 holds stripe 2's damaged chunk.
        add(0, 0, 0);
        add(0, 1, 3);
        for drive in 1..4 {
            for (position, stripe) in [(0, 0), (1, 3), (2, 2)] {
                add(drive, position, stripe);
            }
        }
        add(1, 3, 1);
        add(2, 3, 1);
        let data_end = [start + 3, start + 4, start + 4, start + 4];
        let assembled = assemble_zone(&layout, &codec, 5, &found, &[], &[false; 4], &data_end, None);
        let damaged_chunk = layout.chunk_on(2, 0);
        let (lba, _) = fields(2, damaged_chunk);
        let place = assembled.blocks.iter().find(|b| b.field == lba).map(|b| b.at);
        assert_eq!(place, Some(Physical { zone: 5, drive: 0, offset: start + 2 }), "the damaged block is rebuilt");
        assert_eq!(assembled.repaired, 1);
        assert!(
            assembled.blocks.iter().all(|b| !(b.at.drive == 0 && b.at.offset == start + 3)),
            "nothing mapped to the place drive 0 never wrote"
        );
    }

    /// Group 0 of a (3+1)-RAID-5 segment with 1-block chunks, drive 3 failed while it was
    /// open: stripes 0 and 1 were written before a running checkpoint (drive 3's chunk of
    /// stripe 0 landed first, at place 0; stripe 1's never did, and the engine placed it at
    /// the end of the group), and stripe 2 after it. The checkpoint's table gives stripes 0
    /// and 1 their places on drive 3 (the pages point there); stripe 2 takes a place no
    /// recorded one claims, not the lowest; a chunk found elsewhere than the table says
    /// stays where it was found, and the recorded place is not kept for it too.
    #[test]
    fn recorded_places_hold_for_stripes_before_the_checkpoint_and_no_later_stripe_takes_them() {
        let level = RaidLevel::Raid5 { drives: 4 };
        let layout = Layout::new(&Geometry::small(8, 64, 60), level, Mode::ZapRaid { group_size: 4 }, 4096).unwrap();
        let codec = ParityCodec::for_level(level).unwrap();
        let start = layout.data_start_blocks();
        let fields = |stripe: u64, chunk: usize| (100 * stripe + chunk as u64, 7 + stripe);
        let chunk_fields = |stripe: u64, drive: usize| {
            let chunk = layout.chunk_on(stripe, drive);
            if chunk < layout.data_chunks {
                fields(stripe, chunk)
            } else {
                (0..layout.data_chunks).map(|c| fields(stripe, c)).fold((0, 0), |(a, b), (l, t)| (a ^ l, b ^ t))
            }
        };
        // (drive, position, stripe) of every chunk found on drives 0 to 2.
        let landed =
            [(0, 0, 1), (0, 1, 0), (0, 2, 2), (1, 0, 0), (1, 1, 1), (1, 2, 2), (2, 0, 0), (2, 1, 1), (2, 2, 2)];
        let found: Vec<Found> = landed
            .iter()
            .map(|&(drive, position, stripe)| {
                let (lba, timestamp) = chunk_fields(u64::from(stripe), drive);
                Found { drive, offset: start + position, lba, timestamp, stripe_id: stripe }
            })
            .collect();
        // The table as the engine had it at the checkpoint: stripes 0 and 1 only, drive 0's
        // stripe 0 recorded at place 3 (a disagreement with what was found).
        let mut recorded = CompactStripeTable::new(&layout).unwrap();
        for (drive, position, stripe) in
            [(0, 3, 0), (0, 0, 1), (1, 0, 0), (1, 1, 1), (2, 0, 0), (2, 1, 1), (3, 0, 0), (3, 3, 1)]
        {
            recorded.set(drive, position, stripe);
        }
        let failed = [false, false, false, true];
        let data_end = [start + 3, start + 3, start + 3, 0];
        let assembled = assemble_zone(&layout, &codec, 5, &found, &[], &failed, &data_end, Some(&recorded));
        let table = assembled.table.as_ref().unwrap();
        assert_eq!((table.get(3, 0), table.get(3, 3)), (Some(0), Some(1)), "the recorded places on the failed drive");
        assert_eq!(table.get(3, 1), Some(2), "the stripe after the checkpoint takes the first place not recorded");
        assert_eq!((table.get(0, 1), table.get(0, 2)), (Some(0), Some(2)), "chunks found stay where found");
        assert_eq!(table.get(0, 3), None, "a chunk found is not also kept at its recorded place");
        for (stripe, position) in [(0, 0), (1, 3), (2, 1)] {
            let chunk = layout.chunk_on(stripe, 3);
            if chunk < layout.data_chunks {
                let (lba, _) = fields(stripe, chunk);
                let place = assembled.blocks.iter().find(|b| b.field == lba).map(|b| b.at);
                assert_eq!(place, Some(Physical { zone: 5, drive: 3, offset: start + position }), "stripe {stripe}");
            }
        }
        // Without the table, stripe 1's chunk on drive 3 lands elsewhere than the pages say.
        let blind = assemble_zone(&layout, &codec, 5, &found, &[], &failed, &data_end, None);
        assert_ne!(blind.table.as_ref().unwrap().get(3, 3), Some(1));
    }
}
