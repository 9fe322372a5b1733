//! Writes taken and not yet answered, in the order they were submitted, for flushes: a
//! flush completes once every write submitted before it is answered.
//!
//! Submission order is a sequence number given when a write is taken, not its request id
//! (ids are the caller's). A write answered out of order leaves a hole that closes when
//! every earlier one is answered. Invariants: `done` covers sequence numbers from
//! `front_seq` to `next_seq`, its front is always an unanswered write, and `seq_of` holds
//! exactly the unanswered writes. In steady state nothing here allocates (the ring and the
//! map reuse their room), unlike a B-tree of ids, whose nodes come and go as ids advance.

use std::collections::VecDeque;

use super::{HashMap, RequestId};

#[derive(Default)]
pub(super) struct OutstandingWrites {
    seq_of: HashMap<RequestId, u64>,
    /// Per sequence number from `front_seq`: whether that write was answered.
    done: VecDeque<bool>,
    front_seq: u64,
    next_seq: u64,
}

impl OutstandingWrites {
    /// A write taken (again: no change).
    pub(super) fn insert(&mut self, id: RequestId) {
        if self.seq_of.contains_key(&id) {
            return;
        }
        self.seq_of.insert(id, self.next_seq);
        self.done.push_back(false);
        self.next_seq += 1;
    }

    /// A write answered (or never taken: no change).
    pub(super) fn remove(&mut self, id: RequestId) {
        let Some(seq) = self.seq_of.remove(&id) else { return };
        self.done[(seq - self.front_seq) as usize] = true;
        while self.done.front() == Some(&true) {
            self.done.pop_front();
            self.front_seq += 1;
        }
        debug_assert_eq!(self.done.len() as u64, self.next_seq - self.front_seq);
        debug_assert!(self.done.front() != Some(&true));
    }

    /// What a flush submitted now waits for: every write up to this sequence number
    /// (None: none is outstanding).
    pub(super) fn last_submitted(&self) -> Option<u64> {
        (!self.seq_of.is_empty()).then(|| self.next_seq - 1)
    }

    /// Whether every write up to sequence number `seq` is answered.
    pub(super) fn answered_through(&self, seq: u64) -> bool {
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
        for id in [30, 10, 20] {
            w.insert(id);
        }
        w.insert(10); // taken again: nothing changes
        let flush = w.last_submitted().unwrap();
        w.insert(5); // after the flush
        w.remove(20);
        w.remove(30);
        assert!(!w.answered_through(flush), "write 10 is still out");
        w.remove(10);
        assert!(w.answered_through(flush), "write 5 came after the flush");
        assert!(!w.answered_through(w.last_submitted().unwrap()));
        w.remove(5);
        w.remove(99); // never taken
        assert_eq!(w.last_submitted(), None);
        assert!(w.answered_through(flush));
    }
}
