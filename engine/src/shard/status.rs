//! The status of an array of shards: each shard's, and their sum as one array's. Counts
//! add up; what every shard shares (failed drives, the rebuild's drive and rate) is said
//! once; a rebuild or a scrub runs while any shard's does (their counts summed), a start
//! began from a checkpoint when every shard's did (the oldest generation), and a rebuild
//! completed when every shard's did (the fewest any shard completed).

use crate::engine::{L2pStatus, RebuildStatus, ScrubReport, Status};
use crate::recovery::{RecoveryReport, Repairs};

/// Each shard's status and the array's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardedStatus {
    pub total: Status,
    pub shards: Vec<Status>,
}

impl ShardedStatus {
    pub fn of(shards: Vec<Status>) -> ShardedStatus {
        ShardedStatus { total: sum(&shards), shards }
    }
}

fn sum(shards: &[Status]) -> Status {
    let add = |f: fn(&Status) -> u64| shards.iter().map(f).sum::<u64>();
    let add32 = |f: fn(&Status) -> u32| shards.iter().map(f).sum::<u32>();
    let mut failed_drives: Vec<usize> = shards.iter().flat_map(|s| s.failed_drives.iter().copied()).collect();
    failed_drives.sort_unstable();
    failed_drives.dedup();
    let rebuilds: Vec<RebuildStatus> = shards.iter().filter_map(|s| s.rebuild).collect();
    let first = shards.first().cloned().unwrap_or_default();
    Status {
        zones: add32(|s| s.zones),
        free_zones: add32(|s| s.free_zones),
        segments: add32(|s| s.segments),
        open_segments: add32(|s| s.open_segments),
        mapped_blocks: add(|s| s.mapped_blocks),
        l2p: l2p(shards),
        failed_drives,
        segments_reclaimed: add(|s| s.segments_reclaimed),
        blocks_relocated: add(|s| s.blocks_relocated),
        segments_to_reclaim: add32(|s| s.segments_to_reclaim),
        recovery_repairs: Repairs {
            damaged_structures: add(|s| s.recovery_repairs.damaged_structures),
            blocks_repaired: add(|s| s.recovery_repairs.blocks_repaired),
            blocks_lost: add(|s| s.recovery_repairs.blocks_lost),
            blocks_dropped: add(|s| s.recovery_repairs.blocks_dropped),
        },
        start: RecoveryReport {
            blocks_read: add(|s| s.start.blocks_read),
            stop_footers_read: add(|s| s.start.stop_footers_read),
            zones_scanned: add(|s| s.start.zones_scanned),
            damaged_headers: add(|s| s.start.damaged_headers),
            damaged_footers: add(|s| s.start.damaged_footers),
            checkpoint_generation: shards.iter().map(|s| s.start.checkpoint_generation).min().flatten(),
            segments_replayed: add(|s| s.start.segments_replayed),
        },
        read_blocks_repaired: add(|s| s.read_blocks_repaired),
        // Shards that finished their part of a rebuild report none: the rest is the
        // array's.
        rebuild: rebuilds.first().map(|r| RebuildStatus {
            drive: r.drive,
            segments_rebuilt: add(|s| s.rebuild.map_or(0, |r| r.segments_rebuilt)),
            segments_left: add(|s| s.rebuild.map_or(0, |r| r.segments_left)),
            segments_unreclaimable: add(|s| s.rebuild.map_or(0, |r| r.segments_unreclaimable)),
            segments_kept: add(|s| s.rebuild.map_or(0, |r| r.segments_kept)),
            blocks_written: add(|s| s.rebuild.map_or(0, |r| r.blocks_written)),
            blocks_unrecoverable: add(|s| s.rebuild.map_or(0, |r| r.blocks_unrecoverable)),
            into_spares: r.into_spares,
        }),
        rebuilds_completed: shards.iter().map(|s| s.rebuilds_completed).min().unwrap_or(0),
        scrub: crate::engine::ScrubStatus {
            running: scrub_sum(shards.iter().map(|s| s.scrub.running)),
            last: scrub_sum(shards.iter().map(|s| s.scrub.last)),
            rate_bytes_per_s: first.scrub.rate_bytes_per_s,
            read_repairs_scheduled: add(|s| s.scrub.read_repairs_scheduled),
            read_repairs_done: add(|s| s.scrub.read_repairs_done),
            repairs_in_flight: add(|s| s.scrub.repairs_in_flight),
        },
        rebuild_rate_bytes_per_s: first.rebuild_rate_bytes_per_s,
        blocks_lost: add(|s| s.blocks_lost),
        segments_with_holes: add32(|s| s.segments_with_holes),
        // Sharded arrays are classic (`ShardMap::check_config`).
        declustered: None,
        rebuild_blocks_unrecoverable: add(|s| s.rebuild_blocks_unrecoverable),
    }
}

fn l2p(shards: &[Status]) -> L2pStatus {
    let add = |f: fn(&L2pStatus) -> u64| shards.iter().map(|s| f(&s.l2p)).sum::<u64>();
    let addz = |f: fn(&L2pStatus) -> usize| shards.iter().map(|s| f(&s.l2p)).sum::<usize>();
    L2pStatus {
        budget_bytes: shards.iter().map(|s| s.l2p.budget_bytes).sum(),
        pages: add(|l| l.pages),
        entries_per_page: shards.first().map_or(0, |s| s.l2p.entries_per_page),
        cached_pages: addz(|l| l.cached_pages),
        dirty_pages: addz(|l| l.dirty_pages),
        pages_on_drives: add(|l| l.pages_on_drives),
        memory_bytes: add(|l| l.memory_bytes),
        pinned_over_budget: shards.iter().any(|s| s.l2p.pinned_over_budget),
        lookups: add(|l| l.lookups),
        hits: add(|l| l.hits),
        mapping_reads: add(|l| l.mapping_reads),
        mapping_writes: add(|l| l.mapping_writes),
        evictions: add(|l| l.evictions),
        peak_cached_pages: add(|l| l.peak_cached_pages),
        pages_rebuilt: add(|l| l.pages_rebuilt),
        checkpoints_running: add(|l| l.checkpoints_running),
        checkpoints_abandoned: add(|l| l.checkpoints_abandoned),
        checkpoints_incremental: add(|l| l.checkpoints_incremental),
        checkpoint_image_bytes: add(|l| l.checkpoint_image_bytes),
    }
}

/// The scrub of every shard that has one, summed (None if none has).
fn scrub_sum(reports: impl Iterator<Item = Option<ScrubReport>>) -> Option<ScrubReport> {
    reports.flatten().reduce(|a, b| ScrubReport {
        segments_checked: a.segments_checked + b.segments_checked,
        segments_left: a.segments_left + b.segments_left,
        stripes_checked: a.stripes_checked + b.stripes_checked,
        blocks_checked: a.blocks_checked + b.blocks_checked,
        bytes_read: a.bytes_read + b.bytes_read,
        blocks_damaged: a.blocks_damaged + b.blocks_damaged,
        parity_mismatches: a.parity_mismatches + b.parity_mismatches,
        blocks_rewritten: a.blocks_rewritten + b.blocks_rewritten,
        blocks_unrecoverable: a.blocks_unrecoverable + b.blocks_unrecoverable,
        stale_blocks_damaged: a.stale_blocks_damaged + b.stale_blocks_damaged,
        stripes_read_again: a.stripes_read_again + b.stripes_read_again,
    })
}
