//! How many segments a rebuild writes at once to one drive (`rebuild_segments_per_drive`).

use zapraid_zns::Geometry;

use super::{MAX_DECLUSTERED_REBUILD_SEGMENTS_PER_DRIVE, MAX_REBUILD_SEGMENTS_AT_ONCE};
use crate::engine::{Config, Declustering, Engine, L2pConfig, DEFAULT_STRIPE_TIMEOUT_NS};
use crate::hybrid::OpenSegments;
use crate::layout::{Mode, RaidLevel};

fn engine(geometry: Geometry, drives: u32) -> Engine {
    let declustering = if drives == 5 { Declustering::CLASSIC } else { Declustering::wide(drives, 1) };
    let config = Config {
        level: RaidLevel::Raid5 { drives: 5 },
        mode: Mode::ZapRaid { group_size: 4 },
        chunk_bytes: 4096,
        open_segments: OpenSegments::SINGLE,
        stripe_timeout_ns: DEFAULT_STRIPE_TIMEOUT_NS,
        logical_blocks: 256,
        array_uuid: [5; 16],
        lookup_ps_per_entry: 0,
        merge_appends: false,
        declustering,
        l2p: L2pConfig::default(),
    };
    Engine::format(geometry, config).unwrap()
}

/// A classic array writes `rebuild_segments_at_once` segments at once to its one new drive;
/// a declustered one up to `MAX_DECLUSTERED_REBUILD_SEGMENTS_PER_DRIVE` to each drive, as far
/// as the zone limits leave room (14 open zones: 11 beside one open segment, one being
/// sealed and a superblock zone), unless set lower, and never past the zone limits.
#[test]
fn a_declustered_rebuild_writes_more_segments_per_drive_within_the_zone_limits() {
    let roomy = Geometry::small(64, 256, 240);
    let classic = engine(roomy, 5);
    assert_eq!(classic.rebuild_segments_per_drive(), MAX_REBUILD_SEGMENTS_AT_ONCE);
    let mut wide = engine(roomy, 12);
    assert_eq!(wide.rebuild_segments_per_drive(), MAX_DECLUSTERED_REBUILD_SEGMENTS_PER_DRIVE);
    wide.set_rebuild_segments_at_once(2);
    assert_eq!(wide.rebuild_segments_per_drive(), 2);
    // 6 open zones leave 3 beside the open segment, the one being sealed and the superblock.
    let tight = Geometry { max_open_zones: Some(6), max_active_zones: Some(6), ..roomy };
    assert_eq!(engine(tight, 12).rebuild_segments_per_drive(), 3);
    // 10 leave 7: more than a classic array takes, fewer than the most a declustered one does.
    let some = Geometry { max_open_zones: Some(10), max_active_zones: Some(10), ..roomy };
    assert_eq!(engine(some, 12).rebuild_segments_per_drive(), 7);
}
