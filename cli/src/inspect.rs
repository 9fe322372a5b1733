//! `zapraid inspect`: what one drive holds, read directly (the array need not run): its
//! geometry, its array superblock, and each zone's state and what starts it (a segment
//! header, a checkpoint copy), the segment's footer if it ends in one. For an array of
//! engine shards, each zone says which shard owns it.

use std::ops::Range;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use zapraid_engine::format::{decode_footer_block, ArraySuperblock, BlockMetadata, CheckpointImage, SegmentHeader};
use zapraid_engine::shard::ShardMap;
use zapraid_server::assemble::identify::missing_superblock_reason;
use zapraid_server::drives::open_drive;
use zapraid_server::records::checkpoint::CheckpointArea;
use zapraid_server::records::superblock::read_superblock;
use zapraid_server::records::SUPERBLOCK_ZONES;
use zapraid_zns::{execute, report_all_zones, Command, Geometry};

use crate::report;

#[derive(Args)]
pub struct InspectArgs {
    /// A drive (/dev/ngXnY or an emulated drive file).
    drive: PathBuf,
}

/// The zones each shard owns (the drive's numbering), for an array of several shards.
fn shard_zones(sb: &ArraySuperblock, g: &Geometry) -> Vec<Range<u32>> {
    let reserved = sb.reserved_zones.get();
    let engine = Geometry { zone_count: g.zone_count.saturating_sub(reserved), ..*g };
    let unit = u64::from(sb.shard_unit_blocks.get());
    match ShardMap::new(sb.shards(), unit, sb.logical_blocks.get(), &engine) {
        Ok(map) if sb.shards() > 1 => {
            (0..map.shards()).map(|s| map.zones_of(s)).map(|z| z.start + reserved..z.end + reserved).collect()
        }
        _ => Vec::new(),
    }
}

pub fn run_inspect(args: InspectArgs) -> Result<()> {
    let mut drive = open_drive(&args.drive)?;
    let g = drive.geometry();
    println!(
        "{}: {} zones of {} blocks (capacity {}), {} B blocks + {} B metadata",
        args.drive.display(),
        g.zone_count,
        g.zone_size_blocks,
        g.zone_capacity_blocks,
        g.block_size_bytes,
        g.metadata_bytes_per_block
    );
    let superblock = read_superblock(drive.as_mut());
    match &superblock {
        None => println!("superblock: none: {}", missing_superblock_reason(drive.as_mut())),
        Some(sb) => println!("superblock: {}", report::superblock_text(sb)),
    }
    let shards = superblock.map(|sb| shard_zones(&sb, &g)).unwrap_or_default();
    let shard_of = |zone: u32| shards.iter().position(|z| z.contains(&zone));
    // Every shard's checkpoint area (one after the other).
    let areas: Vec<CheckpointArea> = superblock
        .map(|sb| {
            (0..sb.shards()).filter_map(|s| CheckpointArea::of(sb.reserved_zones.get(), sb.shards(), s)).collect()
        })
        .unwrap_or_default();
    let zones = report_all_zones(drive.as_mut())?;
    let (bs, ms) = (g.block_size_bytes as usize, g.metadata_bytes_per_block as usize);
    println!("{:>6} {:>15} {:>10} {:>10}  segment", "zone", "state", "written", "capacity");
    for z in zones.iter().skip(SUPERBLOCK_ZONES as usize) {
        let written = z.written_blocks();
        let checkpoint = areas.iter().find_map(|a| a.copy_of_zone(z.zone));
        let area_shard = areas.iter().position(|a| a.copy_of_zone(z.zone).is_some());
        let segment = if let Some((copy, first)) = checkpoint {
            let what = match area_shard.filter(|_| areas.len() > 1) {
                Some(s) => format!("shard {s}'s checkpoint copy {copy}"),
                None => format!("checkpoint copy {copy}"),
            };
            if !first || written == 0 {
                what
            } else {
                let c = execute(
                    drive.as_mut(),
                    Command::Read { lba: z.start_lba, data: vec![0; bs], metadata: vec![0; ms] },
                );
                let base = CheckpointImage::base_generation_of(&c.data).ok().flatten();
                let kind = base.map_or("full".to_string(), |b| format!("incremental on generation {b}"));
                match c.result.ok().map(|_| CheckpointImage::header(&c.data)) {
                    Some(Ok(h)) => format!(
                        "{what}: generation {} ({kind}), {} segments, {} B (CRC checked at start)",
                        h.generation.get(),
                        h.segment_count.get(),
                        h.image_bytes.get()
                    ),
                    Some(Err(e)) => format!("{what}: no valid checkpoint ({e})"),
                    None => format!("{what}: unreadable"),
                }
            }
        } else if written == 0 {
            String::new()
        } else {
            let c =
                execute(drive.as_mut(), Command::Read { lba: z.start_lba, data: vec![0; bs], metadata: vec![0; ms] });
            let shard = shard_of(z.zone).map_or(String::new(), |s| format!("shard {s}: "));
            match c.result.ok().map(|_| SegmentHeader::decode_with_lanes(&c.data)) {
                Some(Ok((h, lanes))) => format!("{shard}{}", report::segment_header_text(&h, &lanes)),
                Some(Err(e)) => format!("no valid segment header ({e})"),
                None => "header unreadable".into(),
            }
        };
        println!("{:>6} {:>15} {:>10} {:>10}  {segment}", z.zone, z.state, written, z.capacity_blocks);
        if written > 0 && checkpoint.is_none() {
            // The last written block says whether the segment ended in a footer (sealed or
            // stopped cleanly).
            let lba = z.start_lba + written - 1;
            let c = execute(drive.as_mut(), Command::Read { lba, data: vec![0; bs], metadata: vec![0; ms] });
            if c.result.is_ok() {
                if let (Ok((fh, entries)), Ok(_)) =
                    (decode_footer_block(&c.data), BlockMetadata::decode(&c.data, &c.metadata))
                {
                    println!(
                        "{:>6} {:>15} last block: footer of segment {}, entries {}..{}",
                        "",
                        "",
                        fh.segment_sequence.get(),
                        fh.first_block.get(),
                        fh.first_block.get() as usize + entries.len()
                    );
                }
            }
        }
    }
    Ok(())
}
