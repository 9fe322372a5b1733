//! `zapraid scrub`: asks a running array to read and check every live block and each
//! stripe's parity, and to rewrite what it finds damaged (the engine's `scrub`). By
//! default it starts the scrub and returns (it runs in the background; `zapraid status`
//! follows it); `--wait` follows it to the end with a progress bar on a terminal and
//! prints the report. `--set-rate` changes a running scrub's rate limit.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use serde_json::Value;
use zapraid_server::control;

use crate::size::{format_bytes, parse_rate};
use crate::text::{answer_text, bar};

/// How often `--wait` asks the array how far the scrub got.
const POLL_INTERVAL_MS: u64 = 200;

#[derive(Args)]
pub struct ScrubArgs {
    /// The array's name.
    name: String,
    /// Read at most this much per second, so user I/O keeps its share of the drives: a
    /// size per second (100M, 100MiB/s, 1G) or unlimited (also 0), as `rebuild-rate`
    /// reads it; without it the scrub reads as fast as the drives go.
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    rate: Option<u64>,
    /// Follow the scrub until it ends and print what it found and repaired; exits with an
    /// error if blocks could not be repaired.
    #[arg(long)]
    wait: bool,
    /// Change the running scrub's rate limit instead of starting one (a rate as for
    /// --rate; unlimited or 0: no limit).
    #[arg(long, value_name = "RATE", value_parser = parse_rate, conflicts_with_all = ["rate", "wait"])]
    set_rate: Option<u64>,
}

pub fn run_scrub(args: ScrubArgs) -> Result<()> {
    let name = &args.name;
    if let Some(rate) = args.set_rate {
        let answer = control::ask(name, &format!("scrub rate {rate}"))?;
        if let Some(e) = answer.get("error") {
            bail!("array \"{name}\": {}", answer_text(e));
        }
        println!("array \"{name}\": scrub rate limit {}", rate_text(Some(rate)));
        return Ok(());
    }
    let last_before = control::ask(name, "status")?["scrub"]["last"].clone();
    let answer = control::ask(name, &format!("scrub {}", args.rate.unwrap_or(0)))?;
    if let Some(e) = answer.get("error") {
        bail!("array \"{name}\": {}", answer_text(e));
    }
    if !args.wait {
        println!(
            "array \"{name}\": scrub started ({}); `zapraid status {name}` shows its progress",
            rate_text(args.rate)
        );
        return Ok(());
    }
    let bar = bar(100, "scrub");
    let report = loop {
        std::thread::sleep(Duration::from_millis(POLL_INTERVAL_MS));
        let status = control::ask(name, "status")?;
        if let Some(e) = status.get("error") {
            bail!("array \"{name}\": {}", answer_text(e));
        }
        let scrub = &status["scrub"];
        if let Some(running) = scrub["running"].as_object() {
            bar.set_position(running["percent_done"].as_f64().unwrap_or(0.0) as u64);
            continue;
        }
        // Finished: the report is the last one, once its rewrites are persisted.
        if scrub["last"] != last_before && scrub["repairs_in_flight"].as_u64() == Some(0) {
            break scrub["last"].clone();
        }
    };
    bar.finish_and_clear();
    println!("array \"{name}\": {}", report_text(&report));
    let unrecoverable = report["blocks_unrecoverable"].as_u64().unwrap_or(0);
    if unrecoverable > 0 {
        bail!("array \"{name}\": {unrecoverable} live blocks are damaged beyond what parity covers");
    }
    Ok(())
}

fn rate_text(rate: Option<u64>) -> String {
    match rate.filter(|r| *r > 0) {
        Some(rate) => format!("at most {}/s", format_bytes(rate)),
        None => "no rate limit".to_string(),
    }
}

/// A scrub report in one line: what was checked, found and done.
pub fn report_text(r: &Value) -> String {
    let n = |field: &str| r[field].as_u64().unwrap_or(0);
    let mut text = format!(
        "scrub checked {} segments, {} stripes, {} blocks ({} read): {} damaged blocks, {} parity mismatches, \
         {} live blocks rewritten, {} unrecoverable",
        n("segments_checked"),
        n("stripes_checked"),
        n("blocks_checked"),
        format_bytes(n("bytes_read")),
        n("blocks_damaged"),
        n("parity_mismatches"),
        n("blocks_rewritten"),
        n("blocks_unrecoverable"),
    );
    if n("stale_blocks_damaged") > 0 {
        text += &format!(" ({} more damaged in blocks no longer in use)", n("stale_blocks_damaged"));
    }
    text
}

/// The running scrub in one line, or `None`.
pub fn progress_line(r: &Value) -> Option<String> {
    let percent = r["percent_done"].as_f64()?;
    let mut line = format!(
        "scrub: {percent:.1}% ({} of {} segments), {} read, {} damaged, {} rewritten",
        r["segments_checked"].as_u64().unwrap_or(0),
        r["segments_checked"].as_u64().unwrap_or(0) + r["segments_left"].as_u64().unwrap_or(0),
        format_bytes(r["bytes_read"].as_u64().unwrap_or(0)),
        r["blocks_damaged"].as_u64().unwrap_or(0),
        r["blocks_rewritten"].as_u64().unwrap_or(0),
    );
    if let Some(rate) = r["rate_mib_s"].as_f64() {
        line += &format!(", {rate:.1} MiB/s");
    }
    if let Some(eta) = r["eta_s"].as_f64() {
        line += &format!(", ETA {eta:.0} s");
    }
    if let Some(limit) = r["rate_limit_bytes_per_s"].as_u64() {
        line += &format!(" (limit {}/s)", format_bytes(limit));
    }
    Some(line)
}
