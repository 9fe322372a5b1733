//! Block I/O traces for zapraid: streaming parsers of published trace formats, and their
//! replay against the engine in the deterministic simulator (`replay`).
//!
//! Formats (one module each): Alibaba cloud block traces 2020 (`alibaba`), Tencent CBS
//! 2018 (`tencent`), MSR Cambridge (`msr`), fio iolog v2/v3 (`fio`); `detect` tells them
//! apart from a trace's first lines. `TraceReader` reads any of them from a file (plain or
//! gzip, by name or magic) or any `BufRead`, one line at a time: memory does not grow
//! with the trace; a UTF-8 byte order mark before the first line is skipped. It yields `TraceRecord`s of the chosen volume; a malformed line stops
//! it with the line's number and content, or with `skip_bad` is counted and skipped; a
//! trace without a request to replay is an error (`TraceError::Empty`), never an empty
//! result.

pub mod alibaba;
pub mod detect;
pub mod error;
pub mod fio;
pub mod msr;
pub mod record;
pub mod replay;
pub mod tencent;

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use error::{Result, TraceError};
pub use record::{Line, Op, TraceRecord};

/// A trace format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Alibaba,
    Tencent,
    Msr,
    Fio,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Alibaba, Format::Tencent, Format::Msr, Format::Fio];

    pub fn name(self) -> &'static str {
        match self {
            Format::Alibaba => "alibaba",
            Format::Tencent => "tencent",
            Format::Msr => "msr",
            Format::Fio => "fio",
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A format's line parser with the state it keeps across lines.
enum Parser {
    Alibaba,
    Tencent,
    Msr,
    Fio(fio::FioParser),
}

impl Parser {
    fn new(format: Format) -> Self {
        match format {
            Format::Alibaba => Parser::Alibaba,
            Format::Tencent => Parser::Tencent,
            Format::Msr => Parser::Msr,
            Format::Fio => Parser::Fio(fio::FioParser::default()),
        }
    }

    fn parse(&mut self, line: &str) -> record::LineResult {
        match self {
            Parser::Alibaba => alibaba::parse(line),
            Parser::Tencent => tencent::parse(line),
            Parser::Msr => msr::parse(line),
            Parser::Fio(p) => p.parse(line),
        }
    }
}

/// How to read a trace.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// The format; `None`: detected from the first lines.
    pub format: Option<Format>,
    /// Only requests of this volume (device id, volume id, `host_disk`, file name).
    pub volume: Option<String>,
    /// Count and skip malformed lines instead of stopping at the first.
    pub skip_bad: bool,
}

/// What reading a trace has met so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Lines read (every line, blank or not).
    pub lines: u64,
    /// Reads and writes yielded.
    pub records: u64,
    /// Malformed lines skipped (with `skip_bad`), and the first of them.
    pub skipped_bad: u64,
    pub first_bad: Option<String>,
    /// Requests of volumes other than the chosen one.
    pub other_volumes: u64,
    /// Requests that are neither reads nor writes (flush, trim, sync).
    pub non_data: u64,
}

/// Counts the bytes read from the file under the decompressor: progress through the trace.
struct Counting<R> {
    inner: R,
    bytes: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const READ_BUFFER_BYTES: usize = 1 << 20;

/// One line as read: its number (from 1), its text without the line ending (lossy if it
/// was not UTF-8), and whether it was UTF-8.
struct RawLine {
    number: u64,
    text: String,
    utf8: bool,
}

/// What a text file may start with to say it is UTF-8.
const UTF8_BOM: &[u8] = b"\xef\xbb\xbf";

/// A streaming reader of one trace: an iterator of its requests.
pub struct TraceReader {
    input: Box<dyn BufRead>,
    /// Lines read for detection, handed out before the rest.
    pending: VecDeque<RawLine>,
    line_number: u64,
    parser: Parser,
    format: Format,
    options: ReadOptions,
    stats: ReadStats,
    done: bool,
    buffer: Vec<u8>,
    bytes_read: Arc<AtomicU64>,
    file_bytes: Option<u64>,
}

impl TraceReader {
    /// Opens a trace file, gzip-compressed if its name ends in `.gz` or it starts with
    /// the gzip magic.
    pub fn open(path: &Path, options: ReadOptions) -> Result<Self> {
        let open_error = |error| TraceError::Open { path: path.to_path_buf(), error };
        let file = File::open(path).map_err(open_error)?;
        let file_bytes = file.metadata().map_err(open_error)?.len();
        let bytes_read = Arc::new(AtomicU64::new(0));
        let mut raw = BufReader::with_capacity(READ_BUFFER_BYTES, Counting { inner: file, bytes: bytes_read.clone() });
        let head = raw.fill_buf().map_err(open_error)?;
        let gzip = head.starts_with(&GZIP_MAGIC) || path.extension().is_some_and(|e| e == "gz");
        let input: Box<dyn BufRead> = if gzip {
            Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, flate2::bufread::MultiGzDecoder::new(raw)))
        } else {
            Box::new(raw)
        };
        let mut reader = Self::build(input, options, bytes_read)?;
        reader.file_bytes = Some(file_bytes);
        Ok(reader)
    }

    /// Reads a trace from `input` (uncompressed).
    pub fn from_reader(input: impl BufRead + 'static, options: ReadOptions) -> Result<Self> {
        Self::build(Box::new(input), options, Arc::new(AtomicU64::new(0)))
    }

    fn build(input: Box<dyn BufRead>, options: ReadOptions, bytes_read: Arc<AtomicU64>) -> Result<Self> {
        let mut reader = TraceReader {
            input,
            pending: VecDeque::new(),
            line_number: 0,
            parser: Parser::new(Format::Alibaba),
            format: Format::Alibaba,
            options,
            stats: ReadStats::default(),
            done: false,
            buffer: Vec::new(),
            bytes_read,
            file_bytes: None,
        };
        let format = match reader.options.format {
            Some(format) => format,
            None => {
                let mut sample = Vec::new();
                while sample.len() < detect::DETECT_LINES {
                    match reader.read_line()? {
                        Some(line) => {
                            if !line.text.trim().is_empty() {
                                sample.push((line.number, line.text.clone()));
                            }
                            reader.pending.push_back(line);
                        }
                        None => break,
                    }
                }
                detect::detect(&sample, reader.options.skip_bad)?
            }
        };
        reader.format = format;
        reader.parser = Parser::new(format);
        Ok(reader)
    }

    /// The format read (named or detected).
    pub fn format(&self) -> Format {
        self.format
    }

    pub fn stats(&self) -> &ReadStats {
        &self.stats
    }

    /// Bytes of the file read so far (compressed bytes for a gzip file), shared so that a
    /// progress display can follow it from elsewhere.
    pub fn bytes_read(&self) -> Arc<AtomicU64> {
        self.bytes_read.clone()
    }

    /// The file's size, when read from a file.
    pub fn file_bytes(&self) -> Option<u64> {
        self.file_bytes
    }

    /// The next line from the file with its number, without its line ending.
    fn read_line(&mut self) -> Result<Option<RawLine>> {
        self.buffer.clear();
        let line = self.line_number + 1;
        let n = self.input.read_until(b'\n', &mut self.buffer).map_err(|error| TraceError::Read { line, error })?;
        if n == 0 {
            return Ok(None);
        }
        self.line_number = line;
        while self.buffer.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            self.buffer.pop();
        }
        // A UTF-8 byte order mark (some editors and Windows tools write one) starts the
        // text, it is no part of its first line.
        if line == 1 && self.buffer.starts_with(UTF8_BOM) {
            self.buffer.drain(..UTF8_BOM.len());
        }
        let (text, utf8) = match std::str::from_utf8(&self.buffer) {
            Ok(text) => (text.to_string(), true),
            // Kept (lossily) for the error message; `next_record` rejects the line.
            Err(_) => (String::from_utf8_lossy(&self.buffer).into_owned(), false),
        };
        Ok(Some(RawLine { number: line, text, utf8 }))
    }

    fn next_record(&mut self) -> Result<Option<TraceRecord>> {
        loop {
            let next = match self.pending.pop_front() {
                Some(line) => Some(line),
                None => self.read_line()?,
            };
            let Some(RawLine { number, text: line, utf8 }) = next else {
                if self.stats.records == 0 {
                    let s = &self.stats;
                    return Err(TraceError::Empty {
                        lines: s.lines,
                        skipped_bad: s.skipped_bad,
                        other_volumes: s.other_volumes,
                        non_data: s.non_data,
                    });
                }
                return Ok(None);
            };
            self.stats.lines += 1;
            let parsed = if !utf8 {
                Err("the line is not text (invalid UTF-8)".to_string())
            } else if line.trim().is_empty() {
                Ok(Line::Ignored)
            } else {
                self.parser.parse(&line)
            };
            match parsed {
                Ok(Line::Request { record, volume }) => {
                    if self.options.volume.as_ref().is_some_and(|v| *v != volume) {
                        self.stats.other_volumes += 1;
                        continue;
                    }
                    self.stats.records += 1;
                    return Ok(Some(record));
                }
                Ok(Line::NonData) => self.stats.non_data += 1,
                Ok(Line::Ignored) => {}
                Err(reason) => {
                    let error = TraceError::malformed(number, reason, &line);
                    if !self.options.skip_bad {
                        return Err(error);
                    }
                    self.stats.skipped_bad += 1;
                    if self.stats.first_bad.is_none() {
                        self.stats.first_bad = Some(error.to_string());
                    }
                }
            }
        }
    }
}

impl Iterator for TraceReader {
    type Item = Result<TraceRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_record() {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }
}

/// The end of the furthest request (`offset + length`, in bytes) of a trace read with
/// `options`, in one streaming pass: the address range `--map scale` scales from.
pub fn address_span_bytes(path: &Path, options: ReadOptions) -> Result<u64> {
    let mut span = 0;
    for record in TraceReader::open(path, options)? {
        let r = record?;
        span = span.max(r.offset_bytes + r.length_bytes);
    }
    Ok(span)
}
