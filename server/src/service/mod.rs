//! One running array: refuse a name already running before any drive is touched,
//! assemble its drives (hot spares kept apart; one whose record is damaged is not used,
//! and said), recover, start the engine thread and the thread that rebuilds onto a spare
//! by itself (`spare_pool`), export the block device (optional), answer the control
//! socket, and on `stop` shut down in order: delete the block device (no more I/O), stop
//! the engine cleanly (stop footer), remove the socket.
//!
//! The top room: it puts the rooms below together (`assemble`, `run`, `export`, `ops`,
//! `control`); nothing in the crate takes from it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use zapraid_engine::format::SpareRecord;

use crate::assemble::assembly::assemble_with;
use crate::assemble::assembly::Assembled;
use crate::assemble::degraded::{absent_line, stale_drive_hint, NewlyMissing};
use crate::assemble::identify::first_superblock;
use crate::assemble::recover::{rebuilding_drive, recover, reset_unused_zones};
use crate::control::{self, run_dir, Stopped};
use crate::error::{Error, Result};
use crate::export::ublk::{self, DeviceShape, UblkOptions};
use crate::ops::identity::Identity;
use crate::ops::spare_pool::{self, Spares};
use crate::records::identity::{unix_now_s, uuid_text};
use crate::records::names::{check_name, start_name};
use crate::run::message::{query_status, Message};
use crate::run::record::FailureRecord;
use crate::run::sharded::{ArrayThreads, ShardedArray};
use crate::run::thread::rebuild_workers;
use crate::run::thread::EngineThread;

#[derive(Clone, Debug, Default)]
pub struct StartOptions {
    /// Name for the control socket and log; the superblock's name if not given
    /// (`names::start_name`).
    pub name: Option<String>,
    /// Export `/dev/ublkbN` (else only the engine and the control socket run).
    pub block_device: bool,
    pub ublk: UblkOptions,
    /// What to do with a drive absent that the superblock does not record failed
    /// (`--degraded`: record it failed and start without it).
    pub newly_missing: NewlyMissing,
    /// Rebuilds write at most this many bytes per second to the new drive (None:
    /// unlimited); `zapraid rebuild-rate` changes it while the array runs.
    pub rebuild_rate_bytes_per_s: Option<u64>,
    /// The L2P table's memory budget for this run instead of the one recorded at format
    /// (Some(0): the whole table in memory).
    pub l2p_budget_bytes: Option<u64>,
    /// The engine shards the caller expects (`start --shards`): refused unless the array
    /// was formatted with as many (its superblock records them).
    pub shards: Option<u32>,
    /// Threads that run a drive rebuild's jobs beside the engine thread of an array of one
    /// engine (`run::thread::rebuild_workers`; None: one per CPU but the engine thread's).
    pub rebuild_threads: Option<usize>,
}

/// What happens during start, for the caller to show.
pub enum Progress<'a> {
    /// `drives` present of `drive_count`; `degraded`: the line saying which drives are
    /// missing (`degraded::absent_line`), if any is.
    Assembled {
        name: &'a str,
        drives: usize,
        drive_count: usize,
        degraded: Option<&'a str>,
    },
    /// The array's hot spares among the drives given (paths as given): kept as spares.
    Spares {
        paths: &'a [String],
    },
    /// A drive given that looks like a spare whose record is damaged (the path as given):
    /// not used, `why` (and what to do).
    SpareNotUsed {
        path: &'a str,
        why: &'a str,
    },
    Recovered {
        seconds: f64,
        mapped_blocks: u64,
    },
    /// Drive `drive` (at `path`) was being rebuilt when the array last stopped or crashed:
    /// its rebuild resumes (segments the earlier rebuild completed are kept, once checked).
    RebuildResumed {
        drive: usize,
        path: &'a str,
    },
    /// `taken_over`: the device is one a server that died left, taken over with the
    /// requests the kernel held for it.
    Ready {
        device: Option<&'a str>,
        socket: &'a str,
        taken_over: bool,
    },
}

type ProgressFn = Box<dyn FnMut(Progress) + Send>;

fn stop_signal_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        set
    }
}

/// Runs the array on `paths` until it is stopped through its control socket.
pub fn run(paths: &[PathBuf], options: StartOptions, progress: impl FnMut(Progress) + Send + 'static) -> Result<()> {
    // Shared with the block device's ready call, which may run on another thread.
    let progress: Arc<Mutex<ProgressFn>> = Arc::new(Mutex::new(Box::new(progress)));
    // SIGINT and SIGTERM stop the array cleanly: blocked here, before any thread starts
    // (threads inherit the mask), and taken by one thread with sigwait below.
    let stop_signals = stop_signal_set();
    // SAFETY: changes this thread's signal mask with a set built by sigemptyset/sigaddset.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &stop_signals, std::ptr::null_mut()) };
    let tell = |p: Progress| (progress.lock().expect("progress"))(p);
    if let Some(name) = &options.name {
        // Refused before the drives are touched.
        check_name(name)?;
    }
    // The run directory, where the socket goes, checked before the drives are touched.
    run_dir::prepare()?;
    // Measured now, before the drives are read: every CRC32C from here on uses it.
    let crc = zapraid_engine::crc::choice();
    tracing::info!(
        instruction_ns_per_4k = zapraid_engine::crc::CrcChoice::ns_per_4k(crc.instruction_ns),
        table_ns_per_4k = zapraid_engine::crc::CrcChoice::ns_per_4k(crc.table_ns),
        "CRC32C by {}, the faster here",
        crc.implementation.name()
    );
    // A name already running is refused before any drive is assembled or recovered (with
    // no name given, the drives' own: their superblocks are read for it, nothing more).
    let asked_name = match &options.name {
        Some(name) => Some(name.clone()),
        None => first_superblock(paths).ok().and_then(|sb| start_name(None, &sb.name()).ok()),
    };
    if let Some(name) = &asked_name {
        control::refuse_running(name)?;
    }
    let mut assembled = assemble_with(paths, options.newly_missing)?;
    let name = start_name(options.name.as_deref(), &assembled.name)?;
    let degraded = absent_line(&name, &assembled.absent, &assembled.unusable);
    if let Some(line) = &degraded {
        tracing::warn!("{line}");
    }
    let drive_count = assembled.drives.len();
    tell(Progress::Assembled {
        name: &name,
        drives: drive_count - assembled.absent.len(),
        drive_count,
        degraded: degraded.as_deref(),
    });
    let spare_record = SpareRecord::new(
        assembled.config.array_uuid,
        &assembled.name,
        drive_count as u32,
        assembled.geometry.block_size_bytes,
        unix_now_s(),
    );
    let spares = Arc::new(Spares::new(spare_record, std::mem::take(&mut assembled.spares)));
    let spare_paths = spares.paths();
    if !spare_paths.is_empty() {
        tracing::warn!("array \"{name}\": spares {}", spare_paths.join(", "));
        tell(Progress::Spares { paths: &spare_paths });
    }
    for damaged in std::mem::take(&mut assembled.damaged_spares) {
        let path = damaged.path.display().to_string();
        let why = format!(
            "{}; the array runs without this spare: make it one again with `zapraid remove-spare {name} {path}`, \
             then `zapraid add-spare {name} {path}`",
            damaged.reason
        );
        tracing::warn!("array \"{name}\": spare {path} is not used: {why}");
        tell(Progress::SpareNotUsed { path: &path, why: &why });
        spares.add_unusable(damaged.path, damaged.drive, why);
    }
    let shards = assembled.superblock.shards();
    if let Some(asked) = options.shards.filter(|asked| *asked != shards) {
        return Err(Error::Config {
            reason: format!(
                "array \"{name}\" was formatted with {shards} engine shard{} (its superblock records them: they \
                 decide where every block is); it cannot start with {asked}",
                if shards == 1 { "" } else { "s" }
            ),
        });
    }
    if let Some(bytes) = options.l2p_budget_bytes {
        assembled.config.l2p.budget_bytes = Some(bytes).filter(|b| *b > 0);
    }
    let started = std::time::Instant::now();
    let running = if shards > 1 {
        start_shards(&mut assembled, &options, &name, started, &tell)?
    } else {
        start_one(&mut assembled, &options, &name, started, &tell)?
    };
    let config = assembled.config;
    let shape = DeviceShape {
        logical_blocks: config.logical_blocks,
        block_size_bytes: assembled.geometry.block_size_bytes,
        array_uuid: config.array_uuid,
    };
    let identity = Arc::new(Mutex::new(Identity {
        name: name.clone(),
        uuid: uuid_text(&config.array_uuid),
        level: config.level,
        mode: config.mode,
        chunk_bytes: config.chunk_bytes,
        open_segments: config.open_segments,
        drives: assembled.paths.iter().map(|p| p.as_ref().map(|p| p.display().to_string())).collect(),
        canonical_drives: assembled
            .paths
            .iter()
            .map(|p| p.as_ref().map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()).display().to_string()))
            .collect(),
        device: None,
        drive_geometry: zapraid_zns::Geometry {
            zone_count: assembled.geometry.zone_count + assembled.superblock.reserved_zones.get(),
            ..assembled.geometry
        },
        reserved_zones: assembled.superblock.reserved_zones.get(),
    }));
    let thread = running;
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(1);
    let dev_id: Arc<Mutex<Option<i32>>> = Arc::new(Mutex::new(None));
    let request_stop = {
        let dev_id = dev_id.clone();
        Arc::new(move || {
            let _ = stop_tx.try_send(());
            if let Some(id) = *dev_id.lock().expect("device id") {
                if let Err(e) = ublk::delete(id) {
                    tracing::warn!("{e}");
                }
            }
        })
    };
    let stopped = Arc::new(Stopped::default());
    {
        let request_stop = request_stop.clone();
        std::thread::Builder::new()
            .name("zapraid-signals".into())
            .spawn(move || loop {
                let mut signal = 0;
                // SAFETY: waits on a valid signal set, writing the signal number to a live i32.
                if unsafe { libc::sigwait(&stop_signals, &mut signal) } == 0 {
                    tracing::info!(signal, "stop signal: stopping cleanly");
                    request_stop();
                }
            })
            .map_err(|error| Error::Io { path: "signal thread".into(), context: "cannot start", error })?;
    }
    spare_pool::watch(spares.clone(), identity.clone(), thread.tx().clone())?;
    let socket = control::listen(&name, identity.clone(), thread.tx().clone(), spares, request_stop, stopped.clone())?;
    let socket_text = socket.display().to_string();
    let served = if options.block_device {
        let engine_tx = thread.tx().clone();
        let (identity, dev_id, progress) = (identity.clone(), dev_id.clone(), progress.clone());
        ublk::serve(engine_tx, thread.leases(), shape, options.ublk, move |id, taken_over| {
            let device = format!("/dev/ublkb{id}");
            identity.lock().expect("identity").device = Some(device.clone());
            *dev_id.lock().expect("device id") = Some(id);
            (progress.lock().expect("progress"))(Progress::Ready {
                device: Some(&device),
                socket: &socket_text,
                taken_over,
            });
        })
    } else {
        tell(Progress::Ready { device: None, socket: &socket_text, taken_over: false });
        let _ = stop_rx.recv();
        Ok(())
    };
    let _ = thread.tx().send(Message::Stop);
    let result = thread.join().and(served);
    stopped.set(result.as_ref().map(|_| ()).map_err(|e| e.to_string()));
    // Let the `stop` client read its answer before the socket goes away.
    std::thread::sleep(std::time::Duration::from_millis(200));
    control::remove_socket(&socket);
    result
}

/// Recovers the array's one engine (resuming a rebuild cut short) and starts its thread.
fn start_one(
    assembled: &mut Assembled,
    options: &StartOptions,
    name: &str,
    started: std::time::Instant,
    tell: &dyn Fn(Progress),
) -> Result<ArrayThreads> {
    // A drive being rebuilt holds part of a rebuild: recovery counts it failed (reads
    // nothing from it); the engine then resumes the rebuild, checking each segment's zone.
    let resumed = rebuilding_drive(assembled);
    let mut engine = recover(assembled).map_err(|e| stale_drive_hint(e, name, &assembled.paths))?;
    let mapped_blocks = engine.status().mapped_blocks;
    tell(Progress::Recovered { seconds: started.elapsed().as_secs_f64(), mapped_blocks });
    engine.set_rebuild_rate(options.rebuild_rate_bytes_per_s.filter(|r| *r > 0));
    if let Some(drive) = resumed {
        let path = assembled.paths[drive].as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        if assembled.superblock.is_declustered() {
            // Resuming is not built for a declustered array (its zones hold segments by
            // row, `Engine::resume_drive_rebuild`): the drive is emptied and its rebuild
            // begins again. Recovery read nothing from it.
            reset_unused_zones(assembled, drive, &[])?;
            engine.rebuild_drive(drive)?;
            tracing::warn!(drive, path, "the rebuild cut short begins again from the start (a declustered array)");
        } else {
            reset_unused_zones(assembled, drive, &engine.zones_holding_segments())?;
            engine.resume_drive_rebuild(drive)?;
            tracing::warn!(
                drive,
                path,
                "the rebuild cut short resumes: segments it completed are kept once checked, the others rebuilt"
            );
        }
        tell(Progress::RebuildResumed { drive, path: &path });
    }
    let record = FailureRecord::of(assembled);
    let drives = std::mem::take(&mut assembled.drives);
    let rebuild_threads = options.rebuild_threads.unwrap_or_else(rebuild_workers::default_threads);
    let block_size_bytes = assembled.geometry.block_size_bytes;
    Ok(ArrayThreads::One(EngineThread::spawn(engine, drives, block_size_bytes, record, rebuild_threads)?))
}

/// Recovers every shard of the array at once and starts their threads.
fn start_shards(
    assembled: &mut Assembled,
    options: &StartOptions,
    name: &str,
    started: std::time::Instant,
    tell: &dyn Fn(Progress),
) -> Result<ArrayThreads> {
    let paths = assembled.paths.clone();
    let (array, _reports) = ShardedArray::start(assembled).map_err(|e| stale_drive_hint(e, name, &paths))?;
    let mapped_blocks = query_status(&array.tx).map_or(0, |s| s.engine.mapped_blocks);
    tell(Progress::Recovered { seconds: started.elapsed().as_secs_f64(), mapped_blocks });
    if let Some(rate_bytes_per_s) = options.rebuild_rate_bytes_per_s.filter(|r| *r > 0) {
        let (done, _limit) = crossbeam_channel::bounded(1);
        array.tx.send(Message::SetRebuildRate { rate_bytes_per_s, done })?;
    }
    Ok(ArrayThreads::Shards(array))
}
