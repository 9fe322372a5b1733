//! Writes taken and not yet answered, in the order they were submitted, for flushes: a
//! flush completes once every write submitted before it is answered.
//!
//! Submission order is a sequence number given when a write is taken, not its request id
//! (ids are the caller's); the write keeps its number (`WriteInFlight`, a parked request)
//! and gives it back when answered, so nothing here is looked up by id. A write answered
//! out of order leaves a hole that closes when every earlier one is answered. Invariants:
//! `done` covers sequence numbers from `front_seq` to `next_seq`, its front is always an
//! unanswered write, and each number is answered once. In steady state nothing here
//! allocates (the ring reuses its room).

use std::collections::VecDeque;

#[derive(Default)]
pub(in crate::engine) struct OutstandingWrites {
    /// Per sequence number from `front_seq`: whether that write was answered.
    done: VecDeque<bool>,
    front_seq: u64,
    next_seq: u64,
}

impl OutstandingWrites {
    /// A write taken: its sequence number, to give back to `answered`.
    pub(in crate::engine) fn taken(&mut self) -> u64 {
        self.done.push_back(false);
        self.next_seq += 1;
        self.next_seq - 1
    }

    /// The write with sequence number `seq` was answered.
    pub(in crate::engine) fn answered(&mut self, seq: u64) {
        debug_assert!((self.front_seq..self.next_seq).contains(&seq), "write {seq} is outstanding");
        let Some(slot) = seq.checked_sub(self.front_seq).and_then(|i| self.done.get_mut(i as usize)) else {
            return;
        };
        debug_assert!(!*slot, "write {seq} answered once");
        *slot = true;
        while self.done.front() == Some(&true) {
            self.done.pop_front();
            self.front_seq += 1;
        }
        debug_assert_eq!(self.done.len() as u64, self.next_seq - self.front_seq);
        debug_assert!(self.done.front() != Some(&true));
    }

    /// What a flush submitted now waits for: every write up to this sequence number
    /// (None: none is outstanding).
    pub(in crate::engine) fn last_submitted(&self) -> Option<u64> {
        (!self.done.is_empty()).then(|| self.next_seq - 1)
    }

    /// Whether every write up to sequence number `seq` is answered.
    pub(in crate::engine) fn answered_through(&self, seq: u64) -> bool {
        self.done.is_empty() || self.front_seq > seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flush_waits_for_every_earlier_write_and_no_later_one() {
        let mut w = OutstandingWrites::default();
        assert_eq!(w.last_submitted(), None);
        let [a, b, c] = [w.taken(), w.taken(), w.taken()];
        let flush = w.last_submitted().unwrap();
        let d = w.taken(); // after the flush
        w.answered(c);
        w.answered(a);
        assert!(!w.answered_through(flush), "write b is still out");
        w.answered(b);
        assert!(w.answered_through(flush), "write d came after the flush");
        assert!(!w.answered_through(w.last_submitted().unwrap()));
        w.answered(d);
        assert_eq!(w.last_submitted(), None);
        assert!(w.answered_through(flush));
    }
}
