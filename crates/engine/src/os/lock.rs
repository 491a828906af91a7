//! A whole-directory advisory lock (`flock` on `<dir>/.lock`).
//!
//! Exclusive: opening (schema creation, settings changes) and `check(fix=True)`'s orphan sweep.
//! Shared: a writer between creating a value file and holding SQLite's write lock, so the sweep
//! can never mistake a file that is about to be committed for an orphan. The kernel drops the
//! lock when its holder dies, so a killed process never leaves it held.
//!
//! An `flock` belongs to the open file description, which a forked child shares: were the guard
//! merely closed, a child that inherited the descriptor (from a thread that held the lock at the
//! fork) would keep the lock held for as long as it lives. So the owner unlocks explicitly, and
//! a child never unlocks a guard it inherited, which would release its parent's lock (D-028).

use crate::os::modes::Modes;
use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

pub(crate) const LOCK_NAME: &str = ".lock";

pub(crate) struct DirLock {
    file: File,
    /// `fork_generation()` when taken.
    fork: u64,
}

impl Drop for DirLock {
    fn drop(&mut self) {
        if self.fork == crate::os::fork::fork_generation() {
            // SAFETY: a valid open descriptor.
            unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
        }
    }
}

impl DirLock {
    pub(crate) fn exclusive(directory: &Path, timeout: Duration, modes: Modes) -> Result<DirLock> {
        Self::acquire(directory, libc::LOCK_EX, timeout, modes)
    }

    pub(crate) fn shared(directory: &Path, timeout: Duration, modes: Modes) -> Result<DirLock> {
        Self::acquire(directory, libc::LOCK_SH, timeout, modes)
    }

    fn acquire(
        directory: &Path,
        kind: libc::c_int,
        timeout: Duration,
        modes: Modes,
    ) -> Result<DirLock> {
        let path = directory.join(LOCK_NAME);
        // Never through a symlink (it would create its target, wherever that is), and never
        // blocking on a FIFO or a device put in its place (D-035).
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(modes.file)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&path);
        let refuse = |what: &'static str| {
            Error::NotACache(crate::error::NotCache::LockFile {
                path: path.clone(),
                kind: what,
            })
        };
        let file = match opened {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(refuse("a symbolic link"))
            }
            Err(e) if e.raw_os_error() == Some(libc::EISDIR) => return Err(refuse("a directory")),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENXIO | libc::EOPNOTSUPP)) => {
                return Err(refuse("a socket or a device"))
            }
            Err(e) => return Err(Error::io("opening the cache's lock file", Some(path), e)),
        };
        let meta = file
            .metadata()
            .map_err(|e| Error::io("opening the cache's lock file", Some(path.clone()), e))?;
        if !meta.is_file() {
            return Err(refuse(crate::basics::kind_of(&meta.file_type())));
        }
        modes
            .widen(&file)
            .map_err(|e| Error::io("opening the cache's lock file", Some(path.clone()), e))?;
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_micros(50);
        loop {
            // SAFETY: a valid open descriptor.
            if unsafe { libc::flock(file.as_raw_fd(), kind | libc::LOCK_NB) } == 0 {
                return Ok(DirLock {
                    file,
                    fork: crate::os::fork::fork_generation(),
                });
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK)
                && err.kind() != std::io::ErrorKind::Interrupted
            {
                return Err(Error::io("locking the cache directory", Some(path), err));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout);
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(5));
        }
    }
}
