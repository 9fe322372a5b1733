//! `zapraid scrub` on a running array: the control socket's `scrub` command (start one,
//! with an optional read rate limit, or change the running one's rate) and the scrub part
//! of the status document. The scrub itself is the engine's (`Engine::start_scrub`); this
//! module only carries the request to the engine thread and the report back.
//!
//! Rates on the socket are bytes per second as a plain number, `0` for no limit.

use crate::run::message::{EngineSender, Message, ScrubRequest};
use crate::run::status::ArrayStatus;

/// `scrub [RATE]` starts a scrub; `scrub rate RATE` changes the running one's rate.
pub fn control(engine: &EngineSender, words: &[&str]) -> serde_json::Value {
    let parse = |word: &str| word.parse::<u64>().map(|r| (r > 0).then_some(r));
    let request = match words {
        [] => ScrubRequest::Start { rate_bytes_per_s: None },
        ["rate", rate] => match parse(rate) {
            Ok(rate_bytes_per_s) => ScrubRequest::SetRate { rate_bytes_per_s },
            Err(_) => return error_json(&format!("\"{rate}\" is not a rate in bytes per second")),
        },
        [rate] => match parse(rate) {
            Ok(rate_bytes_per_s) => ScrubRequest::Start { rate_bytes_per_s },
            Err(_) => return error_json(&format!("\"{rate}\" is not a rate in bytes per second")),
        },
        _ => return error_json("scrub takes a rate in bytes per second, or `rate` and one"),
    };
    let (done, result) = crossbeam_channel::bounded(1);
    match engine.send(Message::Scrub { request, done }).ok().and_then(|()| result.recv().ok()) {
        Some(Ok(())) => serde_json::json!({ "scrub": "started" }),
        Some(Err(e)) => error_json(&e),
        None => error_json("the engine has stopped"),
    }
}

fn error_json(reason: &str) -> serde_json::Value {
    serde_json::json!({ "error": reason })
}

/// The scrub part of the status document: the running scrub's progress (% of segments,
/// MiB/s averaged since it started on this server, ETA), the last one's report, and the
/// repairs frontend reads scheduled.
pub fn status_json(s: &ArrayStatus) -> serde_json::Value {
    let scrub = &s.engine.scrub;
    let report = |r: &zapraid_engine::ScrubReport| {
        serde_json::json!({
            "segments_checked": r.segments_checked,
            "segments_left": r.segments_left,
            "stripes_checked": r.stripes_checked,
            "blocks_checked": r.blocks_checked,
            "bytes_read": r.bytes_read,
            "blocks_damaged": r.blocks_damaged,
            "parity_mismatches": r.parity_mismatches,
            "blocks_rewritten": r.blocks_rewritten,
            "blocks_unrecoverable": r.blocks_unrecoverable,
            "stale_blocks_damaged": r.stale_blocks_damaged,
            // Read again after a running checkpoint paused the scrub mid-read.
            "stripes_read_again": r.stripes_read_again,
        })
    };
    let running = scrub.running.map(|r| {
        let total = r.segments_checked + r.segments_left;
        let percent = if total == 0 { 100.0 } else { r.segments_checked as f64 * 100.0 / total as f64 };
        let elapsed_s = s.scrub_elapsed_s.unwrap_or(0.0);
        let rate_mib_s = (elapsed_s > 0.0).then(|| r.bytes_read as f64 / (1024.0 * 1024.0) / elapsed_s);
        let eta_s = (r.segments_checked > 0).then(|| elapsed_s / r.segments_checked as f64 * r.segments_left as f64);
        let mut json = report(&r);
        json["percent_done"] = percent.into();
        json["elapsed_s"] = elapsed_s.into();
        json["rate_mib_s"] = rate_mib_s.into();
        json["eta_s"] = eta_s.into();
        json["rate_limit_bytes_per_s"] = scrub.rate_bytes_per_s.into();
        json
    });
    serde_json::json!({
        "running": running,
        "last": scrub.last.as_ref().map(report),
        "read_repairs_scheduled": scrub.read_repairs_scheduled,
        "read_repairs_done": scrub.read_repairs_done,
        "repairs_in_flight": scrub.repairs_in_flight,
    })
}
