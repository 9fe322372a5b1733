//! What each recovery phase reads: the headers of every written zone, the first footer
//! block of segments written past their footer, footers or (for open segments) stop
//! footers and block metadata, damaged footers' zones block by block, and the resets of
//! zones that never held a segment. Phases follow each other when the previous one has
//! nothing in flight (`Recovery::advance`); reads go out in zone order, so that the same
//! seed gives the same run.

use std::collections::HashMap;

use zapraid_zns::{Command, ZoneAction, ZoneState, ZoneTarget};

use super::machine::{Op, Phase, Recovery};
use crate::error::Error;
use crate::layout::Layout;

impl Recovery {
    /// The layout of the segment in `zone` (its headers were judged).
    pub(super) fn layout_of(&self, zone: u32) -> Layout {
        self.zone_layouts[&zone].0
    }

    pub(super) fn read_headers(&mut self) {
        self.phase = Phase::Headers;
        let n = self.layout.drives();
        let (bs, ms) = (self.geometry.block_size_bytes as usize, self.geometry.metadata_bytes_per_block as usize);
        for zone in 0..self.geometry.zone_count {
            if !self.lanes.is_usable(zone) {
                continue; // a grown array's number of another epoch than its row's
            }
            let live = self.live_drives(zone);
            if live.is_empty() {
                // Every drive of the segment number failed: empty if one of them had been
                // rebuilt into spare space (no lane is left there), else unknowable.
                if (0..n).any(|lane| self.spared[self.lanes.drive(zone, lane)]) {
                    continue;
                }
                let tolerated = self.config.level.tolerated_failures();
                return self.fail(Error::TooManyErasures { lost: n, total: n, tolerated });
            }
            let past_header = live.iter().all(|d| self.written(*d, zone) >= self.plan.min_header_blocks());
            if !past_header {
                continue;
            }
            self.headers.insert(zone, vec![None; n]);
            self.footer_probes.insert(zone, vec![None; n]);
            for &drive in &live {
                let lba = self.geometry.zone_start_lba(zone);
                self.issue(drive, Op::Header { zone }, Command::Read { lba, data: vec![0; bs], metadata: vec![0; ms] });
            }
        }
        self.advance();
    }

    /// Judges every zone's headers (the segment, its layout) and reads the first footer
    /// block of segments whose zones are written past their footer on every drive.
    pub(super) fn judge_headers_and_probe_footers(&mut self) {
        // In zone order: the reads go out the same way in every run (same seed, same run).
        let mut zones: Vec<u32> = self.headers.keys().copied().collect();
        zones.sort_unstable();
        for &zone in &zones {
            let (sequence, layout, class) = match self.agreed_sequence(zone) {
                Ok(found) => found,
                Err(e) => return self.fail(e),
            };
            self.segments.insert(zone, sequence);
            self.zone_layouts.insert(zone, (layout, class));
        }
        if let Err(e) = self.check_failures() {
            return self.fail(e);
        }
        self.judge_checkpoint();
        self.probe_footers();
    }

    /// Reads the first footer block of the segments (those no checkpoint covers) whose
    /// zones are written past their footer on every drive.
    pub(super) fn probe_footers(&mut self) {
        self.phase = Phase::FooterProbes;
        let (bs, ms) = self.block_and_metadata_bytes();
        let zones: Vec<u32> = self.segments.keys().copied().collect();
        for zone in zones {
            if self.checkpointed(zone).is_some() {
                continue;
            }
            let live = self.live_drives(zone);
            let layout = self.layout_of(zone);
            let footer_end = layout.footer_start_blocks() + layout.footer_blocks;
            if live.iter().all(|d| self.written(*d, zone) >= footer_end) {
                let lba = self.geometry.zone_start_lba(zone) + layout.footer_start_blocks();
                for &drive in &live {
                    let command = Command::Read { lba, data: vec![0; bs], metadata: vec![0; ms] };
                    self.issue(drive, Op::FooterProbe { zone }, command);
                }
            }
        }
        self.advance();
    }

    pub(super) fn judge_segments_and_read_contents(&mut self) {
        self.phase = Phase::StopProbes;
        let zones: Vec<(u32, u64)> = self.segments.iter().map(|(z, s)| (*z, *s)).collect();
        for (zone, sequence) in zones {
            let live = self.live_drives(zone);
            if let Some(sealed) = self.checkpointed(zone).map(|s| s.sealed) {
                self.sealed.insert(zone, sealed);
                self.found.insert(zone, Vec::new());
                continue;
            }
            let layout = self.layout_of(zone);
            let footer_start = layout.footer_start_blocks();
            let footer_end = footer_start + layout.footer_blocks;
            // Sealing writes the footer to every drive before the zones are full, so a
            // full zone whose footer names the segment on any drive was sealed; drives
            // whose footer does not (damaged) are read block by block.
            let probes = &self.footer_probes[&zone];
            let named: Vec<usize> = live.iter().copied().filter(|d| probes[*d] == Some(sequence)).collect();
            let footer_written = live.iter().all(|d| self.written(*d, zone) >= footer_end);
            let sealed = footer_written && !named.is_empty();
            self.sealed.insert(zone, sealed);
            self.found.insert(zone, Vec::new());
            for &drive in &live {
                if !sealed {
                    if self.reports[drive][zone as usize].state == ZoneState::Full {
                        // Finished by an earlier start: the write pointer no longer says
                        // where the writes end.
                        self.search_end(drive, zone, layout.data_start_blocks() - 1, footer_start);
                    } else {
                        self.open_zone_ends(drive, zone, self.written(drive, zone).min(footer_start));
                    }
                    continue;
                }
                self.data_end.insert((zone, drive), footer_start);
                if !named.contains(&drive) {
                    tracing::warn!(drive, zone, "footer damaged, reading the zone's blocks instead");
                    self.rescan.insert((zone, drive));
                    continue;
                }
                self.read_range(drive, zone, footer_start, footer_end, |at| Op::Footer {
                    zone,
                    start: footer_start,
                    first_block: at - footer_start,
                });
            }
        }
        self.advance();
    }

    /// One step of the binary search for the end of a finished zone's writes.
    pub(super) fn search_end(&mut self, drive: usize, zone: u32, last_written: u64, unwritten: u64) {
        debug_assert!(last_written < unwritten);
        if unwritten - last_written <= 1 {
            return self.open_zone_ends(drive, zone, unwritten);
        }
        let probe = last_written + (unwritten - last_written) / 2;
        let (bs, ms) = self.block_and_metadata_bytes();
        let lba = self.geometry.zone_start_lba(zone) + probe;
        let op = Op::EndProbe { zone, last_written, unwritten, probe };
        self.issue(drive, op, Command::Read { lba, data: vec![0; bs], metadata: vec![0; ms] });
    }

    /// An open segment's zone on `drive` holds `written` blocks: see whether a clean stop
    /// left a stop footer at their end.
    pub(super) fn open_zone_ends(&mut self, drive: usize, zone: u32, written: u64) {
        self.open_extents.insert((zone, drive), (written, None));
        self.data_end.insert((zone, drive), written);
        if written > self.layout_of(zone).data_start_blocks() {
            let (bs, ms) = self.block_and_metadata_bytes();
            let lba = self.geometry.zone_start_lba(zone) + written - 1;
            self.issue(
                drive,
                Op::StopProbe { zone, written },
                Command::Read { lba, data: vec![0; bs], metadata: vec![0; ms] },
            );
        }
    }

    pub(super) fn block_and_metadata_bytes(&self) -> (usize, usize) {
        (self.geometry.block_size_bytes as usize, self.geometry.metadata_bytes_per_block as usize)
    }

    /// Reads zone-relative blocks `from..to` of a zone in transfers the drive takes.
    pub(super) fn read_range(&mut self, drive: usize, zone: u32, from: u64, to: u64, op: impl Fn(u64) -> Op) {
        let (bs, ms) = self.block_and_metadata_bytes();
        let zone_start = self.geometry.zone_start_lba(zone);
        let mut at = from;
        while at < to {
            let blocks = self.geometry.transfer_blocks_at_most(to - at);
            let data = vec![0; blocks as usize * bs];
            let metadata = vec![0; blocks as usize * ms];
            self.issue(drive, op(at), Command::Read { lba: zone_start + at, data, metadata });
            at += blocks;
        }
    }

    /// A read that failed (a media error): what it was to read counts as damaged.
    pub(super) fn take_unreadable(&mut self, drive: usize, op: Op) {
        match op {
            Op::Report | Op::Reset => {}
            // The zone's lane stays where the placement puts it.
            Op::PlacementHeader { .. } => {}
            // The header stays missing, the probe stays unmatched: both are judged with the
            // other drives' once all are in.
            Op::Header { .. } | Op::FooterProbe { .. } => {}
            Op::Footer { zone, .. } => {
                self.rescan.insert((zone, drive));
            }
            // An unreadable block was written: the search goes on past it.
            Op::EndProbe { zone, unwritten, probe, .. } => self.search_end(drive, zone, probe, unwritten),
            // No stop footer found: the zone is read block by block.
            Op::StopProbe { .. } => {}
            // Those blocks are not found; their stripes rebuild them.
            Op::Blocks { .. } => {}
        }
    }

    /// Reads what open segments hold: a stop footer where a clean stop left one, else the
    /// data and metadata of every written block.
    pub(super) fn read_open_segments(&mut self) {
        self.phase = Phase::Contents;
        let extents: Vec<_> = self.open_extents.iter().map(|(&k, &v)| (k, v)).collect();
        // A clean stop writes the stop footer to every drive at the same place (each drive
        // holds as many chunks): where one drive has it and another does not, the other's
        // is damaged, and its data ends there too.
        let mut stop_starts: HashMap<u32, u64> = HashMap::new();
        for ((zone, _), (_, stop_footer)) in &extents {
            if let Some(start) = stop_footer {
                stop_starts.entry(*zone).or_insert(*start);
            }
        }
        for ((zone, drive), (mut written, stop_footer)) in extents {
            if let (None, Some(&start)) = (stop_footer, stop_starts.get(&zone)) {
                tracing::warn!(drive, zone, "stop footer damaged, reading the zone's blocks instead");
                self.report.damaged_footers += 1;
                written = written.min(start);
                self.data_end.insert((zone, drive), written);
            }
            match stop_footer {
                Some(start) => {
                    self.report.stop_footers_read += 1;
                    self.data_end.insert((zone, drive), start);
                    self.read_range(drive, zone, start, written, |at| Op::Footer {
                        zone,
                        start,
                        first_block: at - start,
                    });
                }
                None => {
                    self.report.zones_scanned += 1;
                    let data_start = self.layout_of(zone).data_start_blocks();
                    self.read_range(drive, zone, data_start, written, |at| Op::Blocks { zone, first_offset: at });
                }
            }
        }
        self.advance();
    }

    /// Reads, block by block, the data region of zones whose footer or stop footer was
    /// damaged; what their footer pieces gave is dropped first (some may have decoded).
    pub(super) fn rescan_damaged_footers(&mut self) {
        self.phase = Phase::Rescans;
        let rescan: Vec<(u32, usize)> = self.rescan.iter().copied().collect();
        self.report.damaged_footers += rescan.len() as u64;
        for (zone, drive) in rescan {
            self.report.zones_scanned += 1;
            if let Some(found) = self.found.get_mut(&zone) {
                found.retain(|f| f.drive != drive);
            }
            let end = self.data_end[&(zone, drive)];
            let data_start = self.layout_of(zone).data_start_blocks();
            self.read_range(drive, zone, data_start, end, |at| Op::Blocks { zone, first_offset: at });
        }
        self.advance();
    }

    /// Resets zones some drive wrote into but whose segment never got past its header.
    pub(super) fn reset_unused_zones(&mut self) {
        self.phase = Phase::Resets;
        for zone in 0..self.geometry.zone_count {
            if self.segments.contains_key(&zone) || !self.lanes.is_usable(zone) {
                continue;
            }
            for drive in self.live_drives(zone) {
                if self.written(drive, zone) > 0 || self.reports[drive][zone as usize].state != ZoneState::Empty {
                    let start_lba = self.geometry.zone_start_lba(zone);
                    let target = ZoneTarget::Zone { start_lba };
                    self.issue(drive, Op::Reset, Command::ManageZone { action: ZoneAction::Reset, target });
                }
            }
        }
        self.reset_zones_of_no_lane();
        self.advance();
    }
}
