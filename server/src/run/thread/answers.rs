//! What the engine thread sends back: the engine's answers to their frontends, with the
//! array's counters and latency samples kept as they go (`answer`), and the array's status
//! (`snapshot`).
//!
//! Invariant: each frontend is woken once per batch of answers, after every answer of the
//! batch is on its channel.

use std::collections::VecDeque;
use std::sync::Arc;

use super::{EngineLoop, Kind};
use crate::run::message::ReplyTo;
use crate::run::status::{percentiles, push_sample, ArrayStatus};

impl EngineLoop {
    /// Sends the engine's answers to their frontends; returns how many.
    pub(super) fn answer(&mut self) -> usize {
        let mut n = 0;
        let mut to_wake: Vec<Arc<ReplyTo>> = Vec::new();
        while let Some(response) = self.engine.poll_response() {
            n += 1;
            let Some(p) = self.pending.remove(&response.id) else { continue };
            let micros = p.started.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
            // Bytes are every part's; a request split among shards counts once (its first part).
            let counted = u64::from(p.reply.counted);
            match p.kind {
                Kind::Read => {
                    self.status.reads += counted;
                    if let Ok(data) = &response.result {
                        self.status.bytes_read += data.len() as u64;
                    }
                    if p.reply.counted {
                        push_sample(&mut self.read_latencies, micros);
                    }
                }
                Kind::Write => {
                    self.status.writes += counted;
                    if p.reply.counted {
                        push_sample(&mut self.write_latencies, micros);
                    }
                }
                Kind::Flush => self.status.flushes += counted,
                Kind::Discard => self.status.discards += counted,
            }
            if let Err(e) = &response.result {
                self.status.errors += 1; // a part that failed fails its request: each counts
                tracing::warn!(error = %e, "request failed");
            }
            let result = match &self.shard {
                Some(link) => response.result.map_err(|e| link.map.array_error(link.index, e)),
                None => response.result,
            };
            if p.reply.tx.send((p.tag, result, response.checks)).is_ok()
                && !to_wake.iter().any(|r| Arc::ptr_eq(r, &p.reply))
            {
                to_wake.push(p.reply);
            }
        }
        // One wake-up per frontend for the whole batch.
        for reply in to_wake {
            (reply.wake)();
        }
        n
    }

    pub(super) fn snapshot(&self) -> ArrayStatus {
        let samples = |s: &VecDeque<u32>| s.iter().copied().collect::<Vec<u32>>();
        ArrayStatus {
            engine: self.engine.status(),
            read_latency_us: percentiles(samples(&self.read_latencies)),
            write_latency_us: percentiles(samples(&self.write_latencies)),
            latency_samples_us: match self.shard {
                Some(_) => (samples(&self.read_latencies), samples(&self.write_latencies)),
                None => Default::default(),
            },
            uptime_s: self.started.elapsed().as_secs_f64(),
            stopping: self.stopping,
            rebuild_elapsed_s: self.rebuild_started.map(|t| t.elapsed().as_secs_f64()),
            scrub_elapsed_s: self.scrub_started.map(|t| t.elapsed().as_secs_f64()),
            ..self.status.clone()
        }
    }
}
