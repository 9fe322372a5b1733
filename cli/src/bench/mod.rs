//! `zapraid bench`: the ZapRAID paper's experiments on emulated drives in virtual time,
//! with the paper's figures and the ratios that matter beside ours; with `--plot DIR`, a
//! figure per experiment and a `report.md` with them and the tables.
//!
//! This module owns the command line (which experiments, how big), running the selection
//! in order, and `Out`, which prints each experiment's lines and keeps them with its
//! figures for the report. The experiments are in `paper` (Exp#1-#3, #7, CPU cost),
//! `drives` (Exp#5: crash recovery, rebuild, rebuild under load), `levels` (Exp#4),
//! `scale` (Exp#6), `gc` (Exp#8), `l2p` (Exp#9), `traces` (Exp#10), `declustered`
//! (issue 35: rebuilding into distributed spare space, beside the LANL dRAID study), and the engine's own
//! CPU cost in `cpu`, with the real server path's in `server_path` (every thread's CPU
//! time from `thread_cpu`).

/// Prints a line of an experiment's output and keeps it for the report.
macro_rules! say {
    ($out:expr) => {
        $out.line(String::new())
    };
    ($out:expr, $($arg:tt)*) => {
        $out.line(format!($($arg)*))
    };
}

mod cpu;
mod cpu_rebuild;
mod declustered;
mod drives;
mod gc;
mod l2p;
mod levels;
mod paper;
mod scale;
mod server_path;
mod thread_cpu;
mod traces;

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};

use zapraid_engine::RaidLevel;
use zapraid_experiments::{engine_core_line, PAPER_LEVEL};

use crate::plot::markdown::{write_report, Section};
use crate::plot::{write_svg, Figure};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Experiment {
    /// Every experiment below, in order (what `--plot` runs when none is named).
    All,
    /// Exp#1 (writes), Exp#2 (reads), Exp#3 (group size), Exp#7 (hybrid segments) and the
    /// engine's CPU cost (the default).
    Paper,
    /// Exp#4: RAID-0, RAID-01, RAID-4, RAID-5, RAID-6 at 4/8/16 KiB chunks, ZapRAID vs
    /// ZoneWrite-Only.
    Exp4,
    /// Exp#5: crash recovery and full-drive recovery (`recovery` and `rebuild`).
    Exp5,
    /// Crash recovery time for several amounts of written data (Exp#5).
    Recovery,
    /// Full-drive recovery (Exp#5): drive 0 fails and is rebuilt onto a new drive, for 4,
    /// 8, 16 KiB chunks.
    Rebuild,
    /// A rebuild under user load: 4 KiB random reads and writes while drive 0 is rebuilt,
    /// unlimited and at rate limits of 400, 200, 100 MiB/s, beside no rebuild.
    RebuildLoad,
    /// Exp#6: queue depth 1-128, and (6+1)-RAID-5 on seven FEMU-like drives.
    Exp6,
    /// Hybrid segment management (Exp#7, also `exp7`): four open segments of small and
    /// large chunks under random writes of 4, 8, 16 KiB and a 4/16 KiB mix.
    #[value(alias = "exp7")]
    Hybrid,
    /// Exp#8: garbage collection, reserved space 20-100%, four workloads: throughput and
    /// write amplification.
    Exp8,
    /// Exp#9: L2P table offload, the table's memory budget at 25-100%, four workloads.
    Exp9,
    /// Exp#10: Alibaba trace replay, ZapRAID vs ZoneWrite-Only vs ZoneAppend-Only on one
    /// open segment (4, 16 KiB chunks) and on (2,2) and (1,3) hybrid segments.
    Exp10,
    /// Declustered arrays (issue 35): stripes 4+1 and 8+2 on 5, 8, 12, 16, 24 drives with
    /// one distributed spare, drive 0 rebuilt into spare space (onto a new drive at N = k +
    /// m, the classic array): rebuild time per 100 GiB of the failed drive's contents (the
    /// chunks and headers and footers of its segments, what the rebuild writes), speedup
    /// over the classic array against the ideal from the drives' bandwidth, load imbalance
    /// from the drives' counters, users' IOPS and p99 at 400 and 100 MiB/s, MTTDL (the
    /// LANL study's model), the checks (--json).
    Declustered,
    /// The engine alone on one core over instant drives: 4 KiB writes, reads and degraded
    /// reads per second, allocations per request; then the real server path (engine
    /// thread, drive driver, frontend threads) over drive files on tmpfs: writes per
    /// second, latency, every thread's CPU time (--shards, --json).
    Cpu,
}

/// What `all` runs, in order (Exp#7 within `paper`).
const ALL: [Experiment; 10] = [
    Experiment::Paper,
    Experiment::Exp4,
    Experiment::Recovery,
    Experiment::Rebuild,
    Experiment::RebuildLoad,
    Experiment::Exp6,
    Experiment::Exp8,
    Experiment::Exp9,
    Experiment::Exp10,
    Experiment::Declustered,
];

impl Experiment {
    /// The experiments this selection runs.
    fn expand(self) -> Vec<Experiment> {
        match self {
            Experiment::All => ALL.to_vec(),
            Experiment::Exp5 => vec![Experiment::Recovery, Experiment::Rebuild],
            e => vec![e],
        }
    }

    /// Its name on the command line.
    fn name(self) -> String {
        self.to_possible_value().map_or_else(String::new, |v| v.get_name().to_string())
    }
}

#[derive(Args)]
#[command(after_help = "Examples:\n  zapraid bench                      Exp#1-#3, Exp#7 and the CPU cost\n  \
                        zapraid bench exp4 exp8 --quick    two experiments, small\n  \
                        zapraid bench --quick --plot out/  every experiment, figures and out/report.md")]
pub struct BenchArgs {
    /// Which experiments, in order (default: paper; with --plot: all).
    #[arg(value_enum)]
    experiments: Vec<Experiment>,
    /// Smaller runs (fewer requests, less data): every experiment in seconds, not
    /// minutes. The read figures of ZoneAppend-Only depend on the fill.
    #[arg(long)]
    quick: bool,
    /// Seed of addresses and of the drives' landing order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Only Exp#1 (writes) and the CPU cost (with `paper`).
    #[arg(long)]
    writes_only: bool,
    /// Requests per cell of Exp#4, Exp#6, Exp#7 and cpu (defaults: 40000, 30000, 200000,
    /// 1000000; with --quick 8000, 5000, 50000, 100000), and per run of cpu's server path
    /// (400000; with --quick 40000).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    requests: Option<u64>,
    /// Write a figure (SVG) per experiment into DIR, and DIR/report.md with the figures
    /// and the tables; DIR is made if missing.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// Engine shard counts `cpu` runs the real server path with, e.g. 1,2 (default: 1 and
    /// the core count); each is compared with 1 shard in the same run.
    #[arg(long, value_name = "S,...", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..))]
    shards: Vec<u32>,
    /// Write `cpu`'s or `declustered`'s figures as JSON to FILE (a figure that could not be
    /// measured: null).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Alibaba 2020 trace for Exp#10 (plain or .gz; its writes are replayed); default: a
    /// synthetic Alibaba-format trace made in memory (scripts/gen-alibaba-trace.py's).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

/// An experiment's output: printed as it comes, and kept (lines and figures, by section)
/// for the report.
pub struct Out {
    sections: Vec<Section>,
    figures: Vec<Figure>,
}

impl Out {
    fn new() -> Self {
        Out { sections: Vec::new(), figures: Vec::new() }
    }

    /// Starts the report section of an experiment, run alone by `command`.
    pub fn section(&mut self, title: &str, command: &str) {
        self.sections.push(Section {
            title: title.to_string(),
            command: command.to_string(),
            figures: Vec::new(),
            text: String::new(),
        });
    }

    /// Prints `line` and keeps it in the current section.
    pub fn line(&mut self, line: String) {
        println!("{line}");
        if let Some(s) = self.sections.last_mut() {
            s.text.push_str(&line);
            s.text.push('\n');
        }
    }

    /// Keeps `figure` for the current section (drawn if plotting).
    pub fn figure(&mut self, figure: Figure) {
        if let Some(s) = self.sections.last_mut() {
            s.figures.push(format!("{}.svg", figure.name));
        }
        self.figures.push(figure);
    }
}

pub fn run(args: BenchArgs) -> Result<()> {
    let selected = match (args.experiments.is_empty(), &args.plot) {
        (true, Some(_)) => vec![Experiment::All],
        (true, None) => vec![Experiment::Paper],
        (false, _) => args.experiments.clone(),
    };
    let mut order: Vec<Experiment> = Vec::new();
    // `paper` runs Exp#7 too (unless --writes-only): not twice.
    let paper_has_hybrid =
        selected.iter().flat_map(|e| e.expand()).any(|e| e == Experiment::Paper) && !args.writes_only;
    for e in selected.iter().flat_map(|e| e.expand()) {
        let run_already = order.contains(&e) || (e == Experiment::Hybrid && paper_has_hybrid);
        if !run_already {
            order.push(e);
        }
    }
    refuse_unused_options(&args, &order)?;
    if let Some(dir) = &args.plot {
        std::fs::create_dir_all(dir).with_context(|| format!("making the plot directory {}", dir.display()))?;
    }
    let started = Instant::now();
    let mut out = Out::new();
    for (i, e) in order.iter().enumerate() {
        if i > 0 {
            println!();
        }
        let began = Instant::now();
        run_one(*e, &args, &mut out)?;
        // Wall time on standard error: the tables stay the same from run to run.
        eprintln!("({} took {:.1} s of wall time)", e.name(), began.elapsed().as_secs_f64());
    }
    if let Some(dir) = &args.plot {
        for figure in &out.figures {
            write_svg(dir, figure)?;
        }
        let quick = if args.quick { " --quick" } else { "" };
        let names: Vec<String> = order.iter().map(|e| e.name()).collect();
        let preamble = format!(
            "`zapraid bench {}{quick} --seed {}` (virtual time on emulated drives: the same seed gives the same \
             figures), {:.0} s of wall time. Black marks and crosses in the figures are the paper's values where \
             it gives them.",
            names.join(" "),
            args.seed,
            started.elapsed().as_secs_f64()
        );
        let report = write_report(dir, &preamble, &out.sections)?;
        println!("\n{} figure(s) and {} written", out.figures.len(), report.display());
    }
    Ok(())
}

/// An experiment's runner: prints its tables into `out` and hands it its figures.
type Runner = fn(&BenchArgs, &mut Out) -> Result<()>;

/// What runs one experiment and the title of its report section (`paper` opens its own
/// sections, one per experiment in it); `None` for `All` and `Exp5`, which `expand`
/// resolves.
fn runner(e: Experiment) -> Option<(Option<&'static str>, Runner)> {
    Some(match e {
        Experiment::All | Experiment::Exp5 => return None,
        Experiment::Paper => (None, paper::paper),
        Experiment::Hybrid => (Some("Exp#7: hybrid segment management"), paper::hybrid),
        Experiment::Recovery => (Some("Exp#5: crash recovery"), drives::recovery),
        Experiment::Rebuild => (Some("Exp#5: full-drive recovery"), drives::rebuild),
        Experiment::RebuildLoad => (Some("A rebuild under user load"), drives::rebuild_load),
        Experiment::Exp4 => (Some("Exp#4: RAID schemes"), levels::exp4),
        Experiment::Exp6 => (Some("Exp#6: scalability"), scale::exp6),
        Experiment::Exp8 => (Some("Exp#8: garbage collection"), gc::exp8),
        Experiment::Exp9 => (Some("Exp#9: L2P table offload"), l2p::exp9_run),
        Experiment::Exp10 => (Some("Exp#10: Alibaba trace replay"), traces::exp10),
        Experiment::Declustered => (Some("Declustered arrays: rebuilding into spare space"), declustered::declustered),
        Experiment::Cpu => (Some("The engine's CPU cost"), cpu::cpu),
    })
}

/// Runs one experiment, in its own report section.
fn run_one(e: Experiment, args: &BenchArgs, out: &mut Out) -> Result<()> {
    let Some((title, run)) = runner(e) else { return Ok(()) };
    if let Some(title) = title {
        let quick = if args.quick { " --quick" } else { "" };
        out.section(title, &format!("zapraid bench {}{quick}", e.name()));
    }
    // `paper` says it in its first section; the CPU cost has no simulator.
    if !matches!(e, Experiment::Paper | Experiment::Cpu) {
        let levels = match e {
            Experiment::Exp4 => levels_run(),
            Experiment::Declustered => zapraid_experiments::declustered::STRIPES.iter().map(|s| s.level()).collect(),
            _ => vec![PAPER_LEVEL],
        };
        say!(out, "{}", engine_core_line(&levels));
    }
    run(args, out)
}

/// The levels Exp#4 runs (those the engine builds).
fn levels_run() -> Vec<RaidLevel> {
    zapraid_experiments::levels::levels()
        .into_iter()
        .filter(|l| zapraid_experiments::levels::supported(*l).is_ok())
        .collect()
}

/// An option none of the experiments to run uses is refused, naming those that use it:
/// ignoring it would print figures of a run other than the one asked for.
fn refuse_unused_options(args: &BenchArgs, order: &[Experiment]) -> Result<()> {
    let runs_hybrid = order.contains(&Experiment::Hybrid) || (order.contains(&Experiment::Paper) && !args.writes_only);
    let runs_cpu = order.contains(&Experiment::Cpu);
    let runs_declustered = order.contains(&Experiment::Declustered);
    if args.json.is_some() && runs_cpu && runs_declustered {
        anyhow::bail!("--json writes the figures of one experiment: run cpu and declustered apart");
    }
    let options: [(&str, bool, bool, &str); 5] = [
        ("--writes-only", args.writes_only, order.contains(&Experiment::Paper), "paper"),
        (
            "--requests",
            args.requests.is_some(),
            runs_hybrid || order.contains(&Experiment::Exp4) || order.contains(&Experiment::Exp6) || runs_cpu,
            "exp4, exp6, exp7 (hybrid, also in paper without --writes-only) and cpu",
        ),
        ("--trace", args.trace.is_some(), order.contains(&Experiment::Exp10), "exp10"),
        ("--shards", !args.shards.is_empty(), runs_cpu, "cpu"),
        ("--json", args.json.is_some(), runs_cpu || runs_declustered, "cpu and declustered"),
    ];
    for (option, given, used, users) in options {
        if given && !used {
            let names: Vec<String> = order.iter().map(|e| e.name()).collect();
            anyhow::bail!("{option} is not used by {}: only {users} take it", names.join(", "));
        }
    }
    Ok(())
}

/// Requests per cell: `--requests`, else the full or quick default.
fn requests(args: &BenchArgs, full: u64, quick: u64) -> u64 {
    args.requests.unwrap_or(if args.quick { quick } else { full })
}

/// "yes" or "NO", for a finding's check.
fn verdict(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "NO"
    }
}

/// "4 KiB" for 4096.
fn kib(bytes: u64) -> String {
    format!("{} KiB", bytes / 1024)
}
