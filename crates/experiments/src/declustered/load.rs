//! Users during a rate-limited rebuild, as Exp#5's rebuild under load drives them
//! (`rebuild_load`): 4 KiB random requests over the whole array, `USER_READ_PERCENT`%
//! reads, `USER_QUEUE_DEPTH` in flight, from the moment drive 0 is replaced (classic) or
//! rebuilt into spare space (declustered) until its rebuild is done; the rebuild is paced to
//! write at most the rate (`Engine::set_rebuild_rate`: the bytes it writes, to the new
//! drive or to every drive's spare space together).
//!
//! Invariants: every user request succeeds, else the measurement is an error; latencies
//! are from submission to answer in virtual time.

use std::collections::HashMap;

use super::measure::{fail_and_rebuild, filled, stamped, RebuildRun};
use super::{Scale, Stripe};
use crate::rebuild::Progress;
use crate::rebuild_load::{USER_QUEUE_DEPTH, USER_READ_PERCENT};
use crate::{percentile, XorShift};
use zapraid_engine::engine::{Request, RequestId};
use zapraid_engine::error::Result;
use zapraid_engine::sim::Simulator;
use zapraid_zns::ZonedDevice;

/// Empty zones per drive beyond what the data needs, for the segments users' writes fill
/// during the rebuild: enough that garbage collection need not run (with 16, at 100 MiB/s,
/// it reclaimed 79 segments under the classic 4+1's users, who got 114,000 IOPS instead
/// of 172,000). Zones never written cost the simulator nothing.
const EXTRA_ROWS: u32 = 64;
/// The first user request's id: past the fill's.
const FIRST_USER_ID: RequestId = 1 << 40;

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
    let mut users = Users::new(blocks, block_bytes, seed);
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

/// `USER_QUEUE_DEPTH` random 4 KiB reads and writes in flight over `blocks` blocks.
struct Users {
    blocks: u64,
    block_bytes: u64,
    seed: u64,
    random: XorShift,
    next_id: RequestId,
    /// Per request in flight: when it was issued and whether it reads.
    in_flight: HashMap<RequestId, (u64, bool)>,
    read_ns: Vec<u64>,
    write_ns: Vec<u64>,
}

impl Users {
    fn new(blocks: u64, block_bytes: u64, seed: u64) -> Users {
        Users {
            blocks,
            block_bytes,
            seed,
            random: XorShift(seed | 1),
            next_id: FIRST_USER_ID,
            in_flight: HashMap::new(),
            read_ns: Vec::new(),
            write_ns: Vec::new(),
        }
    }

    fn keep_full(&mut self, sim: &mut Simulator) {
        while (self.in_flight.len() as u64) < USER_QUEUE_DEPTH {
            let lba = self.random.below(self.blocks);
            let read = self.random.below(100) < USER_READ_PERCENT;
            let request = if read {
                Request::Read { lba, blocks: 1 }
            } else {
                Request::Write { lba, data: stamped(lba, 1, self.seed ^ self.next_id, self.block_bytes as usize) }
            };
            self.in_flight.insert(self.next_id, (sim.now_ns(), read));
            sim.submit(self.next_id, request);
            self.next_id += 1;
        }
    }

    /// Takes the answers of the last step.
    fn take(&mut self, sim: &mut Simulator) -> Result<()> {
        for response in sim.take_responses() {
            let Some((issued_ns, read)) = self.in_flight.remove(&response.id) else { continue };
            response.result?;
            let latency_ns = sim.now_ns() - issued_ns;
            if read {
                self.read_ns.push(latency_ns);
            } else {
                self.write_ns.push(latency_ns);
            }
        }
        Ok(())
    }
}
