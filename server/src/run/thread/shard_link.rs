//! What makes an engine thread one shard of an array of several (`shard` has what the
//! thread does with it).

use std::sync::Arc;

use zapraid_engine::shard::ShardMap;

use crate::drives::Drive;
use crate::run::record::SharedRecord;

/// What makes an engine thread one shard of several.
pub struct ShardLink {
    pub index: usize,
    pub map: ShardMap,
    pub record: Arc<SharedRecord>,
    /// Per drive, the part holding this shard's checkpoint area, numbered from the area's
    /// first zone (none when the array keeps no checkpoint).
    pub checkpoint_drives: Vec<Drive>,
    /// What the shard last reported: the drives its engine counts failed, and those it
    /// rebuilds.
    pub reported: (u64, u64),
}
