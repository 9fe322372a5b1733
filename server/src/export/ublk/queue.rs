//! A ublk queue thread: it turns the kernel's requests into engine requests, sends them
//! (or, running an engine itself, hands them to it), and completes each with the
//! engine's answer (module doc of `ublk` for the path and what the queues share).
//!
//! Buffers the kernel writes into on the queue's ring (the reads of the doorbell's
//! eventfd and of the timer's timerfd) are `RingBuffers`, never freed: libublk keeps the
//! ring in a thread-local that outlives `serve_queue`, and a read still armed when the
//! queue ends completes whenever the eventfd is next signalled (a drive's completion, once
//! the engine is back on its own thread), so it must never land in freed memory.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use libublk::io::{BufDescList, UblkDev, UblkIOCtx, UblkQueue};
use libublk::{BufDesc, UblkIORes};
use zapraid_engine::{BlockChecksums, Request};

use super::{DeviceShape, SECTOR_SHIFT};
use crate::export::Blocks;
use crate::run::message::{Answer, ReplyTo};
use crate::run::thread::hosted::{HostedEngine, Turns};
use crate::run::wake::Doorbell;

/// A timer due this close after the one set already is served by that one's turn.
const TIMER_SLACK: Duration = Duration::from_micros(50);

/// What a queue remembers of a request in the engine.
#[derive(Clone, Copy)]
struct InFlight {
    op: u32,
    bytes: u32,
    /// Where a read starts and its length, to ask again for blocks failing their checks.
    lba: u64,
    blocks: u64,
}

/// A spare buffer (or a new one) of `bytes` bytes.
fn spare_of(spares: &mut Vec<Vec<u8>>, bytes: u32) -> Vec<u8> {
    let mut buffer = spares.pop().unwrap_or_default();
    buffer.resize(bytes as usize, 0);
    buffer
}

/// Keeps a buffer the engine gave back for a later request, at most one per tag.
fn keep_spare(spares: &mut Vec<Vec<u8>>, buffer: Vec<u8>, depth: u16) {
    if spares.len() < usize::from(depth) {
        spares.push(buffer);
    }
}

fn errno(e: &zapraid_engine::Error) -> i32 {
    match e {
        zapraid_engine::Error::InvalidConfig { .. } => -libc::EINVAL,
        zapraid_engine::Error::ArrayFull { .. } => -libc::ENOSPC,
        _ => -libc::EIO,
    }
}

/// A queue thread's own state: what it has in the engine, its answers and its buffers.
struct Queue<B: Blocks> {
    qid: u16,
    depth: u16,
    /// `/dev/ublkcN`, whose offsets reach each request's data (user copy).
    cdev: RawFd,
    block_bytes: u64,
    engine: B,
    reply: Arc<ReplyTo>,
    answers: Receiver<Answer>,
    bell: Arc<Doorbell>,
    in_flight: Vec<Option<InFlight>>,
    /// Buffers the engine gave back with its answers (writes' data, reads' answers once
    /// copied out), reused for the next requests (at most one per tag), so a request
    /// costs no allocation here nor a free on the engine thread.
    spare_buffers: Vec<Vec<u8>>,
}

fn complete(q: &UblkQueue, tag: u16, res: i32) {
    if let Err(e) = q.complete_io_cmd_unified(tag, BufDesc::Slice(&[]), Ok(UblkIORes::Result(res))) {
        tracing::error!(qid = q.get_qid(), tag, "cannot complete an I/O: {e:?}");
    }
}

impl<B: Blocks> Queue<B> {
    /// A request from the kernel: sent to the engine, or refused at once.
    fn take(&mut self, q: &UblkQueue, tag: u16) {
        let (qid, block) = (self.qid, self.block_bytes);
        let iod = q.get_iod(tag);
        let op = iod.op_flags & 0xff;
        let offset = iod.start_sector << SECTOR_SHIFT;
        let bytes = iod.nr_sectors << SECTOR_SHIFT;
        let (lba, blocks) = (offset / block, u64::from(bytes) / block);
        let aligned = offset.is_multiple_of(block) && u64::from(bytes).is_multiple_of(block);
        let request = match op {
            libublk::sys::UBLK_IO_OP_FLUSH => Some(Request::Flush),
            _ if !aligned || blocks == 0 => None,
            libublk::sys::UBLK_IO_OP_READ => {
                Some(Request::ReadUnverified { lba, blocks, buffer: spare_of(&mut self.spare_buffers, bytes) })
            }
            libublk::sys::UBLK_IO_OP_WRITE => {
                let mut data = spare_of(&mut self.spare_buffers, bytes);
                let pos = UblkIOCtx::ublk_user_copy_pos(qid, tag, 0);
                // SAFETY: reads into a live buffer of data.len() bytes.
                let n = unsafe { libc::pread(self.cdev, data.as_mut_ptr().cast(), data.len(), pos as i64) };
                // The blocks' CRC32C is computed here, on this queue's thread, not on the
                // engine's (`zapraid_engine::checksum`).
                (n == data.len() as isize).then(|| {
                    let checksums = BlockChecksums::of(&data, block as usize);
                    Request::WriteWithChecksums { lba, data, checksums }
                })
            }
            libublk::sys::UBLK_IO_OP_WRITE_ZEROES => {
                let data = vec![0; bytes as usize];
                let checksums = BlockChecksums::of(&data, block as usize);
                Some(Request::WriteWithChecksums { lba, data, checksums })
            }
            libublk::sys::UBLK_IO_OP_DISCARD => Some(Request::Discard { lba, blocks }),
            _ => None,
        };
        let Some(request) = request else {
            return complete(q, tag, -libc::EINVAL);
        };
        self.in_flight[usize::from(tag)] = Some(InFlight { op, bytes, lba, blocks });
        if self.engine.submit(u64::from(tag), request, &self.reply).is_err() {
            self.in_flight[usize::from(tag)] = None;
            complete(q, tag, -libc::EIO);
        }
    }

    /// Completes every request the engine has answered.
    fn finish_answered(&mut self, q: &UblkQueue) {
        while let Ok((tag, result, checks)) = self.answers.try_recv() {
            let tag = tag as u16;
            let Some(f) = self.in_flight[usize::from(tag)].take() else { continue };
            let res = match result {
                Err(e) => errno(&e),
                Ok(data) if f.op == libublk::sys::UBLK_IO_OP_READ => {
                    // The blocks' checksums are verified here, on this queue's thread; a
                    // block that fails is read again with the engine checking it, which
                    // rebuilds it from its stripe.
                    let verified = checks.as_ref().is_none_or(|c| c.verify(&data, self.block_bytes as usize).is_ok());
                    if !verified {
                        tracing::warn!(
                            qid = self.qid,
                            tag,
                            lba = f.lba,
                            "a block read failed its checksum: read again"
                        );
                        let (lba, blocks) = (f.lba, f.blocks);
                        self.in_flight[usize::from(tag)] = Some(f);
                        if self.engine.submit(u64::from(tag), Request::Read { lba, blocks }, &self.reply).is_ok() {
                            continue;
                        }
                        self.in_flight[usize::from(tag)] = None;
                        complete(q, tag, -libc::EIO);
                        continue;
                    }
                    let pos = UblkIOCtx::ublk_user_copy_pos(self.qid, tag, 0);
                    // SAFETY: copies from a live buffer of data.len() bytes.
                    let n = unsafe { libc::pwrite(self.cdev, data.as_ptr().cast(), data.len(), pos as i64) };
                    let copied = n == data.len() as isize;
                    keep_spare(&mut self.spare_buffers, data, self.depth);
                    if copied {
                        f.bytes as i32
                    } else {
                        -libc::EIO
                    }
                }
                Ok(data) => {
                    if f.op == libublk::sys::UBLK_IO_OP_WRITE {
                        keep_spare(&mut self.spare_buffers, data, self.depth);
                    }
                    f.bytes as i32
                }
            };
            complete(q, tag, res);
        }
    }
}

/// The timer a queue running an engine sets for the engine's next timer (a stripe waiting
/// to be filled, scrub or rebuild pacing), so that it wakes for it while it sleeps on the
/// kernel's requests: a timerfd whose read is armed on the queue's ring. It is set only
/// when the engine's next timer comes before the one set (a system call then), not at
/// every batch.
struct EngineTimer {
    fd: OwnedFd,
    /// When it is set to fire, until its read completes.
    set_for: Option<Instant>,
}

impl EngineTimer {
    fn new() -> std::io::Result<Self> {
        // SAFETY: creates a new file descriptor, owned below. Blocking, so that io_uring
        // waits on its read rather than failing it with EAGAIN.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor nothing else owns.
        Ok(EngineTimer { fd: unsafe { OwnedFd::from_raw_fd(fd) }, set_for: None })
    }

    /// Sets the timer to fire in `due`, unless it is set to fire before that already.
    fn set(&mut self, qid: u16, due: Duration) {
        let at = Instant::now() + due;
        if self.set_for.is_some_and(|set| set <= at + TIMER_SLACK) {
            return;
        }
        // A zero it_value would disarm the timer: fire in 1 ns instead.
        let due = due.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: due.as_secs() as libc::time_t, tv_nsec: due.subsec_nanos().into() },
        };
        // SAFETY: a valid timerfd and a live itimerspec; no old value asked for.
        if unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } == 0 {
            self.set_for = Some(at);
        } else {
            tracing::error!(qid, error = %std::io::Error::last_os_error(), "cannot set the engine's timer");
        }
    }

    /// Its read completed: it fired, and is set no more.
    fn fired(&mut self) {
        self.set_for = None;
    }
}

/// What the kernel writes into on the queue's ring: 16 bytes per queue, never freed.
struct RingBuffers {
    wake: [u8; 8],
    timer: [u8; 8],
}

/// Arms a read of 8 bytes from `fd` into `buf` on the queue's ring, tagged `tag`.
fn arm_read(q: &UblkQueue, fd: RawFd, buf: &mut [u8; 8], tag: u16) {
    let sqe = io_uring::opcode::Read::new(io_uring::types::Fd(fd), buf.as_mut_ptr(), 8)
        .build()
        .user_data(UblkIOCtx::build_user_data(tag, 0, 0, true));
    if let Err(e) = q.ublk_submit_sqe_sync(sqe) {
        tracing::error!(qid = q.get_qid(), tag, "cannot arm a read on the queue's ring: {e:?}");
    }
}

pub(super) fn serve_queue(
    qid: u16,
    dev: &UblkDev,
    engine: impl Blocks,
    mut hosted: Option<HostedEngine>,
    shape: DeviceShape,
) {
    let depth = dev.dev_info.queue_depth;
    // Never freed (see the module doc).
    let buffers: &'static mut RingBuffers = Box::leak(Box::new(RingBuffers { wake: [0; 8], timer: [0; 8] }));
    // Tags past the queue's depth mark the eventfd's and the timerfd's reads among target
    // I/O completions.
    let (wake_tag, timer_tag) = (depth, depth + 1);
    let mut timer = match hosted.as_ref().map(|_| EngineTimer::new()).transpose() {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(qid, "timerfd failed: {e}: the engine runs on its own thread");
            hosted = None;
            None
        }
    };
    // A queue running an engine sleeps on the engine's doorbell: answers, messages for the
    // engine and its drives' completions all wake it.
    let bell = match hosted.as_ref().map(|h| h.bell().clone()).map_or_else(|| Doorbell::new().map(Arc::new), Ok) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(qid, "eventfd failed: {e}");
            return;
        }
    };
    let efd = bell.raw();
    let timer_fd = timer.as_ref().map(|t| t.fd.as_raw_fd());
    let (tx, answers): (Sender<Answer>, Receiver<Answer>) = crossbeam_channel::bounded(usize::from(depth) * 2);
    let ringer = bell.clone();
    let reply = Arc::new(ReplyTo { tx, wake: Box::new(move || ringer.ring()), counted: true });
    let mut queue = Queue {
        qid,
        depth,
        cdev: dev.tgt.fds[0],
        block_bytes: u64::from(shape.block_size_bytes),
        engine,
        reply,
        answers,
        bell,
        in_flight: vec![None; usize::from(depth)],
        spare_buffers: Vec::with_capacity(usize::from(depth)),
    };
    if hosted.is_some() {
        tracing::info!(qid, "the queue runs the engine itself");
    }
    let ring = match UblkQueue::new(qid, dev).and_then(|q| q.submit_fetch_commands_unified(BufDescList::Slices(None))) {
        Ok(q) => q,
        Err(e) => {
            tracing::error!(qid, "cannot start the ublk queue: {e:?}");
            return;
        }
    };
    let RingBuffers { wake: wake_buf, timer: timer_buf } = buffers;
    arm_read(&ring, efd, wake_buf, wake_tag);
    if let Some(fd) = timer_fd {
        arm_read(&ring, fd, timer_buf, timer_tag);
    }
    // The queue sleeps at once, before any batch of its own: a hosted engine's messages
    // (another queue's requests for it, the kernel's partition scan among them) must
    // signal it from the start. What came before the announcement is looked at now.
    let engine_waits = hosted.as_ref().is_some_and(HostedEngine::has_messages);
    if queue.bell.about_to_sleep(|| !queue.answers.is_empty() || engine_waits) {
        queue.bell.signal();
    }

    // The engine rings the queue's doorbell after answering; it signals the eventfd (a
    // system call) only once the queue has said it is about to sleep, at the end of a
    // batch of completions, having found no answer waiting. While the queue handles a
    // batch, answers are picked up at its end without a signal. A queue running an engine
    // runs it at the end of each batch, before taking the answers, and sets its timer for
    // the engine's next one. libublk hands the handler every completion but a command the
    // kernel aborted (`UBLK_IO_RES_ABORT`), which comes only as the device goes down: a
    // batch ending in one leaves the queue awake without its end-of-batch look, but the
    // requests still in flight then cannot be completed anyway.
    let handler = move |q: &UblkQueue, tag: u16, io: &UblkIOCtx| {
        if io.is_first_cqe() {
            queue.bell.awake();
        }
        if !io.is_tgt_io() {
            queue.take(q, tag);
        } else if tag == wake_tag {
            arm_read(q, efd, wake_buf, wake_tag);
        } else if let (true, Some(t), Some(fd)) = (tag == timer_tag, timer.as_mut(), timer_fd) {
            t.fired();
            arm_read(q, fd, timer_buf, timer_tag);
        }
        if io.is_last_cqe() {
            loop {
                let turns = hosted.as_mut().map(HostedEngine::turns);
                if turns == Some(Turns::Stopped) {
                    tracing::info!(qid, "the engine has stopped: back to its own thread to finish");
                    hosted = None;
                }
                queue.finish_answered(q);
                if turns == Some(Turns::Busy) {
                    // Back soon, with the kernel's new requests: the armed read completes
                    // at once.
                    queue.bell.signal();
                    break;
                }
                if let (Some(due), Some(t)) = (hosted.as_ref().and_then(HostedEngine::next_timer), timer.as_mut()) {
                    t.set(qid, due);
                }
                let engine_waits = || hosted.as_ref().is_some_and(HostedEngine::has_messages);
                if !queue.bell.about_to_sleep(|| !queue.answers.is_empty() || engine_waits()) {
                    break;
                }
            }
        }
    };
    // Returns once the device is down; the handler goes with it, and a hosted engine
    // back to its thread.
    ring.wait_and_handle_io(handler);
}
