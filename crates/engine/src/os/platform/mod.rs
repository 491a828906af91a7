//! Everything that depends on the operating system, in one place (D-040).
//!
//! The engine needs a Unix: it relies on `fcntl` locks (SQLite's own, and ours on `.lock`),
//! `openat` with `O_NOFOLLOW` for value files, and `fork` semantics. Within Unix, these pieces
//! differ, each with a portable fallback chosen at compile time:
//!
//! | piece | Linux | elsewhere (macOS, the BSDs) |
//! |---|---|---|
//! | waking a blocked worker (D-013) | an inotify watch on the directory | sleeping with backoff, 1 to 50 ms |
//! | WAL index locks (D-033) | the engine's `xShmLock`, with fewer `fcntl` calls | SQLite's own `xShmLock` |
//! | holding disk space back (D-039) | `posix_fallocate` | writing zeros |
//! | clearing `errno` | `__errno_location` | `__error` |
//!
//! Fork handlers (`pthread_atfork`, D-028) are POSIX and the same everywhere.
//!
//! Setting `DISKCACHE_OXIDE_PORTABLE=1` in the environment, before the first cache is opened,
//! selects the fallbacks of the first two rows on Linux too, so the test suite can run the
//! queue, job and claim tests the way they run where there is no inotify.

use std::sync::OnceLock;

#[cfg(target_os = "linux")]
mod inotify;
#[cfg(target_os = "linux")]
pub(crate) use inotify::Watch;

#[cfg(not(target_os = "linux"))]
mod polling;
#[cfg(not(target_os = "linux"))]
pub(crate) use polling::Watch;

/// The environment variable that forces the portable fallbacks.
pub const PORTABLE_ENV: &str = "DISKCACHE_OXIDE_PORTABLE";

/// Whether the portable fallbacks were forced (read once per process).
fn forced_portable() -> bool {
    static FORCED: OnceLock<bool> = OnceLock::new();
    *FORCED
        .get_or_init(|| std::env::var_os(PORTABLE_ENV).is_some_and(|v| !v.is_empty() && v != "0"))
}

/// Which implementation of each platform piece this process uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backends {
    /// "inotify" or "polling".
    pub wake: &'static str,
    /// "engine" (our `xShmLock`) or "sqlite" (SQLite's own).
    pub wal_index_locks: &'static str,
    /// "posix_fallocate" or "zeros".
    pub preallocate: &'static str,
}

/// The backends in force, for diagnostics and for the tests that force the fallbacks.
pub fn backends() -> Backends {
    Backends {
        wake: if watches_directories() {
            "inotify"
        } else {
            "polling"
        },
        wal_index_locks: if engine_wal_index_locks() {
            "engine"
        } else {
            "sqlite"
        },
        preallocate: if cfg!(target_os = "linux") {
            "posix_fallocate"
        } else {
            "zeros"
        },
    }
}

/// Whether blocked workers are woken by a directory watch rather than by polling.
pub(crate) fn watches_directories() -> bool {
    cfg!(target_os = "linux") && !forced_portable()
}

/// Whether the VFS takes SQLite's WAL index locks itself (D-033).
pub(crate) fn engine_wal_index_locks() -> bool {
    cfg!(target_os = "linux") && !forced_portable()
}

/// Take the blocks of `fd`'s first `len` bytes, so that writing them later cannot fail for
/// lack of space. False if they could not all be had.
pub(crate) fn preallocate(fd: std::os::fd::RawFd, len: i64) -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: fd is open for writing; posix_fallocate takes no pointers.
        unsafe { libc::posix_fallocate(fd, 0, len as libc::off_t) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::io::Write;
        use std::mem::ManuallyDrop;
        use std::os::fd::FromRawFd;
        // SAFETY: borrowed for the writes below and never closed here (ManuallyDrop).
        let mut file = ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
        let zeros = [0u8; 64 * 1024];
        let mut left = len.max(0) as usize;
        while left > 0 {
            let n = left.min(zeros.len());
            if file.write_all(&zeros[..n]).is_err() {
                return false;
            }
            left -= n;
        }
        file.sync_data().is_ok()
    }
}

/// The size of the file system holding `dir` and the bytes free on it for us, or `None` if
/// it cannot be asked.
pub(crate) fn file_system_space(dir: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c_dir = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills the zeroed struct it is given.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a valid out pointer.
    if unsafe { libc::statvfs(c_dir.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let frsize = st.f_frsize as u64;
    Some((
        (st.f_blocks as u64).saturating_mul(frsize),
        (st.f_bavail as u64).saturating_mul(frsize),
    ))
}

/// Run `prepare` in the thread that calls `fork()` before it forks, and `parent` and `child`
/// in each process after it (D-028). POSIX `pthread_atfork`, the same on every Unix.
pub(crate) fn at_fork(prepare: extern "C" fn(), parent: extern "C" fn(), child: extern "C" fn()) {
    // SAFETY: the three are plain functions that live for the process; what they may do in a
    // fork handler is the caller's contract (conn.rs).
    unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) };
}

/// Set this thread's `errno` to 0, to tell "no more entries" from an error after `readdir`.
pub(crate) fn clear_errno() {
    // SAFETY: errno is thread-local; each function returns a pointer to this thread's.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    unsafe {
        *libc::__errno_location() = 0
    };
    #[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
    unsafe {
        *libc::__error() = 0
    };
    #[cfg(any(target_os = "netbsd", target_os = "openbsd"))]
    unsafe {
        *libc::__errno() = 0
    };
}
