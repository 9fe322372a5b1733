//! Reading traces from files: every format, gzip, detection, volume filter, and each kind
//! of bad input (malformed number, wrong field count, unknown opcode, empty trace,
//! ambiguous format), with the line number in the error.

use std::io::Write;
use std::path::{Path, PathBuf};

use zapraid_trace::{Format, Op, ReadOptions, TraceError, TraceReader, TraceRecord};

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/alibaba2020_sample.csv");

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn read_all(path: &Path, options: ReadOptions) -> Result<(Format, Vec<TraceRecord>), TraceError> {
    let reader = TraceReader::open(path, options)?;
    let format = reader.format();
    Ok((format, reader.collect::<Result<Vec<_>, _>>()?))
}

#[test]
fn reads_the_alibaba_sample() {
    let (format, records) = read_all(Path::new(SAMPLE), ReadOptions::default()).unwrap();
    assert_eq!(format, Format::Alibaba);
    assert_eq!(records.len(), 13);
    assert_eq!(
        records[0],
        TraceRecord {
            timestamp_ns: 1_577_808_000_000_046_000,
            op: Op::Read,
            offset_bytes: 126_703_661_056,
            length_bytes: 4096
        }
    );
    let volume = ReadOptions { volume: Some("725".into()), ..ReadOptions::default() };
    let mut reader = TraceReader::open(Path::new(SAMPLE), volume).unwrap();
    let records: Vec<_> = reader.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(reader.stats().other_volumes, 11);
}

#[test]
fn reads_gzip_by_magic_and_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read(SAMPLE).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&text).unwrap();
    let gz = gz.finish().unwrap();
    for name in ["trace.csv.gz", "trace.csv"] {
        let path = dir.path().join(name);
        std::fs::write(&path, &gz).unwrap();
        let (_, records) = read_all(&path, ReadOptions::default()).unwrap();
        assert_eq!(records.len(), 13, "{name}");
    }
}

#[test]
fn reads_each_format() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("tencent.csv", "1538323200,2048,16,1,1063\n1538323201,0,8,0,1063\n", Format::Tencent),
        (
            "msr.csv",
            "128166372003061629,hm,1,Read,3154152960,32768,10978\n128166372016382155,hm,1,Write,0,4096,1\n",
            Format::Msr,
        ),
        ("v2.log", "fio version 2 iolog\nf add\nf open\nf write 0 4096\nf read 4096 4096\nf close\n", Format::Fio),
        ("v3.log", "fio version 3 iolog\n0 f add\n1 f open\n5 f write 0 4096\n9 f read 4096 4096\n", Format::Fio),
    ];
    for (name, text, format) in cases {
        let path = write(dir.path(), name, text);
        let (detected, records) = read_all(&path, ReadOptions::default()).unwrap();
        assert_eq!((detected, records.len()), (format, 2), "{name}");
        let named = ReadOptions { format: Some(format), ..ReadOptions::default() };
        assert_eq!(read_all(&path, named).unwrap().1, records, "{name}");
    }
}

/// Each bad line stops the reader with its number and content; `skip_bad` counts it.
#[test]
fn bad_lines_name_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = "0,R,126703661056,4096,1577808000000046\n";
    let cases = [
        ("1,W,19x96,77824,1577808000000426", "offset '19x96' is not a whole number"),
        ("1,W,19496058880,77824", "expected 5 comma-separated fields"),
        ("1,Q,19496058880,77824,1577808000000426", "unknown opcode 'Q'"),
    ];
    for (bad, reason) in cases {
        let text = format!("{good}{good}{bad}\n{good}");
        let path = write(dir.path(), "bad.csv", &text);
        let named = ReadOptions { format: Some(Format::Alibaba), ..ReadOptions::default() };
        let error = read_all(&path, named.clone()).unwrap_err().to_string();
        assert!(error.starts_with("line 3: "), "{error}");
        assert!(error.contains(reason) && error.contains(bad), "{error}");
        let skip = ReadOptions { skip_bad: true, ..named };
        let mut reader = TraceReader::open(&path, skip).unwrap();
        assert_eq!(reader.by_ref().count(), 3);
        assert_eq!(reader.stats().skipped_bad, 1);
        assert!(reader.stats().first_bad.as_ref().unwrap().starts_with("line 3: "));
    }
}

#[test]
fn an_empty_trace_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    for text in ["", "\n\n", "fio version 3 iolog\n0 f add\n0 f open\n"] {
        let path = write(dir.path(), "empty.log", text);
        let error = read_all(&path, ReadOptions::default()).unwrap_err();
        assert!(matches!(error, TraceError::Empty { .. }), "{text:?}: {error}");
        assert!(error.to_string().contains("no requests"), "{error}");
    }
    // Requests, but none of the chosen volume.
    let other = ReadOptions { volume: Some("99999".into()), ..ReadOptions::default() };
    let error = read_all(Path::new(SAMPLE), other).unwrap_err();
    assert!(matches!(error, TraceError::Empty { other_volumes: 13, .. }), "{error}");
}

#[test]
fn an_ambiguous_trace_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "mixed.csv", "0,R,126703661056,4096,1577808000000046\n1538323200,2048,16,1,1063\n");
    let error = read_all(&path, ReadOptions::default()).unwrap_err();
    assert!(matches!(error, TraceError::Ambiguous { .. }), "{error}");
    assert!(error.to_string().contains("--format"), "{error}");
}

#[test]
fn invalid_utf8_is_a_bad_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("binary.csv");
    std::fs::write(&path, b"0,R,126703661056,4096,1577808000000046\n\xff\xfe,W\n").unwrap();
    let named = ReadOptions { format: Some(Format::Alibaba), ..ReadOptions::default() };
    let error = read_all(&path, named).unwrap_err().to_string();
    assert!(error.starts_with("line 2: the line is not text"), "{error}");
}

#[test]
fn missing_and_corrupt_files_are_errors() {
    let error = TraceReader::open(Path::new("/nonexistent/trace.csv"), ReadOptions::default()).err().unwrap();
    assert!(error.to_string().starts_with("cannot open /nonexistent/trace.csv: "), "{error}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("corrupt.csv.gz");
    std::fs::write(&path, b"\x1f\x8b not really gzip").unwrap();
    let error = TraceReader::open(&path, ReadOptions::default()).err().unwrap();
    assert!(error.to_string().starts_with("reading line 1: "), "{error}");
}

/// A UTF-8 byte order mark (as some editors and Windows tools write) before the first line
/// is skipped, in a plain and a gzip file; one anywhere else is part of its line.
#[test]
fn a_leading_byte_order_mark_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(SAMPLE).unwrap();
    let with_bom = format!("\u{feff}{text}");
    let plain = write(dir.path(), "bom.csv", &with_bom);
    let (format, records) = read_all(&plain, ReadOptions::default()).unwrap();
    assert_eq!((format, records.len()), (Format::Alibaba, 13));
    let named = ReadOptions { format: Some(Format::Alibaba), ..ReadOptions::default() };
    assert_eq!(read_all(&plain, named).unwrap().1.len(), 13);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(with_bom.as_bytes()).unwrap();
    let gzip = dir.path().join("bom.csv.gz");
    std::fs::write(&gzip, gz.finish().unwrap()).unwrap();
    assert_eq!(read_all(&gzip, ReadOptions::default()).unwrap().1.len(), 13);
    let (first, rest) = text.split_once('\n').unwrap();
    let inside = write(dir.path(), "inside.csv", &format!("{first}\n\u{feff}{rest}"));
    let named = ReadOptions { format: Some(Format::Alibaba), ..ReadOptions::default() };
    let error = read_all(&inside, named).unwrap_err();
    assert!(error.to_string().contains("line 2"), "{error}");
}
