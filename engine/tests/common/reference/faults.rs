//! Faults beyond what parity covers, for the hostile runs of the reference model: rows
//! damaged on m+1 drives, drive failures beyond tolerance (also while a rebuild runs),
//! replaced drives rebuilt paced or not, and scrubs. The model tracks, per LBA, whether
//! its current version may be lost; the engine must answer every request within a bounded
//! number of simulator steps, end every stop and scrub, return the model's data or (only
//! for LBAs that may be lost) an error, and, once the array is within tolerance again and
//! garbage collection has reclaimed every segment with holes, count exactly the LBAs whose
//! reads fail (`Engine::blocks_lost`), the same across a clean stop and start and across a
//! crash and start.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use zapraid_engine::format::CheckpointImage;
use zapraid_engine::{Config, Error, Request, RequestId, Response};
use zapraid_zns::{Geometry, ZonedDevice};

use super::LOGICAL_BLOCKS;
use crate::common::array::{Array, Sharding};

/// Steps any request, stop or settle may take: far beyond what a run of this size needs
/// (a few thousand), so that only an engine that never answers (spinning, or waiting on
/// nothing) reaches it.
pub(crate) const STEP_BOUND: usize = 500_000;

/// A paced rebuild's and scrub's rate: slow in virtual time, so that they run on while
/// many operations come and go.
pub(crate) const PACED_BYTES_PER_S: u64 = 4 << 20;

/// Counted over the hostile runs, printed once they are done.
pub(crate) static CASES: AtomicUsize = AtomicUsize::new(0);
pub(crate) static DAMAGE_OPS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static BLOCKS_LOST: AtomicUsize = AtomicUsize::new(0);
pub(crate) static RUNS_BEYOND_TOLERANCE: AtomicUsize = AtomicUsize::new(0);
pub(crate) static SCRUBS_ENDED: AtomicUsize = AtomicUsize::new(0);
pub(crate) static REBUILDS_STARTED: AtomicUsize = AtomicUsize::new(0);
pub(crate) static FAILURES_DURING_REBUILD: AtomicUsize = AtomicUsize::new(0);
pub(crate) static EXACT_COUNTS: AtomicUsize = AtomicUsize::new(0);
/// Runs that ended beyond tolerance (only their stop is checked at the end).
pub(crate) static ENDED_BEYOND_TOLERANCE: AtomicUsize = AtomicUsize::new(0);
/// Ends where a segment still open had holes, closed by a clean stop and start.
pub(crate) static OPEN_SEGMENTS_WITH_HOLES: AtomicUsize = AtomicUsize::new(0);
/// Crashes left out because a segment still open held a damaged block (see
/// `Faults::damage_in_open_segment`).
pub(crate) static CRASHES_LEFT_OUT: AtomicUsize = AtomicUsize::new(0);

/// Responses taken from the simulator, by request, until the harness looks for them.
#[derive(Default)]
pub(crate) struct Inbox {
    responses: HashMap<RequestId, Response>,
}

impl Inbox {
    /// Runs until `id` is answered: an error if nothing is left to happen without an
    /// answer, or the answer takes more than `STEP_BOUND` steps (a hang).
    pub(crate) fn wait<A: Array>(&mut self, sim: &mut A, id: RequestId, what: &str) -> Result<Response, TestCaseError> {
        for _ in 0..STEP_BOUND {
            self.responses.extend(sim.take_responses().into_iter().map(|r| (r.id, r)));
            if let Some(r) = self.responses.remove(&id) {
                return Ok(r);
            }
            if !sim.step() {
                self.responses.extend(sim.take_responses().into_iter().map(|r| (r.id, r)));
                return self.responses.remove(&id).ok_or_else(|| {
                    TestCaseError::fail(format!("{what}: request {id} never answered (nothing left to happen)"))
                });
            }
        }
        Err(TestCaseError::fail(format!("{what}: request {id} not answered within {STEP_BOUND} steps")))
    }

    /// Runs until nothing is left to happen, within `STEP_BOUND` steps.
    pub(crate) fn settle<A: Array>(&mut self, sim: &mut A, what: &str) -> Result<(), TestCaseError> {
        for _ in 0..STEP_BOUND {
            if !sim.step() {
                self.responses.extend(sim.take_responses().into_iter().map(|r| (r.id, r)));
                return Ok(());
            }
        }
        Err(TestCaseError::fail(format!("{what}: still busy after {STEP_BOUND} steps")))
    }

    /// Submits `request` and waits for its answer.
    pub(crate) fn call<A: Array>(
        &mut self,
        sim: &mut A,
        id: RequestId,
        request: Request,
        what: &str,
    ) -> Result<Response, TestCaseError> {
        sim.submit(id, request);
        self.wait(sim, id, what)
    }

    /// Forgets what a simulator that is gone answered.
    pub(crate) fn clear(&mut self) {
        self.responses.clear();
    }
}

/// A clean stop that must end within `STEP_BOUND` steps.
pub(crate) fn stop<A: Array>(sim: &mut A, what: &str) -> Result<(), TestCaseError> {
    sim.begin_stop();
    for _ in 0..STEP_BOUND {
        if sim.is_stopped() {
            return Ok(());
        }
        if !sim.step() {
            break;
        }
    }
    prop_assert!(sim.is_stopped(), "{}: the clean stop never ended: {:?}", what, sim.status());
    Ok(())
}

/// What the model knows of the faults of a hostile run.
pub(crate) struct Faults {
    pub(crate) hostile: bool,
    m: usize,
    /// LBAs whose current version may be lost: damaged beyond parity, or on drives beyond
    /// tolerance. Reads of them may fail; a write within tolerance heals them.
    pub(crate) maybe_lost: HashSet<u64>,
    /// Contents an LBA may read as besides the model's: writes of it that failed.
    pub(crate) also: HashMap<u64, Vec<Vec<u8>>>,
    /// Zones damaged (drive, zone, offset) and not reset since: blocks relocated into the
    /// damaged rows as they were damaged are mapped there only after, so the LBAs mapped
    /// into such a zone are marked again after every operation.
    damaged: Vec<(usize, u32, u64)>,
    scrub_running: bool,
    went_beyond: bool,
    /// The drive whose rebuild a start is to resume.
    resume: Option<usize>,
}

impl Faults {
    pub(crate) fn new(hostile: bool, m: usize) -> Self {
        if hostile {
            CASES.fetch_add(1, Ordering::Relaxed);
        }
        Faults {
            hostile,
            m,
            maybe_lost: HashSet::new(),
            also: HashMap::new(),
            damaged: Vec::new(),
            scrub_running: false,
            went_beyond: false,
            resume: None,
        }
    }

    /// Drives out of service: failed (the engine finds out as their commands fail), counted
    /// failed by the engine (a replacement whose rebuild it gave up), or being rebuilt (its
    /// chunks of older segments are not there yet).
    pub(crate) fn drives_out<A: Array>(sim: &A) -> BTreeSet<usize> {
        let failed = |d: &usize| sim.drives()[*d].is_failed() || sim.is_failed(*d);
        let mut out: BTreeSet<usize> = (0..sim.drives().len()).filter(failed).collect();
        out.extend(sim.status().rebuild.map(|r| r.drive));
        out
    }

    /// More drives out than parity covers.
    pub(crate) fn beyond<A: Array>(&self, sim: &A) -> bool {
        Self::drives_out(sim).len() > self.m
    }

    /// After each operation: beyond tolerance every LBA may be lost; LBAs mapped into a
    /// damaged zone may be; a scrub that ended is counted.
    pub(crate) fn observe<A: Array>(&mut self, sim: &A) {
        if !self.hostile {
            return;
        }
        if self.beyond(sim) {
            if !self.went_beyond {
                RUNS_BEYOND_TOLERANCE.fetch_add(1, Ordering::Relaxed);
                self.went_beyond = true;
            }
            self.maybe_lost.extend(0..LOGICAL_BLOCKS);
        }
        // A zone reset since it was damaged lost the damage with it.
        self.damaged.retain(|&(drive, zone, offset)| {
            sim.drives()[drive].zones().get(zone as usize).is_some_and(|z| z.write_pointer > z.start_lba + offset)
        });
        let zones: HashSet<u32> = self.damaged.iter().map(|d| d.1).collect();
        if !zones.is_empty() {
            self.maybe_lost
                .extend((0..LOGICAL_BLOCKS).filter(|&l| sim.locate(l).is_some_and(|at| zones.contains(&at.zone))));
        }
        let running = sim.status().scrub.running.is_some();
        if self.scrub_running && !running {
            SCRUBS_ENDED.fetch_add(1, Ordering::Relaxed);
        }
        self.scrub_running = running;
    }

    /// Fails `drive` (the engine finds out as its commands fail).
    pub(crate) fn fail<A: Array>(&mut self, sim: &mut A, drive: usize) {
        if sim.status().rebuild.is_some() {
            FAILURES_DURING_REBUILD.fetch_add(1, Ordering::Relaxed);
        }
        sim.drives_mut()[drive].fail();
        self.observe(sim);
    }

    /// Replaces the `which`th failed drive with an empty one and starts rebuilding it
    /// (paced: slowly in virtual time), unless none failed or a rebuild runs. The engine
    /// is told of the failure first if no command of the drive failed yet (as an
    /// operator's `fail` does).
    pub(crate) fn replace<A: Array>(
        &mut self,
        sim: &mut A,
        which: usize,
        paced: bool,
        seed: u64,
        what: &str,
    ) -> Result<(), TestCaseError> {
        let failed: Vec<usize> = (0..sim.drives().len()).filter(|&d| sim.drives()[d].is_failed()).collect();
        if failed.is_empty() || sim.status().rebuild.is_some() {
            return Ok(());
        }
        let drive = failed[which % failed.len()];
        if !sim.is_failed(drive) {
            sim.fail_drive(drive);
        }
        sim.set_rebuild_rate(paced.then_some(PACED_BYTES_PER_S));
        sim.replace_drive(drive, seed)
            .map_err(|e| TestCaseError::fail(format!("{what}: replace drive {drive}: {e}")))?;
        REBUILDS_STARTED.fetch_add(1, Ordering::Relaxed);
        self.observe(sim);
        Ok(())
    }

    /// Starts the array again from the drives of `sim` (stopped, or after a power cut if
    /// `crash`), offered `checkpoint`, with the drives out of service counted failed (a
    /// rebuild under way is resumed by `resume_rebuild`). None if the start fails with
    /// more drives out than parity covers (the case ends there); an error otherwise.
    #[allow(clippy::too_many_arguments)] // what a start is given, and the run's context
    pub(crate) fn start<A: Array>(
        &mut self,
        sim: &mut A,
        sharding: Sharding,
        geometry: Geometry,
        config: Config,
        checkpoints: Vec<Option<CheckpointImage>>,
        crash: bool,
        what: &str,
    ) -> Result<Option<A>, TestCaseError> {
        let out: Vec<usize> = Self::drives_out(sim).into_iter().collect();
        let spared = sim.drives_in_spare_space();
        let beyond = out.len() > self.m;
        self.resume = sim.status().rebuild.map(|r| r.drive).filter(|&d| !sim.drives()[d].is_failed());
        let mut drives = sim.take_drives();
        if crash && self.hostile {
            for (i, drive) in drives.iter_mut().enumerate() {
                drive.power_cut().map_err(|e| TestCaseError::fail(format!("{what}: power cut of drive {i}: {e}")))?;
            }
        }
        match A::recover(sharding, geometry, config, drives, &out, &spared, checkpoints) {
            Ok(started) => Ok(Some(started)),
            Err(_) if self.hostile && beyond => Ok(None),
            Err(e) => Err(TestCaseError::fail(format!("{what}: start: {e}"))),
        }
    }

    /// Resumes the rebuild a stop or crash cut short; a declustered array's (resuming is
    /// not built for it) begins again onto another new drive, as the server does.
    pub(crate) fn resume_rebuild<A: Array>(&mut self, sim: &mut A, what: &str) -> Result<(), TestCaseError> {
        if let Some(drive) = self.resume.take() {
            let again = match sim.status().declustered {
                Some(_) => sim.replace_drive(drive, 0x5eed ^ drive as u64),
                None => sim.resume_rebuild(drive),
            };
            again.map_err(|e| TestCaseError::fail(format!("{what}: resume the rebuild of drive {drive}: {e}")))?;
        }
        Ok(())
    }

    /// Whether a damaged block sits in a zone not finished yet (a segment still open).
    /// A crash then is left out: recovery takes such a block for one a power cut tore
    /// (its checksum fails) and drops it, so its LBA reads an older version or zeros
    /// instead of failing (`a_crash_forgets_an_acknowledged_block_damaged_beyond_parity`).
    pub(crate) fn damage_in_open_segment<A: Array>(&self, sim: &A) -> bool {
        self.damaged.iter().any(|&(drive, zone, _)| {
            sim.drives()[drive].zones().get(zone as usize).is_some_and(|z| z.state != zapraid_zns::ZoneState::Full)
        })
    }

    /// A scrub a crash ended (the next start runs none).
    pub(crate) fn crashed(&mut self) {
        if std::mem::take(&mut self.scrub_running) {
            SCRUBS_ENDED.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A write of `lba` with `data` was answered `ok`; `beyond` if the array was beyond
    /// tolerance when it was submitted or answered.
    pub(crate) fn written(&mut self, lba: u64, data: &[u8], ok: bool, beyond: bool) {
        if ok {
            self.also.remove(&lba);
            if !beyond {
                self.maybe_lost.remove(&lba);
            }
        } else {
            self.also.entry(lba).or_default().push(data.to_vec());
            self.maybe_lost.insert(lba);
        }
    }

    pub(crate) fn discarded(&mut self, lba: u64) {
        self.also.remove(&lba);
        self.maybe_lost.remove(&lba);
    }

    /// Whether `got` is what `lba` may read as.
    pub(crate) fn allowed(&self, lba: u64, want: &[u8], got: &[u8]) -> bool {
        got == want || self.also.get(&lba).is_some_and(|v| v.iter().any(|d| d == got))
    }

    /// Damages the row holding `lba` (as the engine maps it now) beyond parity: its
    /// offset on the drive holding `lba` and on m others (picked by `pick`) among those
    /// in service. Whether anything was damaged (an LBA never written, or no longer in
    /// memory, is left alone).
    pub(crate) fn damage<A: Array>(&mut self, sim: &mut A, lba: u64, pick: u64) -> bool {
        let Some(at) = sim.locate(lba) else { return false };
        let n = sim.drives().len();
        let mut drives = vec![at.drive];
        let others: Vec<usize> =
            (0..n).map(|i| (at.drive + 1 + i + pick as usize) % n).filter(|&d| d != at.drive).collect();
        drives.extend(others.iter().copied().filter(|&d| !sim.drives()[d].is_failed()).take(self.m));
        let block = sim.drives()[at.drive].geometry().zone_start_lba(at.zone) + at.offset;
        for (i, &d) in drives.iter().enumerate() {
            sim.drives_mut()[d].corrupt_block(block, pick.wrapping_add(i as u64 * 997)).expect("a block of the drive");
            self.damaged.push((d, at.zone, at.offset));
        }
        DAMAGE_OPS.fetch_add(1, Ordering::Relaxed);
        self.maybe_lost.insert(lba);
        self.observe(sim);
        true
    }
}

/// Every block read one at a time (`None`: failed), the LBAs failing with `Error::Lost`,
/// and those failing otherwise.
pub(crate) type ReadBack = (Vec<Option<Vec<u8>>>, BTreeSet<u64>, Vec<(u64, Error)>);

/// Reads every block one at a time: which fail, and how (`Error::Lost` or another).
pub(crate) fn read_each<A: Array>(
    sim: &mut A,
    inbox: &mut Inbox,
    next_id: &mut u64,
    what: &str,
) -> Result<ReadBack, TestCaseError> {
    let (mut data, mut lost, mut other) = (Vec::new(), BTreeSet::new(), Vec::new());
    for lba in 0..LOGICAL_BLOCKS {
        let id = *next_id;
        *next_id += 1;
        match inbox.call(sim, id, Request::Read { lba, blocks: 1 }, what)?.result {
            Ok(block) => data.push(Some(block)),
            Err(Error::Lost { lba: said }) if said == lba => {
                lost.insert(lba);
                data.push(None);
            }
            Err(e) => {
                other.push((lba, e));
                data.push(None);
            }
        }
    }
    Ok((data, lost, other))
}
