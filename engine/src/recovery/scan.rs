//! Recovery's reading of the log for a running engine: the segments it names read as a
//! start reads them (footers, or for a segment closed without one its stop footer or every
//! written block's metadata; damaged footers rescanned block by block; stripes assembled,
//! fields parity rebuilds included), and the data blocks found for a range of LBAs handed
//! back per segment. The engine rebuilds a page of the L2P table whose mapping block
//! cannot be read this way (`engine::page_rebuild`).
//!
//! Invariants: a scan reads and nothing else (no header judged, no zone reset, no engine
//! built): the zones it names belong to the running engine, which goes on writing the
//! others meanwhile. It takes the segments' shapes from the engine, not from their headers.

use std::ops::Range;

use zapraid_zns::Geometry;

use super::assemble::DataBlock;
use super::machine::Recovery;
use crate::config::Config;
use crate::error::Result;
use crate::hybrid::ChunkClass;
use crate::lanes::Lanes;
use crate::layout::Layout;
use crate::parity::ParityCodec;
use crate::stripe_table::CompactStripeTable;

/// A segment on the drives whose log a scan reads, as the engine holds it.
#[derive(Clone, Debug)]
pub(crate) struct ScanSegment {
    pub zone: u32,
    pub sequence: u64,
    pub layout: Layout,
    pub class: ChunkClass,
    /// With Zone Append, the engine's compact stripe table of the segment: where each
    /// drive's chunk of each stripe is, also on a drive the scan cannot read (failed, or
    /// being rebuilt and not holding the segment yet), whose places the drives' own
    /// records cannot say.
    pub table: Option<CompactStripeTable>,
    /// The lane a rebuild has not written yet (a declustered array's; a classic array's
    /// drive being rebuilt is passed as failed): read like a failed drive's.
    pub absent: Option<usize>,
}

/// What a scan found in one segment for the LBAs asked about.
#[derive(Debug)]
pub(crate) struct ScannedSegment {
    pub zone: u32,
    pub sequence: u64,
    /// Data blocks of those LBAs.
    pub blocks: Vec<DataBlock>,
    /// Damaged blocks whose LBA and timestamp could not be rebuilt (any LBA): what the
    /// segment holds is not fully known.
    pub unknown_blocks: u64,
}

impl Recovery {
    /// A scan of `segments` on drives of `geometry`, `failed_drives` not read (their
    /// blocks' fields come from the parity of the others'). Drive it like a start
    /// (`poll_command`, `on_completion`, `is_done`), then `finish_scan`. A declustered
    /// array's scan takes the running engine's `lanes` as they stand (lanes moved into
    /// spare space included) and speaks the engine's numbering: the engine's own map
    /// translates its commands and completions.
    pub(crate) fn scan_segments(
        geometry: Geometry,
        config: Config,
        failed_drives: &[usize],
        lanes: &Lanes,
        segments: &[ScanSegment],
    ) -> Result<Self> {
        let mut scan = Self::with_failed_drives(geometry, config, failed_drives)?;
        if !lanes.is_classic() {
            scan.lanes = lanes.snapshot();
            scan.engine_numbering = true;
        }
        scan.scan_only = true;
        let n = scan.layout.drives();
        for s in segments {
            debug_assert_eq!(s.layout.drives(), n, "every layout spans the array's drives");
            scan.segments.insert(s.zone, s.sequence);
            scan.zone_layouts.insert(s.zone, (s.layout, s.class));
            scan.footer_probes.insert(s.zone, vec![None; n]);
            if let Some(table) = &s.table {
                scan.known_places.insert(s.zone, table.clone());
            }
            if let Some(lane) = s.absent {
                scan.absent_lanes.insert(s.zone, lane);
            }
        }
        Ok(scan)
    }

    /// Per segment scanned, its data blocks whose LBA is in `lbas`, once `is_done`; the
    /// error that stopped the scan otherwise (a drive failed beyond what parity covers).
    pub(crate) fn finish_scan(self, lbas: Range<u64>) -> Result<Vec<ScannedSegment>> {
        debug_assert!(self.scan_only, "a start is finished by finish()");
        if let Some(e) = self.error {
            return Err(e);
        }
        let codec = ParityCodec::for_level(self.config.level)?;
        let mut scanned = Vec::with_capacity(self.segments.len());
        for (&zone, &sequence) in &self.segments {
            let assembled = self.assemble(zone, &codec);
            // A lost-block marker stands for the LBA its field names without the flag.
            let in_range = |field: &u64| lbas.contains(&crate::format::split_lost_lba(*field).0);
            let blocks = assembled.blocks.into_iter().filter(|b| in_range(&b.field)).collect();
            scanned.push(ScannedSegment { zone, sequence, blocks, unknown_blocks: assembled.lost });
        }
        Ok(scanned)
    }
}
