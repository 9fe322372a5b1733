//! Moving a drive rebuild on (`advance_drive_rebuild`, from `pump`): which segments start
//! next, while fewer than the rebuild writes at once are under way (the lowest zones
//! first, each drive written within what its zone limits leave), and which segments under
//! way take their next steps (`chunks`).
//!
//! An event the rebuild's own command's successful completion brought moves on only that
//! command's segment (`DriveRebuild::focus`): a segment's reads, writes and footer wait for
//! its own completions alone, so looking at the others (up to 64 for a declustered array)
//! on every event would find nothing to do. Any other event (a tick, a user's request,
//! garbage collection's completions, a failed command), a paced rebuild (its bucket fills
//! with time, for every segment) and the first event after the rebuild could not move on
//! (a stop, a checkpoint draining) move on every segment under way, as every event did.
//! Likewise the segments to start are looked for over every segment only when something
//! may have changed since a look found none: the segments under way, or an event not the
//! rebuild's.
//!
//! Invariants: with a rate, no segment starts before the bucket gave its header's bytes; a
//! segment under way always has a command in flight, or is moved on at the next event
//! (so none waits for an event that never comes).

use std::collections::BTreeMap;

use super::MAX_DECLUSTERED_REBUILD_SEGMENTS_AT_ONCE;
use crate::drive_command::chunks_per_transfer;
use crate::engine::machine::Engine;
use crate::engine::state::rebuild::{Step, ZoneRebuild};
use crate::engine::state::segment::{Segment, SegmentState};
use crate::engine::state::stop::StopState;
use crate::format::{FooterEntry, NO_LBA};

impl Engine {
    /// Moves the rebuild on: starts the next segments while fewer than
    /// `rebuild_segments_at_once` are under way, and for each one under way the event may
    /// move on (module doc) issues reads within its window and writes reconstructed chunks
    /// in order. Called from `pump`.
    pub(in crate::engine) fn advance_drive_rebuild(&mut self) {
        self.retire_idle_segments();
        let paced = self.rebuild_pace.rate_bytes_per_s().is_some();
        let Some(r) = self.drive_rebuild.as_mut() else { return };
        let drive = r.drive;
        let mut focus = std::mem::take(&mut r.focus);
        if self.stop != StopState::Running {
            // A stop, or a running checkpoint draining, lets the steps under way complete
            // and starts no other; after a stop the next start resumes the rebuild (the
            // segment checked, or rebuilt from its beginning), after a checkpoint it goes
            // on here.
            r.advance_all = true;
            return;
        }
        let focused = !focus.is_empty() && !paced && !std::mem::take(&mut r.advance_all);
        let r = self.drive_rebuild.as_ref().expect("a rebuild");
        // A resumed rebuild's drive may hold zones left open by segments written to it since
        // the first rebuild started (recovered open, stopped short): active until garbage
        // collection reclaims them, they take from the rebuild's room under the drives'
        // active zone limit. The rebuild always keeps its one segment.
        let left_open = |s: &&Segment| s.absent.is_some() && (s.state != SegmentState::Sealed || s.reclaim_first);
        let left_open = if r.resuming { self.segments.iter().flatten().filter(left_open).count() } else { 0 };
        // Per drive written: what its zone limits leave. A declustered array's segments
        // are written to many drives (their spare space, or each segment's lane on the
        // new drive), each within that.
        let per_drive = (self.rebuild_segments_per_drive() as usize).saturating_sub(left_open).max(1);
        let at_once = if self.lanes.is_classic() {
            per_drive
        } else {
            (per_drive * self.lanes.drives()).min(MAX_DECLUSTERED_REBUILD_SEGMENTS_AT_ONCE)
        };
        let looked_in_vain = focused && r.nothing_to_start == Some((r.zones.len(), at_once));
        let mut started = Vec::new();
        if r.zones.len() < at_once && !looked_in_vain {
            let next = self.segments_to_start(per_drive, at_once);
            let r = self.drive_rebuild.as_mut().expect("a rebuild");
            r.nothing_to_start = next.is_empty().then_some((r.zones.len(), at_once));
            if next.is_empty() && r.zones.is_empty() {
                return self.end_or_wait(drive);
            }
            for zone in next {
                // The header is the segment's first write.
                let header_bytes = self.seg(zone).layout.chunk_blocks * self.block_bytes() as u64;
                if !self.rebuild_pace.take(header_bytes, self.now_ns) {
                    break;
                }
                self.start_zone_rebuild(zone);
                started.push(zone);
            }
        }
        let under_way: Vec<u32> = match focused {
            true => {
                focus.sort_unstable();
                focus.dedup();
                focus.into_iter().chain(started).collect()
            }
            false => self.drive_rebuild.as_ref().map_or_else(Vec::new, |r| r.zones.keys().copied().collect()),
        };
        for zone in under_way {
            // A step of one segment may end the rebuild (a drive failing), and the focus
            // may have been its last step (finished).
            if !self.is_being_rebuilt(zone) {
                continue;
            }
            self.issue_rebuild_reads(zone);
            self.write_ready_chunks(zone);
            self.write_rebuild_footer(zone);
        }
    }

    /// The segments to start now, lowest zone first, so that at most `at_once` are under
    /// way and at most `per_drive` write to any one drive. Goes over every segment.
    fn segments_to_start(&self, per_drive: usize, at_once: usize) -> Vec<u32> {
        let r = self.drive_rebuild.as_ref().expect("a rebuild");
        let under_way = &r.zones;
        let classic = self.lanes.is_classic();
        let mut writing = vec![0usize; self.lanes.drives()];
        for &zone in under_way.keys() {
            writing[self.rebuild_drive_of(zone)] += 1;
        }
        // Segments are kept by zone: the lowest zones come first.
        let mut next = Vec::new();
        let candidates = self
            .segments
            .iter()
            .flatten()
            .filter(|s| s.absent.is_some() && s.state == SegmentState::Sealed && !s.reclaim_first)
            // A declustered segment's zones finished first: a start takes a lane the
            // rebuild moved only once the segment's other zones are (`recovery::lanes`).
            .filter(|s| classic || s.finishes_in_flight == 0)
            .map(|s| s.zone)
            .filter(|zone| !under_way.contains_key(zone));
        for zone in candidates {
            if next.len() + under_way.len() >= at_once {
                break;
            }
            let target = self.rebuild_drive_of(zone);
            if writing[target] < per_drive {
                writing[target] += 1;
                next.push(zone);
            }
        }
        next
    }

    fn start_zone_rebuild(&mut self, zone: u32) {
        let drive = self.rebuild_lane(zone);
        let layout = self.seg(zone).layout;
        let header_sources: Vec<usize> = (0..layout.drives()).filter(|d| self.holds(zone, *d)).collect();
        let empty_entry =
            FooterEntry { lba: NO_LBA.into(), timestamp: 0.into(), stripe_id: 0.into(), reserved: 0.into() };
        let chunks_per_transfer = chunks_per_transfer(&self.geometry, layout.chunk_blocks);
        let rebuild = self.drive_rebuild.as_mut().expect("a rebuild");
        let resuming = rebuild.resuming;
        rebuild.zones.insert(
            zone,
            ZoneRebuild {
                step: Step::Resetting,
                chunks_per_transfer,
                header_sources,
                next_read: 0,
                next_write: 0,
                reading: BTreeMap::new(),
                ready: BTreeMap::new(),
                writes_in_flight: 0,
                footer: vec![empty_entry; (layout.stripes * layout.chunk_blocks) as usize],
                footer_next: 0,
                checks_pending: 0,
                check_failed: false,
                group_places: None,
                mapped_here: None,
            },
        );
        if resuming {
            self.zone_rebuild(zone).step = Step::Checking;
            return self.check_rebuilt_zone(zone);
        }
        tracing::debug!(drive, zone, "rebuilding a segment");
        self.reset_rebuilt_zone(zone);
    }
}
