//! Splitting a namespace into parts (`part`): each part an `NvmeDrive` of its own, with
//! an io_uring ring, flights, metadata buffers and completion queue of its own, over the
//! one open descriptor of the namespace (so its lock is ours while any part lives, and
//! no second open trips over it). Nothing is shared between parts but the descriptor,
//! which the kernel serves to several rings at once.

use super::*;
use crate::part::{spans_of, DrivePart};

impl NvmeDrive {
    /// Splits the namespace into one part per entry of `parts` ((first zone, zone count)
    /// in the namespace's numbering; in the order given), each a device of its own zones
    /// numbered from 0, with its own ring (so `notify_completions` is per part), that can
    /// be moved to a thread of its own. Refused with commands in flight and for parts
    /// outside the namespace or sharing a zone. The drive enforces its open and active
    /// zone limits over all parts together.
    pub fn split(self, parts: &[(u32, u32)]) -> Result<Vec<DrivePart<NvmeDrive>>> {
        let spans = spans_of(&self.geometry, parts)?;
        if self.in_flight() > 0 {
            let reason = format!("{} commands are in flight (split an idle drive)", self.in_flight());
            return Err(Error::CannotSplit { reason });
        }
        spans
            .into_iter()
            .map(|span| {
                let mut part = Self::with_ring(&self.path, Arc::clone(&self.file), self.nsid, self.geometry)?;
                part.interleaved = self.interleaved;
                Ok(DrivePart::new(part, span))
            })
            .collect()
    }
}
