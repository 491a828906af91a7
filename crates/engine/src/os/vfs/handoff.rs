//! Handing the write lock over (D-070): a writer that finds the WAL write lock taken sleeps on
//! a futex until the holder lets go, instead of sleeping for a guessed time.
//!
//! The lock is still SQLite's `fcntl` lock on byte 120 of the `-shm` file; nothing here decides
//! who holds it. What this adds is a bell beside it: one 32-bit word in the `-shm` file that the
//! releasing process rings after its `fcntl` unlock, waking one sleeper in any process. The word
//! is `notUsed0` of SQLite's checkpoint header (bytes 132..136 of the file, "available for
//! future enhancements"), which SQLite neither reads nor writes (see `walIndexRecover` and
//! `walRestartHdr`), so a stock `sqlite3` sharing the directory is unaffected; it simply never
//! rings, and a waiter behind it wakes at its time-out and tries again, as before.
//!
//! The word holds the number of sleepers in its high 16 bits and a ring count in its low 16.
//! A writer reads the ring count before it tries the lock; if the try fails it adds itself as a
//! sleeper and sleeps only while the count is unchanged (the futex compares the whole word in
//! the kernel). Every release after the failed try changes the count, and a release that sees
//! sleepers wakes one, so a wake-up is never lost; one that is (a holder killed before it rang,
//! a foreign writer) costs a time-out, never correctness.
//!
//! Linux only (futexes on a shared file mapping). Elsewhere, and with the portable fallbacks
//! forced, waiting stays the busy handler's backoff.

#[cfg(not(target_os = "linux"))]
pub(super) use elsewhere::{sleep, Bell};
#[cfg(target_os = "linux")]
pub(super) use linux::{sleep, Bell};

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::c_int;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    /// Offset of the word in the `-shm` file: `WalCkptInfo.notUsed0`.
    const WORD_OFFSET: usize = 132;
    /// The mapping: the file's first page (SQLite grows the file in 32 KiB regions).
    const MAP_LEN: usize = 4096;
    const SLEEPER: u32 = 1 << 16;
    const RINGS: u32 = SLEEPER - 1;

    /// The bell of one database, mapped by this process.
    pub(in crate::os::vfs) struct Bell {
        map: *mut libc::c_void,
    }

    // SAFETY: the mapping is only reached through atomics.
    unsafe impl Send for Bell {}
    // SAFETY: as above.
    unsafe impl Sync for Bell {}

    impl Bell {
        /// Map the bell from a descriptor on the `-shm` file opened for writing. `None` if the
        /// file is too short to hold the word yet (SQLite has not sized it) or cannot be mapped.
        pub(in crate::os::vfs) fn map(fd: c_int) -> Option<Bell> {
            // SAFETY: an all-zero stat is valid output space.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: a descriptor the caller owns.
            if unsafe { libc::fstat(fd, &mut st) } != 0 || (st.st_size as usize) < MAP_LEN {
                return None;
            }
            // SAFETY: a shared read-write mapping of the file's first page, which exists.
            let map = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    MAP_LEN,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            };
            if map == libc::MAP_FAILED {
                return None;
            }
            Some(Bell { map })
        }

        fn word(&self) -> &AtomicU32 {
            // SAFETY: inside the mapping, which lives as long as `self`, and 4-aligned (the
            // mapping is page-aligned).
            unsafe { &*self.map.cast::<u8>().add(WORD_OFFSET).cast::<AtomicU32>() }
        }

        /// The ring count, read before trying the lock.
        pub(in crate::os::vfs) fn rings(&self) -> u32 {
            self.word().load(Ordering::SeqCst) & RINGS
        }

        /// Ring after the write lock was released in the kernel: wake one sleeper, if any.
        pub(in crate::os::vfs) fn ring(&self) {
            let word = self.word();
            let before = word
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                    Some((v & !RINGS) | (v.wrapping_add(1) & RINGS))
                })
                .unwrap_or_else(|v| v);
            if before >= SLEEPER {
                futex_wake(word);
            }
        }
    }

    impl Drop for Bell {
        fn drop(&mut self) {
            // SAFETY: our own mapping, unmapped once.
            unsafe {
                libc::munmap(self.map, MAP_LEN);
            }
        }
    }

    /// Sleep until `bell` rings after `rings` (the count read before the failed try), or
    /// `timeout` passes.
    pub(in crate::os::vfs) fn sleep(bell: &Bell, rings: u32, timeout: Duration) {
        let word = bell.word();
        let deadline = Instant::now() + timeout;
        let mut seen = word
            .fetch_add(SLEEPER, Ordering::SeqCst)
            .wrapping_add(SLEEPER);
        while seen & RINGS == rings {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            futex_wait(word, seen, deadline - now);
            // Woken, timed out, interrupted, or another sleeper changed the word: look again.
            seen = word.load(Ordering::SeqCst);
        }
        // Never below zero sleepers, even if someone else wrote the word meanwhile.
        let _ = word.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
            Some(if v >= SLEEPER { v - SLEEPER } else { v })
        });
    }

    fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        // SAFETY: a valid aligned word in a shared mapping and a valid relative timeout. A
        // shared (not FUTEX_PRIVATE) wait, so a waker in another process finds it by the
        // file's page.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT,
                expected,
                &ts as *const libc::timespec,
            );
        }
    }

    fn futex_wake(word: &AtomicU32) {
        // SAFETY: as for `futex_wait`; waking never touches the word.
        unsafe {
            libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, 1);
        }
    }
}

/// Without futexes there is no bell: the busy handler backs off as it always did.
#[cfg(not(target_os = "linux"))]
mod elsewhere {
    use std::ffi::c_int;
    use std::time::Duration;

    pub(in crate::os::vfs) enum Bell {}

    impl Bell {
        pub(in crate::os::vfs) fn map(_fd: c_int) -> Option<Bell> {
            None
        }

        pub(in crate::os::vfs) fn rings(&self) -> u32 {
            match *self {}
        }

        pub(in crate::os::vfs) fn ring(&self) {
            match *self {}
        }
    }

    pub(in crate::os::vfs) fn sleep(bell: &Bell, _rings: u32, _timeout: Duration) {
        match *bell {}
    }
}
