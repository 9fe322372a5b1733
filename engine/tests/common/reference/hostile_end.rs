//! The end of a hostile run: one beyond tolerance must still stop; one within tolerance
//! has every block read, garbage collection reclaims every segment
//! those reads (and the scrubs and rebuilds before) found holes in, and then the LBAs
//! whose reads fail must be exactly those the engine counts lost (each failing with
//! `Error::Lost`), the same after a clean stop and start and after a crash and start.
//! A discarded LBA may come back at such a start (a start that replays the log), as a
//! block damaged beyond parity too: it is counted once the reads after the start found
//! its segment's holes and garbage collection reclaimed it.
//! A segment still open is not reclaimed (garbage collection takes sealed ones): when one
//! is left with holes, a clean stop and start closes it first.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering;

use proptest::prelude::*;
use zapraid_engine::{Config, Error, Status};
use zapraid_zns::Geometry;

use crate::common::array::{Array, Sharding};

use super::faults::{
    self, read_each, Faults, Inbox, BLOCKS_LOST, ENDED_BEYOND_TOLERANCE, EXACT_COUNTS, OPEN_SEGMENTS_WITH_HOLES,
};
use super::BLOCK;

pub(crate) struct End<'a> {
    pub(crate) sharding: Sharding,
    pub(crate) geometry: Geometry,
    pub(crate) config: Config,
    pub(crate) model: &'a HashMap<u64, Vec<u8>>,
    pub(crate) uncertain: &'a HashSet<u64>,
    /// LBAs discarded since last written: a start that replays the log may bring back
    /// what they held (a discard is not in the log), lost or not.
    pub(crate) discarded: &'a HashSet<u64>,
    pub(crate) what: &'a str,
}

impl End<'_> {
    pub(crate) fn check<A: Array>(
        &self,
        mut sim: A,
        mut faults: Faults,
        mut inbox: Inbox,
        mut id: u64,
    ) -> Result<Status, TestCaseError> {
        let what = self.what;
        faults.observe(&sim);
        prop_assert!(sim.status().scrub.running.is_none(), "{}: a scrub never ended", what);
        if faults.beyond(&sim) {
            // Still more drives out than parity covers: nothing is counted exactly then (new
            // writes fail, garbage collection cannot write markers). A rebuild begun then
            // never ends: it waits for garbage collection to reclaim the segments open at
            // its start, which cannot write (an engine bug, reported: a rebuild of drive 1
            // of RAID-0 over 3 drives with drive 2 failed). The array still stops.
            ENDED_BEYOND_TOLERANCE.fetch_add(1, Ordering::Relaxed);
            faults::stop(&mut sim, what)?;
            return Ok(sim.status());
        }
        prop_assert!(sim.status().rebuild.is_none(), "{}: a rebuild never ended", what);
        // Every block reads as the model says, or fails if it may be lost.
        let (data, _, _) = read_each(&mut sim, &mut inbox, &mut id, what)?;
        self.check_data(&faults, &data, "first read of every block")?;
        // Garbage collection reclaims every segment with holes, recording their blocks lost.
        inbox.settle(&mut sim, what)?;
        if sim.status().segments_with_holes > 0 {
            // Only a segment still open (garbage collection takes sealed ones): a clean
            // stop closes it, and the reads after the start find its holes again.
            OPEN_SEGMENTS_WITH_HOLES.fetch_add(1, Ordering::Relaxed);
            sim = self.restart(sim, &mut faults, &mut inbox, false, "closing the open segment with holes")?;
            read_each(&mut sim, &mut inbox, &mut id, what)?;
            inbox.settle(&mut sim, what)?;
        }
        prop_assert_eq!(sim.status().segments_with_holes, 0, "{}: segments with holes left", what);
        let (data, lost, other) = read_each(&mut sim, &mut inbox, &mut id, what)?;
        self.check_data(&faults, &data, "second read of every block")?;
        prop_assert!(
            other.is_empty(),
            "{}: reads fail without their LBA recorded lost ({} recorded lost): {:?}",
            what,
            sim.status().blocks_lost,
            other
        );
        prop_assert_eq!(lost.len() as u64, sim.status().blocks_lost, "{}: lost LBAs {:?}", what, lost);
        BLOCKS_LOST.fetch_add(lost.len(), Ordering::Relaxed);
        EXACT_COUNTS.fetch_add(1, Ordering::Relaxed);
        // The same after a clean stop and start, and after a crash and start.
        let kept =
            |set: &BTreeSet<u64>| -> BTreeSet<u64> { set.difference(&self.ordered_discarded()).copied().collect() };
        for crash in [false, true] {
            let how = if crash { "after a crash and start" } else { "after a clean stop and start" };
            sim = self.restart(sim, &mut faults, &mut inbox, crash, how)?;
            let (again, lost_again, other) = read_each(&mut sim, &mut inbox, &mut id, what)?;
            // A discarded LBA may come back at a start that replays the log, as what the log
            // holds of it: a block damaged beyond parity is found to be one only when a read
            // comes across it (its segment then has holes) and is recorded lost once garbage
            // collection reclaims its segment; the LBAs not discarded must be as they were.
            let other_kept: Vec<&(u64, Error)> = other.iter().filter(|(l, _)| !self.discarded.contains(l)).collect();
            prop_assert!(
                other_kept.is_empty(),
                "{}: {}: reads fail without their LBA recorded lost: {:?}",
                what,
                how,
                other_kept
            );
            prop_assert_eq!(kept(&lost_again), kept(&lost), "{}: {}: other LBAs lost", what, how);
            for lba in (0..data.len()).filter(|&l| !self.discarded.contains(&(l as u64))) {
                prop_assert!(again[lba] == data[lba], "{}: {}: LBA {} reads otherwise", what, how, lba);
            }
            inbox.settle(&mut sim, what)?;
            prop_assert_eq!(sim.status().segments_with_holes, 0, "{}: {}: segments with holes left", what, how);
            let (_, lost_again, other) = read_each(&mut sim, &mut inbox, &mut id, what)?;
            prop_assert!(
                other.is_empty(),
                "{}: {}: reads fail without their LBA recorded lost: {:?}",
                what,
                how,
                other
            );
            prop_assert_eq!(lost_again.len() as u64, sim.status().blocks_lost, "{}: {}", what, how);
            prop_assert_eq!(kept(&lost_again), kept(&lost), "{}: {}: other LBAs lost", what, how);
        }
        Ok(sim.status())
    }

    /// A clean stop and start (offered the stop's checkpoint), or a crash and start
    /// (replaying every segment), within tolerance; settled.
    fn restart<A: Array>(
        &self,
        mut sim: A,
        faults: &mut Faults,
        inbox: &mut Inbox,
        crash: bool,
        how: &str,
    ) -> Result<A, TestCaseError> {
        let what = self.what;
        let images = if crash {
            Vec::new()
        } else {
            faults::stop(&mut sim, what)?;
            sim.stop_checkpoints()
        };
        let mut sim = faults
            .start(&mut sim, self.sharding, self.geometry, self.config, images, crash, what)?
            .ok_or_else(|| TestCaseError::fail(format!("{what}: {how}: within tolerance, the start failed")))?;
        inbox.clear();
        inbox.settle(&mut sim, what)?;
        Ok(sim)
    }

    fn ordered_discarded(&self) -> BTreeSet<u64> {
        self.discarded.iter().copied().collect()
    }

    /// Each block read (`None`: the read failed) is the model's, or one of its failed
    /// writes', or failed for an LBA that may be lost; those made uncertain by a crash
    /// aside.
    fn check_data(&self, faults: &Faults, data: &[Option<Vec<u8>>], when: &str) -> Result<(), TestCaseError> {
        // Discarded LBAs may come back at a start that replays the log (as uncertain ones).
        let skip = |l: &u64| self.uncertain.contains(l) || self.discarded.contains(l);
        for (lba, got) in (0u64..).zip(data).filter(|(l, _)| !skip(l)) {
            match got {
                Some(got) => {
                    let want = self.model.get(&lba).cloned().unwrap_or_else(|| vec![0; BLOCK]);
                    prop_assert!(
                        faults.allowed(lba, &want, got),
                        "{}: {}: LBA {} differs (reads {})",
                        self.what,
                        when,
                        lba,
                        describe(got, &want)
                    );
                }
                None => prop_assert!(
                    faults.maybe_lost.contains(&lba),
                    "{}: {}: LBA {} fails and was never damaged nor beyond tolerance",
                    self.what,
                    when,
                    lba
                ),
            }
        }
        Ok(())
    }
}

/// What a block read instead of `want`: zeros, or how many bytes differ.
pub(crate) fn describe(got: &[u8], want: &[u8]) -> String {
    if got.iter().all(|b| *b == 0) {
        return "zeros".into();
    }
    format!("{} of {} bytes differ", got.iter().zip(want).filter(|(a, b)| a != b).count(), want.len())
}
