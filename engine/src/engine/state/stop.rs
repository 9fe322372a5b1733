//! Where a clean stop or a running checkpoint stands (`StopState`). Stopping is `stop`'s.

/// Progress of a clean stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::engine) enum StopState {
    Running,
    /// No new writes; waiting for stripes, flushes and garbage collection to finish.
    Draining,
    /// Stop footers in flight: this many (one per open segment and working drive).
    WritingFooters(usize),
    Stopped,
    /// A checkpoint taken while running (`checkpoint`): new requests are held, and the
    /// engine drains as for a stop (stripes padded and written, the table written back),
    /// but open segments stay open.
    Checkpointing,
    /// Drained for a running checkpoint: nothing in flight until the driver has written
    /// the image and said so (`Engine::checkpoint_written`).
    CheckpointReady,
}

impl StopState {
    /// Draining, for a stop or a running checkpoint: nothing new starts, what was taken
    /// is written.
    pub(in crate::engine) fn is_draining(self) -> bool {
        matches!(self, StopState::Draining | StopState::Checkpointing)
    }
}
