//! Self-verifying blocks and a writer workload shared by the crash tests.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use zapraid_zns::{Command, Done, EmulatedDrive, Geometry, ZoneAction, ZoneTarget, ZonedDevice};

/// A block that proves itself intact: CRC32C of the rest in its first 4 bytes, the
/// writer's id after it, and the same CRC in the first 4 bytes of its metadata.
pub fn crash_block(geometry: &Geometry, id: u64) -> (Vec<u8>, Vec<u8>) {
    let mut rng = ChaCha8Rng::seed_from_u64(id);
    let mut data = vec![0u8; geometry.block_size_bytes as usize];
    rng.fill(&mut data[12..]);
    data[4..12].copy_from_slice(&id.to_le_bytes());
    let crc = crc32c::crc32c(&data[4..]);
    data[..4].copy_from_slice(&crc.to_le_bytes());
    let mut meta = vec![0u8; geometry.metadata_bytes_per_block as usize];
    let n = meta.len().min(4);
    meta[..n].copy_from_slice(&crc.to_le_bytes()[..n]);
    (data, meta)
}

pub fn verify_crash_block(data: &[u8], meta: &[u8]) -> Result<(), String> {
    let stored = u32::from_le_bytes(data[..4].try_into().unwrap());
    let crc = crc32c::crc32c(&data[4..]);
    if stored != crc {
        return Err(format!("torn or corrupt block: crc {stored:#x} != {crc:#x}"));
    }
    let n = meta.len().min(4);
    if meta[..n] != crc.to_le_bytes()[..n] {
        return Err("metadata does not match its block".into());
    }
    Ok(())
}

pub fn crash_blocks(geometry: &Geometry, first_id: u64, blocks: u64) -> (Vec<u8>, Vec<u8>) {
    let mut data = Vec::new();
    let mut meta = Vec::new();
    for i in 0..blocks {
        let (d, m) = crash_block(geometry, first_id + i);
        data.extend(d);
        meta.extend(m);
    }
    (data, meta)
}

/// Keeps `batch` writes and appends of 1..=4 blocks in flight over the zones; `on_ack`
/// hears of each acknowledged one as (zone, end of write).
pub fn crash_workload(drive: &mut EmulatedDrive, rng: &mut ChaCha8Rng, rounds: usize, mut on_event: impl FnMut(&str)) {
    let g = drive.geometry();
    let mut next_id = rng.random::<u32>() as u64 * 1_000_000;
    let mut host_wp: Vec<u64> = drive.zones().iter().map(|z| z.written_blocks()).collect();
    for _ in 0..rounds {
        let mut tag = 0;
        for zone in 0..g.zone_count {
            let room = g.zone_capacity_blocks - host_wp[zone as usize];
            if room == 0 || rng.random_bool(0.5) {
                continue;
            }
            let blocks = rng.random_range(1..=4u64).min(room);
            let (data, metadata) = crash_blocks(&g, next_id, blocks);
            next_id += blocks;
            let start = g.zone_start_lba(zone);
            let command = if rng.random_bool(0.5) {
                Command::Write { lba: start + host_wp[zone as usize], data, metadata }
            } else {
                Command::Append { zone_start_lba: start, data, metadata }
            };
            host_wp[zone as usize] += blocks;
            drive.submit(tag, command);
            tag += 1;
        }
        let mut out = Vec::new();
        while drive.in_flight() > 0 {
            drive.wait(&mut out);
        }
        for c in out {
            match c.result {
                Ok(Done::Written { lba, blocks }) => on_event(&format!(
                    "acked {} {}",
                    g.zone_of(lba).unwrap(),
                    lba + blocks - g.zone_start_lba(g.zone_of(lba).unwrap())
                )),
                other => panic!("workload command failed: {other:?}"),
            }
        }
        if host_wp.iter().all(|wp| *wp == g.zone_capacity_blocks) {
            on_event("resetting");
            zapraid_zns::execute(drive, Command::ManageZone { action: ZoneAction::Reset, target: ZoneTarget::All })
                .result
                .unwrap();
            host_wp.iter_mut().for_each(|wp| *wp = 0);
        }
    }
}
