//! The conformance suite's checks (`conformance`): each drives the device through the
//! interface alone, on zones of its own, and says what it found wrong.

use super::*;

impl<D: ZonedDevice + ?Sized> Suite<'_, D> {
    pub(super) fn run(&mut self, command: Command) -> Completion {
        execute(self.device, command)
    }

    pub(super) fn ok(&mut self, what: &str, command: Command) -> CheckResultOf<(Done, Vec<u8>, Vec<u8>)> {
        let c = self.run(command);
        match c.result {
            Ok(done) => Ok((done, c.data, c.metadata)),
            Err(e) => fail(format!("{what}: unexpected error: {e}")),
        }
    }

    pub(super) fn expect_error(
        &mut self,
        what: &str,
        command: Command,
        expected: &str,
        is: impl Fn(&Error) -> bool,
    ) -> CheckResultOf {
        let c = self.run(command);
        match c.result {
            Err(e) if is(&e) => Ok(()),
            Err(e) => fail(format!("{what}: expected {expected}, got error {e}")),
            Ok(done) => fail(format!("{what}: expected {expected}, got success {done:?}")),
        }
    }

    pub(super) fn zone(&mut self, zone: u32) -> CheckResultOf<ZoneDescriptor> {
        let start_lba = self.geometry.zone_start_lba(zone);
        match self.ok("report zone", Command::ReportZones { start_lba, max_zones: 1 })? {
            (Done::Zones(z), _, _) if z.len() == 1 && z[0].start_lba == start_lba => Ok(z[0]),
            (other, _, _) => fail(format!("report of zone {zone} returned {other:?}")),
        }
    }

    pub(super) fn expect_zone(&mut self, zone: u32, state: &[ZoneState], written: u64) -> CheckResultOf {
        let d = self.zone(zone)?;
        ensure(state.contains(&d.state) && d.write_pointer == d.start_lba + written, || {
            format!(
                "zone {zone}: expected {} with write pointer at +{written}, found {} at +{}",
                state.iter().map(ZoneState::to_string).collect::<Vec<_>>().join(" or "),
                d.state,
                d.write_pointer - d.start_lba
            )
        })
    }

    pub(super) fn write(&mut self, lba: u64, blocks: u64, salt: u64) -> CheckResultOf {
        let (data, metadata) = pattern(&self.geometry, lba, blocks, salt);
        match self.ok("write", Command::Write { lba, data, metadata })? {
            (Done::Written { lba: at, blocks: n }, _, _) if at == lba && n == blocks => Ok(()),
            (other, _, _) => fail(format!("write of {blocks} at {lba} completed as {other:?}")),
        }
    }

    pub(super) fn read(&mut self, lba: u64, blocks: u64) -> CheckResultOf<(Vec<u8>, Vec<u8>)> {
        let data = vec![0xee; self.geometry.data_bytes(blocks)];
        let metadata = vec![0xee; self.geometry.metadata_bytes(blocks)];
        let (_, data, metadata) = self.ok("read", Command::Read { lba, data, metadata })?;
        Ok((data, metadata))
    }

    pub(super) fn verify(&mut self, lba: u64, blocks: u64, salt: u64) -> CheckResultOf {
        let (data, metadata) = self.read(lba, blocks)?;
        let (want_data, want_meta) = pattern(&self.geometry, lba, blocks, salt);
        ensure(data == want_data, || format!("data read at LBA {lba} differs from what was written"))?;
        ensure(metadata == want_meta, || format!("metadata read at LBA {lba} differs from what was written"))
    }

    pub(super) fn verify_zeros(&mut self, lba: u64, blocks: u64) -> CheckResultOf {
        let (data, metadata) = self.read(lba, blocks)?;
        ensure(data.iter().all(|b| *b == 0) && metadata.iter().all(|b| *b == 0), || {
            format!("unwritten blocks at LBA {lba} did not read as zeros")
        })
    }

    pub(super) fn manage(&mut self, zone: u32, action: ZoneAction) -> CheckResultOf {
        let start_lba = self.geometry.zone_start_lba(zone);
        self.ok(
            &format!("{action} zone {zone}"),
            Command::ManageZone { action, target: ZoneTarget::Zone { start_lba } },
        )
        .map(|_| ())
    }

    /// Writes of every size up to the transfer limit read back, data and metadata. (A
    /// kernel and QEMU combination loses the metadata of some sizes without an error.)
    pub(super) fn every_transfer_size_reads_back(&mut self) -> CheckResultOf {
        self.need_zones(3)?;
        let (write_zone, append_zone) = (1, 2);
        let g = self.geometry;
        let up_to_limit = 1..=u64::from(g.max_transfer_blocks);
        let write_sizes: Vec<u64> = up_to_limit.clone().filter(|b| g.transfer_takes(*b)).collect();
        let append_sizes: Vec<u64> = up_to_limit.filter(|b| g.append_takes(*b)).collect();
        let mut wrong = Vec::new();
        for (zone, sizes, by_append) in [(write_zone, write_sizes, false), (append_zone, append_sizes, true)] {
            let start = self.geometry.zone_start_lba(zone);
            let mut at = start;
            for blocks in sizes {
                if at + blocks > start + self.geometry.zone_capacity_blocks {
                    break;
                }
                let salt = 70 + blocks;
                if by_append {
                    let (data, metadata) = pattern(&self.geometry, at, blocks, salt);
                    match self.ok("append", Command::Append { zone_start_lba: start, data, metadata })? {
                        (Done::Written { lba, .. }, _, _) if lba == at => {}
                        (other, _, _) => return fail(format!("append of {blocks} at {at} completed as {other:?}")),
                    }
                } else {
                    self.write(at, blocks, salt)?;
                }
                // Read back in the command's size and block by block: the kernel and QEMU
                // have lost metadata of a size both ways (`Geometry::transfer_granule_blocks`).
                let whole = self.verify(at, blocks, salt).is_ok();
                // A command's pattern is its blocks' patterns one after another: block b
                // alone is the pattern of one block at at + b.
                let single = (0..blocks).all(|b| self.verify(at + b, 1, salt).is_ok());
                if !(whole && single) {
                    wrong.push(format!("{} of {blocks}", if by_append { "append" } else { "write" }));
                }
                at += blocks;
            }
            self.manage(zone, ZoneAction::Reset)?;
        }
        ensure(wrong.is_empty(), || format!("these commands read back differently: {}", wrong.join(", ")))
    }

    /// Zone 2 written before and after zone 1 is reset: everything in zone 2 (data and
    /// metadata, by writes and appends) reads back as written. An array resets a
    /// reclaimed zone while it writes the next one.
    pub(super) fn reset_leaves_other_zones(&mut self) -> CheckResultOf {
        self.need_zones(3)?;
        let (a, b) = (1, 2);
        let (start_a, start_b) = (self.geometry.zone_start_lba(a), self.geometry.zone_start_lba(b));
        // As many blocks as an array's footer write (a few dozen), not the transfer limit:
        // QEMU drives with little or no metadata refuse reads of the full limit (EINVAL),
        // a separate question this check is not about.
        const BLOCKS: u64 = 42;
        let big = self.geometry.transfer_blocks_at_most(BLOCKS.min(self.geometry.zone_capacity_blocks / 4));
        if self.geometry.zone_capacity_blocks < 2 * big + 8 {
            return Err(Check::Skip("zone capacity too small".into()));
        }
        self.write(start_b, big, 31)?;
        self.write(start_a, big, 32)?;
        self.manage(a, ZoneAction::Reset)?;
        self.write(start_b + big, big, 33)?;
        let (data, metadata) = pattern(&self.geometry, start_b + 2 * big, 4, 34);
        match self.ok("append", Command::Append { zone_start_lba: start_b, data, metadata })? {
            (Done::Written { lba, .. }, _, _) if lba == start_b + 2 * big => {}
            (other, _, _) => return fail(format!("append to zone {b} completed as {other:?}")),
        }
        self.verify(start_b, big, 31)?;
        self.verify(start_b + big, big, 33)?;
        self.verify(start_b + 2 * big, 4, 34)?;
        self.verify_zeros(start_a, 1)?;
        self.manage(b, ZoneAction::Reset)?;
        // Far from the start of the namespace too (metadata lives elsewhere there).
        for zone in [self.geometry.zone_count / 2, self.geometry.zone_count - 1] {
            let start = self.geometry.zone_start_lba(zone);
            self.write(start, big, 35)?;
            self.verify(start, big, 35)?;
            self.manage(zone, ZoneAction::Reset)?;
        }
        Ok(())
    }

    pub(super) fn reset_all(&mut self) -> CheckResultOf {
        self.ok("reset all zones", Command::ManageZone { action: ZoneAction::Reset, target: ZoneTarget::All })
            .map(|_| ())
    }

    pub(super) fn need_zones(&self, zones: u32) -> CheckResultOf {
        if self.geometry.zone_count < zones {
            return Err(Check::Skip(format!("needs {zones} zones, the device has {}", self.geometry.zone_count)));
        }
        Ok(())
    }

    // ---- the checks ------------------------------------------------------------------

    pub(super) fn report_is_consistent(&mut self) -> CheckResultOf {
        let g = self.geometry;
        let zones = report_all_zones(self.device).or_else(|e| fail(format!("zone report: {e}")))?;
        ensure(zones.len() == g.zone_count as usize, || {
            format!("{} zones reported, geometry says {}", zones.len(), g.zone_count)
        })?;
        let (mut open, mut active) = (0, 0);
        for (i, z) in zones.iter().enumerate() {
            ensure(z.start_lba == g.zone_start_lba(i as u32), || format!("zone {i} starts at LBA {}", z.start_lba))?;
            ensure(z.capacity_blocks == g.zone_capacity_blocks, || format!("zone {i} capacity {}", z.capacity_blocks))?;
            ensure(z.write_pointer >= z.start_lba && z.written_blocks() <= g.zone_capacity_blocks, || {
                format!("zone {i} write pointer {} outside the zone", z.write_pointer)
            })?;
            ensure(z.state != ZoneState::Empty || z.write_pointer == z.start_lba, || {
                format!("empty zone {i} has its write pointer at {}", z.write_pointer)
            })?;
            open += u32::from(z.state.is_open());
            active += u32::from(z.state.is_active());
        }
        ensure(g.max_open_zones.is_none_or(|l| open <= l), || {
            format!("{open} zones open, limit {}", g.max_open_zones.map_or("none".into(), |l| l.to_string()))
        })?;
        ensure(g.max_active_zones.is_none_or(|l| active <= l), || {
            format!("{active} zones active, limit {}", g.max_active_zones.map_or("none".into(), |l| l.to_string()))
        })
    }

    pub(super) fn reset_all_empties_zones(&mut self) -> CheckResultOf {
        self.reset_all()?;
        let zones = report_all_zones(self.device).or_else(|e| fail(format!("zone report: {e}")))?;
        for z in zones {
            let degraded = matches!(z.state, ZoneState::ReadOnly | ZoneState::Offline);
            ensure(degraded || (z.state == ZoneState::Empty && z.write_pointer == z.start_lba), || {
                format!("zone {} is {} after reset all", z.zone, z.state)
            })?;
        }
        Ok(())
    }

    pub(super) fn write_and_read_back(&mut self, zone: u32) -> CheckResultOf {
        let start = self.geometry.zone_start_lba(zone);
        let blocks = 3.min(self.geometry.zone_capacity_blocks - 1).max(1);
        self.write(start, blocks, 1)?;
        let open =
            if blocks == self.geometry.zone_capacity_blocks { ZoneState::Full } else { ZoneState::ImplicitlyOpen };
        self.expect_zone(zone, &[open], blocks)?;
        self.verify(start, blocks, 1)?;
        // Single blocks inside the range read back too.
        self.verify(start + blocks - 1, 1, 1)
    }

    pub(super) fn write_off_write_pointer_fails(&mut self, zone: u32) -> CheckResultOf {
        let start = self.geometry.zone_start_lba(zone);
        if self.geometry.zone_capacity_blocks < 4 {
            return Err(Check::Skip("zone capacity below 4 blocks".into()));
        }
        self.write(start, 1, 2)?;
        for lba in [start + 2, start] {
            let (data, metadata) = pattern(&self.geometry, lba, 1, 3);
            self.expect_error(
                &format!("write at LBA {lba} with the write pointer at {}", start + 1),
                Command::Write { lba, data, metadata },
                "a zone invalid write error",
                |e| matches!(e, Error::ZoneInvalidWrite { .. }),
            )?;
        }
        self.expect_zone(zone, &[ZoneState::ImplicitlyOpen], 1)?;
        self.verify(start, 1, 2)
    }

    pub(super) fn unwritten_blocks_read_as_zeros(&mut self, zone: u32) -> CheckResultOf {
        let start = self.geometry.zone_start_lba(zone);
        if self.geometry.zone_capacity_blocks < 4 {
            return Err(Check::Skip("zone capacity below 4 blocks".into()));
        }
        self.verify_zeros(start, 2)?;
        self.write(start, 1, 4)?;
        let (data, metadata) = self.read(start, 2)?;
        let (want, want_meta) = pattern(&self.geometry, start, 1, 4);
        let block = want.len();
        let meta = want_meta.len();
        ensure(data[..block] == want[..] && metadata[..meta] == want_meta[..], || {
            "written half of a read differs".into()
        })?;
        ensure(data[block..].iter().all(|b| *b == 0) && metadata[meta..].iter().all(|b| *b == 0), || {
            "unwritten half of a read is not zeros".into()
        })
    }

    pub(super) fn append_returns_landing_lba(&mut self, zone: u32) -> CheckResultOf {
        let start = self.geometry.zone_start_lba(zone);
        let blocks = 2.min(u64::from(self.geometry.zone_append_max_blocks));
        if self.geometry.zone_capacity_blocks < 2 * blocks {
            return Err(Check::Skip("zone capacity too small for two appends".into()));
        }
        for (i, salt) in [(0, 5), (1, 6)] {
            let expected = start + i * blocks;
            let (data, metadata) = pattern(&self.geometry, expected, blocks, salt);
            match self.ok("append", Command::Append { zone_start_lba: start, data, metadata })? {
                (Done::Written { lba, blocks: n }, _, _) if lba == expected && n == blocks => {}
                (other, _, _) => {
                    return fail(format!("append {i} to an empty zone landed as {other:?}, expected LBA {expected}"))
                }
            }
            self.verify(expected, blocks, salt)?;
        }
        self.expect_zone(zone, &[ZoneState::ImplicitlyOpen], 2 * blocks)
    }

    pub(super) fn concurrent_appends_land_once_each(&mut self, zone: u32) -> CheckResultOf {
        let start = self.geometry.zone_start_lba(zone);
        let count = 8u64.min(self.geometry.zone_capacity_blocks).min(self.device.queue_depth() as u64);
        for tag in 0..count {
            // Block contents say which append they came from; the LBA is not known yet.
            let (data, metadata) = pattern(&self.geometry, 0, 1, 100 + tag);
            self.device.submit(tag, Command::Append { zone_start_lba: start, data, metadata });
        }
        let mut completions = Vec::new();
        while (completions.len() as u64) < count {
            if self.device.wait(&mut completions) == 0 && (completions.len() as u64) < count {
                return fail("device lost an append");
            }
        }
        let mut landed = vec![None; count as usize];
        for c in completions {
            match c.result {
                Ok(Done::Written { lba, blocks: 1 }) if (start..start + count).contains(&lba) => {
                    let slot = &mut landed[(lba - start) as usize];
                    if slot.is_some() {
                        return fail(format!("two appends landed at LBA {lba}"));
                    }
                    *slot = Some(c.tag);
                }
                other => return fail(format!("concurrent append {} completed as {other:?}", c.tag)),
            }
        }
        for (offset, tag) in landed.iter().enumerate() {
            let tag = tag.expect("every slot filled: count appends, count distinct LBAs");
            let (data, metadata) = self.read(start + offset as u64, 1)?;
            let (want, want_meta) = pattern(&self.geometry, 0, 1, 100 + tag);
            ensure(data == want && metadata == want_meta, || {
                format!("LBA {} does not hold append {tag}, which completed there", start + offset as u64)
            })?;
        }
        self.expect_zone(zone, &[ZoneState::ImplicitlyOpen, ZoneState::Full], count)
    }

    pub(super) fn oversized_append_fails(&mut self, zone: u32) -> CheckResultOf {
        let start = self.geometry.zone_start_lba(zone);
        let blocks = u64::from(self.geometry.zone_append_max_blocks) + 1;
        if blocks > self.geometry.zone_capacity_blocks {
            return Err(Check::Skip("append limit is not below the zone capacity".into()));
        }
        let (data, metadata) = pattern(&self.geometry, start, blocks, 7);
        self.expect_error(
            &format!("append of {blocks} blocks"),
            Command::Append { zone_start_lba: start, data, metadata },
            "an append size error",
            |e| {
                matches!(
                    e,
                    Error::AppendTooLarge { .. } | Error::TransferTooLarge { .. } | Error::TransferNotWhole { .. }
                )
            },
        )?;
        self.expect_zone(zone, &[ZoneState::Empty], 0)
    }

    /// Most bytes a check may write to fill a zone; bigger zones skip the check.
    const FILL_LIMIT_BYTES: u64 = 256 << 20;

    pub(super) fn capacity_is_enforced(&mut self, zone: u32) -> CheckResultOf {
        let g = self.geometry;
        let cap = g.zone_capacity_blocks;
        if cap * u64::from(g.block_size_bytes) > Self::FILL_LIMIT_BYTES {
            return Err(Check::Skip(format!("zone capacity over {} MiB", Self::FILL_LIMIT_BYTES >> 20)));
        }
        if cap < 3 {
            return Err(Check::Skip("zone capacity below 3 blocks".into()));
        }
        let start = g.zone_start_lba(zone);
        let mut written = 0;
        while written < cap - 1 {
            let blocks = g.transfer_blocks_at_most(cap - 1 - written);
            self.write(start + written, blocks, 8)?;
            written += blocks;
        }
        let tail = start + cap - 1;
        let (data, metadata) = pattern(&g, tail, 2, 9);
        self.expect_error(
            "write of 2 blocks into the last free block",
            Command::Write { lba: tail, data, metadata },
            "a zone boundary error",
            |e| matches!(e, Error::ZoneBoundary { .. }),
        )?;
        if g.zone_append_max_blocks >= 2 {
            let (data, metadata) = pattern(&g, tail, 2, 9);
            self.expect_error(
                "append of 2 blocks into the last free block",
                Command::Append { zone_start_lba: start, data, metadata },
                "a zone boundary error",
                |e| matches!(e, Error::ZoneBoundary { .. }),
            )?;
        }
        self.write(tail, 1, 10)?;
        self.expect_zone(zone, &[ZoneState::Full], cap)?;
        let (data, metadata) = pattern(&g, start + cap, 1, 11);
        self.expect_error(
            "append to a full zone",
            Command::Append { zone_start_lba: start, data, metadata },
            "a zone full error",
            |e| matches!(e, Error::ZoneIsFull { .. }),
        )?;
        self.verify(tail, 1, 10)?;
        self.verify(start, 1, 8)
    }

    pub(super) fn finish_then_reset(&mut self, zone: u32) -> CheckResultOf {
        let start = self.geometry.zone_start_lba(zone);
        let cap = self.geometry.zone_capacity_blocks;
        if cap < 3 {
            return Err(Check::Skip("zone capacity below 3 blocks".into()));
        }
        self.write(start, 1, 12)?;
        self.manage(zone, ZoneAction::Finish)?;
        self.expect_zone(zone, &[ZoneState::Full], cap)?;
        let (data, metadata) = pattern(&self.geometry, start + 1, 1, 13);
        self.expect_error(
            "write to a finished zone",
            Command::Write { lba: start + 1, data, metadata },
            "a zone full error",
            |e| matches!(e, Error::ZoneIsFull { .. } | Error::ZoneInvalidWrite { .. }),
        )?;
        self.verify(start, 1, 12)?;
        self.verify_zeros(start + 1, 1)?;
        self.manage(zone, ZoneAction::Reset)?;
        self.expect_zone(zone, &[ZoneState::Empty], 0)?;
        self.verify_zeros(start, 2)?;
        self.write(start, 2, 14)?;
        self.verify(start, 2, 14)
    }

    pub(super) fn open_close_transitions(&mut self, zone: u32) -> CheckResultOf {
        let start = self.geometry.zone_start_lba(zone);
        if self.geometry.zone_capacity_blocks < 3 {
            return Err(Check::Skip("zone capacity below 3 blocks".into()));
        }
        self.expect_error(
            "close of an empty zone",
            Command::ManageZone { action: ZoneAction::Close, target: ZoneTarget::Zone { start_lba: start } },
            "an invalid zone state transition",
            |e| matches!(e, Error::InvalidZoneStateTransition { .. }),
        )?;
        self.manage(zone, ZoneAction::Open)?;
        self.expect_zone(zone, &[ZoneState::ExplicitlyOpen], 0)?;
        self.write(start, 1, 15)?;
        self.expect_zone(zone, &[ZoneState::ExplicitlyOpen], 1)?;
        self.manage(zone, ZoneAction::Close)?;
        self.expect_zone(zone, &[ZoneState::Closed], 1)?;
        self.write(start + 1, 1, 16)?;
        self.expect_zone(zone, &[ZoneState::ImplicitlyOpen], 2)?;
        self.verify(start, 1, 15)?;
        self.verify(start + 1, 1, 16)?;
        self.manage(zone, ZoneAction::Reset)
    }

    pub(super) fn boundaries_are_enforced(&mut self) -> CheckResultOf {
        self.need_zones(2)?;
        let g = self.geometry;
        let last_of_zone0 = g.zone_size_blocks - 1;
        let data = vec![0; g.data_bytes(2)];
        let metadata = vec![0; g.metadata_bytes(2)];
        self.expect_error(
            "read across a zone boundary",
            Command::Read { lba: last_of_zone0, data, metadata },
            "a zone boundary error",
            |e| matches!(e, Error::ZoneBoundary { .. }),
        )?;
        let data = vec![0; g.data_bytes(1)];
        self.expect_error(
            "read past the namespace",
            Command::Read { lba: g.total_blocks(), data, metadata: Vec::new() },
            "an LBA out of range error",
            |e| matches!(e, Error::LbaOutOfRange { .. }),
        )?;
        if g.zone_size_blocks > 1 {
            self.expect_error(
                "zone management at an LBA that does not start a zone",
                Command::ManageZone { action: ZoneAction::Reset, target: ZoneTarget::Zone { start_lba: 1 } },
                "an invalid zone start error",
                |e| matches!(e, Error::NotZoneStart { .. }),
            )?;
        }
        Ok(())
    }

    pub(super) fn partial_report(&mut self) -> CheckResultOf {
        self.need_zones(3)?;
        let start_lba = self.geometry.zone_start_lba(1);
        match self.ok("report 2 zones from zone 1", Command::ReportZones { start_lba, max_zones: 2 })? {
            (Done::Zones(z), _, _) if z.len() == 2 && z[0].zone == 1 && z[1].zone == 2 => Ok(()),
            (other, _, _) => fail(format!("report of 2 zones from zone 1 returned {other:?}")),
        }
    }

    /// Explicitly opened zones hold their resources: one more open zone is refused.
    pub(super) fn open_limit_is_enforced(&mut self, first: u32) -> CheckResultOf {
        let Some(limit) = self.geometry.max_open_zones else {
            return Err(Check::Skip("the device has no open zone limit".into()));
        };
        self.need_zones(first + limit + 1)?;
        self.reset_all()?;
        for zone in first..first + limit {
            self.manage(zone, ZoneAction::Open)?;
        }
        let extra = first + limit;
        let lba = self.geometry.zone_start_lba(extra);
        let (data, metadata) = pattern(&self.geometry, lba, 1, 17);
        self.expect_error(
            &format!("write to a new zone with {limit} zones explicitly open"),
            Command::Write { lba, data, metadata },
            "a too many open (or active) zones error",
            |e| matches!(e, Error::TooManyOpenZones { .. } | Error::TooManyActiveZones { .. }),
        )?;
        self.expect_zone(extra, &[ZoneState::Empty], 0)?;
        self.reset_all()
    }

    /// Closed zones keep their active resource: past the active limit writes are refused
    /// until a zone is finished.
    pub(super) fn active_limit_is_enforced(&mut self, first: u32) -> CheckResultOf {
        let Some(limit) = self.geometry.max_active_zones else {
            return Err(Check::Skip("the device has no active zone limit".into()));
        };
        if self.geometry.zone_capacity_blocks < 2 {
            return Err(Check::Skip("zone capacity below 2 blocks".into()));
        }
        self.need_zones(first + limit + 1)?;
        self.reset_all()?;
        for zone in first..first + limit {
            self.write(self.geometry.zone_start_lba(zone), 1, 18)?;
        }
        let extra = first + limit;
        let lba = self.geometry.zone_start_lba(extra);
        let (data, metadata) = pattern(&self.geometry, lba, 1, 19);
        self.expect_error(
            &format!("write to a new zone with {limit} zones active"),
            Command::Write { lba, data, metadata },
            "a too many active zones error",
            |e| matches!(e, Error::TooManyActiveZones { .. }),
        )?;
        self.manage(first, ZoneAction::Finish)?;
        self.write(lba, 1, 19)?;
        self.verify(lba, 1, 19)?;
        for zone in first + 1..first + limit {
            self.verify(self.geometry.zone_start_lba(zone), 1, 18)?;
        }
        self.reset_all()
    }
}
