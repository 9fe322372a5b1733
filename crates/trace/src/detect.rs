//! Which format a trace is in, from its first lines: an fio iolog by its header; the CSV
//! formats by which of them parses every sampled line (with `--skip-bad`, the most lines).
//! More than one candidate, or lines that fit different formats, is an `Ambiguous`
//! error; lines that fit none, `Unknown`. Detection never guesses.

use crate::error::{Result, TraceError};
use crate::{alibaba, fio, msr, tencent, Format};

/// Non-blank lines sampled for detection.
pub const DETECT_LINES: usize = 16;

/// The CSV formats, in the order they are tried and named.
const CSV_FORMATS: [Format; 3] = [Format::Alibaba, Format::Tencent, Format::Msr];

fn parse_csv(format: Format, line: &str) -> std::result::Result<(), String> {
    match format {
        Format::Alibaba => alibaba::parse(line),
        Format::Tencent => tencent::parse(line),
        Format::Msr => msr::parse(line),
        Format::Fio => unreachable!("fio is detected by its header"),
    }
    .map(|_| ())
}

/// The format of a trace whose first non-blank lines are `lines` (numbered from 1 in the
/// file as `(line_number, content)`).
pub fn detect(lines: &[(u64, String)], skip_bad: bool) -> Result<Format> {
    let Some((_, first)) = lines.first() else {
        return Err(TraceError::Empty { lines: 0, skipped_bad: 0, other_volumes: 0, non_data: 0 });
    };
    if fio::is_header(first) {
        return Ok(Format::Fio);
    }
    let fits: Vec<Vec<bool>> =
        lines.iter().map(|(_, line)| CSV_FORMATS.iter().map(|f| parse_csv(*f, line).is_ok()).collect()).collect();
    let parsed = |i: usize| fits.iter().filter(|f| f[i]).count();
    let counts: Vec<usize> = (0..CSV_FORMATS.len()).map(parsed).collect();
    let best = counts.iter().copied().max().unwrap_or(0);
    let needed = if skip_bad { best.max(1) } else { lines.len() };
    let candidates: Vec<Format> =
        CSV_FORMATS.iter().zip(&counts).filter(|(_, n)| **n >= needed).map(|(f, _)| *f).collect();
    match candidates.as_slice() {
        [one] => Ok(*one),
        [] => {
            if let Some(i) = fits.iter().position(|f| !f.contains(&true)) {
                let (number, line) = &lines[i];
                let reasons: Vec<String> = CSV_FORMATS
                    .iter()
                    .map(|f| format!("{}: {}", f.name(), parse_csv(*f, line).err().unwrap_or_default()))
                    .collect();
                let shown = crate::error::shown(line);
                Err(TraceError::Unknown {
                    reason: format!(
                        "line {number} ({shown:?}) is in none of the formats ({}), nor an fio iolog header",
                        reasons.join("; ")
                    ),
                })
            } else {
                let looks: Vec<String> = lines
                    .iter()
                    .zip(&fits)
                    .map(|((n, _), f)| {
                        let names: Vec<&str> =
                            CSV_FORMATS.iter().zip(f).filter(|(_, ok)| **ok).map(|(f, _)| f.name()).collect();
                        format!("line {n}: {}", names.join(" or "))
                    })
                    .collect();
                Err(TraceError::Ambiguous { reason: format!("its lines fit different formats ({})", looks.join(", ")) })
            }
        }
        many => {
            let names: Vec<&str> = many.iter().map(|f| f.name()).collect();
            Err(TraceError::Ambiguous {
                reason: format!("the first {} lines fit {} alike", lines.len(), names.join(" and ")),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(lines: &[&str]) -> Vec<(u64, String)> {
        lines.iter().enumerate().map(|(i, l)| (i as u64 + 1, l.to_string())).collect()
    }

    #[test]
    fn detects_each_format() {
        let cases = [
            (vec!["0,R,126703661056,4096,1577808000000046", "1,W,19496058880,77824,1577808000000426"], Format::Alibaba),
            (vec!["1538323200,2048,16,1,1063", "1538323201,0,8,0,7"], Format::Tencent),
            (vec!["128166372003061629,hm,1,Read,3154152960,32768,10978"], Format::Msr),
            (vec![fio::V3_HEADER, "0 f add"], Format::Fio),
            (vec![fio::V2_HEADER], Format::Fio),
        ];
        for (lines, format) in cases {
            assert_eq!(detect(&numbered(&lines), false).unwrap(), format, "{lines:?}");
        }
    }

    #[test]
    fn mixed_formats_are_ambiguous() {
        let lines = numbered(&["0,R,126703661056,4096,1577808000000046", "1538323200,2048,16,1,1063"]);
        let error = detect(&lines, false).unwrap_err().to_string();
        assert!(error.contains("cannot tell the trace's format"), "{error}");
        assert!(error.contains("line 1: alibaba") && error.contains("line 2: tencent"), "{error}");
    }

    #[test]
    fn unknown_lines_are_named() {
        let error = detect(&numbered(&["hello world"]), false).unwrap_err().to_string();
        assert!(error.contains("line 1") && error.contains("hello world"), "{error}");
    }

    #[test]
    fn skip_bad_takes_the_format_most_lines_fit() {
        let lines = numbered(&["garbage", "0,R,126703661056,4096,1577808000000046"]);
        assert!(detect(&lines, false).is_err());
        assert_eq!(detect(&lines, true).unwrap(), Format::Alibaba);
    }
}
