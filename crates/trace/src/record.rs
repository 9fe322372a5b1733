//! One request of a trace as every format parses it, and what a format's line parser
//! returns. Invariants: `length_bytes > 0`; `timestamp_ns` is in the format's own epoch
//! (only differences between records matter to replay).

/// A read or a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
}

/// One request of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    pub timestamp_ns: u64,
    pub op: Op,
    pub offset_bytes: u64,
    pub length_bytes: u64,
}

/// What one line of a trace is.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A read or write of `volume` (the device, volume, disk or file it addresses).
    Request { record: TraceRecord, volume: String },
    /// A request that is neither read nor write (flush, trim, sync): counted, not replayed.
    NonData,
    /// Nothing to replay: a header, comment, blank line or file action.
    Ignored,
}

/// Why a line is malformed (the reader adds its number and content).
pub type LineResult = std::result::Result<Line, String>;

/// Parses a whole unsigned number, naming the field in the error.
pub(crate) fn number(field: &str, what: &str) -> std::result::Result<u64, String> {
    let field = field.trim();
    field.parse::<u64>().map_err(|_| {
        if field.is_empty() {
            format!("{what} is empty")
        } else {
            format!("{what} '{field}' is not a whole number")
        }
    })
}

/// `value * scale`, or an error naming the field when it does not fit in 64 bits.
pub(crate) fn scaled(value: u64, scale: u64, what: &str) -> std::result::Result<u64, String> {
    value.checked_mul(scale).ok_or_else(|| format!("{what} {value} is too large"))
}

/// Splits a CSV line into its `N` fields (trimmed), or says how many it has instead.
/// Allocates nothing: traces have billions of lines.
pub(crate) fn fields<'a, const N: usize>(line: &'a str, shape: &str) -> std::result::Result<[&'a str; N], String> {
    let mut out = [""; N];
    let mut count = 0;
    for field in line.split(',') {
        if let Some(slot) = out.get_mut(count) {
            *slot = field.trim();
        }
        count += 1;
    }
    if count != N {
        return Err(format!("expected {N} comma-separated fields ({shape}), found {count}"));
    }
    Ok(out)
}

/// A request of nonzero length.
pub(crate) fn request(timestamp_ns: u64, op: Op, offset_bytes: u64, length_bytes: u64, volume: String) -> LineResult {
    if length_bytes == 0 {
        return Err("length is zero".into());
    }
    if offset_bytes.checked_add(length_bytes).is_none() {
        return Err(format!("offset {offset_bytes} + length {length_bytes} is too large"));
    }
    Ok(Line::Request { record: TraceRecord { timestamp_ns, op, offset_bytes, length_bytes }, volume })
}
