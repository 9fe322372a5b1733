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
    /// Requests answered with an error (a request split among shards: each part that
    /// failed).
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
    /// An array of several engine shards: each shard's engine status (`engine` is their
    /// sum); empty for one engine.
    pub shards: Vec<Status>,
    /// One shard's newest request latencies in microseconds (reads, writes), from which
    /// the array's percentiles are taken over every shard; empty otherwise.
    pub latency_samples_us: (Vec<u32>, Vec<u32>),
}

/// Latencies kept for percentiles: the newest this many requests of each kind.
const LATENCY_SAMPLES: usize = 65_536;

/// Keeps `micros` among the newest `LATENCY_SAMPLES` latencies.
pub fn push_sample(samples: &mut std::collections::VecDeque<u32>, micros: u32) {
    if samples.len() == LATENCY_SAMPLES {
        samples.pop_front();
    }
    samples.push_back(micros);
}

/// p50, p99, p99.9 of `samples` (zeros when there are none).
pub fn percentiles(mut samples: Vec<u32>) -> [f64; 3] {
    if samples.is_empty() {
        return [0.0; 3];
    }
    samples.sort_unstable();
    let at = |q: f64| f64::from(samples[((samples.len() - 1) as f64 * q).round() as usize]);
    [at(0.5), at(0.99), at(0.999)]
}
