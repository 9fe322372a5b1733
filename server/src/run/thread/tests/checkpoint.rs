//! Checkpoints through the engine thread and the server's start: a clean stop leaves one,
//! the next start begins from it, and a crash after such a start begins from it again,
//! replaying only the segments written after it.

use super::*;
use zapraid_engine::Response;

/// Four drive files formatted as RAID-5 with an L2P budget of one page (so the array keeps
/// a checkpoint): the directory that holds them, their paths and the block size.
fn formatted_with_budget() -> (tempfile::TempDir, Vec<PathBuf>, usize) {
    let (dir, _, paths, options) = drive_files();
    let options = FormatOptions { l2p_budget_bytes: Some(4096), ..options };
    let formatted = format(&paths, &options, |_, _| {}).unwrap();
    (dir, paths, formatted.block_size_bytes as usize)
}

/// Drives `engine` on `drives` until request `id` is answered, as the engine thread does
/// but on this thread, so that a test can drop both without a clean stop (a crash).
fn run_to_response(engine: &mut Engine, drives: &mut [ReservedZones<Drive>], id: u64, request: Request) -> Response {
    let mut now_ns = 0;
    engine.submit(id, request, now_ns);
    let mut completions = Vec::new();
    loop {
        while let Some(cmd) = engine.poll_command() {
            drives[cmd.drive].submit(cmd.tag, cmd.command);
        }
        if engine.checkpoint_ready() {
            // Not kept here: the engine goes on as after a checkpoint it could not write.
            engine.checkpoint_written(false, now_ns);
            continue;
        }
        if let Some(response) = engine.poll_response() {
            assert_eq!(response.id, id);
            return response;
        }
        match (0..drives.len()).find(|d| drives[*d].in_flight() > 0) {
            Some(busy) => {
                drives[busy].wait(&mut completions);
                for completion in completions.drain(..) {
                    engine.on_completion(busy, completion, now_ns);
                }
            }
            None => {
                // A partial stripe waits for its padding timer: time passes.
                now_ns = now_ns.max(engine.next_timer_ns().expect("the engine waits for a drive or a timer"));
                engine.tick(now_ns);
            }
        }
    }
}

/// A crash after a start from a checkpoint: the next start begins from the same
/// checkpoint and replays only the segments written after it (fewer blocks read than a
/// full replay), and every block, old and new, reads back.
#[test]
fn a_crash_after_a_start_from_a_checkpoint_replays_only_what_came_after() {
    let (_dir, paths, block) = formatted_with_budget();
    let old: Vec<u8> = (0..512 * block).map(|i| (i * 7 % 253) as u8).collect();
    let new: Vec<u8> = (0..64 * block).map(|i| (i * 11 % 241) as u8).collect();
    // A first run writes, and stops cleanly: a checkpoint.
    let mut assembled = assemble(&paths).unwrap();
    let engine = recover(&mut assembled).unwrap();
    let record = FailureRecord::of(&assembled);
    let thread = EngineThread::spawn(engine, assembled.drives, block as u32, record, REBUILD_THREADS).unwrap();
    let (to, answers) = reply();
    thread.tx.send(Message::Io { tag: 1, request: Request::Write { lba: 0, data: old.clone() }, reply: to }).unwrap();
    answers.recv().unwrap().1.unwrap();
    thread.tx.send(Message::Stop).unwrap();
    thread.join().unwrap();
    // A start from it, writes over part of the data, and a crash.
    let mut assembled = assemble(&paths).unwrap();
    let mut engine = recover(&mut assembled).unwrap();
    let generation = assembled.recovery_report.unwrap().checkpoint_generation;
    assert!(generation.is_some(), "the clean stop left a checkpoint");
    let written =
        run_to_response(&mut engine, &mut assembled.drives, 1, Request::Write { lba: 100, data: new.clone() });
    written.result.unwrap();
    drop(engine);
    drop(assembled);
    // The next start: the same checkpoint, and only what came after it replayed.
    let mut assembled = assemble(&paths).unwrap();
    let mut engine = recover(&mut assembled).unwrap();
    let report = assembled.recovery_report.unwrap();
    assert_eq!(report.checkpoint_generation, generation, "{report:?}");
    assert!(report.segments_replayed > 0, "{report:?}");
    let crash_start_blocks = report.blocks_read;
    let mut want = old.clone();
    want[100 * block..164 * block].copy_from_slice(&new);
    let read = run_to_response(&mut engine, &mut assembled.drives, 2, Request::Read { lba: 0, blocks: 512 });
    assert!(read.result.unwrap() == want, "every block reads back after the crash");
    // What a full replay reads, for comparison: the checkpoint is not offered.
    drop(engine);
    drop(assembled);
    let mut full = assemble(&paths).unwrap();
    full.checkpoint = None;
    recover(&mut full).unwrap();
    let full_report = full.recovery_report.unwrap();
    eprintln!(
        "start after a crash: {} blocks read from the checkpoint ({} segments replayed), {} replaying every segment",
        report.blocks_read, report.segments_replayed, full_report.blocks_read
    );
    assert!(crash_start_blocks < full_report.blocks_read);
}

/// An array formatted with an L2P budget keeps a checkpoint: each clean stop leaves one
/// (generations counting up, copies used in turn) and the next start begins from it, with
/// a drive failed too; a superblock newer than the checkpoint makes the start replay
/// instead; every block reads back each time.
#[test]
fn a_clean_stop_leaves_a_checkpoint_the_next_start_begins_from() {
    let (_dir, paths, block) = formatted_with_budget();
    let data: Vec<u8> = (0..256 * block).map(|i| (i * 13 % 251) as u8).collect();
    let mut reads = Vec::new();
    for run in 0..3u64 {
        let mut assembled = assemble(&paths).unwrap();
        assert!(assembled.checkpoint.is_some() && assembled.config.l2p.checkpoint, "the array keeps a checkpoint");
        let engine = recover(&mut assembled).unwrap();
        let report = assembled.recovery_report.unwrap();
        assert_eq!(report.checkpoint_generation, (run > 0).then_some(run), "run {run}");
        // The start kept the checkpoint it began from: a crash now would begin from it too.
        let area = assembled.checkpoint.unwrap().area;
        let uuid = assembled.config.array_uuid;
        let left = crate::records::checkpoint::read_newest(&mut assembled.drives, &[], area, uuid);
        let kept = left.newest.map(|image| image.generation);
        assert_eq!(kept, report.checkpoint_generation, "run {run}: the checkpoint used is kept, no other");
        reads.push(report.blocks_read);
        let record = FailureRecord::of(&assembled);
        let thread = EngineThread::spawn(engine, assembled.drives, block as u32, record, REBUILD_THREADS).unwrap();
        let (to, answers) = reply();
        let request = if run == 0 {
            Request::Write { lba: 0, data: data.clone() }
        } else {
            Request::Read { lba: 0, blocks: 256 }
        };
        thread.tx.send(Message::Io { tag: 1, request, reply: to }).unwrap();
        let got = answers.recv().unwrap().1.unwrap();
        assert!(run == 0 || got == data, "run {run}: the data reads back");
        if run == 1 {
            // A new superblock generation: the checkpoint the stop leaves goes with it, and
            // the last start begins from it degraded.
            let (done, result) = crossbeam_channel::bounded(1);
            thread.tx.send(Message::FailDrive { drive: 1, force: false, done }).unwrap();
            result.recv().unwrap().unwrap();
        }
        thread.tx.send(Message::Stop).unwrap();
        thread.join().unwrap();
    }
    eprintln!("blocks read at start: {reads:?}");
    // A superblock newer than the checkpoint (a failure or rebuild recorded after it, and
    // no clean stop since): the start replays every segment, and the data is all there.
    let mut assembled = assemble(&paths).unwrap();
    assert_eq!(assembled.failed, vec![1]);
    assembled.superblock.generation = (assembled.superblock.generation.get() + 1).into();
    let engine = recover(&mut assembled).unwrap();
    assert_eq!(assembled.recovery_report.unwrap().checkpoint_generation, None);
    let record = FailureRecord::of(&assembled);
    let thread = EngineThread::spawn(engine, assembled.drives, block as u32, record, REBUILD_THREADS).unwrap();
    let (to, answers) = reply();
    thread.tx.send(Message::Io { tag: 1, request: Request::Read { lba: 0, blocks: 256 }, reply: to }).unwrap();
    assert!(answers.recv().unwrap().1.unwrap() == data, "after a full replay");
    thread.tx.send(Message::Stop).unwrap();
    thread.join().unwrap();
}

/// The engine thread writes the checkpoints the engine takes while running (garbage
/// collection waits for them before it resets a segment) to the drives, as the next
/// generations: after overwrites that fill the array many times, the clean stop's
/// checkpoint comes after them, the next start begins from it, and every block reads back.
#[test]
fn checkpoints_taken_while_running_are_written_by_the_engine_thread() {
    let (_dir, paths, block) = formatted_with_budget();
    let mut assembled = assemble(&paths).unwrap();
    let engine = recover(&mut assembled).unwrap();
    let record = FailureRecord::of(&assembled);
    let thread = EngineThread::spawn(engine, assembled.drives, block as u32, record, REBUILD_THREADS).unwrap();
    let (lbas, per_write) = (2048u64, 64u64);
    let mut last = vec![0u64; lbas as usize];
    let (to, answers) = reply();
    let mut tag = 0;
    for round in 1..=12u64 {
        for first in (0..lbas).step_by(per_write as usize) {
            let data: Vec<u8> = (0..per_write as usize * block).map(|i| (i as u64 * 7 + first + round) as u8).collect();
            tag += 1;
            thread
                .tx
                .send(Message::Io { tag, request: Request::Write { lba: first, data }, reply: to.clone() })
                .unwrap();
            answers.recv().unwrap().1.unwrap();
            last[first as usize..(first + per_write) as usize].fill(round);
        }
    }
    let (status_to, status) = crossbeam_channel::bounded(1);
    thread.tx.send(Message::Status(status_to)).unwrap();
    let l2p = status.recv().unwrap().engine.l2p;
    eprintln!(
        "{} checkpoints written while running, {} incremental, {} bytes of images a copy",
        l2p.checkpoints_running, l2p.checkpoints_incremental, l2p.checkpoint_image_bytes
    );
    // Segments sealed between them: most leave out the tables of the last full one.
    assert!(l2p.checkpoints_incremental > 0, "{l2p:?}");
    thread.tx.send(Message::Stop).unwrap();
    thread.join().unwrap();
    let mut assembled = assemble(&paths).unwrap();
    let engine = recover(&mut assembled).unwrap();
    let report = assembled.recovery_report.unwrap();
    eprintln!("start after the stop: {report:?}");
    let generation = report.checkpoint_generation.expect("the start began from the stop's checkpoint");
    assert!(generation > 1, "no checkpoint was written while running before the stop's ({generation})");
    let record = FailureRecord::of(&assembled);
    let thread = EngineThread::spawn(engine, assembled.drives, block as u32, record, REBUILD_THREADS).unwrap();
    tag += 1;
    thread.tx.send(Message::Io { tag, request: Request::Read { lba: 0, blocks: lbas }, reply: to }).unwrap();
    let got = answers.recv().unwrap().1.unwrap();
    for first in (0..lbas).step_by(per_write as usize) {
        let round = last[first as usize];
        let want: Vec<u8> = (0..per_write as usize * block).map(|i| (i as u64 * 7 + first + round) as u8).collect();
        assert!(got[first as usize * block..][..want.len()] == want[..], "LBA {first} does not read back");
    }
    thread.tx.send(Message::Stop).unwrap();
    thread.join().unwrap();
}

/// The start resolves an incremental checkpoint from the full image in the other copy;
/// when that is not its base (overwritten, or lacking a table it leaves out), the other
/// copy is offered alone, older and whole, for recovery to judge.
#[test]
fn an_incremental_checkpoint_is_read_whole_from_its_base_or_the_older_copy_is_offered() {
    use zapraid_engine::format::{CheckpointImage, CheckpointSegment};
    let (_dir, paths, _) = formatted_with_budget();
    let mut assembled = assemble(&paths).unwrap();
    let area = assembled.checkpoint.unwrap().area;
    let uuid = assembled.config.array_uuid;
    let segment = |zone: u32, table: Vec<u8>, base_table_bytes: u64| CheckpointSegment {
        zone,
        sequence: u64::from(zone) + 10,
        sealed: true,
        open: false,
        appending: false,
        large: false,
        live_blocks: 1,
        table,
        base_table_bytes,
    };
    let base = CheckpointImage {
        array_uuid: uuid,
        generation: 5,
        next_sequence: 40,
        next_timestamp: 1000,
        superblock_generation: 1,
        entries_per_page: 1012,
        segments: vec![segment(3, vec![7; 24], 0)],
        directory: vec![u32::MAX; 4],
        base_generation: None,
        lost: Vec::new(),
    };
    let incremental = CheckpointImage {
        generation: base.next_generation(),
        base_generation: Some(base.generation),
        segments: vec![segment(3, Vec::new(), 24), segment(4, vec![9; 24], 0)],
        ..base.clone()
    };
    // Drive 0 keeps an older image where the incremental one goes (its write failed
    // there): the newest is read from the others.
    let oldest = CheckpointImage { generation: 2, ..base.clone() };
    for (image, skip) in [(&oldest, &[][..]), (&base, &[]), (&incremental, &[0])] {
        let (copies, result) = crate::records::checkpoint::write(&mut assembled.drives, skip, area, image);
        assert_eq!((copies, result), (4 - skip.len(), Ok(())));
    }
    let found = crate::records::checkpoint::read_newest(&mut assembled.drives, &[], area, uuid);
    let whole = found.newest.expect("a checkpoint read");
    assert_eq!((whole.generation, found.highest_generation), (6, 6));
    assert_eq!(whole.segments[0].table, vec![7; 24], "the table left out comes from the base");
    assert_eq!(whole.segments[1].table, vec![9; 24]);

    // Drive 0 alone holds an older image in the base's copy (the base's write failed
    // there): the base is found on the other drives.
    let older = CheckpointImage { generation: 3, ..base.clone() };
    let (copies, _) = crate::records::checkpoint::write(&mut assembled.drives, &[1, 2, 3], area, &older);
    assert_eq!(copies, 1);
    let found = crate::records::checkpoint::read_newest(&mut assembled.drives, &[], area, uuid);
    let whole = found.newest.expect("a checkpoint read");
    assert_eq!(whole.generation, 6);
    assert_eq!(whole.segments[0].table, vec![7; 24], "the base found on drive 1");

    // The base copy now holds a full image of the same generation lacking zone 3's table.
    let wrong_base = CheckpointImage { segments: vec![segment(5, vec![1; 24], 0)], ..base.clone() };
    let (copies, _) = crate::records::checkpoint::write(&mut assembled.drives, &[], area, &wrong_base);
    assert_eq!(copies, 4);
    let found = crate::records::checkpoint::read_newest(&mut assembled.drives, &[], area, uuid);
    assert_eq!(found.newest, Some(wrong_base), "the older copy is offered alone");
    assert_eq!(found.highest_generation, 6);
}

/// A clean stop while a failed drive is rebuilt onto a new one leaves a checkpoint (with
/// the superblock generation that records the rebuild), and the next start begins from
/// it, counting the new drive failed; the rebuild then resumes as `start` resumes it (the
/// new drive's zones that hold no segment reset, the others checked), completes, and every
/// block reads back; the start after the next stop begins from a checkpoint again.
#[test]
fn a_stop_during_a_rebuild_leaves_a_checkpoint_the_next_start_begins_from() {
    const REPLACED: usize = 1;
    // Slow enough that the rebuild is still running when the stop comes.
    const REBUILD_RATE_BYTES_PER_S: u64 = 16 << 10;
    let (dir, g, mut paths, options) = drive_files();
    let options = FormatOptions { l2p_budget_bytes: Some(4096), ..options };
    let block = format(&paths, &options, |_, _| {}).unwrap().block_size_bytes as usize;
    // More than a segment: a sealed one for the rebuild to write (the open one is
    // reclaimed instead).
    let (blocks, per_write) = (1024u64, 256u64);
    let data: Vec<u8> = (0..blocks as usize * block).map(|i| (i * 17 % 239) as u8).collect();
    let read_all = |thread: &EngineThread, tag: u64| {
        let (to, answers) = reply();
        thread.tx.send(Message::Io { tag, request: Request::Read { lba: 0, blocks }, reply: to }).unwrap();
        answers.recv().unwrap().1.unwrap()
    };
    let status = |thread: &EngineThread| {
        let (status_to, status) = crossbeam_channel::bounded(1);
        thread.tx.send(Message::Status(status_to)).unwrap();
        status.recv().unwrap().engine
    };

    // Written, drive 1 failed and replaced, and a clean stop while it is rebuilt.
    let mut assembled = assemble(&paths).unwrap();
    let reserved_zones = assembled.superblock.reserved_zones.get();
    let engine = recover(&mut assembled).unwrap();
    let record = FailureRecord::of(&assembled);
    let thread = EngineThread::spawn(engine, assembled.drives, block as u32, record, REBUILD_THREADS).unwrap();
    let (to, answers) = reply();
    for (tag, lba) in (1..).zip((0..blocks).step_by(per_write as usize)) {
        let part = data[lba as usize * block..][..per_write as usize * block].to_vec();
        thread.tx.send(Message::Io { tag, request: Request::Write { lba, data: part }, reply: to.clone() }).unwrap();
        answers.recv().unwrap().1.unwrap();
    }
    let (done, result) = crossbeam_channel::bounded(1);
    thread.tx.send(Message::FailDrive { drive: REPLACED, force: false, done }).unwrap();
    result.recv().unwrap().unwrap();
    let new_path = dir.path().join("new.zns");
    EmulatedDrive::create_file(&new_path, g, 99).unwrap();
    let device =
        crate::assemble::new_drive::prepare_new_drive(&new_path, REPLACED, &g, reserved_zones, &[], false).unwrap();
    let (done, result) = crossbeam_channel::bounded(1);
    let rate = Some(REBUILD_RATE_BYTES_PER_S);
    let path = new_path.clone();
    let message = Message::ReplaceDrive {
        drive: REPLACED,
        device,
        path,
        checkpoint_part: None,
        rebuild_rate_bytes_per_s: rate,
        done,
    };
    thread.tx.send(message).unwrap();
    result.recv().unwrap().unwrap();
    let rebuild = status(&thread).rebuild.expect("the rebuild runs");
    thread.tx.send(Message::Stop).unwrap();
    thread.join().unwrap();
    paths[REPLACED] = new_path;

    // The start: from the stop's checkpoint, the rebuild recorded in progress.
    let mut assembled = assemble(&paths).unwrap();
    assert_eq!(assembled.superblock.rebuilding_drives.get(), 1 << REPLACED, "the rebuild is recorded");
    let mut engine = recover(&mut assembled).unwrap();
    let report = assembled.recovery_report.unwrap();
    eprintln!(
        "stopped with {} of {} segments rebuilt; the start read {} blocks{}",
        rebuild.segments_rebuilt,
        rebuild.segments_rebuilt + rebuild.segments_left,
        report.blocks_read,
        report.checkpoint_generation.map_or(String::new(), |g| format!(" from checkpoint {g}"))
    );
    assert!(report.checkpoint_generation.is_some(), "the start during the rebuild replayed: {report:?}");
    assert_eq!(crate::assemble::recover::rebuilding_drive(&assembled), Some(REPLACED));
    crate::assemble::recover::reset_unused_zones(&mut assembled, REPLACED, &engine.zones_holding_segments()).unwrap();
    engine.resume_drive_rebuild(REPLACED).unwrap();
    let record = FailureRecord::of(&assembled);
    let thread = EngineThread::spawn(engine, assembled.drives, block as u32, record, REBUILD_THREADS).unwrap();
    assert!(read_all(&thread, 100) == data, "every block reads back while the rebuild resumes");
    let started = Instant::now();
    while status(&thread).rebuild.is_some() {
        assert!(started.elapsed() < Duration::from_secs(60), "the resumed rebuild did not complete");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(status(&thread).failed_drives.is_empty(), "the new drive is not failed once rebuilt");
    assert!(read_all(&thread, 101) == data, "every block reads back once rebuilt");
    thread.tx.send(Message::Stop).unwrap();
    thread.join().unwrap();

    // Rebuilt: the next start reads the new drive too, from the last stop's checkpoint.
    let mut assembled = assemble(&paths).unwrap();
    assert_eq!(assembled.superblock.rebuilding_drives.get(), 0);
    assert!(assembled.failed.is_empty(), "{:?}", assembled.failed);
    let engine = recover(&mut assembled).unwrap();
    assert!(assembled.recovery_report.unwrap().checkpoint_generation.is_some());
    let record = FailureRecord::of(&assembled);
    let thread = EngineThread::spawn(engine, assembled.drives, block as u32, record, REBUILD_THREADS).unwrap();
    assert!(read_all(&thread, 102) == data, "every block reads back after the rebuild");
    thread.tx.send(Message::Stop).unwrap();
    thread.join().unwrap();
}
