//! Running checkpoints' state (`RunningCheckpoints`): requests held while one drains, what
//! was written since the last, the full checkpoint incremental ones build on
//! (`CheckpointBase`), and the one handed out until the driver says it was written
//! (`PendingCheckpoint`). Taking them is `running_checkpoint`'s and `checkpoint_base`'s.

use std::collections::{HashMap, VecDeque};

use crate::engine::request::{Request, RequestId};

/// The full checkpoint written last, that incremental ones build on.
pub(in crate::engine) struct CheckpointBase {
    pub(in crate::engine) generation: u64,
    /// The drives failed when it was taken: images build on it only while the same are
    /// (tables place the chunks of a failed drive; a start also refuses a base of another
    /// superblock generation, and the engine forgets its base when a drive fails).
    pub(in crate::engine) failed: Vec<bool>,
    /// Zone -> (sequence, table bytes) of each segment whose stripe table it holds.
    pub(in crate::engine) tables: HashMap<u32, (u64, u64)>,
    /// Bytes of its image (one copy).
    pub(in crate::engine) image_bytes: u64,
    /// Bytes of the incremental images written on it since (one copy each).
    pub(in crate::engine) incremental_bytes: u64,
    /// Its tables, to check that those left out later are unchanged.
    #[cfg(debug_assertions)]
    pub(in crate::engine) encoded: HashMap<u32, Vec<u8>>,
}

/// What a checkpoint handed out would make of the engine's base once written.
pub(in crate::engine) enum PendingCheckpoint {
    Full(CheckpointBase),
    Incremental { image_bytes: u64 },
}

/// Running checkpoints' state in the engine.
#[derive(Default)]
pub(in crate::engine) struct RunningCheckpoints {
    /// Requests that came while a running checkpoint drained, in order: taken once the
    /// checkpoint is written (or abandoned).
    pub(in crate::engine) held: VecDeque<(RequestId, Request)>,
    /// A clean stop asked for while one drained, after this many held requests: it begins
    /// once the checkpoint is done, after them (those held after it are then refused or
    /// taken as a stop takes them).
    pub(in crate::engine) stop_after: Option<usize>,
    /// Segments opened since the last checkpoint (or the start).
    pub(in crate::engine) segments_opened: u64,
    /// Blocks requests wrote since the last checkpoint (or the start).
    pub(in crate::engine) blocks_written: u64,
    /// Running checkpoints written, and those abandoned (no room, or not written).
    pub(in crate::engine) taken: u64,
    pub(in crate::engine) abandoned: u64,
    /// Of those written, the incremental ones, and the bytes of all their images (a copy).
    pub(in crate::engine) incremental: u64,
    pub(in crate::engine) image_bytes_written: u64,
    /// Bytes of images the reset waiting for the checkpoint under way pays for (not taken
    /// from the credit).
    pub(in crate::engine) funded_bytes: u64,
    /// Bytes of images paid for by earlier writes and not spent (`checkpoint_base`).
    pub(in crate::engine) credit_bytes: u64,
    /// The full checkpoint written last, that incremental ones build on.
    pub(in crate::engine) base: Option<CheckpointBase>,
    /// The checkpoint handed out last, until the driver says whether it was written.
    pub(in crate::engine) pending: Option<PendingCheckpoint>,
}
