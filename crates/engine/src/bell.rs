//! Waiting for another process's write without polling the database (D-013).
//!
//! Every commit appends to the WAL file, so an inotify watch on the cache directory that
//! listens for changes to `cache.db-wal` rings whenever any process writes. A waiter arms the
//! watch, checks, and sleeps in `poll(2)` until the bell rings or its time is up. Where inotify
//! is unavailable it falls back to sleeping with backoff. Each thread keeps its bells armed
//! between waits, since closing an inotify descriptor takes milliseconds.

use crate::cache::{Cache, DB_NAME};
use crate::conn::fork_generation;
use crate::Result;
use std::cell::{Cell, RefCell};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bells each thread keeps armed between waits, at most this many (one per directory).
const KEPT_BELLS: usize = 4;

thread_local! {
    /// Armed bells kept for this thread's next wait on the same directory. Closing an inotify
    /// descriptor costs milliseconds (the kernel waits for a grace period), more than a wait
    /// that finds work at once: a bell closed at the end of every wait would add that to each.
    static KEPT: RefCell<Vec<Bell>> = const { RefCell::new(Vec::new()) };
}

struct Bell {
    fd: OwnedFd,
    directory: PathBuf,
    /// `fork_generation()` when made: a forked child shares the descriptor with its parent
    /// (they would read each other's events), so it never reuses one made before the fork.
    fork: u64,
    /// The watch was removed (the directory was deleted): this bell never rings again.
    gone: Cell<bool>,
}

impl Bell {
    /// This thread's kept bell for `directory`, its old events drained, or a new one.
    fn take(directory: &Path) -> Option<Bell> {
        let fork = fork_generation();
        let kept = KEPT
            .try_with(|kept| {
                let mut kept = kept.try_borrow_mut().ok()?;
                kept.retain(|b| b.fork == fork);
                let at = kept.iter().position(|b| b.directory == directory)?;
                Some(kept.swap_remove(at))
            })
            .ok()
            .flatten();
        if let Some(bell) = kept {
            bell.drain();
            // Unless the directory was deleted since (and perhaps made again under its path).
            if !bell.gone.get() {
                return Some(bell);
            }
        }
        Bell::new(directory)
    }

    /// Keep this bell for the thread's next wait (closing it only if too many are kept).
    fn keep(self) {
        if self.gone.get() {
            return;
        }
        let _ = KEPT.try_with(|kept| {
            if let Ok(mut kept) = kept.try_borrow_mut() {
                if kept.len() >= KEPT_BELLS {
                    kept.remove(0);
                }
                kept.push(self);
            }
        });
    }

    fn new(directory: &Path) -> Option<Bell> {
        // SAFETY: plain syscalls; the descriptor is owned right away.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let path = std::ffi::CString::new(directory.as_os_str().as_encoded_bytes()).ok()?;
        let mask = libc::IN_MODIFY | libc::IN_CREATE | libc::IN_MOVED_TO | libc::IN_CLOSE_WRITE;
        // SAFETY: valid descriptor and NUL-terminated path.
        if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) } < 0 {
            return None;
        }
        Some(Bell {
            fd,
            directory: directory.to_path_buf(),
            fork: fork_generation(),
            gone: Cell::new(false),
        })
    }

    /// Sleep until the database may have changed or `timeout` passes.
    fn wait(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, ms) } <= 0 {
                continue; // timeout (loop re-checks the deadline) or EINTR
            }
            if self.drain() {
                return;
            }
        }
    }

    /// Read pending events; true if one was about the database.
    fn drain(&self) -> bool {
        let mut buf = [0u8; 4096];
        let mut rang = false;
        loop {
            // SAFETY: reading into a local buffer of the given length.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                return rang;
            }
            let mut at = 0usize;
            let header = std::mem::size_of::<libc::inotify_event>();
            while at + header <= n as usize {
                let mask = u32::from_ne_bytes(buf[at + 4..at + 8].try_into().unwrap_or([0; 4]));
                if mask & libc::IN_IGNORED != 0 {
                    self.gone.set(true);
                    rang = true; // wake the waiter, which then sleeps without the bell
                }
                let len =
                    u32::from_ne_bytes(buf[at + 12..at + 16].try_into().unwrap_or([0; 4])) as usize;
                let name = &buf[(at + header).min(n as usize)..(at + header + len).min(n as usize)];
                let name = name.split(|b| *b == 0).next().unwrap_or_default();
                rang |= name.starts_with(DB_NAME.as_bytes());
                at += header + len;
            }
        }
    }
}

impl Cache {
    /// Call `attempt` until it returns `Some` or `timeout` has passed, sleeping between tries
    /// until some process writes to this cache. Returns `None` on timeout.
    pub fn wait_for<T>(
        &self,
        timeout: Duration,
        mut attempt: impl FnMut() -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let deadline = Instant::now() + timeout;
        // Armed before the first check, so a write between the check and the sleep still rings.
        let bell = Bell::take(self.directory());
        let result = self.wait_with(deadline, bell.as_ref(), &mut attempt);
        if let Some(bell) = bell {
            bell.keep();
        }
        result
    }

    fn wait_with<T>(
        &self,
        deadline: Instant,
        bell: Option<&Bell>,
        attempt: &mut impl FnMut() -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let mut pause = Duration::from_millis(1);
        loop {
            if let Some(v) = attempt()? {
                return Ok(Some(v));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            match bell.filter(|b| !b.gone.get()) {
                Some(b) => b.wait(left),
                None => {
                    std::thread::sleep(pause.min(left));
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
            }
        }
    }
}
