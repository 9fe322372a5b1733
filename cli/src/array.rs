//! `zapraid format | start | stop | status | fail`: arrays on real NVMe ZNS
//! drives (`/dev/ngXnY`) or emulated drive files (`selftest` is in `selftest`, `inspect` in `inspect`).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use zapraid_engine::Declustering;
use zapraid_server::assemble::identify::first_superblock;
use zapraid_server::assemble::{format_with_spares, FormatOptions, NewlyMissing};
use zapraid_server::control::{self, run_dir};
use zapraid_server::drives::refuse_repeated_drives;
use zapraid_server::records::names::start_name;
use zapraid_server::records::uuid_text;

use crate::size::parse_bytes;
use zapraid_server::export::ublk::{self, UblkOptions};
use zapraid_server::service::{self, Progress, StartOptions};

use crate::hybrid::{chunks_text, OpenSegmentArgs};
use crate::report;
use crate::simulate::{raid_level, write_mode, Level, WriteMode};
use crate::size::format_bytes;
use crate::text::{answer_text, bar};

/// Default stripe group size (the paper's choice).
pub(crate) const DEFAULT_GROUP_SIZE: u32 = 256;

#[derive(Args)]
pub struct FormatArgs {
    /// RAID level.
    #[arg(long, value_enum, default_value = "raid5")]
    level: Level,
    /// How stripes are written: zapraid (stripe groups by Zone Append, the paper's design),
    /// zone-write (every stripe at a fixed offset), zone-append (one group per segment).
    #[arg(long, value_enum, default_value = "zapraid")]
    mode: WriteMode,
    /// Stripes per group for --mode zapraid.
    #[arg(long, default_value_t = DEFAULT_GROUP_SIZE)]
    group_size: u32,
    /// Array name: names its control socket and log, so at most 32 bytes, no "/", no
    /// leading ".", no whitespace.
    #[arg(long, default_value = "zapraid")]
    name: String,
    /// Overwrite drives that belong to another array.
    #[arg(long)]
    force: bool,
    /// Drives in array order: NVMe ZNS namespaces (/dev/ngXnY, with at least 32 bytes of
    /// per-block metadata) or emulated drive files (`zapraid emu create`).
    #[arg(required = true)]
    drives: Vec<PathBuf>,
    /// A hot spare (repeat for more): a drive of the same geometry, empty (or --force),
    /// that holds a spare record of the array. Given to `start` among the drives, it
    /// stays a spare; when a drive fails, the array rebuilds onto it by itself.
    #[arg(long = "spare", value_name = "DRIVE")]
    spares: Vec<PathBuf>,
    /// Chunk sizes and open segments.
    #[command(flatten)]
    segments: OpenSegmentArgs,
    /// Keep at most this much of the L2P table (4 bytes per logical block) in memory
    /// (64M, 1G): the rest lives on the drives as mapping blocks, read back on demand and
    /// evicted by CLOCK. Without it (or with 0) the whole table stays in memory. A budget
    /// also sets zones aside for a checkpoint, so that a start need not replay the log.
    /// Recorded in the superblock; `start --l2p-memory` overrides it for a run.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    l2p_memory: Option<u64>,
    /// Engine shards: each a thread of its own with its own part of every drive's zones and
    /// an interleaved share of the logical space (512 KiB units), so that S cores serve
    /// the array. Recorded in the superblock (it decides where every block is). Each shard
    /// keeps its own reserve of zones, so S shards export less than one. Failed drives,
    /// replacements, rebuilds, spares, scrubs and checkpoints work per shard, all shards
    /// at once (docs/manual/shards.md).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=255))]
    shards: u32,
    /// Drives each stripe takes (k + m), fewer than the drives given: a declustered array
    /// (docs/manual/declustered.md). Each segment takes this many of the drives, chosen
    /// so that every pair of drives shares segments evenly, and a failed drive is rebuilt
    /// from all the others at once. Without it a stripe takes every drive.
    #[arg(long, value_name = "DRIVES")]
    stripe_width: Option<u32>,
    /// Drives' worth of zones a declustered array keeps empty across all its drives: a
    /// drive that fails is rebuilt into them at once, without a new one, and the array is
    /// fully redundant again (with --stripe-width).
    #[arg(long, value_name = "S", default_value_t = 0, requires = "stripe_width")]
    distributed_spares: u32,
}

#[derive(Args)]
pub struct StartArgs {
    /// Name of the running array (for stop/status); the name given at format otherwise.
    #[arg(long)]
    name: Option<String>,
    /// Run in the background: return once the array is up, printing its device.
    #[arg(long)]
    daemon: bool,
    /// Run the engine and its control socket without a block device (no ublk needed).
    #[arg(long)]
    no_device: bool,
    /// ublk queues: one per core by default (at most 16), each served by a thread of its
    /// own. A device taken over after a crash keeps its own queues and depth.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=i64::from(ublk::MAX_QUEUES)))]
    queues: Option<u16>,
    /// Requests each ublk queue holds in flight.
    #[arg(long, default_value_t = ublk::DEFAULT_QUEUE_DEPTH,
          value_parser = clap::value_parser!(u16).range(1..=i64::from(ublk::MAX_QUEUE_DEPTH)))]
    queue_depth: u16,
    /// Run each engine shard on a thread of its own, as every shard beyond the queue count
    /// does, instead of on a ublk queue thread (queue i runs shard i by default, so a
    /// request for that shard costs no hop between threads and no wake-up of another).
    #[arg(long)]
    engine_threads: bool,
    /// Start even when drives are missing that the array does not record failed (not
    /// given, or given but unreadable or without a valid superblock of the array), as long
    /// as the RAID level survives their loss: they are recorded failed first, and stay
    /// failed even if they come back. Drives recorded failed already may be missing
    /// without it.
    #[arg(long)]
    degraded: bool,
    /// Limit drive rebuilds to writing this much per second to the new drive (200M, 1G,
    /// or unlimited, the default), leaving the rest of the drives' bandwidth to the
    /// array's users; `zapraid rebuild-rate` changes it while the array runs.
    #[arg(long, value_name = "RATE", value_parser = crate::size::parse_rate)]
    rebuild_rate: Option<u64>,
    /// The L2P table's memory budget for this run (64M, 1G; 0: the whole table in
    /// memory), instead of the one `format --l2p-memory` recorded.
    #[arg(long, value_name = "SIZE", value_parser = parse_bytes)]
    l2p_memory: Option<u64>,
    /// The engine shards the array was formatted with (`format --shards`): refused if it
    /// was formatted with another number (where every block is depends on it).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=255))]
    shards: Option<u32>,
    /// Threads that check and rebuild chunks beside the engine thread during a drive
    /// rebuild, so that it is not held to one CPU (0: the engine thread alone). Default:
    /// one per CPU but the engine thread's, at most 16. An array of several engine
    /// shards rebuilds each shard on its own thread instead.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(0..=16))]
    rebuild_threads: Option<u16>,
    /// The array's drives, in any order: their superblocks say where each belongs. The
    /// array's hot spares (format --spare, add-spare) are given among them too: their
    /// spare records say so, and they stay spares until a drive fails.
    #[arg(required = true)]
    drives: Vec<PathBuf>,
}

#[derive(Args)]
pub struct StopArgs {
    /// The array's name.
    #[arg(default_value = "zapraid")]
    name: String,
}

#[derive(Args)]
pub struct StatusArgs {
    /// The array's name (every running array if not given).
    name: Option<String>,
    /// One JSON document (an array of them without a name).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct FailArgs {
    /// The array's name.
    name: String,
    /// The drive: its index in the array, or its path.
    drive: String,
    /// Fail it even when the array cannot survive that: its data is lost (reads and
    /// writes fail, and it does not start again).
    #[arg(long)]
    force: bool,
}

pub fn run_format(args: FormatArgs) -> Result<()> {
    let width = args.stripe_width.map_or(args.drives.len(), |w| w as usize);
    let level = raid_level(args.level, width);
    let mode = write_mode(args.mode, args.group_size);
    let declustering = match args.stripe_width {
        Some(_) => Declustering::wide(args.drives.len() as u32, args.distributed_spares),
        None => Declustering::CLASSIC,
    };
    let options = FormatOptions {
        level,
        mode,
        chunk_bytes: args.segments.small_chunk_bytes,
        open_segments: args.segments.open_segments(mode)?,
        name: args.name.clone(),
        force: args.force,
        l2p_budget_bytes: args.l2p_memory,
        shards: args.shards,
        declustering,
    };
    let progress = bar(args.drives.len() as u64, "formatting drives");
    let formatted = format_with_spares(&args.drives, &args.spares, &options, |done, total| {
        progress.set_position(done as u64);
        if progress.is_hidden() {
            eprintln!("formatted drive {done} of {total}");
        }
    })?;
    progress.finish_and_clear();
    println!(
        "formatted array \"{}\" ({}): {}, {}, {}, {} drives{}{}, {} usable ({} blocks of {} B)",
        args.name,
        uuid_text(&formatted.uuid),
        level,
        options.mode,
        chunks_text(options.chunk_bytes, &options.open_segments),
        args.drives.len(),
        match args.stripe_width {
            Some(_) => format!(" declustered, {} distributed spare(s)", args.distributed_spares),
            None => String::new(),
        },
        if args.shards > 1 { format!(", {} engine shards", args.shards) } else { String::new() },
        format_bytes(formatted.logical_blocks * u64::from(formatted.block_size_bytes)),
        formatted.logical_blocks,
        formatted.block_size_bytes
    );
    for spare in &args.spares {
        println!("spare: {} (rebuilt onto by itself when a drive fails)", spare.display());
    }
    println!(
        "start it with: zapraid start {}",
        args.drives.iter().chain(&args.spares).map(|p| p.display().to_string()).collect::<Vec<_>>().join(" ")
    );
    Ok(())
}

pub fn run_start(args: StartArgs) -> Result<()> {
    if args.daemon {
        return start_daemon(&args);
    }
    let block_device = !args.no_device;
    if block_device && !zapraid_server::export::ublk::available() {
        bail!(
            "the block device needs the ublk kernel module (ublk_drv, Linux >= 6.0), and /dev/ublk-control is \
             missing: load it with `modprobe ublk_drv`, or run with --no-device for the engine alone"
        );
    }
    let options = StartOptions {
        name: args.name.clone(),
        block_device,
        ublk: UblkOptions {
            queues: args.queues.unwrap_or_else(ublk::default_queues),
            depth: args.queue_depth,
            engine_on_queues: !args.engine_threads,
            ..UblkOptions::default()
        },
        newly_missing: if args.degraded { NewlyMissing::RecordFailed } else { NewlyMissing::Refuse },
        rebuild_rate_bytes_per_s: args.rebuild_rate.filter(|r| *r > 0),
        l2p_budget_bytes: args.l2p_memory,
        shards: args.shards,
        rebuild_threads: args.rebuild_threads.map(usize::from),
    };
    let mut spinner: Option<indicatif::ProgressBar> = None;
    service::run(&args.drives, options, move |p| match p {
        Progress::Assembled { name, drives, drive_count, degraded } => {
            if let Some(line) = degraded {
                eprintln!("{line}");
                eprintln!("array \"{name}\": {drives} of {drive_count} drives assembled, recovering");
            } else {
                eprintln!("array \"{name}\": {drives} drives assembled, recovering");
            }
            if std::io::stderr().is_terminal() {
                let bar = indicatif::ProgressBar::new_spinner().with_message("recovering from the drives");
                bar.enable_steady_tick(Duration::from_millis(100));
                spinner = Some(bar);
            }
        }
        Progress::Spares { paths } => {
            let line = format!("spares: {} (used by themselves when a drive fails)", paths.join(", "));
            match &spinner {
                Some(bar) => bar.suspend(|| eprintln!("{line}")),
                None => eprintln!("{line}"),
            }
        }
        Progress::SpareNotUsed { path, why } => {
            let line = format!("warning: spare {path} is not used: {why}");
            match &spinner {
                Some(bar) => bar.suspend(|| eprintln!("{line}")),
                None => eprintln!("{line}"),
            }
        }
        Progress::Recovered { seconds, mapped_blocks } => {
            if let Some(bar) = spinner.take() {
                bar.finish_and_clear();
            }
            eprintln!("recovered in {seconds:.3} s ({mapped_blocks} blocks mapped)")
        }
        Progress::RebuildResumed { drive, path } => eprintln!(
            "drive {drive} ({path}) was being rebuilt when the array stopped: the rebuild resumes, keeping the \
             segments it completed (zapraid status shows its progress)"
        ),
        Progress::Ready { device, socket, taken_over } => {
            match device {
                Some(d) => println!("{d}"),
                None => println!("running without a block device (control socket {socket})"),
            }
            if taken_over {
                eprintln!(
                    "took over {}, left by a server that ended without stopping: the requests it held run now",
                    device.unwrap_or("the block device")
                );
            }
            eprintln!("ready; stop with `zapraid stop <name>` (or Ctrl-C / SIGTERM here)");
        }
    })?;
    eprintln!("stopped cleanly");
    Ok(())
}

/// Starts this program again in the background (its own session, output to a log) and
/// waits until the array answers on its control socket.
fn start_daemon(args: &StartArgs) -> Result<()> {
    // Said here, not in the background server's log.
    refuse_repeated_drives(&args.drives)?;
    // The name the server will take (names::start_name): its socket is what this waits for.
    let name = match &args.name {
        Some(n) => start_name(Some(n), "")?,
        None => start_name(None, &first_superblock(&args.drives)?.name())?,
    };
    // Before the log is opened: this start's server would only append its refusal to the
    // running array's log.
    control::refuse_running(&name)?;
    let log_path = run_dir::prepare()?.join(format!("{name}.log"));
    let log = run_dir::open_log(&log_path)?;
    // The log keeps earlier runs (what a crashed server said stays); this run's part
    // starts here.
    let log_start = log.metadata().map_or(0, |m| m.len()) as usize;
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command.arg("start").arg("--name").arg(&name);
    if args.no_device {
        command.arg("--no-device");
    }
    if args.degraded {
        command.arg("--degraded");
    }
    if let Some(rate) = args.rebuild_rate {
        command.args(["--rebuild-rate", &rate.to_string()]);
    }
    if let Some(bytes) = args.l2p_memory {
        command.args(["--l2p-memory", &bytes.to_string()]);
    }
    if let Some(queues) = args.queues {
        command.args(["--queues", &queues.to_string()]);
    }
    if let Some(shards) = args.shards {
        command.args(["--shards", &shards.to_string()]);
    }
    if let Some(threads) = args.rebuild_threads {
        command.args(["--rebuild-threads", &threads.to_string()]);
    }
    command.args(["--queue-depth", &args.queue_depth.to_string()]);
    if args.engine_threads {
        command.arg("--engine-threads");
    }
    command.args(&args.drives);
    command.stdin(std::process::Stdio::null()).stdout(log.try_clone()?).stderr(log);
    // SAFETY: setsid() in the child before exec touches no memory of ours.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = command.spawn().context("cannot start the background server")?;
    let deadline = std::time::Instant::now() + control::ANSWER_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait()? {
            let log = std::fs::read(&log_path).unwrap_or_default();
            let log = String::from_utf8_lossy(log.get(log_start..).unwrap_or_default());
            bail!("the server exited ({status}) before the array came up:\n{log}");
        }
        if let Ok(status) = control::ask(&name, "status") {
            // Another array's server may hold the name (this one then fails and exits):
            // only the answer of the server started here counts.
            let ours = status["pid"].as_u64() == Some(u64::from(child.id()));
            if ours && status.get("error").is_none() && (args.no_device || !status["device"].is_null()) {
                match status["device"].as_str() {
                    Some(device) => println!("{device}"),
                    None => println!("array \"{name}\" running without a block device"),
                }
                if let Some(line) = missing_line(&name, &status) {
                    eprintln!("{line}");
                }
                if let Some(line) = crate::spare::spares_line(&status) {
                    eprintln!("array \"{name}\": {line}");
                }
                if let Some(line) = crate::report::rebuild_line(&status["rebuild"]) {
                    eprintln!("array \"{name}\": {line} (a rebuild cut short resumes where it left off)");
                }
                eprintln!("running in the background (pid {}, log {})", child.id(), log_path.display());
                return Ok(());
            }
        }
        if std::time::Instant::now() > deadline {
            bail!("the array did not come up in time; see {}", log_path.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn run_stop(args: StopArgs) -> Result<()> {
    let answer = control::ask(&args.name, "stop")?;
    if let Some(e) = answer.get("error") {
        bail!("array \"{}\": {}", args.name, answer_text(e));
    }
    // The engine has stopped; the server exits next, releasing its drives and socket. A
    // `start` right after must find them free, so wait for the exit.
    if let Some(pid) = answer.get("pid").and_then(serde_json::Value::as_u64).and_then(|p| i32::try_from(p).ok()) {
        let deadline = std::time::Instant::now() + STOP_EXIT_WAIT;
        while process_alive(pid) {
            if std::time::Instant::now() > deadline {
                bail!("array \"{}\" stopped, but its server (pid {pid}) has not exited", args.name);
            }
            std::thread::sleep(STOP_EXIT_POLL);
        }
    }
    println!("array \"{}\" stopped cleanly", args.name);
    Ok(())
}

/// Whether process `pid` still runs or holds its files. An exited one nobody reaped yet
/// does not; but its main thread turns zombie while its other threads still tear down
/// (with the drives' locks), so it has exited only once it is a zombie with no other
/// thread left.
fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists; nothing is delivered.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return false;
    }
    // /proc/PID/stat: "pid (comm) state ..."; the command name may hold spaces.
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat.rsplit_once(')').map(|(_, rest)| rest.trim_start().starts_with('Z')))
        .unwrap_or(false);
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, Iterator::count);
    !(zombie && threads <= 1)
}

/// How long `stop` waits for a stopped server to exit, and how often it looks.
const STOP_EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
const STOP_EXIT_POLL: std::time::Duration = std::time::Duration::from_millis(10);

pub fn run_status(args: StatusArgs) -> Result<()> {
    let names = match &args.name {
        Some(n) => vec![n.clone()],
        None => control::running(),
    };
    let mut documents = Vec::new();
    for name in &names {
        let status = control::ask(name, "status")?;
        if let Some(e) = status.get("error") {
            bail!("array \"{name}\": {}", answer_text(e));
        }
        documents.push(status);
    }
    if args.json {
        let out = match (&args.name, documents.len()) {
            (Some(_), 1) => documents.pop().expect("one"),
            _ => serde_json::Value::Array(documents),
        };
        println!("{out}");
        return Ok(());
    }
    if documents.is_empty() {
        println!("no array is running");
    }
    for s in &documents {
        report::print_status(s);
    }
    Ok(())
}

pub fn run_fail(args: FailArgs) -> Result<()> {
    let status = control::ask(&args.name, "status")?;
    if let Some(e) = status.get("error") {
        bail!("array \"{}\": {}", args.name, answer_text(e));
    }
    let drives = status["drives"].as_array().cloned().unwrap_or_default();
    let index = match args.drive.parse::<usize>() {
        Ok(i) => i,
        Err(_) => find_drive(&drives, &args.drive)
            .with_context(|| format!("array \"{}\" has no drive {}", args.name, args.drive))?,
    };
    let command = if args.force { format!("fail {index} force") } else { format!("fail {index}") };
    let answer = control::ask(&args.name, &command)?;
    if let Some(e) = answer.get("error") {
        bail!("array \"{}\": {}", args.name, answer_text(e));
    }
    let drive = match drives.get(index).and_then(|d| d["path"].as_str()) {
        Some(path) => format!("drive {index} ({path})"),
        None => format!("drive {index}"),
    };
    if answer["data_lost"].as_bool() == Some(true) {
        println!(
            "array \"{}\": {drive} marked failed; more drives are down than the array survives: its data is \
             lost where stripes are left short (reads of those blocks fail; `zapraid status` counts them)",
            args.name
        );
    } else {
        println!(
            "array \"{}\": {drive} marked failed; its blocks are rebuilt from the other drives on read",
            args.name
        );
    }
    Ok(())
}

/// The index of the drive at `path` (however spelled: compared canonicalized, as the
/// server started it may have named it relative to another directory) among a status
/// document's drives.
pub(crate) fn find_drive(drives: &[serde_json::Value], path: &str) -> Option<usize> {
    let canonical = std::fs::canonicalize(path).ok();
    let canonical = canonical.as_ref().and_then(|p| p.to_str());
    drives
        .iter()
        .find(|d| {
            d["path"].as_str() == Some(path) || (canonical.is_some() && d["canonical_path"].as_str() == canonical)
        })
        .and_then(|d| d["index"].as_u64())
        .and_then(|i| usize::try_from(i).ok())
}

/// What a background start says of drives missing, from its status document: "array
/// \"NAME\" runs degraded: drive 1 missing (recorded failed)" (the server's log says
/// which were recorded at this start, and which drives given it did not use). A
/// declustered array's drives in distributed spare space are said as such: without only
/// those the array is whole.
fn missing_line(name: &str, status: &serde_json::Value) -> Option<String> {
    let missing: Vec<&serde_json::Value> =
        status["drives"].as_array()?.iter().filter(|d| d["missing"].as_bool() == Some(true)).collect();
    let spared = |d: &serde_json::Value| d["in_spare_space"].as_bool() == Some(true);
    let each: Vec<String> = missing
        .iter()
        .map(|d| match spared(d) {
            true => format!("drive {} missing (its chunks in distributed spare space)", d["index"]),
            false => format!("drive {} missing (recorded failed)", d["index"]),
        })
        .collect();
    let runs = if missing.iter().all(|d| spared(d)) { "runs without drives it needs no more" } else { "runs degraded" };
    (!each.is_empty()).then(|| format!("array \"{name}\" {runs}: {}", each.join(", ")))
}
