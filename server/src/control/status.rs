//! The status document of a running array (`zapraid status --json`, the control
//! socket's `status`): the array's identity from its superblock beside the engine's and
//! driver's counters, every figure a named field with its unit in the name.

use super::{declustered, l2p, scrub};
use crate::ops::identity::Identity;
use crate::run::status::ArrayStatus;

/// The status document (`zapraid status --json`).
pub fn status_json(identity: &Identity, s: &ArrayStatus) -> serde_json::Value {
    let block = u64::from(s.block_size_bytes);
    let (data_drives, parity_drives) = identity.level.shape();
    let failed = &s.engine.failed_drives;
    let holding_chunks = declustered::failed_holding_chunks(s);
    let drives: Vec<serde_json::Value> = identity
        .drives
        .iter()
        .enumerate()
        .map(|(i, path)| {
            // An absent drive is failed (the engine sends it nothing) and has no path.
            serde_json::json!({
                "index": i,
                "path": path,
                "canonical_path": identity.canonical_drives.get(i).cloned().flatten(),
                // A declustered array's failed drive whose chunks were all rebuilt into
                // distributed spare space (it stays failed, holding nothing).
                "in_spare_space": !holding_chunks.contains(&i) && failed.contains(&i),
                "state": if failed.contains(&i) {
                    "failed"
                } else if s.engine.rebuild.is_some_and(|r| r.drive == i) {
                    "rebuilding"
                } else {
                    "ok"
                },
                "missing": path.is_none(),
            })
        })
        .collect();
    // Data is lost when blocks are recorded lost or known to be (segments with holes), or
    // when more drives failed than the level survives: for a declustered array, when a
    // segment lacks more chunks than parity covers (drives rebuilt into spare space hold
    // none).
    let beyond_tolerance = match &s.engine.declustered {
        Some(d) => d.segments_beyond_parity > 0,
        None => failed.len() > identity.level.tolerated_failures(),
    };
    let data_lost = s.engine.blocks_lost > 0 || s.engine.segments_with_holes > 0 || beyond_tolerance;
    let state = if s.stopping {
        "stopping"
    } else if data_lost {
        "data_lost"
    } else if s.engine.rebuild.is_some() {
        "rebuilding"
    } else if holding_chunks.is_empty() {
        "optimal"
    } else {
        "degraded"
    };
    serde_json::json!({
        "name": identity.name,
        "uuid": identity.uuid,
        // The server's process: `start --daemon` knows its own server by it (another
        // array of the same name may answer on the socket).
        "pid": std::process::id(),
        // Names and numbers for programs; `zapraid status` rebuilds the level and mode
        // from them (RaidLevel::from_name, Mode::from_name) to show them to people.
        "level": identity.level.name(),
        "data_drives": data_drives,
        "parity_drives": parity_drives,
        "mode": identity.mode.name(),
        "group_size": identity.mode.group_size(),
        "chunk_bytes": identity.chunk_bytes,
        // The open segments (hybrid segment management): Ns of the small chunk (the chunk
        // size above), Nl of the large one (null without large-chunk segments).
        "small_segments": identity.open_segments.small,
        "large_segments": identity.open_segments.large,
        "small_chunk_bytes": identity.chunk_bytes,
        "large_chunk_bytes": (identity.open_segments.large > 0).then_some(identity.open_segments.large_chunk_bytes),
        "device": identity.device,
        "state": state,
        "rebuilding": s.engine.rebuild.is_some(),
        "rebuild": rebuild_json(s),
        // A declustered array's placement and distributed spare space (null: classic).
        "declustered": declustered::status_json(s),
        // Blocks recorded lost (reads of them fail until they are written again), segments
        // still to be reclaimed that hold more such blocks, blocks rebuilds could not
        // reconstruct since the start, and whether more drives failed than the level
        // survives.
        "lost": {
            "blocks": s.engine.blocks_lost,
            "bytes": s.engine.blocks_lost * block,
            "segments_with_holes": s.engine.segments_with_holes,
            "rebuild_blocks_unrecoverable": s.engine.rebuild_blocks_unrecoverable,
            "drives_beyond_tolerance": beyond_tolerance,
        },
        // The rebuilds' rate limit (bytes per second written to the new drive), null:
        // unlimited.
        "rebuild_rate_bytes_per_s": s.engine.rebuild_rate_bytes_per_s,
        "rebuilds_completed": s.engine.rebuilds_completed,
        "scrub": scrub::status_json(s),
        "l2p": l2p::status_json(s),
        "drives": drives,
        "capacity": {
            "block_size_bytes": block,
            "logical_bytes": s.logical_blocks * block,
            "used_bytes": s.engine.mapped_blocks * block,
            "free_bytes": s.logical_blocks.saturating_sub(s.engine.mapped_blocks) * block,
            "zones": s.engine.zones,
            "free_zones": s.engine.free_zones,
        },
        "segments": {
            "in_use": s.engine.segments,
            "open": s.engine.open_segments,
            "reclaimed": s.engine.segments_reclaimed,
            "blocks_relocated": s.engine.blocks_relocated,
            "to_reclaim": s.engine.segments_to_reclaim,
            "with_holes": s.engine.segments_with_holes,
        },
        // What the last start read: the checkpoint it began from (null: it replayed every
        // segment), the segments written after it that it replayed (after a crash), and
        // how many blocks.
        "start": {
            "checkpoint_generation": s.engine.start.checkpoint_generation,
            "segments_replayed": s.engine.start.segments_replayed,
            "blocks_read": s.engine.start.blocks_read,
            "zones_scanned": s.engine.start.zones_scanned,
        },
        "repairs": {
            "damaged_structures_at_start": s.engine.recovery_repairs.damaged_structures,
            "blocks_repaired_at_start": s.engine.recovery_repairs.blocks_repaired,
            "blocks_lost_at_start": s.engine.recovery_repairs.blocks_lost,
            "blocks_dropped_at_start": s.engine.recovery_repairs.blocks_dropped,
            "blocks_repaired_on_read": s.engine.read_blocks_repaired,
        },
        "io": {
            "reads": s.reads,
            "writes": s.writes,
            "flushes": s.flushes,
            "discards": s.discards,
            "bytes_read": s.bytes_read,
            "bytes_written": s.bytes_written,
            "errors": s.errors,
        },
        "latency_us": {
            "read": { "p50": s.read_latency_us[0], "p99": s.read_latency_us[1], "p999": s.read_latency_us[2] },
            "write": { "p50": s.write_latency_us[0], "p99": s.write_latency_us[1], "p999": s.write_latency_us[2] },
        },
        // Engine shards (`format --shards`): the figures above are their sum; each shard's
        // own here (an empty list for an array of one engine).
        "shard_count": s.shards.len().max(1),
        "shards": s.shards.iter().enumerate().map(|(i, shard)| serde_json::json!({
            "index": i,
            "used_bytes": shard.mapped_blocks * block,
            "zones": shard.zones,
            "free_zones": shard.free_zones,
            "segments_in_use": shard.segments,
            "segments_reclaimed": shard.segments_reclaimed,
            "failed_drives": shard.failed_drives,
        })).collect::<Vec<_>>(),
        "uptime_s": s.uptime_s,
    })
}

/// The running rebuild's progress, or null: % done counts segments; the rate is the
/// average since the rebuild started on this server (blocks written to the new drive over
/// the time since), and the ETA the time per segment rebuilt so far times the segments
/// left: null (unknown) until this server has rebuilt a segment, since segments a rebuild
/// before a restart completed are only checked and kept, in no time.
fn rebuild_json(s: &ArrayStatus) -> serde_json::Value {
    let Some(r) = s.engine.rebuild else { return serde_json::Value::Null };
    let total = r.segments_rebuilt + r.segments_left;
    let percent = if total == 0 { 100.0 } else { r.segments_rebuilt as f64 * 100.0 / total as f64 };
    let bytes_written = r.blocks_written * u64::from(s.block_size_bytes);
    let elapsed_s = s.rebuild_elapsed_s.unwrap_or(0.0);
    let rate_mib_s = (elapsed_s > 0.0).then(|| bytes_written as f64 / (1024.0 * 1024.0) / elapsed_s);
    let measured = r.segments_rebuilt.saturating_sub(r.segments_kept);
    // Segments garbage collection cannot reclaim hold the rebuild until they can be: no
    // time can be given for that.
    let eta_s = (measured > 0 && elapsed_s > 0.0 && r.segments_unreclaimable == 0)
        .then(|| elapsed_s / measured as f64 * r.segments_left as f64);
    serde_json::json!({
        "drive": r.drive,
        // Into a declustered array's distributed spare space, or onto a new drive.
        "into_spare_space": r.into_spares,
        "segments_rebuilt": r.segments_rebuilt,
        "segments_left": r.segments_left,
        "segments_unreclaimable": r.segments_unreclaimable,
        "segments_kept": r.segments_kept,
        "percent_done": percent,
        "blocks_written": r.blocks_written,
        "bytes_written": bytes_written,
        "blocks_unrecoverable": r.blocks_unrecoverable,
        "elapsed_s": elapsed_s,
        "rate_mib_s": rate_mib_s,
        "eta_s": eta_s,
        "rate_limit_bytes_per_s": s.engine.rebuild_rate_bytes_per_s,
    })
}

#[cfg(test)]
mod tests {
    use zapraid_engine::{Mode, OpenSegments, RaidLevel};

    use super::*;

    fn identity(level: RaidLevel, mode: Mode) -> Identity {
        Identity {
            name: "t".into(),
            uuid: "u".into(),
            level,
            mode,
            chunk_bytes: 4096,
            open_segments: OpenSegments::SINGLE,
            drives: vec![Some("d0".into()); level.shape().0 + level.shape().1],
            canonical_drives: vec![Some("/d0".into()); level.shape().0 + level.shape().1],
            device: None,
            drive_geometry: zapraid_zns::Geometry::small(4, 64, 60),
            reserved_zones: 1,
        }
    }

    #[test]
    fn status_names_the_level_and_mode_by_fields() {
        let status = ArrayStatus::default();
        let s = status_json(&identity(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 256 }), &status);
        assert_eq!(
            (&s["level"], &s["data_drives"], &s["parity_drives"], &s["mode"], &s["group_size"]),
            (
                &serde_json::json!("raid5"),
                &serde_json::json!(3),
                &serde_json::json!(1),
                &serde_json::json!("zapraid"),
                &serde_json::json!(256)
            ),
            "{s}"
        );
        let s = status_json(&identity(RaidLevel::Raid6 { drives: 6 }, Mode::ZoneWriteOnly), &status);
        assert_eq!(
            (s["level"].as_str(), s["data_drives"].as_u64(), s["parity_drives"].as_u64()),
            (Some("raid6"), Some(4), Some(2))
        );
        assert_eq!((s["mode"].as_str(), s["group_size"].is_null()), (Some("zone-write"), true), "{s}");
        // A reader gets the level and mode back from the fields.
        let level = RaidLevel::from_name(s["level"].as_str().unwrap(), 4, 2);
        assert_eq!(level, Some(RaidLevel::Raid6 { drives: 6 }));
    }

    #[test]
    fn a_missing_drive_shows_failed_without_a_path() {
        let mut id = identity(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 256 });
        id.drives[1] = None;
        id.canonical_drives[1] = None;
        let mut status = ArrayStatus::default();
        status.engine.failed_drives = vec![1];
        let s = status_json(&id, &status);
        assert_eq!(s["state"], "degraded", "{s}");
        let drive = |i: usize| {
            (s["drives"][i]["path"].clone(), s["drives"][i]["state"].clone(), s["drives"][i]["missing"].clone())
        };
        assert_eq!(drive(1), (serde_json::Value::Null, "failed".into(), true.into()), "{s}");
        assert_eq!(drive(0), ("d0".into(), "ok".into(), false.into()), "{s}");
        assert_eq!(s["drives"][1]["index"], 1, "{s}");
    }

    #[test]
    fn lost_data_is_a_state_of_its_own_with_its_count() {
        let id = identity(RaidLevel::Raid5 { drives: 4 }, Mode::ZoneWriteOnly);
        let mut status = ArrayStatus { block_size_bytes: 4096, ..Default::default() };
        // Two drives down on RAID-5: the data is lost, not merely degraded.
        status.engine.failed_drives = vec![0, 2];
        let s = status_json(&id, &status);
        assert_eq!(
            (s["state"].as_str(), s["lost"]["drives_beyond_tolerance"].as_bool()),
            (Some("data_lost"), Some(true))
        );
        // One drive down and blocks recorded lost.
        status.engine.failed_drives = vec![0];
        status.engine.blocks_lost = 3;
        let s = status_json(&id, &status);
        assert_eq!((s["state"].as_str(), s["lost"]["bytes"].as_u64()), (Some("data_lost"), Some(3 * 4096)), "{s}");
        // Segments known to hold more, not reclaimed yet.
        status.engine.blocks_lost = 0;
        status.engine.segments_with_holes = 1;
        assert_eq!(status_json(&id, &status)["state"], "data_lost");
        status.engine.segments_with_holes = 0;
        assert_eq!(status_json(&id, &status)["state"], "degraded");
    }

    #[test]
    fn a_rebuild_shows_its_progress_rate_and_eta() {
        let id = identity(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 256 });
        let mut status = ArrayStatus { block_size_bytes: 4096, rebuild_elapsed_s: Some(2.0), ..Default::default() };
        let s = status_json(&id, &status);
        assert_eq!((s["rebuilding"].clone(), s["rebuild"].clone()), (false.into(), serde_json::Value::Null), "{s}");
        status.engine.rebuild = Some(zapraid_engine::RebuildStatus {
            drive: 2,
            segments_rebuilt: 3,
            segments_left: 1,
            segments_unreclaimable: 0,
            segments_kept: 0,
            blocks_written: 512,
            blocks_unrecoverable: 0,
            into_spares: false,
        });
        let s = status_json(&id, &status);
        let r = &s["rebuild"];
        assert_eq!((s["state"].as_str(), s["drives"][2]["state"].as_str()), (Some("rebuilding"), Some("rebuilding")));
        assert_eq!((r["drive"].as_u64(), r["percent_done"].as_f64()), (Some(2), Some(75.0)), "{s}");
        // 2 MiB in 2 s; 3 segments in 2 s, 1 left.
        assert_eq!((r["rate_mib_s"].as_f64(), r["bytes_written"].as_u64()), (Some(1.0), Some(2 << 20)), "{s}");
        assert!((r["eta_s"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9, "{s}");
        assert!(s["rebuild_rate_bytes_per_s"].is_null() && r["rate_limit_bytes_per_s"].is_null(), "{s}");
        // After a restart during a rebuild: the segments the rebuild before it completed
        // are kept at once; the ETA is unknown until this server has rebuilt one.
        let resumed = zapraid_engine::RebuildStatus {
            segments_rebuilt: 12,
            segments_left: 13,
            segments_unreclaimable: 0,
            segments_kept: 12,
            ..status.engine.rebuild.unwrap()
        };
        let mut restarted = ArrayStatus { rebuild_elapsed_s: Some(0.05), ..status.clone() };
        restarted.engine.rebuild = Some(resumed);
        let r = status_json(&id, &restarted)["rebuild"].clone();
        assert!(r["eta_s"].is_null(), "{r}");
        assert_eq!(r["segments_kept"].as_u64(), Some(12), "{r}");
        restarted.engine.rebuild = Some(zapraid_engine::RebuildStatus { segments_rebuilt: 14, ..resumed });
        let r = status_json(&id, &restarted)["rebuild"].clone();
        assert!((r["eta_s"].as_f64().unwrap() - 0.05 / 2.0 * 13.0).abs() < 1e-9, "{r}");
        // Waiting for segments garbage collection cannot reclaim: no time can be given.
        restarted.engine.rebuild = Some(zapraid_engine::RebuildStatus { segments_unreclaimable: 1, ..resumed });
        let r = status_json(&id, &restarted)["rebuild"].clone();
        assert!(r["eta_s"].is_null() && r["segments_unreclaimable"] == 1, "{r}");
        status.engine.rebuild_rate_bytes_per_s = Some(200 << 20);
        let s = status_json(&id, &status);
        assert_eq!(s["rebuild_rate_bytes_per_s"].as_u64(), Some(200 << 20), "{s}");
        assert_eq!(s["rebuild"]["rate_limit_bytes_per_s"].as_u64(), Some(200 << 20), "{s}");
    }

    #[test]
    fn status_gives_the_open_segments() {
        let status = ArrayStatus::default();
        let mut id = identity(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 256 });
        let s = status_json(&id, &status);
        let fields = |s: &serde_json::Value| {
            ["small_segments", "large_segments", "small_chunk_bytes", "large_chunk_bytes"].map(|f| s[f].clone())
        };
        assert_eq!(fields(&s), serde_json::json!([1, 0, 4096, null]).as_array().unwrap().as_slice(), "{s}");
        id.chunk_bytes = 8192;
        id.open_segments = OpenSegments { small: 2, large: 2, large_chunk_bytes: 16384 };
        let s = status_json(&id, &status);
        assert_eq!(fields(&s), serde_json::json!([2, 2, 8192, 16384]).as_array().unwrap().as_slice(), "{s}");
        assert_eq!(s["chunk_bytes"], 8192, "{s}");
    }
}
