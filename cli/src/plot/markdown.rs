//! `report.md` of `zapraid bench --plot DIR`: for each experiment run, its heading, the
//! command that runs it alone, its figures embedded, and the tables it printed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Name of the report in the plot directory.
pub const REPORT_FILE: &str = "report.md";

/// One experiment's part of the report.
#[derive(Clone, Debug)]
pub struct Section {
    pub title: String,
    /// The command that runs this experiment alone.
    pub command: String,
    /// File names of its figures, relative to the report.
    pub figures: Vec<String>,
    /// What it printed (tables and findings).
    pub text: String,
}

/// Writes `dir/report.md`: `preamble` (a paragraph), then every section.
pub fn write_report(dir: &Path, preamble: &str, sections: &[Section]) -> Result<PathBuf> {
    let mut md = format!("# zapraid bench: the ZapRAID paper's experiments in simulation\n\n{preamble}\n");
    for s in sections {
        let _ = write!(md, "\n## {}\n\nRun alone: `{}`\n\n", s.title, s.command);
        for f in &s.figures {
            let _ = write!(md, "![{}]({f})\n\n", s.title);
        }
        let _ = write!(md, "```text\n{}\n```\n", s.text.trim_end());
    }
    let path = dir.join(REPORT_FILE);
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
