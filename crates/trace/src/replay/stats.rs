//! What a replay measures, in the simulator's virtual time: latency histograms (HDR, in
//! nanoseconds, 3 significant digits) of all requests, reads and writes; bytes and counts
//! per direction; and a timeline of completions per interval. The timeline holds at most
//! `MAX_TIMELINE_BUCKETS` buckets: past that, neighbours merge and the interval doubles,
//! so memory stays bounded however long the trace runs.

use hdrhistogram::Histogram;

use crate::record::Op;

/// Timeline buckets kept before they merge pairwise.
pub const MAX_TIMELINE_BUCKETS: usize = 4096;
const NS_PER_S: u64 = 1_000_000_000;
const SIGNIFICANT_DIGITS: u8 = 3;

/// Latency percentiles of a set of requests, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

fn summary(h: &Histogram<u64>) -> LatencySummary {
    if h.is_empty() {
        return LatencySummary::default();
    }
    let us = |ns: u64| ns as f64 / 1_000.0;
    LatencySummary {
        count: h.len(),
        mean_us: h.mean() / 1_000.0,
        p50_us: us(h.value_at_quantile(0.50)),
        p95_us: us(h.value_at_quantile(0.95)),
        p99_us: us(h.value_at_quantile(0.99)),
        p999_us: us(h.value_at_quantile(0.999)),
        max_us: us(h.max()),
    }
}

/// Completions in one interval of the timeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimelineBucket {
    pub reads: u64,
    pub writes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub latency_sum_ns: u64,
    pub latency_max_ns: u64,
}

impl TimelineBucket {
    fn merge(&mut self, other: &TimelineBucket) {
        self.reads += other.reads;
        self.writes += other.writes;
        self.read_bytes += other.read_bytes;
        self.write_bytes += other.write_bytes;
        self.latency_sum_ns += other.latency_sum_ns;
        self.latency_max_ns = self.latency_max_ns.max(other.latency_max_ns);
    }

    pub fn requests(&self) -> u64 {
        self.reads + self.writes
    }

    pub fn mean_latency_us(&self) -> f64 {
        if self.requests() == 0 {
            0.0
        } else {
            self.latency_sum_ns as f64 / self.requests() as f64 / 1_000.0
        }
    }
}

/// Collects completions.
pub struct Recorder {
    all: Histogram<u64>,
    reads: Histogram<u64>,
    writes: Histogram<u64>,
    pub read_bytes: u64,
    pub write_bytes: u64,
    start_ns: u64,
    interval_ns: u64,
    timeline: Vec<TimelineBucket>,
}

impl Recorder {
    pub fn new(start_ns: u64) -> Self {
        let histogram = || Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits are valid");
        Recorder {
            all: histogram(),
            reads: histogram(),
            writes: histogram(),
            read_bytes: 0,
            write_bytes: 0,
            start_ns,
            interval_ns: NS_PER_S,
            timeline: Vec::new(),
        }
    }

    /// A request of `op` and `bytes` issued (or due) at `issued_ns` completed at `done_ns`.
    pub fn complete(&mut self, op: Op, bytes: u64, issued_ns: u64, done_ns: u64) {
        let latency = done_ns.saturating_sub(issued_ns).max(1);
        // Auto-resizing histograms take any u64: recording cannot fail.
        let _ = self.all.record(latency);
        let mut bucket = TimelineBucket { latency_sum_ns: latency, latency_max_ns: latency, ..Default::default() };
        match op {
            Op::Read => {
                let _ = self.reads.record(latency);
                self.read_bytes += bytes;
                bucket.reads = 1;
                bucket.read_bytes = bytes;
            }
            Op::Write => {
                let _ = self.writes.record(latency);
                self.write_bytes += bytes;
                bucket.writes = 1;
                bucket.write_bytes = bytes;
            }
        }
        let mut index = (done_ns.saturating_sub(self.start_ns) / self.interval_ns) as usize;
        while index >= MAX_TIMELINE_BUCKETS {
            self.coarsen();
            index = (done_ns.saturating_sub(self.start_ns) / self.interval_ns) as usize;
        }
        if self.timeline.len() <= index {
            self.timeline.resize(index + 1, TimelineBucket::default());
        }
        self.timeline[index].merge(&bucket);
    }

    /// Merges neighbouring buckets: the interval doubles.
    fn coarsen(&mut self) {
        let merged = self
            .timeline
            .chunks(2)
            .map(|pair| {
                let mut b = pair[0];
                if let Some(second) = pair.get(1) {
                    b.merge(second);
                }
                b
            })
            .collect();
        self.timeline = merged;
        self.interval_ns *= 2;
    }

    pub fn latency(&self) -> LatencySummary {
        summary(&self.all)
    }

    pub fn read_latency(&self) -> LatencySummary {
        summary(&self.reads)
    }

    pub fn write_latency(&self) -> LatencySummary {
        summary(&self.writes)
    }

    pub fn timeline(&self) -> (u64, Vec<TimelineBucket>) {
        (self.interval_ns, self.timeline.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_timeline() {
        let mut r = Recorder::new(0);
        for i in 1..=1000u64 {
            r.complete(Op::Write, 4096, i * 1_000_000, i * 1_000_000 + i * 1_000);
        }
        let l = r.latency();
        assert_eq!(l.count, 1000);
        assert!((l.p50_us - 500.0).abs() < 1.0, "{l:?}");
        assert!((l.p999_us - 999.0).abs() < 1.0, "{l:?}");
        let (interval, timeline) = r.timeline();
        assert_eq!(interval, NS_PER_S);
        assert_eq!(timeline.iter().map(TimelineBucket::requests).sum::<u64>(), 1000);
        assert_eq!(r.read_latency().count, 0);
    }

    #[test]
    fn a_long_timeline_coarsens() {
        let mut r = Recorder::new(0);
        let last_s = 3 * MAX_TIMELINE_BUCKETS as u64;
        for s in 0..=last_s {
            r.complete(Op::Read, 512, s * NS_PER_S, s * NS_PER_S + 10);
        }
        let (interval, timeline) = r.timeline();
        assert_eq!(interval, 4 * NS_PER_S);
        assert!(timeline.len() <= MAX_TIMELINE_BUCKETS);
        assert_eq!(timeline.iter().map(TimelineBucket::requests).sum::<u64>(), last_s + 1);
    }
}
