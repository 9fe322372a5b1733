//! The simulator's constructors that recover an array from its drives (after a clean stop,
//! a power cut, or with drives failed), optionally from a checkpoint, and the one that cuts
//! power part way through recovery (crash exploration).

use std::collections::BTreeMap;

use zapraid_zns::{EmulatedDrive, Geometry};

use super::checkpoints::CheckpointCopies;
use super::core::Core;
use super::traffic::DriveTraffic;
use super::Simulator;
use crate::cpu_cost::CpuCosts;
use crate::engine::Config;
use crate::error::Result;

/// Drives a start is told of: failed, and of those, rebuilt into spare space.
#[derive(Clone, Copy, Default)]
struct DriveStates<'a> {
    failed: &'a [usize],
    spared: &'a [usize],
}

impl Simulator {
    /// Recovers the array from `drives` (after a clean stop or a power cut) and continues
    /// with the recovered engine, once the background work recovery leaves (closing and
    /// reclaiming the segments that were open) is done.
    pub fn recover(geometry: Geometry, config: Config, drives: Vec<EmulatedDrive>) -> Result<Self> {
        let mut sim = Self::recover_unsettled(geometry, config, drives)?;
        sim.run_until_idle();
        Ok(sim)
    }

    /// Like `recover`, but returns as soon as the array is usable again: the background
    /// work recovery leaves is queued, not done (`now_ns` is when recovery ended).
    pub fn recover_unsettled(geometry: Geometry, config: Config, drives: Vec<EmulatedDrive>) -> Result<Self> {
        Self::recover_with_failed(geometry, config, drives, &[])
    }

    /// Like `recover_unsettled`, with drives known to have failed while the array ran (a
    /// real array reads them from its superblock).
    pub fn recover_with_failed(
        geometry: Geometry,
        config: Config,
        drives: Vec<EmulatedDrive>,
        failed_drives: &[usize],
    ) -> Result<Self> {
        Self::recover_with_checkpoint(geometry, config, drives, failed_drives, None)
    }

    /// Like `recover_with_failed`, offering the checkpoint a clean stop left
    /// (`Engine::checkpoint`; a real array keeps it in reserved zones): the recovery
    /// starts from it if it matches the drives (`recovery_report.checkpoint_generation`).
    pub fn recover_with_checkpoint(
        geometry: Geometry,
        config: Config,
        drives: Vec<EmulatedDrive>,
        failed_drives: &[usize],
        checkpoint: Option<crate::format::CheckpointImage>,
    ) -> Result<Self> {
        Self::recover_with_spared(geometry, config, drives, failed_drives, &[], checkpoint)
    }

    /// Like `recover_with_checkpoint`, with failed drives of a declustered array that
    /// were rebuilt into distributed spare space (`Engine::drives_in_spare_space`; a real
    /// array records them in its superblock): no segment has a lane on them.
    pub fn recover_with_spared(
        geometry: Geometry,
        config: Config,
        drives: Vec<EmulatedDrive>,
        failed_drives: &[usize],
        spared_drives: &[usize],
        checkpoint: Option<crate::format::CheckpointImage>,
    ) -> Result<Self> {
        let failed = DriveStates { failed: failed_drives, spared: spared_drives };
        match Self::run_recovery(geometry, config, drives, None, failed, checkpoint)? {
            Ok(sim) => Ok(sim),
            Err(_) => unreachable!("recovery without an interruption ran to the end"),
        }
    }

    /// Starts recovery and cuts power to every drive after it has taken `completions`
    /// completions (commands in flight land or not); returns the drives as found then, or
    /// the recovered simulator if recovery finished first.
    pub fn recover_interrupted(
        geometry: Geometry,
        config: Config,
        drives: Vec<EmulatedDrive>,
        completions: usize,
    ) -> Result<std::result::Result<Self, Vec<EmulatedDrive>>> {
        Self::recover_interrupted_with_checkpoint(geometry, config, drives, completions, None)
    }

    /// Like `recover_interrupted`, offering a checkpoint (as `recover_with_checkpoint`).
    pub fn recover_interrupted_with_checkpoint(
        geometry: Geometry,
        config: Config,
        drives: Vec<EmulatedDrive>,
        completions: usize,
        checkpoint: Option<crate::format::CheckpointImage>,
    ) -> Result<std::result::Result<Self, Vec<EmulatedDrive>>> {
        Self::run_recovery(geometry, config, drives, Some(completions), DriveStates::default(), checkpoint)
    }

    fn run_recovery(
        geometry: Geometry,
        config: Config,
        mut drives: Vec<EmulatedDrive>,
        interrupt_after: Option<usize>,
        states: DriveStates,
        checkpoint: Option<crate::format::CheckpointImage>,
    ) -> Result<std::result::Result<Self, Vec<EmulatedDrive>>> {
        let mut recovery = crate::recovery::Recovery::with_failed_drives(geometry, config, states.failed)?;
        recovery.set_spared_drives(states.spared)?;
        if let Some(image) = checkpoint {
            let blocks = image.image_len().div_ceil(u64::from(geometry.block_size_bytes));
            recovery.use_checkpoint(image, blocks);
        }
        let mut taken = 0;
        while !recovery.is_done() {
            taken += recovery.run_round(&mut drives)?;
            if interrupt_after.is_some_and(|n| taken >= n) && !recovery.is_done() {
                for (i, drive) in drives.iter_mut().enumerate() {
                    drive.power_cut().map_err(|error| crate::error::Error::Device { drive: i, error })?;
                }
                return Ok(Err(drives));
            }
        }
        let recovery_report = recovery.report();
        // The next checkpoint follows the one the start used (a start that used none
        // empties the area, as a real driver does).
        let checkpoints = CheckpointCopies::after(recovery_report.checkpoint_generation);
        let mut engine = recovery.finish()?;
        engine.set_rebuild_jobs_offloaded(true); // run and charged here (`core::run_rebuild_jobs`)
        let now_ns = drives.iter().map(EmulatedDrive::now_ns).max().unwrap_or(0);
        let timed = drives.iter().any(|d| d.timing_params().is_some());
        let core = timed.then(|| Core::new(CpuCosts::calibrated(config.level), now_ns, geometry.block_size_bytes));
        let drives_count = drives.len();
        let mut sim = Simulator {
            engine,
            drives,
            now_ns,
            responses: Vec::new(),
            delayed: BTreeMap::new(),
            delayed_seq: 0,
            recovery_report,
            checkpoints,
            running_checkpoint_during_rebuild: false,
            block_size_bytes: geometry.block_size_bytes,
            traffic: vec![DriveTraffic::default(); drives_count],
            core,
        };
        sim.engine.tick(now_ns);
        sim.dispatch();
        Ok(Ok(sim))
    }
}
