//! Small traces of every format `zapraid replay` reads, for its tests.
#![allow(dead_code)] // not every test binary uses every helper

use std::path::{Path, PathBuf};

/// The Alibaba sample lines (13 requests: 7 reads, 6 writes).
pub const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../crates/trace/tests/data/alibaba2020_sample.csv");

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// One trace of each format in `dir`: its path, format name and request count.
pub fn one_of_each_format(dir: &Path) -> Vec<(PathBuf, &'static str, u64)> {
    vec![
        (PathBuf::from(SAMPLE), "alibaba", 13),
        (write(dir, "tencent.csv", "1538323200,2048,16,1,1063\n1538323200,0,8,0,1063\n1538323201,4096,64,1,1063\n"), "tencent", 3),
        (
            write(
                dir,
                "msr.csv",
                "128166372003061629,hm,1,Read,3154152960,32768,10978\n128166372016382155,hm,1,Write,3154152960,4096,1\n",
            ),
            "msr",
            2,
        ),
        (write(dir, "v2.log", "fio version 2 iolog\nf add\nf open\nf write 0 4096\nf wait 2 0\nf read 0 4096\nf close\n"), "fio", 2),
        (write(dir, "v3.log", "fio version 3 iolog\n0 f add\n1 f open\n5 f write 0 8192\n900 f read 0 4096\n"), "fio", 2),
    ]
}

/// Closed and open loop, as `zapraid replay` takes them.
pub const PACINGS: [&[&str]; 2] = [&["--queue-depth", "4"], &["--speed", "10"]];
