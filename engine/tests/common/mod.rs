//! What the engine's test binaries share: small emulated drives that keep simulations fast.

use zapraid_zns::Geometry;

/// Block size of the test drives: small, so that runs are quick.
pub const BLOCK: usize = 512;

/// Drives of `zone_count` zones of 60 blocks (64-block zone size), 32 bytes of metadata
/// per block (the engine's minimum), and the given open/active limits.
pub fn geometry(zone_count: u32, max_open_zones: u32, max_active_zones: u32) -> Geometry {
    Geometry {
        block_size_bytes: BLOCK as u32,
        metadata_bytes_per_block: 32,
        zone_size_blocks: 64,
        zone_capacity_blocks: 60,
        zone_count,
        max_open_zones: Some(max_open_zones),
        max_active_zones: Some(max_active_zones),
        zone_append_max_blocks: 8,
        max_transfer_blocks: 16,
    }
}
