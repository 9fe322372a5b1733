//! The block device: the array exported as `/dev/ublkbN` through the kernel's ublk driver
//! (libublk), in user-copy mode so data moves between the kernel and the engine's own
//! buffers (`pread`/`pwrite` on `/dev/ublkcN`), never through a shared buffer.
//!
//! Each ublk queue thread (`queue`) turns the kernel's requests into engine requests
//! (reads, writes, flushes, discards; write-zeroes become writes of zero blocks, FUA
//! writes are plain writes because the engine acknowledges a write only once its stripe
//! is on the drives). Queue i runs engine shard i itself when there is one
//! (`UblkOptions::engine_on_queues`, on by default; `run::thread::hosted`): it borrows
//! the engine from its thread when it starts, hands it the requests that fall in its
//! shard and runs it at the end of each batch of completions, so such a request never
//! leaves the thread that took it from the kernel. Requests for another shard (or for
//! the one engine, from a queue that does not run it) go over that engine's bounded
//! channel, to its own thread or to the queue running it. A queue thread also computes
//! each written block's CRC32C and verifies each block read, and reuses the buffers the
//! engine's answers give back. Answers come back on the queue's own channel and are
//! taken at the end of each batch; a queue about to sleep says so on its `Doorbell` (the
//! engine's, when it runs one), whose eventfd, read through the queue's io_uring, wakes
//! it (senders signal it only then; a hosted engine's drives signal it on every
//! completion). Every request is answered: failures become errnos (EIO, EINVAL), never a
//! hang.
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

use std::sync::Arc;
use std::time::Duration;

use libublk::io::UblkDev;
use libublk::UblkFlags;

use super::Blocks;
use crate::error::{Error, Result};
use crate::run::message::MESSAGE_QUEUE_CAPACITY;
use crate::run::thread::hosted::EngineLease;

/// How long a queue thread waits for an engine thread to lend its engine (it answers at
/// its next turn, at once when woken for it).
const BORROW_WAIT: Duration = Duration::from_secs(5);

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
    /// Queue i runs engine (shard) i itself when there is one (`serve`'s hosts), instead
    /// of sending its requests to the engine's own thread.
    pub engine_on_queues: bool,
}

impl Default for UblkOptions {
    fn default() -> Self {
        UblkOptions {
            queues: default_queues(),
            depth: DEFAULT_QUEUE_DEPTH,
            max_io_bytes: MAX_IO_BYTES,
            engine_on_queues: true,
        }
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
/// Queue `i` runs the engine of `hosts[i]` itself (`EngineLease`), if there is one and it
/// lends it; every other engine keeps its own thread.
pub fn serve(
    engine: impl Blocks,
    hosts: Vec<EngineLease>,
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
    let hosts = if options.engine_on_queues { hosts } else { Vec::new() };
    let queue_fn = move |qid: u16, dev: &UblkDev| {
        let hosted = hosts.get(usize::from(qid)).and_then(|lease| {
            let hosted = lease.borrow(BORROW_WAIT);
            if hosted.is_none() {
                tracing::warn!(qid, "the engine was not lent to the queue: it runs on its own thread");
            }
            hosted
        });
        queue::serve_queue(qid, dev, engine.clone(), hosted, shape)
    };
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

mod queue;

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
