//! A drive file mapped into memory (`MAP_SHARED`, from offset 0), written by copying.
//!
//! Writes through a shared mapping land in the page cache as `pwrite`'s do: they outlive
//! the process (a kill -9 loses none) and reach the medium when `pwrite`'s would. The
//! parts of a split drive share one mapping and write disjoint byte ranges only.
//!
//! A store into a page the file system cannot back (a hole in a full file system) would
//! raise SIGBUS, so a range is written only once `populate` has succeeded on it: the
//! kernel then allocates every page of it, or says why not as an error. `write` checks
//! bounds with assertions: callers compute offsets from the validated layout.

use std::fs::File;
use std::os::fd::AsRawFd;

/// What `populate` found.
#[derive(Debug)]
pub(crate) enum Populate {
    /// Every page of the range is backed: writes to it cannot fault.
    Done,
    /// The kernel cannot populate ranges (before Linux 5.14) or not this file's.
    Unsupported,
    /// The file system could not back the range (no space, no memory).
    Failed(std::io::Error),
}

/// A mapped byte range of a file, from offset 0. Unmapped on drop.
pub(crate) struct Mapping {
    base: *mut u8,
    len_bytes: usize,
    page_bytes: usize,
}

// SAFETY: the mapping is plain memory owned by this value; every write is to a range that
// exactly one part of a split drive owns (its zones' blocks, metadata and records), made
// by that part's thread, and no part reads through the mapping.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the first `len_bytes` bytes of `file` (open for reading and writing); None
    /// where the file cannot be mapped (the caller writes with `pwrite` instead).
    pub(crate) fn new(file: &File, len_bytes: u64) -> Option<Self> {
        let len_bytes = usize::try_from(len_bytes).ok().filter(|len| *len > 0)?;
        // SAFETY: sysconf has no preconditions.
        let page_bytes = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
        if !page_bytes.is_power_of_two() {
            return None;
        }
        // SAFETY: a new shared mapping of an open file; the kernel picks the address and
        // nothing else refers to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        (base != libc::MAP_FAILED).then_some(Mapping { base: base.cast(), len_bytes, page_bytes })
    }

    /// Has the kernel back every page of `[offset, offset + len_bytes)` (widened to whole
    /// pages, cut at the mapping's end) for writing. The pages' contents do not change.
    pub(crate) fn populate(&self, offset: u64, len_bytes: u64) -> Populate {
        let Ok(start) = usize::try_from(offset) else { return Populate::Unsupported };
        let end = start.saturating_add(usize::try_from(len_bytes).unwrap_or(usize::MAX)).min(self.len_bytes);
        let start = start & !(self.page_bytes - 1);
        if start >= end {
            return Populate::Done;
        }
        // SAFETY: the range lies within this mapping and starts on a page boundary;
        // populating neither moves nor changes the mapping.
        let result = unsafe { libc::madvise(self.base.add(start).cast(), end - start, libc::MADV_POPULATE_WRITE) };
        if result == 0 {
            return Populate::Done;
        }
        let error = std::io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINVAL) | Some(libc::EPERM) | Some(libc::ENOSYS) => Populate::Unsupported,
            _ => Populate::Failed(error),
        }
    }

    /// Copies `data` to `offset`, a range populated earlier.
    pub(crate) fn write(&self, offset: u64, data: &[u8]) {
        let start = usize::try_from(offset).expect("offsets fit the address space of a mapped file");
        assert!(start.checked_add(data.len()).is_some_and(|end| end <= self.len_bytes), "write within the mapping");
        // SAFETY: in bounds (asserted); the range is this part's alone and populated, so
        // the store cannot fault.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(start), data.len()) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; nothing refers to it any more.
        unsafe { libc::munmap(self.base.cast(), self.len_bytes) };
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt;

    use super::*;

    #[test]
    fn writes_through_the_mapping_are_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path).unwrap();
        file.set_len(3 * 4096).unwrap();
        let map = Mapping::new(&file, 3 * 4096).unwrap();
        match map.populate(4096 + 10, 100) {
            Populate::Done => {}
            Populate::Unsupported => return, // an old kernel: nothing to check here
            Populate::Failed(e) => panic!("{e}"),
        }
        map.write(4096 + 10, b"zoned");
        let mut back = [0u8; 5];
        file.read_exact_at(&mut back, 4096 + 10).unwrap();
        assert_eq!(&back, b"zoned");
        // A range past the end is cut there.
        assert!(matches!(map.populate(2 * 4096, 5 * 4096), Populate::Done));
        assert!(matches!(map.populate(4 * 4096, 4096), Populate::Done));
    }

    #[test]
    #[should_panic(expected = "write within the mapping")]
    fn a_write_past_the_end_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file =
            std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(dir.path().join("f")).unwrap();
        file.set_len(4096).unwrap();
        let map = Mapping::new(&file, 4096).unwrap();
        map.write(4090, &[0u8; 10]);
    }
}
