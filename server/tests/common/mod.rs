//! What the server's end-to-end tests share: new drive files for a RAID-5 array.

use std::path::PathBuf;

use zapraid_engine::{Mode, OpenSegments, RaidLevel};
use zapraid_server::assemble::FormatOptions;
use zapraid_zns::{EmulatedDrive, Geometry};

/// Drives of the test arrays, and the level's.
pub const DRIVES: usize = 4;

/// `DRIVES` new drive files of `geometry` in a new directory, and the options of a RAID-5
/// array named `name` on them (G = 4, 4 KiB chunks, one open segment) with `shards` shards.
pub fn raid5_drive_files(
    geometry: Geometry,
    name: &str,
    l2p_budget_bytes: Option<u64>,
    shards: u32,
) -> (tempfile::TempDir, Vec<PathBuf>, FormatOptions) {
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<_> = (0..DRIVES).map(|i| dir.path().join(format!("d{i}.zns"))).collect();
    for (i, p) in paths.iter().enumerate() {
        EmulatedDrive::create_file(p, geometry, i as u64).unwrap();
    }
    let options = FormatOptions {
        level: RaidLevel::Raid5 { drives: DRIVES },
        mode: Mode::ZapRaid { group_size: 4 },
        chunk_bytes: 4096,
        open_segments: OpenSegments::SINGLE,
        name: name.into(),
        force: false,
        l2p_budget_bytes,
        shards,
        declustering: zapraid_engine::Declustering::CLASSIC,
    };
    (dir, paths, options)
}
