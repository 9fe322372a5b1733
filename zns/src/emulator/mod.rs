//! An emulated ZNS drive, faithful to the NVMe Zoned Namespace command set, over memory or
//! file media, in instant or virtual time.
//!
//! Commands take effect when they complete, in completion order; commands in flight
//! together complete in a seeded-random order (with a timing model: at model times plus
//! seeded jitter), so concurrent Zone Appends land in a random but reproducible order, as
//! on hardware. The drive enforces what a real drive enforces: writes only at the write
//! pointer and one Zone Write in flight per zone, zone capacity, the open and active zone
//! limits (implicitly opened zones are closed to make room, as NVMe allows), the append
//! and transfer size limits, and the zone state machine. Unwritten blocks read as zeros.
//!
//! Invariants, checked after every command in debug builds: open and active counters
//! match the zone states; write pointers never pass the capacity; an empty zone has no
//! data. A power cut lands each in-flight command fully, partly (a prefix of its blocks)
//! or not at all; every completion already delivered has reached the media.
//!
//! A drive splits into parts (`split`), each owning a run of its zones and movable to a
//! thread of its own; the parts share the drive's open and active zone counts and its
//! failure (`shared`), nothing else.

mod commands;
mod shared;
mod split;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::device::{Command, Completion, Done, Tag, ZonedDevice};
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::media::{DiscardMedia, FileMedia, Media, MemoryMedia, StoredZone};
use crate::timing::{TimedOp, Timing, TimingParams};
use crate::zone::{ZoneAction, ZoneDescriptor, ZoneState, ZoneTarget};
use shared::{SharedState, Shortage};

/// Commands an emulated drive advertises as worth keeping in flight.
pub const EMULATED_QUEUE_DEPTH: usize = 1024;

struct Pending {
    tag: Tag,
    command: Command,
    /// Set when the command was refused at submission.
    rejected: Option<Error>,
}

/// What a power cut did to the commands in flight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PowerCutReport {
    pub landed: usize,
    pub torn: usize,
    pub lost: usize,
}

/// An emulated zoned namespace, or one part of one (`split`).
pub struct EmulatedDrive {
    geometry: Geometry,
    media: Box<dyn Media>,
    /// Every zone of the drive, indexed by zone; only those in `owned` are this one's
    /// (the others, in a part, are left as they were at the split and never read).
    zones: Vec<StoredZone>,
    /// The zones this drive owns: all of them, or a part's run.
    owned: Range<u32>,
    /// Open and active zone counts of the whole drive, and its failure.
    shared: Arc<SharedState>,
    /// Implicitly opened zones, least recently opened first (closed first for room).
    implicitly_open: VecDeque<u32>,
    zone_write_in_flight: Vec<bool>,
    pending: BTreeMap<(u64, u64, u64), Pending>,
    ready: VecDeque<Completion>,
    now_ns: u64,
    timing: Option<Timing>,
    rng: ChaCha8Rng,
    submitted: u64,
    media_errors: BTreeSet<u64>,
    drive_uuid: [u8; 16],
}

impl EmulatedDrive {
    fn build(
        geometry: Geometry,
        media: Box<dyn Media>,
        zones: Vec<StoredZone>,
        seed: u64,
        drive_uuid: [u8; 16],
    ) -> Self {
        let open = zones.iter().filter(|z| z.state.is_open()).count() as u32;
        let active = zones.iter().filter(|z| z.state.is_active()).count() as u32;
        EmulatedDrive {
            geometry,
            media,
            owned: 0..geometry.zone_count,
            shared: Arc::new(SharedState::new(open, active)),
            implicitly_open: VecDeque::new(),
            zone_write_in_flight: vec![false; zones.len()],
            zones,
            pending: BTreeMap::new(),
            ready: VecDeque::new(),
            now_ns: 0,
            timing: None,
            rng: ChaCha8Rng::seed_from_u64(seed),
            submitted: 0,
            media_errors: BTreeSet::new(),
            drive_uuid,
        }
    }

    /// A drive in memory with every zone empty. `seed` fixes the landing order of
    /// concurrent commands.
    pub fn memory(geometry: Geometry, seed: u64) -> Result<Self> {
        geometry.validate()?;
        let zones = vec![StoredZone { state: ZoneState::Empty, written_blocks: 0 }; geometry.zone_count as usize];
        let media = Box::new(MemoryMedia::new(&geometry));
        Ok(Self::build(geometry, media, zones, seed, uuid_from_seed(seed)))
    }

    /// A drive that keeps zone state but discards data (reads return zeros): for
    /// timing-only experiments where the data itself does not matter.
    pub fn discarding(geometry: Geometry, seed: u64) -> Result<Self> {
        geometry.validate()?;
        let zones = vec![StoredZone { state: ZoneState::Empty, written_blocks: 0 }; geometry.zone_count as usize];
        Ok(Self::build(geometry, Box::new(DiscardMedia), zones, seed, uuid_from_seed(seed)))
    }

    /// Creates a drive file at `path` (which must not exist) with every zone empty.
    pub fn create_file(path: &Path, geometry: Geometry, seed: u64) -> Result<Self> {
        let drive_uuid = uuid_from_seed(seed ^ path_hash(path));
        let media = FileMedia::create(path, &geometry, drive_uuid, seed)?;
        let zones = vec![StoredZone { state: ZoneState::Empty, written_blocks: 0 }; geometry.zone_count as usize];
        Ok(Self::build(geometry, Box::new(media), zones, seed, drive_uuid))
    }

    /// Has the file system back every page of the drive file at `path` (closed, or
    /// open: nothing in it changes), so that no write to it allocates memory later.
    pub fn populate_file(path: &Path) -> Result<()> {
        FileMedia::populate_all(path)
    }

    /// Opens a drive file, as a drive powering on: zones left open (by a clean close or
    /// a crash) come back closed, or empty if nothing was written to them.
    pub fn open_file(path: &Path) -> Result<Self> {
        let opened = FileMedia::open(path)?;
        let mut drive =
            Self::build(opened.geometry, Box::new(opened.media), opened.zones, opened.landing_seed, opened.drive_uuid);
        drive.power_on()?;
        Ok(drive)
    }

    /// Re-initialises a drive file whose zone states are lost (a zone record damaged in
    /// both copies: `Error::ZoneRecordLost`) with every zone empty, keeping its geometry
    /// and identity, and opens it. What the zones held is gone.
    pub fn reinitialize_file(path: &Path) -> Result<Self> {
        FileMedia::reinitialize(path)?;
        Self::open_file(path)
    }

    /// Models the drive with `params` in virtual time from now on.
    pub fn with_timing(mut self, params: TimingParams) -> Result<Self> {
        params.validate().map_err(|reason| Error::InvalidGeometry { reason: format!("timing model: {reason}") })?;
        self.timing = Some(Timing::new(params, &self.geometry));
        Ok(self)
    }

    /// The timing parameters in use, if any.
    pub fn timing_params(&self) -> Option<&TimingParams> {
        self.timing.as_ref().map(Timing::params)
    }

    /// Identity stored with the drive (random per drive file; derived from the seed in memory).
    pub fn drive_uuid(&self) -> [u8; 16] {
        self.drive_uuid
    }

    /// Current virtual time.
    pub fn now_ns(&self) -> u64 {
        self.now_ns
    }

    /// Virtual time of the next completion, if anything is in flight.
    pub fn next_event_ns(&self) -> Option<u64> {
        self.pending.keys().next().map(|(at, _, _)| *at)
    }

    /// Commands a power cut now would catch: submitted and not yet complete, or complete
    /// and not yet reaped by the host (whose completions the cut loses).
    pub fn commands_in_flight(&self) -> usize {
        self.pending.len() + self.ready.len()
    }

    /// Completes every command due by `t_ns` and moves the clock there.
    pub fn advance_to(&mut self, t_ns: u64) {
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 > t_ns {
                break;
            }
            let ((at, _, _), pending) = entry.remove_entry();
            self.now_ns = self.now_ns.max(at);
            let completion = self.complete(pending);
            self.ready.push_back(completion);
        }
        self.now_ns = self.now_ns.max(t_ns);
    }

    /// Descriptors of every zone, straight from the drive's state (no command).
    pub fn zones(&self) -> Vec<ZoneDescriptor> {
        self.owned.clone().map(|z| self.descriptor(z)).collect()
    }

    // ---- fault injection -------------------------------------------------------------

    /// The whole drive fails: every command from now on completes with `DeviceFailed`,
    /// in every part of it.
    pub fn fail(&mut self) {
        self.shared.fail();
    }

    pub fn is_failed(&self) -> bool {
        self.shared.is_failed()
    }

    /// Reads covering `lba` fail with a media error until its zone is reset.
    pub fn inject_media_error(&mut self, lba: u64) {
        self.media_errors.insert(lba);
    }

    /// Silently flips bit `bit` of the stored block at `lba` (the drive will return the
    /// corrupted data without error). Has no visible effect on unwritten blocks.
    pub fn corrupt_block(&mut self, lba: u64, bit: u64) -> Result<()> {
        let zone = self.zone_index(lba, 1)?;
        let offset = lba - self.geometry.zone_start_lba(zone);
        if offset < self.zones[zone as usize].written_blocks {
            self.media.flip_bit(self.physical_index(zone, offset), bit)?;
        }
        Ok(())
    }

    /// Takes a zone offline (its data unreadable) or read-only, as aging drives do.
    pub fn degrade_zone(&mut self, zone: u32, state: ZoneState) -> Result<()> {
        assert!(
            matches!(state, ZoneState::Offline | ZoneState::ReadOnly),
            "zones only degrade to offline or read-only"
        );
        self.zone_index(u64::from(zone) * self.geometry.zone_size_blocks, 1)?;
        let written = self.zones[zone as usize].written_blocks;
        self.transition(zone, state, written)
    }

    /// Cuts power: each command in flight lands, lands partly (a prefix of its blocks, for
    /// multi-block writes) or is lost, chosen by the seeded generator; completions not yet
    /// reaped are lost to the host. The drive then powers on again.
    pub fn power_cut(&mut self) -> Result<PowerCutReport> {
        let mut report = PowerCutReport::default();
        let mut in_flight: Vec<Pending> = std::mem::take(&mut self.pending).into_values().collect();
        // Fisher-Yates with our generator: the landing order is part of the seed's story.
        for i in (1..in_flight.len()).rev() {
            let j = self.rng.random_range(0..=i);
            in_flight.swap(i, j);
        }
        for mut pending in in_flight {
            if pending.rejected.is_some() {
                continue;
            }
            match self.rng.random_range(0..3u8) {
                0 => report.lost += 1,
                1 => {
                    report.landed += 1;
                    self.complete(pending);
                }
                _ => {
                    let block = self.geometry.block_size_bytes as usize;
                    let meta = self.geometry.metadata_bytes_per_block as usize;
                    let torn = match &mut pending.command {
                        Command::Write { data, metadata, .. } | Command::Append { data, metadata, .. }
                            if data.len() > block && data.len().is_multiple_of(block) =>
                        {
                            let blocks = data.len() / block;
                            let keep = self.rng.random_range(1..blocks);
                            data.truncate(keep * block);
                            if !metadata.is_empty() {
                                metadata.truncate(keep * meta);
                            }
                            true
                        }
                        _ => false,
                    };
                    if torn {
                        report.torn += 1;
                    } else {
                        report.landed += 1;
                    }
                    self.complete(pending);
                }
            }
        }
        self.ready.clear();
        self.zone_write_in_flight.iter_mut().for_each(|w| *w = false);
        if let Some(timing) = &self.timing {
            self.timing = Some(Timing::new(timing.params().clone(), &self.geometry));
        }
        self.power_on()?;
        Ok(report)
    }

    fn power_on(&mut self) -> Result<()> {
        for zone in self.owned.clone() {
            let stored = self.zones[zone as usize];
            if stored.state.is_open() {
                let state = if stored.written_blocks == 0 { ZoneState::Empty } else { ZoneState::Closed };
                self.transition(zone, state, stored.written_blocks)?;
            }
        }
        Ok(())
    }

    // ---- zone state machine ----------------------------------------------------------
}

impl ZonedDevice for EmulatedDrive {
    fn geometry(&self) -> Geometry {
        self.geometry
    }

    fn queue_depth(&self) -> usize {
        EMULATED_QUEUE_DEPTH
    }

    fn submit(&mut self, tag: Tag, command: Command) {
        self.submitted += 1;
        let mut rejected = None;
        if let Command::Write { lba, .. } = &command {
            if let Some(zone) = self.geometry.zone_of(*lba) {
                if std::mem::replace(&mut self.zone_write_in_flight[zone as usize], true) {
                    rejected = Some(Error::ZoneWriteInFlight { zone });
                }
            }
        }
        let jitter_ns = match &self.timing {
            Some(t) if t.params().jitter_ns > 0 => self.rng.random_range(0..=t.params().jitter_ns),
            _ => 0,
        };
        let complete_at = match (&rejected, self.timed_op(&command)) {
            (None, op) if self.timing.is_some() => {
                let now = self.now_ns;
                self.timing.as_mut().expect("timing").schedule(now, op, jitter_ns)
            }
            _ => self.now_ns,
        };
        let order_key = self.rng.random::<u64>();
        self.pending.insert((complete_at, order_key, self.submitted), Pending { tag, command, rejected });
    }

    fn reap(&mut self, out: &mut Vec<Completion>) -> usize {
        self.advance_to(self.now_ns);
        let n = self.ready.len();
        out.extend(self.ready.drain(..));
        n
    }

    fn wait(&mut self, out: &mut Vec<Completion>) -> usize {
        if self.ready.is_empty() {
            if let Some(at) = self.next_event_ns() {
                self.advance_to(at);
            }
        }
        self.reap(out)
    }

    fn in_flight(&self) -> usize {
        self.pending.len() + self.ready.len()
    }

    /// Without a timing model every command completes at the time it was submitted,
    /// which the next `reap` reaches.
    fn completes_on_reap(&self) -> bool {
        self.timing.is_none()
    }
}

fn path_hash(path: &Path) -> u64 {
    u64::from(crc32c::crc32c(path.as_os_str().as_encoded_bytes()))
}

fn uuid_from_seed(seed: u64) -> [u8; 16] {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut uuid = [0u8; 16];
    rng.fill(&mut uuid);
    uuid[6] = (uuid[6] & 0x0f) | 0x40;
    uuid[8] = (uuid[8] & 0x3f) | 0x80;
    uuid
}
