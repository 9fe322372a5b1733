//! A declustered array's part of `zapraid status` (issue 35): its placement (N drives,
//! stripes of k + m, segments and spare zones per zone index) and where its distributed
//! spare space stands: spare zones on working drives, those a failed drive's chunks took,
//! the failed drives rebuilt into it, the segments lacking more chunks than parity
//! covers, those waiting to move back to a replaced drive (the rebalance), and after a
//! `grow` the zone indexes still in an earlier placement. Null for a classic array. The
//! engine keeps the figures
//! (`zapraid_engine::DeclusteredStatus`); this says them.

use crate::run::status::ArrayStatus;

/// The `declustered` object of the status JSON (null for a classic array).
pub fn status_json(s: &ArrayStatus) -> serde_json::Value {
    let Some(d) = &s.engine.declustered else { return serde_json::Value::Null };
    serde_json::json!({
        "drives": d.drives,
        "stripe_drives": d.stripe_drives,
        "segments_per_zone_index": d.segments_per_row,
        "spare_zones_per_zone_index": d.spare_zones_per_row,
        "distributed_spares": d.distributed_spares,
        "spare_zones": d.spare_zones,
        "spare_zones_used": d.spare_zones_used,
        "spare_space_used": d.spare_zones_used > 0,
        "drives_in_spare_space": d.drives_in_spare_space,
        "segments_beyond_parity": d.segments_beyond_parity,
        // Segments in spare space that garbage collection is to move back to a drive that
        // works again (a replaced one), one at a time.
        "segments_to_rebalance": d.segments_to_rebalance,
        // Live blocks the rebalance moved since the server started.
        "blocks_rebalanced": d.blocks_rebalanced,
        // Placements the array has had (1 until a grow), zone indexes still in an earlier
        // one (garbage collection moves their segments onto the grown placement), and
        // zone indexes moved to the newest since the server started.
        "placements": d.placements,
        "zone_indexes_to_grow": d.rows_to_grow,
        "zone_indexes_grown": d.rows_grown,
    })
}

/// Failed drives that still hold chunks (not rebuilt into spare space): the array is
/// degraded while there are any.
pub fn failed_holding_chunks(s: &ArrayStatus) -> Vec<usize> {
    let spared = s.engine.declustered.as_ref().map(|d| d.drives_in_spare_space.as_slice()).unwrap_or(&[]);
    s.engine.failed_drives.iter().copied().filter(|d| !spared.contains(d)).collect()
}
