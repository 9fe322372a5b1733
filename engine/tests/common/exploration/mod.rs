//! The crash exploration harness: array shapes (`Scheme`), a workload that remembers what
//! each block may hold after a power cut (`Run`, `History`), and one explored run
//! (`explore_with`): writes, a power cut at a chosen step, recovery with the chosen
//! `Twists`, checks, more writes and a second cut. Any violation panics with the run's
//! parameters, so a failing seed can be pinned as a test. Runs with the L2P table
//! offloaded keep checkpoints (`checkpoint`): every later start is offered the newest.
//! Runs are over the plain simulator or, with `explore_on`, over any `Array` (the sharded
//! simulator: S shards over drives of S times the zones, each shard's zones as the plain
//! array's, and the logical blocks interleaved in small units, so that writes cross shards).

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zapraid_engine::{Config, Declustering, L2pConfig, Mode, OpenSegments, RaidLevel, Request, SegmentPlan, Simulator};
use zapraid_zns::Geometry;

use crate::common;
use crate::common::array::{Array, Sharding};
use crate::common::BLOCK;

mod checkpoint;
pub mod grow;
mod kinds;
pub mod lost;
use checkpoint::{Checkpoints, Expect};
#[allow(unused_imports)] // not every binary runs every kind
pub use kinds::{explore_offloaded_on, explore_scheme_on, offloaded_run_on, Outcome};

pub const LOGICAL_BLOCKS: u64 = 64;

/// Zones per drive: enough that the usual runs never fill the array.
pub const ZONES: u32 = 40;

/// Zones beyond the reserve (`SegmentPlan::reserved_segments`) for runs with so few zones
/// that they fill the array many times over: garbage collection relocates segments
/// throughout, and power cuts land in the middle of it.
pub const FEW_ZONES_BEYOND_RESERVE: u32 = 2;

/// An array shape the exploration runs: level, mode and open segments.
#[derive(Clone, Copy, Debug)]
pub struct Scheme {
    pub level: RaidLevel,
    pub mode: Mode,
    /// The (small) chunk.
    pub chunk_blocks: u64,
    pub open: OpenSegments,
    /// Over how many drives (`Declustering::CLASSIC`: k + m).
    pub declustering: Declustering,
}

impl std::fmt::Display for Scheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}, chunks of {} blocks", self.level, self.mode, self.chunk_blocks)?;
        if self.open.is_hybrid() {
            write!(f, " Ns={} Nl={}", self.open.small, self.open.large)?;
        }
        if self.declustering != Declustering::CLASSIC {
            let Declustering { drives, distributed_spares, .. } = self.declustering;
            write!(f, " over {drives} drives, {distributed_spares} distributed spare(s)")?;
        }
        Ok(())
    }
}

impl Scheme {
    pub fn single(level: RaidLevel, mode: Mode) -> Self {
        Scheme { level, mode, chunk_blocks: 1, open: OpenSegments::SINGLE, declustering: Declustering::CLASSIC }
    }

    /// The same over `drives` drives with one distributed spare.
    #[allow(dead_code)] // crash_declustered.rs's, not every binary's
    pub fn declustered(self, drives: u32) -> Self {
        Scheme { declustering: Declustering::wide(drives, 1), ..self }
    }

    /// One open segment of chunks of `chunk_blocks` blocks.
    pub fn with_chunk(level: RaidLevel, mode: Mode, chunk_blocks: u64) -> Self {
        Scheme { chunk_blocks, ..Scheme::single(level, mode) }
    }

    /// Hybrid open segments: small chunks of 1 block, large of `LARGE_CHUNK_BLOCKS`.
    pub fn hybrid(level: RaidLevel, mode: Mode, small: u32, large: u32) -> Self {
        let open = OpenSegments { small, large, large_chunk_bytes: LARGE_CHUNK_BLOCKS * BLOCK as u64 };
        Scheme { level, mode, chunk_blocks: 1, open, declustering: Declustering::CLASSIC }
    }

    /// Zones for runs that fill the array many times over.
    pub fn few_zones(&self) -> u32 {
        let chunk_bytes = self.chunk_blocks * BLOCK as u64;
        let plan = SegmentPlan::new(&geometry(ZONES), self.level, self.mode, chunk_bytes, self.open).unwrap();
        plan.reserved_segments() + FEW_ZONES_BEYOND_RESERVE
    }
}

/// Power cuts that landed while a drive was being rebuilt (for the exploration's summary).
pub static CUTS_DURING_REBUILD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Of those, the rebuilds resumed onto the drive cut short (the others onto a new drive).
pub static RESUMED_REBUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Cuts that caught a declustered array's rebalance with segments still to move back.
pub static CUTS_DURING_REBALANCE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Starts after a power cut during a rebuild that began from a checkpoint (one taken while
/// the rebuild ran, or before it).
pub static CHECKPOINTED_STARTS_DURING_REBUILD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Large chunks of hybrid schemes: writes of one block go to small-chunk stripes, longer
/// ones to large-chunk stripes.
pub const LARGE_CHUNK_BLOCKS: u64 = 2;

pub fn geometry(zones: u32) -> Geometry {
    common::geometry(zones, 8, 10)
}

/// The drives of an array of `sharding` whose every shard has `zones` zones: S times the
/// zones and the open and active zone limits of the plain array's.
pub fn sharded_geometry(sharding: Sharding, zones: u32) -> Geometry {
    common::geometry(sharding.zones(zones), 8 * sharding.shards, 10 * sharding.shards)
}

pub fn config(scheme: Scheme) -> Config {
    let single = common::config(scheme.level, scheme.mode, scheme.chunk_blocks, LOGICAL_BLOCKS);
    Config { open_segments: scheme.open, declustering: scheme.declustering, ..single }
}

/// Block contents that name their write: (LBA, write number).
pub fn block(lba: u64, write: u64) -> Vec<u8> {
    common::named_block(lba, write)
}

/// What each block may hold after a crash.
#[derive(Default, Clone)]
pub struct History {
    /// Write numbers in submission order, and whether each was acknowledged.
    pub writes: Vec<(u64, bool)>,
}

impl History {
    /// Write numbers the block may show: the newest acknowledged one and everything
    /// submitted after it; with nothing acknowledged, zeros (None) too.
    pub fn allowed(&self) -> (bool, Vec<u64>) {
        match self.writes.iter().rposition(|(_, acked)| *acked) {
            Some(i) => (false, self.writes[i..].iter().map(|(w, _)| *w).collect()),
            None => (true, self.writes.iter().map(|(w, _)| *w).collect()),
        }
    }
}

pub struct Run<A = Simulator> {
    /// What is being run, for failure messages.
    pub label: String,
    pub sim: A,
    pub history: HashMap<u64, History>,
    /// Request id -> (first LBA, write numbers of its blocks).
    pub in_flight: HashMap<u64, (u64, Vec<u64>)>,
    pub next_id: u64,
    pub next_write: u64,
}

impl<A: Array> Run<A> {
    /// A run of `sim` with nothing written yet, named `label` in failure messages.
    pub fn new(label: String, sim: A) -> Self {
        Run { label, sim, history: HashMap::new(), in_flight: HashMap::new(), next_id: 0, next_write: 1 }
    }

    pub fn write(&mut self, rng: &mut ChaCha8Rng) {
        let blocks = rng.random_range(1..=5u64);
        let lba = rng.random_range(0..=LOGICAL_BLOCKS - blocks);
        let mut data = Vec::new();
        let mut numbers = Vec::new();
        for i in 0..blocks {
            let w = self.next_write;
            self.next_write += 1;
            data.extend(block(lba + i, w));
            numbers.push(w);
            self.history.entry(lba + i).or_default().writes.push((w, false));
        }
        self.sim.submit(self.next_id, Request::Write { lba, data });
        self.in_flight.insert(self.next_id, (lba, numbers));
        self.next_id += 1;
    }

    pub fn collect_acks(&mut self) {
        for r in self.sim.take_responses() {
            if let Some((lba, numbers)) = self.in_flight.remove(&r.id) {
                assert!(r.result.is_ok(), "{}: write failed: {:?}", self.label, r.result);
                for (i, w) in numbers.iter().enumerate() {
                    let h = self.history.get_mut(&(lba + i as u64)).expect("history");
                    h.writes.iter_mut().find(|(n, _)| n == w).expect("write recorded").1 = true;
                }
            }
        }
    }

    pub fn read_all(&mut self) -> Vec<u8> {
        let id = self.next_id;
        self.next_id += 1;
        self.sim.submit(id, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
        self.sim.run_until_response(id).expect("read answered").result.expect("read succeeds")
    }

    pub fn check(&mut self, what: &str) {
        // A power cut tears only writes in flight: it never damages a complete segment.
        let lost = self.sim.status().recovery_repairs.blocks_lost;
        assert_eq!(lost, 0, "{what}: recovery counted {lost} blocks of complete segments as lost");
        let data = self.read_all();
        for lba in 0..LOGICAL_BLOCKS {
            let got = &data[lba as usize * BLOCK..][..BLOCK];
            let (zeros_ok, allowed) = self.history.get(&lba).map_or((true, Vec::new()), History::allowed);
            let ok =
                (zeros_ok && got.iter().all(|b| *b == 0)) || allowed.iter().any(|w| got == block(lba, *w).as_slice());
            let holds = if got.iter().all(|b| *b == 0) {
                "zeros".to_string()
            } else {
                let lba = u64::from_le_bytes(got[..8].try_into().expect("8 bytes"));
                let write = u64::from_le_bytes(got[8..16].try_into().expect("8 bytes"));
                format!("what looks like write {write} of LBA {lba}")
            };
            assert!(
                ok,
                "{what}: LBA {lba} holds {holds}, neither an allowed write {allowed:?} nor (allowed: {zeros_ok}) zeros"
            );
        }
    }

    /// After a crash and recovery, what was not acknowledged is either there or not; fix
    /// the history to what the drives now say, so later checks stay exact.
    pub fn settle_history(&mut self) {
        let data = self.read_all();
        for lba in 0..LOGICAL_BLOCKS {
            let got = &data[lba as usize * BLOCK..][..BLOCK];
            let now = u64::from_le_bytes(got[8..16].try_into().unwrap());
            let h = self.history.entry(lba).or_default();
            if got.iter().all(|b| *b == 0) {
                h.writes.clear();
            } else {
                h.writes = vec![(now, true)];
            }
        }
        self.in_flight.clear();
    }
}

impl<A: Array> Run<A> {
    /// The run's workload: `writes` writes (and the twists' drive failure or replacement
    /// before theirs), some let complete before the next, then steps until the cut (the
    /// replacement moves it: it counts from there) or until nothing is left to do. Returns
    /// the steps run; fewer than `cut_after_steps` when the work ended first.
    fn workload(
        &mut self,
        rng: &mut ChaCha8Rng,
        seed: u64,
        writes: usize,
        cut_after_steps: &mut usize,
        twists: Twists,
    ) -> usize {
        let mut steps = 0;
        for i in 0..writes {
            if let Some(f) = twists.failure.filter(|f| f.before_write == i) {
                self.sim.drives_mut()[f.drive].fail();
            }
            if let Some(r) = twists.replace.filter(|r| r.before_write == i) {
                self.sim.fail_drive(r.drive);
                let label = &self.label;
                self.sim.replace_drive(r.drive, seed ^ 0x9e3).unwrap_or_else(|e| panic!("{label}: replace: {e}"));
                *cut_after_steps = cut_after_steps.saturating_add(steps);
            }
            if let Some(r) = twists.into_spares.filter(|r| r.before_write == i) {
                self.sim.fail_drive(r.drive);
                let label = &self.label;
                self.sim.rebuild_into_spares(r.drive).unwrap_or_else(|e| panic!("{label}: into spares: {e}"));
                *cut_after_steps = cut_after_steps.saturating_add(steps);
            }
            if let Some(r) = twists.rebalance.filter(|r| r.before_write == i) {
                self.sim.fail_drive(r.drive);
                let label = &self.label;
                self.sim.rebuild_into_spares(r.drive).unwrap_or_else(|e| panic!("{label}: into spares: {e}"));
                while self.sim.status().rebuild.is_some() && self.sim.step() {}
                self.collect_acks();
                let label = &self.label;
                self.sim.replace_drive(r.drive, seed ^ 0xba1).unwrap_or_else(|e| panic!("{label}: replace: {e}"));
                *cut_after_steps = cut_after_steps.saturating_add(steps);
            }
            self.write(rng);
            if rng.random_bool(0.3) {
                // Let some of it complete before more arrives.
                for _ in 0..rng.random_range(1..20) {
                    if steps == *cut_after_steps || !self.sim.step() {
                        break;
                    }
                    steps += 1;
                }
                self.collect_acks();
            }
        }
        while steps < *cut_after_steps && self.sim.step() {
            steps += 1;
        }
        steps
    }
}

/// Steps the workload of `explore_on(sharding, scheme, seed, writes, _, twists)` takes
/// until nothing is left to do: cuts at `0..run_steps_on` catch it at work, a cut at or
/// past it an idle array. Runs the workload alone (no cut, recovery or checks).
pub fn run_steps_on<A: Array>(sharding: Sharding, scheme: Scheme, seed: u64, writes: usize, twists: Twists) -> usize {
    let config = Config { l2p: l2p_config(twists), ..config(scheme) };
    let sim = A::create(sharding, sharded_geometry(sharding, twists.zones), config, seed).unwrap();
    let label = format!("{scheme}, {sharding}, seed {seed}, {twists:?}, to the end of its work");
    let mut run = Run::new(label, sim);
    let mut no_cut = usize::MAX;
    run.workload(&mut ChaCha8Rng::seed_from_u64(seed), seed, writes, &mut no_cut, twists)
}

/// The L2P table's configuration of a run with `twists`.
fn l2p_config(twists: Twists) -> L2pConfig {
    twists.l2p.map_or_else(L2pConfig::default, |(page_entries, budget_pages)| L2pConfig {
        budget_bytes: Some(budget_pages * BLOCK as u64),
        page_entries: Some(page_entries),
        checkpoint: true,
    })
}

/// One explored run: `writes` writes, power cut after `cut_after_steps` simulation steps,
/// recovery, more writes, a second power cut and recovery. Returns what it explored (two
/// crash states). Any violation panics with the run's parameters.
pub fn explore(scheme: Scheme, seed: u64, writes: usize, cut_after_steps: usize) -> Outcome {
    explore_with(scheme, seed, writes, cut_after_steps, Twists::default())
}

/// When a drive fails during an explored run.
#[derive(Clone, Copy, Debug)]
pub struct DriveFailure {
    pub drive: usize,
    /// Before this write of the workload; at or past the end: together with the power cut.
    pub before_write: usize,
}

/// What an explored run adds to the plain write-crash-recover cycle.
#[derive(Clone, Copy, Debug)]
pub struct Twists {
    pub zones: u32,
    /// The first recovery is itself cut by a power loss after this many completions, then
    /// run again (a nested crash).
    pub interrupt_recovery: Option<usize>,
    pub failure: Option<DriveFailure>,
    /// Power is cut again this many steps into the work recovery leaves behind (closing
    /// and reclaiming the segments that were open), then recovery runs once more.
    pub cut_reclaim_after_steps: Option<usize>,
    /// A clean stop begins at the crash point, and power is cut this many steps into it
    /// (or after it, if it takes fewer).
    pub stop_then_cut_after_steps: Option<usize>,
    /// A drive fails and a new one takes its place before this write: the power cut lands
    /// during (or after) its rebuild, `cut_after_steps` counted from the replacement.
    pub replace: Option<DriveFailure>,
    /// A declustered array's drive fails and is rebuilt into distributed spare space
    /// before this write: the power cut lands during (or after) that rebuild,
    /// `cut_after_steps` counted from its start. The start is told the drive failed (and
    /// whether it was rebuilt into spare space), and the rebuild is started again.
    pub into_spares: Option<DriveFailure>,
    /// A declustered array's drive fails before this write and is rebuilt into
    /// distributed spare space to the end; then a new drive takes its place, and garbage
    /// collection moves the segments in spare space back to it (`rebalance`): the power
    /// cut lands during (or after) that, `cut_after_steps` counted from the replacement.
    pub rebalance: Option<DriveFailure>,
    /// The L2P table offloaded after every start: (entries per page, pages of budget).
    /// Such runs keep checkpoints: every clean stop leaves one, every later start is
    /// offered the newest, and the run ends with a clean stop and a start from it.
    pub l2p: Option<(u64, u64)>,
}

/// Whether a power cut now would catch work in flight (for `Outcome::cuts_in_flight`).
fn in_flight<A: Array>(sim: &A) -> usize {
    usize::from(sim.commands_in_flight() > 0)
}

impl Default for Twists {
    fn default() -> Self {
        Twists {
            zones: ZONES,
            interrupt_recovery: None,
            failure: None,
            cut_reclaim_after_steps: None,
            stop_then_cut_after_steps: None,
            replace: None,
            into_spares: None,
            rebalance: None,
            l2p: None,
        }
    }
}

/// Like `explore`, with `twists`: says what the run's starts did with the checkpoints
/// offered, and which of its cuts caught work in flight.
pub fn explore_with(scheme: Scheme, seed: u64, writes: usize, cut_after_steps: usize, twists: Twists) -> Outcome {
    explore_on::<Simulator>(Sharding::PLAIN, scheme, seed, writes, cut_after_steps, twists)
}

/// Like `explore_with`, over an array of `sharding` (`twists.zones` zones to each shard).
pub fn explore_on<A: Array>(
    sharding: Sharding,
    scheme: Scheme,
    seed: u64,
    writes: usize,
    mut cut_after_steps: usize,
    twists: Twists,
) -> Outcome {
    let Twists { zones, interrupt_recovery, failure, cut_reclaim_after_steps, stop_then_cut_after_steps, .. } = twists;
    let geometry = || sharded_geometry(sharding, zones);
    let shards = sharding.shards;
    let label = if shards == 1 { String::new() } else { format!(", {sharding}") };
    let what = format!("{scheme}{label} seed {seed} cut after {cut_after_steps} steps, {twists:?}");
    let l2p = l2p_config(twists);
    let keeps_checkpoints = l2p.checkpoint;
    let mut checkpoints = Checkpoints::default();
    let (mut stops_cut, mut stops_cut_writing_mappings) = (0, 0);
    let config = |scheme| Config { l2p, ..config(scheme) };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let sim = A::create(sharding, geometry(), config(scheme), seed).unwrap();
    let mut run = Run::new(what.clone(), sim);
    run.workload(&mut rng, seed, writes, &mut cut_after_steps, twists);
    if let Some(steps) = stop_then_cut_after_steps {
        let mapping_writes = run.sim.status().l2p.mapping_writes;
        run.sim.begin_stop();
        for _ in 0..steps {
            if run.sim.is_stopped() || !run.sim.step() {
                break;
            }
        }
        if run.sim.is_stopped() {
            checkpoints.take(&mut run.sim, keeps_checkpoints, &format!("{what}, at the stop"));
        } else {
            stops_cut += 1;
            stops_cut_writing_mappings += usize::from(run.sim.status().l2p.mapping_writes > mapping_writes);
        }
    }
    run.collect_acks();
    // A rebuild cut short: the new drive counts as failed again (the array's superblock
    // says it is being rebuilt); recovery reads nothing from it. With an even seed the
    // rebuild resumes onto it (keeping the segments it finds completed, as `start` does),
    // with an odd one another new drive takes its place.
    let rebuilding: Vec<usize> = run.sim.status().rebuild.map(|r| r.drive).into_iter().collect();
    CUTS_DURING_REBUILD.fetch_add(rebuilding.len(), std::sync::atomic::Ordering::Relaxed);
    let rebalancing = run.sim.status().declustered.is_some_and(|d| d.segments_to_rebalance > 0);
    CUTS_DURING_REBALANCE.fetch_add(usize::from(rebalancing), std::sync::atomic::Ordering::Relaxed);
    // A drive rebuilt into spare space stays failed; the start is told whether its
    // rebuild ended (no lane left on it).
    let into_spares: Vec<usize> =
        twists.into_spares.filter(|r| r.before_write < writes).map(|r| r.drive).into_iter().collect();
    let spared = run.sim.drives_in_spare_space();
    let rebuilding: Vec<usize> = rebuilding.into_iter().filter(|d| !into_spares.contains(d)).collect();
    checkpoints.note_running(&mut run.sim, &what);
    let stopped = run.sim.is_stopped();
    let mut cuts_in_flight = in_flight(&run.sim);
    let mut drives = run.sim.power_cut().unwrap();
    if let Some(f) = failure.filter(|f| f.before_write >= writes) {
        drives[f.drive].fail();
    }
    let mut states = 2;
    // The newest checkpoint matches the drives until an engine has run on them since its
    // stop (a failed drive or a rebuild aside: then it may go either way).
    let from_the_stop = stopped && checkpoints.newest_from_a_stop();
    let mut expect =
        if failure.is_none() && rebuilding.is_empty() && from_the_stop { Expect::Used } else { Expect::Either };
    if let Some(after) = interrupt_recovery {
        let offer = checkpoints.offer(shards);
        match A::recover_interrupted(sharding, geometry(), config(scheme), drives, after, offer) {
            Ok(Err(cut)) => {
                drives = cut;
                states += 1;
                cuts_in_flight += 1;
            }
            Ok(Ok(sim)) => {
                checkpoints.judge(&sim, expect, &format!("{what}, recovery not interrupted"));
                // The recovered engine's leftover work starts: the cut may land some of it.
                expect = Expect::Either;
                let mut sim = sim;
                checkpoints.note_running(&mut sim, &what);
                drives = sim.power_cut().unwrap();
            }
            Err(e) => panic!("{what}: interrupted recovery: {e}"),
        }
    }
    let offer = checkpoints.offer(shards);
    let failed: Vec<usize> = rebuilding.iter().chain(&into_spares).copied().collect();
    let mut sim = A::recover(sharding, geometry(), config(scheme), drives, &failed, &spared, offer)
        .unwrap_or_else(|e| panic!("{what}: recovery: {e}"));
    checkpoints.judge(&sim, expect, &format!("{what}, recovery"));
    if !rebuilding.is_empty() && sim.recovery_reports().iter().any(|r| r.checkpoint_generation.is_some()) {
        CHECKPOINTED_STARTS_DURING_REBUILD.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    for &drive in &rebuilding {
        // (Resuming a declustered array's rebuild is not built: another new drive.)
        if seed.is_multiple_of(2) && scheme.declustering == Declustering::CLASSIC {
            RESUMED_REBUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            sim.resume_rebuild(drive).unwrap_or_else(|e| panic!("{what}: resume the rebuild: {e}"));
        } else {
            sim.replace_drive(drive, seed ^ 0x9e4).unwrap_or_else(|e| panic!("{what}: rebuild again: {e}"));
        }
    }
    for &drive in &into_spares {
        // Started again: whatever the cut left on the failed drive moves into spare space.
        sim.rebuild_into_spares(drive).unwrap_or_else(|e| panic!("{what}: into spares again: {e}"));
    }
    if let Some(steps) = cut_reclaim_after_steps {
        for _ in 0..steps {
            if !sim.step() {
                break;
            }
        }
        checkpoints.note_running(&mut sim, &what);
        cuts_in_flight += in_flight(&sim);
        let drives = sim.power_cut().unwrap();
        sim = A::recover(sharding, geometry(), config(scheme), drives, &[], &[], checkpoints.offer(shards))
            .unwrap_or_else(|e| panic!("{what}: recovery after a cut during reclaim: {e}"));
        checkpoints.judge(&sim, Expect::Either, &format!("{what}, recovery after a cut during reclaim"));
        sim.run_until_idle();
        states += 1;
    }
    sim.run_until_idle();
    run.sim = sim;
    run.check(&format!("{what}, after recovery"));
    run.settle_history();
    // The array keeps working, and survives a second crash: with everything written, or
    // (half the runs) with writes in flight, so that a start from a checkpoint kept since
    // the stop replays torn stripes of the segments written after it.
    for _ in 0..8 {
        run.write(&mut rng);
    }
    if rng.random_bool(0.5) {
        for _ in 0..rng.random_range(0..60) {
            if !run.sim.step() {
                break;
            }
        }
        run.collect_acks();
    } else {
        run.sim.run_until_idle();
        run.collect_acks();
        run.check(&format!("{what}, writes after recovery"));
    }
    checkpoints.note_running(&mut run.sim, &what);
    cuts_in_flight += in_flight(&run.sim);
    let drives = std::mem::replace(&mut run.sim, A::create(sharding, geometry(), config(scheme), 0).unwrap())
        .power_cut()
        .unwrap();
    run.sim = A::recover(sharding, geometry(), config(scheme), drives, &[], &[], checkpoints.offer(shards))
        .unwrap_or_else(|e| panic!("{what}: second recovery: {e}"));
    // Writes were acknowledged since any stop: a checkpoint still offered is used with the
    // segments written after it replayed, unless garbage collection reset one it names.
    checkpoints.judge(&run.sim, Expect::Either, &format!("{what}, second recovery"));
    run.sim.run_until_idle();
    run.check(&format!("{what}, after a second recovery"));
    if keeps_checkpoints {
        // A clean stop over what that recovery found (its leftover work done), and a
        // start from the checkpoint it leaves.
        run.sim.stop();
        let taken = checkpoints.take(&mut run.sim, keeps_checkpoints, &format!("{what}, at the last stop"));
        // Without one (the array full), the newest is older than the writes acknowledged.
        let expect = if taken { Expect::Used } else { Expect::Either };
        let drives = std::mem::replace(&mut run.sim, A::create(sharding, geometry(), config(scheme), 0).unwrap())
            .power_cut()
            .unwrap();
        run.sim = A::recover(sharding, geometry(), config(scheme), drives, &[], &[], checkpoints.offer(shards))
            .unwrap_or_else(|e| panic!("{what}: start after the last stop: {e}"));
        checkpoints.judge(&run.sim, expect, &format!("{what}, start after the last stop"));
        run.sim.run_until_idle();
        run.check(&format!("{what}, after a start from the last stop's checkpoint"));
    }
    debug_assert!(cuts_in_flight <= states);
    Outcome {
        states,
        cuts_in_flight,
        checkpoints_offered: checkpoints.offered,
        checkpoints_used: checkpoints.used,
        checkpoints_replayed: checkpoints.replayed,
        checkpoints_running: checkpoints.running,
        checkpoints_incremental: checkpoints.incremental,
        checkpoints_degraded: checkpoints.degraded,
        checkpoints_during_rebuild: checkpoints.during_rebuild,
        stops_cut,
        stops_cut_writing_mappings,
        stops_without_checkpoint: checkpoints.stops_without,
    }
}

pub fn schemes() -> Vec<Scheme> {
    let (raid5, raid6) = (RaidLevel::Raid5 { drives: 4 }, RaidLevel::Raid6 { drives: 5 });
    vec![
        Scheme::single(raid5, Mode::ZapRaid { group_size: 4 }),
        Scheme::single(raid5, Mode::ZoneWriteOnly),
        Scheme::single(raid6, Mode::ZapRaid { group_size: 4 }),
        Scheme::single(raid6, Mode::ZoneWriteOnly),
        // Chunks of several blocks: a power cut may land an append in part.
        Scheme::with_chunk(raid5, Mode::ZapRaid { group_size: 4 }, 2),
        // Hybrid open segments: one appended, others written, two chunk sizes.
        Scheme::hybrid(raid5, Mode::ZapRaid { group_size: 4 }, 2, 1),
        Scheme::hybrid(raid6, Mode::ZapRaid { group_size: 4 }, 1, 2),
        Scheme::hybrid(raid5, Mode::ZoneAppendOnly, 2, 1),
    ]
}
