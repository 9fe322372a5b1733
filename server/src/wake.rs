//! Wake-ups between threads through Linux eventfds: a thread that sleeps on one file
//! descriptor (in `poll`, or as a read on its io_uring) is woken by any number of
//! producers. The counter is the invariant that makes it race-free: a signal that comes
//! after the sleeper's last look at its queues leaves the counter non-zero, so the next
//! sleep returns at once instead of missing it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
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

#[cfg(test)]
mod tests {
    use super::*;

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
