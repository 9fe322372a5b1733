//! A running array's hot spares: the drives held for it (opened, so no other program
//! takes them), `add-spare` and `remove-spare`, what `status` shows of them, and the
//! thread that, when a drive has failed and no rebuild runs, rebuilds it onto a spare by
//! itself, the way `zapraid replace` does (`replace::swap_in`).
//!
//! Invariants: one supplier at a time (the watch thread, or an `add-spare` answering): a
//! spare is taken only with a drive failed, no rebuild running and no more drives failed
//! than the level survives; it is then reset (its record goes) and swapped in, and leaves
//! the pool. If the engine refuses it (a rebuild began meanwhile, commands still in
//! flight), it is made a spare again (its record rewritten) and tried later. The engine
//! thread tells the watch thread of every new superblock generation (a drive failed, a
//! rebuild started or ended), so a spare waits while a rebuild runs and is used when it
//! ends if a drive is still failed. A spare whose record was found damaged at start is
//! listed unusable (with why, and what to do) and never taken; it stays open, so that
//! `remove-spare` erases what is left of its record.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zapraid_engine::format::SpareRecord;
use zapraid_zns::ReservedZones;

use super::identity::Identity;
use super::replace::swap_in;
use crate::assemble::new_drive::{check_new_drive, reset_every_zone};
use crate::drives::{open_drive, Drive};
use crate::error::{Error, Result};
use crate::records::spare::{erase_spare_record, write_spare_record};
use crate::run::message::{query_status, EngineSender, Message};

/// First wait before trying a spare again after the engine refused it; it doubles up to
/// the longest.
const RETRY_FIRST_WAIT: Duration = Duration::from_millis(100);
const RETRY_LONGEST_WAIT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug, PartialEq, Eq)]
enum SpareState {
    /// Waiting for a drive to fail.
    Ready,
    /// Being reset and swapped in.
    Taken,
    /// Could not be made ready again (why): not used.
    Unusable(String),
}

struct Spare {
    path: PathBuf,
    canonical: String,
    device: Option<Drive>,
    state: SpareState,
}

/// The spares of a running array.
pub struct Spares {
    /// The record every spare of this array holds.
    record: SpareRecord,
    list: Mutex<Vec<Spare>>,
    /// Held while a spare is chosen and swapped in.
    supplying: Mutex<()>,
    /// The drive being rebuilt onto a spare, and the spare's path.
    onto: Mutex<Option<(usize, String)>>,
}

/// What a supplier did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Supplied {
    /// Drive `drive` is being rebuilt onto the spare at `spare`.
    Started { drive: usize, spare: String },
    /// Nothing to do (no spare, no failed drive, or a rebuild runs).
    Nothing,
    /// A spare was refused for now: try again later.
    Retry,
}

fn canonical(path: &Path) -> String {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string()
}

impl Spares {
    /// The pool of an array whose spares hold `record`, with the spares found at start.
    pub fn new(record: SpareRecord, given: Vec<(PathBuf, Drive)>) -> Self {
        let list = given.into_iter().map(|(path, device)| ready(path, device)).collect();
        Spares { record, list: Mutex::new(list), supplying: Mutex::new(()), onto: Mutex::new(None) }
    }

    /// Lists a spare found at start that is not used (its record is damaged), saying
    /// `why`; it is never taken.
    pub fn add_unusable(&self, path: PathBuf, device: Drive, why: String) {
        let spare = Spare { canonical: canonical(&path), path, device: Some(device), state: SpareState::Unusable(why) };
        self.list.lock().expect("spares").push(spare);
    }

    /// Whether the drive at `path` (however spelled) is one of the spares.
    pub fn holds(&self, path: &Path) -> bool {
        let canonical = canonical(path);
        self.list.lock().expect("spares").iter().any(|s| s.canonical == canonical)
    }

    /// The state of the spare at `path` (however spelled), if it is one.
    fn state_of(&self, path: &Path) -> Option<SpareState> {
        let canonical = canonical(path);
        self.list.lock().expect("spares").iter().find(|s| s.canonical == canonical).map(|s| s.state.clone())
    }

    /// The spares' paths, as given.
    pub fn paths(&self) -> Vec<String> {
        self.list.lock().expect("spares").iter().map(|s| s.path.display().to_string()).collect()
    }

    /// Takes a ready spare (it stays listed, as taken).
    fn take_ready(&self) -> Option<(PathBuf, Drive)> {
        let mut list = self.list.lock().expect("spares");
        let spare = list.iter_mut().find(|s| s.state == SpareState::Ready && s.device.is_some())?;
        spare.state = SpareState::Taken;
        Some((spare.path.clone(), spare.device.take()?))
    }

    fn any_ready(&self) -> bool {
        self.list.lock().expect("spares").iter().any(|s| s.state == SpareState::Ready)
    }

    /// Puts a taken spare back: ready with its drive, or unusable.
    fn give_back(&self, path: &Path, device: Result<Drive>) {
        let mut list = self.list.lock().expect("spares");
        if let Some(spare) = list.iter_mut().find(|s| s.path == path) {
            match device {
                Ok(device) => (spare.device, spare.state) = (Some(device), SpareState::Ready),
                Err(e) => {
                    tracing::error!("spare {} is not used any more: {e}", path.display());
                    spare.state = SpareState::Unusable(e.to_string());
                }
            }
        }
    }

    /// A taken spare is in the array now.
    fn consumed(&self, path: &Path, drive: usize) {
        self.list.lock().expect("spares").retain(|s| s.path != path);
        *self.onto.lock().expect("spare rebuild") = Some((drive, path.display().to_string()));
    }

    /// Drive `drive` is being rebuilt onto a drive that was not a spare (`replace`).
    pub fn forget_rebuild(&self, drive: usize) {
        let mut onto = self.onto.lock().expect("spare rebuild");
        if onto.as_ref().is_some_and(|(d, _)| *d == drive) {
            *onto = None;
        }
    }

    /// Adds the spares to a status document (`spares`: path, canonical path, state and
    /// why it is unusable; `rebuild.spare`: the spare a running rebuild writes onto).
    pub fn annotate(&self, doc: &mut serde_json::Value) {
        let spares: Vec<serde_json::Value> = self
            .list
            .lock()
            .expect("spares")
            .iter()
            .map(|s| {
                let (state, reason) = match &s.state {
                    SpareState::Ready => ("ready", None),
                    SpareState::Taken => ("taken", None),
                    SpareState::Unusable(why) => ("unusable", Some(why.clone())),
                };
                serde_json::json!({
                    "path": s.path.display().to_string(),
                    "canonical_path": s.canonical,
                    "state": state,
                    "reason": reason,
                })
            })
            .collect();
        doc["spares"] = serde_json::Value::Array(spares);
        let rebuilding = doc["rebuild"]["drive"].as_u64();
        if let Some((drive, spare)) = self.onto.lock().expect("spare rebuild").as_ref() {
            if rebuilding == Some(*drive as u64) {
                doc["rebuild"]["spare"] = spare.clone().into();
            }
        }
    }
}

fn ready(path: PathBuf, device: Drive) -> Spare {
    Spare { canonical: canonical(&path), path, device: Some(device), state: SpareState::Ready }
}

/// If a drive has failed (the lowest-numbered one first), no rebuild runs and a spare is
/// ready: rebuilds the drive onto the spare, as `zapraid replace` would.
pub fn supply(spares: &Spares, identity: &Mutex<Identity>, engine: &EngineSender) -> Supplied {
    let _one_at_a_time = spares.supplying.lock().expect("spare supplier");
    let Some(status) = query_status(engine) else { return Supplied::Nothing };
    {
        let mut onto = spares.onto.lock().expect("spare rebuild");
        if onto.as_ref().is_some_and(|(d, _)| status.engine.rebuild.is_none_or(|r| r.drive != *d)) {
            *onto = None;
        }
    }
    let failed = &status.engine.failed_drives;
    let Some(&drive) = failed.first() else { return Supplied::Nothing };
    if status.stopping || status.engine.rebuild.is_some() || !spares.any_ready() {
        return Supplied::Nothing;
    }
    let (level, raw, reserved_zones) = {
        let id = identity.lock().expect("identity");
        (id.level, id.drive_geometry, id.reserved_zones)
    };
    // The array's data is lost: nothing to rebuild from. A declustered array's segments
    // each have their own drives (and drives in spare space hold nothing): it is lost
    // where a segment lacks more chunks than parity covers.
    let lost = match &status.engine.declustered {
        Some(d) => d.segments_beyond_parity > 0,
        None => failed.len() > level.tolerated_failures(),
    };
    if lost {
        return Supplied::Nothing;
    }
    let Some((path, mut device)) = spares.take_ready() else { return Supplied::Nothing };
    let prepared = reset_every_zone(&mut device, &raw, &path).and_then(|()| {
        ReservedZones::new(device, reserved_zones).map_err(|error| Error::Drive { path: path.clone(), error })
    });
    let device = match prepared {
        Ok(device) => device,
        Err(e) => {
            spares.give_back(&path, Err(e));
            return Supplied::Retry;
        }
    };
    match swap_in(identity, engine, drive, device, &path, None) {
        Ok(()) => {
            let spare = path.display().to_string();
            spares.consumed(&path, drive);
            tracing::warn!("rebuilding drive {drive} onto spare {spare}");
            Supplied::Started { drive, spare }
        }
        Err(Error::EngineGone) => Supplied::Nothing,
        Err(refused) => {
            // The engine closed the drive with its refusal: reopened, a spare again.
            tracing::info!("spare {} not taken for drive {drive} yet: {refused}", path.display());
            let again =
                open_drive(&path).and_then(|mut d| write_spare_record(d.as_mut(), &spares.record, &path).map(|()| d));
            spares.give_back(&path, again);
            Supplied::Retry
        }
    }
}

/// Starts the thread that supplies spares whenever the engine records a new superblock
/// generation (and once at start: a drive may be failed already), until the engine ends.
pub fn watch(spares: Arc<Spares>, identity: Arc<Mutex<Identity>>, engine: EngineSender) -> Result<()> {
    let (tx, generations) = crossbeam_channel::bounded(1);
    engine.send(Message::WatchGenerations(tx)).map_err(|_| Error::EngineGone)?;
    std::thread::Builder::new()
        .name("zapraid-spares".into())
        .spawn(move || {
            let mut wait = RETRY_FIRST_WAIT;
            loop {
                let next = match supply(&spares, &identity, &engine) {
                    Supplied::Retry => {
                        let this = wait;
                        wait = (wait * 2).min(RETRY_LONGEST_WAIT);
                        generations.recv_timeout(this).map_err(|e| e.is_disconnected())
                    }
                    _ => {
                        wait = RETRY_FIRST_WAIT;
                        generations.recv().map_err(|_| true)
                    }
                };
                if next == Err(true) {
                    return;
                }
            }
        })
        .map_err(|error| Error::Io { path: "spare thread".into(), context: "cannot start", error })?;
    Ok(())
}

/// `zapraid add-spare`: checks the drive at `path` as a replacement is checked (not a
/// member, the array's geometry, empty unless `force`, which erases it), writes its spare
/// record, and adds it; a drive failed with no rebuild running is rebuilt onto it at once.
pub fn add_spare(
    spares: &Spares,
    identity: &Mutex<Identity>,
    engine: &EngineSender,
    path: &Path,
    force: bool,
) -> Result<Supplied> {
    if let Some(state) = spares.state_of(path) {
        let reason = match state {
            SpareState::Unusable(_) => "it is listed as an unusable spare of this array (zapraid status says why): \
                                        remove-spare it first"
                .to_string(),
            _ => "it is a spare of this array already".to_string(),
        };
        return Err(Error::Refused { path: path.to_path_buf(), reason });
    }
    let (raw, members) = {
        let id = identity.lock().expect("identity");
        (id.drive_geometry, id.canonical_drives.clone())
    };
    let member = |index: usize| format!("it is drive {index} of this array; a spare must be a drive outside it");
    let mut device = check_new_drive(path, &raw, &members, force, member)?;
    if force {
        reset_every_zone(&mut device, &raw, path)?;
    }
    write_spare_record(device.as_mut(), &spares.record, path)?;
    spares.list.lock().expect("spares").push(ready(path.to_path_buf(), device));
    tracing::warn!("spare added: {}", path.display());
    Ok(supply(spares, identity, engine))
}

/// `zapraid remove-spare`: erases the spare's record and lets the drive go.
pub fn remove_spare(spares: &Spares, path: &Path) -> Result<()> {
    let canonical = canonical(path);
    let mut list = spares.list.lock().expect("spares");
    let refuse = |reason: &str| Error::Refused { path: path.to_path_buf(), reason: reason.into() };
    let index =
        list.iter().position(|s| s.canonical == canonical).ok_or_else(|| refuse("it is not a spare of this array"))?;
    if list[index].state == SpareState::Taken {
        return Err(refuse("it is being taken into the array now (see zapraid status)"));
    }
    if let Some(device) = list[index].device.as_mut() {
        erase_spare_record(device.as_mut(), path)?;
    }
    list.remove(index);
    tracing::warn!("spare removed: {}", path.display());
    Ok(())
}
