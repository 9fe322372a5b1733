//! The emulated drive's command set (`emulator`): zone lookup and the zone state machine,
//! reads, writes and appends at the write pointer, zone management and reports, and the
//! completion of a command when its time comes, with the invariants checked after each.

use super::*;

impl EmulatedDrive {
    pub(super) fn physical_index(&self, zone: u32, offset: u64) -> u64 {
        u64::from(zone) * self.geometry.zone_capacity_blocks + offset
    }

    pub(super) fn descriptor(&self, zone: u32) -> ZoneDescriptor {
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
    pub(super) fn zone_index(&self, lba: u64, blocks: u64) -> Result<u32> {
        let total_blocks = self.geometry.total_blocks();
        let end = lba.checked_add(blocks).filter(|end| *end <= total_blocks);
        let (Some(end), Some(zone)) = (end, self.geometry.zone_of(lba)) else {
            return Err(Error::LbaOutOfRange { lba, blocks, total_blocks });
        };
        if blocks > 0 && self.geometry.zone_of(end - 1) != Some(zone) {
            return Err(Error::ZoneBoundary { zone, lba, blocks });
        }
        if !self.owned.contains(&zone) {
            return Err(Error::ZoneNotInPart { zone, first_zone: self.owned.start, end_zone: self.owned.end });
        }
        Ok(zone)
    }

    /// Moves `zone` to `state` with `written_blocks`, keeping the drive's open and active
    /// zone counts and the implicit-open order, and persists it. A move that would pass
    /// the open or active zone limit changes nothing and is refused.
    pub(super) fn transition(&mut self, zone: u32, state: ZoneState, written_blocks: u64) -> Result<()> {
        let old = self.zones[zone as usize];
        let open = i32::from(state.is_open()) - i32::from(old.state.is_open());
        let active = i32::from(state.is_active()) - i32::from(old.state.is_active());
        if open != 0 || active != 0 {
            self.shared.change_zone_counts(open, active, &self.geometry).map_err(|shortage| match shortage {
                Shortage::Active(limit) => Error::TooManyActiveZones { zone, limit },
                Shortage::Open(limit) => Error::TooManyOpenZones { zone, limit },
            })?;
        }
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
    /// recently opened implicitly open zone if that is what it takes. A part closes only
    /// zones of its own: another part's are another thread's to change.
    pub(super) fn make_open(&mut self, zone: u32, explicit: bool) -> Result<()> {
        let stored = self.zones[zone as usize];
        let target = if explicit { ZoneState::ExplicitlyOpen } else { ZoneState::ImplicitlyOpen };
        if stored.state.is_open() {
            if explicit && stored.state == ZoneState::ImplicitlyOpen {
                self.transition(zone, target, stored.written_blocks)?;
            }
            return Ok(());
        }
        loop {
            // Room taken by other parts between one try and the next costs another victim,
            // until this part has none left.
            match self.transition(zone, target, stored.written_blocks) {
                Err(Error::TooManyOpenZones { limit, .. }) => {
                    let Some(victim) = self.implicitly_open.front().copied() else {
                        return Err(Error::TooManyOpenZones { zone, limit });
                    };
                    let written = self.zones[victim as usize].written_blocks;
                    self.transition(victim, ZoneState::Closed, written)?;
                }
                done => return done,
            }
        }
    }

    pub(super) fn read(&mut self, lba: u64, data: &mut [u8], metadata: &mut [u8]) -> Result<Done> {
        let blocks = self.geometry.blocks_in_buffers(data, metadata)?;
        self.geometry.check_transfer(blocks)?;
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
    pub(super) fn write(&mut self, zone: u32, lba: Option<u64>, data: &[u8], metadata: &[u8]) -> Result<Done> {
        let blocks = self.geometry.blocks_in_buffers(data, metadata)?;
        self.geometry.check_transfer(blocks)?;
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

    pub(super) fn manage_one(&mut self, zone: u32, action: ZoneAction) -> Result<()> {
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

    pub(super) fn manage(&mut self, action: ZoneAction, target: ZoneTarget) -> Result<Done> {
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
                for zone in self.owned.clone() {
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

    pub(super) fn report(&self, start_lba: u64, max_zones: u32) -> Result<Done> {
        let first = self.zone_index(start_lba, 1)?;
        let last = first.saturating_add(max_zones).min(self.owned.end);
        Ok(Done::Zones((first..last).map(|z| self.descriptor(z)).collect()))
    }

    pub(super) fn complete(&mut self, pending: Pending) -> Completion {
        let Pending { tag, command, rejected } = pending;
        let (result, data, metadata) = match command {
            Command::Read { lba, mut data, mut metadata } => {
                let result = match rejected {
                    Some(e) => Err(e),
                    None if self.is_failed() => Err(Error::DeviceFailed),
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
                        if self.is_failed() {
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
                    None if self.is_failed() => Err(Error::DeviceFailed),
                    None => self.append(zone_start_lba, &data, &metadata),
                };
                (result, data, metadata)
            }
            Command::ManageZone { action, target } => {
                let result = match rejected {
                    Some(e) => Err(e),
                    None if self.is_failed() => Err(Error::DeviceFailed),
                    None => self.manage(action, target),
                };
                (result, Vec::new(), Vec::new())
            }
            Command::ReportZones { start_lba, max_zones } => {
                let result = match rejected {
                    Some(e) => Err(e),
                    None if self.is_failed() => Err(Error::DeviceFailed),
                    None => self.report(start_lba, max_zones),
                };
                (result, Vec::new(), Vec::new())
            }
        };
        self.debug_check_invariants();
        Completion { tag, result, data, metadata }
    }

    pub(super) fn append(&mut self, zone_start_lba: u64, data: &[u8], metadata: &[u8]) -> Result<Done> {
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

    pub(super) fn debug_check_invariants(&self) {
        if cfg!(debug_assertions) {
            let owned = &self.zones[self.owned.start as usize..self.owned.end as usize];
            let open = owned.iter().filter(|z| z.state.is_open()).count() as u32;
            let active = owned.iter().filter(|z| z.state.is_active()).count() as u32;
            // A part's zones are some of the drive's: the drive's counts hold at least theirs.
            let (drive_open, drive_active) = self.shared.zone_counts();
            let whole = self.owned.len() == self.zones.len();
            assert!(drive_open >= open && (!whole || drive_open == open), "open zone counter drifted");
            assert!(drive_active >= active && (!whole || drive_active == active), "active zone counter drifted");
            assert!(self.geometry.max_open_zones.is_none_or(|limit| drive_open <= limit));
            assert!(self.geometry.max_active_zones.is_none_or(|limit| drive_active <= limit));
            for zone in owned {
                assert!(zone.written_blocks <= self.geometry.zone_capacity_blocks);
                assert!(zone.state != ZoneState::Empty || zone.written_blocks == 0);
            }
            assert_eq!(
                self.implicitly_open.len(),
                owned.iter().filter(|z| z.state == ZoneState::ImplicitlyOpen).count()
            );
        }
    }

    pub(super) fn timed_op(&self, command: &Command) -> TimedOp {
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
