//! Space held back for the writes that free space (D-039).
//!
//! On a full disk every SQLite write fails, deletes included: a delete appends frames to the
//! WAL, and a checkpoint that would let the WAL start over may need to grow `cache.db` first.
//! So a full cache could not be emptied, and a full queue could not be drained. Each writable
//! handle keeps a file of [`Reserve::BYTES`] allocated in the directory. When a removal fails
//! for lack of space, the reserve is given up, the WAL is checkpointed and truncated with the
//! room that made, and the removal runs again; once a removal has succeeded, the reserve is
//! allocated again if there is room for it.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

pub(crate) const RESERVE_NAME: &str = "reserve";

#[derive(Debug)]
pub(crate) struct Reserve {
    path: PathBuf,
    /// This handle gave the reserve up, or could not allocate it: the next removal that
    /// succeeds tries again.
    missing: AtomicBool,
}

impl Reserve {
    /// Room for a removal's own WAL frames and part of a checkpoint's growth of `cache.db`;
    /// every removal then shrinks the database, so what a checkpoint needs falls (D-039).
    pub(crate) const BYTES: i64 = 1 << 20;
    /// On a small file system (a tmpfs of a few MiB) the reserve is an eighth of it, down to
    /// this: a full reserve could never be allocated there, and then nothing would be held
    /// back at all.
    const SMALLEST: i64 = 64 << 10;

    pub(crate) fn new(directory: &Path) -> Reserve {
        Reserve {
            path: directory.join(RESERVE_NAME),
            missing: AtomicBool::new(true),
        }
    }

    /// Allocate the reserve unless it is there. Best effort: on a disk without room for it,
    /// or in a directory we may not write, there is simply no reserve.
    pub(crate) fn ensure(&self, mode: u32) {
        self.missing.store(!self.allocate(mode), Ordering::Relaxed);
    }

    /// [`Reserve::ensure`], if this handle knows it to be missing: called after removals.
    pub(crate) fn ensure_if_missing(&self, mode: u32) {
        if self.missing.load(Ordering::Relaxed) {
            self.ensure(mode);
        }
    }

    /// Whether the reserve is in place afterwards.
    fn allocate(&self, mode: u32) -> bool {
        let Ok(c_path) = CString::new(self.path.as_os_str().as_bytes()) else {
            return false;
        };
        let Some(size) = self.size() else {
            return false;
        };
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.is_file() && m.len() >= size as u64 => return true,
            // Cut short (a process killed while allocating it): allocate it again.
            Ok(m) if m.is_file() => {
                let _ = std::fs::remove_file(&self.path);
            }
            _ => {}
        }
        if !self.room_for(size) {
            return false;
        }
        // O_EXCL: another handle may be allocating it right now; O_NOFOLLOW: never through a
        // link someone put in the directory.
        // SAFETY: a valid C string; the fd is closed below.
        let fd = unsafe {
            libc::open(
                c_path.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        };
        if fd < 0 {
            return false;
        }
        // The exact mode, whatever the umask (D-027), as for every file the cache creates.
        // SAFETY: fd is open.
        unsafe { libc::fchmod(fd, mode as libc::mode_t) };
        // The blocks are really taken, so the space is there to give back later.
        let taken = crate::os::platform::preallocate(fd, size);
        // SAFETY: fd is ours.
        unsafe { libc::close(fd) };
        if !taken {
            let _ = std::fs::remove_file(&self.path);
            return false;
        }
        true
    }

    fn space(&self) -> Option<(u64, u64)> {
        crate::os::platform::file_system_space(self.path.parent()?)
    }

    /// The reserve's length on this file system: [`Reserve::BYTES`], or an eighth of a
    /// small file system (at least [`Reserve::SMALLEST`]).
    fn size(&self) -> Option<i64> {
        let (total, _) = self.space()?;
        Some(Self::size_on(total))
    }

    /// The reserve's length on a file system of `total` bytes.
    pub(crate) fn size_on(total: u64) -> i64 {
        (total / 8).clamp(Self::SMALLEST as u64, Self::BYTES as u64) as i64
    }

    /// Whether the file system has at least twice the reserve free: taking it back while a
    /// full disk is being emptied would only make the next removal fail again.
    fn room_for(&self, size: i64) -> bool {
        self.space()
            .is_some_and(|(_, free)| free >= 2 * size as u64)
    }

    /// Give the space back. Returns whether there was a reserve to give.
    pub(crate) fn release(&self) -> bool {
        self.missing.store(true, Ordering::Relaxed);
        // unlink never follows a link: at worst it removes a link someone put here.
        std::fs::remove_file(&self.path).is_ok()
    }
}
