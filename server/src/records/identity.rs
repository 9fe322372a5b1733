//! What the records stamp an array with: its UUID (made from the kernel's random source,
//! said in its usual text form) and the time it was made, in seconds since the epoch.

pub(crate) fn unix_now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A random array identity, from the kernel's random source.
pub(crate) fn new_uuid() -> [u8; 16] {
    let mut uuid = [0u8; 16];
    if let Ok(bytes) = std::fs::read("/proc/sys/kernel/random/uuid") {
        let hex: Vec<u8> = bytes.iter().copied().filter(u8::is_ascii_hexdigit).collect();
        for (i, pair) in hex.chunks(2).take(16).enumerate() {
            uuid[i] = u8::from_str_radix(std::str::from_utf8(pair).unwrap_or("0"), 16).unwrap_or(0);
        }
    }
    if uuid == [0; 16] {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        uuid = (nanos ^ u128::from(std::process::id()) << 64).to_le_bytes();
    }
    uuid
}

/// A UUID in its usual text form.
pub fn uuid_text(uuid: &[u8; 16]) -> String {
    let h: String = uuid.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}
