//! The run directory (`run_dir`: `/run/zapraid`, or `ZAPRAID_RUN_DIR`), where a
//! running array's control socket (`NAME.sock`) and its background server's log
//! (`NAME.log`) live, and how the server makes and writes files there.
//!
//! The server usually runs as root: whoever could write in this directory could plant a
//! symbolic link where the server then writes (`NAME.log` pointing at any file). So a run
//! directory zapraid makes is made 0700, and one that exists is used only if it is a
//! directory (not a link to one) owned by the server's user and writable by no one else;
//! otherwise the start is refused, the fix in the message. A file the server writes there
//! is opened without following a link (`O_NOFOLLOW`) and must be a regular file; the
//! socket is bound, which never follows a link (`control::listen`).

use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Where control sockets live, unless `ZAPRAID_RUN_DIR` says otherwise.
pub const DEFAULT_RUN_DIR: &str = "/run/zapraid";

pub fn run_dir() -> PathBuf {
    std::env::var_os("ZAPRAID_RUN_DIR").map_or_else(|| PathBuf::from(DEFAULT_RUN_DIR), PathBuf::from)
}

/// The mode a run directory is made with: its owner's alone.
pub const RUN_DIR_MODE: u32 = 0o700;

/// The mode of a log the server creates: its owner's alone.
const LOG_MODE: u32 = 0o600;

/// Makes the run directory (0700) if it is missing, and checks it (`check_dir`).
pub fn prepare() -> Result<PathBuf> {
    let dir = run_dir();
    prepare_dir(&dir)?;
    Ok(dir)
}

/// Makes `dir` (0700, and parents it lacks the same) if it is missing, then checks it.
pub fn prepare_dir(dir: &Path) -> Result<()> {
    if std::fs::symlink_metadata(dir).is_err() {
        // Made by someone else meanwhile is no error here: the check below judges it.
        DirBuilder::new().recursive(true).mode(RUN_DIR_MODE).create(dir).map_err(|error| Error::Io {
            path: dir.to_path_buf(),
            context: "cannot create the run directory",
            error,
        })?;
    }
    check_dir(dir)
}

/// Refuses a run directory that is a link, not a directory, owned by another user than
/// this process's, or writable by its group or others.
pub fn check_dir(dir: &Path) -> Result<()> {
    let refuse = |reason: String| Error::Refused { path: dir.to_path_buf(), reason };
    let meta = std::fs::symlink_metadata(dir).map_err(|error| Error::Io {
        path: dir.to_path_buf(),
        context: "cannot read the run directory",
        error,
    })?;
    let shown = dir.display();
    if meta.file_type().is_symlink() {
        return Err(refuse(format!(
            "the run directory is a symbolic link, and the server writes its log and socket there as root: give \
             the directory itself (ZAPRAID_RUN_DIR={}), or remove the link (zapraid makes the directory, mode \
             0700)",
            std::fs::canonicalize(dir).map_or_else(|_| "<directory>".to_string(), |p| p.display().to_string())
        )));
    }
    if !meta.is_dir() {
        return Err(refuse(
            "the run directory is not a directory: remove it (zapraid makes it, mode 0700), or \
                           give another with ZAPRAID_RUN_DIR"
                .into(),
        ));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let user = unsafe { libc::geteuid() };
    if meta.uid() != user {
        return Err(refuse(format!(
            "the run directory belongs to user {}, not to the user this server runs as ({user}), who would write \
             its log and socket there: fix it with `chown {user} {shown}` and `chmod 700 {shown}`, or give \
             another with ZAPRAID_RUN_DIR",
            meta.uid()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (true, true) => "its group and others",
            (true, false) => "its group",
            _ => "others",
        };
        return Err(refuse(format!(
            "the run directory is writable by {who} (mode {mode:04o}): they could plant a symbolic link where the \
             server writes its log or socket; fix it with `chmod 700 {shown}`"
        )));
    }
    Ok(())
}

/// Opens (creating it 0600) the log at `path` for appending, without following a link:
/// a link there, or anything but a regular file, is refused.
pub fn open_log(path: &Path) -> Result<File> {
    let refuse = |reason: &str| Error::Refused { path: path.to_path_buf(), reason: reason.into() };
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(LOG_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|error| match error.raw_os_error() {
            Some(libc::ELOOP) => refuse(
                "the log is a symbolic link, and the server does not write through one (it could point at any \
                 file): remove it; the log is made again",
            ),
            _ => Error::Io { path: path.to_path_buf(), context: "cannot open the log", error },
        })?;
    let meta = file.metadata().map_err(|error| Error::Io {
        path: path.to_path_buf(),
        context: "cannot read the log",
        error,
    })?;
    if !meta.is_file() {
        return Err(refuse("the log is not a regular file: remove it; the log is made again"));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_missing_run_directory_is_made_0700() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("a").join("run");
        prepare_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        // Made once, it is taken as it is.
        prepare_dir(&dir).unwrap();
    }

    #[test]
    fn a_run_directory_others_may_write_in_is_refused_with_the_fix() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("run");
        std::fs::create_dir(&dir).unwrap();
        for (bits, who) in [(0o777, "its group and others"), (0o757, "others"), (0o770, "its group")] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(bits)).unwrap();
            let e = prepare_dir(&dir).unwrap_err().to_string();
            assert!(e.contains(&format!("is writable by {who} (mode {bits:04o})")), "{e}");
            assert!(e.contains(&format!("chmod 700 {}", dir.display())), "{e}");
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        prepare_dir(&dir).unwrap();
    }

    #[test]
    fn a_run_directory_that_is_a_link_or_a_file_is_refused() {
        let top = tempfile::tempdir().unwrap();
        let real = top.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = top.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = prepare_dir(&link).unwrap_err().to_string();
        assert!(e.contains("is a symbolic link") && e.contains(&format!("ZAPRAID_RUN_DIR={}", real.display())), "{e}");
        let file = top.path().join("file");
        std::fs::write(&file, b"").unwrap();
        let e = prepare_dir(&file).unwrap_err().to_string();
        assert!(e.contains("is not a directory"), "{e}");
    }

    #[test]
    fn a_log_is_not_written_through_a_link() {
        let top = tempfile::tempdir().unwrap();
        let target = top.path().join("target");
        std::fs::write(&target, b"precious").unwrap();
        let log = top.path().join("a.log");
        std::os::unix::fs::symlink(&target, &log).unwrap();
        let e = open_log(&log).unwrap_err().to_string();
        assert!(e.contains("a.log refused: the log is a symbolic link"), "{e}");
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
        std::fs::remove_file(&log).unwrap();
        open_log(&log).unwrap();
        assert_eq!(mode(&log), LOG_MODE);
        let dir = top.path().join("d.log");
        std::fs::create_dir(&dir).unwrap();
        assert!(open_log(&dir).is_err());
    }
}
