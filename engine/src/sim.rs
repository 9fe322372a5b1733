//! The deterministic simulation driver: the engine over emulated ZNS drives in virtual
//! time. Commands go to the drives as the engine emits them; time jumps to the next drive
//! completion or engine timer. With the same seed, every run is the same, including the
//! order in which concurrent Zone Appends land.
//!
//! With drive timing (every experiment, `zapraid replay` and `zapraid simulate`) the engine
//! also has one simulated CPU core (`core`), charged per event with `cpu_cost`'s measured
//! costs (`CpuCosts::calibrated`; `set_cpu_costs` sets others or turns it off): a request
//! or a completion that arrives while the core is busy waits; the engine handles it at
//! max(arrival, core free) and what it emits (commands, responses) is released when the
//! event's cost has elapsed (commands carrying `delay_ns` that much later). Timer ticks run
//! only when the core is free and, like control calls (stop, scrub, rebuild, rate limits),
//! checkpoints and recovery from the drives, are not charged. The drive rebuild's jobs
//! (`RebuildJob`) run on the engine's core, or on `set_rebuild_worker_cores` cores besides
//! it with their results coming back as events of their own (`core`). Without drive timing (the correctness tests) the engine takes no virtual time.

mod checkpoints;
pub(crate) mod core;
mod recovery;
mod traffic;

use std::collections::BTreeMap;

use zapraid_zns::{
    execute, Command, Completion, EmulatedDrive, Geometry, TimingParams, ZoneAction, ZoneTarget, ZonedDevice,
};

pub use self::checkpoints::CheckpointCopies;
use self::core::{run_rebuild_jobs, Core, Input};
pub use self::traffic::DriveTraffic;
use crate::cpu_cost::CpuCosts;
use crate::engine::{Config, DriveCommand, Engine, Request, RequestId, Response};
use crate::error::Result;
use crate::format::CheckpointImage;
use crate::recovery::RecoveryReport;

/// The engine and its drives in one deterministic world.
pub struct Simulator {
    pub engine: Engine,
    pub drives: Vec<EmulatedDrive>,
    now_ns: u64,
    responses: Vec<Response>,
    /// Commands held back for the engine's modelled CPU time, by release time.
    delayed: BTreeMap<(u64, u64), DriveCommand>,
    delayed_seq: u64,
    /// What the recovery that built this simulator read (none for a fresh array).
    pub recovery_report: RecoveryReport,
    /// The engine's checkpoint copies, the next generation, and the newest checkpoint it
    /// took while running (a real driver writes it to the reserved zones), until taken
    /// (`take_running_checkpoint`); emptied by a start (its engine's first checkpoint is
    /// full).
    checkpoints: CheckpointCopies,
    /// Whether a rebuild ran when the running checkpoint was taken.
    running_checkpoint_during_rebuild: bool,
    block_size_bytes: u32,
    /// The engine's simulated core (None: its work takes no virtual time).
    core: Option<Core>,
    /// What each drive served (`traffic`), by drive index.
    traffic: Vec<DriveTraffic>,
}

impl Simulator {
    /// A formatted array over fresh in-memory drives; drive i lands concurrent commands
    /// with seed `seed + i`. `config.logical_blocks` must be within the capacity a format
    /// gives (`SegmentPlan::capacity_blocks`). With `timing`, drives take virtual time and the
    /// engine's core is charged (module doc); without, drives complete instantly and the
    /// engine takes no time (its timers still advance the clock).
    pub fn new(geometry: Geometry, config: Config, seed: u64, timing: Option<TimingParams>) -> Result<Self> {
        Self::build(geometry, config, seed, timing, false)
    }

    /// Like `new`, but the drives keep no data (reads return zeros, so every read is
    /// treated as corrupt and rebuilt): for write benchmarks at paper scale.
    pub fn discarding(geometry: Geometry, config: Config, seed: u64, timing: Option<TimingParams>) -> Result<Self> {
        Self::build(geometry, config, seed, timing, true)
    }

    fn build(
        geometry: Geometry,
        config: Config,
        seed: u64,
        timing: Option<TimingParams>,
        discard: bool,
    ) -> Result<Self> {
        let mut engine = Engine::format(geometry, config)?;
        engine.set_rebuild_jobs_offloaded(true); // run and charged here (`core::run_rebuild_jobs`)
        let segments = geometry.zone_count * config.declustering.segments_per_zone(engine.layout().drives());
        let capacity = engine.plan().capacity_blocks(segments);
        if config.logical_blocks > capacity {
            return Err(crate::error::Error::InvalidConfig {
                reason: format!(
                    "{} logical blocks exceed the {capacity} that drives of {} zones export (the rest is kept \
                     for garbage collection and recovery)",
                    config.logical_blocks, geometry.zone_count
                ),
            });
        }
        let core =
            timing.is_some().then(|| Core::new(CpuCosts::calibrated(config.level), 0, geometry.block_size_bytes));
        let engine_drives = engine.drive_count();
        let mut drives = Vec::new();
        for i in 0..engine_drives {
            let drive_seed = seed.wrapping_add(i as u64);
            let drive = if discard {
                EmulatedDrive::discarding(geometry, drive_seed)
            } else {
                EmulatedDrive::memory(geometry, drive_seed)
            }
            .map_err(|error| crate::error::Error::Device { drive: i, error })?;
            drives.push(match &timing {
                Some(params) => drive
                    .with_timing(params.clone())
                    .map_err(|error| crate::error::Error::Device { drive: i, error })?,
                None => drive,
            });
        }
        Ok(Simulator {
            engine,
            drives,
            now_ns: 0,
            responses: Vec::new(),
            delayed: BTreeMap::new(),
            delayed_seq: 0,
            recovery_report: RecoveryReport::default(),
            running_checkpoint_during_rebuild: false,
            checkpoints: CheckpointCopies::after(None),
            block_size_bytes: geometry.block_size_bytes,
            traffic: vec![DriveTraffic::default(); engine_drives],
            core,
        })
    }

    /// Drive commands a power cut now would catch: on the drives (submitted, or complete
    /// and not reaped) or held back before submission. Zero means the cut finds the drives
    /// at rest (an idle array, or one waiting only on a timer).
    pub fn commands_in_flight(&self) -> usize {
        let reaped = self.core.as_ref().map_or(0, Core::waiting_completions);
        self.drives.iter().map(EmulatedDrive::commands_in_flight).sum::<usize>() + self.delayed.len() + reaped
    }

    /// Cuts power to every drive: commands in flight land, land partly or are lost; the
    /// engine's memory is gone. Returns the drives, as found after power returns.
    pub fn power_cut(self) -> Result<Vec<EmulatedDrive>> {
        let mut drives = self.drives;
        for (i, drive) in drives.iter_mut().enumerate() {
            drive.power_cut().map_err(|error| crate::error::Error::Device { drive: i, error })?;
        }
        Ok(drives)
    }

    /// Puts a new, empty in-memory drive (seeded with `seed`) in failed drive `drive`'s
    /// place, once the old one has nothing in flight, and starts rebuilding onto it
    /// (`Engine::rebuild_drive`); `step` drives the rebuild on.
    pub fn replace_drive(&mut self, drive: usize, seed: u64) -> Result<()> {
        while self.drives.get(drive).is_some_and(|d| d.in_flight() > 0) && self.step() {}
        let old = self.drives.get(drive).ok_or_else(|| crate::error::Error::InvalidConfig {
            reason: format!("drive {drive} of {}", self.drives.len()),
        })?;
        let geometry = old.geometry();
        let timing = old.timing_params().cloned();
        let mut new =
            EmulatedDrive::memory(geometry, seed).map_err(|error| crate::error::Error::Device { drive, error })?;
        if let Some(params) = timing {
            new = new.with_timing(params).map_err(|error| crate::error::Error::Device { drive, error })?;
        }
        new.advance_to(self.now_ns);
        self.engine.rebuild_drive(drive)?;
        self.drives[drive] = new;
        self.dispatch();
        Ok(())
    }

    /// Starts rebuilding failed drive `drive` into distributed spare space
    /// (`Engine::rebuild_into_spares`); `step` drives it on.
    pub fn rebuild_into_spares(&mut self, drive: usize) -> Result<()> {
        self.engine.rebuild_into_spares(drive)?;
        self.dispatch();
        Ok(())
    }

    /// Grows the array by `added` new, empty drives of the others' geometry and timing,
    /// landing concurrent commands with seeds from `seed` (`Engine::grow`).
    pub fn grow(&mut self, added: usize, seed: u64) -> Result<()> {
        let like = self
            .drives
            .first()
            .ok_or_else(|| crate::error::Error::InvalidConfig { reason: "an array without drives".to_string() })?;
        let (geometry, timing) = (like.geometry(), like.timing_params().cloned());
        let mut new_drives = Vec::with_capacity(added);
        for i in 0..added {
            let drive = self.drives.len() + i;
            let device = |error| crate::error::Error::Device { drive, error };
            let mut new = EmulatedDrive::memory(geometry, seed + i as u64).map_err(device)?;
            if let Some(params) = &timing {
                new = new.with_timing(params.clone()).map_err(device)?;
            }
            new.advance_to(self.now_ns);
            new_drives.push(new);
        }
        self.engine.grow((self.drives.len() + added) as u32)?;
        self.drives.extend(new_drives);
        self.traffic.resize(self.drives.len(), DriveTraffic::default());
        self.dispatch();
        Ok(())
    }

    /// Starts a scrub (`Engine::start_scrub`); `step` drives it on.
    pub fn start_scrub(&mut self, rate_bytes_per_s: Option<u64>) -> Result<()> {
        self.engine.start_scrub(rate_bytes_per_s)?;
        self.dispatch();
        Ok(())
    }

    /// Resumes the rebuild of drive `drive` onto the drive in its place, which holds what
    /// a rebuild cut short wrote (`Engine::resume_drive_rebuild`): first resets every zone
    /// of it that holds no segment, as a real driver does.
    pub fn resume_rebuild(&mut self, drive: usize) -> Result<()> {
        let device = |error| crate::error::Error::Device { drive, error };
        let keep = self.engine.zones_holding_segments();
        let Some(new) = self.drives.get_mut(drive) else {
            return Err(crate::error::Error::InvalidConfig {
                reason: format!("drive {drive} of {}", self.drives.len()),
            });
        };
        let geometry = new.geometry();
        for zone in (0..geometry.zone_count).filter(|z| !keep.contains(z)) {
            let target = ZoneTarget::Zone { start_lba: geometry.zone_start_lba(zone) };
            execute(new, Command::ManageZone { action: ZoneAction::Reset, target }).result.map_err(device)?;
        }
        self.engine.resume_drive_rebuild(drive)?;
        self.dispatch();
        Ok(())
    }

    /// Limits rebuilds to `rate_bytes_per_s` written to the new drive (`None`: unlimited;
    /// `Engine::set_rebuild_rate`), now.
    pub fn set_rebuild_rate(&mut self, rate_bytes_per_s: Option<u64>) {
        self.engine.tick(self.now_ns);
        self.engine.set_rebuild_rate(rate_bytes_per_s);
        self.dispatch();
    }

    /// Stops the array cleanly (see `Engine::stop`) and runs until it has.
    pub fn stop(&mut self) {
        self.begin_stop();
        while !self.engine.is_stopped() && self.step() {}
        assert!(self.engine.is_stopped(), "a clean stop waits for nothing");
    }

    /// Starts a clean stop; `step` drives it on.
    pub fn begin_stop(&mut self) {
        self.engine.stop(self.now_ns);
        self.dispatch();
    }

    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Submits a request now; with a charged core it waits for the core if busy (`step`
    /// hands it over).
    pub fn submit(&mut self, id: RequestId, request: Request) {
        match self.core.as_mut() {
            Some(core) => {
                core.waiting.push_back(Input::Request(id, request));
                self.run_core();
            }
            None => {
                self.engine.submit(id, request, self.now_ns);
                self.dispatch();
            }
        }
    }

    /// The costs the engine's core is charged, if it is (module doc).
    pub fn cpu_costs(&self) -> Option<CpuCosts> {
        self.core.as_ref().map(|core| core.costs)
    }

    /// Charges the engine's core `costs` from now on, or nothing (`None`): events waiting
    /// for the core are then handed over and held responses released at once.
    pub fn set_cpu_costs(&mut self, costs: Option<CpuCosts>) {
        match (costs, self.core.as_mut()) {
            (Some(costs), Some(core)) => core.costs = costs,
            (Some(costs), None) => self.core = Some(Core::new(costs, self.now_ns, self.block_size_bytes)),
            (None, Some(core)) => {
                core.stop_charging(self.now_ns, &mut self.responses);
                self.run_core();
                self.core = None;
            }
            (None, None) => {}
        }
    }

    /// Virtual time the engine's core has spent on events (0 when not charged).
    pub fn cpu_busy_ns(&self) -> u64 {
        self.core.as_ref().map_or(0, |core| core.busy_ns)
    }

    /// Gives the drive rebuild's jobs `cores` cores besides the engine's (`core`: as the
    /// server's `--rebuild-threads`); they are charged only while the engine's core is.
    pub fn set_rebuild_worker_cores(&mut self, cores: u32) {
        if let Some(core) = self.core.as_mut() {
            core.set_rebuild_worker_cores(cores, self.now_ns);
        }
    }

    /// Virtual time the drive rebuild's jobs took, on every core together (0 when not
    /// charged).
    pub fn rebuild_jobs_ns(&self) -> u64 {
        self.core.as_ref().map_or(0, |core| core.rebuild_jobs_ns)
    }

    /// What a person reads about the engine's simulated core: one line.
    pub fn engine_core(&self) -> String {
        match self.cpu_costs() {
            Some(costs) => {
                let workers = self.core.as_ref().map_or(0, Core::rebuild_worker_cores);
                match workers {
                    0 => format!("simulated engine core: one, each event charged ({costs}); the rebuild's jobs on it"),
                    _ => format!(
                        "simulated engine core: one, each event charged ({costs}); the rebuild's jobs on {workers} \
                         worker core(s) besides it"
                    ),
                }
            }
            None => "simulated engine core: none (the engine's work takes no virtual time)".to_string(),
        }
    }

    /// The newest checkpoint the engine took while running since the last call, if any:
    /// what a start after a power cut now is offered.
    pub fn take_running_checkpoint(&mut self) -> Option<CheckpointImage> {
        self.checkpoints.running.take()
    }

    /// Whether a rebuild ran when the checkpoint `take_running_checkpoint` would hand out
    /// was taken.
    pub fn running_checkpoint_during_rebuild(&self) -> bool {
        self.checkpoints.running.is_some() && self.running_checkpoint_during_rebuild
    }

    /// The generation the next checkpoint gets (`Engine::checkpoint` at a clean stop).
    pub fn next_checkpoint_generation(&self) -> u64 {
        self.checkpoints.next_generation()
    }

    /// After a clean stop: the engine's checkpoint, written to its copy, as the next start
    /// reads it back (an incremental one resolved from its base in the other copy); None
    /// when the stop left none (`Engine::checkpoint`).
    pub fn stop_checkpoint(&mut self) -> Option<CheckpointImage> {
        debug_assert!(self.engine.is_stopped());
        let image = self.engine.checkpoint(self.checkpoints.next_generation())?;
        Some(self.checkpoints.store(&image, self.block_size_bytes))
    }

    /// A running checkpoint the engine drained for is written at once (the write takes no
    /// virtual time: a power cut comes before or after it, and a torn copy leaves the
    /// previous one, which is the same as before).
    fn write_running_checkpoint(&mut self) {
        let image = self.engine.checkpoint(self.checkpoints.next_generation());
        let written = image.is_some();
        if let Some(image) = image {
            self.checkpoints.running = Some(self.checkpoints.store(&image, self.block_size_bytes));
            self.running_checkpoint_during_rebuild = self.engine.rebuild_status().is_some();
        }
        self.engine.checkpoint_written(written, self.now_ns);
    }

    fn dispatch(&mut self) {
        self.dispatch_at(self.now_ns);
    }

    /// Sends what the engine emitted, released at `release_ns` (now, or when the core is
    /// done with the event that emitted it).
    fn dispatch_at(&mut self, release_ns: u64) {
        let release_ns = run_rebuild_jobs(&mut self.engine, self.core.as_mut(), self.now_ns, release_ns);
        if self.engine.checkpoint_ready() {
            self.write_running_checkpoint();
        }
        while let Some(cmd) = self.engine.poll_command() {
            let at = release_ns + cmd.delay_ns;
            if at > self.now_ns {
                self.delayed_seq += 1;
                self.delayed.insert((at, self.delayed_seq), cmd);
            } else {
                self.submit_to_drive(cmd);
            }
        }
        while let Some(response) = self.engine.poll_response() {
            match self.core.as_mut() {
                Some(core) if release_ns > self.now_ns => core.responses.push_back((release_ns, response)),
                _ => self.responses.push(response),
            }
        }
        if self.engine.checkpoint_ready() {
            self.dispatch_at(release_ns); // drained by what was just dispatched: written now
        }
    }

    fn submit_to_drive(&mut self, cmd: DriveCommand) {
        if let Some(core) = self.core.as_mut() {
            core.submitted(cmd.drive, cmd.tag, &cmd.command, self.engine.rebuild_command_chunk_blocks(cmd.tag));
        }
        self.drives[cmd.drive].submit(cmd.tag, cmd.command);
    }

    /// Hands the engine the events waiting for its core while the core is free now;
    /// whether it took any.
    fn run_core(&mut self) -> bool {
        let mut took = false;
        loop {
            let now_ns = self.now_ns;
            let Some((input, release_ns)) = self.core.as_mut().and_then(|core| core.next_input(now_ns)) else {
                return took;
            };
            match input {
                Input::Request(id, request) => self.engine.submit(id, request, now_ns),
                Input::Completion(drive, completion) => self.engine.on_completion(drive, completion, now_ns),
                Input::JobsDone(done) => self.engine.on_rebuild_jobs_done(done, now_ns),
            }
            self.dispatch_at(release_ns);
            took = true;
        }
    }

    /// Runs one step: delivers what is due now, else jumps to the next event. Returns
    /// false when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        if self.deliver_completions() {
            return true;
        }
        let Some(next) = self.next_event_ns() else {
            return false;
        };
        self.now_ns = self.now_ns.max(next);
        // Drives catch up first, so that released commands start at the release time.
        for drive in &mut self.drives {
            drive.advance_to(self.now_ns);
        }
        while let Some(entry) = self.delayed.first_entry() {
            if entry.key().0 > self.now_ns {
                break;
            }
            let cmd = entry.remove();
            self.submit_to_drive(cmd);
        }
        if let Some(core) = self.core.as_mut() {
            core.release_responses(self.now_ns, &mut self.responses);
            core.release_jobs(self.now_ns);
        }
        if self.core.as_ref().is_none_or(|core| core.is_free(self.now_ns)) {
            self.engine.tick(self.now_ns);
            self.dispatch();
        }
        self.run_core();
        true
    }

    /// Hands the engine every completion the drives have ready; whether there was any.
    fn deliver_completions(&mut self) -> bool {
        let mut completions: Vec<(usize, Completion)> = Vec::new();
        let mut out = Vec::new();
        let block_bytes = u64::from(self.block_size_bytes);
        for (i, drive) in self.drives.iter_mut().enumerate() {
            out.clear();
            drive.reap(&mut out);
            for completion in &out {
                self.traffic[i].count(completion, block_bytes);
            }
            completions.extend(out.drain(..).map(|c| (i, c)));
        }
        let any = !completions.is_empty();
        if let Some(core) = self.core.as_mut() {
            core.waiting.extend(completions.into_iter().map(|(drive, c)| Input::Completion(drive, c)));
            return self.run_core() || any;
        }
        for (drive, completion) in completions {
            self.engine.on_completion(drive, completion, self.now_ns);
            self.dispatch();
        }
        any
    }

    /// When the next drive completion, engine timer, held-back command or response, or
    /// event waiting for the engine's core is due, if any (completions already due and not
    /// yet delivered are not counted: `step` delivers them). A timer due while the core is
    /// busy waits for it.
    pub fn next_event_ns(&self) -> Option<u64> {
        let next_drive = self.drives.iter().filter_map(EmulatedDrive::next_event_ns).min();
        let next_delayed = self.delayed.keys().next().map(|(at, _)| *at);
        let core_free_ns = self.core.as_ref().map_or(0, |core| core.free_at_ns);
        let next_timer = self.engine.next_timer_ns().map(|t| t.max(core_free_ns));
        let next_core = self.core.as_ref().and_then(|core| core.next_event_ns(self.now_ns));
        [next_drive, next_timer, next_delayed, next_core].into_iter().flatten().min()
    }

    /// Runs one step if anything is due by `t_ns` (a completion ready, a drive completion,
    /// timer or held-back command at or before `t_ns`) and returns true; else moves the
    /// clock to `t_ns` (if later than now) and returns false. For issuing requests at given
    /// times (trace replay in open loop), taking the responses of each step at its time.
    pub fn step_until(&mut self, t_ns: u64) -> bool {
        if self.deliver_completions() {
            return true;
        }
        match self.next_event_ns() {
            Some(next) if next <= t_ns => self.step(),
            _ => {
                if t_ns > self.now_ns {
                    self.now_ns = t_ns;
                    for drive in &mut self.drives {
                        drive.advance_to(t_ns);
                    }
                }
                false
            }
        }
    }

    /// What each drive served so far, by drive index (`traffic`: bytes read and written by
    /// the commands that completed; a replacement drive continues its predecessor's count).
    pub fn drive_traffic(&self) -> &[DriveTraffic] {
        &self.traffic
    }

    /// Runs until nothing is left to happen; returns the responses produced.
    pub fn run_until_idle(&mut self) -> Vec<Response> {
        while self.step() {}
        std::mem::take(&mut self.responses)
    }

    /// Takes the responses produced so far (each arrived at the virtual time of the step
    /// that produced it).
    pub fn take_responses(&mut self) -> Vec<Response> {
        std::mem::take(&mut self.responses)
    }

    /// Runs until `id` has its response (or nothing is left to happen).
    pub fn run_until_response(&mut self, id: RequestId) -> Option<Response> {
        loop {
            if let Some(at) = self.responses.iter().position(|r| r.id == id) {
                return Some(self.responses.remove(at));
            }
            if !self.step() {
                return None;
            }
        }
    }
}
