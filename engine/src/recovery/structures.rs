//! What recovery makes of the structures it reads: segment headers judged across the
//! drives (damage tolerated up to what parity covers, a header of another array or drive
//! an error), stop footers, footer blocks and per-block metadata, each turned into the
//! blocks found on a drive. Everything read is untrusted: nothing here panics on it.

use super::machine::{Found, Recovery};
use crate::error::Error;
use crate::format::{
    decode_footer_block, decode_stop_footer, lost_lba_of, BlockKind, BlockMetadata, StopFooterPlace,
    FOOTER_ENTRY_UNKNOWN,
};
use crate::hybrid::ChunkClass;
use crate::layout::Layout;

/// Why a drive's segment header is refused when the live drives' headers of a zone do not
/// all describe the same segment (what a stale copy of a drive, which missed writes the
/// others have, looks like); a start may name that drive to be left out.
pub const HEADERS_DISAGREE: &str = "disagrees with the other drives' headers of this segment";

/// Of the drives' headers of one zone (drive, what it describes), the drive that
/// disagrees, if they do not all agree: the first whose header fewer drives share than
/// the most shared one (a stale copy of one drive disagrees with all the others), or
/// with no such header, the first that differs from the first drive's.
fn odd_one_out<T: PartialEq>(shapes: &[(usize, T)]) -> Option<usize> {
    let (_, first) = shapes.first()?;
    let differing = shapes.iter().find(|(_, shape)| shape != first)?;
    let sharing = |shape: &T| shapes.iter().filter(|(_, s)| s == shape).count();
    let most = shapes.iter().map(|(_, shape)| sharing(shape)).max().unwrap_or(0);
    let odd = shapes.iter().find(|(_, shape)| sharing(shape) < most).unwrap_or(differing);
    Some(odd.0)
}

impl Recovery {
    /// Damaged structures tolerated per stripe of the segment in `zone`: what parity
    /// covers beyond its failed drives.
    pub(super) fn damage_budget(&self, zone: u32) -> usize {
        let failed = self.failed_lanes(zone).iter().filter(|f| **f).count();
        self.config.level.tolerated_failures().saturating_sub(failed)
    }

    /// The segment a zone's headers agree on and its layout: a header of another array or
    /// drive, of a shape the array does not write, or two that disagree, is an error
    /// (drives assembled wrongly, never repaired by guessing); headers that did not decode
    /// are damage, tolerated on as many drives as parity covers.
    pub(super) fn agreed_sequence(&mut self, zone: u32) -> std::result::Result<(u64, Layout, ChunkClass), Error> {
        let n = self.layout.drives();
        let live = self.live_drives(zone);
        let headers = &self.headers[&zone];
        let mut shapes: Vec<(usize, (u64, Layout, ChunkClass))> = Vec::with_capacity(n);
        let mut damaged = Vec::new();
        for &drive in &live {
            let Some(h) = headers[drive] else {
                damaged.push(drive);
                continue;
            };
            let problem = if h.array_uuid != self.config.array_uuid {
                Some("belongs to another array".to_string())
            } else if h.drive_index.get() as usize != drive {
                Some(format!("is drive {} of the array, found in position {drive}", h.drive_index.get()))
            } else if h.drive_count.get() as usize != n {
                Some(format!("says {} drives, the array has {n}", h.drive_count.get()))
            } else {
                None
            };
            if let Some(reason) = problem {
                return Err(self.corrupt(drive, zone, 0, "segment header", reason));
            }
            let class = ChunkClass::from_code(h.segment_class);
            let shape = class.and_then(|class| {
                let layout =
                    self.plan.layout_for(class, u64::from(h.chunk_blocks.get()), u64::from(h.group_size.get()))?;
                Some((h.segment_sequence.get(), layout, class))
            });
            let Some(shape) = shape else {
                let reason = format!(
                    "describes segments of {} blocks per chunk in groups of {} (class {}), which this array does \
                     not write",
                    h.chunk_blocks.get(),
                    h.group_size.get(),
                    h.segment_class
                );
                return Err(self.corrupt(drive, zone, 0, "segment header", reason));
            };
            shapes.push((drive, shape));
        }
        if let Some(drive) = odd_one_out(&shapes) {
            return Err(self.corrupt(drive, zone, 0, "segment header", HEADERS_DISAGREE.to_string()));
        }
        let agreed = shapes.first().map(|(_, shape)| *shape);
        let budget = self.damage_budget(zone);
        match agreed {
            Some(shape) if damaged.len() <= budget => {
                self.report.damaged_headers += damaged.len() as u64;
                Ok(shape)
            }
            _ => {
                let drive = damaged.first().copied().unwrap_or(0);
                let reason = format!(
                    "damaged on {} of {} drives, more than the {budget} parity can cover",
                    damaged.len(),
                    live.len()
                );
                Err(self.corrupt(drive, zone, 0, "segment header", reason))
            }
        }
    }

    /// A stop footer ends exactly at the write pointer, names this segment and drive, and
    /// records one entry per data block before it (`decode_stop_footer`).
    pub(super) fn take_stop_probe(&mut self, drive: usize, zone: u32, written: u64, data: &[u8], metadata: &[u8]) {
        debug_assert_eq!(data.len(), self.geometry.block_size_bytes as usize);
        let place = StopFooterPlace {
            segment_sequence: self.segments[&zone],
            drive_index: drive,
            data_start_blocks: self.layout_of(zone).data_start_blocks(),
            written_blocks: written,
        };
        if let Ok(start) = decode_stop_footer(data, metadata, &place) {
            self.open_extents.insert((zone, drive), (written, Some(start)));
        }
    }

    /// Takes footer blocks read at zone-relative block `at_block` (a sealed segment's footer
    /// region, or a stop footer).
    pub(super) fn take_footer(
        &mut self,
        drive: usize,
        zone: u32,
        at_block: u64,
        data: &[u8],
    ) -> std::result::Result<(), String> {
        let bs = self.geometry.block_size_bytes as usize;
        let layout = self.layout_of(zone);
        let cb = layout.chunk_blocks;
        let sequence = self.segments[&zone];
        for (i, block) in data.chunks_exact(bs).enumerate() {
            let offset = at_block + i as u64;
            let (header, entries) =
                decode_footer_block(block).map_err(|e| format!("footer block at zone offset {offset}: {e}"))?;
            if header.segment_sequence.get() != sequence || header.drive_index.get() as usize != drive {
                return Err(format!("footer block at zone offset {offset} is of another segment or drive"));
            }
            let first = u64::from(header.first_block.get());
            for (j, e) in entries.iter().enumerate() {
                let index = first + j as u64;
                if e.reserved.get() & FOOTER_ENTRY_UNKNOWN != 0 {
                    // A block a rebuild could not reconstruct: not found (damaged), and the
                    // LBA it names, if any, recorded lost as behind a marker (`install`).
                    let lba = lost_lba_of(e.lba.get()).filter(|lba| *lba < self.config.logical_blocks);
                    if let Some(lba) = lba.filter(|_| index < layout.stripes * cb) {
                        let (offset, timestamp) = (layout.data_start_blocks() + index, e.timestamp.get());
                        let named = Found { drive, offset, lba, timestamp, stripe_id: e.stripe_id.get() };
                        self.named_lost.entry(zone).or_default().push(named);
                    }
                    continue;
                }
                let found = Found {
                    drive,
                    offset: layout.data_start_blocks() + index,
                    lba: e.lba.get(),
                    timestamp: e.timestamp.get(),
                    stripe_id: e.stripe_id.get(),
                };
                if index < layout.stripes * cb {
                    self.found.get_mut(&zone).expect("segment").push(found);
                }
            }
        }
        Ok(())
    }

    pub(super) fn take_blocks(&mut self, drive: usize, zone: u32, first_offset: u64, data: &[u8], metadata: &[u8]) {
        let (bs, ms) = (self.geometry.block_size_bytes as usize, self.geometry.metadata_bytes_per_block as usize);
        let sequence_low = self.segments[&zone] & u64::from(u32::MAX);
        for (i, (block, oob)) in data.chunks_exact(bs).zip(metadata.chunks_exact(ms)).enumerate() {
            // Untrusted: torn, stale or corrupt blocks are simply not found. A data block
            // (or lost-block marker) whose checksum fails but whose metadata names this
            // segment was written whole (a block is written atomically) and damaged since:
            // kept aside, so that its LBA is recorded lost if nothing newer or readable
            // holds it (`install`), and its fields (a parity block's too) help rebuild its
            // row's (`assemble`).
            let Ok((m, kind)) = BlockMetadata::decode(block, oob) else {
                // With one data chunk per stripe (mirroring), the other chunks are copies:
                // their fields are the data block's.
                let copies = self.layout_of(zone).data_chunks == 1;
                if let Ok((m, kind)) = BlockMetadata::decode_unverified(oob) {
                    let data = matches!(kind, BlockKind::Data | BlockKind::Lost);
                    let names_it = data || (copies && kind == BlockKind::Parity);
                    let in_region = matches!(kind, BlockKind::Parity | BlockKind::Padding | BlockKind::Mapping);
                    let found = Found::of(drive, first_offset + i as u64, &m);
                    let ours = u64::from(m.segment_sequence_low.get()) == sequence_low;
                    if ours && names_it {
                        self.damaged.entry(zone).or_default().push(found);
                    } else if ours && in_region {
                        self.damaged_fields.entry(zone).or_default().push(found);
                    }
                }
                continue;
            };
            if u64::from(m.segment_sequence_low.get()) != sequence_low {
                continue;
            }
            let data_region = matches!(
                kind,
                BlockKind::Data | BlockKind::Parity | BlockKind::Padding | BlockKind::Mapping | BlockKind::Lost
            );
            if !data_region {
                // A stop footer left by a clean stop: the data region ends before it.
                let end = self.data_end.entry((zone, drive)).or_insert(u64::MAX);
                *end = (*end).min(first_offset + i as u64);
                continue;
            }
            self.found.get_mut(&zone).expect("segment").push(Found::of(drive, first_offset + i as u64, &m));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::odd_one_out;

    /// A stale copy of one drive is named wherever it sits (the first drive's header was
    /// taken as the agreed one, so a stale drive 0 made drive 1 the one refused).
    #[test]
    fn the_drive_whose_header_the_others_do_not_share_is_named() {
        assert_eq!(odd_one_out(&[(0, 7), (1, 7), (2, 7), (3, 7)]), None);
        assert_eq!(odd_one_out::<u32>(&[]), None);
        assert_eq!(odd_one_out(&[(0, 5), (1, 7), (2, 7), (3, 7)]), Some(0));
        assert_eq!(odd_one_out(&[(0, 7), (1, 7), (3, 5)]), Some(3));
        // No majority: the first that differs from the first drive's.
        assert_eq!(odd_one_out(&[(0, 7), (1, 5), (2, 5), (3, 7)]), Some(1));
    }
}
