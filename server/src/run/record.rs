//! The superblock record of a running array: which drives it records failed and being
//! rebuilt, as generations appended to zone 0 of every live drive (`records::superblock`).
//!
//! An array of one engine thread keeps its `FailureRecord` in that thread, which writes
//! the generations itself (`thread::record`). An array of S engine shards has one record
//! for all of them (`SharedRecord`): each shard reports the drives its engine counts failed
//! and the drive it is rebuilding; the record writes a generation when their union
//! changes, through parts of the drives that hold only zone 0 (no shard's commands share
//! them), and every shard fails the drives another counts failed (`failed`), so a failure
//! is seen by every shard and recorded once.
//!
//! Invariants: a generation is on the drives before the report that caused it returns
//! (a shard answers nothing that depends on a failure before); a drive stays recorded
//! being rebuilt (and failed) until every shard has reported its rebuild ended.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crossbeam_channel::Sender;
use zapraid_engine::format::ArraySuperblock;
use zapraid_zns::{execute, Command, Geometry};

use crate::assemble::assembly::Assembled;
use crate::drives::Drive;
use crate::records::checkpoint::CheckpointPlace;
use crate::records::superblock::{superblock_writes, SUPERBLOCK_COPIES};

/// Where the engine thread records drive failures: a new superblock generation (every
/// copy) appended to zone 0 of every live drive, before any answer that depends on the
/// failure is given (a degraded write is acknowledged only once the failure is on the
/// drives, so a restart knows the failed drive missed it).
#[derive(Clone)]
pub struct FailureRecord {
    pub superblock: ArraySuperblock,
    /// Per drive, the raw LBA of the next free block in zone 0.
    pub next_lba: Vec<u64>,
    /// Blocks zone 0 can take.
    pub zone_capacity_blocks: u64,
    /// Where a clean stop leaves the array's checkpoint, if it keeps one.
    pub checkpoint: Option<CheckpointPlace>,
}

impl FailureRecord {
    /// What the engine thread of an assembled (and recovered) array records, and where.
    pub fn of(assembled: &Assembled) -> Self {
        FailureRecord {
            superblock: assembled.superblock,
            next_lba: assembled.superblock_next_lba.clone(),
            zone_capacity_blocks: assembled.geometry.zone_capacity_blocks,
            checkpoint: assembled.checkpoint,
        }
    }

    /// The next generation, naming the drives `failed`, `rebuilding` and `spared` (in
    /// distributed spare space), and the writes that put it on each drive not in `skipped`
    /// (every copy, in order, at zone 0's write pointer, which moves past them). A drive
    /// whose zone 0 is full is left out, and said.
    pub fn next_generation(
        &mut self,
        drives: RecordedDrives,
        skipped: u64,
        raw: &Geometry,
    ) -> (ArraySuperblock, Vec<(usize, VecDeque<Command>)>) {
        let mut sb = self.superblock;
        sb.generation = (sb.generation.get() + 1).into();
        sb.failed_drives = drives.failed.into();
        sb.rebuilding_drives = drives.rebuilding.into();
        sb.spared_drives = drives.spared.into();
        let sb = sb.seal();
        let mut writes = Vec::new();
        for i in 0..self.next_lba.len() {
            if skipped >> i & 1 == 1 {
                continue;
            }
            let lba = self.next_lba[i];
            if lba + SUPERBLOCK_COPIES > self.zone_capacity_blocks {
                tracing::error!(drive = i, "zone 0 is full: cannot record the failed drives on it");
                continue;
            }
            self.next_lba[i] += SUPERBLOCK_COPIES;
            let mut own = sb;
            own.drive_index = (i as u32).into();
            writes.push((i, superblock_writes(&own.seal(), raw, lba).into()));
        }
        (sb, writes)
    }
}

/// What a superblock generation records of the drives, a bit per drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordedDrives {
    pub failed: u64,
    /// Being rebuilt onto a new drive (each failed too).
    pub rebuilding: u64,
    /// A declustered array's failed drives rebuilt into distributed spare space.
    pub spared: u64,
}

impl RecordedDrives {
    /// What `sb` records.
    pub fn of(sb: &ArraySuperblock) -> Self {
        RecordedDrives {
            failed: sb.failed_drives.get(),
            rebuilding: sb.rebuilding_drives.get(),
            spared: sb.spared_drives.get(),
        }
    }
}

/// The record of an array of engine shards, shared by their threads.
pub struct SharedRecord {
    state: Mutex<SharedState>,
    /// Drives some shard's engine counts failed (not a drive being rebuilt): every shard
    /// fails them too. Read each turn without the lock.
    failed: AtomicU64,
    /// The generation in force.
    generation: AtomicU64,
}

struct SharedState {
    record: FailureRecord,
    /// Per drive, the part of it holding zone 0 (raw numbering).
    zone0: Vec<Drive>,
    /// Per shard, what it last reported: the drives its engine counts failed, and the
    /// drives it is rebuilding (set for every shard when a replace starts one).
    shard_failed: Vec<u64>,
    shard_rebuilding: Vec<u64>,
    /// Per shard, rebuilds recorded for it that it has not reported started yet (nor
    /// given up): until it does, what it reports cannot drop them, nor count their drive
    /// failed.
    pending_rebuilds: Vec<u64>,
    watchers: Vec<Sender<()>>,
}

impl SharedRecord {
    /// The record of an array of `shards` shards, as assembled (`record`, its checkpoint
    /// place unused: each shard keeps its own), writing through `zone0`; `rebuilding`: a
    /// drive whose rebuild every shard resumes.
    pub fn new(record: FailureRecord, zone0: Vec<Drive>, shards: usize, rebuilding: u64) -> Self {
        debug_assert_eq!(zone0.len(), record.next_lba.len());
        let failed = record.superblock.failed_drives.get() & !rebuilding;
        let generation = record.superblock.generation.get();
        SharedRecord {
            state: Mutex::new(SharedState {
                record,
                zone0,
                shard_failed: vec![failed; shards],
                shard_rebuilding: vec![rebuilding; shards],
                pending_rebuilds: vec![0; shards],
                watchers: Vec::new(),
            }),
            failed: AtomicU64::new(failed),
            generation: AtomicU64::new(generation),
        }
    }

    /// Drives some shard counts failed.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Acquire)
    }

    /// The superblock generation on the drives.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The superblock in force.
    pub fn superblock(&self) -> ArraySuperblock {
        self.lock().record.superblock
    }

    /// Shard `shard`'s engine counts `failed` failed and it rebuilds `rebuilding`: records
    /// the union of every shard's if it changed (on the drives when this returns).
    /// Returns the superblock in force.
    pub fn report(&self, shard: usize, failed: u64, rebuilding: u64) -> ArraySuperblock {
        let mut state = self.lock();
        state.pending_rebuilds[shard] &= !rebuilding; // started
        let pending = state.pending_rebuilds[shard];
        state.shard_failed[shard] = failed & !pending;
        state.shard_rebuilding[shard] = rebuilding | pending;
        self.write_if_changed(&mut state);
        state.record.superblock
    }

    /// Records drive `drive` being rebuilt onto a new drive whose zone 0 is `zone0` (every
    /// zone of it reset), for every shard (each to report its rebuild started, or
    /// `cancel_rebuild`), before any shard writes to it. The new drive gets the
    /// generation too. Refused unless the drive is failed and no rebuild is recorded.
    pub fn start_rebuild(&self, drive: usize, zone0: Drive) -> crate::error::Result<()> {
        let mut state = self.lock();
        let bit = 1u64 << drive;
        let sb = state.record.superblock;
        if drive >= state.zone0.len() {
            return Err(crate::error::Error::NoSuchDrive { drive, drives: state.zone0.len() });
        }
        if let Some(running) = (0..state.zone0.len()).find(|d| sb.rebuilding_drives.get() >> d & 1 == 1) {
            return Err(crate::error::Error::Config {
                reason: format!("drive {running} is being rebuilt: one rebuild runs at a time (see zapraid status)"),
            });
        }
        if sb.failed_drives.get() & bit == 0 && self.failed() & bit == 0 {
            return Err(crate::error::Error::Config {
                reason: format!(
                    "drive {drive} has not failed: only a failed drive is replaced (zapraid fail marks one)"
                ),
            });
        }
        state.zone0[drive] = zone0;
        state.record.next_lba[drive] = 0;
        for shard in 0..state.shard_failed.len() {
            state.pending_rebuilds[shard] |= bit;
            state.shard_rebuilding[shard] |= bit;
            state.shard_failed[shard] &= !bit;
        }
        self.write_if_changed(&mut state);
        Ok(())
    }

    /// Shard `shard` did not start the rebuild `start_rebuild` recorded for it: it reports
    /// what it does now.
    pub fn cancel_rebuild(&self, shard: usize, drive: usize) {
        let mut state = self.lock();
        state.pending_rebuilds[shard] &= !(1u64 << drive);
    }

    /// Asks to be told (a `()`) of every generation recorded from now on.
    pub fn watch(&self, tx: Sender<()>) {
        self.lock().watchers.push(tx);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SharedState> {
        // A shard thread that panicked holding it left a record whose generations were
        // each written whole or not at all: still the record.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Writes a generation when the union of the shards' reports differs from the one in
    /// force; waits for it.
    fn write_if_changed(&self, state: &mut SharedState) {
        let engine_failed = state.shard_failed.iter().fold(0, |a, b| a | b);
        let rebuilding = state.shard_rebuilding.iter().fold(0, |a, b| a | b);
        self.failed.store(engine_failed, Ordering::Release);
        let failed = engine_failed | rebuilding;
        let sb = &state.record.superblock;
        if sb.failed_drives.get() == failed && sb.rebuilding_drives.get() == rebuilding {
            return;
        }
        let Some(raw) = state.zone0.first().map(|d| d.geometry()) else { return };
        // Not to a failed drive, but to a new drive being rebuilt (its first superblock says so).
        let skipped = engine_failed & !rebuilding;
        let (sb, writes) =
            state.record.next_generation(RecordedDrives { failed, rebuilding, spared: 0 }, skipped, &raw);
        for (drive, commands) in writes {
            for command in commands {
                if let Err(e) = execute(state.zone0[drive].as_mut(), command).result {
                    tracing::error!(drive, error = %e, "recording the failed drives failed");
                    break;
                }
            }
        }
        tracing::warn!(
            generation = sb.generation.get(),
            failed_drives = failed,
            rebuilding_drives = rebuilding,
            "failed and rebuilding drives recorded in the superblock"
        );
        state.record.superblock = sb;
        self.generation.store(sb.generation.get(), Ordering::Release);
        state.watchers.retain(|w| !matches!(w.try_send(()), Err(crossbeam_channel::TrySendError::Disconnected(_))));
    }
}
