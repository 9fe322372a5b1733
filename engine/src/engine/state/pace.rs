//! Pacing of the drive rebuild (`Engine::set_rebuild_rate`): a token bucket that lets the
//! rebuild write at most `rate_bytes_per_s` to the new drive, so that user I/O keeps the
//! drives' bandwidth the rebuild leaves. Time is the engine's `now_ns` (from `submit`,
//! `tick` and `on_completion`): in simulation the pacing is as deterministic as the rest.
//!
//! Every write the rebuild makes to the new drive (header, chunk, footer piece) first takes
//! its bytes from the bucket; what cannot be taken waits, and the engine asks its driver
//! for a `tick` when the bucket will hold enough (`Engine::next_timer_ns`). The bucket
//! fills at the rate, up to `capacity_bytes` (the burst: a few chunks, and at least the
//! largest write), and starts full.
//!
//! Invariants: with a rate R, the bytes taken over any span of t ns are at most
//! `capacity_bytes + R * t / 1e9` (so are the bytes written to the new drive); every
//! write fits in the bucket (`capacity_bytes` >= the largest one), so a waiting write
//! always gets its turn; no rate (`None`) takes nothing and never waits, which is the
//! rebuild unpaced.

/// Nanoseconds per second: tokens are kept in bytes times this, so that a refill over a
/// whole number of nanoseconds is exact.
const NS_PER_S: u128 = 1_000_000_000;

/// The rebuild's token bucket. See the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct Pace {
    rate_bytes_per_s: Option<u64>,
    capacity_bytes: u64,
    /// Tokens, in bytes times `NS_PER_S`.
    tokens: u128,
    refilled_at_ns: u64,
    /// When the bucket holds enough for the write the rebuild waits to make, if it waits.
    wake_at_ns: Option<u64>,
}

impl Pace {
    /// An unpaced bucket that would hold at most `capacity_bytes` (at least 1).
    pub(crate) fn new(capacity_bytes: u64) -> Self {
        let capacity_bytes = capacity_bytes.max(1);
        Pace {
            rate_bytes_per_s: None,
            capacity_bytes,
            tokens: u128::from(capacity_bytes) * NS_PER_S,
            refilled_at_ns: 0,
            wake_at_ns: None,
        }
    }

    pub(crate) fn rate_bytes_per_s(&self) -> Option<u64> {
        self.rate_bytes_per_s
    }

    pub(crate) fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    /// Sets the rate from `now_ns` on (`None` or 0: unpaced). What accumulated at the old
    /// rate is kept; from unpaced, the bucket starts full.
    pub(crate) fn set_rate(&mut self, rate_bytes_per_s: Option<u64>, now_ns: u64) {
        let rate = rate_bytes_per_s.filter(|r| *r > 0);
        if self.rate_bytes_per_s.is_some() {
            self.refill(now_ns);
        } else {
            self.tokens = self.full();
        }
        self.refilled_at_ns = self.refilled_at_ns.max(now_ns);
        self.rate_bytes_per_s = rate;
        self.wake_at_ns = None;
    }

    fn full(&self) -> u128 {
        u128::from(self.capacity_bytes) * NS_PER_S
    }

    fn refill(&mut self, now_ns: u64) {
        let Some(rate) = self.rate_bytes_per_s else { return };
        if now_ns > self.refilled_at_ns {
            let gained = u128::from(now_ns - self.refilled_at_ns) * u128::from(rate);
            self.tokens = (self.tokens + gained).min(self.full());
            self.refilled_at_ns = now_ns;
        }
    }

    /// Takes `bytes` (at most the capacity is charged) if the bucket holds them at
    /// `now_ns`; otherwise notes when it will and refuses.
    pub(crate) fn take(&mut self, bytes: u64, now_ns: u64) -> bool {
        let Some(rate) = self.rate_bytes_per_s else { return true };
        self.refill(now_ns);
        let need = u128::from(bytes.min(self.capacity_bytes)) * NS_PER_S;
        if self.tokens >= need {
            self.tokens -= need;
            return true;
        }
        let wait_ns = (need - self.tokens).div_ceil(u128::from(rate));
        let at = u128::from(now_ns.max(self.refilled_at_ns)) + wait_ns;
        let at = u64::try_from(at).unwrap_or(u64::MAX);
        self.wake_at_ns = Some(self.wake_at_ns.map_or(at, |w| w.min(at)));
        false
    }

    /// Forgets when to wake (the rebuild looks again at what it waits for, and refuses
    /// anew what still cannot go).
    pub(crate) fn clear_wake(&mut self) {
        self.wake_at_ns = None;
    }

    /// When the rebuild wants a `tick`, if it waits for the bucket.
    pub(crate) fn wake_at_ns(&self) -> Option<u64> {
        self.wake_at_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpaced_takes_everything_at_once() {
        let mut pace = Pace::new(1000);
        for _ in 0..100 {
            assert!(pace.take(1_000_000, 0));
        }
        assert_eq!(pace.wake_at_ns(), None);
    }

    /// Over a long run of writes taken as soon as the bucket allows, the bytes taken by
    /// each moment are within the capacity plus the rate times the time; waiting writes
    /// are woken exactly when they fit.
    #[test]
    fn the_rate_holds_and_the_wake_time_is_exact() {
        const RATE: u64 = 3_000_000; // 3 MB/s
        const CAPACITY: u64 = 64 * 1024;
        const WRITE: u64 = 12 * 1024;
        let mut pace = Pace::new(CAPACITY);
        pace.set_rate(Some(RATE), 5);
        let (mut now, mut taken) = (5u64, 0u64);
        for _ in 0..10_000 {
            if pace.take(WRITE, now) {
                taken += WRITE;
            } else {
                let at = pace.wake_at_ns().expect("a refused take says when");
                assert!(at > now);
                // One nanosecond earlier is not enough; at the wake time it is.
                let mut early = pace.clone();
                assert!(!early.take(WRITE, at - 1));
                pace.clear_wake();
                now = at;
                assert!(pace.take(WRITE, now));
                taken += WRITE;
            }
            let allowed = u128::from(CAPACITY) * NS_PER_S + u128::from(now - 5) * u128::from(RATE);
            assert!(u128::from(taken) * NS_PER_S <= allowed, "{taken} B by {now} ns");
        }
        // Paced, not starved: the run took about rate x time.
        let expected = (now - 5) as f64 / 1e9 * RATE as f64;
        assert!(taken as f64 >= expected, "{taken} B in {now} ns");
    }

    #[test]
    fn a_write_larger_than_the_bucket_still_goes_and_the_rate_can_change() {
        let mut pace = Pace::new(100);
        pace.set_rate(Some(1_000_000_000), 0); // 1 byte per ns
        assert!(pace.take(500, 0), "charged at most the capacity");
        assert!(!pace.take(100, 10));
        assert_eq!(pace.wake_at_ns(), Some(100));
        pace.set_rate(None, 20);
        assert!(pace.take(10_000, 20));
        assert_eq!(pace.wake_at_ns(), None);
        pace.set_rate(Some(1_000_000_000), 30);
        assert!(pace.take(100, 30), "from unpaced the bucket starts full");
    }
}
