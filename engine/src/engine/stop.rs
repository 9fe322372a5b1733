//! Clean stop: new writes are refused, open stripes are padded and written, garbage
//! collection finishes, and the open segment gets a stop footer after its data (its
//! blocks' footer entries), so that the next start reads that instead of every block's
//! metadata.

use std::collections::VecDeque;

use crate::format::footer_entries_per_block;

use super::machine::Engine;
use super::state::segment::FooterPlace;
use super::state::stop::StopState;

impl Engine {
    /// Starts a clean stop: new writes are refused, open stripes are padded and written,
    /// running garbage collection finishes, and then every open segment gets a stop footer
    /// after its data (its blocks' footer entries), so that the next start reads that
    /// instead of every block's metadata. Drive the engine until `is_stopped`.
    pub fn stop(&mut self, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
        if self.checkpoint_in_progress() {
            return self.stop_after_checkpoint();
        }
        if self.stop == StopState::Running {
            self.stop = StopState::Draining;
            self.pad_frontend_stripes();
            self.repairs.unpadded |= self.gc_open_stripe.is_some() && self.relocation.is_none();
            self.pump();
        }
    }

    /// Whether a clean stop has finished: everything written is on the drives.
    pub fn is_stopped(&self) -> bool {
        self.stop == StopState::Stopped
    }

    /// Nothing in flight, no stripe open or waiting, no request waiting for a page: what
    /// a stop (and a running checkpoint) waits for before it writes the table back.
    pub(super) fn drained(&self) -> bool {
        self.ops.is_empty()
            && self.open_stripes.iter().all(Option::is_none)
            && self.gc_open_stripe.is_none()
            && self.queued.iter().all(VecDeque::is_empty)
            && self.gc_queued.is_empty()
            && self.stripes.is_empty()
            && self.mapping_idle()
    }

    pub(super) fn advance_stop(&mut self) {
        let idle = self.drained() && self.relocation.is_none();
        if self.stop != StopState::Draining || !idle {
            return;
        }
        if self.write_back_for_checkpoint() {
            return self.pump(); // the mapping blocks go out; the stop comes back when idle
        }
        self.stop = StopState::Stopped;
        let per_block = footer_entries_per_block(self.geometry.block_size_bytes) as u64;
        let mut footers = Vec::new();
        let slots: Vec<u32> = self.slots.iter().flatten().copied().collect();
        for zone in &slots {
            let seg = self.seg(*zone);
            let issued = seg.group * seg.layout.group_size + seg.group_issued;
            let entries = issued * seg.layout.chunk_blocks;
            let blocks = entries.div_ceil(per_block);
            let start_blocks = seg.layout.data_start_blocks() + entries;
            if entries == 0 || start_blocks + blocks > seg.layout.footer_start_blocks() {
                continue; // nothing to record, or no room: the next start reads the metadata
            }
            self.seg_mut(*zone).closed_at_stop = true;
            let holding: Vec<usize> = (0..self.layout.drives()).filter(|d| self.holds(*zone, *d)).collect();
            footers.push((*zone, holding, FooterPlace::Stop { start_blocks, blocks, entries: entries as usize }));
        }
        let writes: usize = footers.iter().map(|(_, holding, _)| holding.len()).sum();
        if writes == 0 {
            return;
        }
        self.stop = StopState::WritingFooters(writes);
        for (zone, holding, place) in footers {
            for drive in holding {
                self.write_footer_blocks(zone, drive, 0, place);
            }
        }
    }
}
