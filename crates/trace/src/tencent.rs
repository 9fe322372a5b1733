//! Tencent cloud block storage traces (2018): `timestamp,offset,size,type,volume`,
//! timestamp in seconds (Unix epoch), offset and size in 512-byte sectors, type `0` read
//! or `1` write, volume the cloud virtual volume's id.

use crate::record::{fields, number, request, scaled, LineResult, Op};

const SHAPE: &str = "timestamp,offset,size,type,volume";
pub const SECTOR_BYTES: u64 = 512;

pub fn parse(line: &str) -> LineResult {
    let f: [&str; 5] = fields(line, SHAPE)?;
    let timestamp_s = number(f[0], "timestamp")?;
    let offset = number(f[1], "offset")?;
    let size = number(f[2], "size")?;
    let op = match f[3] {
        "0" => Op::Read,
        "1" => Op::Write,
        other => return Err(format!("unknown type '{other}' (expected 0 for read or 1 for write)")),
    };
    let volume = number(f[4], "volume")?;
    request(
        scaled(timestamp_s, 1_000_000_000, "timestamp")?,
        op,
        scaled(offset, SECTOR_BYTES, "offset")?,
        scaled(size, SECTOR_BYTES, "size")?,
        volume.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Line, TraceRecord};

    #[test]
    fn parses_a_line() {
        let line = parse("1538323200,2048,16,1,1063").unwrap();
        let record = TraceRecord {
            timestamp_ns: 1_538_323_200_000_000_000,
            op: Op::Write,
            offset_bytes: 1 << 20,
            length_bytes: 8192,
        };
        assert_eq!(line, Line::Request { record, volume: "1063".into() });
    }

    #[test]
    fn rejects_bad_lines() {
        assert!(parse("1538323200,2048,16,2,1063").unwrap_err().contains("unknown type '2'"));
        assert!(parse("1538323200,2048,16,1").unwrap_err().contains("expected 5"));
        assert!(parse("1538323200,-1,16,1,7").unwrap_err().contains("not a whole number"));
    }
}
