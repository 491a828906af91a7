//! Per-thread SQLite connections and the busy wait.

use crate::error::SqlContext;
use crate::os::fork::{reap_inherited, Parked};
use crate::settings::Settings;
use crate::Result;
use rusqlite::{ffi, Connection, OpenFlags};
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

thread_local! {
    /// When the current engine call on this thread gives up waiting for a lock.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Set while this thread runs a call that must not wait (`without_waiting`).
    static NO_WAIT: Cell<bool> = const { Cell::new(false) };
    /// A checkpoint that a commit under `without_waiting` left for later: the hook's
    /// checkpoint size and the WAL's frame count after that commit.
    static DEFERRED: Cell<Option<(usize, c_int)>> = const { Cell::new(None) };
}

/// Run `f` so that no lock is waited for: where another connection holds one, the call
/// fails at once with `Error::Timeout` (having changed nothing), and a commit leaves its WAL
/// checkpoint, which syncs the disk, for `Cache::run_deferred_checkpoint`. For a caller
/// that holds a lock of its own meanwhile (the binding, Python's GIL) and makes the call
/// again without this when it fails.
pub fn without_waiting<T>(f: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            let _ = NO_WAIT.try_with(|n| n.set(self.0));
        }
    }
    let _restore = Restore(NO_WAIT.with(|n| n.replace(true)));
    f()
}

/// Whether a commit on this thread left a checkpoint for `Cache::run_deferred_checkpoint`.
pub fn checkpoint_deferred() -> bool {
    DEFERRED.try_with(|d| d.get().is_some()).unwrap_or(false)
}

/// The checkpoint a commit on this thread left for later, if any (see `without_waiting`).
pub(crate) fn take_deferred() -> Option<(usize, c_int)> {
    DEFERRED.try_with(|d| d.take()).ok().flatten()
}

/// Sets this thread's deadline for the duration of one engine call (restoring an outer one).
pub(crate) struct Deadline {
    previous: Option<Instant>,
}

impl Deadline {
    pub(crate) fn start(timeout: Duration) -> Deadline {
        let deadline = if NO_WAIT.with(Cell::get) {
            Some(Instant::now()) // passed by the time anything waits
        } else {
            Instant::now().checked_add(timeout)
        };
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

impl Deadline {
    /// This thread's deadline for the engine call it is in, if any.
    pub(crate) fn current() -> Option<Instant> {
        DEADLINE.with(|d| d.get())
    }
}

impl Drop for Deadline {
    fn drop(&mut self) {
        DEADLINE.with(|d| d.set(self.previous));
    }
}

/// SQLite's own busy timeout sleeps in steps of up to 100 ms, which starves a queue of many
/// short writers. This waits with a short exponential backoff, up to the call's deadline.
/// The longest a writer refused the write lock sleeps on its bell before trying again.
const HANDOFF_CAP: Duration = Duration::from_micros(1280);
/// The busy handler's try from which a writer refused the write lock sleeps on its bell
/// (D-070): after four yields and six timed sleeps (20 µs .. 640 µs, about 1.3 ms in all).
/// Ringing a sleeper costs the releasing writer a wake-up inside its own call (tens of µs on
/// a virtual machine), so the bell is kept for waits that are already long.
const HANDOFF_FROM: i32 = 10;

fn busy_wait(attempt: i32) -> bool {
    let Some(deadline) = DEADLINE.with(|d| d.get()) else {
        return false;
    };
    let now = Instant::now();
    if now >= deadline {
        return false;
    }
    // SQLite holds none of its mutexes while it waits here, so a fork need not wait for us.
    crate::os::vfs::settle();
    let _parked = Parked::new();
    if attempt < 4 {
        std::thread::yield_now();
    } else if attempt >= HANDOFF_FROM
        && crate::os::vfs::wait_for_write_lock(HANDOFF_CAP.min(deadline - now))
    {
        // Refused the write lock for a while: sleep until its holder lets go (D-070) rather
        // than for a guessed time. The cap is the longest step below: all a waiter behind a
        // holder that never rings (a stock `sqlite3`, a process killed holding the lock)
        // waits before it tries again.
    } else {
        let micros = 20u64 << (attempt - 4).min(6); // 20 µs .. 1.28 ms
        std::thread::sleep(Duration::from_micros(micros).min(deadline - now));
    }
    true
}

pub(crate) fn open(path: &Path) -> Result<Connection> {
    reap_inherited(Deadline::current())?;
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut db = Connection::open_with_flags_and_vfs(path, flags, vfs()?)
        .ctx("opening the cache database")?;
    db.busy_handler(Some(busy_wait))
        .ctx("installing the busy handler")?;
    db.set_prepared_statement_cache_capacity(64);
    // The hook's argument is this connection's checkpoint size, carried in the pointer
    // itself: nothing is allocated, so nothing has to outlive the connection.
    let frames = path
        .parent()
        .and_then(crate::os::platform::file_system_space)
        .map_or(CHECKPOINT_FRAMES, |(total, _)| checkpoint_frames(total));
    // SAFETY: the hook is a plain function; its argument is an integer, never dereferenced.
    unsafe {
        ffi::sqlite3_wal_hook(
            db.handle(),
            Some(after_commit),
            frames as usize as *mut c_void,
        )
    };
    Ok(db)
}

/// SQLite's automatic checkpoint, at its default size.
const CHECKPOINT_FRAMES: c_int = 1000;
/// The smallest checkpoint size, on the smallest file systems.
const CHECKPOINT_FRAMES_MIN: c_int = 16;
/// A WAL this long is also started over (D-030), at the default checkpoint size; smaller
/// checkpoint sizes scale it down.
const RESTART_FRAMES: c_int = 4096;

/// The checkpoint size on a file system of `total` bytes: SQLite's default, or a sixteenth
/// of a small file system (D-048). A checkpoint copies the WAL's new pages into `cache.db`,
/// which grows by as many; on a disk of a few MiB, a WAL of SQLite's default 4 MiB could
/// never be checkpointed once the disk was full, and then not even a delete could run. A
/// sixteenth fits in the room the reserve gives back (an eighth).
fn checkpoint_frames(total: u64) -> c_int {
    // A frame is a page (SQLite's default 4 KiB) and a 24-byte header.
    let frames = total / 16 / (4096 + 24);
    frames.clamp(CHECKPOINT_FRAMES_MIN as u64, CHECKPOINT_FRAMES as u64) as c_int
}
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
    checkpoint_size: *mut c_void,
    db: *mut ffi::sqlite3,
    name: *const c_char,
    frames: c_int,
) -> c_int {
    crate::store::notes::commit_seen(frames as u32);
    let checkpoint_frames = checkpoint_size as usize as c_int;
    if frames < checkpoint_frames {
        return ffi::SQLITE_OK;
    }
    if NO_WAIT.with(Cell::get) {
        // SAFETY: forwarded from SQLite.
        if unsafe { wal_work_due(checkpoint_frames, db, frames) } {
            let _ = DEFERRED.try_with(|d| d.set(Some((checkpoint_size as usize, frames))));
        }
        return ffi::SQLITE_OK;
    }
    // SAFETY: forwarded from SQLite.
    unsafe { keep_wal_short(checkpoint_frames, db, name, frames) }
}

/// Run the checkpoint a commit left for later (`take_deferred`) on `db`, its connection.
///
/// # Safety
/// `db` is an open connection, with no statement running on this thread.
pub(crate) unsafe fn run_deferred(db: *mut ffi::sqlite3, (size, frames): (usize, c_int)) {
    // SAFETY: per the contract.
    unsafe { keep_wal_short(size as c_int, db, c"main".as_ptr(), frames) };
}

/// Whether `keep_wal_short` would checkpoint now: a restart is due, or a checkpoint is.
///
/// # Safety
/// `db` is an open connection.
unsafe fn wal_work_due(checkpoint_frames: c_int, db: *mut ffi::sqlite3, frames: c_int) -> bool {
    // SAFETY: forwarded.
    restart_due(checkpoint_frames, frames)
        || unsafe { checkpoint_due(checkpoint_frames, db, frames) }
}

/// Past `RESTART_FRAMES` (scaled to the checkpoint size), unless restarts are backed off.
fn restart_due(checkpoint_frames: c_int, frames: c_int) -> bool {
    let now = EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64;
    frames >= RESTART_FRAMES * checkpoint_frames / CHECKPOINT_FRAMES
        && now >= RESTART_NOT_BEFORE.load(Ordering::Relaxed)
}

/// SQLite's own hook checkpoints after every commit once the WAL holds 1,000 frames, even
/// when all but a few were copied back already: with readers that keep the WAL from
/// restarting, that is two fsyncs per commit. A checkpoint is due once a checkpoint's worth
/// of frames (1,000 at the default size) are new.
///
/// # Safety
/// `db` is an open connection.
unsafe fn checkpoint_due(checkpoint_frames: c_int, db: *mut ffi::sqlite3, frames: c_int) -> bool {
    // SAFETY: the WAL index's first region is mapped once the connection has committed, and
    // `nBackfill` follows the two 48-byte header copies.
    let backfilled = unsafe { crate::store::recent::wal_index(db) }
        .map(|region| unsafe { std::ptr::read_volatile(region.add(96).cast::<u32>()) });
    backfilled.is_none_or(|done| (frames as u32).saturating_sub(done) >= checkpoint_frames as u32)
}

/// Checkpoint once a checkpoint's worth of frames is new, and start the WAL over past
/// `RESTART_FRAMES` (see `after_commit`).
///
/// # Safety
/// `db` is an open connection and `name` one of its database names.
unsafe fn keep_wal_short(
    checkpoint_frames: c_int,
    db: *mut ffi::sqlite3,
    name: *const c_char,
    frames: c_int,
) -> c_int {
    if restart_due(checkpoint_frames, frames) {
        let epoch = *EPOCH.get_or_init(Instant::now);
        let now = epoch.elapsed().as_millis() as u64;
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
    // SAFETY: as above. Read after a restart that failed, which may have copied frames back.
    if !unsafe { checkpoint_due(checkpoint_frames, db, frames) } {
        return ffi::SQLITE_OK;
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
    crate::os::vfs::register().map_err(|rc| {
        crate::error::sql_error(
            "registering the cache's SQLite VFS",
            rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None),
        )
    })?;
    Ok(crate::os::vfs::NAME)
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
    reap_inherited(Deadline::current())?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checkpoint_size_is_a_sixteenth_of_a_small_disk() {
        assert_eq!(checkpoint_frames(2 << 20), 31);
        assert_eq!(checkpoint_frames(8 << 20), 127);
        assert_eq!(checkpoint_frames(0), CHECKPOINT_FRAMES_MIN);
        assert_eq!(checkpoint_frames(66 << 20), CHECKPOINT_FRAMES);
        assert_eq!(checkpoint_frames(u64::MAX), CHECKPOINT_FRAMES);
    }
}
