//! Wake-ups between threads through Linux eventfds: a thread that sleeps on one file
//! descriptor (in `poll`, or as a read on its io_uring) is woken by any number of
//! producers. The counter is the invariant that makes it race-free: a signal that comes
//! after the sleeper's last look at its queues leaves the counter non-zero, so the next
//! sleep returns at once instead of missing it.
//!
//! A `Doorbell` spares the producers that signal while the sleeper is awake: the
//! sleeper says it is about to sleep, and producers signal only then. Each signal is a
//! system call that takes the eventfd's spinlock in the kernel, so without it every
//! producer (every ublk queue, once per request) would contend on that lock even while
//! the sleeper is busy and will look at its queues anyway.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::time::Duration;

/// An eventfd, closed when dropped.
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A blocking eventfd: io_uring reads of it (the ublk queues sleep that way) wait for a
    /// signal, where a non-blocking one would fail them with EAGAIN.
    pub fn new() -> io::Result<Self> {
        // SAFETY: eventfd takes no pointers.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by eventfd and nothing else owns it.
        Ok(EventFd { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Wakes the sleeper (adds one to the counter).
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64. It fails only when the counter would
        // overflow, and then the sleeper is due to wake anyway.
        unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Sleeps until signalled or `timeout` passes, then resets the counter. Returns
    /// whether it was signalled. For an eventfd with one reader (the read after `poll`
    /// said readable cannot block then).
    pub fn wait(&self, timeout: Duration) -> bool {
        let mut pollfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let timeout_ms = timeout.as_millis().clamp(0, i32::MAX as u128) as i32;
        // SAFETY: one live pollfd.
        let ready = unsafe { libc::poll(&mut pollfd, 1, timeout_ms) };
        if ready <= 0 {
            return false;
        }
        let mut counter = 0u64;
        // SAFETY: reads 8 bytes into a live u64.
        unsafe { libc::read(self.fd.as_raw_fd(), (&mut counter as *mut u64).cast(), 8) };
        true
    }

    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// An eventfd for one sleeper and many producers, signalled only while the sleeper sleeps
/// or is about to (see the module doc).
///
/// Why no wake-up is lost: a producer publishes its work (an atomic write, such as a
/// channel send), then, after a sequentially consistent fence, reads `sleeping`; the
/// sleeper sets `sleeping`, then, after a fence, looks for work. The fences are ordered one
/// way or the other: either the sleeper's look comes after the producer's fence and sees
/// the work, or the producer's read comes after the sleeper's fence and sees `sleeping`,
/// and signals. Other signallers (drives' io_uring completions) may signal the eventfd
/// directly at any time.
pub struct Doorbell {
    fd: EventFd,
    sleeping: AtomicBool,
}

impl Doorbell {
    pub fn new() -> io::Result<Self> {
        Ok(Doorbell { fd: EventFd::new()?, sleeping: AtomicBool::new(false) })
    }

    /// After publishing work: wakes the sleeper if it sleeps or is about to.
    pub fn ring(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            self.fd.signal();
        }
    }

    /// Wakes the sleeper whether it sleeps or not (for what `has_work` cannot see, such as
    /// a channel whose last sender is gone).
    pub fn signal(&self) {
        self.fd.signal();
    }

    /// Sleeps until rung (or signalled) or `timeout` passes, unless `has_work`, asked once
    /// the sleep is announced, finds work. Returns whether it was woken or found work.
    /// For the one sleeper only.
    pub fn sleep(&self, timeout: Duration, has_work: impl FnOnce() -> bool) -> bool {
        let woken = self.about_to_sleep(has_work) || self.fd.wait(timeout);
        self.awake();
        woken
    }

    /// For a sleeper that sleeps elsewhere, in `io_uring_enter` with a read of `raw()`
    /// armed (a ublk queue): announces the sleep, then asks `has_work`. Returns whether it
    /// found work; then the sleeper is awake again and must not sleep.
    pub fn about_to_sleep(&self, has_work: impl FnOnce() -> bool) -> bool {
        self.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let found = has_work();
        if found {
            self.awake();
        }
        found
    }

    /// The sleeper is awake again (woken by its armed read, or by anything else): producers
    /// stop signalling until the next `about_to_sleep`.
    pub fn awake(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
    }

    /// The eventfd, for signallers outside this process's threads (io_uring completions).
    pub fn raw(&self) -> RawFd {
        self.fd.raw()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_while_the_sleeper_is_awake_makes_no_signal() {
        let bell = Doorbell::new().unwrap();
        bell.ring();
        // Nothing was signalled: the eventfd's counter is still zero.
        assert!(!bell.fd.wait(Duration::ZERO));
        assert!(!bell.sleep(Duration::ZERO, || false));
        assert!(bell.sleep(Duration::from_secs(30), || true));
        bell.signal();
        assert!(bell.sleep(Duration::from_secs(30), || false));
    }

    #[test]
    fn no_message_is_left_without_a_wake_up() {
        // A timed-out sleep with messages still to come would be a lost wake-up: the
        // producer rings after every send, so the sleeper must be woken (or find the
        // message) long before the timeout.
        const MESSAGES: u32 = 20_000;
        let bell = std::sync::Arc::new(Doorbell::new().unwrap());
        let (tx, rx) = crossbeam_channel::bounded(16);
        let producer_bell = bell.clone();
        let producer = std::thread::spawn(move || {
            for i in 0..MESSAGES {
                tx.send(i).unwrap();
                producer_bell.ring();
            }
        });
        let mut received = 0;
        while received < MESSAGES {
            while rx.try_recv().is_ok() {
                received += 1;
            }
            if received < MESSAGES {
                assert!(bell.sleep(Duration::from_secs(60), || !rx.is_empty()), "lost wake-up at {received}");
            }
        }
        producer.join().unwrap();
    }

    #[test]
    fn a_sleeper_elsewhere_is_signalled_only_once_it_announced_its_sleep() {
        let bell = Doorbell::new().unwrap();
        bell.ring();
        assert!(!bell.fd.wait(Duration::ZERO), "awake: no signal");
        assert!(bell.about_to_sleep(|| true), "work found: no sleep");
        bell.ring();
        assert!(!bell.fd.wait(Duration::ZERO), "awake again after finding work");
        assert!(!bell.about_to_sleep(|| false));
        bell.ring();
        assert!(bell.fd.wait(Duration::ZERO), "announced: signalled");
        bell.awake();
        bell.ring();
        assert!(!bell.fd.wait(Duration::ZERO));
    }

    #[test]
    fn a_signal_before_the_wait_is_not_lost() {
        let e = EventFd::new().unwrap();
        assert!(!e.wait(Duration::ZERO));
        e.signal();
        e.signal();
        assert!(e.wait(Duration::from_secs(5)));
        // Both signals were taken by the one wait: the counter is reset.
        assert!(!e.wait(Duration::ZERO));
    }

    #[test]
    fn a_signal_from_another_thread_wakes_the_sleeper() {
        let e = std::sync::Arc::new(EventFd::new().unwrap());
        let signaller = e.clone();
        let t = std::thread::spawn(move || signaller.signal());
        assert!(e.wait(Duration::from_secs(30)));
        t.join().unwrap();
    }
}
