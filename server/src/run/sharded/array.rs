//! The shards' threads, started and joined, and an array's threads of either kind.

use std::sync::Arc;

use zapraid_engine::layout::RaidLevel;
use zapraid_engine::shard::ShardMap;
use zapraid_engine::Engine;
use zapraid_zns::ReservedZones;

use super::parts::PartLayout;
use super::route::Shards;
use crate::drives::Drive;
use crate::error::Result;
use crate::run::message::{EngineSender, Way};
use crate::run::record::{FailureRecord, SharedRecord};
use crate::run::thread::hosted::EngineLease;
use crate::run::thread::{EngineThread, ShardLink};

/// One shard as started: its recovered engine, its parts of the drives (its zones,
/// numbered from its first), the parts holding its checkpoint area, and its record
/// (the checkpoint place its own).
pub struct ShardStart {
    pub engine: Engine,
    pub drives: Vec<ReservedZones<Drive>>,
    pub checkpoint_drives: Vec<Drive>,
    pub record: FailureRecord,
}

/// The shards' threads, running.
pub struct ShardedArray {
    pub tx: EngineSender,
    threads: Vec<EngineThread>,
}

impl ShardedArray {
    /// Starts a thread per shard of `map`, in order.
    pub fn spawn(
        map: ShardMap,
        layout: PartLayout,
        level: RaidLevel,
        shards: Vec<ShardStart>,
        record: Arc<SharedRecord>,
        block_size_bytes: u32,
    ) -> Result<Self> {
        debug_assert_eq!(shards.len(), map.shards());
        let mut threads = Vec::new();
        for (index, shard) in shards.into_iter().enumerate() {
            let drives = shard.drives;
            let failed = (0..drives.len()).filter(|d| shard.engine.is_failed(*d)).fold(0u64, |m, d| m | 1 << d);
            let reported = (failed, shard.engine.rebuild_status().map_or(0, |r| 1u64 << r.drive));
            let link =
                ShardLink { index, map, record: record.clone(), checkpoint_drives: shard.checkpoint_drives, reported };
            threads.push(EngineThread::spawn_shard(shard.engine, drives, block_size_bytes, shard.record, link)?);
        }
        let senders = threads.iter().map(EngineThread::own_sender).collect();
        let shards = Shards { map, layout, level, threads: senders, record };
        Ok(ShardedArray { tx: EngineSender(Way::Shards(Arc::new(shards))), threads })
    }

    /// Waits for every shard's thread to end (after `Message::Stop`); the first error.
    pub fn join(self) -> Result<()> {
        drop(self.tx);
        let mut first = Ok(());
        for thread in self.threads {
            let result = thread.join();
            if first.is_ok() {
                first = result;
            }
        }
        first
    }
}

/// A running array's engine threads: one, or one per shard.
pub enum ArrayThreads {
    One(EngineThread),
    Shards(ShardedArray),
}

impl ArrayThreads {
    /// The way to the array's threads.
    pub fn tx(&self) -> &EngineSender {
        match self {
            ArrayThreads::One(thread) => &thread.tx,
            ArrayThreads::Shards(array) => &array.tx,
        }
    }

    /// Ways to run each thread's engine elsewhere, in shard order.
    pub fn leases(&self) -> Vec<EngineLease> {
        match self {
            ArrayThreads::One(thread) => vec![thread.lease()],
            ArrayThreads::Shards(array) => array.threads.iter().map(EngineThread::lease).collect(),
        }
    }

    /// Waits for the threads to end (after `Message::Stop`).
    pub fn join(self) -> Result<()> {
        match self {
            ArrayThreads::One(thread) => thread.join(),
            ArrayThreads::Shards(array) => array.join(),
        }
    }
}
