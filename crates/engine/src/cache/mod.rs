//! The cache: one directory, one SQLite database in WAL mode, value files beside it.
//!
//! The schema and its pages-per-write budget are recorded in
//! `docs/decisions/D-001-schema-and-pages-per-write.md`.

use crate::error::NotCache;
use crate::error::{sql_error, SqlContext};
use crate::format::key::{Key, Scalar, RAW_ENCODED, RAW_NATIVE, RAW_PICKLED};
use crate::format::stored::{checksum, Entry, Kind, StoredValue, ValueFile, ValueHandle, ValueRef};
use crate::os::fork;
use crate::os::lock::DirLock;
use crate::os::modes::Modes;
use crate::os::reserve::Reserve;
use crate::settings::{EvictionPolicy, SettingValue, Settings};
use crate::store::conn::{self, Deadline};
use crate::store::files::{Found, ValueFiles};
use crate::store::notes::{Kept, Notes};
use crate::store::recent::{Memo, Recent};
use crate::store::statements::Db;
use crate::{Error, Result};
use rusqlite::types::{ToSqlOutput, Value as SqlValue, ValueRef as Sql};
use rusqlite::{params, Connection, OptionalExtension};
use std::cell::RefCell;
use std::io::Read;
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use thread_local::ThreadLocal;

/// The on-disk format this build writes and the newest it reads (`PRAGMA user_version`).
pub const FORMAT_VERSION: i64 = 1;
/// `PRAGMA application_id`: marks a database as ours ("DCOX").
const APPLICATION_ID: i64 = 0x4443_4f58;
pub use crate::names::DB_NAME;
/// Rows per batch in the maintenance loops that release the write lock between batches.
const BATCH: i64 = 100;

/// How to open a cache directory.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// How long a call waits on a database another connection holds locked before `Error::Timeout`.
    pub timeout: Duration,
    /// Settings to apply; the rest come from the directory, or the defaults for a new one.
    pub settings: Vec<(String, SettingValue)>,
    /// Open an existing cache without writing a byte to its directory; every write then
    /// fails with `Error::ReadOnly` (D-019).
    pub read_only: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            timeout: Duration::from_secs(60),
            settings: Vec::new(),
            read_only: false,
        }
    }
}

/// Expiry and tag for a write.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Seconds from now until the item expires; `None` never expires.
    pub expire: Option<f64>,
    pub tag: Option<Scalar>,
}

/// Result of [`Cache::incr`].
#[derive(Debug, Clone, PartialEq)]
pub enum Incr {
    /// The new value, stored.
    Value(i64),
    /// The key was absent (or expired) and no default was given.
    Missing,
    /// The stored value is not an i64 int, or the sum overflows i64: nothing was written;
    /// the caller may do the arithmetic itself inside a transaction.
    NotInt,
}

/// A handle on one cache directory. Cheap to clone and share between threads: each thread
/// gets its own SQLite connection, and a handle keeps working in a forked child.
#[derive(Clone)]
pub struct Cache {
    inner: Arc<Inner>,
}

struct Inner {
    directory: PathBuf,
    db_path: PathBuf,
    files: ValueFiles,
    timeout: Duration,
    settings: RwLock<Settings>,
    /// Bumped whenever a per-connection pragma changes, so other threads re-apply them.
    generation: AtomicU64,
    page_size: i64,
    conns: ThreadLocal<RefCell<Option<Conn>>>,
    /// The notes this handle's connections wrote lately (D-065).
    kept: Arc<Kept>,
    /// What this handle's connections read lately (D-017, D-065).
    memo: Arc<std::sync::Mutex<Memo>>,
    /// Opened with `read_only`: no write reaches SQLite or the directory (D-019).
    read_only: bool,
    /// Modes of the files and directories this handle creates (D-027).
    modes: Modes,
    /// Space held back for removals on a full disk (D-039); `None` on a read-only handle.
    reserve: Option<Reserve>,
}

struct Conn {
    /// Never closed from a process other than the one that opened it (see `Drop`).
    db: ManuallyDrop<Db>,
    /// Its entry in the registry a forked child closes inherited connections from (D-028).
    live: fork::Live,
    /// `fork::fork_generation()` when opened: a different one means we are in a forked child.
    fork: u64,
    /// Nesting depth of `begin()` on this thread.
    depth: u32,
    generation: u64,
    /// Files to unlink once the outermost transaction commits.
    unlink_on_commit: Vec<String>,
    /// Files written inside the transaction: unlinked if it rolls back.
    unlink_on_rollback: Vec<String>,
    /// Small values read lately, valid until anyone commits (D-017).
    recent: Recent,
    /// A read-only connection opened `immutable=1` (no `-wal` file existed then): the stamp
    /// of the files it reads, which must hold for it to serve a call (D-019).
    at_rest: Option<conn::AtRest>,
    /// When this connection last checked that `cache.db` is still the file it opened.
    checked: Instant,
}

impl Conn {
    fn new(
        db: Connection,
        generation: u64,
        at_rest: Option<conn::AtRest>,
        notes: Option<Notes>,
        memo: Arc<std::sync::Mutex<Memo>>,
    ) -> Conn {
        Conn {
            live: fork::Live::register(&db),
            db: ManuallyDrop::new(Db::new(db)),
            fork: fork::fork_generation(),
            depth: 0,
            generation,
            unlink_on_commit: Vec::new(),
            unlink_on_rollback: Vec::new(),
            recent: Recent::new(notes.map(Arc::new), memo),
            at_rest,
            checked: Instant::now(),
        }
    }

    /// `COMMIT` this connection's transaction, leaving the note of what it changed for every
    /// other connection's memo (D-065).
    fn commit(&mut self) -> rusqlite::Result<()> {
        self.recent.committing(&self.db);
        commit(&self.db)
    }

    /// The WAL index header to validate remembered reads against, when they may be used: not
    /// inside a transaction (its own writes are uncommitted), and not on an immutable
    /// connection (it has no WAL index to watch, and mapping one would create the -shm file).
    fn header(&mut self) -> Option<[u8; 48]> {
        if self.depth == 0 && self.at_rest.is_none() {
            self.recent.now(&self.db)
        } else {
            None
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // A connection inherited through fork() is closed (or deliberately leaked) through the
        // registry by the child's first open (D-028); its Rust side must never touch it again.
        if self.fork == fork::fork_generation() {
            let _active = fork::Active::enter();
            self.recent.unmap();
            self.live.deregister();
            // SAFETY: dropped exactly once, here.
            unsafe { ManuallyDrop::drop(&mut self.db) }
        }
    }
}

/// What a read does with bytes kept in a value file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FileMode {
    /// Read them into memory.
    Read,
    /// Verify them and return the file's path (python-diskcache's `read=True`).
    Handle,
    /// Leave them for the caller to read into its own buffer.
    Defer,
}

/// How often a connection checks that `cache.db` was not deleted behind its back: a stat of
/// the path, too dear for every call and cheap once in this long.
const MOVED_CHECK_INTERVAL: Duration = Duration::from_millis(500);
/// How often a read on an immutable connection is made again when `cache.db` changed under it.
const READ_ONLY_RETRIES: usize = 3;

/// The checkpoints a removal on a full disk tries, mildest first (D-039): a passive one lets
/// the next write start the WAL over in the space it already has; a truncating one (which
/// waits for readers) gives the WAL's space back.
const FULL_DISK_CHECKPOINTS: [&str; 2] = [
    "PRAGMA wal_checkpoint(PASSIVE)",
    "PRAGMA wal_checkpoint(TRUNCATE)",
];

/// A value file just written, with the directory lock held until its row is (D-005).
pub(crate) type NewFile = (String, Option<DirLock>);

/// An entry as [`Cache::import_many`] writes it: with the times and access count it had in
/// the cache it comes from.
pub struct Imported<'a> {
    pub key: Key,
    pub value: ValueRef<'a>,
    /// When it was stored, and when it expires (seconds since the epoch).
    pub store_time: f64,
    pub expire_time: Option<f64>,
    /// When it was last read, and how often.
    pub access_time: f64,
    pub access_count: i64,
    pub tag: Option<Scalar>,
}

/// A row's value columns, copied out of SQLite.
pub(crate) struct Row {
    pub(crate) rowid: i64,
    pub(crate) expire_time: Option<f64>,
    pub(crate) tag: Option<Scalar>,
    pub(crate) kind: i64,
    pub(crate) crc: u32,
    pub(crate) filename: Option<String>,
    pub(crate) size: i64,
    pub(crate) inline: Inline,
}

pub(crate) enum Inline {
    Null,
    Int(i64),
    Float(f64),
    Text(Vec<u8>),
    Blob(Vec<u8>),
}

/// A value ready to be written: small ones inline, large ones already in their file.
pub(crate) struct Prepared<'a> {
    pub(crate) kind: Kind,
    pub(crate) crc: u32,
    pub(crate) size: i64,
    pub(crate) inline: Option<ValueRef<'a>>,
    pub(crate) file: Option<String>,
}

#[derive(Clone, Copy)]
struct Hot {
    statistics: bool,
    eviction_policy: EvictionPolicy,
    size_limit: i64,
    cull_limit: i64,
    disk_min_file_size: i64,
}

impl Hot {
    /// Whether every get is also a write: it counts a hit or a miss, or records the access
    /// for the eviction policy. Such gets never use the memo of recent reads.
    fn reads_write(&self) -> bool {
        self.statistics
            || matches!(
                self.eviction_policy,
                EvictionPolicy::LeastRecentlyUsed | EvictionPolicy::LeastFrequentlyUsed
            )
    }
}

impl From<&Settings> for Hot {
    fn from(s: &Settings) -> Hot {
        Hot {
            statistics: s.statistics,
            eviction_policy: s.eviction_policy,
            size_limit: s.size_limit,
            cull_limit: s.cull_limit,
            disk_min_file_size: s.disk_min_file_size,
        }
    }
}

/// When and how an entry is written: the time, its expiry and its tag.
pub(crate) struct Stamp<'o> {
    pub(crate) now: f64,
    pub(crate) expire_time: Option<f64>,
    pub(crate) tag: &'o Option<Scalar>,
}

impl<'o> Stamp<'o> {
    pub(crate) fn new(options: &'o WriteOptions) -> Stamp<'o> {
        let now = now();
        Stamp {
            now,
            expire_time: options.expire.map(|e| now + e),
            tag: &options.tag,
        }
    }
}

/// Whether a write may find its key already present.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fresh {
    /// Look for the key and overwrite it in place if present.
    Maybe,
    /// The caller knows the key is absent (a queue push just numbered it): insert directly.
    Known,
}

/// Count and size changes of one operation, applied to `meta` in one statement.
#[derive(Default)]
pub(crate) struct Delta {
    pub(crate) count: i64,
    pub(crate) size: i64,
}

/// The columns `row_from` maps, in its order.
macro_rules! row_columns {
    () => {
        "rowid, expire_time, tag, kind, crc, filename, size, value"
    };
}
const ROW_COLUMNS: &str = row_columns!();

pub(crate) fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn live(expire_time: Option<f64>, now: f64) -> bool {
    expire_time.is_none_or(|t| t > now)
}

/// The least an open waits for the directory lock and for the database (D-055).
const OPEN_WAIT: Duration = Duration::from_secs(60);

impl Cache {
    /// Open (creating if needed) the cache in `directory`.
    ///
    /// Opening is serialised by a directory lock, so any number of processes may open a fresh
    /// directory at once. An existing cache is only read unless a given setting differs.
    pub fn open(directory: impl AsRef<Path>, mut options: OpenOptions) -> Result<Cache> {
        let requested = Modes::take(&mut options.settings)?;
        // A misspelled or out-of-range setting is refused before anything is created.
        let mut probe = Settings::default();
        for (name, value) in &options.settings {
            probe.set(name, value)?;
        }
        let directory = directory.as_ref().to_path_buf();
        crate::store::layout::refuse_fanout_root(&directory)?;
        let db_path = directory.join(DB_NAME);
        crate::store::files::refuse_unsafe_db_files(&db_path)?;
        // Opening waits at least OPEN_WAIT, whatever the handle's timeout: a FanoutCache or a
        // Django backend opens its shards with a timeout of 10 ms, and under load, handles
        // opening the same directory at once (a thread each) would otherwise time out on
        // each other's directory lock. python-diskcache 5.6.3 retries its opening statements
        // for 60 s for the same reason (D-055).
        let open_wait = options.timeout.max(OPEN_WAIT);
        let _deadline = Deadline::start(open_wait);
        let _active = fork::Active::enter();
        let kept = Arc::new(Kept::new());
        let memo = Arc::new(std::sync::Mutex::new(Memo::new()));
        let (conn, settings, modes) = if options.read_only {
            // Nothing is created: no directory, no lock file, no schema, no settings (D-019).
            match std::fs::metadata(&directory) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(Error::NotACache(NotCache::NotADirectory {
                        directory: directory.clone(),
                    }))
                }
                Err(e) => {
                    return Err(Error::io(
                        "opening a cache read-only: the directory cannot be read",
                        Some(directory),
                        e,
                    ))
                }
            }
            if let Err(e) = std::fs::metadata(&db_path) {
                return Err(Error::io_advised(
                    "opening a cache read-only: the directory holds no cache database",
                    crate::error::IoAdvice::ReadOnlyCreatesNothing,
                    Some(db_path),
                    e,
                ));
            }
            let (db, at_rest) = conn::open_read_only(&db_path)?;
            let notes = Notes::open(&directory, false, Modes::PRIVATE, kept.clone());
            let db = Conn::new(db, 0, at_rest, notes, memo.clone());
            let settings = {
                let _call = db.live.call();
                init_database(&db.db, &options.settings, true)?
            };
            (db, settings, Modes::PRIVATE)
        } else {
            // The directory and everything in it are private unless asked otherwise (D-027).
            let modes = Modes::prepare(&directory, requested, &db_path)?;
            let lock = DirLock::exclusive(&directory, open_wait, modes)?;
            modes.precreate(&db_path)?;
            let notes = Notes::open(&directory, true, modes, kept.clone());
            let db = Conn::new(conn::open(&db_path)?, 0, None, notes, memo.clone());
            let settings = {
                let _call = db.live.call();
                init_database(&db.db, &options.settings, false)?
            };
            drop(lock);
            (db, settings, modes)
        };
        let page_size: i64 = {
            let _call = conn.live.call();
            conn::apply_pragmas(&conn.db, &settings)?;
            conn.db
                .query_row("PRAGMA page_size", [], |r| r.get(0))
                .ctx("reading the page size")?
        };
        let reserve = (!options.read_only).then(|| Reserve::new(&directory));
        if let Some(reserve) = &reserve {
            reserve.ensure(modes.file);
        }
        let inner = Inner {
            reserve,
            files: ValueFiles::new(&directory, modes),
            modes,
            directory,
            db_path,
            timeout: options.timeout,
            settings: RwLock::new(settings),
            generation: AtomicU64::new(0),
            page_size,
            conns: ThreadLocal::new(),
            read_only: options.read_only,
            kept,
            memo,
        };
        *inner.conns.get_or(|| RefCell::new(None)).borrow_mut() = Some(conn);
        Ok(Cache {
            inner: Arc::new(inner),
        })
    }

    pub fn directory(&self) -> &Path {
        &self.inner.directory
    }

    /// Call `attempt` until it returns `Some` or `timeout` has passed, sleeping between tries
    /// until some process writes to this cache (D-013). Returns `None` on timeout.
    pub fn wait_for<T>(
        &self,
        timeout: Duration,
        attempt: impl FnMut() -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        crate::os::bell::wait_for(self.directory(), timeout, attempt)
    }

    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// Whether this handle was opened with `read_only` (D-019).
    pub fn read_only(&self) -> bool {
        self.inner.read_only
    }

    /// `Err(Error::ReadOnly)` on a read-only handle: every write path calls this before it
    /// touches anything.
    fn writable(&self) -> Result<()> {
        if self.inner.read_only {
            return Err(Error::ReadOnly {
                directory: self.inner.directory.clone(),
            });
        }
        Ok(())
    }

    /// The settings as this handle currently applies them.
    pub fn settings(&self) -> Settings {
        self.inner
            .settings
            .read()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// The settings the hot paths consult, copied without allocating.
    fn hot(&self) -> Hot {
        match self.inner.settings.read() {
            Ok(s) => Hot::from(&*s),
            Err(poisoned) => Hot::from(&*poisoned.into_inner()),
        }
    }

    /// Path of the value file stored under `relative` (as in [`StoredValue::File`]).
    pub fn value_path(&self, relative: &str) -> PathBuf {
        self.inner.files.path(relative)
    }

    // ----- connections and transactions -------------------------------------------------

    fn with_conn<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        self.call_on_conn(f, None)
    }

    /// Run a read `f` on this thread's connection. On a read-only handle reading a database
    /// at rest (`immutable=1`), a writer may checkpoint into `cache.db` while `f` reads it;
    /// then the result may mix two versions, so the read is made again on a new connection.
    fn read_call<T>(&self, mut f: impl FnMut(&mut Conn) -> Result<T>) -> Result<T> {
        if !self.inner.read_only {
            return self.with_conn(f);
        }
        let torn = std::cell::Cell::new(false);
        for _ in 0..READ_ONLY_RETRIES {
            torn.set(false);
            let result = self.call_on_conn(&mut f, Some(&torn));
            if !torn.get() {
                return result;
            }
        }
        self.with_conn(f)
    }

    /// `with_conn`, telling `torn` when an immutable connection's files changed during `f`
    /// (the connection is dropped then, so the next call opens a new one).
    fn call_on_conn<T>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<T>,
        torn: Option<&std::cell::Cell<bool>>,
    ) -> Result<T> {
        let _deadline = Deadline::start(self.inner.timeout);
        let _active = fork::Active::enter();
        let cell = self.inner.conns.get_or(|| RefCell::new(None));
        let mut slot = cell.try_borrow_mut().map_err(|_| {
            Error::invalid("a cache call was re-entered on one thread while another was running")
        })?;
        let fork = fork::fork_generation();
        if slot.as_ref().is_some_and(|c| c.fork != fork) {
            *slot = None; // forked: the parent's connection is leaked by Conn::drop, not closed
        }
        if slot
            .as_ref()
            .and_then(|c| c.at_rest)
            .is_some_and(|stamp| !stamp.holds(&self.inner.db_path))
        {
            // A writer arrived (or came and went) since this connection opened immutable:
            // open again, sharing the writer's WAL if it is still there.
            *slot = None;
        }
        let conn = match &mut *slot {
            Some(c) => c,
            none => none.insert(self.connect()?),
        };
        let _call = conn.live.call();
        if conn.checked.elapsed() >= MOVED_CHECK_INTERVAL {
            self.check_not_moved(conn)?;
        }
        let generation = self.inner.generation.load(Ordering::Acquire);
        if conn.generation != generation {
            conn::apply_pragmas(&conn.db, &self.settings())?;
            conn.generation = generation;
        }
        let result = f(conn);
        let changed = conn
            .at_rest
            .is_some_and(|stamp| !stamp.unchanged(&self.inner.db_path));
        drop(_call);
        if changed {
            *slot = None;
            if let Some(torn) = torn {
                torn.set(true);
            }
        }
        result
    }

    /// Run `f` on this thread's connection with the remembered reads and the header that
    /// validates them (`None` where they may not be used; see `Conn::header`).
    pub(crate) fn read_remembering<T>(
        &self,
        mut f: impl FnMut(&Db, &mut Recent, Option<[u8; 48]>) -> Result<T>,
    ) -> Result<T> {
        self.read_call(|c| {
            let header = c.header();
            f(&c.db, &mut c.recent, header)
        })
    }

    /// Run `f` on this thread's connection if it is open and may serve remembered reads now:
    /// opened in this process, and checked lately not to have been moved (`check_not_moved`).
    /// Nothing here calls SQLite, so no deadline and no fork section are needed.
    fn remembered<T>(&self, f: impl FnOnce(&mut Conn) -> Option<T>) -> Option<T> {
        let cell = self.inner.conns.get()?;
        let mut slot = cell.try_borrow_mut().ok()?;
        let conn = slot.as_mut()?;
        if conn.fork != fork::fork_generation() || conn.checked.elapsed() >= MOVED_CHECK_INTERVAL {
            return None;
        }
        f(conn)
    }

    /// Run `f` on this thread's connection with no transaction of its own.
    pub(crate) fn read<T>(&self, mut f: impl FnMut(&Db) -> Result<T>) -> Result<T> {
        self.read_call(|c| f(&c.db))
    }

    fn connect(&self) -> Result<Conn> {
        crate::store::files::refuse_unsafe_db_files(&self.inner.db_path)?;
        let (db, at_rest) = if self.inner.read_only {
            conn::open_read_only(&self.inner.db_path)?
        } else {
            (conn::open(&self.inner.db_path)?, None)
        };
        let conn = Conn::new(
            db,
            self.inner.generation.load(Ordering::Acquire),
            at_rest,
            Notes::open(
                &self.inner.directory,
                !self.inner.read_only,
                self.inner.modes,
                self.inner.kept.clone(),
            ),
            self.inner.memo.clone(),
        );
        {
            let _call = conn.live.call();
            conn::apply_pragmas(&conn.db, &self.settings())?;
        }
        Ok(conn)
    }

    /// Fail if `cache.db` was deleted or replaced since this connection opened it. SQLite
    /// would go on using the unlinked file, and every write from here on would be invisible
    /// to other processes (which open a new, empty `cache.db`): a silent split.
    fn check_not_moved(&self, conn: &mut Conn) -> Result<()> {
        let mut moved: std::os::raw::c_int = 0;
        // SAFETY: the handle is open; HAS_MOVED writes one int through the pointer.
        let rc = unsafe {
            rusqlite::ffi::sqlite3_file_control(
                conn.db.handle(),
                c"main".as_ptr(),
                rusqlite::ffi::SQLITE_FCNTL_HAS_MOVED,
                (&mut moved as *mut std::os::raw::c_int).cast(),
            )
        };
        if rc == rusqlite::ffi::SQLITE_OK && moved != 0 {
            return Err(Error::io(
                "the cache database was deleted or replaced while this handle had it open, so \
                 its writes would be invisible to every other process; close this handle and \
                 open the cache again",
                Some(self.inner.db_path.clone()),
                std::io::Error::from_raw_os_error(libc::ENOENT),
            ));
        }
        conn.checked = Instant::now();
        Ok(())
    }

    /// Run `f` as one atomic write: its own `BEGIN IMMEDIATE … COMMIT`, or a savepoint inside
    /// this thread's open transaction. `f` lists files to unlink once the write is committed.
    /// `new_file` (with the shared directory lock held since it was written) is unlinked if
    /// the write does not happen.
    pub(crate) fn write<T>(
        &self,
        new_file: Option<NewFile>,
        f: impl FnOnce(&Db, &mut Vec<String>) -> Result<T>,
    ) -> Result<T> {
        self.writable()?;
        let (new_name, dir_lock) = match new_file {
            Some((n, l)) => (Some(n), l),
            None => (None, None),
        };
        let result = self.with_conn(|c| {
            let top = c.depth == 0;
            run(
                &c.db,
                if top {
                    "BEGIN IMMEDIATE"
                } else {
                    "SAVEPOINT op"
                },
            )
            .map_err(|e| sql_error("starting a write", e))?;
            if top {
                c.recent.writing(&c.db);
            }
            // Holding the write lock now: a concurrent check(fix=True) sees our row before our file.
            drop(dir_lock);
            let mut unlink = Vec::new();
            match f(&c.db, &mut unlink) {
                Ok(v) if top => match c.commit() {
                    Ok(()) => {
                        c.recent.committed(&c.db);
                        unlink.iter().for_each(|n| self.inner.files.remove(n));
                        Ok(v)
                    }
                    Err(e) => {
                        c.recent.rolled_back();
                        let _ = run(&c.db, "ROLLBACK");
                        Err(sql_error("committing a write", e))
                    }
                },
                Ok(v) => {
                    run(&c.db, "RELEASE op").ctx("ending a write inside a transaction")?;
                    c.unlink_on_commit.append(&mut unlink);
                    c.unlink_on_rollback.extend(new_name.iter().cloned());
                    Ok(v)
                }
                Err(e) => {
                    if top {
                        c.recent.rolled_back();
                    }
                    let _ = run(
                        &c.db,
                        if top {
                            "ROLLBACK"
                        } else {
                            "ROLLBACK TO op; RELEASE op"
                        },
                    );
                    Err(e)
                }
            }
        });
        if result.is_err() {
            if let Some(n) = &new_name {
                self.inner.files.remove(n);
            }
        }
        result
    }

    /// A write that removes entries and so frees space (D-039). On a full disk it gives up the
    /// reserve, lets the WAL start over (a passive checkpoint, with the reserve's room to grow
    /// `cache.db`; then, if that was not enough, a truncating one) and runs `f` again: a full
    /// cache can always be emptied and a full queue drained. `f` must be safe to run again
    /// after a rollback.
    pub(crate) fn freeing<T>(
        &self,
        mut f: impl FnMut(&Db, &mut Vec<String>) -> Result<T>,
    ) -> Result<T> {
        let first = self.write(None, &mut f);
        if !first.as_ref().is_err_and(Error::is_disk_full) {
            if first.is_ok() {
                if let Some(reserve) = &self.inner.reserve {
                    reserve.ensure_if_missing(self.inner.modes.file);
                }
            }
            return first;
        }
        if let Some(reserve) = &self.inner.reserve {
            reserve.release();
        }
        let mut result = first;
        for checkpoint in FULL_DISK_CHECKPOINTS {
            // A checkpoint that fails (readers, or still no room) leaves the WAL as it was.
            let _ = self.with_conn(|c| {
                c.db.query_row(checkpoint, [], |_| Ok(()))
                    .ctx("checkpointing the WAL")
            });
            result = self.write(None, &mut f);
            if !result.as_ref().is_err_and(Error::is_disk_full) {
                break;
            }
        }
        if result.is_ok() {
            if let Some(reserve) = &self.inner.reserve {
                reserve.ensure(self.inner.modes.file);
            }
        }
        result
    }

    /// Begin (or nest into) this thread's transaction. Every `begin` needs one `end`.
    pub fn begin(&self) -> Result<()> {
        self.writable()?;
        self.with_conn(|c| {
            if c.depth == 0 {
                run(&c.db, "BEGIN IMMEDIATE")
                    .map_err(|e| sql_error("starting a transaction", e))?;
                c.recent.writing(&c.db);
            }
            c.depth += 1;
            Ok(())
        })
    }

    /// End this thread's innermost transaction level, committing (or rolling back) at the outermost.
    pub fn end(&self, commit: bool) -> Result<()> {
        self.with_conn(|c| {
            if c.depth == 0 {
                return Err(Error::invalid(
                    "end() without a matching begin() on this thread",
                ));
            }
            c.depth -= 1;
            if c.depth > 0 {
                return Ok(());
            }
            let files = &self.inner.files;
            let committed = if commit { c.commit() } else { Ok(()) };
            if commit && committed.is_ok() {
                c.recent.committed(&c.db);
                c.unlink_on_commit.drain(..).for_each(|n| files.remove(&n));
                c.unlink_on_rollback.clear();
                return Ok(());
            }
            c.recent.rolled_back();
            let rolled_back = run(&c.db, "ROLLBACK");
            c.unlink_on_rollback
                .drain(..)
                .for_each(|n| files.remove(&n));
            c.unlink_on_commit.clear();
            match committed {
                Err(e) => Err(sql_error(
                    "committing a transaction (it was rolled back)",
                    e,
                )),
                Ok(()) => rolled_back.ctx("rolling back a transaction"),
            }
        })
    }

    /// Run `f` in a transaction: committed if it returns Ok, rolled back otherwise.
    pub fn transact<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.begin()?;
        match f() {
            Ok(v) => {
                self.end(true)?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.end(false);
                Err(e)
            }
        }
    }

    /// Run the WAL checkpoint that this thread's last commit under
    /// [`crate::without_waiting`] left for later, if it left one. A checkpoint syncs the disk;
    /// the caller runs this once it no longer holds its own lock. A checkpoint that fails is
    /// tried again after a later commit, as after any commit.
    pub fn run_deferred_checkpoint(&self) -> Result<()> {
        let Some(due) = conn::take_deferred() else {
            return Ok(());
        };
        self.with_conn(|c| {
            if c.depth == 0 {
                // SAFETY: this thread's open connection, with no statement running.
                unsafe { conn::run_deferred(c.db.handle(), due) };
            }
            Ok(())
        })
    }

    /// Whether this thread has a transaction open on this handle (a `begin` without its
    /// `end`). A blocking wait skips waiting then: it holds the write lock, so no other
    /// writer could bring what it waits for.
    /// The shared directory lock a writer holds from creating a value file until it holds
    /// SQLite's write lock (D-005). Inside a transaction it already holds that lock, so
    /// `check(fix=True)` cannot be sweeping; taking the directory lock there would only make
    /// the writer and a waiting `check()` wait for each other.
    pub(crate) fn file_guard(&self) -> Result<Option<DirLock>> {
        if self.in_transaction() {
            return Ok(None);
        }
        DirLock::shared(&self.inner.directory, self.inner.timeout, self.inner.modes).map(Some)
    }

    pub fn in_transaction(&self) -> bool {
        let fork = fork::fork_generation();
        self.inner
            .conns
            .get()
            .and_then(|cell| {
                cell.try_borrow()
                    .ok()
                    .map(|slot| slot.as_ref().is_some_and(|c| c.depth > 0 && c.fork == fork))
            })
            .unwrap_or(false)
    }

    /// Close this thread's connection (others close when the handle drops).
    pub fn close(&self) {
        if let Some(cell) = self.inner.conns.get() {
            if let Ok(mut slot) = cell.try_borrow_mut() {
                if let Some(c) = slot.as_mut() {
                    // An inherited connection may already be closed by the child (D-028).
                    if c.depth > 0 && c.fork == fork::fork_generation() {
                        let _active = fork::Active::enter();
                        let _call = c.live.call();
                        let _ = run(&c.db, "ROLLBACK");
                    }
                }
                *slot = None;
            }
        }
    }
}

// Declared after `row_columns!` so the submodules can use it.
mod check;
mod entries;
mod maintenance;
mod read;
mod rows;
mod schema;
mod values;
mod write;

pub use check::Problem;
pub(crate) use entries::{entry_select, Placed};
use rows::*;
pub(crate) use rows::{apply_delta, inline_sql, key_from, key_sql};
use schema::*;
#[cfg(test)]
pub(crate) use values::VALUE_COLUMNS;
pub(crate) use values::{PreviewColumns, ValueColumns, PREVIEW_COLUMNS};
