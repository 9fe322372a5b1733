//! What the parts of one emulated drive share (`EmulatedDrive::split`): the drive's count
//! of open and active zones, against its limits, and whether the drive has failed. A
//! whole drive is one part of itself and uses the same.
//!
//! The counts change only when a zone enters or leaves the open or active states (a
//! first write to an empty zone, an open, close, finish or reset), never on a read or on
//! a write inside an open zone, so parts on different threads write nothing shared on
//! the data path. `failed` is written once, when the drive fails, and read per command.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::geometry::Geometry;

/// Keeps what one thread writes off the cache line another reads per command.
#[repr(align(64))]
struct CacheLine<T>(T);

/// A drive's open and active zone counts and its failure, shared by its parts.
pub(super) struct SharedState {
    /// Open zones in the low 32 bits, active zones in the high 32: both change in one
    /// compare-and-swap, so a part never takes an open slot the active limit refuses.
    zone_counts: CacheLine<AtomicU64>,
    failed: CacheLine<AtomicBool>,
}

/// The limit a change of zone counts would pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shortage {
    Active(u32),
    Open(u32),
}

fn pack(open: u32, active: u32) -> u64 {
    u64::from(open) | (u64::from(active) << 32)
}

fn unpack(counts: u64) -> (u32, u32) {
    (counts as u32, (counts >> 32) as u32)
}

impl SharedState {
    pub(super) fn new(open: u32, active: u32) -> Self {
        SharedState {
            zone_counts: CacheLine(AtomicU64::new(pack(open, active))),
            failed: CacheLine(AtomicBool::new(false)),
        }
    }

    /// Open and active zones of the whole drive.
    pub(super) fn zone_counts(&self) -> (u32, u32) {
        unpack(self.zone_counts.0.load(Ordering::Acquire))
    }

    /// Adds `open` and `active` (each -1, 0 or 1) to the counts, unless an increase would
    /// pass the drive's limit: then nothing changes and the limit is named (the active
    /// limit first, as a drive checks it before making room among open zones).
    pub(super) fn change_zone_counts(&self, open: i32, active: i32, geometry: &Geometry) -> Result<(), Shortage> {
        debug_assert!((-1..=1).contains(&open) && (-1..=1).contains(&active));
        let mut shortage = None;
        let updated = self.zone_counts.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |counts| {
            let (o, a) = unpack(counts);
            let (o, a) = (o.checked_add_signed(open)?, a.checked_add_signed(active)?);
            match (geometry.max_active_zones, geometry.max_open_zones) {
                (Some(limit), _) if active > 0 && a > limit => shortage = Some(Shortage::Active(limit)),
                (_, Some(limit)) if open > 0 && o > limit => shortage = Some(Shortage::Open(limit)),
                _ => return Some(pack(o, a)),
            }
            None
        });
        match (updated, shortage) {
            (Ok(_), _) => Ok(()),
            (Err(_), Some(shortage)) => Err(shortage),
            // Only a count below zero fails without a shortage: the states and counts of
            // some part have drifted apart.
            (Err(counts), None) => {
                debug_assert!(false, "zone counts {:?} would go negative", unpack(counts));
                Ok(())
            }
        }
    }

    pub(super) fn fail(&self) {
        self.failed.0.store(true, Ordering::Release);
    }

    pub(super) fn is_failed(&self) -> bool {
        self.failed.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry() -> Geometry {
        Geometry { max_open_zones: Some(2), max_active_zones: Some(3), ..Geometry::small(8, 64, 60) }
    }

    #[test]
    fn counts_stop_at_the_limits_the_active_one_first() {
        let g = geometry();
        let shared = SharedState::new(0, 0);
        shared.change_zone_counts(1, 1, &g).unwrap();
        shared.change_zone_counts(1, 1, &g).unwrap();
        assert_eq!(shared.change_zone_counts(1, 1, &g), Err(Shortage::Open(2)));
        shared.change_zone_counts(-1, 0, &g).unwrap(); // one closed: still active
        shared.change_zone_counts(1, 1, &g).unwrap();
        assert_eq!(shared.zone_counts(), (2, 3));
        assert_eq!(shared.change_zone_counts(1, 1, &g), Err(Shortage::Active(3)));
        assert_eq!(shared.zone_counts(), (2, 3), "a refused change changes nothing");
        shared.change_zone_counts(-1, -1, &g).unwrap();
        assert_eq!(shared.zone_counts(), (1, 2));
        let unlimited = Geometry::small(8, 64, 60);
        for _ in 0..10 {
            shared.change_zone_counts(1, 1, &unlimited).unwrap();
        }
    }

    /// Threads taking and giving back open zones at once never pass the limit together.
    #[test]
    fn racing_threads_never_pass_the_limit() {
        let g = geometry();
        let shared = std::sync::Arc::new(SharedState::new(0, 0));
        let peak = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (shared, peak) = (shared.clone(), peak.clone());
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        if shared.change_zone_counts(1, 1, &g).is_ok() {
                            peak.fetch_max(shared.zone_counts().0, Ordering::Relaxed);
                            shared.change_zone_counts(-1, -1, &g).unwrap();
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert!(peak.load(Ordering::Relaxed) <= 2);
        assert_eq!(shared.zone_counts(), (0, 0));
    }
}
