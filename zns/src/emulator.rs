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

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::device::{Command, Completion, Done, Tag, ZonedDevice};
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::media::{DiscardMedia, FileMedia, Media, MemoryMedia, StoredZone};
use crate::timing::{TimedOp, Timing, TimingParams};
use crate::zone::{ZoneAction, ZoneDescriptor, ZoneState, ZoneTarget};

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

/// An emulated zoned namespace.
pub struct EmulatedDrive {
    geometry: Geometry,
    media: Box<dyn Media>,
    zones: Vec<StoredZone>,
    open_zones: u32,
    active_zones: u32,
    /// Implicitly opened zones, least recently opened first (closed first for room).
    implicitly_open: VecDeque<u32>,
    zone_write_in_flight: Vec<bool>,
    pending: BTreeMap<(u64, u64, u64), Pending>,
    ready: VecDeque<Completion>,
    now_ns: u64,
    timing: Option<Timing>,
    rng: ChaCha8Rng,
    submitted: u64,
    failed: bool,
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
        let mut drive = EmulatedDrive {
            geometry,
            media,
            open_zones: 0,
            active_zones: 0,
            implicitly_open: VecDeque::new(),
            zone_write_in_flight: vec![false; zones.len()],
            zones,
            pending: BTreeMap::new(),
            ready: VecDeque::new(),
            now_ns: 0,
            timing: None,
            rng: ChaCha8Rng::seed_from_u64(seed),
            submitted: 0,
            failed: false,
            media_errors: BTreeSet::new(),
            drive_uuid,
        };
        for zone in &drive.zones {
            drive.open_zones += u32::from(zone.state.is_open());
            drive.active_zones += u32::from(zone.state.is_active());
        }
        drive
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

    /// Opens a drive file, as a drive powering on: zones left open (by a clean close or
    /// a crash) come back closed, or empty if nothing was written to them.
    pub fn open_file(path: &Path) -> Result<Self> {
        let opened = FileMedia::open(path)?;
        let mut drive =
            Self::build(opened.geometry, Box::new(opened.media), opened.zones, opened.landing_seed, opened.drive_uuid);
        drive.power_on()?;
        Ok(drive)
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
        (0..self.geometry.zone_count).map(|z| self.descriptor(z)).collect()
    }

    // ---- fault injection -------------------------------------------------------------

    /// The whole drive fails: every command from now on completes with `DeviceFailed`.
    pub fn fail(&mut self) {
        self.failed = true;
    }

    pub fn is_failed(&self) -> bool {
        self.failed
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
        if zone >= self.geometry.zone_count {
            return Err(Error::LbaOutOfRange {
                lba: u64::from(zone) * self.geometry.zone_size_blocks,
                blocks: 1,
                total_blocks: self.geometry.total_blocks(),
            });
        }
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
        for zone in 0..self.geometry.zone_count {
            let stored = self.zones[zone as usize];
            if stored.state.is_open() {
                let state = if stored.written_blocks == 0 { ZoneState::Empty } else { ZoneState::Closed };
                self.transition(zone, state, stored.written_blocks)?;
            }
        }
        Ok(())
    }

    // ---- zone state machine ----------------------------------------------------------

    fn physical_index(&self, zone: u32, offset: u64) -> u64 {
        u64::from(zone) * self.geometry.zone_capacity_blocks + offset
    }

    fn descriptor(&self, zone: u32) -> ZoneDescriptor {
        let stored = self.zones[zone as usize];
        let start_lba = self.geometry.zone_start_lba(zone);
        let write_pointer = if stored.state == ZoneState::Full {
            start_lba + self.geometry.zone_capacity_blocks
        } else {
            start_lba + stored.written_blocks
        };
        ZoneDescriptor {
            zone,
            state: stored.state,
            start_lba,
            capacity_blocks: self.geometry.zone_capacity_blocks,
            write_pointer,
        }
    }

    /// Zone of a range of `blocks` blocks at `lba`, which must lie in one zone.
    fn zone_index(&self, lba: u64, blocks: u64) -> Result<u32> {
        let total_blocks = self.geometry.total_blocks();
        let end = lba.checked_add(blocks).filter(|end| *end <= total_blocks);
        let (Some(end), Some(zone)) = (end, self.geometry.zone_of(lba)) else {
            return Err(Error::LbaOutOfRange { lba, blocks, total_blocks });
        };
        if blocks > 0 && self.geometry.zone_of(end - 1) != Some(zone) {
            return Err(Error::ZoneBoundary { zone, lba, blocks });
        }
        Ok(zone)
    }

    /// Moves `zone` to `state` with `written_blocks`, keeping resource counters and the
    /// implicit-open order, and persists it.
    fn transition(&mut self, zone: u32, state: ZoneState, written_blocks: u64) -> Result<()> {
        let old = self.zones[zone as usize];
        self.open_zones = self.open_zones - u32::from(old.state.is_open()) + u32::from(state.is_open());
        self.active_zones = self.active_zones - u32::from(old.state.is_active()) + u32::from(state.is_active());
        if old.state == ZoneState::ImplicitlyOpen && state != ZoneState::ImplicitlyOpen {
            self.implicitly_open.retain(|z| *z != zone);
        }
        if state == ZoneState::ImplicitlyOpen && old.state != ZoneState::ImplicitlyOpen {
            self.implicitly_open.push_back(zone);
        }
        let stored = StoredZone { state, written_blocks };
        self.zones[zone as usize] = stored;
        if old != stored {
            self.media.store_zone(zone, stored)?;
        }
        Ok(())
    }

    /// Gets `zone` (empty, closed or implicitly open) an open resource, closing the least
    /// recently opened implicitly open zone if that is what it takes.
    fn make_open(&mut self, zone: u32, explicit: bool) -> Result<()> {
        let stored = self.zones[zone as usize];
        let target = if explicit { ZoneState::ExplicitlyOpen } else { ZoneState::ImplicitlyOpen };
        if stored.state.is_open() {
            if explicit && stored.state == ZoneState::ImplicitlyOpen {
                self.transition(zone, target, stored.written_blocks)?;
            }
            return Ok(());
        }
        if !stored.state.is_active() {
            if let Some(limit) = self.geometry.max_active_zones {
                if self.active_zones >= limit {
                    return Err(Error::TooManyActiveZones { zone, limit });
                }
            }
        }
        if let Some(limit) = self.geometry.max_open_zones {
            if self.open_zones >= limit {
                let Some(victim) = self.implicitly_open.front().copied() else {
                    return Err(Error::TooManyOpenZones { zone, limit });
                };
                let written = self.zones[victim as usize].written_blocks;
                self.transition(victim, ZoneState::Closed, written)?;
            }
        }
        self.transition(zone, target, stored.written_blocks)
    }

    fn read(&mut self, lba: u64, data: &mut [u8], metadata: &mut [u8]) -> Result<Done> {
        let blocks = self.geometry.blocks_in_buffers(data, metadata)?;
        if blocks > u64::from(self.geometry.max_transfer_blocks) {
            return Err(Error::TransferTooLarge { blocks, limit: self.geometry.max_transfer_blocks });
        }
        let zone = self.zone_index(lba, blocks)?;
        let stored = self.zones[zone as usize];
        if stored.state == ZoneState::Offline {
            return Err(Error::ZoneOffline { zone });
        }
        if let Some(bad) = self.media_errors.range(lba..lba + blocks).next() {
            return Err(Error::MediaError { lba: *bad });
        }
        let offset = lba - self.geometry.zone_start_lba(zone);
        let readable = stored.written_blocks.saturating_sub(offset).min(blocks);
        let split_data = self.geometry.data_bytes(readable);
        let split_meta = if metadata.is_empty() { 0 } else { self.geometry.metadata_bytes(readable) };
        if readable > 0 {
            self.media.read(self.physical_index(zone, offset), &mut data[..split_data], &mut metadata[..split_meta])?;
        }
        data[split_data..].fill(0);
        metadata[split_meta..].fill(0);
        Ok(Done::Read)
    }

    /// Zone Write (`lba` given) or Zone Append (`lba` None) into `zone`.
    fn write(&mut self, zone: u32, lba: Option<u64>, data: &[u8], metadata: &[u8]) -> Result<Done> {
        let blocks = self.geometry.blocks_in_buffers(data, metadata)?;
        if blocks > u64::from(self.geometry.max_transfer_blocks) {
            return Err(Error::TransferTooLarge { blocks, limit: self.geometry.max_transfer_blocks });
        }
        let stored = self.zones[zone as usize];
        match stored.state {
            ZoneState::Full => return Err(Error::ZoneIsFull { zone }),
            ZoneState::ReadOnly => return Err(Error::ZoneReadOnly { zone }),
            ZoneState::Offline => return Err(Error::ZoneOffline { zone }),
            _ => {}
        }
        let start = self.geometry.zone_start_lba(zone);
        let write_pointer = start + stored.written_blocks;
        let at = lba.unwrap_or(write_pointer);
        if at != write_pointer {
            return Err(Error::ZoneInvalidWrite { zone, lba: at, write_pointer });
        }
        if stored.written_blocks + blocks > self.geometry.zone_capacity_blocks {
            return Err(Error::ZoneBoundary { zone, lba: at, blocks });
        }
        self.make_open(zone, false)?;
        self.media.write(self.physical_index(zone, stored.written_blocks), data, metadata)?;
        let written = stored.written_blocks + blocks;
        let state = if written == self.geometry.zone_capacity_blocks {
            ZoneState::Full
        } else {
            self.zones[zone as usize].state
        };
        self.transition(zone, state, written)?;
        Ok(Done::Written { lba: at, blocks })
    }

    fn manage_one(&mut self, zone: u32, action: ZoneAction) -> Result<()> {
        let stored = self.zones[zone as usize];
        let invalid = Err(Error::InvalidZoneStateTransition { zone, state: stored.state, action });
        match (action, stored.state) {
            (_, ZoneState::Offline) => invalid,
            (ZoneAction::Reset, ZoneState::ReadOnly) => invalid,
            (ZoneAction::Reset, _) => {
                self.media.discard_zone(zone)?;
                let start = self.geometry.zone_start_lba(zone);
                let end = start + self.geometry.zone_size_blocks;
                let stale: Vec<u64> = self.media_errors.range(start..end).copied().collect();
                stale.iter().for_each(|lba| {
                    self.media_errors.remove(lba);
                });
                self.transition(zone, ZoneState::Empty, 0)
            }
            (_, ZoneState::ReadOnly) => invalid,
            (ZoneAction::Finish, ZoneState::Full) => Ok(()),
            (ZoneAction::Finish, _) => self.transition(zone, ZoneState::Full, stored.written_blocks),
            (ZoneAction::Open, ZoneState::Full) => invalid,
            (ZoneAction::Open, _) => self.make_open(zone, true),
            (ZoneAction::Close, ZoneState::Closed) => Ok(()),
            (ZoneAction::Close, ZoneState::ImplicitlyOpen | ZoneState::ExplicitlyOpen) => {
                let state = if stored.written_blocks == 0 { ZoneState::Empty } else { ZoneState::Closed };
                self.transition(zone, state, stored.written_blocks)
            }
            (ZoneAction::Close, _) => invalid,
        }
    }

    fn manage(&mut self, action: ZoneAction, target: ZoneTarget) -> Result<Done> {
        match target {
            ZoneTarget::Zone { start_lba } => {
                let zone = self.zone_index(start_lba, 1)?;
                if self.geometry.zone_start_lba(zone) != start_lba {
                    return Err(Error::NotZoneStart { lba: start_lba });
                }
                self.manage_one(zone, action)?;
            }
            ZoneTarget::All => {
                // NVMe "select all": each action applies to the zones in the states it
                // names, and skips the rest.
                for zone in 0..self.geometry.zone_count {
                    let state = self.zones[zone as usize].state;
                    let applies = match action {
                        ZoneAction::Reset => state.is_active() || state == ZoneState::Full,
                        ZoneAction::Finish => state.is_active(),
                        ZoneAction::Open => state == ZoneState::Closed,
                        ZoneAction::Close => state.is_open(),
                    };
                    if applies {
                        self.manage_one(zone, action)?;
                    }
                }
            }
        }
        Ok(Done::ZoneManaged)
    }

    fn report(&self, start_lba: u64, max_zones: u32) -> Result<Done> {
        let first = self.zone_index(start_lba, 1)?;
        let last = first.saturating_add(max_zones).min(self.geometry.zone_count);
        Ok(Done::Zones((first..last).map(|z| self.descriptor(z)).collect()))
    }

    fn complete(&mut self, pending: Pending) -> Completion {
        let Pending { tag, command, rejected } = pending;
        let (result, data, metadata) = match command {
            Command::Read { lba, mut data, mut metadata } => {
                let result = match rejected {
                    Some(e) => Err(e),
                    None if self.failed => Err(Error::DeviceFailed),
                    None => self.read(lba, &mut data, &mut metadata),
                };
                (result, data, metadata)
            }
            Command::Write { lba, data, metadata } => {
                let result = match rejected {
                    Some(e) => Err(e),
                    None => {
                        let zone = self.zone_index(lba, 1);
                        if let Ok(zone) = zone {
                            self.zone_write_in_flight[zone as usize] = false;
                        }
                        if self.failed {
                            Err(Error::DeviceFailed)
                        } else {
                            zone.and_then(|zone| self.write(zone, Some(lba), &data, &metadata))
                        }
                    }
                };
                (result, data, metadata)
            }
            Command::Append { zone_start_lba, data, metadata } => {
                let result = match rejected {
                    Some(e) => Err(e),
                    None if self.failed => Err(Error::DeviceFailed),
                    None => self.append(zone_start_lba, &data, &metadata),
                };
                (result, data, metadata)
            }
            Command::ManageZone { action, target } => {
                let result = match rejected {
                    Some(e) => Err(e),
                    None if self.failed => Err(Error::DeviceFailed),
                    None => self.manage(action, target),
                };
                (result, Vec::new(), Vec::new())
            }
            Command::ReportZones { start_lba, max_zones } => {
                let result = match rejected {
                    Some(e) => Err(e),
                    None if self.failed => Err(Error::DeviceFailed),
                    None => self.report(start_lba, max_zones),
                };
                (result, Vec::new(), Vec::new())
            }
        };
        self.debug_check_invariants();
        Completion { tag, result, data, metadata }
    }

    fn append(&mut self, zone_start_lba: u64, data: &[u8], metadata: &[u8]) -> Result<Done> {
        let zone = self.zone_index(zone_start_lba, 1)?;
        if self.geometry.zone_start_lba(zone) != zone_start_lba {
            return Err(Error::NotZoneStart { lba: zone_start_lba });
        }
        let blocks = (data.len() / self.geometry.block_size_bytes as usize) as u64;
        if blocks > u64::from(self.geometry.zone_append_max_blocks) {
            return Err(Error::AppendTooLarge { blocks, limit: self.geometry.zone_append_max_blocks });
        }
        self.write(zone, None, data, metadata)
    }

    fn debug_check_invariants(&self) {
        if cfg!(debug_assertions) {
            let open = self.zones.iter().filter(|z| z.state.is_open()).count() as u32;
            let active = self.zones.iter().filter(|z| z.state.is_active()).count() as u32;
            assert_eq!(open, self.open_zones, "open zone counter drifted");
            assert_eq!(active, self.active_zones, "active zone counter drifted");
            assert!(self.geometry.max_open_zones.is_none_or(|limit| open <= limit));
            assert!(self.geometry.max_active_zones.is_none_or(|limit| active <= limit));
            for zone in &self.zones {
                assert!(zone.written_blocks <= self.geometry.zone_capacity_blocks);
                assert!(zone.state != ZoneState::Empty || zone.written_blocks == 0);
            }
            assert_eq!(
                self.implicitly_open.len(),
                self.zones.iter().filter(|z| z.state == ZoneState::ImplicitlyOpen).count()
            );
        }
    }

    fn timed_op(&self, command: &Command) -> TimedOp {
        let block = u64::from(self.geometry.block_size_bytes);
        let zone_of = |lba: u64| self.geometry.zone_of(lba);
        match command {
            Command::Read { lba, data, .. } => match zone_of(*lba) {
                Some(zone) => TimedOp::Read {
                    zone,
                    offset_blocks: lba - self.geometry.zone_start_lba(zone),
                    blocks: data.len() as u64 / block,
                },
                None => TimedOp::Admin,
            },
            Command::Write { lba, data, .. } => match zone_of(*lba) {
                Some(zone) => TimedOp::Write { zone, blocks: data.len() as u64 / block },
                None => TimedOp::Admin,
            },
            Command::Append { zone_start_lba, data, .. } => match zone_of(*zone_start_lba) {
                Some(zone) => TimedOp::Append { zone, blocks: data.len() as u64 / block },
                None => TimedOp::Admin,
            },
            Command::ManageZone { action: ZoneAction::Reset, target } => TimedOp::Reset {
                zone: match target {
                    ZoneTarget::Zone { start_lba } => zone_of(*start_lba),
                    ZoneTarget::All => None,
                },
            },
            Command::ManageZone { action: ZoneAction::Finish, .. } => TimedOp::Finish,
            Command::ManageZone { .. } | Command::ReportZones { .. } => TimedOp::Admin,
        }
    }
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
