//! Open segments (hybrid segment management) as a user meets them: the options of
//! `format` and their refusals, the superblock fields they are recorded in, `inspect` and
//! `status` showing them, drives whose zone limits cannot hold them, and arrays formatted
//! with the defaults staying what they were.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::Output;

use zapraid_engine::format::{ArraySuperblock, ARRAY_SUPERBLOCK_BYTES};
use zapraid_engine::{Layout, Mode, OpenSegments, RaidLevel, SegmentPlan};
use zapraid_zns::drive_file::{FileLayout, Superblock, SUPERBLOCK_COPY_OFFSET_BYTES, SUPERBLOCK_REGION_BYTES};
use zapraid_zns::Geometry;

mod common;
use common::text;

/// Drives of the test arrays (RAID-5, 3+1).
const DRIVES: usize = 4;
/// Zones per drive: enough for four open segments and their reserve.
const ZONES: &str = "24";
/// The hybrid options of these tests: 2 segments of 8 KiB chunks, 2 of 16 KiB.
const HYBRID: [&str; 8] =
    ["--small-chunk", "8K", "--large-chunk", "16K", "--small-segments", "2", "--large-segments", "2"];
/// Where the open-segment fields are in the array superblock (docs/FORMAT.md).
const SMALL_SEGMENTS_BYTE: usize = 50;
const LARGE_SEGMENTS_BYTE: usize = 51;
const LARGE_CHUNK_BYTES: std::ops::Range<usize> = 140..144;

/// Drive files in a temporary directory and a run directory for the array's socket.
struct Setup {
    _dir: tempfile::TempDir,
    run_dir: PathBuf,
    drives: Vec<String>,
}

impl Setup {
    /// Drives of `ZONES` zones of 480 KiB, with `limits` (emu create options) if any.
    fn new(limits: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        let d = dir.path().join("d").to_str().unwrap().to_string();
        let drives = (0..DRIVES).map(|i| format!("{d}/drive{i}.zns")).collect();
        let setup = Setup { _dir: dir, run_dir, drives };
        let count = DRIVES.to_string();
        let mut args = vec!["emu", "create", "--dir", &d, "--drives", &count, "--zones", ZONES];
        args.extend(["--zone-size", "512K", "--zone-capacity", "480K", "--metadata", "64"]);
        args.extend(limits);
        setup.ok(&args);
        setup
    }

    fn run(&self, args: &[&str]) -> Output {
        common::zapraid_in(&self.run_dir, args)
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(out.status.success(), "zapraid {args:?}: {}", text(&out));
        text(&out)
    }

    /// Runs `args`, then `options`, then every drive.
    fn on_drives(&self, args: &[&str], options: &[&str]) -> Output {
        let mut all = args.to_vec();
        all.extend(options);
        all.extend(self.drives.iter().map(String::as_str));
        self.run(&all)
    }

    /// Formats a RAID-5 array named `name` with `options`; its output.
    fn format(&self, name: &str, options: &[&str]) -> Output {
        self.on_drives(&["format", "--level", "raid5", "--group-size", "8", "--name", name], options)
    }

    fn start(&self) {
        let out = self.on_drives(&["start", "--daemon", "--no-device"], &[]);
        assert!(out.status.success(), "{}", text(&out));
    }

    fn status(&self, name: &str) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["status", name, "--json"])).expect("status --json is JSON")
    }

    /// The geometry of `drive`, as its file gives it.
    fn geometry(&self, drive: usize) -> Geometry {
        let file = File::open(&self.drives[drive]).unwrap();
        let mut region = vec![0u8; SUPERBLOCK_REGION_BYTES as usize];
        file.read_exact_at(&mut region, 0).unwrap();
        Superblock::decode_region(&region).unwrap().0.geometry()
    }

    /// The array superblock at the start of zone 0 of `drive`, as its file holds it.
    fn superblock(&self, drive: usize) -> Vec<u8> {
        let file = File::open(&self.drives[drive]).unwrap();
        let layout = FileLayout::new(&self.geometry(drive)).unwrap();
        let mut bytes = vec![0u8; ARRAY_SUPERBLOCK_BYTES];
        file.read_exact_at(&mut bytes, layout.data_offset).unwrap();
        bytes
    }

    /// Gives every drive file the open and active zone limits `open` and `active`, as if
    /// the array had moved to drives that allow fewer.
    fn lower_zone_limits(&self, open: u32, active: u32) {
        for path in &self.drives {
            let file = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
            let mut region = vec![0u8; SUPERBLOCK_REGION_BYTES as usize];
            file.read_exact_at(&mut region, 0).unwrap();
            let (sb, _) = Superblock::decode_region(&region).unwrap();
            let g = Geometry { max_open_zones: Some(open), max_active_zones: Some(active), ..sb.geometry() };
            let lowered = Superblock::new(&g, sb.drive_uuid, sb.landing_seed.get());
            for offset in [0, SUPERBLOCK_COPY_OFFSET_BYTES] {
                file.write_all_at(zerocopy::IntoBytes::as_bytes(&lowered), offset).unwrap();
            }
        }
    }
}

#[test]
fn a_hybrid_array_records_its_open_segments_and_shows_them() {
    let s = Setup::new(&[]);
    let out = s.format("hy", &HYBRID);
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("RAID-5 (3+1), ZapRAID G=8, open segments 2 of 8 KiB chunks + 2 of 16 KiB chunks"), "{said}");
    for drive in 0..DRIVES {
        let bytes = s.superblock(drive);
        assert_eq!((bytes[SMALL_SEGMENTS_BYTE], bytes[LARGE_SEGMENTS_BYTE]), (2, 2), "drive {drive}");
        assert_eq!(bytes[LARGE_CHUNK_BYTES], 16384u32.to_le_bytes(), "drive {drive}");
        let sb = ArraySuperblock::decode(&bytes).unwrap();
        assert_eq!(sb.chunk_bytes.get(), 8192);
        assert_eq!(sb.open_segments(), OpenSegments { small: 2, large: 2, large_chunk_bytes: 16384 });
    }
    // The capacity exported is what the plan of four open segments guarantees (less than
    // one open segment of 8 KiB chunks would).
    let sb = ArraySuperblock::decode(&s.superblock(0)).unwrap();
    let raw = s.geometry(0);
    let array = Geometry { zone_count: raw.zone_count - zapraid_server::records::SUPERBLOCK_ZONES, ..raw };
    let (level, mode) = (RaidLevel::Raid5 { drives: DRIVES }, Mode::ZapRaid { group_size: 8 });
    let plan = SegmentPlan::new(&array, level, mode, 8192, sb.open_segments()).unwrap();
    assert_eq!(sb.logical_blocks.get(), plan.capacity_blocks(array.zone_count));
    let single = Layout::new(&array, level, mode, 8192).unwrap().capacity_blocks(array.zone_count);
    assert!(sb.logical_blocks.get() < single, "{} vs {single}", sb.logical_blocks.get());
    let inspect = s.ok(&["inspect", &s.drives[1]]);
    assert!(inspect.contains("chunk 8192 B, open segments: 2 of 8 KiB chunks + 2 of 16 KiB chunks"), "{inspect}");
}

#[test]
fn bad_combinations_are_refused_naming_the_options() {
    let s = Setup::new(&[]);
    for (options, expect) in [
        (
            &["--small-segments", "0", "--large-segments", "0"][..],
            "--small-segments 0 and --large-segments 0: an array needs at least one open segment",
        ),
        (
            &["--large-segments", "2"][..],
            "--large-segments 2 needs --large-chunk SIZE, larger than the small chunk (4 KiB)",
        ),
        (
            &["--small-chunk", "16K", "--large-chunk", "16K", "--large-segments", "1"][..],
            "--large-chunk 16 KiB must be larger than --small-chunk 16 KiB",
        ),
        (&["--chunk", "16K", "--large-chunk", "8K", "--large-segments", "1"][..], "--large-chunk 8 KiB must be larger"),
        (&["--large-chunk", "16K"][..], "--large-chunk 16 KiB without --large-segments"),
        (
            &["--small-segments", "9", "--large-segments", "8", "--large-chunk", "16K"][..],
            "make 17 open segments; at most 16",
        ),
        (&["--small-segments", "0", "--large-segments", "2", "--large-chunk", "16K"][..], "with --mode zapraid"),
        (&["--large-chunk", "18K", "--large-segments", "1"][..], "chunk size 18432 B is not a whole number"),
    ] {
        let out = s.format("bad", options);
        let said = text(&out);
        assert!(!out.status.success(), "{options:?} accepted: {said}");
        assert!(said.contains(expect), "{options:?}: {said}");
        assert!(!said.contains("panicked"), "{options:?}: {said}");
    }
    // Refused before any drive was touched: they hold no array.
    let out = s.run(&["inspect", &s.drives[0]]);
    assert!(text(&out).contains("superblock: none"), "{}", text(&out));
    // Large-chunk segments alone are fine when written with Zone Write.
    let options = ["--mode", "zone-write", "--small-segments", "0", "--large-segments", "2", "--large-chunk", "16K"];
    let out = s.format("large", &options);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("open segments 2 of 16 KiB chunks"), "{}", text(&out));
}

#[test]
fn drives_whose_zone_limits_are_too_small_are_refused_with_the_numbers() {
    let segments = "2 small + 2 large open segments need 8";
    for (limits, expect) in [
        (["--max-open", "6", "--max-active", "6"], format!("it allows 6 open zones; {segments} (")),
        (
            ["--max-open", "8", "--max-active", "8"],
            format!("it allows 8 active zones; {segments} (+1 for the superblock zone): 1 short"),
        ),
    ] {
        let s = Setup::new(&limits);
        let out = s.format("limits", &HYBRID);
        let said = text(&out);
        assert!(!out.status.success(), "{limits:?} accepted: {said}");
        assert!(said.contains(&format!("{} refused: {expect}", s.drives[0])), "{limits:?}: {said}");
        // The same drives take an array of one open segment.
        let out = s.format("single", &[]);
        assert!(out.status.success(), "{limits:?}: {}", text(&out));
    }
    let s = Setup::new(&["--max-open", "6", "--max-active", "6"]);
    let said = text(&s.format("limits", &HYBRID));
    assert!(said.contains("): 2 short"), "{said}");
    // Start checks the drives it is given too: the array formatted on drives that allowed
    // enough, found on drives that allow fewer.
    let s = Setup::new(&["--max-open", "8", "--max-active", "9"]);
    assert!(s.format("moved", &HYBRID).status.success());
    s.lower_zone_limits(8, 8);
    let out = s.on_drives(&["start", "--no-device"], &[]);
    let said = text(&out);
    assert!(!out.status.success(), "started: {said}");
    let expect =
        format!("{} refused: it allows 8 active zones; {segments} (+1 for the superblock zone): 1 short", s.drives[0]);
    assert!(said.contains(&expect), "{said}");
}

/// Formatted with the defaults, an array is what it always was: the superblock's
/// open-segment bytes are zero (the superblock of earlier zapraid), the capacity is that
/// of one open segment, and it starts and shows one open segment.
#[test]
fn a_default_array_formats_and_starts_as_before() {
    let s = Setup::new(&[]);
    let out = s.format("plain", &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("RAID-5 (3+1), ZapRAID G=8, 4 KiB chunks, 4 drives"), "{}", text(&out));
    let bytes = s.superblock(0);
    assert_eq!((bytes[SMALL_SEGMENTS_BYTE], bytes[LARGE_SEGMENTS_BYTE]), (0, 0));
    assert_eq!(bytes[LARGE_CHUNK_BYTES], [0; 4]);
    let sb = ArraySuperblock::decode(&bytes).unwrap();
    let raw = s.geometry(0);
    let array = Geometry { zone_count: raw.zone_count - zapraid_server::records::SUPERBLOCK_ZONES, ..raw };
    let layout =
        Layout::new(&array, RaidLevel::Raid5 { drives: DRIVES }, Mode::ZapRaid { group_size: 8 }, 4096).unwrap();
    assert_eq!(sb.logical_blocks.get(), layout.capacity_blocks(array.zone_count), "one open segment's capacity");
    // Asked for explicitly, the same array.
    let out = s.format("explicit", &["--force", "--chunk", "4K", "--small-segments", "1", "--large-segments", "0"]);
    assert!(out.status.success(), "{}", text(&out));
    let explicit = s.superblock(0);
    let differ: Vec<usize> = (0..ARRAY_SUPERBLOCK_BYTES).filter(|i| bytes[*i] != explicit[*i]).collect();
    let allowed = 16..32; // array UUID
    let name_and_time = 84..124; // created_unix_s, name
    assert!(
        differ.iter().all(|i| allowed.contains(i) || name_and_time.contains(i) || *i >= ARRAY_SUPERBLOCK_BYTES - 4),
        "bytes {differ:?} differ"
    );
    s.start();
    let status = s.status("explicit");
    let fields = ["small_segments", "large_segments", "small_chunk_bytes", "large_chunk_bytes", "chunk_bytes"];
    let values: Vec<serde_json::Value> = fields.iter().map(|f| status[f].clone()).collect();
    assert_eq!(serde_json::Value::Array(values), serde_json::json!([1, 0, 4096, null, 4096]), "{status}");
    let human = s.ok(&["status", "explicit"]);
    assert!(human.contains("  open segments: 1 of 4 KiB chunks\n"), "{human}");
    s.ok(&["stop", "explicit"]);
}

/// The engine on a hybrid array, end to end on drive files: the self-test (write, read
/// back, stop, start, verify, a failed drive, degraded writes, restart, verify) with small
/// and large requests, both kinds of segment on the drives; then the array started as a
/// server, its status, stopped and started again.
#[test]
fn a_hybrid_array_runs_end_to_end() {
    let s = Setup::new(&[]);
    let out = s.on_drives(&["selftest", "--erase", "--level", "raid5", "--size", "4M"], &HYBRID);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("open segments 2 of 8 KiB chunks + 2 of 16 KiB chunks; writing 4 MiB"), "{said}");
    assert!(said.contains("selftest passed: 4 MiB written and verified"), "{said}");
    let inspect = s.ok(&["inspect", &s.drives[0]]);
    // Which small-chunk segment a small stripe goes to depends on which is idle; large
    // chunks are always written with Zone Write under ZapRAID.
    for segment in ["chunk 2 blocks, G ", ", small chunks, ", "chunk 4 blocks, G 1, large chunks, Zone Write"] {
        assert!(inspect.contains(segment), "no segment of {segment}:\n{inspect}");
    }

    let out = s.format("hy", &[&["--force"][..], &HYBRID].concat());
    assert!(out.status.success(), "{}", text(&out));
    for round in ["first start", "second start"] {
        s.start();
        let status = s.status("hy");
        let fields = ["small_segments", "large_segments", "small_chunk_bytes", "large_chunk_bytes"];
        let values: Vec<serde_json::Value> = fields.iter().map(|f| status[f].clone()).collect();
        assert_eq!(serde_json::Value::Array(values), serde_json::json!([2, 2, 8192, 16384]), "{round}: {status}");
        assert_eq!(status["state"], "optimal", "{round}: {status}");
        let human = s.ok(&["status", "hy"]);
        assert!(human.contains("  open segments: 2 of 8 KiB chunks + 2 of 16 KiB chunks\n"), "{round}: {human}");
        s.ok(&["stop", "hy"]);
    }
}

/// `simulate` takes the same options: small and large writes, a failed drive, a power cut
/// and recovery, every block checked.
#[test]
fn simulate_takes_the_open_segments() {
    let s = Setup::new(&[]);
    let out = s.run(&[&["simulate", "--size", "2M", "--crash"][..], &HYBRID].concat());
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("open segments 2 of 8 KiB chunks + 2 of 16 KiB chunks"), "{said}");
    assert!(said.contains("stripes per small-chunk segment"), "{said}");
    assert!(said.contains("every block verified"), "{said}");
    assert!(said.contains("acknowledged overwritten blocks hold their new contents"), "{said}");
    let out = s.run(&["simulate", "--size", "1M", "--large-segments", "1"]);
    assert!(!out.status.success() && text(&out).contains("--large-segments 1 needs --large-chunk"), "{}", text(&out));
}

#[test]
fn format_help_explains_how_to_choose() {
    let s = Setup::new(&[]);
    let help = s.ok(&["format", "--help"]);
    for phrase in [
        "--small-chunk <SIZE>",
        "--chunk",
        "--large-chunk <SIZE>",
        "--small-segments <N>",
        "--large-segments <N>",
        "A write smaller than Cl goes to small-chunk stripes",
        "and garbage collection, goes to large-chunk stripes",
        "small-chunk segment 0 takes the stripe groups",
        "Each open\n    segment costs 2 open and 2 active zones per drive",
        "see `zapraid bench hybrid` (Exp#7)",
    ] {
        assert!(help.contains(phrase), "format --help lacks {phrase:?}:\n{help}");
    }
}
