//! Whether a start may begin from the checkpoint it was offered (`format::checkpoint`):
//! only if every segment it names is still on the drives (same zone, sequence and chunk
//! class: none was reset since it was taken), every other segment the headers name was
//! written after it (a sequence from its next one on), and everything in it fits the
//! array. Then the checkpoint's segments are not read past their headers: the directory
//! gives the L2P table, the checkpoint their live counts and the compact stripe tables of
//! those written with Zone Append (as the engine had them, a failed drive's chunks placed
//! as the stripes were written or recovered). A segment appending at a running checkpoint
//! taken while a drive was failed (or being rebuilt, which a start counts failed) also
//! comes with its table as far as it was written:
//! the pages may point at its chunks on the failed drive, whose places Zone Append chose
//! and only the engine knew; without that table such a checkpoint is refused when a drive
//! is failed. Segments written after it (an engine ran
//! on the drives since the stop, and the start after it was a crash) are replayed as
//! without a checkpoint, and their newest entries override the pages' (`install`).
//! Otherwise the whole log is replayed.
//!
//! Why the pages and the replayed entries agree: everything acknowledged after the
//! checkpoint is in a segment written after it (a clean stop closes every open segment,
//! and a start never appends to a recovered one), including the blocks garbage collection
//! copied, which keep their timestamps; the pages point only into the checkpoint's
//! segments, which all still exist. Mapping blocks written after it are not read: the
//! checkpoint's page and the replayed entries describe the table without them. A discard
//! after the checkpoint is not in the log, so a crash may bring the block back, as a full
//! replay does.

use super::machine::Recovery;
use crate::format::{mapping_entries_per_block, CheckpointImage, CheckpointSegment};
use crate::hybrid::ChunkClass;
use crate::l2p::UNMAPPED;
use crate::stripe_table::CompactStripeTable;

impl Recovery {
    /// Offers a checkpoint read from the drives' reserved zones (`blocks_read` of them,
    /// counted with what the start read); the recovery uses it if it matches what the
    /// drives hold (judged once their headers are read).
    pub fn use_checkpoint(&mut self, image: CheckpointImage, blocks_read: u64) {
        self.report.blocks_read += blocks_read;
        self.pass_over_checkpoint(&image);
        self.checkpoint = Some(image);
    }

    /// A checkpoint of this array found but not offered (the caller judged it stale): the
    /// start still goes past its next sequence number and timestamp, so that no segment
    /// written after it reuses a (zone, sequence) the checkpoint names.
    pub fn pass_over_checkpoint(&mut self, image: &CheckpointImage) {
        if image.array_uuid == self.config.array_uuid {
            let (sequence, timestamp) = self.checkpoint_floor;
            self.checkpoint_floor = (sequence.max(image.next_sequence), timestamp.max(image.next_timestamp));
        }
    }

    /// Judges the offered checkpoint against the segments found (every header read).
    pub(super) fn judge_checkpoint(&mut self) {
        let Some(image) = self.checkpoint.take() else { return };
        match self.checkpoint_mismatch(&image) {
            None => {
                self.checkpoint = Some(image);
                self.from_checkpoint = true;
                let replayed = self.segments.keys().filter(|z| self.checkpointed(**z).is_none()).count();
                let image = self.checkpoint.as_ref().expect("just kept");
                tracing::info!(
                    generation = image.generation,
                    segments = image.segments.len(),
                    replayed,
                    "starting from the checkpoint: only segments written after it are replayed"
                );
                self.report.segments_replayed = replayed as u64;
                self.report.checkpoint_generation = Some(image.generation);
            }
            Some(reason) => tracing::warn!(
                generation = image.generation,
                "the checkpoint does not match the drives ({reason}): replaying every segment"
            ),
        }
    }

    /// Why the checkpoint cannot be used, if it cannot.
    fn checkpoint_mismatch(&self, image: &CheckpointImage) -> Option<String> {
        if image.array_uuid != self.config.array_uuid {
            return Some("it is another array's".into());
        }
        let per_block = mapping_entries_per_block(self.geometry.block_size_bytes) as u64;
        let entries_per_page = self.config.l2p.page_entries.unwrap_or(per_block);
        if u64::from(image.entries_per_page) != entries_per_page {
            return Some(format!("pages of {} entries, the table has {entries_per_page}", image.entries_per_page));
        }
        let pages = self.config.logical_blocks.div_ceil(entries_per_page);
        if image.directory.len() as u64 != pages {
            return Some(format!("{} pages, the table has {pages}", image.directory.len()));
        }
        // Segments the checkpoint does not name were written after it.
        for (&zone, &sequence) in &self.segments {
            if !Self::names(image, zone, sequence) && sequence < image.next_sequence {
                return Some(format!(
                    "zone {zone} holds segment {sequence}, older than the checkpoint's next ({}) and not in it",
                    image.next_sequence
                ));
            }
        }
        let drives = self.layout.drives() as u64;
        let zone_blocks = drives * self.geometry.zone_capacity_blocks;
        for s in &image.segments {
            if s.sequence >= image.next_sequence {
                return Some(format!("zone {}'s sequence {} is not below the next", s.zone, s.sequence));
            }
            if s.live_blocks > zone_blocks {
                return Some(format!("zone {} has {} live blocks recorded", s.zone, s.live_blocks));
            }
            if self.segments.get(&s.zone) != Some(&s.sequence) {
                if s.live_blocks == 0 {
                    continue; // mapped nothing: reset since (garbage collection), and perhaps reused
                }
                return Some(format!(
                    "zone {} does not hold segment {} any more, which has {} live blocks",
                    s.zone, s.sequence, s.live_blocks
                ));
            }
            let class = if s.large { ChunkClass::Large } else { ChunkClass::Small };
            if self.zone_layouts[&s.zone].1 != class {
                return Some(format!(
                    "zone {} holds {:?} chunks, the checkpoint says {class:?}",
                    s.zone, self.zone_layouts[&s.zone].1
                ));
            }
            // An appending segment is replayed: its table comes from the drives, but where
            // Zone Append placed its chunks on a failed drive is known only to the
            // checkpoint's pages and to the table it then carries (taken while that drive
            // was failed), which recovery keeps those stripes' places from (`assemble`).
            let layout = self.layout_of(s.zone);
            let table_bytes = CompactStripeTable::encoded_bytes(&layout);
            if s.appending && s.table.is_empty() {
                if layout.uses_append() && self.failed_lanes(s.zone).iter().any(|f| *f) {
                    return Some(format!(
                        "a drive has failed, and the segment in zone {} was open at the checkpoint, which kept no \
                         places of its chunks",
                        s.zone
                    ));
                }
            } else if s.table.len() != table_bytes {
                return Some(format!("zone {}'s stripe table has {} bytes, not {table_bytes}", s.zone, s.table.len()));
            }
        }
        let physical = u64::from(self.geometry.zone_count) * zone_blocks;
        for (page, &packed) in image.directory.iter().enumerate() {
            if packed == UNMAPPED {
                continue;
            }
            let zone = u64::from(packed) / zone_blocks;
            let present = u32::try_from(zone)
                .is_ok_and(|zone| self.segments.get(&zone).is_some_and(|seq| Self::names(image, zone, *seq)));
            if u64::from(packed) >= physical || !present {
                return Some(format!("page {page}'s mapping block lies outside every segment"));
            }
        }
        None
    }

    /// Whether `image` names the segment `sequence` in `zone`.
    fn names(image: &CheckpointImage, zone: u32, sequence: u64) -> bool {
        Self::record(image, zone).is_some_and(|s| s.sequence == sequence)
    }

    fn record(image: &CheckpointImage, zone: u32) -> Option<&CheckpointSegment> {
        image.segments.binary_search_by_key(&zone, |s| s.zone).ok().map(|i| &image.segments[i])
    }

    /// The checkpoint's record of the segment on the drives in `zone`, when the start began
    /// from one that names it (the same sequence: a zone reset since may hold a newer one).
    fn named_on_drives(&self, zone: u32) -> Option<(&CheckpointImage, &CheckpointSegment)> {
        let image = self.checkpoint.as_ref().filter(|_| self.from_checkpoint)?;
        let sequence = self.segments.get(&zone)?;
        Self::record(image, zone).filter(|s| s.sequence == *sequence).map(|s| (image, s))
    }

    /// The checkpoint's record of the segment in `zone`, when the start began from one and
    /// its contents are not replayed (not appending).
    pub(super) fn checkpointed(&self, zone: u32) -> Option<&CheckpointSegment> {
        self.named_on_drives(zone).map(|(_, s)| s).filter(|s| !s.appending)
    }

    /// Of a segment appending at the checkpoint the start began from (replayed), the
    /// checkpoint's next timestamp: its entries older than that are in the pages already,
    /// or were replaced before the checkpoint.
    pub(super) fn appending_cut(&self, zone: u32) -> Option<u64> {
        self.named_on_drives(zone).filter(|(_, s)| s.appending).map(|(image, _)| image.next_timestamp)
    }

    /// Of a segment appending at the checkpoint the start began from, the places of its
    /// chunks as the engine had them then, if the checkpoint kept them (a drive was failed
    /// or being rebuilt); of a scan, the running engine's table of the segment.
    pub(super) fn appending_places(&self, zone: u32) -> Option<CompactStripeTable> {
        if let Some(table) = self.known_places.get(&zone) {
            return Some(table.clone()); // the running engine's own, exact
        }
        let (_, record) = self.named_on_drives(zone).filter(|(_, s)| s.appending && !s.table.is_empty())?;
        // Its length was checked when the checkpoint was judged.
        CompactStripeTable::decode(&self.layout_of(zone), &record.table)
    }
}
