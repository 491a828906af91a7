//! Linux: a directory watch that rings when any process writes to the cache (D-013).
//!
//! Every commit appends to the WAL file, so an inotify watch on the cache directory that
//! listens for changes to `cache.db-wal` rings whenever any process writes.

use crate::names::DB_NAME;
use std::cell::Cell;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

pub(crate) struct Watch {
    fd: OwnedFd,
    /// The watch was removed (the directory was deleted): it never rings again.
    gone: Cell<bool>,
}

impl Watch {
    /// A watch on `directory`, or `None` where there is none to be had (inotify unavailable
    /// or out of watches, or the portable fallbacks forced): then the caller polls.
    pub(crate) fn new(directory: &Path) -> Option<Watch> {
        if !super::watches_directories() {
            return None;
        }
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
        Some(Watch {
            fd,
            gone: Cell::new(false),
        })
    }

    pub(crate) fn gone(&self) -> bool {
        self.gone.get()
    }

    /// Sleep until the database may have changed or `timeout` passes.
    pub(crate) fn wait(&self, timeout: Duration) {
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
    pub(crate) fn drain(&self) -> bool {
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
                    rang = true; // wake the waiter, which then sleeps without the watch
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
