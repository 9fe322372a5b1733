//! Clean stop: new writes are refused, open stripes are padded and written, garbage
//! collection finishes, and the open segment gets a stop footer after its data (its
//! blocks' footer entries), so that the next start reads that instead of every block's
//! metadata.

use crate::format::footer_entries_per_block;

use super::*;

/// Progress of a clean stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StopState {
    Running,
    /// No new writes; waiting for stripes, flushes and garbage collection to finish.
    Draining,
    /// Stop footers in flight, on this many drives.
    WritingFooters(usize),
    Stopped,
}

impl Engine {
    /// Starts a clean stop: new writes are refused, the open stripe is padded and written,
    /// running garbage collection finishes, and then the open segment gets a stop footer
    /// after its data (its blocks' footer entries), so that the next start reads that
    /// instead of every block's metadata. Drive the engine until `is_stopped`.
    pub fn stop(&mut self, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
        if self.stop == StopState::Running {
            self.stop = StopState::Draining;
            self.pad_open_stripe(false);
            self.pump();
        }
    }

    /// Whether a clean stop has finished: everything written is on the drives.
    pub fn is_stopped(&self) -> bool {
        self.stop == StopState::Stopped
    }

    pub(super) fn advance_stop(&mut self) {
        let idle = self.ops.is_empty()
            && self.open_stripe.is_none()
            && self.gc_open_stripe.is_none()
            && self.queued.is_empty()
            && self.gc_queued.is_empty()
            && self.stripes.is_empty()
            && self.relocation.is_none();
        if self.stop != StopState::Draining || !idle {
            return;
        }
        self.stop = StopState::Stopped;
        let Some(zone) = self.open_segment else { return };
        let seg = self.seg(zone);
        let issued = seg.group * self.layout.group_size + seg.group_issued;
        let entries = issued * self.layout.chunk_blocks;
        let per_block = footer_entries_per_block(self.geometry.block_size_bytes) as u64;
        let blocks = entries.div_ceil(per_block);
        let start_blocks = self.layout.data_start_blocks() + entries;
        if entries == 0 || start_blocks + blocks > self.layout.footer_start_blocks() {
            return; // nothing to record, or no room: the next start reads the metadata
        }
        let live: Vec<usize> = (0..self.layout.drives()).filter(|d| !self.failed[*d]).collect();
        if live.is_empty() {
            return;
        }
        self.stop = StopState::WritingFooters(live.len());
        let place = FooterPlace::Stop { start_blocks, blocks, entries: entries as usize };
        for drive in live {
            self.write_footer_blocks(zone, drive, 0, place);
        }
    }
}
