use super::*;
use crate::assemble::assembly::assemble;
use crate::assemble::assembly::Assembled;
use crate::assemble::format::{format, FormatOptions};
use crate::assemble::recover::recover;
use crate::run::message::Answer;
use std::path::PathBuf;
use zapraid_engine::{Mode, RaidLevel};
use zapraid_zns::{EmulatedDrive, Geometry};

/// Threads the tests' engine threads run the rebuild's jobs on besides their own
/// (`rebuild_workers`): the path a start takes on a machine of several CPUs.
const REBUILD_THREADS: usize = 2;

mod checkpoint;
mod lease;

/// Four small emulated drive files in a temporary directory, and RAID-5 format options.
fn drive_files() -> (tempfile::TempDir, Geometry, Vec<PathBuf>, FormatOptions) {
    drive_files_of(Geometry::small(12, 256, 240), 4)
}

/// Four emulated drive files of zones shaped like `zones` (64 B metadata), and RAID-5
/// format options with groups of `group_size` stripes.
fn drive_files_of(zones: Geometry, group_size: u32) -> (tempfile::TempDir, Geometry, Vec<PathBuf>, FormatOptions) {
    let dir = tempfile::tempdir().unwrap();
    let g = Geometry { metadata_bytes_per_block: 64, ..zones };
    let paths: Vec<_> = (0..4).map(|i| dir.path().join(format!("d{i}.zns"))).collect();
    for (i, p) in paths.iter().enumerate() {
        EmulatedDrive::create_file(p, g, i as u64).unwrap();
    }
    let options = FormatOptions {
        level: RaidLevel::Raid5 { drives: 4 },
        mode: Mode::ZapRaid { group_size },
        chunk_bytes: 4096,
        open_segments: zapraid_engine::OpenSegments::SINGLE,
        name: "t".into(),
        force: false,
        l2p_budget_bytes: None,
        shards: 1,
        declustering: zapraid_engine::Declustering::CLASSIC,
    };
    (dir, g, paths, options)
}

/// A drive that completes commands on a thread of its own and signals the registered
/// eventfd, as an NVMe ring does: the engine thread's eventfd loop without NVMe drives.
struct Threaded {
    geometry: Geometry,
    queue_depth: usize,
    to_worker: Option<Sender<(u64, zapraid_zns::Command)>>,
    completions: Receiver<Completion>,
    in_flight: usize,
    eventfd: Arc<std::sync::atomic::AtomicI32>,
    worker: Option<JoinHandle<()>>,
}

impl Threaded {
    fn new(mut inner: Drive) -> Self {
        let (geometry, queue_depth) = (inner.geometry(), inner.queue_depth());
        let (to_worker, commands) = crossbeam_channel::unbounded::<(u64, zapraid_zns::Command)>();
        let (done, completions) = crossbeam_channel::unbounded();
        let eventfd = Arc::new(std::sync::atomic::AtomicI32::new(-1));
        let fd = eventfd.clone();
        let worker = std::thread::spawn(move || {
            let mut out = Vec::new();
            for (tag, command) in commands {
                // Completions come a little later, while the engine thread may sleep.
                std::thread::sleep(Duration::from_micros(200));
                inner.submit(tag, command);
                while inner.in_flight() > 0 {
                    inner.wait(&mut out);
                }
                for c in out.drain(..) {
                    let _ = done.send(c);
                }
                let fd = fd.load(std::sync::atomic::Ordering::SeqCst);
                if fd >= 0 {
                    let one = 1u64;
                    // SAFETY: 8 bytes from a live u64 to the eventfd the engine thread owns
                    // (it outlives the drives, which are dropped first).
                    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
                }
            }
        });
        Threaded {
            geometry,
            queue_depth,
            to_worker: Some(to_worker),
            completions,
            in_flight: 0,
            eventfd,
            worker: Some(worker),
        }
    }
}

impl ZonedDevice for Threaded {
    fn geometry(&self) -> Geometry {
        self.geometry
    }
    fn queue_depth(&self) -> usize {
        self.queue_depth
    }
    fn submit(&mut self, tag: u64, command: zapraid_zns::Command) {
        self.in_flight += 1;
        self.to_worker.as_ref().unwrap().send((tag, command)).unwrap();
    }
    fn reap(&mut self, out: &mut Vec<Completion>) -> usize {
        let before = out.len();
        out.extend(self.completions.try_iter());
        self.in_flight -= out.len() - before;
        out.len() - before
    }
    fn wait(&mut self, out: &mut Vec<Completion>) -> usize {
        if self.in_flight == 0 {
            return 0;
        }
        out.push(self.completions.recv().unwrap());
        self.in_flight -= 1;
        1 + self.reap(out)
    }
    fn in_flight(&self) -> usize {
        self.in_flight
    }
    fn notify_completions(&mut self, eventfd: std::os::fd::RawFd) -> bool {
        self.eventfd.store(eventfd, std::sync::atomic::Ordering::SeqCst);
        true
    }
}

impl Drop for Threaded {
    fn drop(&mut self) {
        self.to_worker = None;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

/// Starts the engine thread over assembled drives, as they are or behind `Threaded`.
fn spawn(mut assembled: Assembled, threaded: bool) -> Result<(EngineThread, Vec<usize>)> {
    let engine = recover(&mut assembled)?;
    let record = FailureRecord::of(&assembled);
    let block_size_bytes = assembled.superblock.block_size_bytes.get();
    let drives = if threaded {
        assembled.drives.into_iter().map(|d| d.map_inner(|inner| Box::new(Threaded::new(inner)) as Drive)).collect()
    } else {
        assembled.drives
    };
    Ok((EngineThread::spawn(engine, drives, block_size_bytes, record, REBUILD_THREADS)?, assembled.failed))
}

fn reply() -> (Arc<ReplyTo>, Receiver<Answer>) {
    let (tx, rx) = crossbeam_channel::unbounded();
    (Arc::new(ReplyTo { tx, wake: Box::new(|| {}), counted: true }), rx)
}

/// Format drive files, start, write, stop cleanly, start again (drives named in
/// another order), read back; the second run ends by dropping every sender, which
/// stops cleanly too; a third start reads back once more.
fn format_start_write_stop_start_read(threaded: bool) {
    let (_dir, _, paths, options) = drive_files();
    let formatted = format(&paths, &options, |_, _| {}).unwrap();
    assert!(format(&paths, &options, |_, _| {}).is_err(), "formatting a member again needs --force");
    let block = formatted.block_size_bytes as usize;
    let data: Vec<u8> = (0..64 * block).map(|i| (i * 7 % 251) as u8).collect();
    let run = |order: Vec<PathBuf>, write: bool, stop: bool| -> Vec<u8> {
        let (thread, _) = spawn(assemble(&order).unwrap(), threaded).unwrap();
        let (to, answers) = reply();
        if write {
            thread
                .tx
                .send(Message::Io {
                    tag: 1,
                    request: Request::Write { lba: 10, data: data.clone() },
                    reply: to.clone(),
                })
                .unwrap();
            thread.tx.send(Message::Io { tag: 2, request: Request::Flush, reply: to.clone() }).unwrap();
            for _ in 0..2 {
                assert!(answers.recv().unwrap().1.is_ok());
            }
        }
        thread.tx.send(Message::Io { tag: 3, request: Request::Read { lba: 10, blocks: 64 }, reply: to }).unwrap();
        let got = answers.recv().unwrap().1.unwrap();
        if stop {
            thread.tx.send(Message::Stop).unwrap();
        }
        thread.join().unwrap();
        got
    };
    assert!(run(paths.clone(), true, true) == data);
    let reversed: Vec<_> = paths.iter().rev().cloned().collect();
    assert!(run(reversed, false, false) == data, "after a clean stop, drives in another order");
    assert!(run(paths.clone(), false, true) == data, "after the senders went away");
}

#[test]
fn format_start_write_stop_start_read_over_drives_completing_on_request() {
    format_start_write_stop_start_read(false);
}

#[test]
fn format_start_write_stop_start_read_over_drives_signalling_an_eventfd() {
    format_start_write_stop_start_read(true);
}

/// A drive failed while the array runs is recorded in the superblock before any
/// degraded write is acknowledged, and stays failed after a restart.
fn a_failed_drive_is_recorded_and_stays_failed(threaded: bool) {
    let (_dir, _, paths, options) = drive_files();
    let formatted = format(&paths, &options, |_, _| {}).unwrap();
    let block = formatted.block_size_bytes as usize;
    let (thread, failed) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
    assert!(failed.is_empty());
    let (to, answers) = reply();
    let (done, result) = crossbeam_channel::bounded(1);
    thread.tx.send(Message::FailDrive { drive: 1, force: false, done }).unwrap();
    result.recv().unwrap().unwrap();
    let data: Vec<u8> = (0..40 * block).map(|i| (i % 253) as u8).collect();
    thread
        .tx
        .send(Message::Io { tag: 1, request: Request::Write { lba: 0, data: data.clone() }, reply: to.clone() })
        .unwrap();
    thread.tx.send(Message::Io { tag: 2, request: Request::Flush, reply: to }).unwrap();
    for _ in 0..2 {
        assert!(answers.recv().unwrap().1.is_ok());
    }
    thread.tx.send(Message::Stop).unwrap();
    thread.join().unwrap();
    let (thread, failed) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
    assert_eq!(failed, vec![1], "the failure was recorded");
    let (to, answers) = reply();
    thread.tx.send(Message::Io { tag: 3, request: Request::Read { lba: 0, blocks: 40 }, reply: to }).unwrap();
    assert!(answers.recv().unwrap().1.unwrap() == data);
    thread.tx.send(Message::Stop).unwrap();
    thread.join().unwrap();
}

#[test]
fn a_failed_drive_is_recorded_and_stays_failed_over_drives_completing_on_request() {
    a_failed_drive_is_recorded_and_stays_failed(false);
}

#[test]
fn a_failed_drive_is_recorded_and_stays_failed_over_drives_signalling_an_eventfd() {
    a_failed_drive_is_recorded_and_stays_failed(true);
}

/// Contents that name their write: (LBA, version).
fn pattern(lba: u64, version: u64, block: usize) -> Vec<u8> {
    let mut b = vec![0u8; block];
    b[..8].copy_from_slice(&lba.to_le_bytes());
    b[8..16].copy_from_slice(&version.to_le_bytes());
    for (i, x) in b[16..].iter_mut().enumerate() {
        *x = (lba as u8).wrapping_mul(31) ^ (version as u8) ^ (i as u8);
    }
    b
}

/// Batches of concurrent requests (writes on disjoint ranges, reads of ranges no write
/// of the batch touches) against a reference of acknowledged contents.
struct Load {
    rng: rand_chacha::ChaCha8Rng,
    reference: HashMap<u64, u64>,
    version: u64,
    span_blocks: u64,
    block: usize,
}

impl Load {
    fn expected(&self, lba: u64) -> Vec<u8> {
        self.reference.get(&lba).map_or_else(|| vec![0; self.block], |v| pattern(lba, *v, self.block))
    }

    /// One batch of up to `depth` requests; `between(i)` runs after the i-th is sent.
    fn batch(&mut self, thread: &EngineThread, depth: usize, mut between: impl FnMut(usize)) {
        use rand::Rng;
        let (to, answers) = reply();
        let mut busy: Vec<(u64, u64)> = Vec::new();
        let mut sent: HashMap<u64, (bool, u64, u64, u64)> = HashMap::new();
        for i in 0..depth {
            let blocks = if self.rng.random_bool(0.1) {
                self.rng.random_range(17..=128u64)
            } else {
                self.rng.random_range(1..=16u64)
            };
            let lba = self.rng.random_range(0..self.span_blocks - blocks);
            if busy.iter().any(|(s, n)| lba < s + n && *s < lba + blocks) {
                continue;
            }
            busy.push((lba, blocks));
            let tag = i as u64;
            if self.rng.random_bool(0.05) {
                sent.insert(tag, (false, 0, 0, 0));
                thread.tx.send(Message::Io { tag, request: Request::Flush, reply: to.clone() }).unwrap();
                between(i);
                continue;
            }
            let request = if self.rng.random_bool(0.7) {
                self.version += 1;
                let data = (lba..lba + blocks).flat_map(|l| pattern(l, self.version, self.block)).collect();
                sent.insert(tag, (true, lba, blocks, self.version));
                Request::Write { lba, data }
            } else {
                sent.insert(tag, (false, lba, blocks, 0));
                Request::Read { lba, blocks }
            };
            thread.tx.send(Message::Io { tag, request, reply: to.clone() }).unwrap();
            between(i);
        }
        for _ in 0..sent.len() {
            let (tag, result, _) = answers.recv().unwrap();
            let (write, lba, blocks, version) = sent[&tag];
            let data = result.unwrap_or_else(|e| panic!("request at LBA {lba} (+{blocks}) failed: {e}"));
            if write {
                for l in lba..lba + blocks {
                    self.reference.insert(l, version);
                }
            } else {
                for (j, l) in (lba..lba + blocks).enumerate() {
                    assert!(data[j * self.block..][..self.block] == self.expected(l)[..], "LBA {l} read back wrong");
                }
            }
        }
    }

    fn verify_all(&mut self, thread: &EngineThread, what: &str) {
        let (to, answers) = reply();
        let chunk = 256u64;
        for start in (0..self.span_blocks).step_by(chunk as usize) {
            let blocks = chunk.min(self.span_blocks - start);
            thread
                .tx
                .send(Message::Io { tag: 0, request: Request::Read { lba: start, blocks }, reply: to.clone() })
                .unwrap();
            let data = answers.recv().unwrap().1.unwrap();
            for (j, l) in (start..start + blocks).enumerate() {
                assert!(data[j * self.block..][..self.block] == self.expected(l)[..], "{what}: LBA {l} differs");
            }
        }
    }
}

fn stop(thread: EngineThread) {
    thread.tx.send(Message::Stop).unwrap();
    thread.join().unwrap();
}

/// What the blockdev scenario does to the engine: run, stop, start (the segment that
/// was open is rewritten in the background), `zapraid fail` a drive while that and
/// more I/O runs, stop, start with the drive recorded failed: everything reads back.
fn drive_failed_during_reclaim_then_degraded_restart(threaded: bool, seed: u64) {
    use rand::SeedableRng;
    let (_dir, _, paths, options) = drive_files_of(Geometry::small(12, 2048, 1984), 256);
    let formatted = format(&paths, &options, |_, _| {}).unwrap();
    let mut load = Load {
        rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed),
        reference: HashMap::new(),
        version: 0,
        span_blocks: 3000,
        block: formatted.block_size_bytes as usize,
    };
    let (thread, _) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
    for _ in 0..40 {
        load.batch(&thread, 32, |_| {});
    }
    stop(thread);
    let (thread, _) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
    let fail_in_batch = seed as usize % 6;
    for b in 0..12 {
        load.batch(&thread, 32, |i| {
            if b == fail_in_batch && i == 5 {
                let (done, result) = crossbeam_channel::bounded(1);
                thread.tx.send(Message::FailDrive { drive: 1 + seed as usize % 3, force: false, done }).unwrap();
                result.recv().unwrap().unwrap();
            }
        });
    }
    load.verify_all(&thread, "before the stop");
    stop(thread);
    let (thread, failed) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
    assert_eq!(failed, vec![1 + seed as usize % 3]);
    load.verify_all(&thread, "after a restart with the drive failed");
    for _ in 0..10 {
        load.batch(&thread, 32, |_| {});
    }
    stop(thread);
    let (thread, _) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
    load.verify_all(&thread, "after a second degraded restart");
    stop(thread);
}

#[test]
fn drive_failed_during_reclaim_then_degraded_restart_over_drives_completing_on_request() {
    for seed in 0..3 {
        drive_failed_during_reclaim_then_degraded_restart(false, seed);
    }
}

#[test]
fn drive_failed_during_reclaim_then_degraded_restart_over_drives_signalling_an_eventfd() {
    for seed in 3..6 {
        drive_failed_during_reclaim_then_degraded_restart(true, seed);
    }
}

/// The blockdev scenario's shape: QEMU-sized zones, a file system's worth of mostly
/// sequential data in one segment, stop, start (the segment is rewritten in the
/// background), fail a drive in the middle of that, stop soon after, start degraded.
fn qemu_sized_drive_failed_during_reclaim(threaded: bool, seed: u64, fail_after_reads: usize) {
    use rand::SeedableRng;
    let (_dir, _, paths, options) = drive_files_of(Geometry::small(8, 16384, 15872), 256);
    let formatted = format(&paths, &options, |_, _| {}).unwrap();
    let block = formatted.block_size_bytes as usize;
    let span_blocks = 21_000u64;
    let mut load = Load {
        rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed),
        reference: HashMap::new(),
        version: 0,
        span_blocks,
        block,
    };
    let (thread, _) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
    let (to, answers) = reply();
    let mut tag = 0;
    for start in (0..span_blocks).step_by(128) {
        let blocks = 128.min(span_blocks - start);
        load.version += 1;
        let data = (start..start + blocks).flat_map(|l| pattern(l, load.version, block)).collect();
        thread.tx.send(Message::Io { tag, request: Request::Write { lba: start, data }, reply: to.clone() }).unwrap();
        for l in start..start + blocks {
            load.reference.insert(l, load.version);
        }
        tag += 1;
        if tag % 32 == 0 {
            for _ in 0..32 {
                answers.recv().unwrap().1.unwrap();
            }
        }
    }
    for _ in 0..tag % 32 {
        answers.recv().unwrap().1.unwrap();
    }
    for _ in 0..10 {
        load.batch(&thread, 32, |_| {});
    }
    stop(thread);
    let (thread, _) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
    // Reads while the segment is rewritten; the drive fails partway.
    let (to, answers) = reply();
    for (n, start) in (0..span_blocks).step_by(128).enumerate() {
        // Stop soon after the failure, while the segment may still be rewritten.
        if n == fail_after_reads + 20 {
            break;
        }
        if n == fail_after_reads {
            let (done, result) = crossbeam_channel::bounded(1);
            thread.tx.send(Message::FailDrive { drive: 1, force: false, done }).unwrap();
            result.recv().unwrap().unwrap();
        }
        let blocks = 128.min(span_blocks - start);
        thread
            .tx
            .send(Message::Io { tag: 0, request: Request::Read { lba: start, blocks }, reply: to.clone() })
            .unwrap();
        let data = answers.recv().unwrap().1.unwrap();
        for (j, l) in (start..start + blocks).enumerate() {
            assert!(data[j * block..][..block] == load.expected(l)[..], "LBA {l} read back wrong during reclaim");
        }
    }
    for _ in 0..4 {
        load.batch(&thread, 32, |_| {});
    }
    stop(thread);
    let (thread, failed) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
    assert_eq!(failed, vec![1]);
    load.verify_all(&thread, &format!("seed {seed}, failed after {fail_after_reads} reads: degraded restart"));
    stop(thread);
}

#[test]
fn qemu_sized_drive_failed_during_reclaim_then_degraded_restart() {
    // Drives that complete on their own thread are slow enough that the failure and
    // the stop both come while the segment is still being rewritten.
    for (seed, fail_after_reads) in [(2, 40), (4, 120)] {
        qemu_sized_drive_failed_during_reclaim(true, seed, fail_after_reads);
    }
}
