//! The engine thread's side of `zapraid scrub` (`Message::Scrub`): starting a scrub, or
//! changing the running one's rate, and when it started (for its rate in the status). The
//! scrub itself is the engine's (`Engine::start_scrub`).

use super::*;
use crate::run::message::ScrubRequest;

impl EngineLoop {
    /// Carries out a scrub request on the engine thread: what to tell the client.
    pub(super) fn scrub(&mut self, request: ScrubRequest) -> std::result::Result<(), String> {
        match request {
            ScrubRequest::Start { rate_bytes_per_s } => {
                self.engine.start_scrub(rate_bytes_per_s).map_err(|e| format!("cannot start a scrub: {e}"))?;
                self.scrub_started = Some(std::time::Instant::now());
                Ok(())
            }
            ScrubRequest::SetRate { rate_bytes_per_s } => {
                if self.engine.scrub_status().running.is_none() {
                    return Err("no scrub is running".to_string());
                }
                self.engine.set_scrub_rate(rate_bytes_per_s);
                Ok(())
            }
        }
    }
}
