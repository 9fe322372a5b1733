//! The open-segment options of `format`, `selftest` and `simulate` (hybrid segment
//! management, the ZapRAID paper's section 3.3): Ns segments of small chunks (Cs) and Nl
//! of large chunks (Cl) open at once. Checked here so that a bad combination is refused
//! naming the options; how to choose them is in `FORMAT_HELP` (and the README).

use anyhow::{bail, Result};
use clap::Args;
use zapraid_engine::hybrid::MAX_OPEN_SEGMENTS;
use zapraid_engine::{Mode, OpenSegments};

use crate::size::{format_bytes, parse_bytes};

/// Zones per drive each open segment keeps open and active: its own and one of a segment
/// being sealed (`SegmentPlan::active_zones_needed`).
const ZONES_PER_OPEN_SEGMENT: u32 = 1 + zapraid_engine::capacity::SEALING_SEGMENTS_PER_OPEN;

/// How to choose the open segments, after `zapraid format --help`.
pub const FORMAT_HELP: &str = "\
Open segments (hybrid segment management, the ZapRAID paper's section 3.3):
  An array writes into Ns open segments of small chunks (--small-segments, chunk
  --small-chunk = Cs) and Nl open segments of large chunks (--large-segments, chunk
  --large-chunk = Cl) at once. A write smaller than Cl goes to small-chunk stripes; every
  other write, and garbage collection, goes to large-chunk stripes (to small-chunk ones
  when Nl = 0). Under --mode zapraid, small-chunk segment 0 takes the stripe groups
  written with Zone Append and every other open segment is written with Zone Write, one
  stripe at a time at fixed offsets; --mode zone-write and zone-append write every
  segment their one way.

  Choosing Cs, Cl, Ns, Nl:
  - Cs: the size most small writes have; a stripe of small chunks holds k x Cs of data,
    so small writes fill it with less padding. Cl > Cs: the size from which a write counts
    as large; a large chunk makes fewer, larger commands for large writes and for garbage
    collection.
  - Ns, Nl: more open segments of a class take more of its writes at once. Each open
    segment costs 2 open and 2 active zones per drive (the segment being written and one
    being sealed), plus 1 active zone for the superblock: drives must allow
    2 x (Ns + Nl) open and 2 x (Ns + Nl) + 1 active zones (see `zapraid device info`),
    and Ns + Nl is at most 16. Open segments also count in the space kept back from the
    exported capacity (format prints what is usable).
  - Defaults (--small-chunk 4K, --small-segments 1, --large-segments 0): one open segment,
    the array zapraid has always made. Nl > 0 needs --large-chunk; under --mode zapraid Ns
    must be at least 1 (its segment 0 takes the Zone Append groups).
  - Measured effect of the choices (Exp#7): see `zapraid bench hybrid` (Exp#7).

  Example: 2 small segments of 8 KiB chunks and 2 large ones of 16 KiB chunks (8 open and
  9 active zones per drive):
    zapraid format --level raid5 --small-chunk 8K --large-chunk 16K \\
        --small-segments 2 --large-segments 2 d0 d1 d2 d3";

/// Ns, Nl, Cs and Cl as the command line takes them.
#[derive(Args, Clone, Debug)]
#[command(next_help_heading = "Open segments (hybrid segment management; `zapraid format --help` explains)")]
pub struct OpenSegmentArgs {
    /// Cs: the chunk size of small-chunk segments (of every segment without
    /// --large-segments), a multiple of the drives' block size, e.g. 4K, 8K, 16K.
    #[arg(long = "small-chunk", visible_alias = "chunk", value_name = "SIZE", default_value = "4K",
          value_parser = parse_bytes)]
    pub small_chunk_bytes: u64,
    /// Cl: the chunk size of large-chunk segments, larger than Cs; writes of at least Cl
    /// and garbage collection go to them.
    #[arg(long = "large-chunk", value_name = "SIZE", value_parser = parse_bytes)]
    pub large_chunk_bytes: Option<u64>,
    /// Ns: open segments of small chunks.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub small_segments: u32,
    /// Nl: open segments of large chunks (needs --large-chunk).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub large_segments: u32,
}

impl OpenSegmentArgs {
    /// The open segments asked for, for an array written in `mode`; a bad combination is
    /// refused naming the options.
    pub fn open_segments(&self, mode: Mode) -> Result<OpenSegments> {
        let (small, large) = (self.small_segments, self.large_segments);
        let cs = self.small_chunk_bytes;
        let total = u64::from(small) + u64::from(large);
        if total == 0 {
            bail!("--small-segments 0 and --large-segments 0: an array needs at least one open segment");
        }
        if total > u64::from(MAX_OPEN_SEGMENTS) {
            bail!(
                "--small-segments {small} and --large-segments {large} make {total} open segments; at most \
                 {MAX_OPEN_SEGMENTS} (each keeps {ZONES_PER_OPEN_SEGMENT} zones open and active per drive)"
            );
        }
        let large_chunk_bytes = match (large, self.large_chunk_bytes) {
            (0, None) => 0,
            (0, Some(cl)) => bail!(
                "--large-chunk {} without --large-segments: no segment would have large chunks (add \
                 --large-segments N)",
                format_bytes(cl)
            ),
            (_, None) => bail!(
                "--large-segments {large} needs --large-chunk SIZE, larger than the small chunk ({})",
                format_bytes(cs)
            ),
            (_, Some(cl)) if cl <= cs => bail!(
                "--large-chunk {} must be larger than --small-chunk {}: writes of at least the large chunk go to \
                 large-chunk stripes, smaller ones to small-chunk stripes",
                format_bytes(cl),
                format_bytes(cs)
            ),
            (_, Some(cl)) => cl,
        };
        if small == 0 && matches!(mode, Mode::ZapRaid { .. }) {
            bail!(
                "--small-segments 0 with --mode zapraid: ZapRAID writes its stripe groups (Zone Append) into \
                 small-chunk segment 0, so it needs at least one small-chunk segment (for large-chunk segments \
                 alone, use --mode zone-write)"
            );
        }
        Ok(OpenSegments { small, large, large_chunk_bytes })
    }
}

/// The open segments in words: "2 of 8 KiB chunks + 2 of 16 KiB chunks" (a class without
/// segments left out).
pub fn open_segments_text(small_chunk_bytes: u64, open: &OpenSegments) -> String {
    let mut parts = Vec::new();
    if open.small > 0 {
        parts.push(format!("{} of {} chunks", open.small, format_bytes(small_chunk_bytes)));
    }
    if open.large > 0 {
        parts.push(format!("{} of {} chunks", open.large, format_bytes(open.large_chunk_bytes)));
    }
    parts.join(" + ")
}

/// The chunks of an array for one-line summaries: "4 KiB chunks" with one open segment,
/// as always; "open segments 2 of 8 KiB chunks + 2 of 16 KiB chunks" with several.
pub fn chunks_text(small_chunk_bytes: u64, open: &OpenSegments) -> String {
    if open.is_hybrid() {
        format!("open segments {}", open_segments_text(small_chunk_bytes, open))
    } else {
        format!("{} chunks", format_bytes(small_chunk_bytes))
    }
}

/// Blocks of the small requests `requests` mixes in: smaller than any large chunk.
const SMALL_REQUEST_BLOCKS: u64 = 1;

/// The requests (first LBA, blocks) that cover `lbas`, of `request_blocks` each; with
/// several open segments every other one is of `SMALL_REQUEST_BLOCKS` and the others of
/// at least a large chunk, so that small-chunk and large-chunk segments are both written.
pub fn requests(
    lbas: std::ops::Range<u64>,
    request_blocks: u64,
    open: &OpenSegments,
    block_bytes: u32,
) -> Vec<(u64, u64)> {
    let large = request_blocks.max(open.large_chunk_bytes.div_ceil(u64::from(block_bytes))).max(1);
    let mut requests = Vec::new();
    let mut lba = lbas.start;
    while lba < lbas.end {
        let size = if open.is_hybrid() && requests.len() % 2 == 1 { SMALL_REQUEST_BLOCKS } else { large };
        let n = size.min(lbas.end - lba);
        requests.push((lba, n));
        lba += n;
    }
    requests
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(small: u32, large: u32, cs: u64, cl: Option<u64>) -> OpenSegmentArgs {
        OpenSegmentArgs { small_chunk_bytes: cs, large_chunk_bytes: cl, small_segments: small, large_segments: large }
    }

    const ZAPRAID: Mode = Mode::ZapRaid { group_size: 256 };

    #[test]
    fn defaults_are_one_open_segment() {
        assert_eq!(args(1, 0, 4096, None).open_segments(ZAPRAID).unwrap(), OpenSegments::SINGLE);
        let hybrid = args(2, 2, 8192, Some(16384)).open_segments(ZAPRAID).unwrap();
        assert_eq!(hybrid, OpenSegments { small: 2, large: 2, large_chunk_bytes: 16384 });
        assert_eq!(open_segments_text(8192, &hybrid), "2 of 8 KiB chunks + 2 of 16 KiB chunks");
        assert_eq!(chunks_text(4096, &OpenSegments::SINGLE), "4 KiB chunks");
        let large_only = args(0, 3, 4096, Some(65536)).open_segments(Mode::ZoneWriteOnly).unwrap();
        assert_eq!(open_segments_text(4096, &large_only), "3 of 64 KiB chunks");
    }

    #[test]
    fn requests_cover_the_range_and_mix_sizes_with_several_open_segments() {
        let single = requests(10..110, 32, &OpenSegments::SINGLE, 4096);
        assert_eq!(single, [(10, 32), (42, 32), (74, 32), (106, 4)]);
        let hybrid = OpenSegments { small: 2, large: 2, large_chunk_bytes: 256 << 10 };
        let mixed = requests(0..200, 32, &hybrid, 4096);
        assert_eq!(&mixed[..4], [(0, 64), (64, 1), (65, 64), (129, 1)]);
        assert_eq!(mixed.last().map(|(lba, n)| lba + n), Some(200));
        assert!(mixed.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
    }

    #[test]
    fn bad_combinations_name_the_options() {
        for (a, mode, expect) in [
            (args(0, 0, 4096, None), ZAPRAID, "needs at least one open segment"),
            (args(10, 7, 4096, Some(8192)), ZAPRAID, "make 17 open segments; at most 16"),
            (args(1, 2, 8192, None), ZAPRAID, "--large-segments 2 needs --large-chunk SIZE"),
            (args(1, 2, 8192, Some(8192)), ZAPRAID, "--large-chunk 8 KiB must be larger than --small-chunk 8 KiB"),
            (args(2, 0, 8192, Some(16384)), ZAPRAID, "--large-chunk 16 KiB without --large-segments"),
            (args(0, 2, 8192, Some(16384)), ZAPRAID, "--small-segments 0 with --mode zapraid"),
        ] {
            let e = a.open_segments(mode).unwrap_err().to_string();
            assert!(e.contains(expect), "{a:?}: {e}");
        }
    }
}
