//! fio I/O logs (`write_iolog` / `read_iolog`), versions 2 and 3. The first line is
//! `fio version 2 iolog` or `fio version 3 iolog`; then, whitespace-separated:
//!
//! - v2: `filename action` (add, open, close) or `filename action offset length`
//!   (read, write, trim, sync, datasync, or `wait` whose third field is the time, in
//!   milliseconds since the start, until which fio waits, as fio's reader takes it).
//!   Requests have no time of their own: each takes the time of the last `wait`.
//! - v3: the same with a leading timestamp in microseconds since the start (as fio
//!   writes it), and no `wait`.
//!
//! Offsets and lengths are bytes; the volume is the file name.

use crate::record::{number, request, scaled, Line, LineResult, Op};

pub const V2_HEADER: &str = "fio version 2 iolog";
pub const V3_HEADER: &str = "fio version 3 iolog";

/// State across lines: the version the header named, and v2's time of the last wait.
#[derive(Debug, Default)]
pub struct FioParser {
    version: Option<u8>,
    wait_ns: u64,
}

impl FioParser {
    pub fn parse(&mut self, line: &str) -> LineResult {
        let line = line.trim();
        let Some(version) = self.version else {
            self.version = Some(match line {
                V2_HEADER => 2,
                V3_HEADER => 3,
                _ => return Err(format!("an fio iolog starts with '{V2_HEADER}' or '{V3_HEADER}'")),
            });
            return Ok(Line::Ignored);
        };
        if line.is_empty() {
            return Ok(Line::Ignored);
        }
        let mut f: Vec<&str> = line.split_whitespace().collect();
        let timestamp_ns = if version == 3 {
            let us = number(f.remove(0), "timestamp")?;
            scaled(us, 1_000, "timestamp")?
        } else {
            self.wait_ns
        };
        match f.as_slice() {
            [_file, "add" | "open" | "close"] => Ok(Line::Ignored),
            [_file, action] => Err(format!("unknown file action '{action}' (expected add, open or close)")),
            [file, action, offset, length] => {
                let offset = number(offset, "offset")?;
                let length = number(length, "length")?;
                match *action {
                    "read" => request(timestamp_ns, Op::Read, offset, length, file.to_string()),
                    "write" => request(timestamp_ns, Op::Write, offset, length, file.to_string()),
                    "trim" | "sync" | "datasync" => Ok(Line::NonData),
                    "wait" if version == 2 => {
                        // fio reads a v2 wait's offset field as milliseconds since the start.
                        self.wait_ns = self.wait_ns.max(scaled(offset, 1_000_000, "wait time")?);
                        Ok(Line::Ignored)
                    }
                    other => Err(format!("unknown action '{other}' (expected read, write, trim, sync or datasync)")),
                }
            }
            _ => {
                let shape = if version == 3 {
                    "timestamp filename action [offset length]"
                } else {
                    "filename action [offset length]"
                };
                Err(format!("expected {shape}"))
            }
        }
    }
}

/// Whether `line` is an fio iolog header.
pub fn is_header(line: &str) -> bool {
    matches!(line.trim(), V2_HEADER | V3_HEADER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::TraceRecord;

    fn record(timestamp_ns: u64, op: Op, offset_bytes: u64, length_bytes: u64) -> Line {
        Line::Request {
            record: TraceRecord { timestamp_ns, op, offset_bytes, length_bytes },
            volume: "/dev/nvme0n1".into(),
        }
    }

    #[test]
    fn parses_version_2() {
        let mut p = FioParser::default();
        assert_eq!(p.parse(V2_HEADER), Ok(Line::Ignored));
        assert_eq!(p.parse("/dev/nvme0n1 add"), Ok(Line::Ignored));
        assert_eq!(p.parse("/dev/nvme0n1 write 8192 4096"), Ok(record(0, Op::Write, 8192, 4096)));
        assert_eq!(p.parse("/dev/nvme0n1 wait 5 0"), Ok(Line::Ignored));
        assert_eq!(p.parse("/dev/nvme0n1 read 0 512"), Ok(record(5_000_000, Op::Read, 0, 512)));
        assert_eq!(p.parse("/dev/nvme0n1 sync 0 0"), Ok(Line::NonData));
    }

    #[test]
    fn parses_version_3() {
        let mut p = FioParser::default();
        assert_eq!(p.parse(V3_HEADER), Ok(Line::Ignored));
        assert_eq!(p.parse("0 /dev/nvme0n1 open"), Ok(Line::Ignored));
        assert_eq!(p.parse("878 /dev/nvme0n1 write 0 16384"), Ok(record(878_000, Op::Write, 0, 16384)));
        assert_eq!(p.parse("900 /dev/nvme0n1 trim 0 16384"), Ok(Line::NonData));
    }

    #[test]
    fn rejects_bad_lines() {
        let mut p = FioParser::default();
        assert!(p.parse("0,R,1,2,3").unwrap_err().contains("starts with"));
        let mut p = FioParser::default();
        p.parse(V3_HEADER).unwrap();
        assert!(p.parse("878 /dev/nvme0n1 scribble 0 16384").unwrap_err().contains("unknown action 'scribble'"));
        assert!(p.parse("x /dev/nvme0n1 write 0 16384").unwrap_err().contains("timestamp 'x'"));
        assert!(p.parse("1 /dev/nvme0n1 write 0").unwrap_err().contains("expected timestamp filename"));
    }
}
