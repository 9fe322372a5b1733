//! What the criterion benches share: one quick configuration (so that `cargo bench` as a
//! whole takes minutes on two cores) and a deterministic address sequence.

use std::time::Duration;

use criterion::Criterion;

/// The block size the benches use (the ZN540's, and the engine's usual chunk).
#[allow(dead_code)] // not every bench works in blocks
pub const BLOCK_BYTES: usize = 4096;

const SAMPLE_SIZE: usize = 20;
const WARM_UP: Duration = Duration::from_millis(300);
const MEASUREMENT: Duration = Duration::from_millis(800);

/// Criterion with few, short samples and no plots (drawing them takes longer than the
/// measurements): figures only.
pub fn quick() -> Criterion {
    Criterion::default().sample_size(SAMPLE_SIZE).warm_up_time(WARM_UP).measurement_time(MEASUREMENT).without_plots()
}

/// `count` pseudo-random numbers below `bound` (xorshift64, fixed seed): addresses computed
/// before the timed loop, so the generator is not measured.
#[allow(dead_code)] // not every bench needs addresses
pub fn addresses(count: usize, bound: u64) -> Vec<u64> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        })
        .collect()
}
