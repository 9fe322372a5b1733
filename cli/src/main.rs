//! `zapraid`: the command line of the zapraid RAID engine for ZNS SSDs.

mod bench;
mod device;
mod emu;
mod simulate;
mod size;

use clap::{Parser, Subcommand};

/// zapraid: a log-structured RAID engine for Zoned Namespace (ZNS) SSDs, after the
/// ZapRAID paper (Li et al.).
///
/// Status: built are the zoned-device layer (emulated ZNS drives, their timing model, real
/// NVMe ZNS drives through io_uring passthrough, the conformance suite) and the RAID
/// engine in simulation (`zapraid bench`). Arrays on drives (format, start, stop, status),
/// crash recovery and the ublk block device are not built yet; commands for them will
/// appear here when they are.
#[derive(Parser)]
#[command(name = "zapraid", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand)]
enum Top {
    /// Emulated ZNS drives: create them, inspect them, calibrate their timing model.
    #[command(subcommand)]
    Emu(emu::EmuCommand),
    /// One zoned device, real (/dev/ngXnY, NVMe passthrough) or emulated (a drive file):
    /// info, the conformance suite, zone reset, a write benchmark.
    #[command(subcommand)]
    Device(device::DeviceCommand),
    /// Run the ZapRAID paper's experiments (Exp#1 writes, Exp#2 reads, Exp#3 group size)
    /// on emulated ZN540 drives in virtual time, with the paper's figures beside ours, and
    /// measure the engine's CPU cost.
    Bench(bench::BenchArgs),
    /// Drive the RAID engine over emulated in-memory drives in the deterministic
    /// simulator: write, verify, fail drives, read degraded and verify.
    Simulate(simulate::SimulateArgs),
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Top::Emu(command) => emu::run(command),
        Top::Device(command) => device::run(command),
        Top::Bench(args) => bench::run(args),
        Top::Simulate(args) => simulate::run(args),
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
