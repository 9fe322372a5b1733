//! The floor of a user-copy ublk server on this machine: a block device that stores
//! nothing, served the way zapraid's queues serve an array, minus the engine and the
//! drives. Each read copies zeros to the kernel (`pwrite` on `/dev/ublkcN`, as zapraid's
//! queue does for every read), each write copies the data out (`pread`) and drops it;
//! flushes and discards complete at once. So a figure measured on it is what the ublk
//! path alone costs per request (the kernel handing the request to a queue thread, the
//! copy, the completion), which no ublk server can go below: `make vsmd` prints it
//! beside md RAID-5 and the array.
//!
//!   ublk_null [--queues Q] [--depth D] [--size-mib M]
//!
//! Prints the device (`/dev/ublkbN`) once it is live, serves until the device is deleted
//! (`kill` the process: the device goes with it). Linux only, needs the ublk_drv module.

use std::os::fd::RawFd;

use libublk::io::{BufDescList, UblkDev, UblkIOCtx, UblkQueue};
use libublk::{BufDesc, UblkFlags, UblkIORes};
use zapraid_server::export::ublk::{UblkOptions, DEFAULT_QUEUE_DEPTH};

const SECTOR_SHIFT: u32 = 9;

struct Options {
    queues: u16,
    depth: u16,
    size_bytes: u64,
}

fn parse_args() -> Result<Options, String> {
    let mut options = Options { queues: 1, depth: DEFAULT_QUEUE_DEPTH, size_bytes: 4 << 30 };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} wants a value"))?;
        let number = value.parse::<u64>().map_err(|e| format!("{flag} {value}: {e}"))?;
        match flag.as_str() {
            "--queues" => options.queues = u16::try_from(number).map_err(|e| format!("--queues {value}: {e}"))?,
            "--depth" => options.depth = u16::try_from(number).map_err(|e| format!("--depth {value}: {e}"))?,
            "--size-mib" => options.size_bytes = number << 20,
            _ => return Err(format!("unknown option {flag} (takes --queues, --depth, --size-mib)")),
        }
    }
    if options.queues == 0 || options.depth == 0 || options.size_bytes == 0 {
        return Err("--queues, --depth and --size-mib must be at least 1".into());
    }
    Ok(options)
}

/// What one request does: copies its data as zapraid's queue does, then its result.
fn serve_one(cdev: RawFd, q: &UblkQueue, tag: u16, scratch: &mut Vec<u8>) -> i32 {
    let iod = q.get_iod(tag);
    let bytes = (iod.nr_sectors << SECTOR_SHIFT) as usize;
    let pos = UblkIOCtx::ublk_user_copy_pos(q.get_qid(), tag, 0) as i64;
    scratch.resize(bytes.max(scratch.len()), 0);
    let copied = match iod.op_flags & 0xff {
        libublk::sys::UBLK_IO_OP_READ => {
            // SAFETY: copies from a live buffer of at least `bytes` bytes.
            unsafe { libc::pwrite(cdev, scratch.as_ptr().cast(), bytes, pos) }
        }
        libublk::sys::UBLK_IO_OP_WRITE => {
            // SAFETY: reads into a live buffer of at least `bytes` bytes.
            let n = unsafe { libc::pread(cdev, scratch.as_mut_ptr().cast(), bytes, pos) };
            // Reads must go on giving zeros.
            scratch[..bytes].fill(0);
            n
        }
        libublk::sys::UBLK_IO_OP_FLUSH | libublk::sys::UBLK_IO_OP_DISCARD | libublk::sys::UBLK_IO_OP_WRITE_ZEROES => {
            bytes as isize
        }
        _ => return -libc::EINVAL,
    };
    if copied == bytes as isize {
        bytes as i32
    } else {
        -libc::EIO
    }
}

fn serve_queue(qid: u16, dev: &UblkDev) {
    let cdev = dev.tgt.fds[0];
    let mut scratch = Vec::new();
    let queue = match UblkQueue::new(qid, dev).and_then(|q| q.submit_fetch_commands_unified(BufDescList::Slices(None)))
    {
        Ok(q) => q,
        Err(e) => {
            eprintln!("ublk_null: queue {qid} cannot start: {e:?}");
            return;
        }
    };
    let handler = move |q: &UblkQueue, tag: u16, _io: &UblkIOCtx| {
        let res = serve_one(cdev, q, tag, &mut scratch);
        if let Err(e) = q.complete_io_cmd_unified(tag, BufDesc::Slice(&[]), Ok(UblkIORes::Result(res))) {
            eprintln!("ublk_null: queue {qid} cannot complete tag {tag}: {e:?}");
        }
    };
    queue.wait_and_handle_io(handler);
}

fn main() {
    let options = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("ublk_null: {e}");
            std::process::exit(2);
        }
    };
    if !std::path::Path::new("/dev/ublk-control").exists() {
        eprintln!("ublk_null: /dev/ublk-control is missing: load the ublk_drv module (Linux >= 6.0)");
        std::process::exit(1);
    }
    // The largest request the kernel sends, as zapraid's device takes.
    let max_io_bytes = UblkOptions::default().max_io_bytes;
    let ctrl = match libublk::ctrl::UblkCtrlBuilder::default()
        .name("ublk_null")
        .id(-1)
        .nr_queues(options.queues)
        .depth(options.depth)
        .io_buf_bytes(max_io_bytes)
        .ctrl_flags(u64::from(libublk::sys::UBLK_F_USER_COPY))
        .dev_flags(UblkFlags::UBLK_DEV_F_ADD_DEV)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ublk_null: cannot add the device: {e:?}");
            std::process::exit(1);
        }
    };
    let size_bytes = options.size_bytes;
    let tgt_init = move |dev: &mut UblkDev| {
        dev.set_default_params(size_bytes);
        dev.tgt.params.basic.max_sectors = max_io_bytes >> SECTOR_SHIFT;
        Ok(())
    };
    let device_fn = |ctrl: &libublk::ctrl::UblkCtrl| println!("/dev/ublkb{}", ctrl.dev_info().dev_id);
    if let Err(e) = ctrl.run_target(tgt_init, serve_queue, device_fn) {
        eprintln!("ublk_null: {e:?}");
        std::process::exit(1);
    }
    let _ = ctrl.del_dev();
}
