//! The deterministic simulation of an array of engine shards (`shard`): S whole engines
//! over one set of emulated drives in virtual time, each over its own run of every drive's
//! zones (`zapraid_zns::ZoneSpan`) and its share of the logical space.
//!
//! Requests are split per shard and their responses joined (`ShardMap::split`). Commands
//! of shard s go to the drives through its window, under a tag of the simulator's that
//! brings the completion back to shard s (its own tag restored, its LBAs shifted back).
//! Time, drives and the order of events are shared, as in `sim`: with the same seed, every
//! run is the same. A failed drive is failed in every shard at once; a replaced one is
//! rebuilt by every shard, in parallel (a drive that failed on its own, seen so far by
//! some shards only, is failed in the others first); recovery (`recover`) runs every
//! shard's at once over its window, from the drives alone or from each shard's
//! checkpoint, and may be cut by a power loss part way (crash exploration); a rebuild cut
//! short is resumed by every shard over its own zones (`control`).
//!
//! With drive timing each shard's engine has its own simulated CPU core (`sim::core`,
//! driven here as `sim` drives its one, `cores`): the same costs (`CpuCosts::calibrated`;
//! `set_cpu_costs` sets others or turns them off), charged for the same events (each
//! request part on its shard's core, each completion on the core of the shard whose
//! command it completes, zone commands among them), so S shards do at most S times what
//! one core can, and a request split across shards is answered when the last part's core
//! releases it. A request the shard map refuses is answered at once, uncharged. With S = 1
//! it behaves as `sim::Simulator` does, core on or off, response for response and at the
//! same virtual times.

mod control;
mod cores;
mod recover;

use std::collections::{BTreeMap, HashMap};

use zapraid_zns::{Completion, EmulatedDrive, Geometry, Tag, TimingParams, ZoneSpan, ZonedDevice};

use crate::cpu_cost::CpuCosts;
use crate::engine::{Config, DriveCommand, Engine, Request, RequestId, Response};
use crate::error::{Error, Result};
use crate::format::CheckpointImage;
use crate::hybrid::SegmentPlan;
use crate::recovery::RecoveryReport;
use crate::shard::{Join, ShardMap, ShardedStatus};
use crate::sim::core::{run_rebuild_jobs, Core, Input};

pub use crate::sim::CheckpointCopies;

/// One engine shard: its engine, its window of the drives, its checkpoints, its core.
pub struct Shard {
    pub engine: Engine,
    pub span: ZoneSpan,
    /// What the recovery that built this shard read (none for a fresh array).
    pub recovery_report: RecoveryReport,
    checkpoints: CheckpointCopies,
    /// Whether a rebuild ran when the running checkpoint was taken.
    running_during_rebuild: bool,
    /// The engine's simulated core (None: its work takes no virtual time).
    core: Option<Core>,
}

/// S engine shards and their drives in one deterministic world.
pub struct ShardedSimulator {
    pub map: ShardMap,
    pub shards: Vec<Shard>,
    pub drives: Vec<EmulatedDrive>,
    now_ns: u64,
    responses: Vec<Response>,
    /// Commands held back for an engine's modelled CPU time, by release time, with the
    /// shard that sent them.
    delayed: BTreeMap<(u64, u64), (usize, DriveCommand)>,
    delayed_seq: u64,
    /// Commands on the drives: the simulator's tag -> the shard and its engine's tag.
    in_flight: HashMap<Tag, (usize, Tag)>,
    next_tag: Tag,
    /// Commands a shard's window refused (shard, drive, completion), delivered next.
    refused: Vec<(usize, usize, Completion)>,
    /// Requests being answered: each part's id -> the array request and the part's index.
    parts: HashMap<RequestId, (RequestId, usize)>,
    joins: HashMap<RequestId, Join>,
    next_part_id: RequestId,
    block_size_bytes: u32,
}

impl ShardedSimulator {
    /// A formatted array of `shards` shards interleaved in units of `unit_blocks` over
    /// fresh in-memory drives (drive i seeded `seed + i`, as `Simulator::new`; with
    /// `timing`, each shard's core is charged, as there). Refused if S shards do not fit
    /// the drives' open and active zone limits or their zones the logical blocks
    /// (`ShardMap::check_zone_limits`, `check_capacity`).
    pub fn new(
        geometry: Geometry,
        config: Config,
        shards: u32,
        unit_blocks: u64,
        seed: u64,
        timing: Option<TimingParams>,
    ) -> Result<Self> {
        let map = Self::checked_map(geometry, config, shards, unit_blocks)?;
        let mut built = Vec::new();
        for shard in 0..map.shards() {
            let span = Self::span(&map, &geometry, shard)?;
            let mut engine = Engine::format(span.geometry(geometry), map.shard_config(shard, config))?;
            engine.share_drives_with(map.shards() as u32);
            engine.set_rebuild_jobs_offloaded(true); // run and charged here (`core::run_rebuild_jobs`)
            built.push(Shard {
                engine,
                span,
                recovery_report: RecoveryReport::default(),
                checkpoints: Default::default(),
                running_during_rebuild: false,
                core: None,
            });
        }
        let mut drives = Vec::new();
        for drive in 0..built[0].engine.layout().drives() {
            let device = |error| Error::Device { drive, error };
            let mut new = EmulatedDrive::memory(geometry, seed.wrapping_add(drive as u64)).map_err(device)?;
            if let Some(params) = &timing {
                new = new.with_timing(params.clone()).map_err(device)?;
            }
            drives.push(new);
        }
        let costs = timing.is_some().then(|| CpuCosts::calibrated(config.level));
        Ok(Self::with(map, built, drives, 0, costs))
    }

    /// The map of `shards` shards over drives of `geometry`, checked against their zone
    /// limits and capacity.
    fn checked_map(geometry: Geometry, config: Config, shards: u32, unit_blocks: u64) -> Result<ShardMap> {
        let map = ShardMap::new(shards, unit_blocks, config.logical_blocks, &geometry)?;
        map.check_config(&config)?;
        let plan = SegmentPlan::new(&geometry, config.level, config.mode, config.chunk_bytes, config.open_segments)?;
        map.check_zone_limits(&geometry, &plan, 0)?;
        map.check_capacity(&plan)?;
        Ok(map)
    }

    fn span(map: &ShardMap, geometry: &Geometry, shard: usize) -> Result<ZoneSpan> {
        let zones = map.zones_of(shard);
        ZoneSpan::new(geometry, zones.start, zones.end - zones.start)
            .map_err(|error| Error::InvalidConfig { reason: format!("shard {shard}: {error}") })
    }

    /// The simulator of `shards` over `drives` at `now_ns`, each shard's core charged
    /// `costs` from then on (None: no cores).
    fn with(
        map: ShardMap,
        mut shards: Vec<Shard>,
        drives: Vec<EmulatedDrive>,
        now_ns: u64,
        costs: Option<CpuCosts>,
    ) -> Self {
        let block_size_bytes = drives.first().map_or(0, |d| d.geometry().block_size_bytes);
        for shard in &mut shards {
            shard.core = costs.map(|costs| Core::new(costs, now_ns, block_size_bytes));
        }
        ShardedSimulator {
            map,
            shards,
            drives,
            now_ns,
            responses: Vec::new(),
            delayed: BTreeMap::new(),
            delayed_seq: 0,
            in_flight: HashMap::new(),
            next_tag: 0,
            refused: Vec::new(),
            parts: HashMap::new(),
            joins: HashMap::new(),
            next_part_id: 0,
            block_size_bytes,
        }
    }

    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Each shard's status and their sum.
    pub fn status(&self) -> ShardedStatus {
        ShardedStatus::of(self.shards.iter().map(|s| s.engine.status()).collect())
    }

    /// Drive commands a power cut now would catch (`Simulator::commands_in_flight`),
    /// completions reaped and waiting for a shard's core among them.
    pub fn commands_in_flight(&self) -> usize {
        let reaped: usize = self.shards.iter().filter_map(|s| s.core.as_ref()).map(Core::waiting_completions).sum();
        self.drives.iter().map(EmulatedDrive::commands_in_flight).sum::<usize>() + self.delayed.len() + reaped
    }

    /// Takes request `id`: its parts go to their shards now (each waits for its shard's
    /// core if that is busy; `step` hands it over).
    pub fn submit(&mut self, id: RequestId, request: Request) {
        let split = match self.map.split(request) {
            Ok(split) => split,
            Err(error) => return self.responses.push(Response { id, result: Err(error), checks: None }),
        };
        self.joins.insert(id, split.join);
        let mut touched = Vec::new();
        for (index, part) in split.parts.into_iter().enumerate() {
            let part_id = self.next_part_id;
            self.next_part_id += 1;
            self.parts.insert(part_id, (id, index));
            match self.shards[part.shard].core.as_mut() {
                Some(core) => core.waiting.push_back(Input::Request(part_id, part.request)),
                None => self.shards[part.shard].engine.submit(part_id, part.request, self.now_ns),
            }
            touched.push(part.shard);
        }
        for shard in touched {
            if self.shards[shard].core.is_some() {
                self.run_core(shard);
            } else {
                self.dispatch(shard);
            }
        }
    }

    /// Fails drive `drive`: the drive fails every command from now on, and every shard
    /// stops sending it any (`Engine::fail_drive`).
    pub fn fail_drive(&mut self, drive: usize) {
        self.drives[drive].fail();
        for shard in 0..self.shards.len() {
            self.shards[shard].engine.fail_drive(drive);
            self.dispatch(shard);
        }
    }

    /// Puts a new, empty in-memory drive (seeded with `seed`) in failed drive `drive`'s
    /// place once the old one has nothing in flight, and starts every shard's rebuild onto
    /// it (`Simulator::replace_drive`); `step` drives them on, side by side. A drive that
    /// failed on its own is counted failed only by the shards that sent it a command since:
    /// once any shard counts it failed, the others are told before the rebuild (the old
    /// drive is gone for all of them), rather than refusing to rebuild a drive they saw
    /// working.
    pub fn replace_drive(&mut self, drive: usize, seed: u64) -> Result<()> {
        while self.drives.get(drive).is_some_and(|d| d.in_flight() > 0) && self.step() {}
        let Some(old) = self.drives.get(drive) else {
            return Err(Error::InvalidConfig { reason: format!("drive {drive} of {}", self.drives.len()) });
        };
        let device = |error| Error::Device { drive, error };
        let mut new = EmulatedDrive::memory(old.geometry(), seed).map_err(device)?;
        if let Some(params) = old.timing_params().cloned() {
            new = new.with_timing(params).map_err(device)?;
        }
        new.advance_to(self.now_ns);
        if self.shards.iter().any(|s| s.engine.is_failed(drive)) {
            for shard in self.shards.iter_mut().filter(|s| !s.engine.is_failed(drive)) {
                shard.engine.fail_drive(drive);
            }
        }
        for shard in &mut self.shards {
            shard.engine.rebuild_drive(drive)?;
        }
        self.drives[drive] = new;
        for shard in 0..self.shards.len() {
            self.dispatch(shard);
        }
        Ok(())
    }

    /// Starts every shard's scrub (`Engine::start_scrub`); `step` drives them on.
    pub fn start_scrub(&mut self, rate_bytes_per_s: Option<u64>) -> Result<()> {
        for shard in 0..self.shards.len() {
            self.shards[shard].engine.start_scrub(rate_bytes_per_s)?;
            self.dispatch(shard);
        }
        Ok(())
    }

    /// Stops every shard cleanly (`Engine::stop`) and runs until all have.
    pub fn stop(&mut self) {
        self.begin_stop();
        while !self.is_stopped() && self.step() {}
        assert!(self.is_stopped(), "a clean stop waits for nothing");
    }

    pub fn is_stopped(&self) -> bool {
        self.shards.iter().all(|s| s.engine.is_stopped())
    }

    /// Cuts power to every drive (`Simulator::power_cut`); returns the drives.
    pub fn power_cut(self) -> Result<Vec<EmulatedDrive>> {
        let mut drives = self.drives;
        for (drive, d) in drives.iter_mut().enumerate() {
            d.power_cut().map_err(|error| Error::Device { drive, error })?;
        }
        Ok(drives)
    }

    fn dispatch(&mut self, shard: usize) {
        self.dispatch_at(shard, self.now_ns);
    }

    /// A shard's commands and responses, released at `release_ns` (now, or when its core
    /// is done with the event that emitted them): commands to the drives (or held back for
    /// its modelled CPU time), responses to their joins (or held by its core), a running
    /// checkpoint written when the shard drained for it (`Simulator::dispatch_at`).
    fn dispatch_at(&mut self, shard: usize, release_ns: u64) {
        let Shard { engine, core, .. } = &mut self.shards[shard];
        let release_ns = run_rebuild_jobs(engine, core.as_mut(), self.now_ns, release_ns);
        if self.shards[shard].engine.checkpoint_ready() {
            self.write_running_checkpoint(shard);
        }
        while let Some(command) = self.shards[shard].engine.poll_command() {
            let at = release_ns + command.delay_ns;
            if at > self.now_ns {
                self.delayed_seq += 1;
                self.delayed.insert((at, self.delayed_seq), (shard, command));
            } else {
                self.send(shard, command);
            }
        }
        while let Some(response) = self.shards[shard].engine.poll_response() {
            match self.shards[shard].core.as_mut() {
                Some(core) if release_ns > self.now_ns => core.responses.push_back((release_ns, response)),
                _ => self.answer(response),
            }
        }
        if self.shards[shard].engine.checkpoint_ready() {
            self.dispatch_at(shard, release_ns); // drained by what was just dispatched: written now
        }
    }

    /// Sends shard `shard`'s command to its drive through the shard's window (its core
    /// notes its kind, to charge its completion).
    fn send(&mut self, shard: usize, command: DriveCommand) {
        let rebuild = self.shards[shard].engine.rebuild_command_chunk_blocks(command.tag);
        if let Some(core) = self.shards[shard].core.as_mut() {
            core.submitted(command.drive, command.tag, &command.command, rebuild);
        }
        let tag = self.next_tag;
        self.next_tag += 1;
        match self.shards[shard].span.command_in(tag, command.command) {
            Ok(shifted) => {
                self.in_flight.insert(tag, (shard, command.tag));
                self.drives[command.drive].submit(tag, shifted);
            }
            Err(mut refused) => {
                refused.tag = command.tag;
                self.refused.push((shard, command.drive, refused));
            }
        }
    }

    /// A part's response: the array's, once every part of its request has answered.
    fn answer(&mut self, response: Response) {
        let Some((id, index)) = self.parts.remove(&response.id) else {
            debug_assert!(false, "a response to part {} no request has", response.id);
            return;
        };
        let done = self.joins.get_mut(&id).is_some_and(|join| join.answer(index, response));
        if done {
            let join = self.joins.remove(&id).expect("the join just answered");
            self.responses.push(join.finish(id));
        }
    }

    /// Runs one step (`Simulator::step`): delivers what is due now, else jumps to the next
    /// event. Returns false when nothing is left to happen.
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
            let (shard, command) = entry.remove();
            self.send(shard, command);
        }
        for shard in 0..self.shards.len() {
            self.release_responses(shard);
            if self.shards[shard].core.as_ref().is_none_or(|core| core.is_free(self.now_ns)) {
                self.shards[shard].engine.tick(self.now_ns);
                self.dispatch(shard);
            }
            self.run_core(shard);
        }
        true
    }

    /// Hands each shard the completions of its commands the drives have ready (and those
    /// its window refused); whether there was any.
    fn deliver_completions(&mut self) -> bool {
        let mut completions = std::mem::take(&mut self.refused);
        let mut out = Vec::new();
        for (drive, d) in self.drives.iter_mut().enumerate() {
            out.clear();
            d.reap(&mut out);
            for mut completion in out.drain(..) {
                let Some((shard, tag)) = self.in_flight.remove(&completion.tag) else {
                    debug_assert!(false, "drive {drive} completed tag {} nobody sent", completion.tag);
                    continue;
                };
                self.shards[shard].span.completion_out(&mut completion);
                completion.tag = tag;
                completions.push((shard, drive, completion));
            }
        }
        let any = !completions.is_empty();
        let mut charged = Vec::new();
        for (shard, drive, completion) in completions {
            match self.shards[shard].core.as_mut() {
                Some(core) => {
                    core.waiting.push_back(Input::Completion(drive, completion));
                    if !charged.contains(&shard) {
                        charged.push(shard);
                    }
                }
                None => {
                    self.shards[shard].engine.on_completion(drive, completion, self.now_ns);
                    self.dispatch(shard);
                }
            }
        }
        charged.sort_unstable();
        let mut took = false;
        for shard in charged {
            took |= self.run_core(shard);
        }
        took || any
    }

    /// When the next drive completion, engine timer, held-back command or response, or
    /// event waiting for a shard's core is due, if any (`Simulator::next_event_ns`; a
    /// shard's timer due while its core is busy waits for it).
    pub fn next_event_ns(&self) -> Option<u64> {
        let next_drive = self.drives.iter().filter_map(EmulatedDrive::next_event_ns).min();
        let next_delayed = self.delayed.keys().next().map(|(at, _)| *at);
        let next_timer = self
            .shards
            .iter()
            .filter_map(|s| s.engine.next_timer_ns().map(|t| t.max(s.core.as_ref().map_or(0, |c| c.free_at_ns))))
            .min();
        let next_core = self.shards.iter().filter_map(|s| s.core.as_ref()?.next_event_ns(self.now_ns)).min();
        [next_drive, next_timer, next_delayed, next_core].into_iter().flatten().min()
    }

    /// Runs until nothing is left to happen; returns the responses produced.
    pub fn run_until_idle(&mut self) -> Vec<Response> {
        while self.step() {}
        std::mem::take(&mut self.responses)
    }

    /// Takes the responses produced so far.
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

    /// After a clean stop: each shard's checkpoint as the next start reads it back
    /// (`Simulator::stop_checkpoint`), None for a shard whose stop left none.
    pub fn stop_checkpoints(&mut self) -> Vec<Option<CheckpointImage>> {
        debug_assert!(self.is_stopped());
        let block = self.block_size_bytes;
        self.shards
            .iter_mut()
            .map(|s| {
                let image = s.engine.checkpoint(s.checkpoints.next_generation())?;
                Some(s.checkpoints.store(&image, block))
            })
            .collect()
    }

    /// Each shard's newest checkpoint taken while running, since the last call: what a
    /// start after a power cut now is offered (`Simulator::take_running_checkpoint`).
    pub fn take_running_checkpoints(&mut self) -> Vec<Option<CheckpointImage>> {
        self.shards.iter_mut().map(|s| s.checkpoints.running.take()).collect()
    }

    /// For each shard, whether a rebuild ran when the checkpoint `take_running_checkpoints`
    /// would hand out was taken (false without one).
    pub fn running_checkpoints_during_rebuild(&self) -> Vec<bool> {
        self.shards.iter().map(|s| s.checkpoints.running.is_some() && s.running_during_rebuild).collect()
    }

    fn write_running_checkpoint(&mut self, shard: usize) {
        let block = self.block_size_bytes;
        let s = &mut self.shards[shard];
        let image = s.engine.checkpoint(s.checkpoints.next_generation());
        let written = image.is_some();
        if let Some(image) = image {
            s.checkpoints.running = Some(s.checkpoints.store(&image, block));
            s.running_during_rebuild = s.engine.rebuild_status().is_some();
        }
        s.engine.checkpoint_written(written, self.now_ns);
    }
}
