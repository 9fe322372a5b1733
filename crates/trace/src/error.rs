//! The errors of trace reading and replay. Every error about a trace line names the line
//! (1-based) and shows its content (cut to `CONTENT_CHARS_SHOWN` characters), so that a
//! bad line in a gigabyte trace can be found.

use std::path::PathBuf;

/// Characters of an offending line shown in an error.
pub const CONTENT_CHARS_SHOWN: usize = 160;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    // The I/O errors are shown in the message, not chained as sources, so that a chain
    // printed whole (`{:#}`) does not say them twice.
    #[error("cannot open {}: {error}", path.display())]
    Open { path: PathBuf, error: std::io::Error },
    #[error("reading line {line}: {error}")]
    Read { line: u64, error: std::io::Error },
    #[error("line {line}: {reason}: {content:?}")]
    Malformed { line: u64, reason: String, content: String },
    #[error(
        "the trace has no requests to replay ({lines} lines read, {skipped_bad} bad lines skipped, \
         {other_volumes} requests of other volumes, {non_data} requests other than reads and writes)"
    )]
    Empty { lines: u64, skipped_bad: u64, other_volumes: u64, non_data: u64 },
    #[error("cannot tell the trace's format from its first lines: {reason}; name it with --format")]
    Ambiguous { reason: String },
    #[error("cannot tell the trace's format: {reason}; name it with --format (alibaba, tencent, msr, fio)")]
    Unknown { reason: String },
    #[error("invalid replay setting: {0}")]
    Setting(String),
    #[error("the engine failed: {0}")]
    Engine(zapraid_engine::Error),
    #[error("the replay stalled with {in_flight} requests in flight")]
    Stalled { in_flight: u64 },
    #[error("request {request} failed: {reason}")]
    Target { request: u64, reason: String },
}

impl From<zapraid_engine::Error> for TraceError {
    fn from(error: zapraid_engine::Error) -> Self {
        TraceError::Engine(error)
    }
}

impl TraceError {
    /// A malformed line: its number, why, and (the start of) its content.
    pub fn malformed(line: u64, reason: impl Into<String>, content: &str) -> Self {
        TraceError::Malformed { line, reason: reason.into(), content: shown(content) }
    }
}

/// A line's content as errors show it: cut after `CONTENT_CHARS_SHOWN` characters.
pub fn shown(content: &str) -> String {
    if content.chars().count() > CONTENT_CHARS_SHOWN {
        content.chars().take(CONTENT_CHARS_SHOWN).chain("...".chars()).collect()
    } else {
        content.to_string()
    }
}

pub type Result<T, E = TraceError> = std::result::Result<T, E>;
