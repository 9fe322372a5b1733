//! Checkpoints taken while the array runs, so that a crash replays only what came after
//! the newest one: every `CHECKPOINT_INTERVAL_SEGMENTS` segments opened, and before
//! garbage collection resets a segment (a checkpoint naming a segment that is gone is
//! stale, so the reset waits for one that no longer maps anything into it).
//!
//! The engine drains as for a clean stop (new requests are held, open stripes padded and
//! written, nothing in flight, every dirty page written back), but the open segments stay
//! open: the checkpoint marks them appending, and recovery replays them, taking only their
//! entries from the checkpoint's next timestamp on (the pages hold everything older: no
//! block with an older timestamp waits anywhere once the engine has drained). The driver
//! writes the image (`Engine::checkpoint`) and says so (`Engine::checkpoint_written`);
//! then the held requests run, in order.
//!
//! Also while a drive is failed: an appending segment's chunks on it have no place on the
//! drives that recovery could find again (Zone Append chose it, or the engine when the
//! chunk never landed), so the checkpoint then carries the appending segments' stripe
//! tables as far as they were written, and recovery keeps those places
//! (`recovery::assemble`). So also while a rebuild runs (a start after a crash counts the
//! drive being rebuilt failed): while one drains the rebuild lets the step under way
//! finish (its commands follow one another until the segment's step is done, a footer
//! check may adopt placements and mark pages dirty, written back before the image) and
//! starts no other; it goes on after it.
//!
//! A scrub pauses while one drains: it issues no read, and the stripes whose reads
//! complete meanwhile are read again after it (they are not checked then: a repair may
//! not begin during a drain, and `schedule_repair` refuses one).
//!
//! Invariants: a running checkpoint begins only when nothing else that rewrites blocks
//! with their old timestamps is under way or waiting (no repair or relocation,
//! except one waiting at its reset with every block moved), so that every
//! block written after it into a segment it does not name is either newer than it or a
//! copy of a block still mapped after it; it begins only when the open segments and empty
//! zones have room for the pages it writes back, and a checkpoint that cannot finish
//! (a mapping block failed) is abandoned, never waited for: the array goes on without it.

use crate::capacity::{GC_RESERVED_ZONES, GC_START_FREE_ZONES, RECOVERY_RESERVED_ZONES};

use super::checkpoint_base::WRITTEN_PER_CHECKPOINT_BYTE;
use super::machine::{Engine, CLASSES};
use super::request::{Request, RequestId};
use super::state::stop::StopState;

/// Segments opened since the last checkpoint after which the engine takes one while
/// running: a crash then replays about this many segments, and those open at it.
pub(super) const CHECKPOINT_INTERVAL_SEGMENTS: u64 = 8;

impl Engine {
    /// Whether a running checkpoint is draining or waiting to be written: new requests are
    /// held until it is done (a clean stop asked for meanwhile begins after it).
    pub fn checkpoint_in_progress(&self) -> bool {
        matches!(self.stop, StopState::Checkpointing | StopState::CheckpointReady)
    }

    /// Holds a request that came while a running checkpoint drains.
    pub(super) fn hold(&mut self, id: RequestId, request: Request) {
        debug_assert!(self.checkpoint_in_progress());
        self.checkpoints.held.push_back((id, request));
    }

    /// A clean stop asked for while a running checkpoint drains begins once it is done.
    pub(super) fn stop_after_checkpoint(&mut self) {
        debug_assert!(self.checkpoint_in_progress());
        self.checkpoints.stop_after.get_or_insert(self.checkpoints.held.len());
    }

    /// Whether the engine has drained for a running checkpoint: the driver writes
    /// `checkpoint` and then calls `checkpoint_written`. Nothing is in flight meanwhile.
    pub fn checkpoint_ready(&self) -> bool {
        self.stop == StopState::CheckpointReady
    }

    /// The running checkpoint the engine drained for was written to the drives (or, with
    /// `written` false, could not be): held requests run, and a segment whose reset
    /// waited for it is reset.
    pub fn checkpoint_written(&mut self, written: bool, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
        if self.stop != StopState::CheckpointReady {
            debug_assert!(false, "checkpoint_written without a running checkpoint drained");
            return;
        }
        if !written {
            tracing::warn!("the running checkpoint was not written: a crash before the next one replays more");
        }
        self.resume_after_checkpoint(written);
    }

    /// Pages a checkpoint now would write back, at most: the dirty ones, and those that
    /// entries recovered by a full replay still wait for in memory.
    fn checkpoint_pages(&self) -> u64 {
        (self.l2p.dirty_pages() + self.l2p.overlaid_pages_at_most()) as u64
    }

    /// Data blocks the segments open for mapping blocks can still take, plus whole
    /// segments in the empty zones frontend stripes may open while a relocation runs.
    fn checkpoint_room_blocks(&self) -> u64 {
        let class = self.mapping_class();
        let layout = self.plan.class_layout(class);
        let open = self.open_room_blocks(class);
        let openable = self.free_zones.len().saturating_sub(RECOVERY_RESERVED_ZONES + GC_RESERVED_ZONES) as u64;
        open + openable * layout.stripes * layout.stripe_data_blocks()
    }

    /// Data blocks a running checkpoint may pad at most: each frontend stripe open, and
    /// the last stripe of mapping blocks.
    fn checkpoint_padding_blocks(&self) -> u64 {
        let class = self.mapping_class();
        (CLASSES as u64 + 1) * self.plan.class_layout(class).stripe_data_blocks()
    }

    /// Whether a running checkpoint may begin now, writing back `pages` pages: the array
    /// keeps one, it runs with nothing that rewrites old blocks under way (see the module
    /// documentation), not on the recovery reserve, and there is room for the pages, the
    /// stripes queued and the padding.
    fn may_checkpoint_while_running(&self, pages: u64, funded_bytes: u64) -> bool {
        let class = self.mapping_class();
        let stripe_blocks = self.plan.class_layout(class).stripe_data_blocks();
        let queued: u64 = self.queued.iter().map(|q| q.len() as u64).sum();
        self.config.l2p.checkpoint
            && self.stop == StopState::Running
            && !self.restoring_reserve
            && self.retiring.is_empty()
            && self.repairs.pending.is_empty()
            && self.overlay_drained()
            && pages + queued * stripe_blocks + self.checkpoint_padding_blocks() <= self.checkpoint_room_blocks()
            && self.checkpoint_paid_for(funded_bytes)
    }

    /// Takes a running checkpoint once enough segments were opened since the last one,
    /// when nothing but frontend I/O runs; whether it began (the stripes it padded are
    /// queued: the caller runs the loop again to issue them, since nothing else may).
    pub(super) fn maybe_begin_periodic_checkpoint(&mut self) -> bool {
        // Not while empty zones run low: what it writes and pads would be taken from
        // garbage collection's room (`capacity` counts no checkpoint).
        let due = self.checkpoints.segments_opened >= CHECKPOINT_INTERVAL_SEGMENTS
            && self.relocation.is_none()
            && self.free_zones.len() > GC_START_FREE_ZONES
            && self.may_checkpoint_while_running(self.checkpoint_pages(), 0);
        if due {
            self.begin_running_checkpoint(0);
        }
        due
    }

    /// Whether the reset of the relocated segment in `zone` (every live block moved,
    /// nothing in flight) waits for a running checkpoint: one is draining, or one begins
    /// now for it (if it may, and what it writes and pads is at most half of what the
    /// reset frees, so that collection keeps its headway). Otherwise the reset goes ahead,
    /// and a checkpoint naming the segment goes stale (a crash before the next one replays
    /// everything).
    pub(super) fn reset_waits_for_checkpoint(&mut self, zone: u32) -> bool {
        if self.relocation.as_ref().expect("relocating").checkpoint_passed {
            return false;
        }
        if self.checkpoint_in_progress() {
            self.relocation.as_mut().expect("relocating").awaits_checkpoint = true;
            return true;
        }
        let layout = self.seg(zone).layout;
        let pages = self.checkpoint_pages();
        let frees_blocks = layout.stripes * layout.stripe_data_blocks();
        let worth = pages + self.checkpoint_padding_blocks() <= frees_blocks / 2;
        // The room the reset frees pays for images of an eighth of it, as writes do: at
        // the paper's scale an incremental image (the directory, the records and the tables
        // sealed since its base) mostly fits, so most resets wait for one.
        let funded_bytes = frees_blocks * self.block_bytes() as u64 / WRITTEN_PER_CHECKPOINT_BYTE;
        if !worth || !self.may_checkpoint_while_running(pages, funded_bytes) {
            self.relocation.as_mut().expect("relocating").checkpoint_passed = true;
            return false;
        }
        self.relocation.as_mut().expect("relocating").awaits_checkpoint = true;
        self.begin_running_checkpoint(funded_bytes);
        true
    }

    /// Begins one, `funded_bytes` of its images paid for by the reset waiting for it.
    fn begin_running_checkpoint(&mut self, funded_bytes: u64) {
        debug_assert!(self.stop == StopState::Running);
        self.checkpoints.funded_bytes = funded_bytes;
        tracing::debug!(segments_opened = self.checkpoints.segments_opened, "running checkpoint: draining");
        self.stop = StopState::Checkpointing;
        self.pad_frontend_stripes();
        let relocation_quiet = self.relocation.as_ref().is_none_or(|r| r.awaits_checkpoint);
        self.repairs.unpadded |= self.gc_open_stripe.is_some() && relocation_quiet;
    }

    /// Moves a draining running checkpoint on: once nothing is in flight or waiting, the
    /// table is written back, and then the engine waits for the driver to write the image.
    pub(super) fn advance_running_checkpoint(&mut self) {
        if self.stop != StopState::Checkpointing {
            return;
        }
        // Stripes (mapping blocks among them) wait for a zone that only the reset waiting
        // for this checkpoint frees: the reset goes first (the checkpoint the drives hold
        // goes stale until this one is written, as without the wait).
        let starved = self.queued.iter().any(|q| !q.is_empty()) && self.free_zones.len() <= self.zones_to_leave(false);
        if let Some(r) = self.relocation.as_mut().filter(|r| r.awaits_checkpoint && starved) {
            tracing::debug!(
                zone = r.zone,
                "running checkpoint: stripes wait for room, the relocated segment is reset first"
            );
            r.awaits_checkpoint = false;
            r.checkpoint_passed = true;
            return self.pump();
        }
        let relocation_quiet = self.relocation.as_ref().is_none_or(|r| r.awaits_checkpoint);
        let idle = self.drained() && relocation_quiet && self.repairs.pending.is_empty();
        if !idle {
            return;
        }
        if self.write_back_for_checkpoint() {
            return self.pump(); // the mapping blocks go out; this comes back when idle
        }
        if self.mapping.checkpoint_abandoned || !self.l2p.is_checkpointable() {
            tracing::warn!("running checkpoint abandoned: a mapping block could not be written");
            return self.resume_after_checkpoint(false);
        }
        self.stop = StopState::CheckpointReady;
    }

    fn resume_after_checkpoint(&mut self, written: bool) {
        self.stop = StopState::Running;
        self.mapping.checkpoint_abandoned = false;
        self.checkpoints.segments_opened = 0;
        self.note_checkpoint_written(written);
        if written {
            self.checkpoints.taken += 1;
        } else {
            self.checkpoints.abandoned += 1;
        }
        if let Some(r) = self.relocation.as_mut().filter(|r| r.awaits_checkpoint) {
            r.awaits_checkpoint = false;
            r.checkpoint_passed = true;
        }
        let held = std::mem::take(&mut self.checkpoints.held);
        let stop_after = self.checkpoints.stop_after.take();
        for (i, (id, request)) in held.into_iter().enumerate() {
            if stop_after == Some(i) {
                self.stop(self.now_ns);
            }
            self.submit(id, request, self.now_ns);
        }
        if stop_after.is_some() && self.stop == StopState::Running {
            self.stop(self.now_ns); // nothing was held after it
        }
        self.settle();
    }
}
