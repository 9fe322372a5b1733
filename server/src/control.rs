//! The control socket of a running array: a Unix socket per array, one text command per
//! connection (`status`, `stop`, `fail N`, `fail N force`,
//! `replace N force|check [rate=BYTES_PER_S] PATH`, `rebuild-rate BYTES_PER_S|unlimited`,
//! `scrub [RATE]`, `scrub rate RATE`, `add-spare force|check PATH`, `remove-spare PATH`),
//! one JSON line back. `zapraid status`, `stop`, `fail`, `replace`, `rebuild-rate`,
//! `scrub`, `add-spare` and `remove-spare` are its clients.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use zapraid_engine::{Mode, OpenSegments, RaidLevel};

use crate::driver::{ArrayStatus, EngineSender, Message};
use crate::error::{Error, Result};
use crate::failures::FailOutcome;
use crate::spare_pool::{self, Spares, Supplied};

/// Where control sockets live, unless `ZAPRAID_RUN_DIR` says otherwise.
pub const DEFAULT_RUN_DIR: &str = "/run/zapraid";

/// Longest wait for a running array's answer.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(600);

pub fn run_dir() -> PathBuf {
    std::env::var_os("ZAPRAID_RUN_DIR").map_or_else(|| PathBuf::from(DEFAULT_RUN_DIR), PathBuf::from)
}

pub fn socket_path(name: &str) -> PathBuf {
    run_dir().join(format!("{name}.sock"))
}

/// What the server tells about itself beside the engine's status.
#[derive(Clone, Debug)]
pub struct Identity {
    pub name: String,
    pub uuid: String,
    pub level: RaidLevel,
    pub mode: Mode,
    /// The chunk size, or with several open segments the small chunk (Cs).
    pub chunk_bytes: u64,
    /// Open segments: Ns of small chunks, Nl of large chunks.
    pub open_segments: OpenSegments,
    /// The drives in array order, as the start named them, and canonicalized (absolute,
    /// links resolved: a client elsewhere finds a drive by it, however it spells it);
    /// `None` for a drive absent at start (a `MissingDrive` stands in for it).
    pub drives: Vec<Option<String>>,
    pub canonical_drives: Vec<Option<String>>,
    pub device: Option<String>,
    /// The drives' geometry, superblock zones included (a replacement must have it).
    pub drive_geometry: zapraid_zns::Geometry,
    /// Zones before the array's own on each drive (superblock, checkpoint): a new drive
    /// sets aside as many.
    pub reserved_zones: u32,
}

/// Set when the array has stopped cleanly; `stop` answers only then.
#[derive(Default)]
pub struct Stopped {
    done: Mutex<Option<std::result::Result<(), String>>>,
    cv: Condvar,
}

impl Stopped {
    pub fn set(&self, result: std::result::Result<(), String>) {
        *self.done.lock().expect("stop flag") = Some(result);
        self.cv.notify_all();
    }

    fn wait(&self) -> std::result::Result<(), String> {
        let mut done = self.done.lock().expect("stop flag");
        while done.is_none() {
            done = self.cv.wait(done).expect("stop flag");
        }
        done.clone().expect("set")
    }
}

/// Listens on the array's socket; `request_stop` starts a clean stop (deleting the block
/// device, then stopping the engine), and `stopped` is set when it is done.
pub fn listen(
    name: &str,
    identity: Arc<Mutex<Identity>>,
    engine: EngineSender,
    spares: Arc<Spares>,
    request_stop: Arc<dyn Fn() + Send + Sync>,
    stopped: Arc<Stopped>,
) -> Result<PathBuf> {
    let dir = run_dir();
    std::fs::create_dir_all(&dir).map_err(|error| Error::Io { path: dir.clone(), context: "cannot create", error })?;
    let path = socket_path(name);
    if UnixStream::connect(&path).is_ok() {
        return Err(Error::Config {
            reason: format!("an array named \"{name}\" is already running ({})", path.display()),
        });
    }
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).map_err(|error| Error::Io {
        path: path.clone(),
        context: "cannot listen on",
        error,
    })?;
    std::thread::Builder::new()
        .name("zapraid-control".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let (identity, engine, spares, request_stop, stopped) =
                    (identity.clone(), engine.clone(), spares.clone(), request_stop.clone(), stopped.clone());
                std::thread::spawn(move || {
                    if let Err(e) = handle(stream, &identity, &engine, &spares, &*request_stop, &stopped) {
                        tracing::warn!("control connection: {e}");
                    }
                });
            }
        })
        .map_err(|error| Error::Io { path: path.clone(), context: "cannot start the control thread for", error })?;
    Ok(path)
}

fn handle(
    stream: UnixStream,
    identity: &Mutex<Identity>,
    engine: &EngineSender,
    spares: &Spares,
    request_stop: &(dyn Fn() + Send + Sync),
    stopped: &Stopped,
) -> std::io::Result<()> {
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    if line.trim().is_empty() {
        // A liveness probe (`running()`, a second start's check) connects and closes
        // without a command: answering it only fails, a warning in the log per probe.
        return Ok(());
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    let answer = match words.as_slice() {
        ["status"] => match query_status(engine) {
            Some(status) => {
                let mut doc = status_json(&identity.lock().expect("identity"), &status);
                spares.annotate(&mut doc);
                doc
            }
            None => error_json("the engine has stopped"),
        },
        ["stop"] => {
            request_stop();
            match stopped.wait() {
                // The process id lets `zapraid stop` wait until the drives are released.
                Ok(()) => serde_json::json!({ "stopped": true, "pid": std::process::id() }),
                Err(e) => error_json(&e),
            }
        }
        ["fail", drive] => fail(engine, drive, false),
        ["fail", drive, "force"] => fail(engine, drive, true),
        ["replace", ..] => replace(identity, engine, spares, line.trim_end_matches(['\r', '\n'])),
        ["rebuild-rate", rate] => rebuild_rate(engine, rate),
        ["add-spare", ..] => add_spare(identity, engine, spares, line.trim_end_matches(['\r', '\n'])),
        ["remove-spare", ..] => remove_spare(spares, line.trim_end_matches(['\r', '\n'])),
        ["scrub", rest @ ..] => crate::scrub::control(engine, rest),
        _ => error_json(&format!(
            "unknown command \"{}\" (status, stop, fail N, fail N force, replace N force|check [rate=B] PATH, \
             rebuild-rate B|unlimited, add-spare, remove-spare, scrub [RATE])",
            line.trim()
        )),
    };
    let mut stream = stream;
    writeln!(stream, "{answer}")
}

/// `fail N` (`force`: even beyond what the level survives): the answer says whether the
/// array's data was lost.
fn fail(engine: &EngineSender, drive: &str, force: bool) -> serde_json::Value {
    let Ok(drive) = drive.parse::<usize>() else {
        return error_json(&format!("\"{drive}\" is not a drive index"));
    };
    let (done, result) = crossbeam_channel::bounded(1);
    match engine.send(Message::FailDrive { drive, force, done }).ok().and_then(|()| result.recv().ok()) {
        Some(Ok(outcome)) => {
            serde_json::json!({ "failed_drive": drive, "data_lost": outcome == FailOutcome::DataLost })
        }
        Some(Err(e)) => error_json(&e.to_string()),
        None => error_json("the engine has stopped"),
    }
}

/// A rebuild rate as the control socket takes it: bytes per second, or `unlimited` (0).
fn parse_rate(text: &str) -> Option<u64> {
    match text {
        "unlimited" => Some(0),
        _ => text.parse().ok(),
    }
}

/// `rebuild-rate BYTES_PER_S|unlimited`: the limit of rebuilds (the running one and later
/// ones) from now on, until the server stops.
fn rebuild_rate(engine: &EngineSender, rate: &str) -> serde_json::Value {
    let Some(rate_bytes_per_s) = parse_rate(rate) else {
        return error_json(&format!("\"{rate}\" is not a rate: bytes per second, or unlimited"));
    };
    let (done, result) = crossbeam_channel::bounded(1);
    match engine.send(Message::SetRebuildRate { rate_bytes_per_s, done }).ok().and_then(|()| result.recv().ok()) {
        Some(limit) => serde_json::json!({ "rebuild_rate_bytes_per_s": limit }),
        None => error_json("the engine has stopped"),
    }
}

/// `replace N force|check [rate=BYTES_PER_S|rate=unlimited] PATH` (the path is the rest of
/// the line, spaces and all; it is absolute, so never taken for the rate): the new drive
/// is checked and emptied here, then swapped in on the engine thread, and the rebuild
/// limited to the rate if one is given.
fn replace(identity: &Mutex<Identity>, engine: &EngineSender, spares: &Spares, line: &str) -> serde_json::Value {
    let mut words = line.splitn(4, ' ');
    let (Some(_), Some(drive), Some(force), Some(mut path)) = (words.next(), words.next(), words.next(), words.next())
    else {
        return error_json("replace needs a drive index, force or check, and the new drive's path");
    };
    let mut rebuild_rate_bytes_per_s = None;
    if let Some(rest) = path.strip_prefix("rate=") {
        let (rate, after) = rest.split_once(' ').unwrap_or((rest, ""));
        let Some(rate) = parse_rate(rate) else {
            return error_json(&format!("\"{rate}\" is not a rate: bytes per second, or unlimited"));
        };
        rebuild_rate_bytes_per_s = Some(rate);
        path = after;
        if path.is_empty() {
            return error_json("replace needs the new drive's path after the rate");
        }
    }
    let Ok(drive) = drive.parse::<usize>() else {
        return error_json(&format!("\"{drive}\" is not a drive index"));
    };
    let path = std::path::Path::new(path);
    if spares.holds(path) {
        return error_json(&format!(
            "{} is a spare of this array: it takes a failed drive's place by itself (zapraid remove-spare frees it)",
            path.display()
        ));
    }
    let (geometry, members, reserved_zones) = {
        let id = identity.lock().expect("identity");
        (id.drive_geometry, id.canonical_drives.clone(), id.reserved_zones)
    };
    // Refused before the new drive is touched; the engine thread checks again.
    if let Some(status) = query_status(engine) {
        if let Some(r) = status.engine.rebuild {
            return error_json(&format!(
                "drive {} is being rebuilt: one rebuild runs at a time (see zapraid status)",
                r.drive
            ));
        }
        if drive < members.len() && !status.engine.failed_drives.contains(&drive) {
            return error_json(&format!(
                "drive {drive} has not failed: only a failed drive is replaced (zapraid fail marks one)"
            ));
        }
    }
    if drive >= members.len() {
        return error_json(&Error::NoSuchDrive { drive, drives: members.len() }.to_string());
    }
    let device =
        match crate::replace::prepare_new_drive(path, drive, &geometry, reserved_zones, &members, force == "force") {
            Ok(device) => device,
            Err(e) => return error_json(&e.to_string()),
        };
    match crate::replace::swap_in(identity, engine, drive, device, path, rebuild_rate_bytes_per_s) {
        Ok(()) => {
            spares.forget_rebuild(drive);
            serde_json::json!({ "replaced_drive": drive, "path": path.display().to_string() })
        }
        Err(Error::EngineGone) => error_json("the engine has stopped"),
        Err(e) => error_json(&e.to_string()),
    }
}

/// `add-spare force|check PATH` (the path is the rest of the line): the drive is checked
/// and made a spare; the answer says which failed drive is rebuilt onto it, if one is.
fn add_spare(identity: &Mutex<Identity>, engine: &EngineSender, spares: &Spares, line: &str) -> serde_json::Value {
    let mut words = line.splitn(3, ' ');
    let (Some(_), Some(force), Some(path)) = (words.next(), words.next(), words.next()) else {
        return error_json("add-spare needs force or check, and the drive's path");
    };
    let path = std::path::Path::new(path);
    match spare_pool::add_spare(spares, identity, engine, path, force == "force") {
        Ok(Supplied::Started { drive, .. }) => {
            serde_json::json!({ "spare": path.display().to_string(), "rebuilding_drive": drive })
        }
        Ok(_) => serde_json::json!({ "spare": path.display().to_string(), "rebuilding_drive": null }),
        Err(e) => error_json(&e.to_string()),
    }
}

/// `remove-spare PATH` (the path is the rest of the line).
fn remove_spare(spares: &Spares, line: &str) -> serde_json::Value {
    let Some((_, path)) = line.split_once(' ') else {
        return error_json("remove-spare needs the spare's path");
    };
    match spare_pool::remove_spare(spares, std::path::Path::new(path)) {
        Ok(()) => serde_json::json!({ "removed_spare": path }),
        Err(e) => error_json(&e.to_string()),
    }
}

fn error_json(reason: &str) -> serde_json::Value {
    serde_json::json!({ "error": reason })
}

pub(crate) fn query_status(engine: &EngineSender) -> Option<ArrayStatus> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    engine.send(Message::Status(tx)).ok()?;
    rx.recv_timeout(ANSWER_TIMEOUT).ok()
}

/// The status document (`zapraid status --json`).
pub fn status_json(identity: &Identity, s: &ArrayStatus) -> serde_json::Value {
    let block = u64::from(s.block_size_bytes);
    let (data_drives, parity_drives) = identity.level.shape();
    let failed = &s.engine.failed_drives;
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
    let state = if s.stopping {
        "stopping"
    } else if s.engine.rebuild.is_some() {
        "rebuilding"
    } else if failed.is_empty() {
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
        // The rebuilds' rate limit (bytes per second written to the new drive), null:
        // unlimited.
        "rebuild_rate_bytes_per_s": s.engine.rebuild_rate_bytes_per_s,
        "rebuilds_completed": s.engine.rebuilds_completed,
        "scrub": crate::scrub::status_json(s),
        "l2p": crate::l2p::status_json(s),
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
        },
        // What the last start read: the checkpoint it began from (null: it replayed every
        // segment), and how many blocks.
        "start": {
            "checkpoint_generation": s.engine.start.checkpoint_generation,
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
        "uptime_s": s.uptime_s,
    })
}

/// The running rebuild's progress, or null: % done counts segments; the rate is the
/// average since the rebuild started on this server (blocks written to the new drive over
/// the time since), and the ETA the time per segment so far times the segments left
/// (null until a segment is done).
fn rebuild_json(s: &ArrayStatus) -> serde_json::Value {
    let Some(r) = s.engine.rebuild else { return serde_json::Value::Null };
    let total = r.segments_rebuilt + r.segments_left;
    let percent = if total == 0 { 100.0 } else { r.segments_rebuilt as f64 * 100.0 / total as f64 };
    let bytes_written = r.blocks_written * u64::from(s.block_size_bytes);
    let elapsed_s = s.rebuild_elapsed_s.unwrap_or(0.0);
    let rate_mib_s = (elapsed_s > 0.0).then(|| bytes_written as f64 / (1024.0 * 1024.0) / elapsed_s);
    let eta_s = (r.segments_rebuilt > 0).then(|| elapsed_s / r.segments_rebuilt as f64 * r.segments_left as f64);
    serde_json::json!({
        "drive": r.drive,
        "segments_rebuilt": r.segments_rebuilt,
        "segments_left": r.segments_left,
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

/// Sends one command to a running array and returns its JSON answer.
pub fn ask(name: &str, command: &str) -> Result<serde_json::Value> {
    let path = socket_path(name);
    let stream = UnixStream::connect(&path).map_err(|error| Error::Io {
        path: path.clone(),
        context: "no running array answers (is it started? see `zapraid start`)",
        error,
    })?;
    stream.set_read_timeout(Some(ANSWER_TIMEOUT)).ok();
    (&stream).write_all(format!("{command}\n").as_bytes()).map_err(|error| Error::Io {
        path: path.clone(),
        context: "cannot send to",
        error,
    })?;
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).map_err(|error| Error::Io {
        path: path.clone(),
        context: "no answer from",
        error,
    })?;
    serde_json::from_str(&line)
        .map_err(|e| Error::Config { reason: format!("bad answer from {}: {e}", path.display()) })
}

/// Names of the arrays with a control socket.
pub fn running() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(run_dir()) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".sock")).map(str::to_string))
        .filter(|n| UnixStream::connect(socket_path(n)).is_ok())
        .collect();
    names.sort();
    names
}

/// Removes the socket when the array is gone.
pub fn remove_socket(path: &Path) {
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
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
    fn a_rebuild_shows_its_progress_rate_and_eta() {
        let id = identity(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 256 });
        let mut status = ArrayStatus { block_size_bytes: 4096, rebuild_elapsed_s: Some(2.0), ..Default::default() };
        let s = status_json(&id, &status);
        assert_eq!((s["rebuilding"].clone(), s["rebuild"].clone()), (false.into(), serde_json::Value::Null), "{s}");
        status.engine.rebuild = Some(zapraid_engine::RebuildStatus {
            drive: 2,
            segments_rebuilt: 3,
            segments_left: 1,
            blocks_written: 512,
            blocks_unrecoverable: 0,
        });
        let s = status_json(&id, &status);
        let r = &s["rebuild"];
        assert_eq!((s["state"].as_str(), s["drives"][2]["state"].as_str()), (Some("rebuilding"), Some("rebuilding")));
        assert_eq!((r["drive"].as_u64(), r["percent_done"].as_f64()), (Some(2), Some(75.0)), "{s}");
        // 2 MiB in 2 s; 3 segments in 2 s, 1 left.
        assert_eq!((r["rate_mib_s"].as_f64(), r["bytes_written"].as_u64()), (Some(1.0), Some(2 << 20)), "{s}");
        assert!((r["eta_s"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9, "{s}");
        assert!(s["rebuild_rate_bytes_per_s"].is_null() && r["rate_limit_bytes_per_s"].is_null(), "{s}");
        status.engine.rebuild_rate_bytes_per_s = Some(200 << 20);
        let s = status_json(&id, &status);
        assert_eq!(s["rebuild_rate_bytes_per_s"].as_u64(), Some(200 << 20), "{s}");
        assert_eq!(s["rebuild"]["rate_limit_bytes_per_s"].as_u64(), Some(200 << 20), "{s}");
    }

    #[test]
    fn rates_are_bytes_per_second_or_unlimited() {
        assert_eq!(parse_rate("unlimited"), Some(0));
        assert_eq!(parse_rate("0"), Some(0));
        assert_eq!(parse_rate("209715200"), Some(200 << 20));
        assert_eq!(parse_rate("200M"), None, "the client turns sizes into bytes");
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
