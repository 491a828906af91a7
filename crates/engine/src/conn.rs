//! Per-thread SQLite connections and the busy wait.

use crate::error::SqlContext;
use crate::settings::Settings;
use crate::spin::SpinLocked;
use crate::Result;
use rusqlite::{ffi, Connection, OpenFlags};
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

thread_local! {
    /// When the current engine call on this thread gives up waiting for a lock.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Sets this thread's deadline for the duration of one engine call (restoring an outer one).
pub(crate) struct Deadline {
    previous: Option<Instant>,
}

impl Deadline {
    pub(crate) fn start(timeout: Duration) -> Deadline {
        let deadline = Instant::now().checked_add(timeout);
        let previous = DEADLINE.with(|d| d.replace(deadline));
        Deadline { previous }
    }
}

impl Deadline {
    /// Bring this thread's deadline forward to at most `limit` from now, until dropped.
    fn shorten(limit: Duration) -> Deadline {
        let soon = Instant::now().checked_add(limit);
        let previous = DEADLINE.with(|d| {
            let now = d.get();
            d.set(match (now, soon) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            });
            now
        });
        Deadline { previous }
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        DEADLINE.with(|d| d.set(self.previous));
    }
}

/// SQLite's own busy timeout sleeps in steps of up to 100 ms, which starves a queue of many
/// short writers. This waits with a short exponential backoff, up to the call's deadline.
fn busy_wait(attempt: i32) -> bool {
    let Some(deadline) = DEADLINE.with(|d| d.get()) else {
        return false;
    };
    let now = Instant::now();
    if now >= deadline {
        return false;
    }
    // SQLite holds none of its mutexes while it waits here, so a fork need not wait for us.
    crate::vfs::settle();
    let _parked = Parked::new();
    if attempt < 4 {
        std::thread::yield_now();
    } else {
        let micros = 20u64 << (attempt - 4).min(6); // 20 µs .. 1.28 ms
        std::thread::sleep(Duration::from_micros(micros).min(deadline - now));
    }
    true
}

pub(crate) fn open(path: &Path) -> Result<Connection> {
    reap_inherited()?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut db = Connection::open_with_flags_and_vfs(path, flags, vfs()?)
        .ctx("opening the cache database")?;
    db.busy_handler(Some(busy_wait))
        .ctx("installing the busy handler")?;
    db.set_prepared_statement_cache_capacity(64);
    // SAFETY: the hook is a plain function with no state; it lives as long as the process.
    unsafe { ffi::sqlite3_wal_hook(db.handle(), Some(after_commit), std::ptr::null_mut()) };
    Ok(db)
}

/// SQLite's automatic checkpoint, at its default size.
const CHECKPOINT_FRAMES: c_int = 1000;
/// A WAL this long is also started over (D-030).
const RESTART_FRAMES: c_int = 4096;
/// How long a commit may wait for readers to leave the WAL so it can be started over. The
/// writer lock is held meanwhile, so this stays short; a reader that takes longer only
/// postpones the restart.
const RESTART_WAIT: Duration = Duration::from_millis(50);
/// After a restart that waited for readers and failed, none is tried in this process for
/// this long.
const RESTART_BACKOFF: Duration = Duration::from_millis(250);

/// Milliseconds after `EPOCH` before which no restart is tried.
static RESTART_NOT_BEFORE: AtomicU64 = AtomicU64::new(0);
static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// Runs after every commit (in place of SQLite's automatic checkpoint, which a WAL hook
/// replaces). SQLite only starts a WAL over when a writer finds no reader in it; processes
/// that read all the time always overlap, the WAL then grows without bound (gigabytes a
/// minute under load), and so does the WAL index every process maps. Past `RESTART_FRAMES`
/// a commit waits briefly for the readers in the WAL to finish, checkpoints it completely
/// and has the next writer start it over.
unsafe extern "C" fn after_commit(
    _: *mut c_void,
    db: *mut ffi::sqlite3,
    name: *const c_char,
    frames: c_int,
) -> c_int {
    if frames < CHECKPOINT_FRAMES {
        return ffi::SQLITE_OK;
    }
    let epoch = *EPOCH.get_or_init(Instant::now);
    let now = epoch.elapsed().as_millis() as u64;
    if frames >= RESTART_FRAMES && now >= RESTART_NOT_BEFORE.load(Ordering::Relaxed) {
        let _wait = Deadline::shorten(RESTART_WAIT);
        // SAFETY: SQLite hands the hook its open connection and the database's name.
        if unsafe { checkpoint(db, name, ffi::SQLITE_CHECKPOINT_RESTART) } == ffi::SQLITE_OK {
            return ffi::SQLITE_OK;
        }
        // Another process's checkpoint makes this fail at once, costing nothing: the next
        // commit tries again. Only a restart that waited for readers backs off.
        let waited = epoch.elapsed().as_millis() as u64 - now;
        if waited >= RESTART_WAIT.as_millis() as u64 / 2 {
            RESTART_NOT_BEFORE.store(
                now + waited + RESTART_BACKOFF.as_millis() as u64,
                Ordering::Relaxed,
            );
        }
    }
    // SQLite's own hook checkpoints after every commit once the WAL holds 1,000 frames, even
    // when all but a few were copied back already: with readers that keep the WAL from
    // restarting, that is two fsyncs per commit. Checkpoint once 1,000 frames are new.
    // SAFETY: the hook's connection is open; the WAL index's first region is mapped once the
    // connection has committed, and `nBackfill` follows the two 48-byte header copies.
    let backfilled = unsafe { crate::recent::wal_index(db) }
        .map(|region| unsafe { std::ptr::read_volatile(region.add(96).cast::<u32>()) });
    if let Some(done) = backfilled {
        if (frames as u32).saturating_sub(done) < CHECKPOINT_FRAMES as u32 {
            return ffi::SQLITE_OK;
        }
    }
    // SAFETY: as above. A checkpoint that fails is retried after a later commit; it never
    // fails the commit that has already happened.
    unsafe { checkpoint(db, name, ffi::SQLITE_CHECKPOINT_PASSIVE) };
    ffi::SQLITE_OK
}

/// # Safety
/// `db` is an open connection and `name` one of its database names.
unsafe fn checkpoint(db: *mut ffi::sqlite3, name: *const c_char, mode: c_int) -> c_int {
    // SAFETY: per the contract; SQLite accepts null for the two counts it can report.
    unsafe {
        ffi::sqlite3_wal_checkpoint_v2(db, name, mode, std::ptr::null_mut(), std::ptr::null_mut())
    }
}

/// Our VFS (D-029), registered on first use.
fn vfs() -> Result<&'static std::ffi::CStr> {
    crate::vfs::register().map_err(|rc| {
        crate::error::sql_error(
            "registering the cache's SQLite VFS",
            rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None),
        )
    })?;
    Ok(crate::vfs::NAME)
}

/// The WAL file beside a database (`<db>-wal`).
pub(crate) fn wal_path(db_path: &Path) -> std::path::PathBuf {
    let mut name = db_path.as_os_str().to_owned();
    name.push("-wal");
    name.into()
}

/// Open a connection that never writes to the directory (D-019). Returns it and, when it was
/// opened `immutable`, the [`AtRest`] stamp of the files it reads.
///
/// With a `-wal` file present, other connections may be live: share their WAL read-only
/// (`SQLITE_OPEN_READONLY`), which never writes the database file or the WAL. Without one,
/// the database is at rest, and a read-only connection would still create `-wal` and `-shm`
/// files; `immutable=1` reads the file as it is and creates nothing. The caller replaces an
/// immutable connection once its stamp no longer holds (a writer came, and maybe went).
pub(crate) fn open_read_only(path: &Path) -> Result<(Connection, Option<AtRest>)> {
    reap_inherited()?;
    // Stamped before opening, so that a change made while it opens shows as a change.
    let at_rest = AtRest::stamp(path);
    let immutable = at_rest.is_some();
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let uri = format!(
        "file:{}?{}",
        uri_path(path),
        if immutable { "immutable=1" } else { "mode=ro" }
    );
    let mut db = Connection::open_with_flags_and_vfs(uri, flags, vfs()?)
        .ctx("opening the cache database read-only")?;
    db.busy_handler(Some(busy_wait))
        .ctx("installing the busy handler")?;
    db.set_prepared_statement_cache_capacity(64);
    Ok((db, at_rest))
}

/// What an `immutable=1` connection relies on: `cache.db` unchanged and no writer around.
///
/// SQLite takes no locks and keeps no change counter for an immutable connection, so a
/// writer that opened, committed and closed (checkpointing into `cache.db` and deleting the
/// WAL) between two calls would leave it reading a file that changed under its page cache:
/// stale values, or "malformed" errors. The stamp is the identity, size and change times of
/// `cache.db` and of its directory (creating and deleting `-wal` changes the directory).
///
/// File times come from a coarse clock (one tick, 1 to 10 ms), so a change in the same tick
/// as the stamp could leave the times unchanged. A stamp whose times are within
/// [`AtRest::SETTLE`] of the moment it was taken is therefore never trusted for a later call.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct AtRest {
    db: (u64, u64, u64, i64, i64, i64, i64),
    dir: (u64, u64, i64, i64, i64, i64),
    /// The times were older than [`AtRest::SETTLE`] when taken.
    settled: bool,
}

impl AtRest {
    const SETTLE: std::time::Duration = std::time::Duration::from_millis(50);

    /// The stamp of the files now, or `None` when a `-wal` exists (a writer may be live) or
    /// they cannot be read.
    pub(crate) fn stamp(path: &Path) -> Option<AtRest> {
        use std::os::unix::fs::MetadataExt;
        let times = |m: &std::fs::Metadata| (m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec());
        let dir = std::fs::metadata(path.parent()?).ok()?;
        if wal_path(path).exists() {
            return None;
        }
        let db = std::fs::metadata(path).ok()?;
        let (dm, dmn, dc, dcn) = times(&dir);
        let (fm, fmn, fc, fcn) = times(&db);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let newest = [(dm, dmn), (dc, dcn), (fm, fmn), (fc, fcn)]
            .into_iter()
            .map(|(s, ns)| {
                std::time::Duration::new(s.max(0) as u64, ns.clamp(0, 999_999_999) as u32)
            })
            .max()
            .unwrap_or_default();
        Some(AtRest {
            db: (db.dev(), db.ino(), db.size(), fm, fmn, fc, fcn),
            dir: (dir.dev(), dir.ino(), dm, dmn, dc, dcn),
            settled: now.saturating_sub(newest) > Self::SETTLE,
        })
    }

    /// Whether a connection stamped `self` may serve another call: the files are as they
    /// were, and were already settled when stamped.
    pub(crate) fn holds(&self, path: &Path) -> bool {
        self.settled && self.unchanged(path)
    }

    /// Whether the files are as they were when stamped (ignoring how settled they were).
    pub(crate) fn unchanged(&self, path: &Path) -> bool {
        AtRest::stamp(path).is_some_and(|now| now.db == self.db && now.dir == self.dir)
    }
}

/// `path` escaped for an SQLite `file:` URI.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A WAL file larger than this is cut back to it when it is next started over (D-030).
const WAL_SIZE_LIMIT: i64 = 32 << 20;

/// The per-connection pragmas (the persistent ones are set when the database is created).
/// `cache_spill = OFF` keeps an unfinished write transaction out of the WAL and the WAL index,
/// so a forked child can roll back an inherited one in private memory (D-028).
pub(crate) fn apply_pragmas(db: &Connection, s: &Settings) -> Result<()> {
    db.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA cache_size = {}; PRAGMA mmap_size = {}; \
         PRAGMA journal_size_limit = {WAL_SIZE_LIMIT}; PRAGMA cache_spill = OFF;",
        s.sqlite_synchronous, s.sqlite_cache_size, s.sqlite_mmap_size
    ))
    .ctx("applying connection settings")
}

// ----- fork safety (D-028) -------------------------------------------------------------------
//
// SQLite's unix VFS keeps process-wide lock bookkeeping per file (which of this process's
// connections hold which locks). A forked child inherits a copy that still counts the parent's
// connections, and it takes no real (per-process) lock while those counts are non-zero. So the
// child closes every inherited connection before it opens one of its own, and the fork
// handlers make sure none is half-way through a SQLite call that could not be closed cleanly.

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
        crate::platform::at_fork(before_fork, after_fork, after_fork_in_child);
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
    crate::vfs::before_fork();
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
    crate::vfs::after_fork_in_parent();
    release_after_fork();
}

extern "C" fn after_fork_in_child() {
    FORKS.fetch_add(1, Ordering::SeqCst);
    // Only this thread exists in the child; the others' sections are gone with them.
    ACTIVE.store(DEPTH.with(|d| (d.get() > 0) as usize), Ordering::SeqCst);
    crate::vfs::after_fork_in_child();
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
                crate::vfs::settle();
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
struct Parked(bool);

impl Parked {
    fn new() -> Parked {
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
/// by `Conn::drop` and never touched again.
fn reap_inherited() -> Result<()> {
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
            let guard = WalWriteLock::acquire(&group[0].0)?;
            for (_, handle) in group {
                // SAFETY: as above.
                unsafe { close_inherited(*handle as *mut ffi::sqlite3) };
                entries.retain(|e| e.handle != *handle);
            }
            drop(guard);
            // Closing our descriptor dropped every lock this process held on the file.
            crate::vfs::kernel_dropped_locks(&group[0].0);
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
    fn acquire(shm: &Path) -> Result<WalWriteLock> {
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
        let deadline = DEADLINE.with(|d| d.get()).unwrap_or_else(Instant::now);
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
