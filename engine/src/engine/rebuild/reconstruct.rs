//! A chunk of the drive being rebuilt, reconstructed from its stripe's other chunks as read
//! (`rebuild`): once every source of a chunk position is in, the engine makes a job of
//! them (`job`), runs it at once or, with the jobs offloaded
//! (`Engine::set_rebuild_jobs_offloaded`), hands it to the driver to run on another core
//! (`Engine::poll_rebuild_job`), and takes its result (`Engine::on_rebuild_jobs_done`): the
//! chunk's data and metadata to write, and its footer entries made from the fields the
//! parity gave back. A stripe that lost more than parity covers gives a chunk whose
//! metadata does not decode (`unrecoverable_chunk`).
//!
//! A driver may run the jobs at once or on other threads, and give their results back
//! later, between other events, in any order: a segment with jobs out waits for their
//! results (the next event that moves it on), as it waits for its commands.
//!
//! Invariants: a job's result counts only for the rebuild and segment it was made for,
//! still under way at the step that made it (else it is dropped, buffers and all); a
//! position's job is out at most once, between its sources' last read and its chunk's
//! place in `ready`.

use std::sync::Arc;

use super::job::{JobShape, RebuildJob, RebuildJobDone, CHECKED_BYTES_PER_BLOCK};
use crate::engine::machine::Engine;
use crate::engine::state::rebuild::{ChunkSources, JobSource, Step};
use crate::engine::state::stop::StopState;
use crate::format::{decode_fields, FooterEntry, FIELD_BYTES};

/// Segments whose jobs' results one call takes apart (`on_rebuild_jobs_done`); more, and
/// the next event moves on every segment.
const MAX_ZONES_PER_BATCH: usize = 64;

impl Engine {
    /// Whether the rebuild's jobs are handed to the driver (`poll_rebuild_job`) rather than
    /// run by the engine as their sources come in. Off unless a driver says so.
    pub fn set_rebuild_jobs_offloaded(&mut self, offloaded: bool) {
        self.rebuild_jobs_offloaded = offloaded;
    }

    /// Jobs the driver took and has not given back.
    pub fn rebuild_jobs_out(&self) -> usize {
        self.rebuild_jobs_out
    }

    /// The next rebuild job to run, while the jobs are offloaded: the driver runs it
    /// (`RebuildJob::run`, on any thread) and gives its result to `on_rebuild_jobs_done`,
    /// now or later. A driver takes every job there is after each event it hands the
    /// engine (as it takes its commands), before it gives any result back.
    pub fn poll_rebuild_job(&mut self) -> Option<RebuildJob> {
        let job = self.rebuild_jobs.pop_front()?;
        self.rebuild_jobs_out += 1;
        Some(job)
    }

    /// The results of rebuild jobs (as many as the driver has, in one call): the chunks go
    /// to be written. Only their segments can move on for them, and only by the steps a
    /// ready chunk allows (its write, the reads the window then lets out, the footer after
    /// the last chunk), so those are all that is taken (`advance` does the same for a
    /// segment whose command completed); nothing else changed, so nothing else is looked
    /// at: a whole pass of the engine per batch of jobs cost a sixth of the rebuild's CPU.
    pub fn on_rebuild_jobs_done(&mut self, done: impl IntoIterator<Item = RebuildJobDone>, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
        debug_assert!(self.rebuild_jobs.is_empty(), "jobs are handed out before their results come back");
        let mut zones: [u32; MAX_ZONES_PER_BATCH] = [0; MAX_ZONES_PER_BATCH];
        let (mut count, mut all) = (0, false);
        for done in done {
            debug_assert!(self.rebuild_jobs_out > 0, "a job's result the driver did not take");
            self.rebuild_jobs_out = self.rebuild_jobs_out.saturating_sub(1);
            let zone = done.zone;
            if self.take_rebuild_job_done(done) && !zones[..count].contains(&zone) {
                match zones.get_mut(count) {
                    Some(slot) => (*slot, count) = (zone, count + 1),
                    None => all = true,
                }
            }
        }
        if self.stop != StopState::Running {
            // A stop or a checkpoint draining lets no step start: the next event moves on
            // every segment, as `advance` does then.
            if let Some(r) = self.drive_rebuild.as_mut() {
                r.advance_all = true;
            }
            return;
        }
        let every: Vec<u32>; // more segments than kept apart: all of them
        let zones = match all {
            false => &zones[..count],
            true => {
                every = self.drive_rebuild.as_ref().map_or_else(Vec::new, |r| r.zones.keys().copied().collect());
                &every
            }
        };
        for &zone in zones {
            if !self.is_being_rebuilt(zone) {
                continue;
            }
            self.write_ready_chunks(zone);
            self.issue_rebuild_reads(zone);
            self.write_rebuild_footer(zone);
        }
    }

    /// Every source of the chunk position is in: its job is made, and run now unless the
    /// jobs are offloaded.
    pub(super) fn reconstruct_chunk(&mut self, zone: u32, position: u64, sources: ChunkSources) {
        let job = self.rebuild_job(zone, position, sources);
        if self.rebuild_jobs_offloaded {
            self.rebuild_jobs.push_back(job);
        } else {
            let done = job.run();
            self.take_rebuild_job_done(done);
        }
    }

    /// The job of a chunk position whose sources are in: the sources by chunk of the
    /// stripe, and pooled buffers for what it fills.
    fn rebuild_job(&mut self, zone: u32, position: u64, sources: ChunkSources) -> RebuildJob {
        let drive = self.rebuild_lane(zone);
        let seg = self.seg(zone);
        let (layout, sequence) = (seg.layout, seg.sequence);
        let (cb, bs, ms) = (layout.chunk_blocks as usize, self.block_bytes(), self.meta_bytes());
        let number = sources.stripe_number;
        let mut by_chunk: Vec<Option<JobSource>> = vec![None; layout.drives()];
        for (source, shard) in sources.shards.into_iter().enumerate() {
            if let Some(shard) = shard {
                by_chunk[layout.chunk_on(number, source)] = Some(shard);
            }
        }
        let shape = JobShape {
            chunks: layout.drives(),
            data_chunks: layout.data_chunks,
            lost: layout.chunk_on(number, drive),
            chunk_blocks: cb,
            block_bytes: bs,
            meta_bytes: ms,
            sequence,
            zero_block_crc: self.zero_block_crc,
        };
        debug_assert!(by_chunk[shape.lost].is_none(), "the chunk to rebuild is not a source");
        let read = by_chunk.iter().flatten().count();
        let pool = self.rebuild_buffers();
        let checked = (0..read).map(|_| pool.take(cb * CHECKED_BYTES_PER_BLOCK)).collect();
        RebuildJob {
            rebuild: self.rebuild_number(),
            zone,
            position,
            shape,
            codec: Arc::clone(&self.codec),
            sources: by_chunk,
            data: self.rebuild_buffers().take(cb * bs),
            fields: self.rebuild_buffers().take(cb * FIELD_BYTES),
            metadata: self.rebuild_buffers().take(cb * ms),
            checked,
        }
    }

    /// Takes a job's result: the rebuilt chunk waits for its write, with its footer entries
    /// made; a chunk the stripe cannot give back is written as one no read takes. Whether
    /// it counted (its rebuild and segment still under way).
    fn take_rebuild_job_done(&mut self, done: RebuildJobDone) -> bool {
        let RebuildJobDone { rebuild, zone, position, rebuilt, spent, reads } = done;
        let current = !self.rebuild_stopped(rebuild)
            && self.is_being_rebuilt(zone)
            && self.zone_rebuild(zone).step == Step::Chunks
            && position >= self.zone_rebuild(zone).next_write;
        if !current {
            return false; // its buffers go with it: the pool they came from may be gone
        }
        for buffer in spent {
            self.rebuild_buffers().give(buffer);
        }
        for read in reads {
            self.give_read_back(read);
        }
        let Some(rebuilt) = rebuilt else {
            self.unrecoverable_chunk(zone, position);
            return true;
        };
        let cb = self.seg(zone).layout.chunk_blocks as usize;
        let z = self.zone_rebuild(zone);
        for o in 0..cb {
            let (lba, timestamp) = decode_fields(&rebuilt.fields[o * FIELD_BYTES..]).expect("a block's fields");
            z.footer[position as usize * cb + o] = FooterEntry {
                lba: lba.into(),
                timestamp: timestamp.into(),
                stripe_id: rebuilt.stripe_id.into(),
                reserved: 0.into(),
            };
        }
        z.ready.insert(position, (rebuilt.data, rebuilt.metadata));
        self.rebuild_buffers().give(rebuilt.fields);
        true
    }
}
