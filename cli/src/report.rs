//! What `status` and `inspect` show people: a running array's status document and a
//! drive's superblock, in words (the JSON and the superblock keep names and codes for
//! programs; the engine's `Display` forms say them the one way).

use serde_json::Value;
use zapraid_engine::format::{ArraySuperblock, SegmentHeader, SegmentLanes};
use zapraid_engine::{ChunkClass, Mode, OpenSegments, RaidLevel};
use zapraid_server::assemble::degraded::drives_text;
use zapraid_server::records::superblock::{failed_drives, spared_drives};
use zapraid_server::records::uuid_text;

use crate::hybrid::open_segments_text;
use crate::size::format_bytes;

/// The level and mode of a status document, e.g. "RAID-5 (3+1), ZapRAID G=256"; the
/// document's own names if they name nothing this build knows (a newer server).
pub fn layout_of_status(s: &Value) -> String {
    let name = s["level"].as_str().unwrap_or("?");
    let count = |field: &str| s[field].as_u64().and_then(|n| usize::try_from(n).ok());
    let level = match (count("data_drives"), count("parity_drives")) {
        (Some(k), Some(m)) => RaidLevel::from_name(name, k, m).map(|l| l.to_string()),
        _ => None,
    };
    let mode_name = s["mode"].as_str().unwrap_or("?");
    let group_size = s["group_size"].as_u64().and_then(|g| u32::try_from(g).ok());
    let mode = Mode::from_name(mode_name, group_size).map(|m| m.to_string());
    format!("{}, {}", level.unwrap_or_else(|| name.to_string()), mode.unwrap_or_else(|| mode_name.to_string()))
}

/// The open segments of a status document in words ("2 of 8 KiB chunks + 2 of 16 KiB
/// chunks"), if it gives them (servers before hybrid segment management did not).
pub fn open_segments_of_status(s: &Value) -> Option<String> {
    let count = |field: &str| s[field].as_u64().and_then(|n| u32::try_from(n).ok());
    let open = OpenSegments {
        small: count("small_segments")?,
        large: count("large_segments")?,
        large_chunk_bytes: s["large_chunk_bytes"].as_u64().unwrap_or(0),
    };
    Some(open_segments_text(s["small_chunk_bytes"].as_u64()?, &open))
}

/// What the status says of lost data, if any is: blocks recorded lost, segments still to
/// be checked for more, drives failed beyond what the level survives.
pub fn lost_line(s: &Value) -> Option<String> {
    let lost = &s["lost"];
    let blocks = lost["blocks"].as_u64().unwrap_or(0);
    let holes = lost["segments_with_holes"].as_u64().unwrap_or(0);
    let beyond = lost["drives_beyond_tolerance"].as_bool().unwrap_or(false);
    if blocks == 0 && holes == 0 && !beyond {
        return None;
    }
    let mut said = format!(
        "data lost: {blocks} blocks ({}) recorded lost, they read as errors until written again",
        crate::size::format_bytes(lost["bytes"].as_u64().unwrap_or(0))
    );
    if holes > 0 {
        said += &format!("; {holes} segments hold more, counted as garbage collection reclaims them");
    }
    if beyond {
        said += "; more drives have failed than the RAID level survives";
    }
    Some(said)
}

/// Prints one running array's status document for people.
pub fn print_status(s: &Value) {
    let c = &s["capacity"];
    let spare_space_used = s["declustered"]["spare_space_used"].as_bool() == Some(true);
    let state = match s["state"].as_str().unwrap_or("?") {
        "optimal" if spare_space_used => "optimal, spare space used".to_string(),
        state => state.to_string(),
    };
    println!(
        "{}: {} ({}), {}, device {}",
        s["name"].as_str().unwrap_or("?"),
        state,
        s["uuid"].as_str().unwrap_or("?"),
        layout_of_status(s),
        s["device"].as_str().unwrap_or("none")
    );
    if let Some(line) = lost_line(s) {
        println!("  {line}");
    }
    if let Some(open) = open_segments_of_status(s) {
        println!("  open segments: {open}");
    }
    for d in s["drives"].as_array().into_iter().flatten() {
        // A drive absent at start has no path.
        let path = match (d["missing"].as_bool(), d["path"].as_str()) {
            (Some(true), _) => "(missing)",
            (_, Some(path)) => path,
            (_, None) => "?",
        };
        let spared = if d["in_spare_space"].as_bool() == Some(true) { " (rebuilt into spare space)" } else { "" };
        println!("  drive {}: {path} {}{spared}", d["index"], d["state"].as_str().unwrap_or("?"));
    }
    if let Some(line) = declustered_line(&s["declustered"]) {
        println!("  {line}");
    }
    if let Some(line) = crate::spare::spares_line(s) {
        println!("  {line}");
    }
    if let Some(line) = crate::spare::spare_rebuild_line(s) {
        println!("  {line}");
    }
    match rebuild_line(&s["rebuild"]) {
        Some(line) => println!("  {line}"),
        None => {
            if let Some(rate) = s["rebuild_rate_bytes_per_s"].as_u64() {
                println!("  rebuild rate limit: {}", crate::size::format_rate(Some(rate)));
            }
        }
    }
    if let Some(line) = crate::scrub::progress_line(&s["scrub"]["running"]) {
        println!("  {line}");
    } else if s["scrub"]["last"].is_object() {
        println!("  last {}", crate::scrub::report_text(&s["scrub"]["last"]));
    }
    println!(
        "  capacity {} used of {}; zones {} free of {}; segments {} in use, {} open, {} reclaimed",
        format_bytes(c["used_bytes"].as_u64().unwrap_or(0)),
        format_bytes(c["logical_bytes"].as_u64().unwrap_or(0)),
        c["free_zones"],
        c["zones"],
        s["segments"]["in_use"],
        s["segments"]["open"],
        s["segments"]["reclaimed"]
    );
    for shard in s["shards"].as_array().into_iter().flatten() {
        println!(
            "    shard {}: {} used; zones {} free of {}; segments {} in use, {} reclaimed",
            shard["index"],
            format_bytes(shard["used_bytes"].as_u64().unwrap_or(0)),
            shard["free_zones"],
            shard["zones"],
            shard["segments_in_use"],
            shard["segments_reclaimed"]
        );
    }
    println!("  {}", l2p_line(&s["l2p"]));
    println!("  {}", start_line(&s["start"]));
    let r = &s["repairs"];
    let count = |field: &str| r[field].as_u64().unwrap_or(0);
    println!(
        "  repairs: at start {} damaged headers/footers, {} blocks rebuilt from parity, {} lost; {} blocks rebuilt \
         on read, {} blocks of their rows rewritten",
        count("damaged_structures_at_start"),
        count("blocks_repaired_at_start"),
        count("blocks_lost_at_start"),
        count("blocks_repaired_on_read"),
        s["scrub"]["read_repairs_done"].as_u64().unwrap_or(0)
    );
    let io = &s["io"];
    let lat = &s["latency_us"];
    println!(
        "  io: {} reads, {} writes, {} flushes, {} discards, {} errors; latency us read p50/p99 {}/{}, write p50/p99 {}/{}",
        io["reads"], io["writes"], io["flushes"], io["discards"], io["errors"],
        lat["read"]["p50"], lat["read"]["p99"], lat["write"]["p50"], lat["write"]["p99"]
    );
}

/// What the last start read, in one line: "start: from checkpoint 3, 120 blocks read",
/// "start: from checkpoint 3 and the 2 segments written since, 900 blocks read" (after a
/// crash: the segments opened after it, or open while it was taken, replayed) or "start: replayed every segment, 5,000 blocks read".
pub fn start_line(start: &Value) -> String {
    let blocks = start["blocks_read"].as_u64().unwrap_or(0);
    let replayed = start["segments_replayed"].as_u64().unwrap_or(0);
    match start["checkpoint_generation"].as_u64() {
        Some(generation) if replayed > 0 => {
            let segments = if replayed == 1 { "segment" } else { "segments" };
            format!(
                "start: from checkpoint {generation} and the {replayed} {segments} written since, {blocks} blocks read"
            )
        }
        Some(generation) => format!("start: from checkpoint {generation}, {blocks} blocks read"),
        None => format!("start: replayed every segment, {blocks} blocks read"),
    }
}

/// A declustered array's placement and spare space in one line: "declustered: stripes of
/// 5 over 8 drives, 1 segment and 3 spare zones per zone index; spare space 40 of 300 zones
/// used", or `None` for a classic array.
pub fn declustered_line(d: &Value) -> Option<String> {
    let count = |field: &str| d[field].as_u64();
    let segments = count("segments_per_zone_index")?;
    let mut line = format!(
        "declustered: stripes of {} over {} drives, {segments} {} and {} spare zone(s) per zone index; spare \
         space {} of {} zones used",
        count("stripe_drives")?,
        count("drives")?,
        if segments == 1 { "segment" } else { "segments" },
        count("spare_zones_per_zone_index")?,
        count("spare_zones_used")?,
        count("spare_zones")?,
    );
    let rebalance = count("segments_to_rebalance").unwrap_or(0);
    let to_grow = count("zone_indexes_to_grow").unwrap_or(0);
    if to_grow > 0 {
        line += &format!(
            "; growing: {to_grow} zone index(es) still in the earlier placement, {rebalance} segment(s) to move onto \
             the new one"
        );
    } else if rebalance > 0 {
        line += &format!("; rebalancing: {rebalance} segment(s) to move back to their home drives");
    }
    let beyond = count("segments_beyond_parity").unwrap_or(0);
    if beyond > 0 {
        line += &format!("; {beyond} segment(s) lack more chunks than parity covers");
    }
    Some(line)
}

/// The running rebuild in one line: "rebuild of drive 1: 40.0% (4 of 10 segments),
/// 12.5 MiB written, 3.1 MiB/s, ETA 6 s" (rate and ETA once known), or `None`.
pub fn rebuild_line(r: &Value) -> Option<String> {
    let drive = r["drive"].as_u64()?;
    let done = r["segments_rebuilt"].as_u64().unwrap_or(0);
    let total = done + r["segments_left"].as_u64().unwrap_or(0);
    let into = if r["into_spare_space"].as_bool() == Some(true) { " into distributed spare space" } else { "" };
    let mut line = format!(
        "rebuild of drive {drive}{into}: {:.1}% ({done} of {total} segments), {} written",
        r["percent_done"].as_f64().unwrap_or(0.0),
        format_bytes(r["bytes_written"].as_u64().unwrap_or(0))
    );
    if let Some(rate) = r["rate_mib_s"].as_f64() {
        line += &format!(", {rate:.1} MiB/s");
    }
    if let Some(limit) = r["rate_limit_bytes_per_s"].as_u64() {
        line += &format!(" (limit {})", crate::size::format_rate(Some(limit)));
    }
    let stuck = r["segments_unreclaimable"].as_u64().unwrap_or(0);
    match r["eta_s"].as_f64() {
        _ if stuck > 0 => {
            let segments = if stuck == 1 { "segment" } else { "segments" };
            line += &format!(
                ", waiting for {stuck} {segments} garbage collection cannot reclaim (too many drives down to \
                 write their blocks elsewhere, or a mapping block unreadable): the drive is not whole yet"
            );
        }
        Some(eta) => line += &format!(", ETA {eta:.0} s"),
        // Not measured yet (no segment rebuilt by this server): never a guess such as 0 s.
        None => line += ", ETA unknown (estimating)",
    }
    if let Some(lost) = r["blocks_unrecoverable"].as_u64().filter(|n| *n > 0) {
        line += &format!(", {lost} blocks unrecoverable");
    }
    Some(line)
}

/// A drive's array superblock in one line (after "superblock: ").
pub fn superblock_text(sb: &ArraySuperblock) -> String {
    let drives = sb.drive_count.get() as usize;
    let level = RaidLevel::from_code(sb.level, sb.stripe_width() as usize, sb.parity_chunks.get() as usize)
        .map_or_else(|| format!("unknown level code {}", sb.level), |l| l.to_string());
    let grown: Vec<String> = sb.grown_from().iter().map(u32::to_string).collect();
    let level = if sb.is_declustered() && !grown.is_empty() {
        format!(
            "{level} declustered, {} distributed spare(s), grown from {} drives",
            sb.distributed_spares.get(),
            grown.join(", then ")
        )
    } else if sb.is_declustered() {
        format!("{level} declustered, {} distributed spare(s)", sb.distributed_spares.get())
    } else {
        level
    };
    let mode = Mode::from_code(sb.mode, sb.group_size.get())
        .map_or_else(|| format!("unknown mode code {}", sb.mode), |m| m.to_string());
    let chunk_bytes = u64::from(sb.chunk_bytes.get());
    let open = open_segments_text(chunk_bytes, &sb.open_segments());
    let failed = match failed_drives(sb).as_slice() {
        [] => "no failed drive".to_string(),
        failed => format!("failed {}", drives_text(failed)),
    };
    let rebuilding: Vec<usize> = (0..drives).filter(|d| sb.rebuilding_drives.get() >> d & 1 == 1).collect();
    let failed = match rebuilding.as_slice() {
        [] => failed,
        rebuilding => format!("{failed}, rebuilding {}", drives_text(rebuilding)),
    };
    let failed = match spared_drives(sb).as_slice() {
        [] => failed,
        spared => format!("{failed}, in distributed spare space {}", drives_text(spared)),
    };
    format!(
        "array \"{}\" {}, drive {} of {drives}, {level}, {mode}, chunk {chunk_bytes} B, open segments: {open}, \
         {}{} logical blocks of {} B, {} reserved zone(s), generation {}, {failed}",
        sb.name(),
        uuid_text(&sb.array_uuid),
        sb.drive_index.get(),
        match sb.shards() {
            1 => String::new(),
            shards => format!("{shards} engine shards in units of {} blocks, ", sb.shard_unit_blocks.get()),
        },
        sb.logical_blocks.get(),
        sb.block_size_bytes.get(),
        sb.reserved_zones.get(),
        sb.generation.get()
    )
}

/// A segment header in one line (`inspect`): its place, shape, chunk class and how it is
/// written (each segment of an array with several open segments says its own).
pub fn segment_header_text(h: &SegmentHeader, lanes: &SegmentLanes) -> String {
    let class = match ChunkClass::from_code(h.segment_class) {
        Some(ChunkClass::Small) => "small chunks".to_string(),
        Some(ChunkClass::Large) => "large chunks".to_string(),
        None => format!("unknown chunk class {}", h.segment_class),
    };
    // Groups of one stripe are written with Zone Write at fixed offsets (`Layout::new`).
    let written = match h.mode {
        SEGMENT_MODE_GROUPS if h.group_size.get() == 1 => "Zone Write",
        SEGMENT_MODE_GROUPS => "Zone Append groups",
        SEGMENT_MODE_ZONE_WRITE => "Zone Write",
        SEGMENT_MODE_ONE_GROUP => "Zone Append, one group",
        _ => "unknown mode",
    };
    let stripe = h.drive_count.get();
    // A declustered array's header (280 bytes) names the segment and each lane's drive.
    let place = if lanes.array_drives.get() > stripe {
        let drives: Vec<String> = lanes.lane_drives.iter().take(stripe as usize).map(|d| d.to_string()).collect();
        format!(
            "segment {}, lane {} of {stripe} (lanes on drives {} of {})",
            lanes.segment_number.get(),
            h.drive_index.get(),
            drives.join(" "),
            lanes.array_drives.get()
        )
    } else {
        format!("drive {} of {stripe}", h.drive_index.get())
    };
    format!(
        "sequence {}, {place}, {}+{}, chunk {} blocks, G {}, {class}, {written}",
        h.segment_sequence.get(),
        h.data_chunks.get(),
        h.parity_chunks.get(),
        h.chunk_blocks.get(),
        h.group_size.get()
    )
}

/// A segment header's mode codes (docs/FORMAT.md): how that segment is written.
const SEGMENT_MODE_GROUPS: u8 = 0;
const SEGMENT_MODE_ZONE_WRITE: u8 = 1;
const SEGMENT_MODE_ONE_GROUP: u8 = 2;

/// The L2P table's line of `zapraid status`.
fn l2p_line(l: &Value) -> String {
    let count = |field: &str| l[field].as_u64().unwrap_or(0);
    let Some(budget) = l["budget_bytes"].as_u64() else {
        return format!(
            "L2P table: no memory budget, every page kept ({} of {} pages made so far, {})",
            count("cached_pages"),
            count("pages"),
            format_bytes(count("memory_bytes"))
        );
    };
    // Said only when it happened: a mapping block damaged beyond parity.
    let rebuilt = match count("mapping_pages_rebuilt") {
        0 => String::new(),
        1 => ", 1 page rebuilt from the log (its mapping block unreadable)".to_string(),
        n => format!(", {n} pages rebuilt from the log (their mapping blocks unreadable)"),
    };
    format!(
        "L2P table: budget {}, {} of {} pages cached ({} dirty, {} on the drives), hit rate {:.1}%, mapping blocks \
         read {} ({:.1}/s), written {} ({:.1}/s){rebuilt}, checkpoints taken while running {} ({} incremental, {} \
         abandoned, {} of images)",
        format_bytes(budget),
        count("cached_pages"),
        count("pages"),
        count("dirty_pages"),
        count("pages_on_drives"),
        l["hit_rate_percent"].as_f64().unwrap_or(0.0),
        count("mapping_reads"),
        l["mapping_reads_per_s"].as_f64().unwrap_or(0.0),
        count("mapping_writes"),
        l["mapping_writes_per_s"].as_f64().unwrap_or(0.0),
        count("checkpoints_running"),
        count("checkpoints_incremental"),
        count("checkpoints_abandoned"),
        format_bytes(count("checkpoint_image_bytes")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_line_says_what_the_start_read() {
        let start = serde_json::json!({ "checkpoint_generation": 3, "segments_replayed": 0, "blocks_read": 120 });
        assert_eq!(start_line(&start), "start: from checkpoint 3, 120 blocks read");
        let start = serde_json::json!({ "checkpoint_generation": 3, "segments_replayed": 1, "blocks_read": 900 });
        assert_eq!(start_line(&start), "start: from checkpoint 3 and the 1 segment written since, 900 blocks read");
        let start = serde_json::json!({ "checkpoint_generation": null, "segments_replayed": 0, "blocks_read": 5000 });
        assert_eq!(start_line(&start), "start: replayed every segment, 5000 blocks read");
    }

    #[test]
    fn an_eta_not_measured_yet_reads_unknown() {
        // After a restart during a rebuild: 12 segments kept at once, none rebuilt yet.
        let mut r = serde_json::json!({
            "drive": 1, "segments_rebuilt": 12, "segments_left": 13, "percent_done": 48.0, "bytes_written": 0,
            "rate_mib_s": null, "rate_limit_bytes_per_s": null, "eta_s": null, "blocks_unrecoverable": 0
        });
        let line = rebuild_line(&r).unwrap();
        assert_eq!(line, "rebuild of drive 1: 48.0% (12 of 25 segments), 0 B written, ETA unknown (estimating)");
        r["eta_s"] = 6.4.into();
        assert!(rebuild_line(&r).unwrap().ends_with(", 0 B written, ETA 6 s"), "{r}");
        r["eta_s"] = serde_json::Value::Null;
        r["segments_unreclaimable"] = 2.into();
        let line = rebuild_line(&r).unwrap();
        assert!(
            line.contains(", waiting for 2 segments garbage collection cannot reclaim") && !line.contains("ETA"),
            "{line}"
        );
    }

    #[test]
    fn status_layout_reads_as_people_write_it() {
        let s = serde_json::json!({
            "level": "raid5", "data_drives": 3, "parity_drives": 1, "mode": "zapraid", "group_size": 256
        });
        assert_eq!(layout_of_status(&s), "RAID-5 (3+1), ZapRAID G=256");
        let s = serde_json::json!({
            "level": "raid1", "data_drives": 1, "parity_drives": 2, "mode": "zone-append", "group_size": null
        });
        assert_eq!(layout_of_status(&s), "RAID-1 (3 copies), ZoneAppend-Only");
        // Names this build does not know are shown as they are, not dropped.
        let s = serde_json::json!({ "level": "raid9", "data_drives": 3, "parity_drives": 1, "mode": "new" });
        assert_eq!(layout_of_status(&s), "raid9, new");
    }

    #[test]
    fn a_superblock_says_its_generation_and_failed_drives() {
        let mut sb = <ArraySuperblock as zerocopy::FromZeros>::new_zeroed();
        sb.drive_count = 4.into();
        sb.parity_chunks = 1.into();
        sb.level = RaidLevel::Raid5 { drives: 4 }.code();
        sb.generation = 2.into();
        let text = superblock_text(&sb);
        assert!(text.ends_with(", generation 2, no failed drive"), "{text}");
        sb.failed_drives = 0b1010.into();
        let text = superblock_text(&sb);
        assert!(text.ends_with(", generation 2, failed drives 1 and 3"), "{text}");
        sb.rebuilding_drives = 0b10.into();
        let text = superblock_text(&sb);
        assert!(text.ends_with(", generation 2, failed drives 1 and 3, rebuilding drive 1"), "{text}");
    }

    #[test]
    fn status_open_segments_in_words() {
        let s = serde_json::json!({
            "small_segments": 2, "large_segments": 2, "small_chunk_bytes": 8192, "large_chunk_bytes": 16384
        });
        assert_eq!(open_segments_of_status(&s).as_deref(), Some("2 of 8 KiB chunks + 2 of 16 KiB chunks"));
        let s = serde_json::json!({
            "small_segments": 1, "large_segments": 0, "small_chunk_bytes": 4096, "large_chunk_bytes": null
        });
        assert_eq!(open_segments_of_status(&s).as_deref(), Some("1 of 4 KiB chunks"));
        // A server that does not say: nothing shown.
        assert_eq!(open_segments_of_status(&serde_json::json!({ "chunk_bytes": 4096 })), None);
    }
}
