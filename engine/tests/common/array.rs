//! One harness over the plain simulator and the sharded one: `Array` is what the crash
//! exploration (`exploration/`) and the reference model (`reference/`) ask of a simulated
//! array, `Sharding` the shard count and interleave unit a run's arrays are built with.
//! The plain `Simulator` is an array of one shard: per-shard answers (checkpoints,
//! recovery reports, statuses) are lists of one entry.

use zapraid_engine::format::CheckpointImage;
use zapraid_engine::l2p::Physical;
use zapraid_engine::sim_shards::ShardedSimulator;
use zapraid_engine::{Config, Declustering, RecoveryReport, Request, RequestId, Response, Result, Simulator, Status};
use zapraid_zns::{EmulatedDrive, Geometry};

/// How many shards, in units of how many blocks; one shard is the plain simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sharding {
    pub shards: u32,
    pub unit_blocks: u64,
}

impl Sharding {
    /// The plain simulator (the unit means nothing with one shard).
    pub const PLAIN: Sharding = Sharding { shards: 1, unit_blocks: 1 };

    /// Zones per drive for `per_shard` zones to each shard.
    pub fn zones(&self, per_shard: u32) -> u32 {
        per_shard * self.shards
    }
}

impl std::fmt::Display for Sharding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.shards {
            1 => write!(f, "1 shard"),
            s => write!(f, "{s} shards in units of {} blocks", self.unit_blocks),
        }
    }
}

/// A simulated array: requests, steps, faults, stops, checkpoints and starts.
pub trait Array: Sized {
    /// A formatted array over fresh in-memory drives, untimed.
    fn create(sharding: Sharding, geometry: Geometry, config: Config, seed: u64) -> Result<Self>;
    /// A start from `drives` with `failed` drives known failed, each shard offered its
    /// checkpoint (one entry per shard, or none); the background work it leaves is queued,
    /// not done.
    fn recover(
        sharding: Sharding,
        geometry: Geometry,
        config: Config,
        drives: Vec<EmulatedDrive>,
        failed: &[usize],
        spared: &[usize],
        checkpoints: Vec<Option<CheckpointImage>>,
    ) -> Result<Self>;
    /// A start cut by a power loss after `completions` completions: the drives then, or
    /// the array if it finished first (not settled).
    fn recover_interrupted(
        sharding: Sharding,
        geometry: Geometry,
        config: Config,
        drives: Vec<EmulatedDrive>,
        completions: usize,
        checkpoints: Vec<Option<CheckpointImage>>,
    ) -> Result<std::result::Result<Self, Vec<EmulatedDrive>>>;

    fn submit(&mut self, id: RequestId, request: Request);
    fn step(&mut self) -> bool;
    fn step_until(&mut self, t_ns: u64) -> bool;
    fn now_ns(&self) -> u64;
    fn take_responses(&mut self) -> Vec<Response>;
    fn run_until_response(&mut self, id: RequestId) -> Option<Response>;
    fn run_until_idle(&mut self) -> Vec<Response>;
    /// The array's status (the shards' summed).
    fn status(&self) -> Status;
    fn shard_statuses(&self) -> Vec<Status>;
    fn commands_in_flight(&self) -> usize;
    fn power_cut(self) -> Result<Vec<EmulatedDrive>>;
    fn drives(&self) -> &[EmulatedDrive];
    fn drives_mut(&mut self) -> &mut [EmulatedDrive];
    /// Takes the drives as they are (the array is left with none).
    fn take_drives(&mut self) -> Vec<EmulatedDrive>;
    /// Whether an engine counts `drive` failed.
    fn is_failed(&self, drive: usize) -> bool;
    /// Fails `drive` and tells every engine (as an operator's `fail` does).
    fn fail_drive(&mut self, drive: usize);
    fn replace_drive(&mut self, drive: usize, seed: u64) -> Result<()>;
    fn resume_rebuild(&mut self, drive: usize) -> Result<()>;
    /// Rebuilds failed `drive` into distributed spare space (a declustered array).
    fn rebuild_into_spares(&mut self, drive: usize) -> Result<()>;
    /// Failed drives no segment has a lane on any more.
    fn drives_in_spare_space(&self) -> Vec<usize>;
    /// Adds `added` new empty drives to a running declustered array (`Engine::grow`);
    /// refused (nothing changed) for a classic array, during a drive rebuild, and past
    /// the placements the engine records.
    fn grow(&mut self, added: usize, seed: u64) -> Result<()>;
    /// How the array spreads its segments now (grown: what a start must be given).
    fn declustering(&self) -> Declustering;
    fn set_rebuild_rate(&mut self, rate_bytes_per_s: Option<u64>);
    fn start_scrub(&mut self, rate_bytes_per_s: Option<u64>) -> Result<()>;
    /// Where `lba` lives now, the zone numbered on the whole drive.
    fn locate(&self, lba: u64) -> Option<Physical>;
    fn begin_stop(&mut self);
    fn is_stopped(&self) -> bool;
    fn stop(&mut self);
    /// After a clean stop: each shard's checkpoint as the next start reads it back.
    fn stop_checkpoints(&mut self) -> Vec<Option<CheckpointImage>>;
    /// Each shard's newest checkpoint taken while running since the last call, and whether
    /// a rebuild ran when it was taken.
    fn take_running_checkpoints(&mut self) -> Vec<Option<(CheckpointImage, bool)>>;
    /// What each shard's start read (none for a fresh array).
    fn recovery_reports(&self) -> Vec<RecoveryReport>;
}

impl Array for Simulator {
    fn create(sharding: Sharding, geometry: Geometry, config: Config, seed: u64) -> Result<Self> {
        debug_assert_eq!(sharding.shards, 1, "the plain simulator is one shard");
        Simulator::new(geometry, config, seed, None)
    }

    fn recover(
        _: Sharding,
        geometry: Geometry,
        config: Config,
        drives: Vec<EmulatedDrive>,
        failed: &[usize],
        spared: &[usize],
        checkpoints: Vec<Option<CheckpointImage>>,
    ) -> Result<Self> {
        Simulator::recover_with_spared(geometry, config, drives, failed, spared, one(checkpoints))
    }

    fn recover_interrupted(
        _: Sharding,
        geometry: Geometry,
        config: Config,
        drives: Vec<EmulatedDrive>,
        completions: usize,
        checkpoints: Vec<Option<CheckpointImage>>,
    ) -> Result<std::result::Result<Self, Vec<EmulatedDrive>>> {
        Simulator::recover_interrupted_with_checkpoint(geometry, config, drives, completions, one(checkpoints))
    }

    fn submit(&mut self, id: RequestId, request: Request) {
        Simulator::submit(self, id, request)
    }
    fn step(&mut self) -> bool {
        Simulator::step(self)
    }
    fn step_until(&mut self, t_ns: u64) -> bool {
        Simulator::step_until(self, t_ns)
    }
    fn now_ns(&self) -> u64 {
        Simulator::now_ns(self)
    }
    fn take_responses(&mut self) -> Vec<Response> {
        Simulator::take_responses(self)
    }
    fn run_until_response(&mut self, id: RequestId) -> Option<Response> {
        Simulator::run_until_response(self, id)
    }
    fn run_until_idle(&mut self) -> Vec<Response> {
        Simulator::run_until_idle(self)
    }
    fn status(&self) -> Status {
        self.engine.status()
    }
    fn shard_statuses(&self) -> Vec<Status> {
        vec![self.engine.status()]
    }
    fn commands_in_flight(&self) -> usize {
        Simulator::commands_in_flight(self)
    }
    fn power_cut(self) -> Result<Vec<EmulatedDrive>> {
        Simulator::power_cut(self)
    }
    fn drives(&self) -> &[EmulatedDrive] {
        &self.drives
    }
    fn drives_mut(&mut self) -> &mut [EmulatedDrive] {
        &mut self.drives
    }
    fn take_drives(&mut self) -> Vec<EmulatedDrive> {
        std::mem::take(&mut self.drives)
    }
    fn is_failed(&self, drive: usize) -> bool {
        self.engine.is_failed(drive)
    }
    fn fail_drive(&mut self, drive: usize) {
        self.drives[drive].fail();
        self.engine.fail_drive(drive);
    }
    fn replace_drive(&mut self, drive: usize, seed: u64) -> Result<()> {
        Simulator::replace_drive(self, drive, seed)
    }
    fn resume_rebuild(&mut self, drive: usize) -> Result<()> {
        Simulator::resume_rebuild(self, drive)
    }
    fn rebuild_into_spares(&mut self, drive: usize) -> Result<()> {
        Simulator::rebuild_into_spares(self, drive)
    }
    fn drives_in_spare_space(&self) -> Vec<usize> {
        self.engine.drives_in_spare_space()
    }
    fn grow(&mut self, added: usize, seed: u64) -> Result<()> {
        Simulator::grow(self, added, seed)
    }
    fn declustering(&self) -> Declustering {
        self.engine.declustering()
    }
    fn set_rebuild_rate(&mut self, rate_bytes_per_s: Option<u64>) {
        Simulator::set_rebuild_rate(self, rate_bytes_per_s)
    }
    fn start_scrub(&mut self, rate_bytes_per_s: Option<u64>) -> Result<()> {
        Simulator::start_scrub(self, rate_bytes_per_s)
    }
    fn locate(&self, lba: u64) -> Option<Physical> {
        self.engine.locate(lba)
    }
    fn begin_stop(&mut self) {
        Simulator::begin_stop(self)
    }
    fn is_stopped(&self) -> bool {
        self.engine.is_stopped()
    }
    fn stop(&mut self) {
        Simulator::stop(self)
    }
    fn stop_checkpoints(&mut self) -> Vec<Option<CheckpointImage>> {
        vec![self.stop_checkpoint()]
    }
    fn take_running_checkpoints(&mut self) -> Vec<Option<(CheckpointImage, bool)>> {
        let during_rebuild = self.running_checkpoint_during_rebuild();
        vec![self.take_running_checkpoint().map(|image| (image, during_rebuild))]
    }
    fn recovery_reports(&self) -> Vec<RecoveryReport> {
        vec![self.recovery_report]
    }
}

/// The one checkpoint offered to the plain simulator.
fn one(checkpoints: Vec<Option<CheckpointImage>>) -> Option<CheckpointImage> {
    debug_assert!(checkpoints.len() <= 1, "{} checkpoints offered to one shard", checkpoints.len());
    checkpoints.into_iter().next().flatten()
}

impl Array for ShardedSimulator {
    fn create(sharding: Sharding, geometry: Geometry, config: Config, seed: u64) -> Result<Self> {
        ShardedSimulator::new(geometry, config, sharding.shards, sharding.unit_blocks, seed, None)
    }

    fn recover(
        sharding: Sharding,
        geometry: Geometry,
        config: Config,
        drives: Vec<EmulatedDrive>,
        failed: &[usize],
        spared: &[usize],
        checkpoints: Vec<Option<CheckpointImage>>,
    ) -> Result<Self> {
        debug_assert!(spared.is_empty(), "sharded arrays are not declustered");
        let Sharding { shards, unit_blocks } = sharding;
        ShardedSimulator::recover_unsettled(geometry, config, shards, unit_blocks, drives, failed, checkpoints)
    }

    fn recover_interrupted(
        sharding: Sharding,
        geometry: Geometry,
        config: Config,
        drives: Vec<EmulatedDrive>,
        completions: usize,
        checkpoints: Vec<Option<CheckpointImage>>,
    ) -> Result<std::result::Result<Self, Vec<EmulatedDrive>>> {
        let Sharding { shards, unit_blocks } = sharding;
        ShardedSimulator::recover_interrupted(geometry, config, shards, unit_blocks, drives, completions, checkpoints)
    }

    fn submit(&mut self, id: RequestId, request: Request) {
        ShardedSimulator::submit(self, id, request)
    }
    fn step(&mut self) -> bool {
        ShardedSimulator::step(self)
    }
    fn step_until(&mut self, t_ns: u64) -> bool {
        ShardedSimulator::step_until(self, t_ns)
    }
    fn now_ns(&self) -> u64 {
        ShardedSimulator::now_ns(self)
    }
    fn take_responses(&mut self) -> Vec<Response> {
        ShardedSimulator::take_responses(self)
    }
    fn run_until_response(&mut self, id: RequestId) -> Option<Response> {
        ShardedSimulator::run_until_response(self, id)
    }
    fn run_until_idle(&mut self) -> Vec<Response> {
        ShardedSimulator::run_until_idle(self)
    }
    fn status(&self) -> Status {
        ShardedSimulator::status(self).total
    }
    fn shard_statuses(&self) -> Vec<Status> {
        ShardedSimulator::status(self).shards
    }
    fn commands_in_flight(&self) -> usize {
        ShardedSimulator::commands_in_flight(self)
    }
    fn power_cut(self) -> Result<Vec<EmulatedDrive>> {
        ShardedSimulator::power_cut(self)
    }
    fn drives(&self) -> &[EmulatedDrive] {
        &self.drives
    }
    fn drives_mut(&mut self) -> &mut [EmulatedDrive] {
        &mut self.drives
    }
    fn take_drives(&mut self) -> Vec<EmulatedDrive> {
        ShardedSimulator::take_drives(self)
    }
    fn is_failed(&self, drive: usize) -> bool {
        self.shards.iter().any(|s| s.engine.is_failed(drive))
    }
    fn fail_drive(&mut self, drive: usize) {
        ShardedSimulator::fail_drive(self, drive)
    }
    fn replace_drive(&mut self, drive: usize, seed: u64) -> Result<()> {
        ShardedSimulator::replace_drive(self, drive, seed)
    }
    fn resume_rebuild(&mut self, drive: usize) -> Result<()> {
        ShardedSimulator::resume_rebuild(self, drive)
    }
    fn rebuild_into_spares(&mut self, _: usize) -> Result<()> {
        Err(zapraid_engine::Error::Unavailable { reason: "sharded arrays are not declustered".to_string() })
    }
    fn drives_in_spare_space(&self) -> Vec<usize> {
        Vec::new()
    }
    fn grow(&mut self, _: usize, _: u64) -> Result<()> {
        Err(zapraid_engine::Error::Unavailable { reason: "sharded arrays are not declustered".to_string() })
    }
    fn declustering(&self) -> Declustering {
        self.shards.first().map_or(Declustering::CLASSIC, |s| s.engine.declustering())
    }
    fn set_rebuild_rate(&mut self, rate_bytes_per_s: Option<u64>) {
        ShardedSimulator::set_rebuild_rate(self, rate_bytes_per_s)
    }
    fn start_scrub(&mut self, rate_bytes_per_s: Option<u64>) -> Result<()> {
        ShardedSimulator::start_scrub(self, rate_bytes_per_s)
    }
    fn locate(&self, lba: u64) -> Option<Physical> {
        ShardedSimulator::locate(self, lba)
    }
    fn begin_stop(&mut self) {
        ShardedSimulator::begin_stop(self)
    }
    fn is_stopped(&self) -> bool {
        ShardedSimulator::is_stopped(self)
    }
    fn stop(&mut self) {
        ShardedSimulator::stop(self)
    }
    fn stop_checkpoints(&mut self) -> Vec<Option<CheckpointImage>> {
        ShardedSimulator::stop_checkpoints(self)
    }
    fn take_running_checkpoints(&mut self) -> Vec<Option<(CheckpointImage, bool)>> {
        let during_rebuild = self.running_checkpoints_during_rebuild();
        let images = ShardedSimulator::take_running_checkpoints(self);
        images.into_iter().zip(during_rebuild).map(|(image, during)| image.map(|i| (i, during))).collect()
    }
    fn recovery_reports(&self) -> Vec<RecoveryReport> {
        self.shards.iter().map(|s| s.recovery_report).collect()
    }
}
