//! Fork safety (D-028): the registry of this process's connections, the fork handlers, and
//! how a forked child lets go of what it inherited.
//!
//! SQLite's unix VFS keeps process-wide lock bookkeeping per file (which of this process's
//! connections hold which locks). A forked child inherits a copy that still counts the parent's
//! connections, and it takes no real (per-process) lock while those counts are non-zero. So the
//! child closes every inherited connection before it opens one of its own, and the fork
//! handlers make sure none is half-way through a SQLite call that could not be closed cleanly.

use crate::os::spin::SpinLocked;
use crate::Result;
use rusqlite::{ffi, Connection};
use std::cell::Cell;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

static FORKS: AtomicU64 = AtomicU64::new(0);
static AT_FORK: Once = Once::new();
/// A fork is being prepared: engine calls wait at their start until it is done.
static FORKING: AtomicBool = AtomicBool::new(false);
/// Threads inside an engine section that may hold SQLite mutexes (not parked in the busy wait).
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// The fork generation whose inherited connections have been closed.
static REAPED: AtomicU64 = AtomicU64::new(0);
/// SQLite's static mutexes the prepare handler holds across `fork()`: the unix VFS's big lock
/// (open/close of files and their bookkeeping) and the allocator's. Set once SQLite is initialised.
static VFS_MUTEX: AtomicPtr<ffi::sqlite3_mutex> = AtomicPtr::new(std::ptr::null_mut());
static MEM_MUTEX: AtomicPtr<ffi::sqlite3_mutex> = AtomicPtr::new(std::ptr::null_mut());
/// How long `fork()` waits for engine calls on other threads to leave SQLite. Not longer: one of
/// them may wait for the GIL the forking thread holds, or for a lock held in Python code.
const FORK_WAIT: Duration = Duration::from_millis(200);

thread_local! {
    /// Nesting depth of `Active` sections on this thread.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// The live engine connections of this process.
static REGISTRY: SpinLocked<Vec<Entry>> = SpinLocked::new(Vec::new());

struct Entry {
    handle: usize,
    fork: u64,
    in_call: Arc<AtomicBool>,
}

fn install() {
    AT_FORK.call_once(|| {
        // The handlers touch only atomics, this module's spin lock and SQLite's mutexes.
        crate::os::platform::at_fork(before_fork, after_fork, after_fork_in_child);
    });
}

extern "C" fn before_fork() {
    FORKING.store(true, Ordering::SeqCst);
    // Engine calls that started before FORKING was set finish (bounded); new ones wait.
    let start = Instant::now();
    while ACTIVE.load(Ordering::SeqCst) > DEPTH.with(|d| (d.get() > 0) as usize)
        && start.elapsed() < FORK_WAIT
    {
        std::thread::sleep(Duration::from_micros(100));
    }
    REGISTRY.lock();
    for m in [&VFS_MUTEX, &MEM_MUTEX] {
        let m = m.load(Ordering::Acquire);
        if !m.is_null() {
            // SAFETY: a static SQLite mutex, valid for the life of the process.
            unsafe { ffi::sqlite3_mutex_enter(m) };
        }
    }
    crate::os::vfs::before_fork();
}

fn release_after_fork() {
    for m in [&MEM_MUTEX, &VFS_MUTEX] {
        let m = m.load(Ordering::Acquire);
        if !m.is_null() {
            // SAFETY: entered by this thread in `before_fork`.
            unsafe { ffi::sqlite3_mutex_leave(m) };
        }
    }
    REGISTRY.unlock();
    FORKING.store(false, Ordering::SeqCst);
}

extern "C" fn after_fork() {
    crate::os::vfs::after_fork_in_parent();
    release_after_fork();
}

extern "C" fn after_fork_in_child() {
    FORKS.fetch_add(1, Ordering::SeqCst);
    // Only this thread exists in the child; the others' sections are gone with them.
    ACTIVE.store(DEPTH.with(|d| (d.get() > 0) as usize), Ordering::SeqCst);
    crate::os::vfs::after_fork_in_child();
    release_after_fork();
}

/// How many times this process image has been forked into (0 in the original process).
/// Cheaper than `getpid()` on every call, and it changes exactly when connections must not be reused.
pub(crate) fn fork_generation() -> u64 {
    install();
    FORKS.load(Ordering::Relaxed)
}

/// Enter the section in which this thread may call into SQLite, waiting while a fork is
/// prepared. Nested sections on one thread count once.
pub(crate) struct Active {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Active {
    pub(crate) fn enter() -> Active {
        DEPTH.with(|d| {
            if d.get() == 0 {
                gate_in();
            }
            d.set(d.get() + 1);
        });
        Active {
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        DEPTH.with(|d| {
            d.set(d.get() - 1);
            if d.get() == 0 {
                // Before leaving the section: a fork must not copy a release held back.
                crate::os::vfs::settle();
                ACTIVE.fetch_sub(1, Ordering::SeqCst);
            }
        });
    }
}

fn gate_in() {
    loop {
        ACTIVE.fetch_add(1, Ordering::SeqCst);
        if !FORKING.load(Ordering::SeqCst) {
            return;
        }
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
        while FORKING.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
    }
}

/// Leaves the active section while the busy handler sleeps, and re-enters it (past the gate).
pub(crate) struct Parked(bool);

impl Parked {
    pub(crate) fn new() -> Parked {
        let active = DEPTH.with(|d| d.get() > 0);
        if active {
            ACTIVE.fetch_sub(1, Ordering::SeqCst);
        }
        Parked(active)
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        if self.0 {
            gate_in();
        }
    }
}

/// A connection's entry in the registry. `in_call` is set while a thread uses the connection:
/// one inherited in that state is mid-way through SQLite code that does not exist in the
/// child, so the child leaks it rather than closing it.
pub(crate) struct Live {
    handle: usize,
    in_call: Arc<AtomicBool>,
}

impl Live {
    /// Record `db` (just opened by `open` or `open_read_only`) as live in this process.
    pub(crate) fn register(db: &Connection) -> Live {
        install();
        if VFS_MUTEX.load(Ordering::Acquire).is_null() {
            // SAFETY: SQLite is initialised (a connection is open); static mutexes live forever.
            unsafe {
                MEM_MUTEX.store(
                    ffi::sqlite3_mutex_alloc(ffi::SQLITE_MUTEX_STATIC_MEM),
                    Ordering::Release,
                );
                VFS_MUTEX.store(
                    ffi::sqlite3_mutex_alloc(ffi::SQLITE_MUTEX_STATIC_VFS1),
                    Ordering::Release,
                );
            }
        }
        // SAFETY: only the pointer value is taken.
        let handle = unsafe { db.handle() } as usize;
        let in_call = Arc::new(AtomicBool::new(false));
        let entry = Entry {
            handle,
            fork: fork_generation(),
            in_call: in_call.clone(),
        };
        REGISTRY.with(|r| r.push(entry));
        Live { handle, in_call }
    }

    /// Mark the connection in use until the guard drops.
    pub(crate) fn call(&self) -> InCall {
        self.in_call.store(true, Ordering::SeqCst);
        InCall(self.in_call.clone())
    }

    /// Forget the connection before it is closed normally.
    pub(crate) fn deregister(&self) {
        REGISTRY.with(|r| r.retain(|e| e.handle != self.handle));
    }
}

pub(crate) struct InCall(Arc<AtomicBool>);

impl Drop for InCall {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// In a forked child, close the connections inherited from the parent before this process
/// opens one of its own (D-028). Closing rolls back their transactions (in private memory:
/// `cache_spill = OFF`) and drops the parent's lock counts from the VFS bookkeeping, so the
/// child's own connections take real locks. The Rust `Connection`s of these handles are leaked
/// by `Conn::drop` and never touched again. `deadline` bounds the wait for the WAL write lock
/// the reaping takes (the calling engine call's deadline).
pub(crate) fn reap_inherited(deadline: Option<Instant>) -> Result<()> {
    let fork = fork_generation();
    if REAPED.load(Ordering::Acquire) == fork {
        return Ok(());
    }
    REGISTRY.with(|entries| {
        if REAPED.load(Ordering::Acquire) == fork {
            return Ok(());
        }
        let mut pending: Vec<(PathBuf, usize)> = Vec::new();
        entries.retain(|e| {
            if e.fork == fork {
                return true;
            }
            if e.in_call.load(Ordering::SeqCst) {
                return false; // mid-call at the fork: leaked
            }
            let db = e.handle as *mut ffi::sqlite3;
            // SAFETY: an open handle that no thread of this process uses.
            let writing =
                unsafe { ffi::sqlite3_txn_state(db, std::ptr::null()) } == ffi::SQLITE_TXN_WRITE;
            match (writing, shm_path(db)) {
                (true, Some(shm)) => {
                    pending.push((shm, e.handle));
                    true
                }
                _ => {
                    // SAFETY: as above; the handle is never used again.
                    unsafe { close_inherited(db) };
                    false
                }
            }
        });
        // A rollback re-reads the WAL index header and, if another process committed since the
        // transaction began, trims the WAL index hash tables past the new end. The parent
        // believes it holds the write lock for this connection, but this process holds nothing:
        // take the real WAL write lock first, so no writer is appending while the child trims.
        pending.sort();
        for group in pending.chunk_by(|a, b| a.0 == b.0) {
            let guard = WalWriteLock::acquire(&group[0].0, deadline)?;
            for (_, handle) in group {
                // SAFETY: as above.
                unsafe { close_inherited(*handle as *mut ffi::sqlite3) };
                entries.retain(|e| e.handle != *handle);
            }
            drop(guard);
            // Closing our descriptor dropped every lock this process held on the file.
            crate::os::vfs::kernel_dropped_locks(&group[0].0);
        }
        REAPED.store(fork, Ordering::Release);
        Ok(())
    })
}

/// Finalize the statements of an inherited handle (rusqlite caches them, and `sqlite3_close`
/// refuses a handle with live statements) and close it.
unsafe fn close_inherited(db: *mut ffi::sqlite3) {
    loop {
        let stmt = ffi::sqlite3_next_stmt(db, std::ptr::null_mut());
        if stmt.is_null() {
            break;
        }
        ffi::sqlite3_finalize(stmt);
    }
    ffi::sqlite3_close(db);
}

/// The `-shm` file of a handle's main database, for a WAL-mode handle.
fn shm_path(db: *mut ffi::sqlite3) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: an open handle; the name is copied before the handle can change.
    let name = unsafe { ffi::sqlite3_db_filename(db, c"main".as_ptr()) };
    if name.is_null() {
        return None;
    }
    let bytes = unsafe { std::ffi::CStr::from_ptr(name) }.to_bytes();
    if bytes.is_empty() {
        return None;
    }
    let mut path = std::ffi::OsStr::from_bytes(bytes).to_owned();
    path.push("-shm");
    Some(path.into())
}

/// The WAL write lock of SQLite's unix VFS, taken directly: byte 120 of the `-shm` file
/// (`UNIX_SHM_BASE + WAL_WRITE_LOCK`). Closing our descriptor releases it; so does SQLite's own
/// unlock of that byte when the inherited connection ends its write transaction.
struct WalWriteLock {
    _file: std::fs::File,
}

const WAL_WRITE_LOCK_BYTE: libc::off_t = 120;

impl WalWriteLock {
    fn acquire(shm: &Path, deadline: Option<Instant>) -> Result<WalWriteLock> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(shm)
            .map_err(|e| {
                crate::Error::io(
                    "opening the WAL index to close connections inherited through fork()",
                    Some(shm.to_path_buf()),
                    e,
                )
            })?;
        let deadline = deadline.unwrap_or_else(Instant::now);
        let mut pause = Duration::from_micros(50);
        loop {
            // SAFETY: an all-zero flock is valid; the fields are set below.
            let mut lock: libc::flock = unsafe { std::mem::zeroed() };
            lock.l_type = libc::F_WRLCK as _;
            lock.l_whence = libc::SEEK_SET as _;
            lock.l_start = WAL_WRITE_LOCK_BYTE;
            lock.l_len = 1;
            // SAFETY: a valid descriptor and flock.
            if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &lock) } == 0 {
                return Ok(WalWriteLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if !matches!(
                err.raw_os_error(),
                Some(libc::EAGAIN | libc::EACCES | libc::EINTR)
            ) {
                return Err(crate::Error::io(
                    "locking the WAL index to close connections inherited through fork()",
                    Some(shm.to_path_buf()),
                    err,
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(crate::Error::Timeout);
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(5));
        }
    }
}
