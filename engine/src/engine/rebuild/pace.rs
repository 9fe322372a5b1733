//! The rebuild's rate limit as the engine sets and reads it (`set_rebuild_rate`,
//! `rebuild_wake_ns`), and its bucket's size for the array's drives and layouts
//! (`rebuild_pace`). The token bucket itself is `state::pace`'s.

use zapraid_zns::Geometry;

use crate::engine::machine::Engine;
use crate::engine::state::pace::Pace;
use crate::engine::state::stop::StopState;
use crate::layout::Layout;

/// Chunk writes a paced rebuild may make at once after waiting (the bucket's capacity):
/// a driver that wakes the engine a little late loses none of the rate.
const PACE_BURST_WRITES: u64 = 8;

impl Engine {
    /// Paces rebuilds (the running one and later ones) to write at most `rate_bytes_per_s`
    /// to the new drive, from now on; `None` or 0: as fast as the drives go. The engine
    /// asks for a `tick` (`next_timer_ns`) when a paced rebuild may go on.
    pub fn set_rebuild_rate(&mut self, rate_bytes_per_s: Option<u64>) {
        self.rebuild_pace.set_rate(rate_bytes_per_s, self.now_ns);
        tracing::info!(rate_bytes_per_s, "rebuild rate set");
        self.settle();
    }

    /// The rebuild's rate limit, if any (`set_rebuild_rate`).
    pub fn rebuild_rate_bytes_per_s(&self) -> Option<u64> {
        self.rebuild_pace.rate_bytes_per_s()
    }

    /// The most a paced rebuild writes beyond its rate: by any moment t ns after the rate
    /// was set, it has written at most this plus rate x t / 1e9 bytes to the new drive.
    pub fn rebuild_burst_bytes(&self) -> u64 {
        self.rebuild_pace.capacity_bytes()
    }

    /// When a paced rebuild (or rebalance, `rebalance`) may go on, if it waits for its
    /// bucket.
    pub(in crate::engine) fn rebuild_wake_ns(&self) -> Option<u64> {
        let running = (self.drive_rebuild.is_some() && self.stop == StopState::Running) || self.rebalancing();
        self.rebuild_pace.wake_at_ns().filter(|at| running && *at > self.now_ns)
    }
}

/// The token bucket of rebuilds on drives of `geometry` with segments of `layouts`: it
/// holds `PACE_BURST_WRITES` of the largest chunk, and at least the largest write a
/// rebuild makes (a chunk, a header or a footer piece of up to a transfer).
pub(in crate::engine) fn rebuild_pace(geometry: &Geometry, layouts: &[Layout]) -> Pace {
    let largest_chunk = layouts.iter().map(|l| l.chunk_blocks).max().unwrap_or(1);
    let largest_write = largest_chunk.max(u64::from(geometry.max_transfer_blocks));
    let blocks = (PACE_BURST_WRITES * largest_chunk).max(largest_write);
    Pace::new(blocks * u64::from(geometry.block_size_bytes))
}
