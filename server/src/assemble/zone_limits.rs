//! Whether a drive's open and active zone limits hold the zones an array writes into at
//! once: for each open segment, its zone and one of a segment being sealed
//! (`SegmentPlan::active_zones_needed`); for active zones also the superblock zone, which
//! stays partly written. `format` and `start` refuse a drive that falls short, saying
//! which limit, the drive's value, what the array needs and by how much it falls short.

use std::path::Path;

use zapraid_engine::{ChunkClass, SegmentPlan};
use zapraid_zns::Geometry;

use crate::error::{Error, Result};
use crate::records::layout::SUPERBLOCK_ZONES;

/// The open segments of a plan in words: "1 open segment", "3 open segments", "2 small +
/// 2 large open segments".
pub fn open_segments_words(plan: &SegmentPlan) -> String {
    let count = |class| plan.slots.iter().filter(|s| s.class == class).count();
    let (small, large) = (count(ChunkClass::Small), count(ChunkClass::Large));
    let plural = if small + large == 1 { "segment" } else { "segments" };
    if large == 0 {
        format!("{small} open {plural}")
    } else {
        format!("{small} small + {large} large open {plural}")
    }
}

/// Refuses a drive whose open or active zone limits cannot hold what `shards` engine
/// shards of `plan` write into at once.
pub fn check_zone_limits(path: &Path, geometry: &Geometry, plan: &SegmentPlan, shards: u32) -> Result<()> {
    let engine = plan.active_zones_needed() * shards.max(1);
    let segments = match shards {
        0 | 1 => open_segments_words(plan),
        s => format!("{s} shards of {} each", open_segments_words(plan)),
    };
    let need = if plan.open_segments() == 1 && shards <= 1 { "needs" } else { "need" };
    let limits = [
        ("open", geometry.max_open_zones, engine, format!("{engine} (a zone being written and one being sealed each)")),
        (
            "active",
            geometry.max_active_zones,
            engine + SUPERBLOCK_ZONES,
            format!("{engine} (+{SUPERBLOCK_ZONES} for the superblock zone)"),
        ),
    ];
    for (what, limit, needed, needed_words) in limits {
        if let Some(limit) = limit.filter(|limit| *limit < needed) {
            let zones = if limit == 1 { "zone" } else { "zones" };
            return Err(Error::Refused {
                path: path.to_path_buf(),
                reason: format!(
                    "it allows {limit} {what} {zones}; {segments} {need} {needed_words}: {} short",
                    needed - limit
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use zapraid_engine::{Layout, Mode, OpenSegments, RaidLevel};

    use super::*;

    fn limits(open: u32, active: u32) -> Geometry {
        Geometry { max_open_zones: Some(open), max_active_zones: Some(active), ..Geometry::small(16, 256, 240) }
    }

    #[test]
    fn one_open_segment_needs_two_zones_and_the_superblock_zone() {
        let path = Path::new("d0.zns");
        let layout =
            Layout::new(&limits(2, 3), RaidLevel::Raid5 { drives: 3 }, Mode::ZapRaid { group_size: 4 }, 4096).unwrap();
        let plan = SegmentPlan::single(layout);
        let err = check_zone_limits(path, &limits(1, 1), &plan, 1).unwrap_err().to_string();
        assert!(err.starts_with("d0.zns refused: it allows 1 open zone; 1 open segment needs 2 ("), "{err}");
        assert!(err.ends_with("): 1 short"), "{err}");
        let err = check_zone_limits(path, &limits(2, 2), &plan, 1).unwrap_err().to_string();
        assert!(err.contains("it allows 2 active zones; 1 open segment needs 2 (+1 for the superblock zone): 1 short"));
        assert!(check_zone_limits(path, &limits(2, 3), &plan, 1).is_ok());
        let unlimited = Geometry { max_open_zones: None, max_active_zones: None, ..limits(1, 1) };
        assert!(check_zone_limits(path, &unlimited, &plan, 1).is_ok());
    }

    #[test]
    fn each_open_segment_takes_its_zones() {
        let path = Path::new("/x");
        let open = OpenSegments { small: 2, large: 2, large_chunk_bytes: 16384 };
        let plan = SegmentPlan::new(
            &limits(14, 14),
            RaidLevel::Raid5 { drives: 4 },
            Mode::ZapRaid { group_size: 4 },
            8192,
            open,
        )
        .unwrap();
        let err = check_zone_limits(path, &limits(6, 6), &plan, 1).unwrap_err().to_string();
        assert!(err.contains("it allows 6 open zones; 2 small + 2 large open segments need 8 ("), "{err}");
        assert!(err.ends_with("): 2 short"), "{err}");
        let err = check_zone_limits(path, &limits(8, 6), &plan, 1).unwrap_err().to_string();
        assert_eq!(
            err,
            "/x refused: it allows 6 active zones; 2 small + 2 large open segments need 8 (+1 for the superblock \
             zone): 3 short"
        );
        assert!(check_zone_limits(path, &limits(8, 9), &plan, 1).is_ok());
        let three = OpenSegments { small: 3, large: 0, large_chunk_bytes: 0 };
        let plan = SegmentPlan::new(&limits(14, 14), RaidLevel::Raid5 { drives: 4 }, Mode::ZoneWriteOnly, 8192, three)
            .unwrap();
        let err = check_zone_limits(path, &limits(4, 14), &plan, 1).unwrap_err().to_string();
        assert!(err.contains("it allows 4 open zones; 3 open segments need 6"), "{err}");
        let err = check_zone_limits(path, &limits(8, 14), &plan, 2).unwrap_err().to_string();
        assert!(err.contains("it allows 8 open zones; 2 shards of 3 open segments each need 12"), "{err}");
        assert!(err.ends_with("): 4 short"), "{err}");
        assert!(check_zone_limits(path, &limits(12, 13), &plan, 2).is_ok());
    }
}
