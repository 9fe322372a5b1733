//! `zapraid`: the command line of the zapraid RAID engine for ZNS SSDs.

mod alloc_count;
mod apps;
mod array;
mod bench;
mod device;
mod emu;
mod grow;
mod hybrid;
mod inspect;
mod plot;
mod replace;
mod replay;
mod replay_targets;
mod report;
mod scrub;
mod selftest;
mod selftest_array;
mod selftest_random;
mod simulate;
mod size;
mod spare;
mod text;

use std::io::IsTerminal;

use clap::{Parser, Subcommand};

/// zapraid: a log-structured RAID engine for Zoned Namespace (ZNS) SSDs, after the
/// ZapRAID paper (Li et al.).
///
/// Arrays live on NVMe ZNS drives or emulated drive files: `format`, then `start` (the
/// block device /dev/ublkbN), `status`, `fail`, `replace`, `scrub`, `stop`; hot spares with
/// `format --spare` and `add-spare`. `emu`, `device`, `simulate`, `replay` and `bench` work
/// with drives and the engine directly.
#[derive(Parser)]
#[command(name = "zapraid", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand)]
enum Top {
    /// Make an array of ZNS drives (NVMe /dev/ngXnY or emulated drive files): empties
    /// them and writes the array superblock to each. Refuses drives of another array
    /// unless --force.
    #[command(after_help = hybrid::FORMAT_HELP)]
    Format(array::FormatArgs),
    /// Assemble an array from its drives (any order), recover it, and export it as a
    /// block device (/dev/ublkbN, needs the ublk kernel module); prints the device path.
    /// Runs until `zapraid stop`, in the foreground or with --daemon in the background.
    /// After a server died without `stop` (kill -9, a crash), start takes its device over:
    /// the same /dev/ublkbN, with the requests the kernel held for it, under a mounted
    /// file system. Up to as many drives as the RAID level survives may be missing: those
    /// recorded failed already may be left out; one missing that is not needs --degraded,
    /// and is then recorded failed (it stays failed even if it comes back).
    Start(array::StartArgs),
    /// Stop a running array cleanly: remove its block device, write what is in flight,
    /// record the open segment so the next start is fast.
    Stop(array::StopArgs),
    /// State of running arrays: drives, capacity, segments, I/O counters, latency.
    Status(array::StatusArgs),
    /// Mark a drive of a running array failed (for testing and operations): nothing more
    /// is sent to it; its blocks are rebuilt from the other drives on read, and it stays
    /// failed across restarts. A failure the RAID level cannot survive is refused (--force
    /// fails it anyway, losing the array's data).
    Fail(array::FailArgs),
    /// Replace a failed drive of a running array with a new one and rebuild onto it
    /// while the array serves I/O: the new drive must be empty (or --force) and of the
    /// array's geometry; --rebuild-rate limits it. A rebuild cut short (stop, crash)
    /// resumes at the next start, keeping the segments it had completed.
    Replace(replace::ReplaceArgs),
    /// Read and check every live block of a running array (checksum, LBA, segment) and
    /// each stripe's parity, in the background; live blocks in damaged rows are rebuilt and
    /// rewritten elsewhere, as garbage collection moves blocks. --wait follows it to the
    /// end; --rate limits its reads.
    Scrub(scrub::ScrubArgs),
    /// Add a hot spare to a running array: a drive of the array's geometry, not a member,
    /// empty (or --force, which erases it), given a spare record of the array. When a
    /// drive fails (zapraid fail, or an I/O error) and no rebuild runs, the array rebuilds
    /// it onto a spare by itself; a drive failed already is rebuilt onto it at once. The
    /// array must run (start it with --no-device to add one to a stopped array); give the
    /// spare to `start` among the drives from then on.
    AddSpare(spare::AddSpareArgs),
    /// Take a hot spare out of a running array: its spare record is erased.
    RemoveSpare(spare::RemoveSpareArgs),
    /// Add drives to a running declustered array (formatted with --stripe-width): new
    /// drives of its geometry, empty (or --force). New segments use them at once, and
    /// garbage collection moves the older segments onto them over time (at the rebuild
    /// rate, if one is set); status shows what is left. The array's capacity stays as it
    /// was (growing it is not built yet). Give the new drives to `start` from then on.
    Grow(grow::GrowArgs),
    /// Limit drive rebuilds of a running array to writing so much per second to the new
    /// drive (the running rebuild and later ones, until the array stops; `start
    /// --rebuild-rate` sets it at start), or lift the limit (unlimited): `status` shows
    /// it. Measured effect on user I/O: `zapraid bench rebuild-load`.
    RebuildRate(replace::RebuildRateArgs),
    /// Show a drive's array superblock, zones and segment headers.
    Inspect(inspect::InspectArgs),
    /// Exercise an array end to end without a block device (no ublk needed): format the
    /// drives, write a pattern, read it back, stop, start, verify, fail a drive, read and
    /// write degraded, restart, verify. Erases the drives (--erase).
    Selftest(selftest::SelftestArgs),
    /// Emulated ZNS drives: create them, inspect them, calibrate their timing model.
    #[command(subcommand)]
    Emu(emu::EmuCommand),
    /// One zoned device, real (/dev/ngXnY, NVMe passthrough) or emulated (a drive file):
    /// info, the conformance suite, zone reset, a write benchmark.
    #[command(subcommand)]
    Device(device::DeviceCommand),
    /// Run the ZapRAID paper's experiments (Exp#1-#10) on emulated drives in virtual time,
    /// with the paper's figures beside ours, and measure the engine's CPU cost; --plot DIR
    /// draws a figure per experiment and DIR/report.md.
    Bench(bench::BenchArgs),
    /// Tables (and with --plot DIR figures) of the paper's real-application experiments,
    /// Exp#11 (file writes) and Exp#12 (a database), from the results of `make apps`.
    AppsReport(apps::AppsReportArgs),
    /// Drive the RAID engine over emulated in-memory drives in the deterministic
    /// simulator: write, verify, fail drives, read degraded and verify.
    Simulate(simulate::SimulateArgs),
    /// Replay a block I/O trace (Alibaba 2020, Tencent CBS 2018, MSR Cambridge, fio iolog;
    /// plain or .gz, streamed) against an array in the deterministic simulator (virtual
    /// time, ZN540 timing; the default), onto drive files or NVMe drives (--on-drives, the
    /// engine in wall time) or onto a block device such as a running array's /dev/ublkbN
    /// (--device): throughput, IOPS, latency percentiles, read/write split, garbage
    /// collection, timeline; --json. Closed loop (--queue-depth) or open loop at the
    /// trace's times (--speed).
    Replay(replay::ReplayArgs),
}

/// Every heap allocation counted (`zapraid bench cpu` reports allocations per request).
#[global_allocator]
static ALLOCATOR: alloc_count::CountingAllocator = alloc_count::CountingAllocator;

/// What is logged when RUST_LOG is not set.
const DEFAULT_LOG_LEVEL: &str = "warn";

fn main() {
    // Piped into `head`, end quietly like other Unix tools instead of failing to print.
    // SAFETY: restores the default disposition of one signal before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    // Warnings are for operators (a drive failed, a dead server's device taken over):
    // shown unless RUST_LOG says otherwise.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_LEVEL));
    // Colour escapes only help a person at a terminal; in a pipe, a file, or the
    // daemon's log (its stderr is the log file) they are noise around every line.
    let colour = std::io::stderr().is_terminal();
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(colour).init();
    let cli = Cli::parse();
    let result = match cli.command {
        Top::Format(args) => array::run_format(args),
        Top::Start(args) => array::run_start(args),
        Top::Stop(args) => array::run_stop(args),
        Top::Status(args) => array::run_status(args),
        Top::Fail(args) => array::run_fail(args),
        Top::Replace(args) => replace::run_replace(args),
        Top::Scrub(args) => scrub::run_scrub(args),
        Top::AddSpare(args) => spare::run_add_spare(args),
        Top::Grow(args) => grow::run_grow(args),
        Top::RemoveSpare(args) => spare::run_remove_spare(args),
        Top::RebuildRate(args) => replace::run_rebuild_rate(args),
        Top::Inspect(args) => inspect::run_inspect(args),
        Top::Selftest(args) => selftest::run_selftest(args),
        Top::Emu(command) => emu::run(command),
        Top::Device(command) => device::run(command),
        Top::Bench(args) => bench::run(args),
        Top::AppsReport(args) => apps::run(args),
        Top::Simulate(args) => simulate::run(args),
        Top::Replay(args) => replay::run(args),
    };
    if let Err(error) = result {
        // A closed pipe (`zapraid emu info | head`) is the reader's choice, not a failure.
        let broken_pipe =
            error.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe);
        if !broken_pipe {
            eprintln!("zapraid: error: {error:#}");
            std::process::exit(1);
        }
    }
}
