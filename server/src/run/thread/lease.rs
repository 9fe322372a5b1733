//! The hand-over of what a thread owns (its engine loop, `hosted`) to another thread that
//! asks for it, and back: the owner looks at `wanted` at each turn, hands the value over
//! and waits; the borrower holds it as a `Lent`, which goes back when dropped (also when
//! the borrower unwinds).
//!
//! Invariants: the value is in exactly one place (the owner, the hand-over slot, or one
//! borrower); an owner that will not lend says so (`set_lendable`, `lend`'s `refuse`) and
//! the borrower gets None at once; and a borrower that gave up waiting never leaves the
//! owner waiting for a value that never comes back (`wanted` is read and cleared under the
//! slot's lock).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};

use crate::run::wake::Doorbell;

/// Where the value is on its way between its owner and a borrower.
enum Handover<T> {
    Nothing,
    /// The owner will not lend.
    Refused,
    Lent(Box<T>),
}

/// Whether the owner lends at all (`Lease::set_lendable`).
const LENDABLE_UNKNOWN: u8 = 0;
const LENDABLE: u8 = 1;
const NOT_LENDABLE: u8 = 2;

struct Shared<T> {
    wanted: AtomicBool,
    lendable: AtomicU8,
    slot: Mutex<Handover<T>>,
    offered: Condvar,
    back_tx: Sender<Box<T>>,
    back_rx: Receiver<Box<T>>,
    /// The owner's doorbell.
    bell: Arc<Doorbell>,
}

/// A way to borrow what one thread owns (cloned for whichever thread may borrow it).
pub struct Lease<T>(Arc<Shared<T>>);

impl<T> Clone for Lease<T> {
    fn clone(&self) -> Self {
        Lease(self.0.clone())
    }
}

impl<T> Lease<T> {
    pub fn new(bell: Arc<Doorbell>) -> Self {
        let (back_tx, back_rx) = crossbeam_channel::bounded(1);
        Lease(Arc::new(Shared {
            wanted: AtomicBool::new(false),
            lendable: AtomicU8::new(LENDABLE_UNKNOWN),
            slot: Mutex::new(Handover::Nothing),
            offered: Condvar::new(),
            back_tx,
            back_rx,
            bell,
        }))
    }

    /// Asks the owner for its value, waiting at most `wait`; `poke` wakes the owner
    /// wherever it sleeps. None when it will not lend, has ended, or did not answer in
    /// time.
    pub fn borrow(&self, wait: Duration, poke: impl FnOnce()) -> Option<Lent<T>> {
        let shared = &self.0;
        let slot = shared.slot.lock().ok()?;
        shared.wanted.store(true, Ordering::SeqCst);
        poke();
        let (mut slot, _) = shared
            .offered
            .wait_timeout_while(slot, wait, |s| {
                matches!(s, Handover::Nothing) && shared.lendable.load(Ordering::SeqCst) != NOT_LENDABLE
            })
            .ok()?;
        shared.wanted.store(false, Ordering::SeqCst);
        match std::mem::replace(&mut *slot, Handover::Nothing) {
            Handover::Lent(value) => Some(Lent { value: Some(value), lease: self.clone() }),
            Handover::Refused | Handover::Nothing => None,
        }
    }

    /// The owner's doorbell.
    pub fn bell(&self) -> &Arc<Doorbell> {
        &self.0.bell
    }

    /// For the owner, once it knows whether it lends at all (an owner that blocks where
    /// the doorbell does not reach would never see a borrower).
    pub fn set_lendable(&self, lendable: bool) {
        let shared = &self.0;
        if let Ok(_slot) = shared.slot.lock() {
            shared.lendable.store(if lendable { LENDABLE } else { NOT_LENDABLE }, Ordering::SeqCst);
            shared.offered.notify_all();
        }
    }

    /// For the owner, at each turn: whether a borrower waits.
    pub fn wanted(&self) -> bool {
        self.0.wanted.load(Ordering::Relaxed)
    }

    /// For the owner: hands `value` to the waiting borrower (or refuses, if `refuse`)
    /// and waits until it comes back (a `Lent` goes back when dropped, unwinding
    /// included). None only if the slot's lock was poisoned (a thread panicked holding
    /// it): `value` is dropped then, and with it what it owns.
    pub fn lend(&self, value: Box<T>, refuse: bool) -> Option<Box<T>> {
        let shared = &self.0;
        {
            let mut slot = shared.slot.lock().ok()?;
            if !shared.wanted.swap(false, Ordering::SeqCst) {
                return Some(value); // the borrower gave up waiting: nobody to lend to
            }
            if refuse {
                *slot = Handover::Refused;
                shared.offered.notify_all();
                return Some(value);
            }
            *slot = Handover::Lent(value);
            shared.offered.notify_all();
        }
        shared.back_rx.recv().ok()
    }
}

/// A borrowed value; it goes back to its owner when dropped.
pub struct Lent<T> {
    value: Option<Box<T>>,
    lease: Lease<T>,
}

impl<T> Lent<T> {
    pub fn get(&self) -> &T {
        self.value.as_ref().expect("a lent value is there until dropped")
    }

    pub fn get_mut(&mut self) -> &mut T {
        self.value.as_mut().expect("a lent value is there until dropped")
    }

    /// The owner's doorbell.
    pub fn bell(&self) -> &Arc<Doorbell> {
        self.lease.bell()
    }
}

impl<T> Drop for Lent<T> {
    fn drop(&mut self) {
        if let Some(value) = self.value.take() {
            // The owner waits for it on the channel; if it has ended, the value is
            // dropped here.
            let _ = self.lease.0.back_tx.send(value);
        }
    }
}
