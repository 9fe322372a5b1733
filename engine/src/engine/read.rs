//! Reads and degraded reads: an L2P lookup, one read per block with its metadata;
//! unwritten blocks read as zeros. A block on a failed drive, or that fails its checksum,
//! LBA or sequence check, is rebuilt from the other chunks of its stripe, found by static
//! offset (Zone Write) or the compact stripe table (Zone Append). Losing more than m chunks
//! is an I/O error, never wrong data: a rebuilt block must say the LBA asked for. A
//! damaged block (its drive works) that a frontend read rebuilt has its row rewritten, it
//! and every other live block of the row, from what was read to rebuild it (`repair`).
//!
//! A frontend may take the checksum check on its own thread (`Request::ReadUnverified`):
//! then a block read from a drive is checked here for everything but its checksum, and
//! its metadata goes with the answer (`ReadChecks`) for the frontend to verify; blocks
//! made here (zeros, rebuilt from checked shards) need no check there.
//!
//! Read buffers come from the engine's `BufferPool` and go back to it, except the one a
//! one-block read answers with (the drive's buffer itself, no copy). A read's metadata
//! buffer is zeroed first, so that a drive reporting success without filling it fails the
//! checks instead of passing an older block's.

use zapraid_zns::{Command, Completion};

use crate::checksum::ReadChecks;
use crate::drive_command::DriveCommand;
use crate::error::{Error, Result};
use crate::format::{decode_fields, field_bytes, BlockKind, BlockMetadata, FIELD_BYTES, MAX_DRIVES};
use crate::l2p::Physical;
use crate::parity::shard_slices_mut;

use super::machine::{Engine, Op};
use super::request::{RequestId, Response};
use super::state::read::{BlockRebuild, ReadOrigin, ReadRequest, StripePlaces};

/// Finished reads' vectors kept at most for the next reads (`Spare::reads`).
const MAX_SPARE_READS: usize = 4096;

impl Engine {
    /// A frontend read; `unverified`: its blocks' checksums are left to the frontend.
    pub(super) fn read(&mut self, id: RequestId, lba: u64, blocks: u64, unverified: bool) {
        if let Err(e) = self.check_range(lba, blocks) {
            return self.responses.push_back(Response::new(id, Err(e)));
        }
        let origin = if unverified { ReadOrigin::FrontendUnverified(id) } else { ReadOrigin::Frontend(id) };
        self.start_read(origin, lba, blocks);
    }

    pub(super) fn start_read(&mut self, origin: ReadOrigin, lba: u64, blocks: u64) {
        if blocks == 1 {
            let place = self.l2p.get(lba);
            return self.start_read_at(origin, lba, [place]);
        }
        let places: Vec<_> = (0..blocks).map(|i| self.l2p.get(lba + i)).collect();
        self.start_read_at(origin, lba, places);
    }

    /// Reads the blocks at `places` (None: never written, zeros), which are to say LBAs
    /// `lba..` in their metadata.
    pub(super) fn start_read_at<P>(&mut self, origin: ReadOrigin, lba: u64, places: P)
    where
        P: IntoIterator<Item = Option<Physical>>,
        P::IntoIter: ExactSizeIterator,
    {
        let places = places.into_iter();
        let blocks = places.len();
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let (mut slots, mut timestamps, mut unverified) = self.spare.reads.pop().unwrap_or_default();
        debug_assert!(
            slots.is_empty() && timestamps.is_empty() && unverified.is_empty(),
            "spare read vectors are empty"
        );
        slots.resize_with(blocks, || None);
        timestamps.resize(blocks, 0);
        if matches!(origin, ReadOrigin::FrontendUnverified(_)) {
            unverified.resize(blocks, None);
        }
        // Every block is pending until it is read, rebuilt or failed: the read cannot
        // finish before the last one is issued.
        let frontend = matches!(origin, ReadOrigin::Frontend(_) | ReadOrigin::FrontendUnverified(_));
        let request = ReadRequest { origin, lba, blocks: slots, timestamps, unverified, pending: blocks, error: None };
        let read = self.reads.insert(request);
        for (block, place) in places.enumerate() {
            match place {
                Some(_) if frontend && self.is_lost(lba + block as u64) => {
                    self.read_block_failed(read, block, Error::Lost { lba: lba + block as u64 });
                }
                None => {
                    let zeros = self.buffers.take_zeroed(bs);
                    let request = self.reads.get_mut(read).expect("read in flight");
                    request.blocks[block] = Some(zeros);
                    request.pending -= 1;
                }
                Some(physical) if !self.holds(physical.zone, physical.drive) => {
                    self.rebuild_block(read, block, physical)
                }
                Some(physical) => {
                    let lba = self.geometry.zone_start_lba(physical.zone) + physical.offset;
                    self.seg_mut(physical.zone).commands_in_flight += 1;
                    let tag = self.new_tag(Op::Read { read, block, physical });
                    // The drive overwrites the data; the metadata is zeroed, so that a drive
                    // that reports success without filling it fails the checks.
                    let (data, metadata) = (self.buffers.take(bs), self.buffers.take_zeroed(ms));
                    self.commands.push_back(DriveCommand {
                        drive: physical.drive,
                        tag,
                        command: Command::Read { lba, data, metadata },
                        delay_ns: 0,
                    });
                }
            }
        }
        self.finish_read(read);
    }

    /// A block read completed. Whether it can have made anything else possible (for
    /// `on_completion`): not when it was a frontend's block, read intact, while no
    /// background work (garbage collection, a rebuild, a scrub, a stop) runs, since these
    /// wait for reads on their zones to finish. A relocation's or scrub's read goes on, a
    /// block that failed is rebuilt and repaired.
    pub(super) fn read_done(&mut self, read: u64, block: usize, physical: Physical, completion: Completion) -> bool {
        let Completion { result, data, metadata, .. } = completion;
        let Some(request) = self.reads.get(read) else {
            self.buffers.give(data);
            self.buffers.give(metadata);
            return true;
        };
        let frontend = matches!(request.origin, ReadOrigin::Frontend(_) | ReadOrigin::FrontendUnverified(_));
        let expected_lba = request.lba + block as u64;
        // The frontend checks the checksum of an unverified read's blocks, on its thread.
        let unverified = matches!(request.origin, ReadOrigin::FrontendUnverified(_));
        let sequence = self.segment_of_zone(physical.zone).map(|s| s.sequence);
        let decoded = if unverified {
            BlockMetadata::decode_unverified(&metadata)
        } else {
            BlockMetadata::decode(&data, &metadata)
        };
        self.buffers.give(metadata);
        let intact = match decoded {
            Ok((m, kind)) if result.is_ok() => {
                let intact = kind == BlockKind::of_data_lba(expected_lba)
                    && m.lba.get() == expected_lba
                    && Some(u64::from(m.segment_sequence_low.get())) == sequence.map(|s| s & u64::from(u32::MAX));
                intact.then_some(m)
            }
            _ => None,
        };
        if let Some(m) = intact {
            let request = self.reads.get_mut(read).expect("read in flight");
            request.blocks[block] = Some(data);
            request.timestamps[block] = m.timestamp.get();
            if unverified {
                request.unverified[block] = Some(m);
            }
            request.pending -= 1;
            self.finish_read(read);
            !(frontend && self.background_idle())
        } else {
            self.buffers.give(data);
            if matches!(result, Err(zapraid_zns::Error::DeviceFailed)) {
                self.fail_lane(physical.zone, physical.drive);
            }
            self.rebuild_block(read, block, physical);
            true
        }
    }

    /// The stripe whose chunk `drive` holds (or would hold) at chunk position `position` of
    /// the segment in `zone`, and where the other drives holding the segment keep theirs:
    /// the static offset (Zone Write) or the compact stripe table (Zone Append).
    pub(super) fn stripe_places(&self, zone: u32, drive: usize, position: u64) -> Option<StripePlaces> {
        let seg = self.segment_of_zone(zone)?;
        let layout = seg.layout;
        let group = position / layout.group_size;
        let (stripe_id, stripe_number) = match &seg.table {
            None => (0u32, position),
            Some(table) => {
                let id = table.get(drive, position)?;
                (id, group * layout.group_size + u64::from(id))
            }
        };
        let mut others = Vec::new();
        let mut entries_checked = 0u64;
        for other in 0..layout.drives() {
            if other == drive || !self.holds(zone, other) {
                continue;
            }
            let found = match &seg.table {
                None => Some(position),
                Some(table) => {
                    let first = group * layout.group_size;
                    let found =
                        (first..first + layout.group_stripes(group)).find(|p| table.get(other, *p) == Some(stripe_id));
                    entries_checked += found.map_or(layout.group_stripes(group), |p| p - first + 1);
                    found
                }
            };
            if let Some(p) = found {
                others.push((other, p));
            }
        }
        Some(StripePlaces { stripe_number, others, entries_checked })
    }

    /// Rebuilds one block from the other chunks of its stripe.
    pub(super) fn rebuild_block(&mut self, read: u64, block: usize, physical: Physical) {
        let lba = self.reads.get(read).expect("read in flight").lba + block as u64;
        let Some(seg) = self.segment_of_zone(physical.zone) else {
            return self.read_block_failed(read, block, Error::InvalidConfig { reason: "no segment for zone".into() });
        };
        let layout = seg.layout;
        let n = layout.drives();
        let cb = layout.chunk_blocks;
        let data_start = layout.data_start_blocks();
        let position = (physical.offset - data_start) / cb;
        let within = (physical.offset - data_start) % cb;
        let Some(places) = self.stripe_places(physical.zone, physical.drive, position) else {
            let reason = format!("no stripe recorded for LBA {lba}");
            return self.read_block_failed(read, block, Error::InvalidConfig { reason });
        };
        let (stripe_number, entries_checked) = (places.stripe_number, places.entries_checked);
        let sources = places.others;
        let lost_chunk = layout.chunk_on(stripe_number, physical.drive);
        let needed = layout.data_chunks;
        if sources.len() < needed || layout.parity_chunks == 0 {
            let lost = n - sources.len();
            self.note_holes(physical.zone);
            return self.read_block_failed(
                read,
                block,
                Error::TooManyErasures { lost, total: n, tolerated: layout.parity_chunks },
            );
        }
        let zone_start = self.geometry.zone_start_lba(physical.zone);
        let mut offsets = vec![None; n];
        for (drive, position) in &sources {
            offsets[*drive] = Some(data_start + position * cb + within);
        }
        let rebuild = self.next_read;
        self.next_read += 1;
        self.block_rebuilds.insert(
            rebuild,
            BlockRebuild {
                read,
                block,
                lba,
                stripe_number,
                lost_chunk,
                shards: (0..n).map(|_| None).collect(),
                offsets,
                pending: sources.len(),
                damaged: self.holds(physical.zone, physical.drive),
                physical,
            },
        );
        let (bs, ms) = (self.block_bytes(), self.meta_bytes());
        let delay_ns = entries_checked * self.config.lookup_ps_per_entry / 1000;
        for (drive, position) in sources {
            let offset = data_start + position * cb + within;
            self.seg_mut(physical.zone).commands_in_flight += 1;
            let tag = self.new_tag(Op::DegradedShard { rebuild, drive, zone: physical.zone });
            // As for a read: the data is overwritten, the metadata zeroed.
            let (data, metadata) = (self.buffers.take(bs), self.buffers.take_zeroed(ms));
            self.commands.push_back(DriveCommand {
                drive,
                tag,
                command: Command::Read { lba: zone_start + offset, data, metadata },
                delay_ns,
            });
        }
    }

    pub(super) fn rebuild_shard_done(&mut self, rebuild: u64, zone: u32, drive: usize, completion: Completion) {
        let Completion { result, data, metadata, .. } = completion;
        let Some(r) = self.block_rebuilds.get_mut(&rebuild) else {
            self.buffers.give(data);
            self.buffers.give(metadata);
            return;
        };
        r.pending -= 1;
        // Checked once here: `reconstruct` takes the fields decoded now.
        match BlockMetadata::decode(&data, &metadata) {
            Ok((m, _)) if result.is_ok() => {
                r.shards[drive] = Some((data, field_bytes(m.lba.get(), m.timestamp.get())));
            }
            _ => {
                self.buffers.give(data);
                if matches!(result, Err(zapraid_zns::Error::DeviceFailed)) {
                    let failed = self.failing_drive(zone, drive);
                    self.failed[failed] = true;
                }
            }
        }
        self.buffers.give(metadata);
        if self.block_rebuilds[&rebuild].pending > 0 {
            return;
        }
        let mut r = self.block_rebuilds.remove(&rebuild).expect("rebuild in flight");
        let result = self.reconstruct(&r);
        if let Ok((data, timestamp)) = &result {
            if r.damaged {
                self.read_blocks_repaired += 1;
                tracing::warn!(lba = r.lba, "a damaged block was rebuilt from its stripe");
                let frontend = self
                    .reads
                    .get(r.read)
                    .is_some_and(|q| matches!(q.origin, ReadOrigin::Frontend(_) | ReadOrigin::FrontendUnverified(_)));
                if frontend {
                    // Its row, with the shards read for it. Garbage collection rewrites
                    // the blocks it reads anyway, and the rest of their segment.
                    self.schedule_read_repair(&mut r, data.clone(), *timestamp);
                }
            }
        }
        for shard in r.shards.drain(..).flatten() {
            self.buffers.give(shard.0);
        }
        match result {
            Ok((data, timestamp)) => {
                if let Some(request) = self.reads.get_mut(r.read) {
                    request.blocks[r.block] = Some(data);
                    request.timestamps[r.block] = timestamp;
                    request.pending -= 1;
                } else {
                    self.buffers.give(data);
                }
                self.finish_read(r.read);
            }
            Err(e) => {
                if Self::beyond_parity(&e) {
                    self.note_holes(r.physical.zone);
                }
                self.read_block_failed(r.read, r.block, e)
            }
        }
    }

    /// Decodes the lost block (data and its LBA/timestamp fields) from the shards read
    /// (checked when they arrived), into a pooled buffer, and checks that it is the block
    /// asked for.
    pub(super) fn reconstruct(&mut self, r: &BlockRebuild) -> Result<(Vec<u8>, u64)> {
        let n = self.layout.drives();
        // Shards are indexed by chunk (data first, then parity), not by drive.
        let mut data_shards: [Option<&[u8]>; MAX_DRIVES] = [None; MAX_DRIVES];
        let mut field_shards: [Option<&[u8]>; MAX_DRIVES] = [None; MAX_DRIVES];
        for (drive, shard) in r.shards.iter().enumerate() {
            let Some((data, fields)) = shard else { continue };
            let chunk = self.layout.chunk_on(r.stripe_number, drive);
            data_shards[chunk] = Some(data);
            field_shards[chunk] = Some(fields);
        }
        debug_assert!(data_shards[r.lost_chunk].is_none(), "the lost chunk was not read");
        // The codec rebuilds every missing chunk: one output per missing one, the lost
        // chunk's among them at its rank.
        let missing = data_shards[..n].iter().filter(|c| c.is_none()).count();
        let lost_rank = data_shards[..r.lost_chunk].iter().filter(|c| c.is_none()).count();
        let bs = self.block_bytes();
        let mut rebuilt: [Vec<u8>; MAX_DRIVES] = std::array::from_fn(|_| Vec::new());
        rebuilt.iter_mut().take(missing).for_each(|b| *b = self.buffers.take(bs));
        let mut rebuilt_fields = [[0u8; FIELD_BYTES]; MAX_DRIVES];
        let decoded = {
            let mut out = shard_slices_mut(rebuilt.iter_mut().map(Vec::as_mut_slice));
            let mut fields_out = shard_slices_mut(rebuilt_fields.iter_mut().map(|f| &mut f[..]));
            self.codec
                .reconstruct_into(&data_shards[..n], &mut out[..missing])
                .and_then(|()| self.codec.reconstruct_into(&field_shards[..n], &mut fields_out[..missing]))
        };
        let block = std::mem::take(&mut rebuilt[lost_rank]);
        for other in rebuilt.into_iter().take(missing) {
            self.buffers.give(other);
        }
        let checked = decoded.and_then(|()| {
            let (lba, timestamp) = decode_fields(&rebuilt_fields[lost_rank]).expect("reconstructed fields are whole");
            if lba != r.lba {
                return Err(Error::Corrupt {
                    drive: 0,
                    zone: 0,
                    offset_blocks: 0,
                    structure: "rebuilt block",
                    reason: format!("rebuilt block says LBA {lba}, expected {}", r.lba),
                });
            }
            Ok(timestamp)
        });
        match checked {
            Ok(timestamp) => Ok((block, timestamp)),
            Err(e) => {
                self.buffers.give(block);
                Err(e)
            }
        }
    }

    pub(super) fn read_block_failed(&mut self, read: u64, block: usize, error: Error) {
        if let Some(request) = self.reads.get_mut(read) {
            debug_assert!(request.blocks[block].is_none());
            request.pending -= 1;
            request.error.get_or_insert(error);
        }
        self.finish_read(read);
    }

    pub(super) fn finish_read(&mut self, read: u64) {
        if self.reads.get(read).is_none_or(|r| r.pending > 0) {
            return;
        }
        let ReadRequest { origin, lba, blocks: mut slots, mut timestamps, mut unverified, error, .. } =
            self.reads.remove(read).expect("read exists");
        debug_assert!(
            !matches!(origin, ReadOrigin::Relocation(_)) || timestamps.len() == 1,
            "relocation reads one block at a time"
        );
        let first_timestamp = timestamps.first().copied().unwrap_or(0);
        let result = match error {
            Some(e) => Err(e),
            // One block: its read buffer is the answer, no copy.
            None if slots.len() == 1 => Ok(slots[0].take().expect("every block read")),
            None => {
                let bs = self.block_bytes();
                let mut data = self.buffers.take(slots.len() * bs);
                for (to, block) in data.chunks_exact_mut(bs).zip(&slots) {
                    to.copy_from_slice(block.as_ref().expect("every block read"));
                }
                Ok(data)
            }
        };
        for block in slots.drain(..).flatten() {
            self.buffers.give(block);
        }
        let checks = match unverified.len() {
            _ if result.is_err() => None,
            0 => None,
            1 => Some(ReadChecks::One(unverified[0])),
            _ => Some(ReadChecks::Many(unverified.clone())),
        };
        timestamps.clear();
        unverified.clear();
        if self.spare.reads.len() < MAX_SPARE_READS {
            self.spare.reads.push((slots, timestamps, unverified));
        }
        match origin {
            ReadOrigin::Frontend(id) => self.responses.push_back(Response::new(id, result)),
            ReadOrigin::FrontendUnverified(id) => self.responses.push_back(Response { id, result, checks }),
            ReadOrigin::Relocation(from) => {
                self.relocation_read_done(from, lba, first_timestamp, result);
            }
            ReadOrigin::Mapping(page) => self.mapping_loaded(page, result),
        }
    }
}
