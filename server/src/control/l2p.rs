//! The L2P table's part of `zapraid status`: its memory budget, what is cached and dirty,
//! the hit rate, the mapping blocks read and written (in all and per second since the
//! start) and the pages rebuilt from the log because their mapping block was unreadable.
//! The engine keeps the counts (`zapraid_engine::L2pStatus`); this says them.

use crate::run::status::ArrayStatus;

/// The `l2p` object of the status JSON.
pub fn status_json(s: &ArrayStatus) -> serde_json::Value {
    let l2p = &s.engine.l2p;
    let per_s = |count: u64| if s.uptime_s > 0.0 { count as f64 / s.uptime_s } else { 0.0 };
    serde_json::json!({
        // null: the whole table stays in memory.
        "budget_bytes": l2p.budget_bytes,
        "memory_bytes": l2p.memory_bytes,
        "pages": l2p.pages,
        "entries_per_page": l2p.entries_per_page,
        "cached_pages": l2p.cached_pages,
        // The most ever cached at once: the budget, plus pages pinned by work in flight.
        "peak_cached_pages": l2p.peak_cached_pages,
        "dirty_pages": l2p.dirty_pages,
        "pages_on_drives": l2p.pages_on_drives,
        "hit_rate_percent": l2p.hit_rate_percent(),
        "mapping_reads": l2p.mapping_reads,
        "mapping_writes": l2p.mapping_writes,
        "mapping_reads_per_s": per_s(l2p.mapping_reads),
        "mapping_writes_per_s": per_s(l2p.mapping_writes),
        "evictions": l2p.evictions,
        // Pages whose mapping block could not be read, even from parity, rebuilt from the
        // segments' footers since the start.
        "mapping_pages_rebuilt": l2p.pages_rebuilt,
        // Checkpoints taken while running (a crash replays only what came after the
        // newest), and those abandoned (no room, or not written).
        "checkpoints_running": l2p.checkpoints_running,
        "checkpoints_abandoned": l2p.checkpoints_abandoned,
        // Of those taken while running, the incremental ones (only the stripe tables
        // changed since the last full one), and the bytes of all their images (a copy).
        "checkpoints_incremental": l2p.checkpoints_incremental,
        "checkpoint_image_bytes": l2p.checkpoint_image_bytes,
    })
}
