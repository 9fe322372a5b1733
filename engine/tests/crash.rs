//! Crash exploration: run a workload, cut power at a chosen step (commands in flight land,
//! land partly or are lost, by seed), recover from the drives alone, and check:
//! - every acknowledged write reads back exactly, unless a newer write to the same
//!   block may have landed;
//! - every other block holds its old value or one written later, never anything else;
//! - the array keeps working: it takes more writes, reads them back, survives a second
//!   crash and recovers again.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zapraid_engine::{Config, L2pConfig, Mode, OpenSegments, RaidLevel, Request, SegmentPlan, Simulator};
use zapraid_zns::Geometry;

mod common;
use common::BLOCK;
const LOGICAL_BLOCKS: u64 = 64;

/// Zones per drive: enough that the usual runs never fill the array.
const ZONES: u32 = 40;

/// Zones beyond the reserve (`SegmentPlan::reserved_segments`) for runs with so few zones
/// that they fill the array many times over: garbage collection relocates segments
/// throughout, and power cuts land in the middle of it.
const FEW_ZONES_BEYOND_RESERVE: u32 = 2;

/// An array shape the exploration runs: level, mode and open segments.
#[derive(Clone, Copy, Debug)]
struct Scheme {
    level: RaidLevel,
    mode: Mode,
    /// The (small) chunk.
    chunk_blocks: u64,
    open: OpenSegments,
}

impl std::fmt::Display for Scheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}, chunks of {} blocks", self.level, self.mode, self.chunk_blocks)?;
        if self.open.is_hybrid() {
            write!(f, " Ns={} Nl={}", self.open.small, self.open.large)?;
        }
        Ok(())
    }
}

impl Scheme {
    fn single(level: RaidLevel, mode: Mode) -> Self {
        Scheme { level, mode, chunk_blocks: 1, open: OpenSegments::SINGLE }
    }

    /// One open segment of chunks of `chunk_blocks` blocks.
    fn with_chunk(level: RaidLevel, mode: Mode, chunk_blocks: u64) -> Self {
        Scheme { chunk_blocks, ..Scheme::single(level, mode) }
    }

    /// Hybrid open segments: small chunks of 1 block, large of `LARGE_CHUNK_BLOCKS`.
    fn hybrid(level: RaidLevel, mode: Mode, small: u32, large: u32) -> Self {
        let open = OpenSegments { small, large, large_chunk_bytes: LARGE_CHUNK_BLOCKS * BLOCK as u64 };
        Scheme { level, mode, chunk_blocks: 1, open }
    }

    /// Zones for runs that fill the array many times over.
    fn few_zones(&self) -> u32 {
        let chunk_bytes = self.chunk_blocks * BLOCK as u64;
        let plan = SegmentPlan::new(&geometry(ZONES), self.level, self.mode, chunk_bytes, self.open).unwrap();
        plan.reserved_segments() + FEW_ZONES_BEYOND_RESERVE
    }
}

/// Power cuts that landed while a drive was being rebuilt (for the exploration's summary).
static CUTS_DURING_REBUILD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Of those, the rebuilds resumed onto the drive cut short (the others onto a new drive).
static RESUMED_REBUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Large chunks of hybrid schemes: writes of one block go to small-chunk stripes, longer
/// ones to large-chunk stripes.
const LARGE_CHUNK_BLOCKS: u64 = 2;

fn geometry(zones: u32) -> Geometry {
    common::geometry(zones, 8, 10)
}

fn config(scheme: Scheme) -> Config {
    let single = common::config(scheme.level, scheme.mode, scheme.chunk_blocks, LOGICAL_BLOCKS);
    Config { open_segments: scheme.open, ..single }
}

/// Block contents that name their write: (LBA, write number).
fn block(lba: u64, write: u64) -> Vec<u8> {
    common::named_block(lba, write)
}

/// What each block may hold after a crash.
#[derive(Default, Clone)]
struct History {
    /// Write numbers in submission order, and whether each was acknowledged.
    writes: Vec<(u64, bool)>,
}

impl History {
    /// Write numbers the block may show: the newest acknowledged one and everything
    /// submitted after it; with nothing acknowledged, zeros (None) too.
    fn allowed(&self) -> (bool, Vec<u64>) {
        match self.writes.iter().rposition(|(_, acked)| *acked) {
            Some(i) => (false, self.writes[i..].iter().map(|(w, _)| *w).collect()),
            None => (true, self.writes.iter().map(|(w, _)| *w).collect()),
        }
    }
}

struct Run {
    /// What is being run, for failure messages.
    label: String,
    sim: Simulator,
    history: HashMap<u64, History>,
    /// Request id -> (first LBA, write numbers of its blocks).
    in_flight: HashMap<u64, (u64, Vec<u64>)>,
    next_id: u64,
    next_write: u64,
}

impl Run {
    fn write(&mut self, rng: &mut ChaCha8Rng) {
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

    fn collect_acks(&mut self) {
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

    fn read_all(&mut self) -> Vec<u8> {
        let id = self.next_id;
        self.next_id += 1;
        self.sim.submit(id, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
        self.sim.run_until_response(id).expect("read answered").result.expect("read succeeds")
    }

    fn check(&mut self, what: &str) {
        // A power cut tears only writes in flight: it never damages a complete segment.
        let lost = self.sim.engine.status().recovery_repairs.blocks_lost;
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
    fn settle_history(&mut self) {
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

/// One explored run: `writes` writes, power cut after `cut_after_steps` simulation steps,
/// recovery, more writes, a second power cut and recovery. Returns the crash states
/// explored (two). Any violation panics with the run's parameters.
fn explore(scheme: Scheme, seed: u64, writes: usize, cut_after_steps: usize) -> usize {
    explore_with(scheme, seed, writes, cut_after_steps, Twists::default())
}

/// When a drive fails during an explored run.
#[derive(Clone, Copy, Debug)]
struct DriveFailure {
    drive: usize,
    /// Before this write of the workload; at or past the end: together with the power cut.
    before_write: usize,
}

/// What an explored run adds to the plain write-crash-recover cycle.
#[derive(Clone, Copy, Debug)]
struct Twists {
    zones: u32,
    /// The first recovery is itself cut by a power loss after this many completions, then
    /// run again (a nested crash).
    interrupt_recovery: Option<usize>,
    failure: Option<DriveFailure>,
    /// Power is cut again this many steps into the work recovery leaves behind (closing
    /// and reclaiming the segments that were open), then recovery runs once more.
    cut_reclaim_after_steps: Option<usize>,
    /// A clean stop begins at the crash point, and power is cut this many steps into it
    /// (or after it, if it takes fewer).
    stop_then_cut_after_steps: Option<usize>,
    /// A drive fails and a new one takes its place before this write: the power cut lands
    /// during (or after) its rebuild, `cut_after_steps` counted from the replacement.
    replace: Option<DriveFailure>,
    /// The L2P table offloaded after every start: (entries per page, pages of budget).
    l2p: Option<(u64, u64)>,
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
            l2p: None,
        }
    }
}

/// Like `explore`, with `twists`.
fn explore_with(scheme: Scheme, seed: u64, writes: usize, mut cut_after_steps: usize, twists: Twists) -> usize {
    let Twists { zones, interrupt_recovery, failure, cut_reclaim_after_steps, stop_then_cut_after_steps, replace, l2p } =
        twists;
    let geometry = || self::geometry(zones);
    let what = format!("{scheme} seed {seed} cut after {cut_after_steps} steps, {twists:?}");
    let l2p = l2p.map_or_else(L2pConfig::default, |(page_entries, budget_pages)| L2pConfig {
        budget_bytes: Some(budget_pages * BLOCK as u64),
        page_entries: Some(page_entries),
    });
    let config = |scheme| Config { l2p, ..config(scheme) };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let sim = Simulator::new(geometry(), config(scheme), seed, None).unwrap();
    let mut run =
        Run { label: what.clone(), sim, history: HashMap::new(), in_flight: HashMap::new(), next_id: 0, next_write: 1 };
    let mut steps = 0;
    for i in 0..writes {
        if let Some(f) = failure.filter(|f| f.before_write == i) {
            run.sim.drives[f.drive].fail();
        }
        if let Some(r) = replace.filter(|r| r.before_write == i) {
            run.sim.drives[r.drive].fail();
            run.sim.engine.fail_drive(r.drive);
            run.sim.replace_drive(r.drive, seed ^ 0x9e3).unwrap_or_else(|e| panic!("{what}: replace: {e}"));
            cut_after_steps = cut_after_steps.saturating_add(steps);
        }
        run.write(&mut rng);
        if rng.random_bool(0.3) {
            // Let some of it complete before more arrives.
            for _ in 0..rng.random_range(1..20) {
                if steps == cut_after_steps || !run.sim.step() {
                    break;
                }
                steps += 1;
            }
            run.collect_acks();
        }
    }
    while steps < cut_after_steps && run.sim.step() {
        steps += 1;
    }
    if let Some(steps) = stop_then_cut_after_steps {
        run.sim.begin_stop();
        for _ in 0..steps {
            if run.sim.engine.is_stopped() || !run.sim.step() {
                break;
            }
        }
    }
    run.collect_acks();
    // A rebuild cut short: the new drive counts as failed again (the array's superblock
    // says it is being rebuilt); recovery reads nothing from it. With an even seed the
    // rebuild resumes onto it (keeping the segments it finds completed, as `start` does),
    // with an odd one another new drive takes its place.
    let rebuilding: Vec<usize> = run.sim.engine.status().rebuild.map(|r| r.drive).into_iter().collect();
    CUTS_DURING_REBUILD.fetch_add(rebuilding.len(), std::sync::atomic::Ordering::Relaxed);
    let mut drives = run.sim.power_cut().unwrap();
    if let Some(f) = failure.filter(|f| f.before_write >= writes) {
        drives[f.drive].fail();
    }
    let mut states = 2;
    if let Some(after) = interrupt_recovery {
        match Simulator::recover_interrupted(geometry(), config(scheme), drives, after) {
            Ok(Err(cut)) => {
                drives = cut;
                states += 1;
            }
            Ok(Ok(sim)) => drives = sim.power_cut().unwrap(),
            Err(e) => panic!("{what}: interrupted recovery: {e}"),
        }
    }
    let mut sim = Simulator::recover_with_failed(geometry(), config(scheme), drives, &rebuilding)
        .unwrap_or_else(|e| panic!("{what}: recovery: {e}"));
    for &drive in &rebuilding {
        if seed.is_multiple_of(2) {
            RESUMED_REBUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            sim.resume_rebuild(drive).unwrap_or_else(|e| panic!("{what}: resume the rebuild: {e}"));
        } else {
            sim.replace_drive(drive, seed ^ 0x9e4).unwrap_or_else(|e| panic!("{what}: rebuild again: {e}"));
        }
    }
    if let Some(steps) = cut_reclaim_after_steps {
        for _ in 0..steps {
            if !sim.step() {
                break;
            }
        }
        let drives = sim.power_cut().unwrap();
        sim = Simulator::recover(geometry(), config(scheme), drives)
            .unwrap_or_else(|e| panic!("{what}: recovery after a cut during reclaim: {e}"));
        states += 1;
    }
    sim.run_until_idle();
    run.sim = sim;
    run.check(&format!("{what}, after recovery"));
    run.settle_history();
    // The array keeps working, and survives a second crash.
    for _ in 0..8 {
        run.write(&mut rng);
    }
    run.sim.run_until_idle();
    run.collect_acks();
    run.check(&format!("{what}, writes after recovery"));
    let drives = std::mem::replace(&mut run.sim, Simulator::new(geometry(), config(scheme), 0, None).unwrap())
        .power_cut()
        .unwrap();
    run.sim = Simulator::recover(geometry(), config(scheme), drives)
        .unwrap_or_else(|e| panic!("{what}: second recovery: {e}"));
    run.check(&format!("{what}, after a second recovery"));
    states
}

fn schemes() -> Vec<Scheme> {
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

#[test]
fn clean_stop_then_recovery_keeps_everything() {
    for scheme in schemes() {
        explore(scheme, 7, 40, usize::MAX);
        let twists = Twists { stop_then_cut_after_steps: Some(usize::MAX), ..Twists::default() };
        explore_with(scheme, 7, 40, usize::MAX, twists);
    }
}

/// After a clean stop, the next start reads the open segment's stop footer (a few blocks)
/// instead of every block's metadata, and finds everything.
#[test]
fn clean_stop_leaves_a_stop_footer_the_next_start_reads() {
    for scheme in schemes() {
        let what = format!("{scheme}");
        let mut sim = Simulator::new(geometry(ZONES), config(scheme), 5, None).unwrap();
        let data: Vec<u8> = (0..LOGICAL_BLOCKS).flat_map(|lba| block(lba, 2)).collect();
        sim.submit(0, Request::Write { lba: 0, data: data.clone() });
        sim.submit(1, Request::Write { lba: 3, data: block(3, 3) });
        sim.run_until_response(1).unwrap().result.unwrap();
        sim.stop();
        let open = u64::from(sim.engine.status().open_segments);
        sim.submit(2, Request::Write { lba: 0, data: block(0, 9) });
        assert!(sim.run_until_response(2).unwrap().result.is_err(), "{what}: a stopped array took a write");
        let drives = sim.power_cut().unwrap();
        let crashed = {
            let mut sim = Simulator::new(geometry(ZONES), config(scheme), 5, None).unwrap();
            sim.submit(0, Request::Write { lba: 0, data: data.clone() });
            sim.submit(1, Request::Write { lba: 3, data: block(3, 3) });
            sim.run_until_response(1).unwrap().result.unwrap();
            sim.run_until_idle();
            Simulator::recover_unsettled(geometry(ZONES), config(scheme), sim.power_cut().unwrap()).unwrap()
        };
        let mut sim = Simulator::recover_unsettled(geometry(ZONES), config(scheme), drives).unwrap();
        let (stopped, crashed) = (sim.recovery_report, crashed.recovery_report);
        let drives = (scheme.level.shape().0 + scheme.level.shape().1) as u64;
        // Every open segment's zones (one per drive): read through its stop footer, or
        // scanned if nothing was written into it.
        assert!(stopped.stop_footers_read >= drives && stopped.stop_footers_read % drives == 0, "{what}: {stopped:?}");
        assert_eq!(stopped.stop_footers_read + stopped.zones_scanned, open * drives, "{what}: {stopped:?}");
        if !scheme.open.is_hybrid() {
            assert_eq!((stopped.stop_footers_read, stopped.zones_scanned), (drives, 0), "{what}: {stopped:?}");
        }
        assert_eq!(crashed.stop_footers_read, 0, "{what}: {crashed:?}");
        assert!(crashed.zones_scanned >= drives, "{what}: {crashed:?}");
        assert!(stopped.blocks_read < crashed.blocks_read, "{what}: {stopped:?} vs {crashed:?}");
        sim.run_until_idle();
        let mut want = data;
        want[3 * BLOCK..4 * BLOCK].copy_from_slice(&block(3, 3));
        sim.submit(3, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
        assert!(sim.run_until_response(3).unwrap().result.unwrap() == want, "{what}: data changed");
    }
}

/// Power cuts with the L2P table offloaded to a budget of one to three small pages: plain
/// runs, garbage collection on few zones, and a drive failure. Returns the states explored.
fn explore_offloaded(scheme: Scheme, target: usize) -> usize {
    let drives = scheme.level.shape().0 + scheme.level.shape().1;
    let mut explored = 0;
    for i in 0..target / 10 {
        let mut rng = ChaCha8Rng::seed_from_u64(i as u64 ^ 0x12b);
        let l2p = Some((rng.random_range(2..=16), rng.random_range(1..=3)));
        let twists = match i % 3 {
            0 => Twists { l2p, ..Twists::default() },
            1 => Twists {
                zones: scheme.few_zones(),
                cut_reclaim_after_steps: rng.random_bool(0.5).then(|| rng.random_range(0..200)),
                l2p,
                ..Twists::default()
            },
            _ => {
                let failure =
                    DriveFailure { drive: rng.random_range(0..drives), before_write: rng.random_range(0..=60) };
                Twists { failure: Some(failure), l2p, ..Twists::default() }
            }
        };
        let writes = if i % 3 == 1 { 400 } else { 80 };
        explored += explore_with(scheme, i as u64, writes, rng.random_range(0..4000), twists);
    }
    explored
}

/// Crash states `make test` explores per scheme; `make soak` sets ZAPRAID_CRASH_STATES higher.
const CRASH_STATES_PER_SCHEME: usize = 2_600;

fn crash_states_per_scheme() -> usize {
    std::env::var("ZAPRAID_CRASH_STATES").ok().and_then(|v| v.parse().ok()).unwrap_or(CRASH_STATES_PER_SCHEME)
}

/// Power cuts at every step of short runs, at random steps of longer runs, during
/// recovery, and combined with a drive failure, for RAID-5 and RAID-6 with Zone Append and
/// Zone Write; prints how many states it explored.
#[test]
fn crash_exploration() {
    let target = crash_states_per_scheme();
    let mut total = 0;
    for scheme in schemes() {
        let mut explored = 0;
        let mut cut = 0;
        while explored < target / 2 {
            explored += explore(scheme, cut as u64, 16, cut);
            cut += 1;
        }
        let mut seed = 0u64;
        while explored < target {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xc0ffee);
            let cut = rng.random_range(0..3000);
            explored += explore(scheme, seed, 120, cut);
            seed += 1;
        }
        // Nested crashes: power cut during recovery, at every completion of it.
        // A small array's recovery takes a few dozen completions: cut at each of the first
        // ones, across seeds and crash points.
        const RECOVERY_CUTS: usize = 16;
        for i in 0..target / 20 {
            let twists = Twists { interrupt_recovery: Some(i % RECOVERY_CUTS), ..Twists::default() };
            explored += explore_with(scheme, i as u64, 40, 300 + i, twists);
        }
        // Power cuts while recovery's leftover work runs: the segments that were open are
        // rewritten and their zones reset.
        for i in 0..target / 20 {
            let mut rng = ChaCha8Rng::seed_from_u64(i as u64 ^ 0x5eed);
            let twists = Twists { cut_reclaim_after_steps: Some(rng.random_range(0..120)), ..Twists::default() };
            explored += explore_with(scheme, i as u64, 60, rng.random_range(100..1500), twists);
        }
        // Power cuts during a clean stop (padding, draining, stop footers).
        for i in 0..target / 20 {
            let mut rng = ChaCha8Rng::seed_from_u64(i as u64 ^ 0x570b);
            let twists = Twists { stop_then_cut_after_steps: Some(rng.random_range(0..40)), ..Twists::default() };
            explored += explore_with(scheme, i as u64, 60, rng.random_range(0..1500), twists);
        }
        // Garbage collection under power cuts: few zones, long runs.
        for i in 0..target / 20 {
            let mut rng = ChaCha8Rng::seed_from_u64(i as u64 ^ 0x6c);
            let twists = Twists {
                zones: scheme.few_zones(),
                cut_reclaim_after_steps: rng.random_bool(0.5).then(|| rng.random_range(0..200)),
                ..Twists::default()
            };
            explored += explore_with(scheme, i as u64, 400, rng.random_range(0..8000), twists);
        }
        // A drive failure combined with a crash: degraded recovery.
        let drives = scheme.level.shape().0 + scheme.level.shape().1;
        for i in 0..target / 10 {
            let mut rng = ChaCha8Rng::seed_from_u64(i as u64 ^ 0xfa11);
            let failure = DriveFailure { drive: rng.random_range(0..drives), before_write: rng.random_range(0..=60) };
            let cut = rng.random_range(0..1500);
            let twists = Twists { failure: Some(failure), ..Twists::default() };
            explored += explore_with(scheme, i as u64, 50, cut, twists);
        }
        // Power cuts while a failed drive is rebuilt onto a new one (or after).
        for i in 0..target / 10 {
            let mut rng = ChaCha8Rng::seed_from_u64(i as u64 ^ 0x4eb1);
            let replace = DriveFailure { drive: rng.random_range(0..drives), before_write: rng.random_range(40..100) };
            let twists = Twists { replace: Some(replace), ..Twists::default() };
            explored += explore_with(scheme, i as u64, 120, rng.random_range(0..150), twists);
        }
        eprintln!("crash exploration: {scheme}: {explored} crash states, 0 violations");
        total += explored;
        let offloaded = explore_offloaded(scheme, target);
        eprintln!(
            "crash exploration: {scheme}: {offloaded} crash states with the L2P table offloaded to 1-3 pages, \
             0 violations"
        );
        total += offloaded;
    }
    let during_rebuild = CUTS_DURING_REBUILD.load(std::sync::atomic::Ordering::Relaxed);
    let resumed = RESUMED_REBUILDS.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "crash exploration: {total} crash states in all ({during_rebuild} power cuts during a rebuild, {resumed} \
         of them resumed onto the same drive), 0 violations"
    );
    assert!(resumed > 0 && resumed < during_rebuild, "both ways of going on after a rebuild cut short are explored");
    assert!(total >= schemes().len() * target);
}

/// The segment open at a power cut is not written to again: recovery leaves it for its
/// live blocks to be rewritten into a new segment and its zones reset, and the data stays.
#[test]
fn recovered_open_segment_is_rewritten_and_reclaimed() {
    for scheme in schemes() {
        let mut sim = Simulator::new(geometry(ZONES), config(scheme), 11, None).unwrap();
        let data: Vec<u8> = (0..LOGICAL_BLOCKS).flat_map(|lba| block(lba, 1)).collect();
        sim.submit(0, Request::Write { lba: 0, data: data.clone() });
        sim.run_until_response(0).unwrap().result.unwrap();
        let open = sim.engine.status().open_segments;
        let drives = sim.power_cut().unwrap();
        let mut sim = Simulator::recover_unsettled(geometry(ZONES), config(scheme), drives).unwrap();
        let before = sim.engine.status();
        assert_eq!(before.segments_to_reclaim, open, "{scheme}: {before:?}");
        sim.run_until_idle();
        let after = sim.engine.status();
        assert_eq!(after.segments_to_reclaim, 0, "{scheme}: {after:?}");
        assert_eq!(after.segments_reclaimed, u64::from(open), "{scheme}: {after:?}");
        assert_eq!(after.blocks_relocated, LOGICAL_BLOCKS, "{scheme}: {after:?}");
        assert_eq!(after.mapped_blocks, LOGICAL_BLOCKS);
        sim.submit(1, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
        assert!(sim.run_until_response(1).unwrap().result.unwrap() == data, "{scheme}: data changed");
    }
}

/// Sealed segments stay sealed across a power cut, whatever order the drives answer
/// recovery's reads in (each seed lands them differently): at most the segment that was
/// open waits to be reclaimed, not every segment written before.
#[test]
fn sealed_segments_are_recovered_sealed() {
    for scheme in schemes() {
        for seed in 0..8 {
            let what = format!("{scheme} seed {seed}");
            let mut sim = Simulator::new(geometry(ZONES), config(scheme), seed, None).unwrap();
            for round in 0..8u64 {
                let data: Vec<u8> = (0..LOGICAL_BLOCKS).flat_map(|lba| block(lba, round)).collect();
                sim.submit(round, Request::Write { lba: 0, data });
                sim.run_until_response(round).unwrap().result.unwrap();
            }
            sim.run_until_idle();
            let (segments, open) = (sim.engine.status().segments, sim.engine.status().open_segments);
            assert!(segments >= open + 2, "{what}: {segments} segments written, {open} open");
            let drives = sim.power_cut().unwrap();
            let sim = Simulator::recover_unsettled(geometry(ZONES), config(scheme), drives).unwrap();
            let status = sim.engine.status();
            assert!(status.segments_to_reclaim <= open, "{what}: {status:?}");
        }
    }
}

/// A drive failed while the array runs (`zapraid fail`) answers again at the next start
/// but missed what was written after: recovery told it failed (a real array records that
/// in its superblock) keeps it failed, and everything written before and after the
/// failure reads back.
#[test]
fn a_drive_failed_at_run_time_stays_failed_after_restart() {
    for scheme in schemes() {
        let what = format!("{scheme}");
        let mut sim = Simulator::new(geometry(ZONES), config(scheme), 3, None).unwrap();
        let mut want = vec![0u8; LOGICAL_BLOCKS as usize * BLOCK];
        for round in 0..6u64 {
            if round == 2 {
                sim.engine.fail_drive(1);
            }
            let data: Vec<u8> = (0..LOGICAL_BLOCKS).flat_map(|lba| block(lba, round + 1)).collect();
            sim.submit(round, Request::Write { lba: 0, data: data.clone() });
            sim.run_until_response(round).unwrap().result.unwrap();
            want = data;
            if round == 3 {
                // A clean stop and start while the drive is failed: the reclaim of the
                // segment that was open resets its zones on the live drives only.
                sim.stop();
                let drives = sim.power_cut().unwrap();
                sim = Simulator::recover_with_failed(geometry(ZONES), config(scheme), drives, &[1])
                    .unwrap_or_else(|e| panic!("{what}: restart with a failed drive: {e}"));
                sim.run_until_idle();
                assert_eq!(sim.engine.status().failed_drives, vec![1], "{what}");
            }
        }
        sim.stop();
        let drives = sim.power_cut().unwrap();
        let mut sim = Simulator::recover_with_failed(geometry(ZONES), config(scheme), drives, &[1])
            .unwrap_or_else(|e| panic!("{what}: second restart: {e}"));
        sim.run_until_idle();
        assert_eq!(sim.engine.status().failed_drives, vec![1], "{what}");
        sim.submit(100, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
        assert!(sim.run_until_response(100).unwrap().result.unwrap() == want, "{what}: data differs");
    }
}

/// One run of `zapraid fail` at an arbitrary moment: the engine marks a drive failed while
/// commands to it are in flight (they still complete: the drive itself is fine), during
/// writes, garbage collection or the reclaim that follows a restart. The array then stops
/// cleanly and starts with that drive recorded failed (as the superblock says), and again
/// after more writes. Everything acknowledged reads back. Returns the restarts checked.
fn explore_marked_failure(scheme: Scheme, seed: u64, zones: u32, fail_at_step: usize) -> usize {
    let geometry = || self::geometry(zones);
    let what = format!("{scheme} seed {seed}, {zones} zones, drive marked failed at step {fail_at_step}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let drives = scheme.level.shape().0 + scheme.level.shape().1;
    let failed = rng.random_range(0..drives);
    let sim = Simulator::new(geometry(), config(scheme), seed, None).unwrap();
    let mut run =
        Run { label: what.clone(), sim, history: HashMap::new(), in_flight: HashMap::new(), next_id: 0, next_write: 1 };
    let step = |run: &mut Run, steps: &mut usize| -> bool {
        if *steps == fail_at_step {
            run.sim.engine.fail_drive(failed);
        }
        *steps += 1;
        run.sim.step()
    };
    // A first life of the array, ended by a clean stop or a power cut: the next start
    // leaves the segment that was open to be rewritten and reclaimed in the background.
    // Writes, each followed by a few simulation steps (the drive may be marked failed).
    let write_and_step = |run: &mut Run, rng: &mut ChaCha8Rng, steps: &mut usize| {
        for _ in 0..rng.random_range(20..200) {
            run.write(rng);
            for _ in 0..rng.random_range(0..12) {
                if !step(run, steps) {
                    break;
                }
            }
            run.collect_acks();
        }
    };
    let mut steps = 0;
    write_and_step(&mut run, &mut rng, &mut steps);
    if rng.random_bool(0.5) {
        run.sim.stop();
    } else {
        while run.sim.step() {}
    }
    run.collect_acks();
    let marked = run.sim.engine.status().failed_drives;
    let on_drives = run.sim.power_cut().unwrap();
    run.sim = Simulator::recover_with_failed(geometry(), config(scheme), on_drives, &marked)
        .unwrap_or_else(|e| panic!("{what}: first restart: {e}"));
    // A second life: the reclaim runs under more writes; the drive may be marked failed now.
    write_and_step(&mut run, &mut rng, &mut steps);
    while step(&mut run, &mut steps) {}
    run.collect_acks();
    run.check(&format!("{what}, before the stop"));
    run.sim.stop();
    let marked = run.sim.engine.status().failed_drives;
    let on_drives = run.sim.power_cut().unwrap();
    run.sim = Simulator::recover_with_failed(geometry(), config(scheme), on_drives, &marked)
        .unwrap_or_else(|e| panic!("{what}: restart with drives {marked:?} failed: {e}"));
    run.sim.run_until_idle();
    run.check(&format!("{what}, after a restart with drives {marked:?} failed"));
    for _ in 0..20 {
        run.write(&mut rng);
    }
    run.sim.run_until_idle();
    run.collect_acks();
    run.sim.stop();
    let on_drives = run.sim.power_cut().unwrap();
    run.sim = Simulator::recover_with_failed(geometry(), config(scheme), on_drives, &marked)
        .unwrap_or_else(|e| panic!("{what}: second restart: {e}"));
    run.sim.run_until_idle();
    run.check(&format!("{what}, after a second restart"));
    2
}

/// Runs of `drive_marked_failed_at_any_moment_then_restarted` per scheme.
const MARKED_FAILURE_RUNS: u64 = 200;

/// `zapraid fail` at every kind of moment, then clean stops and degraded restarts.
#[test]
fn drive_marked_failed_at_any_moment_then_restarted() {
    let mut restarts = 0;
    let mut schemes = schemes();
    schemes.push(Scheme::single(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 16 }));
    schemes.push(Scheme::single(RaidLevel::Raid5 { drives: 4 }, Mode::ZapRaid { group_size: 64 }));
    schemes.push(Scheme::single(RaidLevel::Raid6 { drives: 5 }, Mode::ZapRaid { group_size: 16 }));
    for scheme in schemes {
        for seed in 0..MARKED_FAILURE_RUNS {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xdead);
            let zones = if seed % 2 == 0 { scheme.few_zones() } else { ZONES };
            restarts += explore_marked_failure(scheme, seed, zones, rng.random_range(0..1200));
        }
    }
    eprintln!("drive marked failed at any moment: {restarts} degraded restarts, 0 violations");
}

/// Pinned: a power cut landed an append of a 2-block chunk in part and others after it,
/// straddling chunk positions, with a drive failed: recovery paired the straddling blocks
/// with other drives' chunks and rebuilt a "block" of LBA 24 from three stripes, newer than
/// its acknowledged write (found by crash exploration of hybrid segments).
#[test]
fn appends_torn_at_a_power_cut_never_pair_with_other_stripes() {
    let raid5 = RaidLevel::Raid5 { drives: 4 };
    let cases = [
        (Scheme::hybrid(raid5, Mode::ZoneAppendOnly, 0, 1), 145, 10, DriveFailure { drive: 0, before_write: 48 }),
        (Scheme::hybrid(raid5, Mode::ZoneAppendOnly, 2, 1), 201, 5, DriveFailure { drive: 0, before_write: 42 }),
    ];
    for (scheme, seed, cut, failure) in cases {
        explore_with(scheme, seed, 50, cut, Twists { failure: Some(failure), ..Twists::default() });
    }
}
