//! MSR Cambridge block traces (SNIA, 2007): `Timestamp,Hostname,DiskNumber,Type,Offset,
//! Size,ResponseTime`, timestamp in Windows filetime (100 ns ticks since 1601), type
//! `Read` or `Write`, offset and size in bytes; the response time is the traced system's
//! and is not used. The volume is `hostname_disk` (as the published files are named).

use crate::record::{fields, number, request, scaled, LineResult, Op};

const SHAPE: &str = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime";
const NS_PER_FILETIME_TICK: u64 = 100;

pub fn parse(line: &str) -> LineResult {
    let f: [&str; 7] = fields(line, SHAPE)?;
    let ticks = number(f[0], "timestamp")?;
    if f[1].is_empty() {
        return Err("hostname is empty".into());
    }
    let disk = number(f[2], "disk number")?;
    let op = match f[3] {
        t if t.eq_ignore_ascii_case("read") => Op::Read,
        t if t.eq_ignore_ascii_case("write") => Op::Write,
        other => return Err(format!("unknown type '{other}' (expected Read or Write)")),
    };
    let offset = number(f[4], "offset")?;
    let size = number(f[5], "size")?;
    number(f[6], "response time")?;
    request(scaled(ticks, NS_PER_FILETIME_TICK, "timestamp")?, op, offset, size, format!("{}_{disk}", f[1]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Line, TraceRecord};

    #[test]
    fn parses_a_line() {
        let line = parse("128166372003061629,hm,1,Read,3154152960,32768,10978").unwrap();
        let record = TraceRecord {
            timestamp_ns: 12_816_637_200_306_162_900,
            op: Op::Read,
            offset_bytes: 3_154_152_960,
            length_bytes: 32_768,
        };
        assert_eq!(line, Line::Request { record, volume: "hm_1".into() });
    }

    #[test]
    fn rejects_bad_lines() {
        assert!(parse("128166372003061629,hm,1,Trim,0,4096,1").unwrap_err().contains("unknown type 'Trim'"));
        assert!(parse("128166372003061629,hm,1,Read,0,4096").unwrap_err().contains("expected 7"));
        // Past 2^64 ns: an error, not a wrapped timestamp.
        assert!(parse("999999999999999999,hm,1,Read,0,4096,1").unwrap_err().contains("too large"));
    }
}
