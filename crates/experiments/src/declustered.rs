//! `zapraid bench declustered` (issue 35): how much faster a declustered array rebuilds a
//! failed drive than a classic one, against what the drives allow, how evenly it loads
//! them, what that costs users, and what it gives in mean time to data loss, beside the
//! LANL study of ZFS dRAID (`../shared/reference/papers/003_*`).
//!
//! Each row is an array of N drives (`DRIVE_COUNTS`) with stripes of k + m (`STRIPES`) and
//! one distributed spare, on emulated drives with the ZN540 timing model (the Exp#5 setup
//! of `rebuild`, on smaller zones: `Scale`), in virtual time. N = k + m is the classic
//! array, rebuilt onto one new drive (`Simulator::replace_drive`); N > k + m spreads each
//! segment over k + m of the N drives (`placement`) and rebuilds a failed drive into the
//! others' spare space (`Simulator::rebuild_into_spares`); a shape that cannot be (8+2 on
//! 8 drives) is a row that says why. Per array (`measure`):
//! - the rebuild alone, with the engine's simulated core charged as in every experiment
//!   (one core per array), and again with the core not charged (what the drives allow):
//!   its time per 100 GiB of the failed drive's contents (what the rebuild writes: the
//!   chunks, data and parity, of every segment the drive held, and their headers and
//!   footers), from its start until the last segment is rebuilt; the bytes every drive
//!   served meanwhile (`Simulator::drive_traffic`);
//! - users' 4 KiB random I/O while the rebuild runs at each of `RATES_MIB_PER_S` (`load`).
//!
//! From these: the speedup over the classic array of the same stripe measured in the same
//! run; the ideal speedup from the drives' bandwidth (`ideal_speedup`, from `bandwidth`);
//! the rebuild's load imbalance from what the survivors read; the MTTDL of the study's
//! Markov model (`mttdl`) with the rebuild time scaled to a full ZN540.
//!
//! Invariants: deterministic (same seed, same figures); a figure that was not measured is
//! `None`, never 0.

mod bandwidth;
mod load;
mod measure;
pub mod mttdl;

use zapraid_zns::Geometry;

pub use self::bandwidth::{read_bandwidth, Bandwidths};
pub use self::load::UnderLoad;
pub use self::measure::{stamped, zones, RebuildRun};
use crate::rebuild::{rebuild_write_bytes, Progress, HUNDRED_GIB_BYTES};
use zapraid_engine::error::{Error, Result};
use zapraid_engine::layout::RaidLevel;
use zapraid_engine::placement::Placement;

/// Drives per array, one row each (beside the classic width of each stripe).
pub const DRIVE_COUNTS: [u32; 5] = [5, 8, 12, 16, 24];
/// Stripes of the table: k + m.
pub const STRIPES: [Stripe; 2] = [Stripe { data: 4, parity: 1 }, Stripe { data: 8, parity: 2 }];
/// Distributed spares of every declustered array.
pub const DISTRIBUTED_SPARES: u32 = 1;
/// Chunk size of every array: where Exp#5's rebuild onto a new drive reaches the drive's
/// write bound (`rebuild`), so the classic baseline is as fast as the drive allows.
pub const CHUNK_BYTES: u64 = 16384;
/// The drive that fails.
pub const FAILED_DRIVE: usize = 0;
/// The rebuild's rate limits under user load, MiB/s written.
pub const RATES_MIB_PER_S: [u64; 2] = [400, 100];

/// Cores besides the engine's that run the rebuild's jobs in the `Charge::Cores` runs:
/// the study's servers' eight (two 4-core Xeon E5620s per node) less the engine's, as the
/// server's `--rebuild-threads` default gives on such a machine.
pub const REBUILD_WORKER_CORES: u32 = 7;

/// What a rebuild run is charged for the engine's CPU work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charge {
    /// One core, the engine's, as in every experiment: its events and the rebuild's jobs.
    OneCore,
    /// The engine's core, and `REBUILD_WORKER_CORES` worker cores for the rebuild's jobs
    /// (their results coming back as events, as the server runs them).
    Cores,
    /// Nothing: what the drives allow.
    DrivesOnly,
}

impl Charge {
    pub const ALL: [Charge; 3] = [Charge::OneCore, Charge::Cores, Charge::DrivesOnly];

    /// "1 core", "8 cores", "drives only".
    pub fn label(self) -> String {
        match self {
            Charge::OneCore => "1 core".into(),
            Charge::Cores => format!("{} cores", REBUILD_WORKER_CORES + 1),
            Charge::DrivesOnly => "drives only".into(),
        }
    }
}

/// The study's figures (ZFS dRAID against RAIDZ on 4 TB disks, cfg = k x (d + p) + s):
/// recovery 2.89x as fast on average (Fig. 3, 3 x (1+1) + 1).
pub const STUDY_RECOVERY_SPEEDUP: f64 = 2.89;
/// Rebuild throughput 1.47x to 3.13x RAIDZ's from 1 to 6 groups of (5+2) + 2 spares (Fig. 4:
/// 9 to 44 drives).
pub const STUDY_THROUGHPUT_SPEEDUP: (f64, f64) = (1.47, 3.13);
/// The ideal at 6 groups (44 drives), (C - f) / (G - f): of which 3.13 is 44%.
pub const STUDY_IDEAL_SPEEDUP: f64 = 7.17;
/// MTTDL of dRAID over RAIDZ, 6 x (5+2) + 2 on 44 drives, AFR 0.97%.
pub const STUDY_MTTDL_RATIO: f64 = 3.96;
/// OpenZFS dRAID's rebuild load imbalance (most over mean read per survivor) by drives.
pub const DRAID_IMBALANCE: [(u32, f64); 2] = [(8, 1.059), (16, 1.111)];

/// The checks: the rebuild at N = 12, 4+1, at least this many times as fast as
/// the classic 4+1's; every row at least this share of its ideal speedup; the imbalance at
/// most this at N drives.
pub const CHECK_SPEEDUP_AT_12: f64 = 2.5;
pub const CHECK_SHARE_OF_IDEAL: f64 = 0.8;
pub const CHECK_IMBALANCE: [(u32, f64); 2] = [(8, 1.10), (16, 1.15)];

/// How big the measurement is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scale {
    /// Blocks per zone (all of them usable): zones small enough that the failed drive
    /// holds many segments, each rebuilt on its own, as a real drive's thousands are.
    pub zone_blocks: u64,
    /// Segments on the failed drive for the rebuild alone: three times what a declustered
    /// rebuild writes at once (`MAX_DECLUSTERED_REBUILD_SEGMENTS_AT_ONCE`), so that its
    /// start and end weigh little (its time per 100 GiB changes by 1% from 192 segments to
    /// 384 at 12 drives, by 9% from 96).
    pub failed_drive_segments: u64,
    /// Segments on the failed drive for the runs under user load.
    pub load_segments: u64,
}

impl Scale {
    /// The table's: 2 MiB zones, 192 segments (384 MiB) on the failed drive, 48 under load.
    pub const FULL: Scale = Scale { zone_blocks: 512, failed_drive_segments: 192, load_segments: 48 };
    /// `--quick`: 2 MiB zones, 24 segments, 6 under load.
    pub const QUICK: Scale = Scale { zone_blocks: 512, failed_drive_segments: 24, load_segments: 6 };
}

/// A stripe of `data` data chunks and `parity` parity chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stripe {
    pub data: u32,
    pub parity: u32,
}

impl Stripe {
    pub fn width(self) -> u32 {
        self.data + self.parity
    }

    /// RAID-5 for one parity chunk, RAID-6 (Reed-Solomon) for two.
    pub fn level(self) -> RaidLevel {
        let drives = self.width() as usize;
        match self.parity {
            1 => RaidLevel::Raid5 { drives },
            _ => RaidLevel::Raid6 { drives },
        }
    }

    pub fn name(self) -> String {
        format!("{}+{}", self.data, self.parity)
    }

    /// The table's drive counts for this stripe: `DRIVE_COUNTS` and the classic width.
    pub fn drive_counts(self) -> Vec<u32> {
        let mut counts: Vec<u32> = DRIVE_COUNTS.into_iter().chain([self.width()]).collect();
        counts.sort_unstable();
        counts.dedup();
        counts
    }
}

/// What an array of a row is.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// N = k + m: every segment on every drive, rebuilt onto a new drive.
    Classic,
    /// N > k + m: each row of zones holds `groups` segments and `spare_positions` zones of
    /// spare space; `imbalance` is the placement's rebuild load imbalance over one period
    /// (`Placement::rebuild_imbalance`).
    Declustered { groups: u32, spare_positions: u32, imbalance: f64 },
    /// It cannot be made; why.
    Impossible(String),
}

impl Shape {
    pub fn of(stripe: Stripe, drives: u32) -> Shape {
        if drives == stripe.width() {
            return Shape::Classic;
        }
        match Placement::new(drives, stripe.width(), DISTRIBUTED_SPARES) {
            Ok(p) => Shape::Declustered {
                groups: p.groups_per_row(),
                spare_positions: p.spare_positions_per_row(),
                imbalance: p.rebuild_imbalance(),
            },
            Err(Error::InvalidConfig { reason }) => Shape::Impossible(reason),
            Err(e) => Shape::Impossible(e.to_string()),
        }
    }
}

/// Which measurement of a row is under way, for progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The rebuild alone, charged so.
    Rebuild { charge: Charge },
    /// Under user load at this rate limit (MiB/s).
    Load { rate_mib_per_s: u64 },
}

/// A row's measurements.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// The rebuild alone, the engine's core charged (as every experiment), with worker
    /// cores for its jobs, and not charged.
    pub charged: RebuildRun,
    pub cores: RebuildRun,
    pub drives_only: RebuildRun,
    /// Under user load, one per `RATES_MIB_PER_S`.
    pub loads: Vec<UnderLoad>,
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub stripe: Stripe,
    pub drives: u32,
    pub shape: Shape,
    /// None for a shape that cannot be.
    pub measured: Option<Measured>,
}

/// Measures the row of `stripe` on `drives` drives at `scale`; `progress` hears which
/// measurement runs and how far it is.
pub fn measure_row(
    stripe: Stripe,
    drives: u32,
    scale: &Scale,
    seed: u64,
    mut progress: impl FnMut(Phase, Progress),
) -> Result<Row> {
    let shape = Shape::of(stripe, drives);
    if let Shape::Impossible(_) = shape {
        return Ok(Row { stripe, drives, shape, measured: None });
    }
    let classic = shape == Shape::Classic;
    let mut alone = |charge: Charge| -> Result<RebuildRun> {
        let phase = Phase::Rebuild { charge };
        let mut report = |p| progress(phase, p);
        let (mut sim, _) = measure::filled(stripe, drives, scale, scale.failed_drive_segments, 0, seed, &mut report)?;
        match charge {
            Charge::OneCore => {}
            Charge::Cores => sim.set_rebuild_worker_cores(REBUILD_WORKER_CORES),
            Charge::DrivesOnly => sim.set_cpu_costs(None),
        }
        measure::fail_and_rebuild(&mut sim, classic, None, seed, |_| Ok(()), &mut report)
    };
    let charged = alone(Charge::OneCore)?;
    let cores = alone(Charge::Cores)?;
    let drives_only = alone(Charge::DrivesOnly)?;
    let mut loads = Vec::new();
    for rate_mib_per_s in RATES_MIB_PER_S {
        let phase = Phase::Load { rate_mib_per_s };
        let mut report = |p| progress(phase, p);
        loads.push(load::under_load(stripe, drives, scale, rate_mib_per_s << 20, seed, &mut report)?);
    }
    Ok(Row { stripe, drives, shape, measured: Some(Measured { charged, cores, drives_only, loads }) })
}

impl RebuildRun {
    /// Seconds per 100 GiB of the failed drive's contents, over the whole rebuild.
    pub fn s_per_100_gib(&self) -> Option<f64> {
        per_100_gib(self.rebuild_ns, self.rebuilt_bytes)
    }

    /// Most over mean bytes read per survivor (every drive but the failed one), as the
    /// drives served them; None if the survivors read nothing.
    pub fn read_imbalance(&self) -> Option<f64> {
        imbalance(self.traffic.iter().enumerate().filter(|(d, _)| *d != FAILED_DRIVE).map(|(_, t)| t.bytes_read))
    }

    /// Most over mean bytes written per drive that took any of the rebuild's writes (the
    /// new drive alone in a classic array; the survivors' spare space in a declustered one).
    pub fn write_imbalance(&self) -> Option<f64> {
        imbalance(self.traffic.iter().map(|t| t.bytes_written).filter(|b| *b > 0))
    }

    /// The share of the rebuild's time the engine's core was busy.
    pub fn core_busy(&self) -> f64 {
        self.core_busy_ns as f64 / self.rebuild_ns.max(1) as f64
    }
}

fn per_100_gib(ns: u64, bytes: u64) -> Option<f64> {
    (bytes > 0 && ns > 0).then(|| ns as f64 / 1e9 * HUNDRED_GIB_BYTES / bytes as f64)
}

fn imbalance(values: impl Iterator<Item = u64>) -> Option<f64> {
    let values: Vec<u64> = values.collect();
    let most = values.iter().copied().max()?;
    let mean = values.iter().sum::<u64>() as f64 / values.len() as f64;
    (mean > 0.0).then(|| most as f64 / mean)
}

/// How many times as fast as `classic` a rebuild of `run` is (seconds per 100 GiB of the
/// failed drive's contents).
pub fn speedup(classic: &RebuildRun, run: &RebuildRun) -> Option<f64> {
    Some(classic.s_per_100_gib()? / run.s_per_100_gib()?)
}

/// The rebuild's ideal speedup over the classic array of the same stripe, from the drives'
/// bandwidth alone, per byte X of the failed drive's contents. Each rebuilt chunk needs k
/// chunks read. The classic array is bound by its busiest drive: the new drive writes X,
/// each of the k + m - 1 survivors reads k X / (k + m - 1). In a declustered array of N
/// drives every survivor reads its share, k X / (N - 1), and writes its share of the spare
/// space, X / (N - 1), one after the other (in the timing model reads and writes take the
/// same flash chips). Classic: 1.
pub fn ideal_speedup(stripe: Stripe, drives: u32, bw: &Bandwidths) -> f64 {
    let (k, w) = (f64::from(stripe.data), f64::from(stripe.width()));
    let classic = bw.write_s(1.0).max(bw.read_s(k / (w - 1.0)));
    if drives == stripe.width() {
        return 1.0;
    }
    let survivors = f64::from(drives - 1);
    let declustered = bw.read_s(k / survivors) + bw.write_s(1.0 / survivors);
    classic / declustered
}

/// The rebuild's command size for the table's chunks on the measurement's zones: reads
/// and writes of consecutive chunks up to a transfer (`rebuild_write_bytes`).
pub fn command_bytes(scale: &Scale) -> u64 {
    rebuild_write_bytes(&zones(scale.zone_blocks), CHUNK_BYTES)
}

/// A full ZN540's capacity (every zone's): what the MTTDL's recovery time is scaled to.
pub fn zn540_capacity_bytes() -> u64 {
    let g = Geometry::zn540();
    u64::from(g.zone_count) * g.zone_capacity_blocks * u64::from(g.block_size_bytes)
}

/// What a failed full ZN540 of an array of `shape` holds: every zone of a classic array's
/// drive; the share of a declustered drive's zones that hold segments, G (k + m) / N (the
/// rest is spare space).
pub fn full_drive_contents_bytes(stripe: Stripe, drives: u32, shape: &Shape) -> Option<u64> {
    let capacity = zn540_capacity_bytes() as f64;
    match shape {
        Shape::Classic => Some(capacity as u64),
        Shape::Declustered { groups, .. } => {
            Some((capacity * f64::from(groups * stripe.width()) / f64::from(drives)) as u64)
        }
        Shape::Impossible(_) => None,
    }
}

/// The study's MTTDL of a pool of `drives` drives with arrays of `stripe` whose failed
/// drive holds `contents_bytes` rebuilt at `s_per_100_gib`, in years, at the study's AFR.
pub fn mttdl_years(stripe: Stripe, drives: u32, contents_bytes: u64, s_per_100_gib: f64) -> f64 {
    let recovery_hours = s_per_100_gib * contents_bytes as f64 / HUNDRED_GIB_BYTES / 3600.0;
    let mtbf = mttdl::mean_hours_between_failures(mttdl::STUDY_AFR);
    mttdl::pool_hours(mtbf, recovery_hours, drives, stripe.width(), stripe.parity) / mttdl::HOURS_PER_YEAR
}

/// A done-when check of the issue, as measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub what: String,
    /// The figure measured (None: not measured), and whether it passes.
    pub figure: Option<f64>,
    pub holds: bool,
}

#[cfg(test)]
mod tests;

impl Measured {
    /// The rebuild alone, charged so.
    pub fn run(&self, charge: Charge) -> &RebuildRun {
        match charge {
            Charge::OneCore => &self.charged,
            Charge::Cores => &self.cores,
            Charge::DrivesOnly => &self.drives_only,
        }
    }
}

impl Row {
    /// The speedup of this row's rebuild over `classic`'s (the classic row of its stripe),
    /// both charged alike.
    pub fn speedup(&self, classic: &Row, charge: Charge) -> Option<f64> {
        speedup(classic.measured.as_ref()?.run(charge), self.measured.as_ref()?.run(charge))
    }

    /// This row's share of its ideal speedup.
    pub fn share_of_ideal(&self, classic: &Row, charge: Charge, bw: &Bandwidths) -> Option<f64> {
        Some(self.speedup(classic, charge)? / ideal_speedup(self.stripe, self.drives, bw))
    }
}

/// The classic row of `stripe` among `rows`.
pub fn classic_row(rows: &[Row], stripe: Stripe) -> Option<&Row> {
    rows.iter().find(|r| r.stripe == stripe && r.shape == Shape::Classic)
}

/// The done-when checks on `rows` (every stripe's, its classic row among them),
/// charged as `charge`: the speedup at N = 12 with 4+1, every declustered
/// row's share of its ideal speedup, the load imbalance (from the drives' counters) at the
/// drive counts of `CHECK_IMBALANCE`.
pub fn checks(rows: &[Row], bw: &Bandwidths, charge: Charge) -> Vec<Check> {
    let speedup = |r: &Row| classic_row(rows, r.stripe).and_then(|c| r.speedup(c, charge));
    let mut checks = Vec::new();
    let four_one = Stripe { data: 4, parity: 1 };
    let at_12 = rows.iter().find(|r| r.stripe == four_one && r.drives == 12).and_then(speedup);
    checks.push(Check {
        what: format!("4+1 on 12 drives rebuilds at least {CHECK_SPEEDUP_AT_12}x as fast as the classic 4+1"),
        figure: at_12,
        holds: at_12.is_some_and(|s| s >= CHECK_SPEEDUP_AT_12),
    });
    for r in rows.iter().filter(|r| matches!(r.shape, Shape::Declustered { .. })) {
        let share = speedup(r).map(|s| s / ideal_speedup(r.stripe, r.drives, bw));
        checks.push(Check {
            what: format!(
                "{} on {} drives reaches {:.0}% of its ideal speedup",
                r.stripe.name(),
                r.drives,
                CHECK_SHARE_OF_IDEAL * 100.0
            ),
            figure: share,
            holds: share.is_some_and(|s| s >= CHECK_SHARE_OF_IDEAL),
        });
    }
    for (drives, most) in CHECK_IMBALANCE {
        for r in rows.iter().filter(|r| r.drives == drives && matches!(r.shape, Shape::Declustered { .. })) {
            let measured = r.measured.as_ref().and_then(|m| m.run(charge).read_imbalance());
            checks.push(Check {
                what: format!("{} on {drives} drives: rebuild load imbalance at most {most:.2}", r.stripe.name()),
                figure: measured,
                holds: measured.is_some_and(|i| i <= most),
            });
        }
    }
    checks
}
