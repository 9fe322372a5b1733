//! What the engine's test binaries share: small emulated drives that keep simulations fast.
//!
//! The harnesses some binaries share sit next to this file, each included by the binaries
//! that use it (`#[path = "common/NAME/mod.rs"] mod NAME;`), so that the others do not
//! compile it: `exploration/` (crash exploration: runs cut by power at every step, and the
//! lost-block runs; `crash.rs`, `stop_and_rebuild.rs`), `reference/` (the reference model
//! and its faults for the property tests; `model.rs`, `lost_cases.rs`), `checkpointed/`
//! (arrays started from checkpoints; `checkpoint.rs`, `degraded_checkpoint.rs`). `array`
//! is what the first two ask of a simulated array, the plain simulator or the sharded one
//! (`crash_shards.rs`, `model_shards.rs`).

use zapraid_zns::Geometry;

#[allow(dead_code)] // not every test binary uses every helper
pub mod array;
pub mod declustered;

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
        // Commands of 1-2 blocks or even counts, as NVMe passthrough takes 1-8 or
        // multiples of 8 (`Geometry::transfer_granule_blocks`): every engine test cuts its
        // commands to a granule.
        transfer_granule_blocks: 2,
    }
}

/// An array of `level` and `mode` over the test drives: chunks of `chunk_blocks` blocks,
/// `logical_blocks` exported, the paper's stripe timeout, no modelled lookup cost.
#[allow(dead_code)] // not every test binary uses every helper
pub fn config(
    level: zapraid_engine::RaidLevel,
    mode: zapraid_engine::Mode,
    chunk_blocks: u64,
    logical_blocks: u64,
) -> zapraid_engine::Config {
    zapraid_engine::Config {
        level,
        mode,
        chunk_bytes: chunk_blocks * BLOCK as u64,
        open_segments: zapraid_engine::OpenSegments::SINGLE,
        stripe_timeout_ns: zapraid_engine::DEFAULT_STRIPE_TIMEOUT_NS,
        logical_blocks,
        array_uuid: [7; 16],
        lookup_ps_per_entry: 0,
        merge_appends: true,
        declustering: Default::default(),
        l2p: zapraid_engine::L2pConfig::default(),
    }
}

/// Block contents that name their write: (LBA, write number), then a pattern of both.
#[allow(dead_code)] // not every test binary uses every helper
pub fn named_block(lba: u64, write: u64) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    b[..8].copy_from_slice(&lba.to_le_bytes());
    b[8..16].copy_from_slice(&write.to_le_bytes());
    for (i, x) in b[16..].iter_mut().enumerate() {
        *x = (lba as u8).wrapping_mul(31) ^ (write as u8).wrapping_mul(7) ^ i as u8;
    }
    b
}

/// Reads every one of `logical_blocks` blocks, `blocks_per_read` at a time (a page of the
/// L2P table, say), and checks each holds `expect(lba)`; `id` numbers the requests.
#[allow(dead_code)] // not every test binary uses every helper
pub fn read_all_checked(
    sim: &mut zapraid_engine::Simulator,
    id: &mut u64,
    logical_blocks: u64,
    blocks_per_read: u64,
    expect: impl Fn(u64) -> Vec<u8>,
) {
    for lba in (0..logical_blocks).step_by(blocks_per_read as usize) {
        sim.submit(*id, zapraid_engine::Request::Read { lba, blocks: blocks_per_read });
        let response = sim.run_until_response(*id).expect("every read is answered");
        *id += 1;
        let got = response.result.unwrap_or_else(|e| panic!("reading LBAs {lba}..+{blocks_per_read}: {e}"));
        for (i, block) in got.chunks_exact(BLOCK).enumerate() {
            assert!(block == expect(lba + i as u64).as_slice(), "LBA {} reads back other data", lba + i as u64);
        }
    }
}

/// The kind a block's metadata on `drive` at `lba` gives, if it decodes.
#[allow(dead_code)] // not every test binary uses every helper
pub fn kind_of(drive: &mut zapraid_zns::EmulatedDrive, lba: u64) -> Option<zapraid_engine::format::BlockKind> {
    metadata_of(drive, lba).map(|(_, kind)| kind)
}

/// The data of the block at `lba` of `drive`.
#[allow(dead_code)] // not every test binary uses every helper
pub fn read_block(drive: &mut zapraid_zns::EmulatedDrive, lba: u64) -> Vec<u8> {
    read_one(drive, lba).data
}

/// A block's metadata on `drive` at `lba` and the kind it gives, if it decodes.
#[allow(dead_code)] // not every test binary uses every helper
pub fn metadata_of(
    drive: &mut zapraid_zns::EmulatedDrive,
    lba: u64,
) -> Option<(zapraid_engine::format::BlockMetadata, zapraid_engine::format::BlockKind)> {
    let completion = read_one(drive, lba);
    zapraid_engine::format::BlockMetadata::decode(&completion.data, &completion.metadata).ok()
}

/// The completion of a read of the block at `lba` of `drive`, data and metadata.
#[allow(dead_code)] // not every test binary uses every helper
fn read_one(drive: &mut zapraid_zns::EmulatedDrive, lba: u64) -> zapraid_zns::Completion {
    use zapraid_zns::ZonedDevice;
    let g = drive.geometry();
    let (data, metadata) = (vec![0; g.block_size_bytes as usize], vec![0; g.metadata_bytes_per_block as usize]);
    drive.submit(0, zapraid_zns::Command::Read { lba, data, metadata });
    let mut out = Vec::new();
    while out.is_empty() {
        drive.wait(&mut out);
    }
    out.pop().expect("one completion")
}
