//! Users during a rate-limited rebuild, Exp#5's rebuild under load's own
//! (`rebuild_load::Workload`): 4 KiB random requests over the whole array, `USER_READ_PERCENT`%
//! reads, `USER_QUEUE_DEPTH` in flight, from the moment drive 0 is replaced (classic) or
//! rebuilt into spare space (declustered) until its rebuild is done; the rebuild is paced to
//! write at most the rate (`Engine::set_rebuild_rate`: the bytes it writes, to the new
//! drive or to every drive's spare space together).
//!
//! Invariants: every user request succeeds, else the measurement is an error; latencies
//! are from submission to answer in virtual time.

use super::measure::{fail_and_rebuild, filled, RebuildRun};
use super::{Scale, Stripe};
use crate::percentile;
use crate::rebuild::Progress;
use crate::rebuild_load::Workload;
use zapraid_engine::error::Result;
use zapraid_zns::ZonedDevice;

/// Empty zones per drive beyond what the data needs, for the segments users' writes fill
/// during the rebuild: enough that garbage collection need not run (with 16, at 100 MiB/s,
/// it reclaimed 79 segments under the classic 4+1's users, who got 114,000 IOPS instead
/// of 172,000). Zones never written cost the simulator nothing.
const EXTRA_ROWS: u32 = 64;

/// Users' figures during one rate-limited rebuild.
#[derive(Clone, Debug, PartialEq)]
pub struct UnderLoad {
    /// The rebuild's rate limit, bytes per second written.
    pub rate_bytes_per_s: u64,
    pub user_requests: u64,
    /// User requests answered per second of the rebuild.
    pub user_iops: f64,
    /// 99th percentile latency of every user request, and of reads and writes apart.
    pub p99_us: f64,
    pub read_p99_us: f64,
    pub write_p99_us: f64,
    /// Segments garbage collection reclaimed meanwhile (0 unless the users' writes used
    /// up the empty zones: then its work is in the users' figures).
    pub segments_reclaimed: u64,
    pub rebuild: RebuildRun,
}

/// Fills an array as `measure::filled` does with `scale.load_segments` on drive 0, then
/// measures the users while drive 0 is rebuilt at `rate_bytes_per_s`.
pub(super) fn under_load(
    stripe: Stripe,
    drives: u32,
    scale: &Scale,
    rate_bytes_per_s: u64,
    seed: u64,
    progress: &mut impl FnMut(Progress),
) -> Result<UnderLoad> {
    let (mut sim, blocks) = filled(stripe, drives, scale, scale.load_segments, EXTRA_ROWS, seed, progress)?;
    let block_bytes = u64::from(sim.drives[0].geometry().block_size_bytes);
    let classic = drives == stripe.width();
    let mut users = Workload::new(blocks, block_bytes, seed);
    let reclaimed_before = sim.engine.status().segments_reclaimed;
    let rebuild = fail_and_rebuild(
        &mut sim,
        classic,
        Some(rate_bytes_per_s),
        seed,
        |sim| {
            users.take(sim)?;
            users.keep_full(sim);
            Ok(())
        },
        progress,
    )?;
    let elapsed_s = rebuild.rebuild_ns as f64 / 1e9;
    let user_requests = (users.read_ns.len() + users.write_ns.len()) as u64;
    let mut all: Vec<u64> = users.read_ns.iter().chain(&users.write_ns).copied().collect();
    all.sort_unstable();
    users.read_ns.sort_unstable();
    users.write_ns.sort_unstable();
    Ok(UnderLoad {
        rate_bytes_per_s,
        user_requests,
        user_iops: user_requests as f64 / elapsed_s,
        p99_us: percentile(&all, 0.99),
        read_p99_us: percentile(&users.read_ns, 0.99),
        write_p99_us: percentile(&users.write_ns, 0.99),
        segments_reclaimed: sim.engine.status().segments_reclaimed - reclaimed_before,
        rebuild,
    })
}
