//! Lost blocks in explored runs (`lost_run`): at steps the seed picks, rows are damaged
//! beyond parity (the chunks of m+1 drives holding live data, at one zone offset with Zone
//! Write, across a stripe group's offsets with Zone Append) and drives fail, some runs
//! beyond what parity covers (a second failure while a rebuild runs; more drives than
//! parity failed during garbage collection, a scrub or a running checkpoint), scrubs
//! start, and power is cut once (while no more drives are failed than parity covers).
//! What every run must show:
//! - liveness: every request is answered within `ANSWER_STEPS` steps, every scrub and
//!   stop ends and the array settles within `END_STEPS`;
//! - a read answers what the history allows or an error, and an error only for LBAs that
//!   may be lost (`may_lose`: blocks damaged, or on a failed drive in a zone with damage
//!   or while failures were beyond parity, or whose place the L2P table had on the drives
//!   then, or in a page whose mapping block was so placed: a cached page may be evicted
//!   and need it again);
//! - lost blocks counted exactly: once failed drives are within tolerance, every block has
//!   been read and garbage collection reclaimed the segments with holes, the LBAs that read
//!   as errors are exactly `blocks_lost()`, also after a clean stop and start and after a
//!   crash and start (the markers persist), and a write heals one.

use std::collections::{BTreeSet, HashMap, HashSet};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zapraid_engine::l2p::Physical;
use zapraid_engine::{Config, Error, L2pConfig, Mode, Request, Simulator};
use zapraid_zns::ZonedDevice;

use super::checkpoint::{Checkpoints, Expect};
use super::{block, config, geometry, History, Run, Scheme, LARGE_CHUNK_BLOCKS, LOGICAL_BLOCKS, ZONES};
use crate::common::BLOCK;

mod plan;
#[allow(unused_imports)] // not every test binary that includes the exploration runs these
pub use plan::{explore_lost, lost_run};

/// Simulator steps within which every request must be answered: more means a hang.
pub const ANSWER_STEPS: usize = 20_000;

/// Simulator steps within which a scrub, a clean stop, a rebuild or the array's background
/// work must end: more means it never will.
pub const END_STEPS: usize = 200_000;

/// What the lost-block runs explored (summed over runs).
#[derive(Clone, Copy, Debug, Default)]
pub struct LostOutcome {
    pub runs: usize,
    /// Starts after a power cut, a clean stop, a crash.
    pub crash_states: usize,
    /// Rows damaged beyond parity (m+1 chunks of live data).
    pub rows_damaged: usize,
    /// Blocks recorded lost at the end of the runs, and those a write healed after.
    pub blocks_lost: u64,
    pub healed: u64,
    /// Runs where more drives were failed (or being rebuilt) than parity covers, and of
    /// those, the ones where that came with a failure while a rebuild ran.
    pub beyond_tolerance: usize,
    pub during_rebuild: usize,
    pub scrubs_started: usize,
    pub scrubs_ended: usize,
    /// Scrubs a power cut or a stop ended before they finished.
    pub scrubs_cut: usize,
    pub stops_ended: usize,
    /// Counts (`count_lost`) that wrote blocks to seal an open segment with holes first.
    pub runs_filling: usize,
    /// Damage and failures that came while a rebuild ran, garbage collection moved
    /// blocks (within `GC_PROBE_STEPS`), a scrub ran, or a running checkpoint drained.
    pub faults_in_rebuild: usize,
    pub faults_in_gc: usize,
    pub faults_in_scrub: usize,
    pub faults_in_checkpoint: usize,
}

impl std::ops::AddAssign for LostOutcome {
    fn add_assign(&mut self, o: Self) {
        self.runs += o.runs;
        self.crash_states += o.crash_states;
        self.rows_damaged += o.rows_damaged;
        self.blocks_lost += o.blocks_lost;
        self.healed += o.healed;
        self.beyond_tolerance += o.beyond_tolerance;
        self.during_rebuild += o.during_rebuild;
        self.scrubs_started += o.scrubs_started;
        self.scrubs_ended += o.scrubs_ended;
        self.scrubs_cut += o.scrubs_cut;
        self.stops_ended += o.stops_ended;
        self.runs_filling += o.runs_filling;
        self.faults_in_rebuild += o.faults_in_rebuild;
        self.faults_in_gc += o.faults_in_gc;
        self.faults_in_scrub += o.faults_in_scrub;
        self.faults_in_checkpoint += o.faults_in_checkpoint;
    }
}

/// Blocks written at most, one at a time, to fill an open segment with holes (it is
/// reclaimed once sealed): a few segments' worth.
const FILL_BLOCKS: usize = 2_000;

/// A fault counts as during garbage collection if blocks were relocated or segments
/// reclaimed within this many steps after it.
const GC_PROBE_STEPS: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    Damage,
    Fail(usize),
    /// A new drive in the failed drive's place, rebuilt (waits for a rebuild running).
    Replace(usize),
    Scrub,
}

/// How drives fail in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Failures {
    None,
    /// One drive fails; replaced and rebuilt, or (`left_failed`) left failed to the end.
    Within {
        left_failed: bool,
    },
    /// One drive fails and is replaced; while it is rebuilt, m more fail.
    DuringRebuild,
    /// m+1 drives fail at random steps; all are replaced at the end.
    Beyond,
}

/// A request waiting for its answer.
enum Pending {
    Write { submitted: usize },
    Read { submitted: usize, lba: u64, allowed: Vec<(bool, Vec<u64>)>, next_write: u64 },
}

/// One run's state beyond `Run`'s history.
struct LostRun {
    run: Run,
    scheme: Scheme,
    config: Config,
    zones: u32,
    seed: u64,
    rng: ChaCha8Rng,
    steps: usize,
    pending: HashMap<u64, Pending>,
    /// LBAs whose reads may fail (see the module's doc).
    may_lose: HashSet<u64>,
    damaged_zones: BTreeSet<u32>,
    /// The last step at which more drives were failed than parity covers.
    last_beyond: Option<usize>,
    events: Vec<(usize, Event)>,
    cut_at: Option<usize>,
    scrub_started_at: Option<usize>,
    /// Faults waiting to learn whether garbage collection ran around them: (step, progress).
    gc_probes: Vec<(usize, u64)>,
    checkpoints: Checkpoints,
    out: LostOutcome,
}

/// Garbage collection's progress so far (relocations and reclaims).
fn gc_progress(sim: &Simulator) -> u64 {
    let s = sim.engine.status();
    s.blocks_relocated + s.segments_reclaimed
}

impl LostRun {
    fn parity(&self) -> usize {
        self.scheme.level.shape().1
    }

    fn drives(&self) -> usize {
        self.scheme.level.shape().0 + self.scheme.level.shape().1
    }

    /// Drives failed or being rebuilt: what a failure is counted against.
    fn out_of_service(&self) -> Vec<usize> {
        let engine = &self.run.sim.engine;
        let mut out: Vec<usize> = (0..self.drives()).filter(|d| engine.is_failed(*d)).collect();
        out.extend(engine.rebuild_status().map(|r| r.drive));
        out
    }

    fn beyond_tolerance(&self) -> bool {
        let engine = &self.run.sim.engine;
        engine.failed_drives() + usize::from(engine.rebuild_status().is_some()) > self.parity()
    }

    fn what(&self) -> String {
        format!("{} (lost blocks) seed {} at step {}", self.run.label, self.seed, self.steps)
    }

    /// Where the L2P table says each LBA is; None for those never written and for those
    /// whose place only a mapping block on the drives knows (with the table offloaded, a
    /// block never written may be one: its page is on the drives all the same).
    fn places(&self) -> Vec<(u64, Option<Physical>)> {
        (0..LOGICAL_BLOCKS).map(|lba| (lba, self.run.sim.engine.locate(lba))).collect()
    }

    /// LBAs that may be lost with `drives` out of service: on one of them in a zone in
    /// `zones` (all zones if None), placed where only the drives know, being written
    /// (their new place not in the table yet), or in a page of the L2P table whose
    /// mapping block is so placed (`note_pages`).
    fn note_out_of_service(&mut self, drives: &[usize], zones: Option<&BTreeSet<u32>>) {
        for (lba, numbers) in self.run.in_flight.values() {
            self.may_lose.extend(*lba..*lba + numbers.len() as u64);
        }
        let hit = |p: &Physical| drives.contains(&p.drive) && zones.is_none_or(|z| z.contains(&p.zone));
        for (lba, place) in self.places() {
            if place.is_none_or(|p| hit(&p)) {
                self.may_lose.insert(lba);
            }
        }
        self.note_pages(hit);
    }

    /// The LBAs of the pages of the L2P table whose mapping block's place is `hit` (on a
    /// drive out of service, in damaged stripes) may be lost too, though the pages are
    /// cached now: a clean page is dropped when evicted, and loading it again needs that
    /// mapping block; when its stripe is lost beyond parity and the log cannot rebuild the
    /// page, its LBAs are recorded lost (`Engine::page_lost`, which cannot tell the newest
    /// copy of each), data on the drives or not.
    fn note_pages(&mut self, hit: impl Fn(&Physical) -> bool) {
        let l2p = self.run.sim.engine.status().l2p;
        let per_page = l2p.entries_per_page;
        for page in 0..l2p.pages {
            if self.run.sim.engine.locate_page(page as u32).is_some_and(|p| hit(&p)) {
                self.may_lose.extend(page * per_page..((page + 1) * per_page).min(LOGICAL_BLOCKS));
            }
        }
    }

    fn note_fault(&mut self) {
        let sim = &self.run.sim;
        self.out.faults_in_rebuild += usize::from(sim.engine.rebuild_status().is_some());
        self.out.faults_in_scrub += usize::from(sim.engine.scrub_status().running.is_some());
        self.out.faults_in_checkpoint += usize::from(sim.engine.checkpoint_in_progress());
        self.gc_probes.push((self.steps, gc_progress(sim)));
    }

    /// Damages the chunks of m+1 working drives holding live data around a random live
    /// block's place (its row with Zone Write; its stripe group's offsets with Zone
    /// Append, where a row's chunks belong to different stripes).
    fn damage(&mut self) {
        let places: Vec<_> = self.places().into_iter().filter_map(|(l, p)| Some((l, p?))).collect();
        let down = self.out_of_service();
        let working: Vec<usize> = (0..self.drives()).filter(|d| !down.contains(d)).collect();
        let candidates: Vec<_> = places.iter().filter(|(_, p)| working.contains(&p.drive)).collect();
        if candidates.is_empty() || working.len() <= self.parity() {
            return;
        }
        let (_, at) = *candidates[self.rng.random_range(0..candidates.len())];
        let cb = self.scheme.chunk_blocks.max(LARGE_CHUNK_BLOCKS);
        let reach = match self.scheme.mode {
            Mode::ZoneWriteOnly => 0,
            Mode::ZapRaid { group_size } => u64::from(group_size) * cb,
            Mode::ZoneAppendOnly => 2 * cb,
        };
        let window = at.offset.saturating_sub(reach)..=at.offset + reach;
        let mut drives = vec![at.drive];
        let mut others: Vec<usize> = working.iter().copied().filter(|d| *d != at.drive).collect();
        while drives.len() <= self.parity() {
            drives.push(others.swap_remove(self.rng.random_range(0..others.len())));
        }
        self.note_fault();
        for &(lba, p) in &places {
            if p.zone != at.zone || !window.contains(&p.offset) {
                continue;
            }
            if drives.contains(&p.drive) {
                let drive = &mut self.run.sim.drives[p.drive];
                let start = drive.geometry().zone_start_lba(p.zone);
                let bit = self.rng.random_range(0..BLOCK as u64 * 8);
                drive.corrupt_block(start + p.offset, bit).unwrap();
                self.may_lose.insert(lba);
            }
        }
        // A mapping block in the damaged stripes may be unreadable too.
        let damaged = |p: &Physical| p.zone == at.zone && window.contains(&p.offset);
        self.note_pages(damaged);
        self.damaged_zones.insert(at.zone);
        // Chunks of the damaged stripes on drives out of service cannot be rebuilt either.
        let zone = BTreeSet::from([at.zone]);
        self.note_out_of_service(&down, Some(&zone));
        self.out.rows_damaged += 1;
    }

    fn fail(&mut self, drive: usize) {
        if self.out_of_service().contains(&drive) {
            return;
        }
        self.note_fault();
        let rebuilding = self.run.sim.engine.rebuild_status().is_some();
        self.run.sim.drives[drive].fail();
        self.run.sim.engine.fail_drive(drive);
        if self.beyond_tolerance() {
            if self.last_beyond.is_none() {
                self.out.beyond_tolerance += 1;
                self.out.during_rebuild += usize::from(rebuilding);
            }
            self.last_beyond = Some(self.steps);
            let down = self.out_of_service();
            self.note_out_of_service(&down, None);
        } else if !self.damaged_zones.is_empty() {
            let zones = self.damaged_zones.clone();
            self.note_out_of_service(&[drive], Some(&zones));
        }
    }

    /// Replaces failed drive `drive` unless a rebuild runs; whether it did.
    fn replace(&mut self, drive: usize) -> bool {
        if self.run.sim.engine.rebuild_status().is_some() {
            return false;
        }
        if self.run.sim.engine.is_failed(drive) {
            let seed = self.seed ^ 0x1057 ^ self.steps as u64;
            let what = self.what();
            self.run.sim.replace_drive(drive, seed).unwrap_or_else(|e| panic!("{what}: replace drive {drive}: {e}"));
        }
        true
    }

    fn fire_events(&mut self) {
        let mut i = 0;
        while i < self.events.len() {
            let (at, event) = self.events[i];
            if at > self.steps {
                break;
            }
            let done = match event {
                Event::Damage => {
                    self.damage();
                    true
                }
                Event::Fail(d) => {
                    self.fail(d);
                    true
                }
                Event::Replace(d) => self.replace(d),
                Event::Scrub => {
                    if self.scrub_started_at.is_none() && self.run.sim.start_scrub(None).is_ok() {
                        self.scrub_started_at = Some(self.steps);
                        self.out.scrubs_started += 1;
                    }
                    true
                }
            };
            if done {
                self.events.remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// One simulator step, with the events due, the answers checked and the liveness
    /// bounds asserted; whether anything happened.
    fn step(&mut self) -> bool {
        self.fire_events();
        if self.cut_at.is_some_and(|c| self.steps >= c) && !self.beyond_tolerance() {
            self.cut_at = None;
            self.power_cut();
        }
        let stepped = self.run.sim.step();
        self.steps += 1;
        if self.beyond_tolerance() {
            self.last_beyond = Some(self.steps);
        }
        self.take_answers();
        let what = self.what();
        for p in self.pending.values() {
            let (Pending::Write { submitted } | Pending::Read { submitted, .. }) = p;
            assert!(self.steps - submitted <= ANSWER_STEPS, "{what}: a request waits for {ANSWER_STEPS} steps");
        }
        if let Some(started) = self.scrub_started_at {
            if self.run.sim.engine.scrub_status().running.is_none() {
                self.scrub_started_at = None;
                self.out.scrubs_ended += 1;
            } else {
                assert!(self.steps - started <= END_STEPS, "{what}: a scrub runs for {END_STEPS} steps");
            }
        }
        if !self.gc_probes.is_empty() {
            let (steps, progress) = (self.steps, gc_progress(&self.run.sim));
            let moved = self.gc_probes.iter().filter(|&&(_, p)| p != progress).count();
            self.out.faults_in_gc += moved;
            self.gc_probes.retain(|&(at, p)| p == progress && steps - at < GC_PROBE_STEPS);
        }
        stepped || !self.events.is_empty()
    }

    /// Steps until nothing is left to happen, within `END_STEPS`.
    fn settle(&mut self, what: &str) {
        let start = self.steps;
        while self.step() {
            assert!(self.steps - start <= END_STEPS, "{}: {what} does not settle in {END_STEPS} steps", self.what());
        }
        // Probes still open when nothing moves anymore saw no garbage collection.
        let progress = gc_progress(&self.run.sim);
        let moved = self.gc_probes.iter().filter(|&&(_, p)| p != progress).count();
        self.out.faults_in_gc += moved;
        self.gc_probes.clear();
        assert!(self.pending.is_empty(), "{}: {what}: requests never answered", self.what());
        // Nothing is left to happen: a scrub still running would never end.
        let scrub = self.run.sim.engine.scrub_status().running;
        assert!(scrub.is_none(), "{}: {what}: a scrub waits for nothing: {scrub:?}", self.what());
    }

    fn write(&mut self) {
        let id = self.run.next_id;
        self.run.write(&mut self.rng);
        self.pending.insert(id, Pending::Write { submitted: self.steps });
    }

    fn read(&mut self, lba: u64) -> u64 {
        let id = self.run.next_id;
        self.run.next_id += 1;
        let allowed = self.run.history.get(&lba).map_or((true, Vec::new()), History::allowed);
        let next_write = self.run.next_write;
        self.run.sim.submit(id, Request::Read { lba, blocks: 1 });
        self.pending.insert(id, Pending::Read { submitted: self.steps, lba, allowed: vec![allowed], next_write });
        id
    }

    /// Checks the answers the simulator has; the reads' outcomes by LBA (true: an error).
    fn take_answers(&mut self) -> Vec<(u64, bool)> {
        let mut reads = Vec::new();
        for r in self.run.sim.take_responses() {
            let Some(p) = self.pending.remove(&r.id) else { continue };
            let what = self.what();
            match p {
                Pending::Write { submitted } => {
                    let (lba, numbers) = self.run.in_flight.remove(&r.id).expect("a write in flight");
                    match r.result {
                        Ok(_) => {
                            for (i, w) in numbers.iter().enumerate() {
                                let h = self.run.history.get_mut(&(lba + i as u64)).expect("history");
                                h.writes.iter_mut().find(|(n, _)| n == w).expect("write recorded").1 = true;
                            }
                        }
                        Err(e) => assert!(
                            self.last_beyond.is_some_and(|at| at >= submitted),
                            "{what}: a write of LBA {lba} failed within tolerance: {e}"
                        ),
                    }
                }
                Pending::Read { lba, allowed, next_write, .. } => {
                    let (zeros_ok, allowed) = &allowed[0];
                    match r.result {
                        Ok(got) => {
                            let w = u64::from_le_bytes(got[8..16].try_into().expect("8 bytes"));
                            let history = self.run.history.get(&lba).map_or(&[][..], |h| &h.writes[..]);
                            let later = w >= next_write && history.iter().any(|(n, _)| *n == w);
                            let named = (allowed.contains(&w) || later) && got == block(lba, w);
                            let zeros = *zeros_ok && got.iter().all(|b| *b == 0);
                            assert!(named || zeros, "{what}: LBA {lba} read as other data (write {w}?), {allowed:?}, all zeros: {}, first bytes {:?}", got.iter().all(|b| *b == 0), &got[..24]);
                            reads.push((lba, false));
                        }
                        Err(e) => {
                            assert!(
                                self.may_lose.contains(&lba),
                                "{what}: LBA {lba}, not damaged, read as an error: {e}"
                            );
                            if let Error::Lost { lba: said } = e {
                                assert_eq!(said, lba, "{what}: a read of LBA {lba} said another was lost");
                            }
                            reads.push((lba, true));
                        }
                    }
                }
            }
        }
        reads
    }

    /// Reads every LBA (one block a request) and returns those that answered an error.
    fn read_every_block(&mut self, what: &str) -> BTreeSet<u64> {
        let mut errors = BTreeSet::new();
        for lba in 0..LOGICAL_BLOCKS {
            let id = self.read(lba);
            let start = self.steps;
            while self.pending.contains_key(&id) {
                if !self.run.sim.step() {
                    break;
                }
                self.steps += 1;
                let answers = self.take_answers();
                errors.extend(answers.iter().filter(|(_, e)| *e).map(|(l, _)| *l));
                assert!(self.steps - start <= ANSWER_STEPS, "{}: {what}: read of LBA {lba} unanswered", self.what());
            }
            let answers = self.take_answers();
            errors.extend(answers.iter().filter(|(_, e)| *e).map(|(l, _)| *l));
            assert!(!self.pending.contains_key(&id), "{}: {what}: read of LBA {lba} never answered", self.what());
        }
        errors
    }

    /// Cuts power and starts again (the checkpoint kept offered); a drive being rebuilt is
    /// rebuilt again onto a new one.
    fn power_cut(&mut self) {
        let what = self.what();
        if self.scrub_started_at.take().is_some() {
            self.out.scrubs_cut += 1;
        }
        self.checkpoints.note_running(&mut self.run.sim, &what);
        let rebuilding: Vec<usize> = self.run.sim.engine.rebuild_status().map(|r| r.drive).into_iter().collect();
        self.start_again(&format!("{what}: start after a power cut"));
        self.checkpoints.judge(&self.run.sim, Expect::Either, &format!("{what}, start after a power cut"));
        for drive in rebuilding {
            self.run.sim.replace_drive(drive, self.seed ^ 0xc07).unwrap_or_else(|e| panic!("{what}: rebuild: {e}"));
        }
        self.pending.clear();
        self.run.in_flight.clear();
        self.gc_probes.clear();
        self.out.crash_states += 1;
    }

    /// Takes the drives from the array as they are (power cut) and starts it on them, those
    /// out of service left out, offered the checkpoint kept.
    fn start_again(&mut self, what: &str) {
        let down = self.out_of_service();
        let sim =
            std::mem::replace(&mut self.run.sim, Simulator::new(geometry(self.zones), self.config, 0, None).unwrap());
        let drives = sim.power_cut().unwrap();
        let offered = self.checkpoints.offer(1).pop().flatten();
        self.run.sim = Simulator::recover_with_checkpoint(geometry(self.zones), self.config, drives, &down, offered)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }

    /// A clean stop within `END_STEPS`, then a start from what it left.
    fn stop_and_start(&mut self) {
        let what = self.what();
        if self.scrub_started_at.take().is_some() {
            self.out.scrubs_cut += 1;
        }
        self.run.sim.begin_stop();
        let start = self.steps;
        while !self.run.sim.engine.is_stopped() {
            assert!(self.run.sim.step(), "{what}: a clean stop waits for nothing");
            self.steps += 1;
            assert!(self.steps - start <= END_STEPS, "{what}: a clean stop runs for {END_STEPS} steps");
        }
        self.out.stops_ended += 1;
        let keeps = self.config.l2p.checkpoint;
        let taken = self.checkpoints.take(&mut self.run.sim, keeps, &format!("{what}, at the stop"));
        self.start_again(&format!("{what}: start after a clean stop"));
        let expect = if taken { Expect::Used } else { Expect::Either };
        self.checkpoints.judge(&self.run.sim, expect, &format!("{what}, start after a clean stop"));
        self.out.crash_states += 1;
    }

    /// Every block read, the segments with holes reclaimed: the LBAs that read as errors,
    /// asserted to be exactly those recorded lost.
    fn count_lost(&mut self, what: &str) -> BTreeSet<u64> {
        self.settle(what);
        let found = self.read_every_block(what);
        self.settle(&format!("{what}, holes reclaimed"));
        // Garbage collection reclaims only sealed segments: holes in an open one wait for
        // writes to fill it. Blocks that read back are written again until it is sealed.
        let intact: Vec<u64> = (0..LOGICAL_BLOCKS).filter(|l| !found.contains(l)).collect();
        let mut filled = 0;
        while self.run.sim.engine.segments_with_holes() > 0 && !intact.is_empty() {
            assert!(filled < FILL_BLOCKS, "{}: {what}: holes left after {filled} more writes", self.what());
            let lba = intact[filled % intact.len()];
            let id = self.run.next_id;
            let w = self.run.next_write;
            (self.run.next_id, self.run.next_write) = (id + 1, w + 1);
            self.run.history.entry(lba).or_default().writes.push((w, false));
            self.run.in_flight.insert(id, (lba, vec![w]));
            self.pending.insert(id, Pending::Write { submitted: self.steps });
            self.run.sim.submit(id, Request::Write { lba, data: block(lba, w) });
            self.settle(&format!("{what}, filling the open segment"));
            filled += 1;
        }
        self.out.runs_filling += usize::from(filled > 0);
        let status = self.run.sim.engine.status();
        assert_eq!(status.segments_with_holes, 0, "{}: {what}: holes left: {status:?}", self.what());
        let lost = self.read_every_block(what);
        assert_eq!(found, lost, "{}: {what}: reads failed before the holes were reclaimed", self.what());
        let counted = self.run.sim.engine.blocks_lost();
        assert_eq!(counted, lost.len() as u64, "{}: {what}: {lost:?} read as errors, {counted} counted", self.what());
        lost
    }
}
