//! The WAL index locks with fewer `fcntl` calls (D-033).
//!
//! SQLite's unix VFS takes and drops a POSIX lock on a byte of the `-shm` file for each of the
//! eight WAL index locks, one `fcntl` per request. A write transaction after any commit makes
//! six requests: take its read slot exclusively to move the slot's mark, drop it, take it
//! shared, take the write lock, drop the write lock, drop the read slot. The protocol (which
//! byte, which lock type, when it is held) is what every process sharing the directory relies
//! on, and it stays exactly SQLite's. What changes is how this process talks to the kernel:
//! - A release is held back while the connection that made it still holds something: dropping
//!   a slot taken exclusively and then taking it shared becomes one downgrade, and the write
//!   lock and the read slot are dropped together in one call. A process then holds a lock a
//!   little longer than SQLite asked for, never a lock SQLite does not know about for longer
//!   than the rest of the transaction or the engine call, and never across a sleep.
//! - Several connections of this process share the kernel's lock, as in the unix VFS.
//!
//! Everything is guarded by one spin lock, which the fork handlers hold across `fork()`; in a
//! child the kernel holds none of the parent's locks, so the record of what is held is cleared.

use super::handoff::{self, Bell};
use crate::os::spin::SpinLocked;
use rusqlite::ffi;
use std::cell::Cell;
use std::cell::RefCell;
use std::ffi::{c_int, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::sync::Arc;
use std::time::Duration;

/// Byte of the `-shm` file that SQLite's unix VFS locks for WAL index lock 0 (`UNIX_SHM_BASE`).
const BASE: i64 = 120;
const NLOCK: usize = ffi::SQLITE_SHM_NLOCK as usize;
/// Locks 3..8 are the read slots; 0 is the write lock, 1 the checkpointer's, 2 recovery's.
const FIRST_READ_SLOT: usize = 3;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Held {
    None,
    Read,
    Write,
}

/// One database's WAL index locks in this process.
struct Node {
    /// `st_dev`, `st_ino` of the database file: connections to the same file share a node.
    key: (u64, u64),
    /// Our own descriptor on the `-shm` file. POSIX locks belong to the process, so these are
    /// the same locks SQLite's descriptor would take; it is closed only when no connection of
    /// this process uses the file any more (closing any descriptor drops all of them).
    fd: c_int,
    /// Connections attached (each has mapped the WAL index).
    files: usize,
    /// Per lock: connections holding it shared, and whether one holds it exclusively.
    shared: [u32; NLOCK],
    exclusive: [bool; NLOCK],
    /// What this process holds in the kernel, which may be more than the connections hold
    /// while a release is held back.
    kernel: [Held; NLOCK],
    /// The write lock's bell (`handoff`), rung when this process lets the lock go; `None`
    /// where the file is read-only to us or there are no futexes.
    bell: Option<Arc<Bell>>,
    /// Whether `fd` was opened for writing, so a bell may still be mapped once SQLite has
    /// sized the file (a new database's WAL index is empty when the first connection joins).
    writable: bool,
}

impl Node {
    fn ensure_bell(&mut self) {
        if self.bell.is_none() && self.writable {
            self.bell = Bell::map(self.fd).map(Arc::new);
        }
    }
}

impl Node {
    fn wanted(&self, i: usize) -> Held {
        if self.exclusive[i] {
            Held::Write
        } else if self.shared[i] > 0 {
            Held::Read
        } else {
            Held::None
        }
    }

    /// Tell the kernel about the releases held back, except on `keep` (a bit mask), in as few
    /// calls as possible. Never takes a lock: in a forked child a connection inherited from the
    /// parent may record a lock that this process does not hold, and that stays so.
    fn settle(&mut self, keep: u16) {
        let mut target = self.kernel;
        for (i, t) in target.iter_mut().enumerate() {
            if keep & (1 << i) == 0 {
                *t = self.wanted(i).min(self.kernel[i]);
            }
        }
        let mut i = 0;
        while i < NLOCK {
            if target[i] == self.kernel[i] {
                i += 1;
                continue;
            }
            // A run of bytes going to the same state; bytes already in that state may sit
            // inside it (unlocking an unlocked byte, or locking a byte again, changes nothing).
            let kind = target[i];
            let mut end = i + 1;
            let mut last_change = i;
            while end < NLOCK && target[end] == kind {
                if self.kernel[end] != kind {
                    last_change = end;
                }
                end += 1;
            }
            let end = last_change + 1;
            // A downgrade or unlock does not fail on a valid descriptor; if it did, the kernel
            // still holds the stronger lock, which is what the record keeps.
            if system_lock(self.fd, kind, i, end - i) {
                // The write lock is free for other processes now: wake one that waits for it.
                if i == 0 && self.kernel[0] == Held::Write && kind != Held::Write {
                    if let Some(bell) = &self.bell {
                        bell.ring();
                    }
                }
                self.kernel[i..end].fill(kind);
            }
            i = end;
        }
    }
}

fn system_lock(fd: c_int, kind: Held, first: usize, n: usize) -> bool {
    // SAFETY: an all-zero flock is valid; the fields are set below.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = match kind {
        Held::None => libc::F_UNLCK,
        Held::Read => libc::F_RDLCK,
        Held::Write => libc::F_WRLCK,
    } as _;
    lock.l_whence = libc::SEEK_SET as _;
    lock.l_start = BASE + first as i64;
    lock.l_len = n as i64;
    // SAFETY: a descriptor this module owns and a valid flock.
    unsafe { libc::fcntl(fd, libc::F_SETLK, &lock) == 0 }
}

// Boxed: connections keep pointers to their node while the list grows and shrinks.
#[allow(clippy::vec_box)]
static NODES: SpinLocked<Vec<Box<Node>>> = SpinLocked::new(Vec::new());

thread_local! {
    /// This thread held a release back and has not yet settled it.
    static HELD_BACK: Cell<bool> = const { Cell::new(false) };
    /// The bell and its ring count from this thread's last try for the write lock that was
    /// refused, for the busy handler to sleep on (taken by `wait_for_write_lock`).
    /// The bell is shared, so it stays mapped while this thread sleeps on it even if every
    /// connection to the database closes meanwhile.
    static REFUSED: RefCell<Option<(Arc<Bell>, u32)>> = const { RefCell::new(None) };
}

/// If this thread's last lock request was for the write lock and was refused, sleep until the
/// holder lets it go (its process rings the bell) or `timeout` passes, and return true. False
/// when there is no bell to sleep on; the caller then backs off as it would without one.
///
/// Called from the busy handler, right after the refusal.
pub(crate) fn wait_for_write_lock(timeout: Duration) -> bool {
    let Some((bell, rings)) = REFUSED.with(|r| r.borrow_mut().take()) else {
        return false;
    };
    handoff::sleep(&bell, rings, timeout);
    true
}

/// Held by the `pthread_atfork` prepare handler so the state is never copied mid-change.
pub(crate) fn before_fork() {
    NODES.lock();
}

pub(crate) fn after_fork_in_parent() {
    NODES.unlock();
}

/// The child holds none of the parent's POSIX locks.
pub(crate) fn after_fork_in_child() {
    // SAFETY: the forking thread took the lock in `before_fork`; it is the only thread here.
    for node in unsafe { NODES.held() } {
        node.kernel = [Held::None; NLOCK];
    }
    HELD_BACK.with(|h| h.set(false));
    REFUSED.with(|r| r.borrow_mut().take());
    NODES.unlock();
}

/// Some descriptor of this process on the `-shm` file at `shm` was closed, which dropped every
/// lock the process held on it (D-028's direct write lock in a forked child).
pub(crate) fn kernel_dropped_locks(shm: &std::path::Path) {
    let Some(db) = shm
        .as_os_str()
        .as_bytes()
        .strip_suffix(b"-shm")
        .and_then(|b| CString::new(b).ok())
    else {
        return;
    };
    let Some(key) = file_key(&db) else { return };
    NODES.with(|nodes| {
        for node in nodes.iter_mut().filter(|n| n.key == key) {
            node.kernel = [Held::None; NLOCK];
        }
    });
}

/// Settle the releases this thread held back. Called when an engine call ends and before any
/// wait, so a held-back release never outlives the code that made it.
pub(crate) fn settle() {
    if !HELD_BACK.with(|h| h.replace(false)) {
        return;
    }
    NODES.with(|nodes| {
        for node in nodes.iter_mut() {
            node.settle(0);
        }
    });
}

fn file_key(path: &CStr) -> Option<(u64, u64)> {
    // SAFETY: an all-zero stat is valid output space; `path` is NUL-terminated.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::stat(path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    // `dev_t` is a u64 on Linux but an i32 on macOS (stat(2), libc's apple module), where a
    // device number may have its top bit set: `as` keeps it distinct (sign extension is
    // one-to-one), and the key only has to tell files apart. The cast is a no-op on Linux.
    #[allow(clippy::unnecessary_cast)]
    Some((st.st_dev as u64, st.st_ino as u64))
}

/// One connection's view: its database path and the locks it holds.
pub(super) struct Conn {
    db_path: CString,
    node: *mut Node,
    shared: u16,
    exclusive: u16,
}

impl Conn {
    pub(super) fn new(db_path: &CStr) -> Conn {
        Conn {
            db_path: db_path.to_owned(),
            node: std::ptr::null_mut(),
            shared: 0,
            exclusive: 0,
        }
    }

    /// Join this database's node after SQLite mapped the WAL index for the connection.
    pub(super) fn attach(&mut self) -> c_int {
        if !self.node.is_null() {
            let node_ptr = self.node;
            NODES.with(|_| {
                // SAFETY: attached nodes stay in the list while attached; the lock is held.
                // Mapped again: the file may have the size for a bell now.
                unsafe { &mut *node_ptr }.ensure_bell();
            });
            return ffi::SQLITE_OK;
        }
        let Some(key) = file_key(&self.db_path) else {
            return ffi::SQLITE_IOERR_SHMOPEN;
        };
        NODES.with(|nodes| {
            if let Some(node) = nodes.iter_mut().find(|n| n.key == key) {
                node.files += 1;
                self.node = &mut **node;
                return ffi::SQLITE_OK;
            }
            let mut shm = self.db_path.as_bytes().to_vec();
            shm.extend_from_slice(b"-shm\0");
            let Ok(shm) = CString::from_vec_with_nul(shm) else {
                return ffi::SQLITE_IOERR_SHMOPEN;
            };
            // SAFETY: a NUL-terminated path. Read-only when SQLite could only open it so.
            let mut fd = unsafe { libc::open(shm.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
            // Only a file we may write carries a bell (ringing writes the word).
            let writable = fd >= 0;
            if fd < 0 {
                fd = unsafe { libc::open(shm.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            }
            if fd < 0 {
                return ffi::SQLITE_IOERR_SHMOPEN;
            }
            let mut node = Box::new(Node {
                key,
                fd,
                files: 1,
                shared: [0; NLOCK],
                exclusive: [false; NLOCK],
                kernel: [Held::None; NLOCK],
                bell: None,
                writable,
            });
            node.ensure_bell();
            self.node = &mut *node;
            nodes.push(node);
            ffi::SQLITE_OK
        })
    }

    /// Leave the node (SQLite unmapped the WAL index, or the file is closing). The last
    /// connection of the process closes the descriptor.
    pub(super) fn detach(&mut self) {
        if self.node.is_null() {
            return;
        }
        let node_ptr = self.node;
        self.node = std::ptr::null_mut();
        let (shared, exclusive) = (self.shared, self.exclusive);
        self.shared = 0;
        self.exclusive = 0;
        NODES.with(|nodes| {
            // SAFETY: nodes live in the list until removed below, under the lock.
            let node = unsafe { &mut *node_ptr };
            for i in 0..NLOCK {
                if shared & (1 << i) != 0 {
                    node.shared[i] = node.shared[i].saturating_sub(1);
                }
                if exclusive & (1 << i) != 0 {
                    node.exclusive[i] = false;
                }
            }
            node.settle(0);
            node.files = node.files.saturating_sub(1);
            if node.files == 0 {
                let fd = node.fd;
                // Drops the node's bell (unmaps it) before its descriptor closes.
                nodes.retain(|n| !std::ptr::eq(&**n, node_ptr));
                // SAFETY: ours, and no connection of this process uses the file any more.
                unsafe { libc::close(fd) };
            }
        });
    }

    /// `xShmLock` for this connection, with SQLite's semantics (`unixShmLock`).
    pub(super) fn lock(&mut self, ofst: c_int, n: c_int, flags: c_int) -> c_int {
        if self.node.is_null() {
            return ffi::SQLITE_IOERR_SHMLOCK;
        }
        if ofst < 0 || n < 1 || (ofst + n) as usize > NLOCK {
            return ffi::SQLITE_IOERR_SHMLOCK;
        }
        let (first, n) = (ofst as usize, n as usize);
        let mask: u16 = (((1u32 << n) - 1) << first) as u16;
        let node_ptr = self.node;
        NODES.with(|_| {
            // SAFETY: attached nodes stay in the list while attached; the lock is held.
            let node = unsafe { &mut *node_ptr };
            let unlock = flags & ffi::SQLITE_SHM_UNLOCK != 0;
            let exclusive = flags & ffi::SQLITE_SHM_EXCLUSIVE != 0;
            if unlock {
                let held_shared = self.shared & mask;
                let held_exclusive = self.exclusive & mask;
                if held_shared | held_exclusive == 0 {
                    return ffi::SQLITE_OK;
                }
                for i in first..first + n {
                    if held_shared & (1 << i) != 0 {
                        node.shared[i] = node.shared[i].saturating_sub(1);
                    }
                    if held_exclusive & (1 << i) != 0 {
                        node.exclusive[i] = false;
                    }
                }
                self.shared &= !mask;
                self.exclusive &= !mask;
                // Hold back: a read slot released from exclusive (SQLite takes it shared next),
                // and the write lock while the connection still holds its read slot (both are
                // dropped together when the transaction ends).
                let hold_back = exclusive
                    && (first >= FIRST_READ_SLOT || (first == 0 && n == 1 && self.shared != 0));
                if hold_back {
                    HELD_BACK.with(|h| h.set(true));
                } else {
                    node.settle(0);
                }
                return ffi::SQLITE_OK;
            }
            // A refusal is for the busy handler that follows it (SQLite ends the read
            // transaction in between, which only releases), not for a later wait.
            REFUSED.with(|r| r.borrow_mut().take());
            // Taking a lock: settle what was held back on other bytes first, so a release is
            // held back only until the connection's next request.
            node.settle(mask);
            if !exclusive {
                if self.shared & mask != 0 {
                    return ffi::SQLITE_OK;
                }
                if node.exclusive[first] {
                    return ffi::SQLITE_BUSY;
                }
                if node.kernel[first] != Held::Read {
                    // From nothing, or a downgrade of an exclusive lock held back.
                    if !system_lock(node.fd, Held::Read, first, 1) {
                        return ffi::SQLITE_BUSY;
                    }
                    node.kernel[first] = Held::Read;
                }
                node.shared[first] += 1;
                self.shared |= mask;
                return ffi::SQLITE_OK;
            }
            // For the write lock, the bell's count before trying: a release after this changes
            // it, so a refused writer that sleeps while it is unchanged cannot miss the ring.
            let rings = node.bell.as_ref().filter(|_| first == 0).map(|b| b.rings());
            let refused = || {
                if let (Some(bell), Some(rings)) = (&node.bell, rings) {
                    let bell = Arc::clone(bell);
                    REFUSED.with(|r| *r.borrow_mut() = Some((bell, rings)));
                }
                ffi::SQLITE_BUSY
            };
            if (first..first + n).any(|i| node.shared[i] > 0 || node.exclusive[i]) {
                return refused();
            }
            // An exclusive lock held back since its release is still ours: no other process
            // can have taken it in between.
            if node.kernel[first..first + n]
                .iter()
                .any(|&k| k != Held::Write)
            {
                if !system_lock(node.fd, Held::Write, first, n) {
                    return refused();
                }
                node.kernel[first..first + n].fill(Held::Write);
            }
            node.exclusive[first..first + n].fill(true);
            self.exclusive |= mask;
            ffi::SQLITE_OK
        })
    }
}
