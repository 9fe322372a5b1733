//! The drives' read and write bandwidth the ideal speedup of `declustered` is made from:
//! measured on the ZN540 timing model (`zapraid_zns::calibrate` for writes, as Exp#5's
//! bound does; reads by a closed loop of the same shape here, since `calibrate` measures
//! writes only), at the rebuild's command sizes, the best of 1 to `MAX_OPEN_ZONES` zones
//! each at queue depth 1: a rebuild reads and writes several segments' zones of a drive at
//! once, so the drive's ceiling, not one zone's, is what it can reach.

use zapraid_zns::calibrate::{MAX_OPEN_ZONES, REQUESTS_PER_POINT};
use zapraid_zns::{Command, EmulatedDrive, Geometry, TimingParams, ZonedDevice};

use crate::rebuild::zone_write_bandwidth;
use zapraid_engine::error::{Error, Result};

const MIB: f64 = (1u64 << 20) as f64;

/// A drive's bandwidth for the rebuild's commands, in the timing model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bandwidths {
    /// The size of the rebuild's reads and writes (consecutive chunks, up to a transfer).
    pub command_bytes: u64,
    /// Reads of `command_bytes`, the best of 1 to `MAX_OPEN_ZONES` zones at queue depth 1.
    pub read_mib_per_s: f64,
    /// Zone Writes of `command_bytes`, likewise.
    pub write_mib_per_s: f64,
}

impl Bandwidths {
    /// Measures both at `command_bytes` on the ZN540 timing model.
    pub fn measure(command_bytes: u64, seed: u64) -> Result<Bandwidths> {
        let mut read_mib_per_s = 0.0f64;
        for zones in 1..=MAX_OPEN_ZONES {
            read_mib_per_s = read_mib_per_s.max(read_bandwidth(command_bytes, zones, REQUESTS_PER_POINT, seed)?);
        }
        let (_, write_mib_per_s) = zone_write_bandwidth(command_bytes, seed)?;
        Ok(Bandwidths { command_bytes, read_mib_per_s, write_mib_per_s })
    }

    /// Seconds to read `bytes`.
    pub fn read_s(&self, bytes: f64) -> f64 {
        bytes / MIB / self.read_mib_per_s
    }

    /// Seconds to write `bytes`.
    pub fn write_s(&self, bytes: f64) -> f64 {
        bytes / MIB / self.write_mib_per_s
    }
}

/// MiB/s of `requests` reads of `request_bytes` on the ZN540 timing model, `zones` zones
/// each keeping one read in flight, each read following the last in its zone (the zones
/// are empty: the timing model takes a read's time from the flash chips it touches,
/// whatever they hold).
pub fn read_bandwidth(request_bytes: u64, zones: u32, requests: u64, seed: u64) -> Result<f64> {
    let device = |error| Error::Device { drive: 0, error };
    let geometry = Geometry::zn540();
    let mut drive =
        EmulatedDrive::discarding(geometry, seed).and_then(|d| d.with_timing(TimingParams::zn540())).map_err(device)?;
    let blocks = request_bytes / u64::from(geometry.block_size_bytes);
    if blocks == 0 || zones == 0 || zones > geometry.zone_count {
        return Err(Error::InvalidConfig { reason: format!("{zones} zones of {request_bytes} B reads") });
    }
    let mut next: Vec<u64> = (0..zones).map(|z| geometry.zone_start_lba(z)).collect();
    let read = |zone: u32, next: &mut [u64]| {
        let lba = next[zone as usize];
        next[zone as usize] += blocks;
        if next[zone as usize] >= geometry.zone_start_lba(zone) + geometry.zone_capacity_blocks {
            next[zone as usize] = geometry.zone_start_lba(zone);
        }
        Command::Read { lba, data: vec![0; request_bytes as usize], metadata: Vec::new() }
    };
    let started_ns = drive.now_ns();
    let mut submitted = 0;
    for zone in 0..zones.min(requests as u32) {
        drive.submit(u64::from(zone), read(zone, &mut next));
        submitted += 1;
    }
    let (mut done, mut completed, mut last_ns) = (Vec::new(), 0u64, started_ns);
    while completed < requests {
        done.clear();
        if drive.wait(&mut done) == 0 {
            return Err(Error::InvalidConfig { reason: "the drive lost reads".into() });
        }
        last_ns = drive.now_ns();
        for completion in done.drain(..) {
            completion.result.map_err(device)?;
            completed += 1;
            if submitted < requests {
                let zone = completion.tag as u32;
                drive.submit(completion.tag, read(zone, &mut next));
                submitted += 1;
            }
        }
    }
    let seconds = (last_ns - started_ns).max(1) as f64 / 1e9;
    Ok((requests * request_bytes) as f64 / MIB / seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More zones read at once reach more of the drive's chips, up to all of them.
    #[test]
    fn reads_over_more_zones_go_faster_up_to_the_chips() {
        let at = |zones| read_bandwidth(131_072, zones, 600, 1).unwrap();
        let (one, two, eight) = (at(1), at(2), at(8));
        assert!(one > 0.0 && two > one && eight >= two, "{one} {two} {eight}");
    }
}
