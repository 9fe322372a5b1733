//! The wall-time targets of `zapraid replay`: an array's drives (formatted and stopped;
//! the engine runs in this process, as `start --no-device` would run it) and a block
//! device or file (`/dev/ublkbN` of a running array, written with O_DIRECT by a pool of
//! threads, one request each). The simulator is the replay crate's own target.
//!
//! Each answers every request it takes once; a failed request ends the replay with its
//! error.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use crossbeam_channel::{Receiver, Sender};
use zapraid_engine::{Request, RequestId};
use zapraid_server::assemble::NewlyMissing;
use zapraid_server::run::session::Session;
use zapraid_trace::replay::{GcCounts, Target};

type Answer = (RequestId, Result<(), String>);

/// How long to wait for `due_ns` from `now_ns`, or None if it has come.
fn until(now_ns: u64, due_ns: u64) -> Option<Duration> {
    (now_ns < due_ns).then(|| Duration::from_nanos(due_ns - now_ns))
}

/// Puts the answer `next` waits for into `answers`; whether one came.
fn take_next(answers: &mut Vec<Answer>, next: impl FnOnce() -> Option<Answer>) -> bool {
    next().map(|answer| answers.push(answer)).is_some()
}

/// An engine answer as the replay takes it.
fn engine_answer((id, result, _): zapraid_server::run::Answer) -> Answer {
    (id, result.map(|_| ()).map_err(|e| e.to_string()))
}

/// An array on drives, run by the engine in this process.
pub struct DrivesTarget {
    session: Session,
    started: Instant,
    logical_blocks: u64,
    answers: Vec<Answer>,
}

impl DrivesTarget {
    /// Assembles and recovers the array on `drives` (it must not be running); `degraded`:
    /// members missing are recorded failed instead of refusing to start.
    pub fn start(drives: &[PathBuf], degraded: bool) -> Result<Self> {
        let newly_missing = if degraded { NewlyMissing::RecordFailed } else { NewlyMissing::Refuse };
        let assembled = zapraid_server::assemble::assemble_with(drives, newly_missing)?;
        let logical_blocks = assembled.config.logical_blocks;
        let session = Session::start(assembled)?;
        Ok(DrivesTarget { session, started: Instant::now(), logical_blocks, answers: Vec::new() })
    }

    /// Stops the array cleanly.
    pub fn stop(self) -> Result<()> {
        Ok(self.session.stop()?)
    }
}

impl Target for DrivesTarget {
    fn now_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    fn logical_blocks(&self) -> u64 {
        self.logical_blocks
    }

    fn block_bytes(&self) -> u64 {
        self.session.block_bytes as u64
    }

    fn submit(&mut self, id: RequestId, request: Request) {
        if let Err(e) = self.session.send(id, request) {
            self.answers.push((id, Err(e.to_string())));
        }
    }

    fn step(&mut self) -> bool {
        take_next(&mut self.answers, || self.session.recv().ok().map(engine_answer))
    }

    fn step_until(&mut self, due_ns: u64) -> bool {
        let Some(wait) = until(self.now_ns(), due_ns) else { return false };
        take_next(&mut self.answers, || self.session.recv_timeout(wait).ok().flatten().map(engine_answer))
    }

    fn take_answers(&mut self) -> Vec<Answer> {
        std::mem::take(&mut self.answers)
    }

    fn unwritten(&self, _lba: u64, _blocks: u64) -> Option<bool> {
        None
    }

    fn gc(&self) -> Option<GcCounts> {
        let status = self.session.status().ok()?;
        Some((status.engine.segments_reclaimed, status.engine.blocks_relocated))
    }
}

/// O_DIRECT needs buffers aligned to the device's logical block.
const DIRECT_IO_ALIGN_BYTES: usize = 4096;

/// A buffer aligned for O_DIRECT.
struct AlignedBuffer {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

// SAFETY: the buffer is owned memory, moved between threads whole, never shared.
unsafe impl Send for AlignedBuffer {}

impl AlignedBuffer {
    fn zeroed(bytes: usize) -> AlignedBuffer {
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), DIRECT_IO_ALIGN_BYTES).expect("a valid layout");
        // SAFETY: the layout has a nonzero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuffer { ptr, layout }
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr holds layout.size() initialised bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `zeroed`.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

enum Job {
    Read { id: RequestId, offset: u64, bytes: usize },
    Write { id: RequestId, offset: u64, data: Vec<u8> },
}

/// A block device (or file) written and read with O_DIRECT by worker threads.
pub struct DeviceTarget {
    jobs: Option<Sender<Job>>,
    done: Receiver<Answer>,
    workers: Vec<std::thread::JoinHandle<()>>,
    started: Instant,
    logical_blocks: u64,
    block_bytes: u64,
    answers: Vec<Answer>,
}

impl DeviceTarget {
    /// Opens `path` for O_DIRECT I/O in blocks of `block_bytes`, with `workers` requests
    /// in flight at most.
    pub fn open(path: &Path, block_bytes: u64, workers: usize) -> Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .with_context(|| format!("opening {} for direct I/O", path.display()))?;
        let size_bytes = device_bytes(&file).with_context(|| format!("the size of {}", path.display()))?;
        let logical_blocks = size_bytes / block_bytes;
        if logical_blocks == 0 {
            bail!("{} holds less than one {block_bytes}-byte block", path.display());
        }
        let file = std::sync::Arc::new(file);
        let (jobs, job_rx) = crossbeam_channel::unbounded::<Job>();
        let (done_tx, done) = crossbeam_channel::unbounded();
        let workers = (0..workers.max(1))
            .map(|_| {
                let (file, job_rx, done_tx) = (file.clone(), job_rx.clone(), done_tx.clone());
                std::thread::spawn(move || {
                    for job in job_rx {
                        let answer = run_job(&file, job);
                        if done_tx.send(answer).is_err() {
                            return;
                        }
                    }
                })
            })
            .collect();
        Ok(DeviceTarget {
            jobs: Some(jobs),
            done,
            workers,
            started: Instant::now(),
            logical_blocks,
            block_bytes,
            answers: Vec::new(),
        })
    }
}

impl Drop for DeviceTarget {
    fn drop(&mut self) {
        self.jobs = None; // the workers end when the queue closes
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

/// Bytes of a block device or file.
fn device_bytes(file: &File) -> std::io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let mut file = file;
    file.seek(SeekFrom::End(0))
}

fn run_job(file: &File, job: Job) -> Answer {
    match job {
        Job::Read { id, offset, bytes } => {
            let mut buffer = AlignedBuffer::zeroed(bytes);
            let result = file.read_exact_at(&mut buffer.as_mut()[..bytes], offset);
            (id, result.map_err(|e| format!("read of {bytes} bytes at {offset}: {e}")))
        }
        Job::Write { id, offset, data } => {
            let mut buffer = AlignedBuffer::zeroed(data.len());
            buffer.as_mut()[..data.len()].copy_from_slice(&data);
            let result = file.write_all_at(&buffer.as_mut()[..data.len()], offset);
            (id, result.map_err(|e| format!("write of {} bytes at {offset}: {e}", data.len())))
        }
    }
}

impl Target for DeviceTarget {
    fn now_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    fn logical_blocks(&self) -> u64 {
        self.logical_blocks
    }

    fn block_bytes(&self) -> u64 {
        self.block_bytes
    }

    fn submit(&mut self, id: RequestId, request: Request) {
        let job = match request {
            Request::Read { lba, blocks } | Request::ReadUnverified { lba, blocks, .. } => {
                Job::Read { id, offset: lba * self.block_bytes, bytes: (blocks * self.block_bytes) as usize }
            }
            Request::Write { lba, data } | Request::WriteWithChecksums { lba, data, .. } => {
                Job::Write { id, offset: lba * self.block_bytes, data }
            }
            Request::Flush | Request::Discard { .. } => {
                return self.answers.push((id, Err("only reads and writes are replayed".into())));
            }
        };
        if self.jobs.as_ref().is_none_or(|jobs| jobs.send(job).is_err()) {
            self.answers.push((id, Err("the I/O threads are gone".into())));
        }
    }

    fn step(&mut self) -> bool {
        take_next(&mut self.answers, || self.done.recv().ok())
    }

    fn step_until(&mut self, due_ns: u64) -> bool {
        let Some(wait) = until(self.now_ns(), due_ns) else { return false };
        take_next(&mut self.answers, || self.done.recv_timeout(wait).ok())
    }

    fn take_answers(&mut self) -> Vec<Answer> {
        std::mem::take(&mut self.answers)
    }

    fn unwritten(&self, _lba: u64, _blocks: u64) -> Option<bool> {
        None
    }

    fn gc(&self) -> Option<GcCounts> {
        None
    }
}
