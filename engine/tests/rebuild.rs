//! Full-drive rebuild (`Engine::rebuild_drive`), online: a drive fails, a new empty drive
//! takes its place and every segment is rebuilt onto it while writes and reads go on.
//! Afterwards *another* drive fails and everything still reads back as a reference map
//! says: the rebuilt drive holds the right data, parity and metadata. A clean stop and a
//! restart after the rebuild read the new drive's headers and footers too.

use std::collections::HashMap;

use zapraid_engine::{Config, Mode, OpenSegments, RaidLevel, Request, Simulator};
use zapraid_zns::Geometry;

mod common;
use common::BLOCK;

const LOGICAL_BLOCKS: u64 = 96;

/// Enough zones that the runs fill several segments but never the array.
const ZONES: u32 = 40;

fn geometry() -> Geometry {
    common::geometry(ZONES, 8, 10)
}

#[derive(Clone, Copy, Debug)]
struct Scheme {
    level: RaidLevel,
    mode: Mode,
    chunk_blocks: u64,
    open: OpenSegments,
}

impl Scheme {
    fn config(&self) -> Config {
        Config { open_segments: self.open, ..common::config(self.level, self.mode, self.chunk_blocks, LOGICAL_BLOCKS) }
    }
}

fn schemes() -> Vec<Scheme> {
    let single = OpenSegments::SINGLE;
    let hybrid = OpenSegments { small: 2, large: 1, large_chunk_bytes: 2 * BLOCK as u64 };
    let (raid5, raid6) = (RaidLevel::Raid5 { drives: 4 }, RaidLevel::Raid6 { drives: 5 });
    let mut schemes = Vec::new();
    for level in [raid5, raid6] {
        for mode in [Mode::ZapRaid { group_size: 4 }, Mode::ZoneWriteOnly, Mode::ZoneAppendOnly] {
            for chunk_blocks in [1, 2] {
                schemes.push(Scheme { level, mode, chunk_blocks, open: single });
            }
        }
        schemes.push(Scheme { level, mode: Mode::ZapRaid { group_size: 4 }, chunk_blocks: 1, open: hybrid });
    }
    schemes
}

/// A run against a reference map of what each block holds.
struct Run {
    sim: Simulator,
    model: HashMap<u64, Vec<u8>>,
    next_id: u64,
    round: u8,
    what: String,
}

impl Run {
    fn block(lba: u64, round: u8) -> Vec<u8> {
        (0..BLOCK).map(|i| round ^ (lba as u8).wrapping_mul(13) ^ (i as u8).wrapping_mul(7)).collect()
    }

    /// Writes of 1 to 5 blocks over `lbas`, all in flight at once; returns their ids.
    fn write_round(&mut self, lbas: std::ops::Range<u64>) -> Vec<u64> {
        let mut ids = Vec::new();
        self.round = self.round.wrapping_add(1);
        let mut lba = lbas.start;
        while lba < lbas.end {
            let blocks = (1 + (lba + u64::from(self.round)) % 5).min(lbas.end - lba);
            let data: Vec<u8> = (lba..lba + blocks).flat_map(|l| Self::block(l, self.round)).collect();
            for l in lba..lba + blocks {
                self.model.insert(l, Self::block(l, self.round));
            }
            self.sim.submit(self.next_id, Request::Write { lba, data });
            ids.push(self.next_id);
            self.next_id += 1;
            lba += blocks;
        }
        ids
    }

    fn settle(&mut self) {
        for response in self.sim.run_until_idle() {
            assert!(response.result.is_ok(), "{}: a request failed: {:?}", self.what, response.result);
        }
    }

    fn verify(&mut self, when: &str) {
        let id = self.next_id;
        self.next_id += 1;
        self.sim.submit(id, Request::Read { lba: 0, blocks: LOGICAL_BLOCKS });
        let got = self.sim.run_until_response(id).expect("read answered").result;
        let got = got.unwrap_or_else(|e| panic!("{} {when}: read failed: {e}", self.what));
        for lba in 0..LOGICAL_BLOCKS {
            let want = self.model.get(&lba).cloned().unwrap_or_else(|| vec![0; BLOCK]);
            assert!(got[lba as usize * BLOCK..][..BLOCK] == want[..], "{} {when}: LBA {lba} differs", self.what);
        }
    }

    /// Fails `drive` (it stops answering, as a pulled drive), writes degraded, replaces it
    /// with a new drive and rebuilds it while writing and reading.
    fn fail_and_replace(&mut self, drive: usize, seed: u64) {
        self.sim.drives[drive].fail();
        self.sim.engine.fail_drive(drive);
        // Only part of the space is written from now on: the rest stays in the segments
        // the rebuild must give back.
        self.write_round(0..LOGICAL_BLOCKS / 8);
        self.settle();
        self.verify(&format!("with drive {drive} failed"));
        let relocated_before = self.sim.engine.status().blocks_relocated;
        self.sim.replace_drive(drive, seed).unwrap_or_else(|e| panic!("{}: replace drive {drive}: {e}", self.what));
        let rebuilding = self.sim.engine.status().rebuild.expect("a rebuild runs");
        assert_eq!(rebuilding.drive, drive);
        assert!(rebuilding.segments_left > 0, "{}: nothing to rebuild: {rebuilding:?}", self.what);
        // Reads and writes while the rebuild runs (it starts with the first read).
        self.verify(&format!("as drive {drive} starts being rebuilt"));
        for _ in 0..2 {
            for id in self.write_round(LOGICAL_BLOCKS / 8..LOGICAL_BLOCKS / 4) {
                let response = self.sim.run_until_response(id).expect("write answered");
                assert!(response.result.is_ok(), "{}: a write failed: {:?}", self.what, response.result);
            }
            self.verify(&format!("while drive {drive} is rebuilt"));
        }
        self.settle();
        let status = self.sim.engine.status();
        assert!(status.rebuild.is_none(), "{}: the rebuild did not finish: {status:?}", self.what);
        let moved = status.blocks_relocated - relocated_before;
        assert!(
            moved < LOGICAL_BLOCKS / 2,
            "{}: garbage collection moved {moved} blocks: little to rebuild",
            self.what
        );
        assert!(status.failed_drives.is_empty(), "{}: drives failed: {status:?}", self.what);
        self.verify(&format!("after drive {drive} was rebuilt"));
    }
}

fn rebuild_then_fail_others(scheme: Scheme) {
    let what = format!("{scheme:?}");
    let sim = Simulator::new(geometry(), scheme.config(), 7, None).unwrap();
    let mut run = Run { sim, model: HashMap::new(), next_id: 0, round: 0, what };
    for _ in 0..6 {
        run.write_round(0..LOGICAL_BLOCKS);
    }
    // Rewrites of a few blocks fill and seal the segment the last full round ended in: the
    // rest of the data lives in sealed segments, which only the rebuild gives back (the
    // segments open at the replacement are reclaimed by garbage collection instead).
    for _ in 0..40 {
        run.write_round(0..LOGICAL_BLOCKS / 16);
        run.settle();
    }
    run.settle();
    assert!(run.sim.engine.status().segments >= 4, "{}: too few segments to rebuild", run.what);
    // A clean stop and a restart first: the segment open at the stop is kept, complete but
    // not full (its zones finished after a stop footer), and is rebuilt like the others.
    run.sim.stop();
    let drives = std::mem::replace(&mut run.sim, Simulator::new(geometry(), scheme.config(), 0, None).unwrap())
        .power_cut()
        .unwrap();
    run.sim = Simulator::recover(geometry(), scheme.config(), drives)
        .unwrap_or_else(|e| panic!("{}: restart before the failure: {e}", run.what));
    run.verify("after a restart before the failure");
    let m = scheme.level.tolerated_failures();
    let replaced: Vec<usize> = [1, 3].into_iter().take(m).collect();
    for (i, &drive) in replaced.iter().enumerate() {
        run.fail_and_replace(drive, 100 + i as u64);
    }
    assert_eq!(run.sim.engine.status().rebuilds_completed, replaced.len() as u64);
    // The rebuilt drives survive a clean stop and a restart (their headers and footers).
    run.sim.stop();
    let drives = std::mem::replace(&mut run.sim, Simulator::new(geometry(), scheme.config(), 0, None).unwrap())
        .power_cut()
        .unwrap();
    run.sim = Simulator::recover(geometry(), scheme.config(), drives)
        .unwrap_or_else(|e| panic!("{}: restart after the rebuild: {e}", run.what));
    run.verify("after a restart");
    // Other drives fail: what is read now comes from the rebuilt ones.
    let others: Vec<usize> = [0, 2].into_iter().take(m).collect();
    for &drive in &others {
        run.sim.drives[drive].fail();
        run.sim.engine.fail_drive(drive);
    }
    run.verify(&format!("with drives {others:?} failed after the rebuild"));
}

#[test]
fn rebuilt_drives_hold_everything() {
    for scheme in schemes() {
        rebuild_then_fail_others(scheme);
    }
}

/// The new drive fails in the middle of its rebuild: the rebuild stops, the drive counts
/// as failed again, nothing is lost (segments written to it since are rebuilt from the
/// others on read), and another new drive then takes its place.
#[test]
fn a_new_drive_failing_during_its_rebuild_loses_nothing() {
    let scheme = Scheme {
        level: RaidLevel::Raid5 { drives: 4 },
        mode: Mode::ZapRaid { group_size: 4 },
        chunk_blocks: 2,
        open: OpenSegments::SINGLE,
    };
    let sim = Simulator::new(geometry(), scheme.config(), 9, None).unwrap();
    let mut run = Run { sim, model: HashMap::new(), next_id: 0, round: 0, what: format!("{scheme:?}") };
    for _ in 0..6 {
        run.write_round(0..LOGICAL_BLOCKS);
    }
    run.settle();
    run.sim.drives[2].fail();
    run.sim.engine.fail_drive(2);
    run.sim.replace_drive(2, 50).unwrap();
    run.write_round(0..LOGICAL_BLOCKS / 8);
    // Under way: the first blocks are on the new drive.
    while run.sim.engine.status().rebuild.is_some_and(|r| r.blocks_written == 0) {
        assert!(run.sim.step(), "the rebuild stalled");
    }
    assert!(run.sim.engine.status().rebuild.is_some(), "the rebuild ended too soon for the test");
    run.sim.drives[2].fail();
    run.settle();
    let status = run.sim.engine.status();
    assert!(status.rebuild.is_none() && status.failed_drives == [2], "{status:?}");
    assert_eq!(status.rebuilds_completed, 0);
    run.verify("after the new drive failed during its rebuild");
    run.sim.replace_drive(2, 51).unwrap();
    run.settle();
    let status = run.sim.engine.status();
    assert!(status.rebuild.is_none() && status.failed_drives.is_empty(), "{status:?}");
    assert_eq!(status.rebuilds_completed, 1);
    run.sim.drives[0].fail();
    run.sim.engine.fail_drive(0);
    run.verify("with drive 0 failed after the second rebuild");
}

/// A paced rebuild (`Engine::set_rebuild_rate`) keeps to its rate: at every step, the
/// bytes written to the new drive are at most the rate times the virtual time since the
/// replacement plus the burst the engine states; it is really paced (it takes at least
/// virtual time, where the same rebuild unpaced takes none on drives without timing);
/// lifting the limit midway lets it finish at once; and the
/// rebuilt drive holds everything. Counts and virtual time, never wall-clock.
#[test]
fn a_paced_rebuild_keeps_to_its_rate() {
    const RATE_BYTES_PER_S: u64 = 1 << 20;
    const DRIVE: usize = 1;
    let scheme = Scheme {
        level: RaidLevel::Raid5 { drives: 4 },
        mode: Mode::ZapRaid { group_size: 4 },
        chunk_blocks: 2,
        open: OpenSegments::SINGLE,
    };
    // Transfers of at most a chunk: the burst (a few of the largest writes) stays small
    // against what the rebuild writes.
    let geometry = Geometry { max_transfer_blocks: 2, ..geometry() };
    let filled = |seed| {
        let sim = Simulator::new(geometry, scheme.config(), seed, None).unwrap();
        let mut run = Run { sim, model: HashMap::new(), next_id: 0, round: 0, what: format!("{scheme:?}") };
        for _ in 0..6 {
            run.write_round(0..LOGICAL_BLOCKS);
        }
        run.settle();
        run.sim.drives[DRIVE].fail();
        run.sim.engine.fail_drive(DRIVE);
        run
    };
    // Unpaced, on drives without timing, the rebuild takes no virtual time at all.
    let mut unpaced = filled(11);
    let started = unpaced.sim.now_ns();
    unpaced.sim.replace_drive(DRIVE, 60).unwrap();
    unpaced.settle();
    assert_eq!(unpaced.sim.engine.status().rebuilds_completed, 1);
    assert_eq!(unpaced.sim.now_ns(), started);

    let mut run = filled(11);
    run.sim.set_rebuild_rate(Some(RATE_BYTES_PER_S));
    assert_eq!(run.sim.engine.status().rebuild_rate_bytes_per_s, Some(RATE_BYTES_PER_S));
    let burst = run.sim.engine.rebuild_burst_bytes();
    assert!(burst > 0 && burst <= 16 * BLOCK as u64, "burst {burst} B");
    let started = run.sim.now_ns();
    run.sim.replace_drive(DRIVE, 60).unwrap();
    let mut written_bytes = 0;
    let mut steps = 0u64;
    while let Some(r) = run.sim.engine.status().rebuild {
        written_bytes = r.blocks_written * BLOCK as u64;
        let elapsed_ns = u128::from(run.sim.now_ns() - started);
        let allowed = u128::from(burst) * 1_000_000_000 + u128::from(RATE_BYTES_PER_S) * elapsed_ns;
        assert!(
            u128::from(written_bytes) * 1_000_000_000 <= allowed,
            "{written_bytes} B written {elapsed_ns} ns into a rebuild paced at {RATE_BYTES_PER_S} B/s (burst {burst} B)"
        );
        // Halfway through its bytes (the new drive gets about a third of the data), the
        // limit goes.
        if steps == 0 && written_bytes > 100 * BLOCK as u64 {
            assert!(elapsed_ns > 0, "not paced: {written_bytes} B in no time");
            run.sim.set_rebuild_rate(None);
            steps += 1;
            let lifted_at = run.sim.now_ns();
            run.settle();
            assert_eq!(run.sim.now_ns(), lifted_at, "unpaced, the rest takes no virtual time");
            break;
        }
        assert!(run.sim.step(), "a paced rebuild stalled (no timer to wake it)");
    }
    assert_eq!(steps, 1, "the rebuild wrote only {written_bytes} B");
    let status = run.sim.engine.status();
    assert!(status.rebuild.is_none() && status.rebuilds_completed == 1, "{status:?}");
    assert_eq!(status.rebuild_rate_bytes_per_s, None);
    run.verify("after a paced rebuild");
    run.sim.drives[0].fail();
    run.sim.engine.fail_drive(0);
    run.verify("with drive 0 failed after a paced rebuild");
}

/// Power is cut in the middle of a rebuild; the array recovers with the drive counted
/// failed (as a real array's superblock records it rebuilding) and the rebuild resumes
/// onto the same drive (`Simulator::resume_rebuild`): the segments the first rebuild
/// completed are kept, not written again (the resumed rebuild writes fewer blocks than a
/// whole one), the half-written ones are rebuilt, and every block reads back, after a
/// restart too, and with another drive failed afterwards. For each scheme, with a segment
/// rebuilt at a time and the cut at several points, and with several at once (several
/// zones half written at the cut).
#[test]
fn a_rebuild_cut_short_resumes_where_it_left_off() {
    for scheme in schemes() {
        for cut_after_segments in [1, 2] {
            resume_after_cut(scheme, cut_after_segments, 1);
        }
        resume_after_cut(scheme, 1, 2);
    }
}

fn resume_after_cut(scheme: Scheme, cut_after_segments: u64, at_once: u32) {
    const DRIVE: usize = 1;
    let what = format!("{scheme:?}, cut after {cut_after_segments} segments, {at_once} segments at once");
    let filled = || {
        let mut sim = Simulator::new(geometry(), scheme.config(), 21, None).unwrap();
        sim.engine.set_rebuild_segments_at_once(at_once);
        assert_eq!(sim.engine.rebuild_segments_at_once(), at_once, "{what}: the drives allow it");
        let mut run = Run { sim, model: HashMap::new(), next_id: 0, round: 0, what: what.clone() };
        for _ in 0..6 {
            run.write_round(0..LOGICAL_BLOCKS);
        }
        run.settle();
        run.sim.drives[DRIVE].fail();
        run.sim.engine.fail_drive(DRIVE);
        run
    };
    // Until it ends, what the rebuild has written (status is gone once it is done).
    let written_until_done = |run: &mut Run| {
        let mut written = 0;
        while let Some(r) = run.sim.engine.status().rebuild {
            written = r.blocks_written;
            if !run.sim.step() {
                break;
            }
        }
        written
    };
    let mut whole = filled();
    whole.sim.replace_drive(DRIVE, 70).unwrap();
    let whole_blocks = written_until_done(&mut whole);

    let mut run = filled();
    run.sim.replace_drive(DRIVE, 70).unwrap();
    while run.sim.engine.status().rebuild.is_some_and(|r| r.segments_rebuilt < cut_after_segments) {
        assert!(run.sim.step(), "{what}: stalled");
    }
    let Some(before) = run.sim.engine.status().rebuild else {
        panic!("{what}: the rebuild ended before the cut");
    };
    if at_once == 1 {
        // A few steps more: the next segment is half written (with several at once, the
        // others were under way beside the one completed).
        for _ in 0..10 {
            run.sim.step();
        }
    }
    let drives = std::mem::replace(&mut run.sim, Simulator::new(geometry(), scheme.config(), 0, None).unwrap())
        .power_cut()
        .unwrap();
    run.sim = Simulator::recover_with_failed(geometry(), scheme.config(), drives, &[DRIVE])
        .unwrap_or_else(|e| panic!("{what}: recovery: {e}"));
    run.sim.engine.set_rebuild_segments_at_once(at_once);
    run.sim.resume_rebuild(DRIVE).unwrap_or_else(|e| panic!("{what}: resume: {e}"));
    let mut kept = 0;
    let mut resumed_blocks = 0;
    while let Some(r) = run.sim.engine.status().rebuild {
        kept = run.sim.engine.rebuild_segments_kept().unwrap_or(kept);
        resumed_blocks = r.blocks_written;
        if !run.sim.step() {
            break;
        }
    }
    run.settle();
    let status = run.sim.engine.status();
    assert!(status.rebuild.is_none() && status.failed_drives.is_empty(), "{what}: {status:?}");
    assert!(kept >= before.segments_rebuilt, "{what}: kept {kept} of {} segments rebuilt", before.segments_rebuilt);
    assert!(before.segments_rebuilt > 0, "{what}: no segment was complete at the cut, so none could be kept");
    assert!(
        resumed_blocks < whole_blocks,
        "{what}: the resumed rebuild wrote {resumed_blocks} blocks, a whole one {whole_blocks}"
    );
    run.verify("after the resumed rebuild");
    // A restart reads the kept segments' headers and footers from the drive.
    run.sim.stop();
    let drives = std::mem::replace(&mut run.sim, Simulator::new(geometry(), scheme.config(), 0, None).unwrap())
        .power_cut()
        .unwrap();
    run.sim = Simulator::recover(geometry(), scheme.config(), drives)
        .unwrap_or_else(|e| panic!("{what}: restart after the resumed rebuild: {e}"));
    run.verify("after a restart");
    run.sim.drives[0].fail();
    run.sim.engine.fail_drive(0);
    run.verify("with drive 0 failed after the resumed rebuild");
}
