//! What the engine thread says of a running array when asked (`Message::Status`): the
//! engine's own status, and the thread's counts and latencies of the requests it served.
//! `zapraid status` shows it (`control::status`).

use zapraid_engine::Status;

/// What `zapraid status` shows of a running array.
#[derive(Clone, Debug, Default)]
pub struct ArrayStatus {
    pub engine: Status,
    pub drives: usize,
    pub logical_blocks: u64,
    pub block_size_bytes: u32,
    pub reads: u64,
    pub writes: u64,
    pub flushes: u64,
    pub discards: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub errors: u64,
    /// p50, p99, p99.9 in microseconds, over the newest requests.
    pub read_latency_us: [f64; 3],
    pub write_latency_us: [f64; 3],
    pub uptime_s: f64,
    pub stopping: bool,
    /// Seconds since the running rebuild started (on this server), if one runs.
    pub rebuild_elapsed_s: Option<f64>,
    /// Seconds since the running scrub started, if one runs.
    pub scrub_elapsed_s: Option<f64>,
}
