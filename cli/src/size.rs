//! Parsing of human-written byte sizes ("4K", "64MiB", "1G", "4096") for the command line.

/// Parses a size in bytes: a whole number with an optional binary suffix
/// (K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB; all powers of 1024).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    if digits.is_empty() {
        return Err(format!("'{text}' is not a size: expected a number like 4096, 4K or 64M"));
    }
    let value: u64 = digits.parse().map_err(|_| format!("'{text}' is too large"))?;
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("'{text}': unknown size suffix '{other}' (use K, M, G or T)")),
    };
    value.checked_mul(1u64 << shift).ok_or_else(|| format!("'{text}' is too large"))
}

/// Parses a rate limit, the one parser of every rate option (`rebuild-rate`, `--rebuild-rate`,
/// `scrub --rate`, `scrub --set-rate`): a size per second ("200M", "200MiB/s", "1G") or
/// "unlimited" (also "0"), which gives 0.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("unlimited") {
        return Ok(0);
    }
    let size = t.strip_suffix("/s").unwrap_or(t);
    parse_bytes(size).map_err(|e| format!("{e}; a rate is a size per second (200M, 1G) or unlimited"))
}

/// A rate limit as people read it: "200 MiB/s", or "unlimited" for none.
pub fn format_rate(bytes_per_s: Option<u64>) -> String {
    match bytes_per_s.filter(|r| *r > 0) {
        Some(rate) => format!("{}/s", format_bytes(rate)),
        None => "unlimited".to_string(),
    }
}

/// Formats bytes with the largest binary unit that keeps the number whole, or one decimal.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u32); 4] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in UNITS {
        let scale = 1u64 << shift;
        if bytes >= scale {
            return if bytes.is_multiple_of(scale) {
                format!("{} {unit}", bytes / scale)
            } else {
                format!("{:.1} {unit}", bytes as f64 / scale as f64)
            };
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_suffixes() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("4K"), Ok(4096));
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("2g"), Ok(2 << 30));
        assert!(parse_bytes("K").is_err());
        assert!(parse_bytes("4X").is_err());
        assert!(parse_bytes("99999999999T").is_err());
    }

    #[test]
    fn parses_rates() {
        assert_eq!(parse_rate("200M"), Ok(200 << 20));
        assert_eq!(parse_rate("200MiB/s"), Ok(200 << 20));
        assert_eq!(parse_rate("unlimited"), Ok(0));
        assert_eq!(parse_rate("0"), Ok(0));
        assert!(parse_rate("fast").is_err());
        assert_eq!(format_rate(Some(400 << 20)), "400 MiB/s");
        assert_eq!(format_rate(None), "unlimited");
        assert_eq!(format_rate(Some(0)), "unlimited");
    }

    #[test]
    fn formats() {
        assert_eq!(format_bytes(64 << 20), "64 MiB");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(12), "12 B");
    }
}
