//! Alibaba cloud block traces (2020): `device_id,opcode,offset,length,timestamp`, opcode
//! `R` or `W`, offset and length in bytes, timestamp in microseconds (Unix epoch). The
//! volume is the device id.

use crate::record::{fields, number, request, scaled, LineResult, Op};

const SHAPE: &str = "device_id,opcode,offset,length,timestamp";

pub fn parse(line: &str) -> LineResult {
    let f: [&str; 5] = fields(line, SHAPE)?;
    let device = number(f[0], "device id")?;
    let op = match f[1] {
        "R" | "r" => Op::Read,
        "W" | "w" => Op::Write,
        other => return Err(format!("unknown opcode '{other}' (expected R or W)")),
    };
    let offset = number(f[2], "offset")?;
    let length = number(f[3], "length")?;
    let timestamp_us = number(f[4], "timestamp")?;
    request(scaled(timestamp_us, 1_000, "timestamp")?, op, offset, length, device.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Line, TraceRecord};

    #[test]
    fn parses_a_line() {
        let line = parse("2,W,9811763200,12288,1577808000000494").unwrap();
        let record = TraceRecord {
            timestamp_ns: 1_577_808_000_000_494_000,
            op: Op::Write,
            offset_bytes: 9_811_763_200,
            length_bytes: 12_288,
        };
        assert_eq!(line, Line::Request { record, volume: "2".into() });
    }

    #[test]
    fn rejects_bad_lines() {
        assert!(parse("2,X,0,4096,1").unwrap_err().contains("unknown opcode 'X'"));
        assert!(parse("2,W,0,4096").unwrap_err().contains("expected 5"));
        assert!(parse("2,W,0x10,4096,1").unwrap_err().contains("offset '0x10' is not a whole number"));
        assert!(parse("2,W,0,0,1").unwrap_err().contains("length is zero"));
    }
}
