//! Prints the Figure 2 table of the ZN540 timing preset (the CLI's `emu calibrate` is the
//! user-facing version).
fn main() {
    let points = zapraid_zns::calibrate::figure2(&zapraid_zns::TimingParams::zn540(), 1, |_| {}).unwrap();
    for p in points {
        println!(
            "{:11} {:5} B zones {} qd {}: {:8.1} MiB/s paper {:?}",
            p.kind.name(),
            p.request_bytes,
            p.open_zones,
            p.queue_depth_per_zone,
            p.mib_per_s,
            p.paper_mib_per_s
        );
    }
}
