//! The end of recovery: the stripes of every segment assembled (`assemble`), the L2P table
//! (newest timestamp wins, then the newer segment, then the later stripe), repairs counted
//! and logged, and the zones of segments not to be appended to listed for finishing: what
//! the engine is built from (`Concluded`; the building is `engine::start`'s, a room above).

use std::collections::{BTreeMap, HashMap};

use super::assemble::{self, Assembled};
use super::machine::{Found, Phase, Recovered, RecoveredSegment, Recovery, Repairs};
use crate::config::Config;
use crate::error::Result;
use crate::format::{split_lost_lba, CheckpointImage, NO_LBA};
use crate::l2p::Physical;
use crate::lanes::Lanes;
use crate::parity::ParityCodec;
use crate::stripe_table::CompactStripeTable;
use zapraid_zns::{Geometry, ZoneState};

/// How new a copy of an LBA is: its timestamp, then (a block garbage collection copied
/// keeps its timestamp) the newer segment, then (so does a block a repair rewrote, maybe
/// into the segment of its damaged original) the later stripe of the segment.
type Age = (u64, u64, u64);

/// Per LBA, the newest copy the log holds (`Age`), and whether that copy is a lost-block
/// marker (`engine::lost`). How a start builds the L2P table, and how a running engine
/// rebuilds a page of it (`scan`).
#[derive(Default)]
pub(crate) struct Newest(HashMap<u64, (Age, Physical, bool)>);

impl Newest {
    /// A copy with LBA field `field` (a logical block, or a lost-block marker's flagged
    /// one) and `timestamp` at `at`, in stripe `stripe` of the segment of `sequence`.
    pub(crate) fn offer(&mut self, field: u64, timestamp: u64, sequence: u64, stripe: u64, at: Physical) {
        let (lba, marker) = split_lost_lba(field);
        let age = (timestamp, sequence, stripe);
        if self.0.get(&lba).is_none_or(|(newest, _, _)| *newest < age) {
            self.0.insert(lba, (age, at, marker));
        }
    }

    /// A copy of `lba` at `at` that cannot be read (damaged beyond what parity rebuilds):
    /// if it is the newest, the LBA is recorded lost there, as behind a marker. A readable
    /// copy of the same timestamp in the same segment wins wherever it is (it holds the
    /// same write).
    pub(crate) fn offer_lost(&mut self, lba: u64, timestamp: u64, sequence: u64, at: Physical) {
        if self.0.get(&lba).is_none_or(|((t, s, _), _, _)| (*t, *s) < (timestamp, sequence)) {
            self.0.insert(lba, ((timestamp, sequence, 0), at, true));
        }
    }

    pub(crate) fn contains(&self, lba: u64) -> bool {
        self.0.contains_key(&lba)
    }

    /// The LBAs whose newest copy is a lost-block marker, with its timestamp.
    pub(crate) fn lost(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.0.iter().filter(|(_, (_, _, marker))| *marker).map(|(lba, ((timestamp, _, _), _, _))| (*lba, *timestamp))
    }

    /// Each LBA offered and the place of its newest copy.
    pub(crate) fn into_mappings(self) -> impl Iterator<Item = (u64, Physical)> {
        self.0.into_iter().map(|(lba, (_, at, _))| (lba, at))
    }
}

impl Recovery {
    /// The stripes of the segment in `zone` put together from what was found of it.
    pub(super) fn assemble(&self, zone: u32, codec: &ParityCodec) -> Assembled {
        let layout = self.zone_layouts[&zone].0;
        let n = self.layout.drives();
        let data_end: Vec<u64> = (0..n).map(|d| self.data_end.get(&(zone, d)).copied().unwrap_or(0)).collect();
        let recorded = self.appending_places(zone);
        let found = &self.found[&zone];
        let damaged: Vec<Found> =
            [&self.damaged, &self.damaged_fields].iter().filter_map(|d| d.get(&zone)).flatten().copied().collect();
        let failed = self.failed_lanes(zone);
        assemble::assemble_zone(&layout, codec, zone, found, &damaged, &failed, &data_end, recorded.as_ref())
    }

    /// What recovery found, once `is_done`, for the engine to be built from
    /// (`Recovery::finish`, in `engine::start`).
    pub(crate) fn conclude(mut self) -> Result<Concluded> {
        if let Some(e) = self.error {
            return Err(e);
        }
        assert!(self.phase == Phase::Done, "finish() before recovery is done");
        let codec = ParityCodec::for_level(self.config.level)?;
        let n = self.layout.drives();
        let mut segments = Vec::new();
        let mut best = Newest::default();
        let mut next_timestamp = 1;
        // Blocks whose LBA parity told but whose data it cannot rebuild (`assemble`).
        let mut unreadable: Vec<(u32, Found)> = Vec::new();
        let mut repairs = Repairs {
            damaged_structures: self.report.damaged_headers + self.report.damaged_footers,
            ..Repairs::default()
        };
        for (&zone, &sequence) in &self.segments {
            let (layout, class) = self.zone_layouts[&zone];
            // Of a segment appending at the checkpoint, only entries from its next timestamp on.
            let cut = self.appending_cut(zone).unwrap_or(0);
            if let Some(recorded) = self.checkpointed(zone) {
                // In the checkpoint: nothing read, nothing to assemble.
                let (complete, full) = (!recorded.open, recorded.sealed);
                // Its length was checked when the checkpoint was judged.
                let table = CompactStripeTable::decode(&layout, &recorded.table);
                debug_assert_eq!(table.is_some(), !recorded.table.is_empty());
                segments.push(RecoveredSegment { zone, sequence, layout, class, table, complete, full });
                continue;
            }
            let assembled = self.assemble(zone, &codec);
            // A clean stop left a stop footer (on any drive: it is written once every stripe
            // is persisted): the segment is complete and is kept like a sealed one.
            let stopped = self.open_extents.range((zone, 0)..=(zone, usize::MAX)).any(|(_, (_, stop))| stop.is_some());
            let (complete, full) = (self.sealed[&zone] || stopped, self.sealed[&zone]);
            if assembled.repaired > 0 {
                tracing::warn!(zone, "{} damaged blocks of this segment rebuilt from parity", assembled.repaired);
            }
            if assembled.lost > 0 && complete {
                tracing::error!(
                    zone,
                    "{} blocks of this segment are damaged beyond what parity rebuilds",
                    assembled.lost
                );
                repairs.blocks_lost += assembled.lost;
            } else if assembled.lost > 0 {
                tracing::warn!(
                    zone,
                    "{} written blocks of this segment, open at a crash, are unreadable beyond what parity \
                     rebuilds: torn by the power cut (never acknowledged) or damaged",
                    assembled.lost
                );
                repairs.blocks_dropped += assembled.lost;
            }
            repairs.blocks_repaired += assembled.repaired;
            for &(lba, timestamp, at) in &assembled.unreadable {
                unreadable.push((zone, Found { drive: at.drive, offset: at.offset, lba, timestamp, stripe_id: 0 }));
            }
            for b in assembled.blocks {
                let (lba, _) = split_lost_lba(b.field);
                if b.field == NO_LBA || lba >= self.config.logical_blocks {
                    continue;
                }
                next_timestamp = u64::max(next_timestamp, b.timestamp + 1);
                if b.timestamp < cut {
                    continue; // the checkpoint's pages hold it, or what replaced it
                }
                best.offer(b.field, b.timestamp, sequence, b.stripe, b.at);
            }
            segments.push(RecoveredSegment { zone, sequence, layout, class, table: assembled.table, complete, full });
        }
        // Blocks found damaged beyond what parity rebuilds, their metadata intact (or their
        // fields rebuilt from such metadata): the LBA is lost unless a newer or readable
        // copy holds it (offered after every readable block, so that one of the same age
        // wins). Every write takes one timestamp, so a block newer than every readable one
        // is at most as many writes newer as the scanned segments hold blocks; a timestamp
        // past that is not trusted (the damage may be in the metadata). A trusted one
        // moves the next timestamp past it, so that later writes win over the lost record.
        let damaged_zones: std::collections::BTreeSet<u32> =
            self.damaged.keys().copied().chain(unreadable.iter().map(|(zone, _)| *zone)).collect();
        let scanned_blocks: u64 =
            damaged_zones.iter().map(|zone| self.zone_layouts[zone].0.data_blocks_per_segment()).sum();
        let newest_trusted = next_timestamp.saturating_add(scanned_blocks);
        let damaged = self.damaged.iter().flat_map(|(&zone, found)| found.iter().map(move |d| (zone, *d)));
        for (zone, d) in damaged.chain(unreadable) {
            let Some(&sequence) = self.segments.get(&zone) else { continue };
            let cut = self.appending_cut(zone).unwrap_or(0);
            // A damaged marker's LBA was lost already: it stays lost.
            let (lba, _) = split_lost_lba(d.lba);
            if lba >= self.config.logical_blocks || d.timestamp < cut || d.timestamp >= newest_trusted {
                continue;
            }
            next_timestamp = next_timestamp.max(d.timestamp + 1);
            best.offer_lost(lba, d.timestamp, sequence, Physical { zone, drive: d.drive, offset: d.offset });
        }
        // Blocks a rebuild could not reconstruct, named lost in its footer (whose CRC
        // covers them: trusted as a marker's fields are).
        for (&zone, named) in &self.named_lost {
            let Some(&sequence) = self.segments.get(&zone) else { continue };
            let cut = self.appending_cut(zone).unwrap_or(0);
            for d in named.iter().filter(|d| d.timestamp >= cut) {
                next_timestamp = next_timestamp.max(d.timestamp + 1);
                best.offer_lost(d.lba, d.timestamp, sequence, Physical { zone, drive: d.drive, offset: d.offset });
            }
        }
        // A grown array's rows in the newest placement first: segments opened there need
        // not move again.
        let mut free_zones: Vec<u32> = (0..self.geometry.zone_count)
            .filter(|z| !self.segments.contains_key(z) && self.lanes.is_usable(*z))
            .collect();
        free_zones.sort_by_key(|&z| self.lanes.row_is_old(self.lanes.row(z)));
        // Past everything on the drives, and past any checkpoint offered (used or not).
        let next_sequence = self.segments.values().max().map_or(1, |s| s + 1).max(self.checkpoint_floor.0);
        let next_timestamp = next_timestamp.max(self.checkpoint_floor.1);
        // The checkpoint the start began from gives the table side: its directory and the
        // segments' live counts.
        let checkpoint = self.checkpoint.take().filter(|_| self.from_checkpoint);
        // Lost LBAs: the checkpoint's, unless a newer version was replayed; and those whose
        // replayed newest version is a marker.
        let mut lost: Vec<(u64, u64)> = checkpoint
            .iter()
            .flat_map(|image| image.lost.iter().copied())
            .filter(|(lba, _)| !best.contains(*lba))
            .collect();
        lost.extend(best.lost());
        let failed_drives: Vec<usize> = (0..self.failed.len()).filter(|d| self.failed[*d]).collect();
        let recovered = Recovered {
            segments,
            mappings: best.into_mappings().collect(),
            lost,
            free_zones,
            next_sequence,
            next_timestamp,
            failed_drives: failed_drives.clone(),
            spared_drives: (0..self.spared.len()).filter(|d| self.spared[*d]).collect(),
            repairs,
            report: self.report,
        };
        // Recovered open segments are not appended to again, and a sealed segment's zone
        // whose finish a power cut lost is not full: finishing their zones frees their
        // active resources (drives allow only what the engine needs, `capacity`).
        let mut zones_to_finish = Vec::new();
        for &zone in self.segments.keys() {
            for drive in (0..n).filter(|lane| !self.lane_failed(zone, *lane)) {
                if !self.sealed[&zone] || self.reports[drive][zone as usize].state != ZoneState::Full {
                    zones_to_finish.push((drive, zone));
                }
            }
        }
        Ok(Concluded {
            geometry: self.drive_geometry,
            lanes: self.lanes,
            config: self.config,
            recovered,
            checkpoint,
            sequences: self.segments,
            zones_to_finish,
        })
    }
}

/// The end of a recovery: what the engine is built from (`Recovery::finish`).
pub(crate) struct Concluded {
    /// Each drive's geometry (the engine numbers its segments from it, `crate::lanes`).
    pub geometry: Geometry,
    /// Where the segments' lanes lie, with those found moved into spare space.
    pub lanes: Lanes,
    pub config: Config,
    pub recovered: Recovered,
    /// The checkpoint the start began from, installed after `recovered`, and the sequence
    /// of the segment in each zone found on the drives, which it is checked against.
    pub checkpoint: Option<CheckpointImage>,
    pub sequences: BTreeMap<u32, u64>,
    /// The zones to finish, per drive and zone, in the order to finish them.
    pub zones_to_finish: Vec<(usize, u32)>,
}
