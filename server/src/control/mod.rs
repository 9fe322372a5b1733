//! The control socket of a running array: a Unix socket per array, one text command per
//! connection (`status`, `stop`, `fail N`, `fail N force`,
//! `replace N force|check [rate=BYTES_PER_S] PATH`, `rebuild-rate BYTES_PER_S|unlimited`,
//! `scrub [RATE]`, `scrub rate RATE`, `add-spare force|check PATH`, `remove-spare PATH`,
//! `grow force|check ["PATH", ...]`), one JSON line back. `zapraid status`, `stop`, `fail`,
//! `replace`, `rebuild-rate`, `scrub`, `add-spare`, `remove-spare` and `grow` are its
//! clients.
//!
//! The room above `ops`: it parses the commands and carries them to `ops` and to the engine
//! thread (`run::message`), says the answers as JSON (`status`, `scrub`, `l2p`), and keeps
//! the run directory the sockets live in (`run_dir`). Files here take from the rooms below;
//! `status` takes from `scrub` and `l2p`, and this file from all three and `run_dir`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use crate::assemble::new_drive::prepare_new_drive;
use crate::error::{Error, Result};
use crate::ops::identity::Identity;
use crate::ops::replace::swap_in;
use crate::ops::spare_pool::{self, Spares, Supplied};
use crate::run::failures::FailOutcome;
use crate::run::message::{query_status, EngineSender, Message};
use run_dir::run_dir;

mod declustered;
mod grow;
pub mod l2p;
pub mod run_dir;
pub mod scrub;
mod status;
pub use crate::run::message::ANSWER_TIMEOUT;
pub use status::status_json;

pub fn socket_path(name: &str) -> PathBuf {
    run_dir().join(format!("{name}.sock"))
}

/// Refuses to start an array under `name` when one of that name answers on its socket:
/// said before any drive is opened, so a second start neither recovers its drives nor
/// writes to them for nothing.
pub fn refuse_running(name: &str) -> Result<()> {
    let path = socket_path(name);
    if UnixStream::connect(&path).is_ok() {
        return Err(Error::Config {
            reason: format!(
                "an array named \"{name}\" is already running ({}): stop it first (zapraid stop {name}), or start \
                 this one under another name (--name)",
                path.display()
            ),
        });
    }
    Ok(())
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
    run_dir::prepare()?;
    // Checked again: another start of the name may have come up since `refuse_running`.
    refuse_running(name)?;
    let path = socket_path(name);
    // A socket left by a server that died (or anything else there; a link is removed, not
    // followed): bind needs the name free.
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
        ["scrub", rest @ ..] => scrub::control(engine, rest),
        ["grow", ..] => grow::control(identity, engine, spares, line.trim_end_matches(['\r', '\n'])),
        _ => error_json(&format!(
            "unknown command \"{}\" (status, stop, fail N, fail N force, replace N force|check [rate=B] PATH, \
             rebuild-rate B|unlimited, add-spare, remove-spare, scrub [RATE], grow force|check [PATH, ...])",
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
    let device = match prepare_new_drive(path, drive, &geometry, reserved_zones, &members, force == "force") {
        Ok(device) => device,
        Err(e) => return error_json(&e.to_string()),
    };
    match swap_in(identity, engine, drive, device, path, rebuild_rate_bytes_per_s) {
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

    #[test]
    fn rates_are_bytes_per_second_or_unlimited() {
        assert_eq!(parse_rate("unlimited"), Some(0));
        assert_eq!(parse_rate("0"), Some(0));
        assert_eq!(parse_rate("209715200"), Some(200 << 20));
        assert_eq!(parse_rate("200M"), None, "the client turns sizes into bytes");
    }
}
