//! The ZapRAID paper's Figure 2 experiment (section 2.2) on an emulated drive in virtual
//! time: Zone Write vs Zone Append throughput for 4, 8 and 16 KiB requests, with one open
//! zone and with 1 to 8 open zones, next to the paper's figures for the WD ZN540.
//!
//! Each point is a closed loop: every open zone keeps its queue depth of requests in
//! flight, and throughput is data written over virtual time elapsed.

use crate::device::{Command, Completion, Done, ZonedDevice};
use crate::emulator::EmulatedDrive;
use crate::error::{Error, Result};
use crate::geometry::Geometry;
use crate::timing::TimingParams;

/// Which write command a point measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    ZoneWrite,
    ZoneAppend,
}

impl WriteKind {
    pub fn name(self) -> &'static str {
        match self {
            WriteKind::ZoneWrite => "Zone Write",
            WriteKind::ZoneAppend => "Zone Append",
        }
    }

    /// Requests in flight per zone in the paper's experiment: Zone Write allows one,
    /// Zone Append was run with four (more gave nothing).
    pub fn paper_queue_depth(self) -> u32 {
        match self {
            WriteKind::ZoneWrite => 1,
            WriteKind::ZoneAppend => 4,
        }
    }
}

/// Request sizes of Figure 2.
pub const REQUEST_SIZES_BYTES: [u32; 3] = [4096, 8192, 16384];
/// Open zones of Figure 2's multi-zone panel.
pub const MAX_OPEN_ZONES: u32 = 8;

/// One measured point.
#[derive(Clone, Copy, Debug)]
pub struct Point {
    pub kind: WriteKind,
    pub request_bytes: u32,
    pub open_zones: u32,
    pub queue_depth_per_zone: u32,
    pub mib_per_s: f64,
    /// The paper's figure for this point, where it gives one.
    pub paper_mib_per_s: Option<f64>,
}

impl Point {
    /// Relative deviation from the paper's figure.
    pub fn deviation(&self) -> Option<f64> {
        self.paper_mib_per_s.map(|paper| (self.mib_per_s - paper) / paper)
    }
}

/// The paper's figures (WD ZN540) for the points it states.
pub fn paper_figure(kind: WriteKind, request_bytes: u32, open_zones: u32) -> Option<f64> {
    use WriteKind::*;
    Some(match (kind, request_bytes, open_zones) {
        (ZoneWrite, 4096, 1) => 337.6,
        (ZoneWrite, 8192, 1) => 613.6,
        (ZoneWrite, 16384, 1) => 1050.0,
        (ZoneAppend, 4096, 1) => 541.5,
        (ZoneAppend, 8192, 1) => 1026.6,
        (ZoneAppend, 16384, 1) => 1050.1,
        (ZoneWrite, 4096, 6) => 777.1,
        (ZoneWrite, 8192, 8) => 1430.7,
        (ZoneWrite, 16384, 8) => 1750.0,
        (ZoneAppend, 4096, 2) => 577.5,
        (ZoneAppend, 8192, 2) => 1058.6,
        _ => return None,
    })
}

/// One closed-loop workload: `open_zones` zones each keeping `queue_depth` requests of
/// `request_bytes` in flight until `requests` have completed.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub kind: WriteKind,
    pub request_bytes: u32,
    pub open_zones: u32,
    pub queue_depth: u32,
    pub requests: u64,
}

/// Measures the MiB/s of `workload` on a drive of `geometry` modelled by `params`.
pub fn measure(params: &TimingParams, geometry: Geometry, workload: Workload, seed: u64) -> Result<f64> {
    let mut drive = EmulatedDrive::discarding(geometry, seed)?.with_timing(params.clone())?;
    closed_loop(&mut drive, workload, &|d: &EmulatedDrive| d.now_ns())
}

/// Runs `workload` from the start of zone 0 on, on empty zones of `device`, and returns
/// MiB/s over the time `now_ns` tells (virtual for the emulator, wall-clock for real
/// drives).
pub fn closed_loop<D: ZonedDevice + ?Sized>(
    device: &mut D,
    workload: Workload,
    now_ns: &dyn Fn(&D) -> u64,
) -> Result<f64> {
    let geometry = device.geometry();
    let Workload { kind, request_bytes, open_zones, queue_depth, requests } = workload;
    let block = u64::from(geometry.block_size_bytes);
    let request_blocks = u64::from(request_bytes) / block;
    let total_blocks = requests * request_blocks;
    if open_zones == 0 || open_zones > geometry.zone_count || queue_depth == 0 || request_blocks == 0 {
        return Err(Error::InvalidGeometry {
            reason: format!(
                "cannot run {open_zones} zones at queue depth {queue_depth} with {request_bytes} B requests"
            ),
        });
    }
    if total_blocks.div_ceil(u64::from(open_zones)) > geometry.zone_capacity_blocks {
        return Err(Error::InvalidGeometry {
            reason: format!("{requests} requests of {request_bytes} B do not fit in {open_zones} zones"),
        });
    }
    let mut next_lba: Vec<u64> = (0..open_zones).map(|z| geometry.zone_start_lba(z)).collect();
    let mut submitted = 0u64;
    let submit = |device: &mut D, zone: u32, data: Vec<u8>, next_lba: &mut [u64]| {
        let start = geometry.zone_start_lba(zone);
        let command = match kind {
            WriteKind::ZoneWrite => {
                let lba = next_lba[zone as usize];
                next_lba[zone as usize] += request_blocks;
                Command::Write { lba, data, metadata: Vec::new() }
            }
            WriteKind::ZoneAppend => Command::Append { zone_start_lba: start, data, metadata: Vec::new() },
        };
        device.submit(u64::from(zone), command);
    };
    let started_ns = now_ns(device);
    for _ in 0..queue_depth {
        for zone in 0..open_zones {
            if submitted < requests {
                submit(device, zone, vec![0xa5; request_bytes as usize], &mut next_lba);
                submitted += 1;
            }
        }
    }
    let mut done = Vec::new();
    let mut completed = 0u64;
    let mut last_completion_ns = started_ns;
    while completed < requests {
        done.clear();
        if device.wait(&mut done) == 0 {
            return Err(Error::BadZoneReport { reason: "the device lost requests".into() });
        }
        last_completion_ns = now_ns(device);
        for Completion { tag, result, data, .. } in done.drain(..) {
            if let Done::Written { .. } = result? {
                completed += 1;
            }
            if submitted < requests {
                submit(device, tag as u32, data, &mut next_lba);
                submitted += 1;
            }
        }
    }
    let seconds = (last_completion_ns - started_ns).max(1) as f64 / 1e9;
    Ok((total_blocks * block) as f64 / (1024.0 * 1024.0) / seconds)
}

/// Requests per point: enough that start-up transients are well under 1%.
pub const REQUESTS_PER_POINT: u64 = 6_000;

/// Runs the whole Figure 2 experiment: the single-zone points, then 1 to 8 open zones.
pub fn figure2(params: &TimingParams, seed: u64, mut progress: impl FnMut(&Point)) -> Result<Vec<Point>> {
    let geometry = Geometry::zn540();
    let mut points = Vec::new();
    for kind in [WriteKind::ZoneWrite, WriteKind::ZoneAppend] {
        for request_bytes in REQUEST_SIZES_BYTES {
            for open_zones in 1..=MAX_OPEN_ZONES {
                let queue_depth = kind.paper_queue_depth();
                let workload = Workload { kind, request_bytes, open_zones, queue_depth, requests: REQUESTS_PER_POINT };
                let mib_per_s = measure(params, geometry, workload, seed)?;
                let point = Point {
                    kind,
                    request_bytes,
                    open_zones,
                    queue_depth_per_zone: queue_depth,
                    mib_per_s,
                    paper_mib_per_s: paper_figure(kind, request_bytes, open_zones),
                };
                progress(&point);
                points.push(point);
            }
        }
    }
    Ok(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The acceptance criterion of the timing model: every figure the paper states (one
    /// open zone, and Zone Write at 6 and 8 zones, Zone Append at 2) within 15% of it, Zone
    /// Write growing with open zones, Zone Append peaking at two.
    #[test]
    fn zn540_preset_reproduces_figure_2() {
        let points = figure2(&TimingParams::zn540(), 1, |_| {}).unwrap();
        let at = |kind, bytes, zones| {
            points
                .iter()
                .find(|p| p.kind == kind && p.request_bytes == bytes && p.open_zones == zones)
                .unwrap()
                .mib_per_s
        };
        let stated: Vec<&Point> = points.iter().filter(|p| p.paper_mib_per_s.is_some()).collect();
        assert!(stated.iter().any(|p| p.open_zones > 1), "the multi-zone figures are checked too");
        for p in stated {
            let deviation = p.deviation().unwrap();
            assert!(deviation.abs() <= 0.15, "{p:?} deviates {:.1}%", deviation * 100.0);
        }
        for bytes in REQUEST_SIZES_BYTES {
            let w = |z| at(WriteKind::ZoneWrite, bytes, z);
            assert!(w(MAX_OPEN_ZONES) > w(1) * 1.3, "Zone Write {bytes} B does not grow with zones");
            for z in 2..=MAX_OPEN_ZONES {
                assert!(w(z) >= w(z - 1) * 0.98, "Zone Write {bytes} B drops at {z} zones");
            }
        }
        for bytes in [4096, 8192] {
            let a = |z| at(WriteKind::ZoneAppend, bytes, z);
            let peak = (1..=MAX_OPEN_ZONES).max_by(|x, y| a(*x).total_cmp(&a(*y))).unwrap();
            assert_eq!(peak, 2, "Zone Append {bytes} B peaks at {peak} zones");
        }
    }

    #[test]
    fn measurement_is_deterministic() {
        let p = TimingParams::zn540();
        let g = Geometry::zn540();
        let w = Workload {
            kind: WriteKind::ZoneAppend,
            request_bytes: 4096,
            open_zones: 3,
            queue_depth: 4,
            requests: 2000,
        };
        let a = measure(&p, g, w, 9).unwrap();
        let b = measure(&p, g, w, 9).unwrap();
        assert_eq!(a, b);
    }
}
