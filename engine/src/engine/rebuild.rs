//! Full-drive rebuild, online: a failed drive's place gets a new, empty drive, and every
//! segment written before is rebuilt onto it, one at a time, while the array serves I/O.
//!
//! When the rebuild starts, every existing segment marks the drive `absent`: reads rebuild
//! its chunks from the others, as for a failed drive. Segments opened from then on are
//! written to the new drive from the start. The sealed segments are rebuilt several at
//! once (`rebuild_segments_at_once`: the drive takes more over several zones than over
//! one, and each segment's reads keep its sources busy), lowest zone first. Each: the new
//! drive's zone is reset (it may hold a part written before a crash), its header is the others'
//! with its own drive index, then chunk position by position (in order, since a zone takes
//! writes only at its write pointer; consecutive chunks go as one write of up to a
//! transfer, `chunks`) each chunk is reconstructed from the stripe's other
//! chunks (found by static offset, or where the compact stripe table says with Zone
//! Append), data, parity and the blocks' metadata alike, then the footer (from the
//! reconstructed metadata), and the zone is finished. Only then does the segment stop being
//! `absent`: reads go to the new drive. The segments open when the rebuild starts are
//! retired: their slots open new segments (which include the new drive), and once their
//! stripes in flight are persisted their zones are finished and garbage collection
//! reclaims them first, as it does for segments open at a crash (their live blocks move to
//! segments the new drive holds). Segments recovered open are reclaimed the same way, and
//! so are segments a clean stop closed short of full (their stripes end before the footer
//! region, with a stop footer).
//!
//! With a rate limit (`set_rebuild_rate`), every write to the new drive first takes its
//! bytes from a token bucket (`pace`): the header before the segment is started, each write
//! of chunks before it goes out (the reads stay within a window of the writes, so they are
//! paced too), the footer piece by piece.
//!
//! Invariants: the rebuild does not end over a segment it could not write to the drive and
//! garbage collection could not reclaim (`ending`); a segment being rebuilt is never chosen
//! by garbage collection; the new drive's zone of a segment is written in order and read
//! from only once finished; a chunk that cannot be reconstructed (more chunks lost than
//! parity covers) is written as a block whose metadata does not decode, so reads fail on it
//! rather than return wrong data, and its footer entries are flagged unknown
//! (`FOOTER_ENTRY_UNKNOWN`), so that a start or a page rebuild reading the footer takes it
//! for damaged, never for padding, and name the LBA the table mapped there as lost
//! (`lost::unknown_entries`); with a rate, no write reaches the new drive before the bucket
//! gave its bytes.

mod advance;
mod chunks;
mod ending;
mod job;
mod pace;
mod places;
mod reconstruct;
mod resume;
mod spares;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use zapraid_zns::{Command, Completion, Geometry, ZoneAction, ZoneTarget};

use crate::format::SegmentHeader;

use super::machine::Engine;
use super::machine::Op;
use super::state::rebuild::DriveRebuild;
use super::state::rebuild::RebuildOp;
use super::state::rebuild::Step;
use super::state::rebuild::ZoneRebuild;
use crate::drive_command::DriveCommand;
use crate::error::{Error, Result};
use crate::hybrid::SegmentPlan;
pub use job::{RebuildJob, RebuildJobDone};
pub(super) use pace::rebuild_pace;

/// The most segments a rebuild writes at once. The ZN540's timing model takes 1.7x more
/// writes over several zones than over one (`docs/experiments/rebuild.md`); beyond a few
/// zones the drive's chips are the limit, and each segment holds a window of chunks in
/// memory.
pub const MAX_REBUILD_SEGMENTS_AT_ONCE: u32 = 4;

/// The most segments a rebuild of a declustered array writes at once, over all the drives
/// it writes (each within `Engine::rebuild_segments_per_drive`): each segment holds a
/// window of chunks in memory (`chunks`).
pub const MAX_DECLUSTERED_REBUILD_SEGMENTS_AT_ONCE: usize = 64;

/// The most segments a rebuild of a declustered array writes at once to one drive (its
/// spare space, or a replaced drive's lanes), within what the drive's zone limits leave.
/// More than a classic array's `MAX_REBUILD_SEGMENTS_AT_ONCE`: each drive takes only a
/// share of the rebuild's writes, but with four per drive, 8 and 12 drives (7 and 11 to
/// write to) could not reach `MAX_DECLUSTERED_REBUILD_SEGMENTS_AT_ONCE`, and the rebuild
/// of 4+1 on 12 drives took 8% longer (28.2 s per 100 GiB against 26.0, the engine's core
/// not charged: `zapraid bench declustered`, `docs/experiments/declustered.md`).
pub const MAX_DECLUSTERED_REBUILD_SEGMENTS_PER_DRIVE: u32 = 8;

/// Segments a rebuild writes at once onto a drive of `geometry` while the array writes its
/// `engines` engines' open segments of `plan` (each keeps `SegmentPlan::active_zones_needed`
/// zones open and active) and `other_active_zones` zones besides (a superblock zone): what
/// the drive's open and active zone limits leave to each engine, at least 1 (the zone a
/// rebuild always had), at most `MAX_REBUILD_SEGMENTS_AT_ONCE`.
pub fn rebuild_segments_at_once(geometry: &Geometry, plan: &SegmentPlan, engines: u32, other_active_zones: u32) -> u32 {
    zone_room(geometry, plan, engines, other_active_zones).clamp(1, MAX_REBUILD_SEGMENTS_AT_ONCE)
}

/// The zones per engine the drives' open and active zone limits leave beside `engines`
/// engines' open segments of `plan` and `other_active_zones` more (`u32::MAX`: no limit).
fn zone_room(geometry: &Geometry, plan: &SegmentPlan, engines: u32, other_active_zones: u32) -> u32 {
    let engines = engines.max(1);
    let used = plan.active_zones_needed() * engines;
    let left = |limit: Option<u32>, extra: u32| limit.map_or(u32::MAX, |l| l.saturating_sub(used + extra) / engines);
    left(geometry.max_open_zones, 0).min(left(geometry.max_active_zones, other_active_zones))
}

/// Progress of a drive rebuild, for `status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RebuildStatus {
    pub drive: usize,
    /// Segments rebuilt onto the drive, and those it does not hold yet.
    pub segments_rebuilt: u64,
    pub segments_left: u64,
    /// Of `segments_left`, those garbage collection could not reclaim because their live
    /// blocks cannot be written elsewhere (too many drives down), which a rebuild does not
    /// write to the new drive (`ending`): the rebuild waits for them, and does not end
    /// while one is left. Counted once the rebuild has come to wait for them (after one
    /// more try), so that it does not drop back to 0 while they are tried again.
    pub segments_unreclaimable: u64,
    /// Of `segments_rebuilt`, those a rebuild before a restart had completed, checked and
    /// kept (`resume`): done in no time, they say nothing of how long the rest takes.
    pub segments_kept: u64,
    /// Blocks written to the new drive (headers, chunks, footers).
    pub blocks_written: u64,
    /// Blocks that could not be reconstructed (their stripes lost more than parity covers).
    pub blocks_unrecoverable: u64,
    /// Whether the failed drive's chunks go into distributed spare space
    /// (`rebuild_into_spares`) rather than onto a new drive in its place.
    pub into_spares: bool,
}

impl Engine {
    /// Starts rebuilding failed drive `drive` onto the drive now in its place (the caller
    /// swapped it in: an empty drive of at least the old one's geometry). New segments are
    /// written to it at once; existing ones are rebuilt in the background (`status` shows
    /// progress). Refused if the drive has not failed or a rebuild runs.
    pub fn rebuild_drive(&mut self, drive: usize) -> Result<()> {
        self.start_drive_rebuild(drive, false)
    }

    /// Starts a rebuild onto a drive that may hold part of an earlier one (`resume`), or
    /// onto an empty drive.
    fn start_drive_rebuild(&mut self, drive: usize, resuming: bool) -> Result<()> {
        self.check_rebuild_can_start(drive)?;
        if resuming && !self.lanes.is_classic() {
            // A resumed rebuild checks the drive's zones by segment number (`resume`).
            return Err(Error::Unavailable {
                reason: "resuming the rebuild of a declustered array's drive is not built yet".to_string(),
            });
        }
        let holding: Vec<(u32, usize)> = (0..self.lanes.segments())
            .filter_map(|zone| Some((zone, self.lanes.lane(zone, drive)?)))
            .filter(|(zone, _)| self.segments[*zone as usize].is_some())
            .collect();
        self.check_absent_lanes(&holding)?;
        self.failed[drive] = false;
        self.spared[drive] = false;
        // Empty segment numbers whose lanes moved off the drive go back to it, and the
        // whole segments moved off it are relocated back over time (`rebalance`).
        self.move_free_lanes_off(drive);
        self.mark_segments_to_rebalance();
        // A relocated segment whose zones are being reset (on the drives that worked: not
        // this one) is about to leave its zone empty for new segments, which are written
        // to this drive too. A resumed rebuild's drive may hold a part of that segment (the
        // driver resets only the zones that hold no segment): its zone is reset as well.
        if let Some(r) = self.relocation.as_mut().filter(|r| resuming && r.resetting) {
            r.resets_pending += 1;
            let zone = r.zone;
            self.zone_command(drive, zone, ZoneAction::Reset);
        }
        for (zone, lane) in holding {
            self.mark_absent(zone, lane);
        }
        self.begin_drive_rebuild(drive, resuming, false);
        Ok(())
    }

    /// Why a rebuild of `drive` cannot start now, if it cannot.
    pub(super) fn check_rebuild_can_start(&self, drive: usize) -> Result<()> {
        if drive >= self.failed.len() || !self.failed[drive] {
            return Err(Error::InvalidConfig { reason: format!("drive {drive} has not failed: nothing to rebuild") });
        }
        if let Some(r) = &self.drive_rebuild {
            return Err(Error::Unavailable { reason: format!("drive {} is being rebuilt", r.drive) });
        }
        Ok(())
    }

    /// Marks lane `lane` of the segment in `zone` as not holding its chunks until the
    /// rebuild writes them (reads rebuild them from the other lanes meanwhile).
    pub(super) fn mark_absent(&mut self, zone: u32, lane: usize) {
        let segment = self.seg_mut(zone);
        segment.absent = Some(lane);
        // A relocation that could not write (too few drives) may now: the new drive
        // takes writes. Tried again, or the rebuild would wait for it for ever.
        let retry = std::mem::take(&mut segment.unreclaimable);
        let reclaim = segment.stopped_short && !segment.reclaim_first;
        segment.reclaim_first |= reclaim;
        if retry || reclaim {
            self.reclaim_pending = true;
            self.gc_check_needed = true;
        }
    }

    /// The rebuild of `drive` starts, its segments marked absent: the open segments are
    /// retired (their slots open new ones, which hold the drive's lanes where they are
    /// now), and the superblock records it.
    pub(super) fn begin_drive_rebuild(&mut self, drive: usize, resuming: bool, into_spares: bool) {
        let open: Vec<u32> = self.slots.iter_mut().filter_map(Option::take).collect();
        self.retiring.extend(open);
        self.forget_checkpoint_base(); // recorded in the superblock: a new generation
        self.rebuilds_started += 1;
        self.drive_rebuild = Some(DriveRebuild {
            drive,
            number: self.rebuilds_started,
            resuming,
            segments_kept: 0,
            zones: BTreeMap::new(),
            segments_rebuilt: 0,
            blocks_written: 0,
            blocks_unrecoverable: 0,
            retried_unreclaimable: false,
            waiting_unreclaimable: false,
            into_spares,
            buffers: self.rebuild_buffers_pool(),
            focus: Vec::new(),
            advance_all: false,
            nothing_to_start: None,
        });
        tracing::info!(drive, resuming, into_spares, "rebuild started");
        self.settle();
    }

    /// Progress of the running rebuild, if any.
    pub fn rebuild_status(&self) -> Option<RebuildStatus> {
        let r = self.drive_rebuild.as_ref()?;
        let left = || self.segments.iter().flatten().filter(|s| s.absent.is_some());
        Some(RebuildStatus {
            drive: r.drive,
            segments_rebuilt: r.segments_rebuilt,
            segments_left: left().count() as u64,
            segments_unreclaimable: if r.waiting_unreclaimable {
                left().filter(|s| s.unreclaimable && s.write_failed).count() as u64
            } else {
                0 // not waited for yet: garbage collection is to try them once more
            },
            segments_kept: r.segments_kept,
            blocks_written: r.blocks_written,
            blocks_unrecoverable: r.blocks_unrecoverable,
            into_spares: r.into_spares,
        })
    }

    /// The last rebuild that completed since the start, as its progress stood at the end.
    pub fn last_rebuild(&self) -> Option<RebuildStatus> {
        self.last_rebuild
    }

    /// Whether the segment in `zone` is being rebuilt (garbage collection leaves it alone).
    pub(super) fn is_being_rebuilt(&self, zone: u32) -> bool {
        self.drive_rebuild.as_ref().is_some_and(|r| r.zones.contains_key(&zone))
    }

    /// Says that `engines` engines (the shards of an array, this one among them) write to
    /// the same drives: the drives' open and active zone limits are theirs to share, so a
    /// rebuild writes fewer segments at once (`rebuild_segments_at_once`).
    pub fn share_drives_with(&mut self, engines: u32) {
        self.rebuild_segments_limit = rebuild_segments_at_once(&self.geometry, &self.plan, engines, 1);
        self.rebuild_segments_at_once = self.rebuild_segments_limit;
    }

    /// Sets the segments a rebuild writes at once, at least 1 and at most what the drives'
    /// zone limits leave this engine (`share_drives_with`): to compare, or to rebuild a
    /// segment at a time.
    pub fn set_rebuild_segments_at_once(&mut self, segments: u32) {
        self.rebuild_segments_at_once = segments.clamp(1, self.rebuild_segments_limit);
    }

    /// Segments a rebuild writes at once (to each drive it writes, for a declustered array:
    /// see `rebuild_segments_per_drive`).
    pub fn rebuild_segments_at_once(&self) -> u32 {
        self.rebuild_segments_at_once
    }

    /// Segments the rebuild writes at once to one drive: `rebuild_segments_at_once`, but a
    /// declustered array's, unless set lower (`set_rebuild_segments_at_once`) or held lower
    /// by the zone limits or by engines sharing the drives (`share_drives_with`), up to
    /// `MAX_DECLUSTERED_REBUILD_SEGMENTS_PER_DRIVE` within the room the zone limits leave
    /// one engine (a declustered array runs one engine: shards do not take one).
    fn rebuild_segments_per_drive(&self) -> u32 {
        let set = self.rebuild_segments_at_once;
        if self.lanes.is_classic() || set < self.rebuild_segments_limit || set < MAX_REBUILD_SEGMENTS_AT_ONCE {
            return set;
        }
        zone_room(&self.geometry, &self.plan, 1, 1).clamp(set, MAX_DECLUSTERED_REBUILD_SEGMENTS_PER_DRIVE.max(set))
    }

    /// Resets the new drive's zone of the segment, the rebuild's first step on it.
    pub(super) fn reset_rebuilt_zone(&mut self, zone: u32) {
        let drive = self.rebuild_lane(zone);
        self.zone_rebuild(zone).step = Step::Resetting;
        let target = ZoneTarget::Zone { start_lba: self.geometry.zone_start_lba(zone) };
        self.rebuild_command(zone, drive, RebuildOp::Reset, Command::ManageZone { action: ZoneAction::Reset, target });
    }

    fn rebuild_command(&mut self, zone: u32, drive: usize, op: RebuildOp, command: Command) {
        self.seg_mut(zone).commands_in_flight += 1;
        let tag = self.new_tag(Op::Rebuild { zone, rebuild: self.rebuild_number(), op });
        self.commands.push_back(DriveCommand { drive, tag, command, delay_ns: 0 });
    }

    /// The lane of the segment in `zone` the running rebuild writes: the drive rebuilt
    /// onto a new drive is the same lane of every segment; rebuilt into spare space, the
    /// lane it held in that segment, which the segment keeps `absent` until rebuilt.
    pub(super) fn rebuild_target(&self, zone: u32) -> Option<usize> {
        let r = self.drive_rebuild.as_ref()?;
        if self.lanes.is_classic() {
            Some(r.drive)
        } else {
            self.segment_of_zone(zone)?.absent
        }
    }

    /// The drive a segment being rebuilt is written to: its absent lane's.
    fn rebuild_drive_of(&self, zone: u32) -> usize {
        let lane = self.seg(zone).absent.expect("a segment to rebuild is absent on a lane");
        self.lanes.drive(zone, lane)
    }

    /// The lane a segment being rebuilt is rebuilt on.
    pub(super) fn rebuild_lane(&self, zone: u32) -> usize {
        let lane = self.rebuild_target(zone).expect("a segment being rebuilt");
        debug_assert_eq!(self.seg(zone).absent, Some(lane), "a segment being rebuilt is absent on its lane");
        lane
    }

    /// The running rebuild's number (`DriveRebuild::number`).
    pub(super) fn rebuild_number(&self) -> u64 {
        self.drive_rebuild.as_ref().expect("a rebuild").number
    }

    /// Whether a command of rebuild `number` belongs to one that stopped: its completion
    /// counts for nothing now (another may run, onto another drive in the same place).
    pub(super) fn rebuild_stopped(&self, number: u64) -> bool {
        self.drive_rebuild.as_ref().is_none_or(|r| r.number != number)
    }

    fn zone_rebuild(&mut self, zone: u32) -> &mut ZoneRebuild {
        self.drive_rebuild.as_mut().and_then(|r| r.zones.get_mut(&zone)).expect("a segment being rebuilt")
    }

    /// Reads the header block of the next drive holding the segment.
    fn read_rebuild_header(&mut self, zone: u32) {
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let Some(source) = self.zone_rebuild(zone).header_sources.pop() else {
            return self.abandon_zone_rebuild(zone, "no drive holding the segment has a readable header");
        };
        let lba = self.geometry.zone_start_lba(zone);
        let command = Command::Read { lba, data: vec![0; bs], metadata: vec![0; ms] };
        self.seg_mut(zone).commands_in_flight += 1;
        let tag = self.new_tag(Op::Rebuild { zone, rebuild: self.rebuild_number(), op: RebuildOp::Header });
        self.commands.push_back(DriveCommand { drive: source, tag, command, delay_ns: 0 });
    }

    /// A command of rebuild `number` completed.
    pub(super) fn rebuild_done(&mut self, drive: usize, zone: u32, number: u64, op: RebuildOp, completion: Completion) {
        self.seg_mut(zone).commands_in_flight -= 1;
        if matches!(op, RebuildOp::Write { .. }) {
            self.zone_write_done(drive, zone);
        }
        if self.rebuild_stopped(number) {
            // Only what it says of a drive that still works counts: a read of it failed.
            let working = !self.lane_failed(zone, drive) && self.rebuild_target(zone) != Some(drive);
            if working && matches!(completion.result, Err(zapraid_zns::Error::DeviceFailed)) {
                self.fail_lane(zone, drive);
            }
            return;
        }
        if let RebuildOp::Check { footer_first } = op {
            // What the new drive holds is checked, never trusted: a failed read is a zone
            // to rebuild, not a failed drive.
            return self.zone_check_done(zone, footer_first, completion);
        }
        let target = self.rebuild_target(zone);
        if target != Some(drive) && completion.result.is_err() {
            if matches!(completion.result, Err(zapraid_zns::Error::DeviceFailed)) {
                self.fail_lane(zone, drive);
            }
        } else if completion.result.is_err() {
            // The new drive (or a drive's spare space) refuses writes: the rebuild cannot
            // go on. A spare's drive is one of the array's: it has failed.
            tracing::error!(drive, zone, "the drive being rebuilt failed; the rebuild stops");
            if self.drive_rebuild.as_ref().is_some_and(|r| r.into_spares) {
                self.fail_lane(zone, drive);
            }
            return self.abandon_drive_rebuild();
        }
        if !self.is_being_rebuilt(zone) {
            return; // abandoned meanwhile
        }
        if completion.result.is_ok() {
            // Only this segment can move on for it (`advance`).
            self.drive_rebuild.as_mut().expect("a rebuild").focus.push(zone);
        }
        match op {
            RebuildOp::Reset => {
                self.zone_rebuild(zone).step = Step::Header;
                self.read_rebuild_header(zone);
            }
            RebuildOp::Header => {
                let decoded = completion.result.ok().and_then(|_| SegmentHeader::decode(&completion.data).ok());
                let sequence = self.seg(zone).sequence;
                let Some(mut header) = decoded.filter(|h| h.segment_sequence.get() == sequence) else {
                    return self.read_rebuild_header(zone);
                };
                let drive = target.expect("a rebuild");
                header.drive_index = (drive as u32).into();
                // Its lanes as they lie now: the rebuilt lane on its new drive.
                let header = header.sealed_bytes(&self.segment_lanes(zone));
                let layout = self.seg(zone).layout;
                let (data, metadata) = self.header_chunk(&header, sequence, layout.chunk_blocks as usize);
                let lba = self.geometry.zone_start_lba(zone);
                self.rebuild_write(zone, drive, layout.chunk_blocks, lba, data, metadata);
                self.zone_rebuild(zone).step = Step::Chunks;
            }
            RebuildOp::Read { position, source, chunks } => {
                self.rebuild_read_done(zone, position, source, chunks, completion);
            }
            RebuildOp::Write { blocks } => {
                // Its buffers go back to the pool: a chunk's by length, a joined write's
                // (`write_ready_chunks`) or a footer piece's by capacity.
                let Completion { data, metadata, .. } = completion;
                let chunk = blocks == self.seg(zone).layout.chunk_blocks;
                let buffers = &mut self.drive_rebuild.as_mut().expect("a rebuild").buffers;
                if chunk {
                    buffers.give(data);
                    buffers.give(metadata);
                } else {
                    buffers.give_joined(data, metadata);
                }
                self.zone_rebuild(zone).writes_in_flight -= 1;
                self.drive_rebuild.as_mut().expect("a rebuild").blocks_written += blocks;
                let footer_blocks = self.seg(zone).layout.footer_blocks;
                let z = self.zone_rebuild(zone);
                if z.step == Step::Footer && z.writes_in_flight == 0 && z.footer_next >= footer_blocks {
                    z.step = Step::Finishing;
                    let target = ZoneTarget::Zone { start_lba: self.geometry.zone_start_lba(zone) };
                    let command = Command::ManageZone { action: ZoneAction::Finish, target };
                    self.rebuild_command(zone, drive, RebuildOp::Finish, command);
                }
            }
            RebuildOp::Check { .. } => unreachable!("handled above"),
            RebuildOp::Finish => {
                self.seg_mut(zone).absent = None;
                let r = self.drive_rebuild.as_mut().expect("a rebuild");
                r.zones.remove(&zone);
                r.segments_rebuilt += 1;
                self.gc_check_needed = true;
            }
        }
    }

    /// Gives up the segment being rebuilt (it stays `absent`: reads keep rebuilding it).
    fn abandon_zone_rebuild(&mut self, zone: u32, why: &str) {
        tracing::error!(zone, "a segment cannot be rebuilt: {why}");
        self.abandon_drive_rebuild();
    }

    /// Stops the rebuild: the drive counts as failed again (segments written to it since
    /// the start hold its chunks, but nothing is read from a failed drive).
    fn abandon_drive_rebuild(&mut self) {
        if let Some(r) = self.drive_rebuild.take() {
            self.failed[r.drive] = true;
        }
    }
}
