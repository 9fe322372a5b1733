//! Incremental checkpoints: which full checkpoint the next ones build on, and what the
//! next one costs. A full image holds every sealed segment's compact stripe table (3.77 GiB
//! a copy at the paper's testbed); a sealed segment's table never changes while the
//! superblock generation stays (only a rebuild rewrites tables, and it forgets the base),
//! so an incremental image leaves out the tables its base holds for the same zone and
//! sequence and writes only the records, the directory and the tables of segments sealed
//! since the base. A checkpoint per garbage collection reset is then affordable at any
//! scale.
//!
//! Where they go: copy `generation mod 2`. A full image at generation g is the base; the
//! incremental images after it get g + 1, g + 3, ... (`CheckpointImage::next_generation`),
//! all in the other copy, so the base is never overwritten while images build on it. The
//! next full image goes there too, and becomes the base.
//!
//! When a full one is written: when the incremental images since the base add up to the
//! base's bytes (what they wrote would have paid for a new base), and the writes since
//! have paid for it; before any base (after a start, a drive failure, a rebuild's start,
//! or a new superblock generation the driver reports: `forget_checkpoint_base`).
//!
//! What pays for images: eight bytes written by requests per image byte (all copies),
//! credit carried over between checkpoints; a reset that waits for a checkpoint pays for
//! images of up to an eighth of the data room it frees (at the paper's scale an
//! incremental image mostly fits, so most resets wait for one; full images come from the
//! credit). Not at any scale: the directory grows with the array, the room a reset frees
//! with a zone.
//!
//! Invariants: an incremental image names its base's generation, of the other parity;
//! every table it leaves out is, byte for byte, the one the base holds (asserted in debug
//! builds, which keep the base's tables to compare).

use crate::format::{checkpoint_image_bytes, CheckpointImage, CHECKPOINT_BASE_BYTES};
use crate::stripe_table::CompactStripeTable;

use super::machine::Engine;
use super::state::checkpoints::{CheckpointBase, PendingCheckpoint};
use super::state::segment::{Segment, SegmentState};

/// Bytes written by requests per byte of checkpoint images (a copy per drive): the images
/// cost at most an eighth of what the array is asked to write.
pub(super) const WRITTEN_PER_CHECKPOINT_BYTE: u64 = 8;

/// Images (all copies) up to this size are always paid for: small arrays' images are a
/// few blocks, less than garbage collection moves for one segment.
const CHEAP_CHECKPOINT_BYTES: u64 = 1 << 20;

/// The sizes (one copy) of the next checkpoint, full and incremental (None without a base).
struct NextImage {
    full_bytes: u64,
    incremental_bytes: Option<u64>,
}

impl Engine {
    /// Whether a start after a crash now would count a drive failed whose chunks in the
    /// open segments only the engine can place: one is failed, or being rebuilt.
    pub(super) fn places_only_in_memory(&self) -> bool {
        self.failed.iter().any(|f| *f) || self.drive_rebuild.is_some()
    }

    /// The segments a checkpoint describes with a stripe table, and the table's bytes (open
    /// ones only while a drive is failed or rebuilt: `Engine::checkpoint`).
    fn tabled_segments(&self) -> impl Iterator<Item = (&Segment, u64)> + '_ {
        let open_tables = self.places_only_in_memory();
        self.segments
            .iter()
            .flatten()
            .filter(move |s| s.table.is_some() && (open_tables || s.state != SegmentState::Open))
            .map(|s| (s, CompactStripeTable::encoded_bytes(&s.layout) as u64))
    }

    fn next_image(&self) -> NextImage {
        let segments = self.segments.iter().flatten().count();
        let pages = self.l2p.page_count();
        let (mut all, mut new) = (0, 0);
        for (seg, bytes) in self.tabled_segments() {
            all += bytes;
            if !self.base_holds(seg, bytes) {
                new += bytes;
            }
        }
        let incremental = self.checkpoints.base.as_ref().map(|_| {
            checkpoint_image_bytes(segments, pages, new) + CHECKPOINT_BASE_BYTES as u64 + self.lost_list_bytes()
        });
        NextImage {
            full_bytes: checkpoint_image_bytes(segments, pages, all) + self.lost_list_bytes(),
            incremental_bytes: incremental,
        }
    }

    /// Whether the base holds this segment's table as it is (`bytes` long).
    pub(super) fn base_holds(&self, seg: &Segment, bytes: u64) -> bool {
        let base = self.checkpoints.base.as_ref();
        base.is_some_and(|b| b.tables.get(&seg.zone) == Some(&(seg.sequence, bytes)))
    }

    /// Bytes all copies of an image of `image_bytes` take: one per drive neither failed nor
    /// being rebuilt (the driver writes none there).
    fn images_bytes(&self, image_bytes: u64) -> u64 {
        let rebuilding = self.drive_rebuild.as_ref().map(|r| r.drive);
        let copies = (0..self.failed.len()).filter(|d| !self.failed[*d] && rebuilding != Some(*d)).count();
        image_bytes * copies as u64
    }

    /// Bytes of images the writes since the last checkpoint (and the credit left over
    /// before) pay for.
    fn checkpoint_credit_bytes(&self) -> u64 {
        let written = self.checkpoints.blocks_written * self.block_bytes() as u64;
        self.checkpoints.credit_bytes + written / WRITTEN_PER_CHECKPOINT_BYTE
    }

    fn paid_for(&self, image_bytes: u64) -> bool {
        let images = self.images_bytes(image_bytes);
        images <= CHEAP_CHECKPOINT_BYTES || self.checkpoint_credit_bytes() >= images
    }

    /// Whether the next checkpoint is incremental (given a base in the other copy), and
    /// its bytes (one copy).
    fn next_checkpoint_kind(&self) -> (bool, u64) {
        let next = self.next_image();
        let base = self.checkpoints.base.as_ref();
        // Incremental when it leaves a table out, and either the incremental images since
        // the base have not yet written as much as the base, or a full one is not paid for.
        match (base, next.incremental_bytes) {
            (Some(b), Some(bytes))
                if bytes < next.full_bytes
                    && (b.incremental_bytes + bytes < b.image_bytes || !self.paid_for(next.full_bytes)) =>
            {
                (true, bytes)
            }
            _ => (false, next.full_bytes),
        }
    }

    /// Whether requests wrote enough to pay for the images of the next checkpoint (full
    /// or incremental, as it would be taken), or they are small, or they are at most
    /// `funded_bytes` (all copies: what a reset waiting for it frees pays for).
    pub(super) fn checkpoint_paid_for(&self, funded_bytes: u64) -> bool {
        let image_bytes = self.next_checkpoint_kind().1;
        self.images_bytes(image_bytes) <= funded_bytes || self.paid_for(image_bytes)
    }

    /// Whether the checkpoint of generation `generation` taken now leaves out the tables
    /// its base holds: there is a base, in the other copy, and it is worth it.
    pub(super) fn checkpoint_incremental(&self, generation: u64) -> Option<u64> {
        let base = self.checkpoints.base.as_ref()?;
        let other_copy = base.generation % 2 != generation % 2 && base.generation < generation;
        let same_failures = base.failed == self.failed;
        (other_copy && same_failures && self.next_checkpoint_kind().0).then_some(base.generation)
    }

    /// Notes the checkpoint about to be handed out (`image` as encoded: tables left in
    /// the base are empty), for `checkpoint_written`.
    pub(super) fn note_checkpoint_taken(&mut self, image: &CheckpointImage) {
        let image_bytes = image.image_len();
        self.checkpoints.pending = Some(match image.base_generation {
            Some(_) => PendingCheckpoint::Incremental { image_bytes },
            // An appending segment's table (a drive failed) grows after it: not one to
            // leave out later.
            None => PendingCheckpoint::Full(CheckpointBase {
                generation: image.generation,
                failed: self.failed.clone(),
                tables: image
                    .segments
                    .iter()
                    .filter(|s| !s.table.is_empty() && !s.appending)
                    .map(|s| (s.zone, (s.sequence, s.table.len() as u64)))
                    .collect(),
                image_bytes,
                incremental_bytes: 0,
                #[cfg(debug_assertions)]
                encoded: image.segments.iter().filter(|s| !s.appending).map(|s| (s.zone, s.table.clone())).collect(),
            }),
        });
    }

    /// The checkpoint handed out last was written (`written`) or not: a full one becomes
    /// the base; what it cost is taken from the credit.
    pub(super) fn note_checkpoint_written(&mut self, written: bool) {
        let credit = self.checkpoint_credit_bytes();
        let funded = std::mem::take(&mut self.checkpoints.funded_bytes);
        self.checkpoints.blocks_written = 0;
        let Some(pending) = self.checkpoints.pending.take().filter(|_| written) else {
            self.checkpoints.credit_bytes = credit;
            return;
        };
        let image_bytes = match pending {
            PendingCheckpoint::Full(base) => {
                let bytes = base.image_bytes;
                self.checkpoints.base = Some(base);
                bytes
            }
            PendingCheckpoint::Incremental { image_bytes } => {
                if let Some(base) = self.checkpoints.base.as_mut() {
                    base.incremental_bytes += image_bytes;
                }
                self.checkpoints.incremental += 1;
                image_bytes
            }
        };
        self.checkpoints.image_bytes_written += image_bytes;
        // Credit left over is kept, up to two full images: a quiet spell does not buy a
        // burst of checkpoints later.
        let cap = 2 * self.images_bytes(self.next_image().full_bytes);
        let unfunded = self.images_bytes(image_bytes).saturating_sub(funded);
        self.checkpoints.credit_bytes = credit.saturating_sub(unfunded).min(cap);
    }

    /// The next checkpoint is full: tables may have changed under the base (a rebuild
    /// placed chunks anew), or the array's superblock generation moved on (a failure,
    /// rebuild or replacement recorded: a start refuses an incremental image whose base
    /// goes with another superblock generation). Drivers call it when they record a new
    /// superblock generation.
    pub fn forget_checkpoint_base(&mut self) {
        self.checkpoints.base = None;
    }

    /// Debug builds: a table left out is the base's, byte for byte.
    #[cfg(debug_assertions)]
    pub(super) fn assert_base_table(&self, zone: u32, table: &[u8]) {
        let base = self.checkpoints.base.as_ref().expect("a table left out has a base");
        assert!(
            base.encoded.get(&zone).is_some_and(|t| t == table),
            "zone {zone}'s stripe table changed since the checkpoint base"
        );
    }
}
