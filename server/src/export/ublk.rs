//! The block device: the array exported as `/dev/ublkbN` through the kernel's ublk driver
//! (libublk), in user-copy mode so data moves between the kernel and the engine's own
//! buffers (`pread`/`pwrite` on `/dev/ublkcN`), never through a shared buffer.
//!
//! Each ublk queue thread turns the kernel's requests into engine requests (reads,
//! writes, flushes, discards; write-zeroes become writes of zero blocks, FUA writes are
//! plain writes because the engine acknowledges a write only once its stripe is on the
//! drives) and sends them over the engine thread's bounded channel. A queue thread also
//! computes each written block's CRC32C and verifies each block read, so the engine
//! thread does not, and reuses the buffers the engine's answers give back. Answers come
//! back on the queue's own channel and are taken at the end of each batch of the queue's
//! completions; a queue about to sleep says so on its `Doorbell`, whose eventfd, read
//! through the queue's io_uring, wakes it (the engine signals it only then). Every request
//! is answered: failures become errnos (EIO, EINVAL), never a hang.
//!
//! There is one queue per core by default (`default_queues`), so the kernel hands each
//! core's requests to a thread of their own. The queues share no lock on the request path:
//! - the engine thread's channel (crossbeam's bounded channel, an array): a send claims a
//!   slot with one compare-and-swap on the tail and publishes it with a store; it would
//!   lock crossbeam's waker only to wake a receiver parked in `recv`, which the engine
//!   thread does only over emulated drives with nothing in flight (the idle case), and
//!   would block only on a full channel, which the default shape never fills (at most
//!   `MAX_DEFAULT_QUEUES` queues of `DEFAULT_QUEUE_DEPTH` requests in flight fit its
//!   `MESSAGE_QUEUE_CAPACITY`);
//! - the engine thread's doorbell (`wake::Doorbell`), which each send rings: a fence and
//!   the load of a flag while the engine thread is busy; only when it sleeps (or is about
//!   to) a signal of its eventfd, a `write` that takes the eventfd's spinlock in the kernel
//!   for the addition to its counter;
//! - nothing else: the answer channel, its eventfd, the table of requests in flight and
//!   the `ReplyTo` (an `Arc`, so the only shared write is its reference count, touched by
//!   this queue and the engine thread) are the queue's own. The engine thread answers
//!   each queue on its own channel, which the queue only ever `try_recv`s, so the engine's
//!   sends there never lock a waker either.
//!
//! Devices are made with ublk's user recovery (`UBLK_F_USER_RECOVERY_REISSUE`): when the
//! server dies (kill -9, a crash), the kernel keeps `/dev/ublkbN` and holds its requests,
//! requeueing those the dead server had taken. The next `start` of the same array (found by
//! the array UUID in libublk's device record) recovers the engine from the drives, then
//! takes the device over, and the held requests run on it: a mounted file system sees a
//! pause, not an error. Nothing acknowledged is lost (recovery keeps every acknowledged
//! write), and a requeued write simply lands again with a newer timestamp.

use std::os::fd::RawFd;
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};
use libublk::io::{BufDescList, UblkDev, UblkIOCtx, UblkQueue};
use libublk::{BufDesc, UblkFlags, UblkIORes};
use zapraid_engine::{BlockChecksums, Request};

use super::Blocks;
use crate::error::{Error, Result};
use crate::run::message::{Answer, ReplyTo, MESSAGE_QUEUE_CAPACITY};
use crate::run::wake::Doorbell;

/// Requests a queue holds in flight by default.
pub const DEFAULT_QUEUE_DEPTH: u16 = 64;

/// The most queues `default_queues` picks, however many cores there are: so many queues of
/// the default depth have at most `MESSAGE_QUEUE_CAPACITY` requests in flight, all of
/// which fit in the engine thread's channel, so no queue ever waits to send. Beyond it,
/// the one engine thread is the limit, and more queues would add threads, not throughput.
pub const MAX_DEFAULT_QUEUES: u16 = (MESSAGE_QUEUE_CAPACITY / DEFAULT_QUEUE_DEPTH as usize) as u16;

// At least one queue, and no more than ublk takes.
const _: () = assert!(MAX_DEFAULT_QUEUES >= 1 && MAX_DEFAULT_QUEUES <= MAX_QUEUES);

/// The largest request the kernel sends a queue.
const MAX_IO_BYTES: u32 = 512 << 10;

/// Queues by default: one per core this process may run on, at most `MAX_DEFAULT_QUEUES`
/// (which is within what ublk takes, checked above). One when the count is unknown.
pub fn default_queues() -> u16 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.min(usize::from(MAX_DEFAULT_QUEUES)) as u16
}

/// The most queues ublk takes (the kernel's limit, checked by libublk).
pub const MAX_QUEUES: u16 = libublk::sys::UBLK_MAX_NR_QUEUES as u16;

/// The deepest queue ublk takes.
pub const MAX_QUEUE_DEPTH: u16 = libublk::sys::UBLK_MAX_QUEUE_DEPTH as u16;

/// How the block device is shaped.
#[derive(Clone, Copy, Debug)]
pub struct UblkOptions {
    pub queues: u16,
    pub depth: u16,
    pub max_io_bytes: u32,
}

impl Default for UblkOptions {
    fn default() -> Self {
        UblkOptions { queues: default_queues(), depth: DEFAULT_QUEUE_DEPTH, max_io_bytes: MAX_IO_BYTES }
    }
}

impl UblkOptions {
    /// Refuses a shape ublk cannot make (libublk would refuse it with a bare EINVAL).
    pub fn validate(&self) -> Result<()> {
        if self.queues == 0 || self.queues > MAX_QUEUES {
            return Err(Error::Ublk { reason: format!("{} queues: ublk takes 1 to {MAX_QUEUES}", self.queues) });
        }
        if self.depth == 0 || self.depth > MAX_QUEUE_DEPTH {
            return Err(Error::Ublk {
                reason: format!("queue depth {}: ublk takes 1 to {MAX_QUEUE_DEPTH}", self.depth),
            });
        }
        Ok(())
    }
}

/// The array's size, for the kernel.
#[derive(Clone, Copy, Debug)]
pub struct DeviceShape {
    pub logical_blocks: u64,
    pub block_size_bytes: u32,
    /// Recorded with the device, so the next start of this array finds it after a crash.
    pub array_uuid: [u8; 16],
}

/// How long `start` waits for the kernel to settle a dead server's device (the
/// driver quiesces it once the last file descriptor of the dead process is closed).
const LEFT_BEHIND_SETTLE_MS: u64 = 5_000;
const LEFT_BEHIND_POLL_MS: u64 = 100;

/// What `start` found of an earlier server of the same array.
enum LeftBehind {
    /// None: add a new device.
    Nothing,
    /// A device held for a successor: take it over.
    Recover { dev_id: i32, info: libublk::sys::ublksrv_ctrl_dev_info },
}

fn uuid_key(uuid: &[u8; 16]) -> String {
    uuid.iter().map(|b| format!("{b:02x}")).collect()
}

fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

fn ublk_dev_ids() -> Vec<i32> {
    let ids = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = ids.clone();
    libublk::ctrl::UblkCtrl::for_each_dev_id(move |id| sink.lock().expect("device ids").push(id as i32));
    let ids = ids.lock().expect("device ids").clone();
    ids
}

/// Looks for a device an earlier server of this array left: held for a successor (take
/// it over), running under a live server (refuse), or in any other state (delete it, so
/// dead devices do not pile up).
fn find_left_behind(uuid: &[u8; 16]) -> Result<LeftBehind> {
    let key = uuid_key(uuid);
    for dev_id in ublk_dev_ids() {
        let Ok(ctrl) = libublk::ctrl::UblkCtrl::new_simple(dev_id) else { continue };
        let ours = ctrl
            .get_target_data_from_json()
            .and_then(|v| v.get("array_uuid").and_then(|u| u.as_str().map(|u| u == key)))
            .unwrap_or(false);
        if !ours {
            continue;
        }
        let pid = ctrl.dev_info().ublksrv_pid;
        if process_alive(pid) {
            return Err(Error::Ublk {
                reason: format!("/dev/ublkb{dev_id} already serves this array (server pid {pid})"),
            });
        }
        // The dead server's device becomes QUIESCED once the kernel has released it.
        let mut waited_ms = 0;
        loop {
            let _ = ctrl.read_dev_info();
            let state = u32::from(ctrl.dev_info().state);
            if state == libublk::sys::UBLK_S_DEV_QUIESCED {
                tracing::warn!(
                    dev_id,
                    pid,
                    "taking over /dev/ublkb{dev_id}, left by a server that ended without stopping"
                );
                ctrl.start_user_recover()
                    .map_err(|e| Error::Ublk { reason: format!("cannot take over /dev/ublkb{dev_id}: {e:?}") })?;
                return Ok(LeftBehind::Recover { dev_id, info: ctrl.dev_info() });
            }
            if state != libublk::sys::UBLK_S_DEV_LIVE || waited_ms >= LEFT_BEHIND_SETTLE_MS {
                tracing::warn!(
                    dev_id,
                    state,
                    "deleting /dev/ublkb{dev_id}, left by a dead server in a state it cannot be taken over from"
                );
                let _ = ctrl.kill_dev();
                // Asynchronous: a synchronous delete waits for every opener (a file system
                // still mounted on the dead device) and would hang this start.
                if let Err(e) = ctrl.del_dev_async() {
                    tracing::warn!(dev_id, "cannot delete /dev/ublkb{dev_id}: {e:?}");
                }
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(LEFT_BEHIND_POLL_MS));
            waited_ms += LEFT_BEHIND_POLL_MS;
        }
    }
    Ok(LeftBehind::Nothing)
}

const SECTOR_SHIFT: u32 = 9;

/// Whether this kernel offers ublk (the module loaded, or loadable and loaded by hand).
pub fn available() -> bool {
    std::path::Path::new("/dev/ublk-control").exists()
}

/// Exports the array as a new `/dev/ublkbN` and serves it until the device is deleted
/// (`zapraid stop` deletes it). `ready(dev_id, taken_over)` is called once the device is
/// live; `taken_over` says it is a dead server's device, taken over.
pub fn serve(
    engine: impl Blocks,
    shape: DeviceShape,
    options: UblkOptions,
    ready: impl FnOnce(i32, bool) + Send + Sync + 'static,
) -> Result<()> {
    if !available() {
        return Err(Error::Ublk {
            reason: "/dev/ublk-control is missing: the ublk kernel module (ublk_drv, Linux >= 6.0) is not loaded; \
                     try `modprobe ublk_drv`"
                .into(),
        });
    }
    let block_shift = shape.block_size_bytes.trailing_zeros();
    if !shape.block_size_bytes.is_power_of_two() || block_shift < SECTOR_SHIFT {
        return Err(Error::Ublk {
            reason: format!("block size {} is not a power of two >= 512", shape.block_size_bytes),
        });
    }
    options.validate()?;
    let left_behind = find_left_behind(&shape.array_uuid)?;
    let taken_over = matches!(left_behind, LeftBehind::Recover { .. });
    let builder = match left_behind {
        LeftBehind::Nothing => libublk::ctrl::UblkCtrlBuilder::default()
            .name("zapraid")
            .id(-1)
            .nr_queues(options.queues)
            .depth(options.depth)
            .io_buf_bytes(options.max_io_bytes)
            .ctrl_flags(u64::from(
                libublk::sys::UBLK_F_USER_COPY
                    | libublk::sys::UBLK_F_USER_RECOVERY
                    | libublk::sys::UBLK_F_USER_RECOVERY_REISSUE,
            ))
            .dev_flags(UblkFlags::UBLK_DEV_F_ADD_DEV),
        // The kernel keeps the device's shape: queues, depth and flags are the old ones.
        LeftBehind::Recover { dev_id, info } => libublk::ctrl::UblkCtrlBuilder::default()
            .name("zapraid")
            .id(dev_id)
            .nr_queues(info.nr_hw_queues)
            .depth(info.queue_depth)
            .io_buf_bytes(info.max_io_buf_bytes)
            .ctrl_flags(info.flags)
            .dev_flags(UblkFlags::UBLK_DEV_F_RECOVER_DEV),
    };
    let ctrl = builder.build().map_err(|e| Error::Ublk { reason: format!("cannot add the device: {e:?}") })?;
    let dev_bytes = shape.logical_blocks * u64::from(shape.block_size_bytes);
    let max_sectors = options.max_io_bytes >> SECTOR_SHIFT;
    let uuid = uuid_key(&shape.array_uuid);
    let tgt_init = move |dev: &mut UblkDev| {
        dev.set_target_json(serde_json::json!({ "array_uuid": uuid }));
        dev.set_default_params(dev_bytes);
        let params = &mut dev.tgt.params;
        params.types |= libublk::sys::UBLK_PARAM_TYPE_DISCARD;
        params.basic.attrs = libublk::sys::UBLK_ATTR_VOLATILE_CACHE | libublk::sys::UBLK_ATTR_FUA;
        params.basic.logical_bs_shift = block_shift as u8;
        params.basic.physical_bs_shift = block_shift as u8;
        params.basic.io_min_shift = block_shift as u8;
        params.basic.io_opt_shift = block_shift as u8;
        params.basic.max_sectors = max_sectors;
        params.discard.discard_granularity = shape.block_size_bytes;
        params.discard.max_discard_sectors = max_sectors;
        params.discard.max_write_zeroes_sectors = max_sectors;
        params.discard.max_discard_segments = 1;
        Ok(())
    };
    let queue_fn = move |qid: u16, dev: &UblkDev| serve_queue(qid, dev, engine.clone(), shape);
    let device_fn = move |ctrl: &libublk::ctrl::UblkCtrl| ready(ctrl.dev_info().dev_id as i32, taken_over);
    ctrl.run_target(tgt_init, queue_fn, device_fn).map_err(|e| Error::Ublk { reason: format!("{e:?}") })?;
    let _ = ctrl.del_dev();
    Ok(())
}

/// Deletes a running device (its server's queues end, `serve` returns).
pub fn delete(dev_id: i32) -> Result<()> {
    let ctrl = libublk::ctrl::UblkCtrl::new_simple(dev_id)
        .map_err(|e| Error::Ublk { reason: format!("no device {dev_id}: {e:?}") })?;
    ctrl.kill_dev().map_err(|e| Error::Ublk { reason: format!("cannot stop device {dev_id}: {e:?}") })?;
    Ok(())
}

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

fn serve_queue(qid: u16, dev: &UblkDev, engine: impl Blocks, shape: DeviceShape) {
    let depth = dev.dev_info.queue_depth;
    // A tag past the queue's depth marks the eventfd read among target I/O completions.
    let wake_tag = depth;
    let bell = match Doorbell::new() {
        Ok(b) => Arc::new(b),
        Err(e) => {
            tracing::error!(qid, "eventfd failed: {e}");
            return;
        }
    };
    let efd = bell.raw();
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
    let mut wake_buf = Box::new([0u8; 8]);

    let arm_wake = |q: &UblkQueue, buf: &mut [u8; 8]| {
        let sqe = io_uring::opcode::Read::new(io_uring::types::Fd(efd), buf.as_mut_ptr(), 8)
            .build()
            .user_data(UblkIOCtx::build_user_data(wake_tag, 0, 0, true));
        if let Err(e) = q.ublk_submit_sqe_sync(sqe) {
            tracing::error!(qid, "cannot arm the queue's eventfd: {e:?}");
        }
    };

    // The engine rings the queue's doorbell after answering; it signals the eventfd (a
    // system call) only once the queue has said it is about to sleep, at the end of a
    // batch of completions, having found no answer waiting. While the queue handles a
    // batch, answers are picked up at its end without a signal. libublk hands the handler
    // every completion but a command the kernel aborted (`UBLK_IO_RES_ABORT`), which comes
    // only as the device goes down: a batch ending in one leaves the queue awake without its
    // end-of-batch look, but the requests still in flight then cannot be completed anyway.
    let handler = move |q: &UblkQueue, tag: u16, io: &UblkIOCtx| {
        if io.is_first_cqe() {
            queue.bell.awake();
        }
        if !io.is_tgt_io() {
            queue.take(q, tag);
        } else if tag == wake_tag {
            arm_wake(q, &mut wake_buf);
        }
        if io.is_last_cqe() {
            loop {
                queue.finish_answered(q);
                if !queue.bell.about_to_sleep(|| !queue.answers.is_empty()) {
                    break;
                }
            }
        }
    };

    let ring = match UblkQueue::new(qid, dev).and_then(|q| q.submit_fetch_commands_unified(BufDescList::Slices(None))) {
        Ok(q) => q,
        Err(e) => {
            tracing::error!(qid, "cannot start the ublk queue: {e:?}");
            return;
        }
    };
    let mut first_buf = Box::new([0u8; 8]);
    arm_wake(&ring, &mut first_buf);
    ring.wait_and_handle_io(handler);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_queue_per_core_up_to_the_most() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(usize::from(default_queues()), cores.min(usize::from(MAX_DEFAULT_QUEUES)));
        let options = UblkOptions::default();
        assert_eq!(options.queues, default_queues());
        options.validate().unwrap();
    }

    #[test]
    fn shapes_ublk_cannot_make_are_refused() {
        let ok = UblkOptions::default();
        for bad in [
            UblkOptions { queues: 0, ..ok },
            UblkOptions { queues: MAX_QUEUES + 1, ..ok },
            UblkOptions { depth: 0, ..ok },
            UblkOptions { depth: MAX_QUEUE_DEPTH + 1, ..ok },
        ] {
            assert!(matches!(bad.validate(), Err(Error::Ublk { .. })), "{bad:?}");
        }
        UblkOptions { queues: MAX_QUEUES, depth: MAX_QUEUE_DEPTH, ..ok }.validate().unwrap();
    }
}
