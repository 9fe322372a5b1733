//! A start of an array of shards from its drives (after a clean stop or a power cut):
//! every shard's recovery at once, each over its window of the drives, from the drives
//! alone or from the checkpoint the shard left (`checkpoints`); and one cut by a power
//! loss part way (`recover_interrupted`, for crash exploration).

use zapraid_zns::{EmulatedDrive, Geometry, ZonedDevice};

use super::{Shard, ShardedSimulator};
use crate::cpu_cost::CpuCosts;
use crate::engine::Config;
use crate::error::{Error, Result};
use crate::format::CheckpointImage;
use crate::recovery::Recovery;
use crate::sim::CheckpointCopies;

impl ShardedSimulator {
    /// Recovers an array of `shards` shards in units of `unit_blocks` from `drives`, with
    /// drives known to have failed, offering each shard the checkpoint it left (one entry
    /// per shard, or none at all), and continues once the background work recovery
    /// leaves is done (`Simulator::recover_with_checkpoint`).
    pub fn recover(
        geometry: Geometry,
        config: Config,
        shards: u32,
        unit_blocks: u64,
        drives: Vec<EmulatedDrive>,
        failed_drives: &[usize],
        checkpoints: Vec<Option<CheckpointImage>>,
    ) -> Result<Self> {
        let mut sim =
            Self::recover_unsettled(geometry, config, shards, unit_blocks, drives, failed_drives, checkpoints)?;
        sim.run_until_idle();
        Ok(sim)
    }

    /// Like `recover`, but returns as soon as the array is usable again: the background
    /// work recovery leaves is queued, not done (`Simulator::recover_unsettled`).
    pub fn recover_unsettled(
        geometry: Geometry,
        config: Config,
        shards: u32,
        unit_blocks: u64,
        drives: Vec<EmulatedDrive>,
        failed_drives: &[usize],
        checkpoints: Vec<Option<CheckpointImage>>,
    ) -> Result<Self> {
        let start = Start { geometry, config, shards, unit_blocks };
        match start.run(drives, failed_drives, checkpoints, None)? {
            Ok(sim) => Ok(sim),
            Err(_) => unreachable!("recovery without an interruption ran to the end"),
        }
    }

    /// Starts recovery of every shard and cuts power to every drive once they have taken
    /// `completions` completions between them (commands in flight land or not); returns
    /// the drives as found then, or the recovered simulator if recovery finished first
    /// (`Simulator::recover_interrupted_with_checkpoint`).
    #[allow(clippy::too_many_arguments)] // `recover`'s, and the cut
    pub fn recover_interrupted(
        geometry: Geometry,
        config: Config,
        shards: u32,
        unit_blocks: u64,
        drives: Vec<EmulatedDrive>,
        completions: usize,
        checkpoints: Vec<Option<CheckpointImage>>,
    ) -> Result<std::result::Result<Self, Vec<EmulatedDrive>>> {
        Start { geometry, config, shards, unit_blocks }.run(drives, &[], checkpoints, Some(completions))
    }
}

/// What a start of an array of shards is given besides its drives.
struct Start {
    geometry: Geometry,
    config: Config,
    shards: u32,
    unit_blocks: u64,
}

impl Start {
    fn run(
        self,
        mut drives: Vec<EmulatedDrive>,
        failed_drives: &[usize],
        checkpoints: Vec<Option<CheckpointImage>>,
        interrupt_after: Option<usize>,
    ) -> Result<std::result::Result<ShardedSimulator, Vec<EmulatedDrive>>> {
        let Start { geometry, config, shards, unit_blocks } = self;
        let map = ShardedSimulator::checked_map(geometry, config, shards, unit_blocks)?;
        if !checkpoints.is_empty() && checkpoints.len() != map.shards() {
            let reason = format!("{} checkpoints offered to {} shards", checkpoints.len(), map.shards());
            return Err(Error::InvalidConfig { reason });
        }
        let mut offered = checkpoints.into_iter();
        let mut recoveries = Vec::new();
        let mut spans = Vec::new();
        for shard in 0..map.shards() {
            let span = ShardedSimulator::span(&map, &geometry, shard)?;
            let mut recovery =
                Recovery::with_failed_drives(span.geometry(geometry), map.shard_config(shard, config), failed_drives)?;
            if let Some(image) = offered.next().flatten() {
                let blocks = image.image_len().div_ceil(u64::from(geometry.block_size_bytes));
                recovery.use_checkpoint(image, blocks);
            }
            recoveries.push(recovery);
            spans.push(span);
        }
        if run_recoveries(&mut recoveries, &spans, &mut drives, interrupt_after)? {
            return Ok(Err(drives));
        }
        let now_ns = drives.iter().map(EmulatedDrive::now_ns).max().unwrap_or(0);
        let mut built = Vec::new();
        for (shard, (recovery, span)) in recoveries.into_iter().zip(spans).enumerate() {
            let recovery_report = recovery.report();
            // The next checkpoint follows the one the start used (`Simulator`).
            let checkpoints = CheckpointCopies::after(recovery_report.checkpoint_generation);
            let mut engine = recovery.finish().map_err(|error| map.array_error(shard, error))?;
            engine.share_drives_with(map.shards() as u32);
            engine.set_rebuild_jobs_offloaded(true); // run and charged here (`core::run_rebuild_jobs`)
            let running_during_rebuild = false;
            built.push(Shard { engine, span, recovery_report, checkpoints, running_during_rebuild, core: None });
        }
        // Cores as `Simulator::recover` gives its engine one: with drive timing.
        let timed = drives.iter().any(|d| d.timing_params().is_some());
        let costs = timed.then(|| CpuCosts::calibrated(config.level));
        let mut sim = ShardedSimulator::with(map, built, drives, now_ns, costs);
        for shard in 0..sim.shards.len() {
            sim.shards[shard].engine.tick(now_ns);
            sim.dispatch(shard);
        }
        Ok(Ok(sim))
    }
}

/// Runs every shard's recovery side by side over its window of `drives`
/// (`Recovery::run_round` for several recoveries): each round submits what every shard
/// asks for, then waits on every drive with commands in flight and hands each completion
/// to the shard whose command it was. With `interrupt_after`, power is cut to every
/// drive once that many completions were taken (if recovery is not done by then); returns
/// whether it was.
fn run_recoveries(
    recoveries: &mut [Recovery],
    spans: &[zapraid_zns::ZoneSpan],
    drives: &mut [EmulatedDrive],
    interrupt_after: Option<usize>,
) -> Result<bool> {
    let mut completions = 0;
    // The simulator's tag of each command on the drives -> (shard, recovery's tag).
    let mut in_flight = std::collections::HashMap::new();
    let mut next_tag = 0;
    let mut out = Vec::new();
    while !recoveries.iter().all(Recovery::is_done) {
        let mut taken = 0;
        for (shard, recovery) in recoveries.iter_mut().enumerate() {
            while let Some(command) = recovery.poll_command() {
                next_tag += 1;
                match spans[shard].command_in(next_tag, command.command) {
                    Ok(shifted) => {
                        in_flight.insert(next_tag, (shard, command.tag));
                        drives[command.drive].submit(next_tag, shifted);
                    }
                    Err(mut refused) => {
                        refused.tag = command.tag;
                        recovery.on_completion(command.drive, refused);
                        taken += 1;
                    }
                }
            }
        }
        for (drive, d) in drives.iter_mut().enumerate() {
            if d.in_flight() == 0 {
                continue;
            }
            d.wait(&mut out);
            for mut completion in out.drain(..) {
                taken += 1;
                let Some((shard, tag)) = in_flight.remove(&completion.tag) else {
                    debug_assert!(false, "drive {drive} completed tag {} nobody sent", completion.tag);
                    continue;
                };
                spans[shard].completion_out(&mut completion);
                completion.tag = tag;
                recoveries[shard].on_completion(drive, completion);
            }
        }
        let done = recoveries.iter().all(Recovery::is_done);
        if taken == 0 && !done {
            return Err(Error::Unavailable { reason: "recovery is waiting for commands no drive has".into() });
        }
        completions += taken;
        if interrupt_after.is_some_and(|n| completions >= n) && !done {
            for (drive, d) in drives.iter_mut().enumerate() {
                d.power_cut().map_err(|error| Error::Device { drive, error })?;
            }
            return Ok(true);
        }
    }
    Ok(false)
}
