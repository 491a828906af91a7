//! The cache: one directory, one SQLite database in WAL mode, value files beside it.
//!
//! The schema and its pages-per-write budget are recorded in
//! `docs/decisions/D-001-schema-and-pages-per-write.md`.

use crate::conn::{self, Deadline};
use crate::error::{sql_error, SqlContext};
use crate::files::{Found, ValueFiles};
use crate::key::{Key, Scalar, RAW_ENCODED, RAW_NATIVE, RAW_PICKLED};
use crate::lock::DirLock;
use crate::recent::Recent;
use crate::settings::{EvictionPolicy, SettingValue, Settings};
use crate::stored::{checksum, Entry, Kind, StoredValue, ValueFile, ValueRef};
use crate::{Error, Result};
use rusqlite::types::{ToSqlOutput, Value as SqlValue, ValueRef as Sql};
use rusqlite::{params, Connection, OptionalExtension};
use std::cell::RefCell;
use std::io::Read;
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use thread_local::ThreadLocal;

/// The on-disk format this build writes and the newest it reads (`PRAGMA user_version`).
pub const FORMAT_VERSION: i64 = 1;
/// `PRAGMA application_id`: marks a database as ours ("DCOX").
const APPLICATION_ID: i64 = 0x4443_4f58;
/// The database file inside the cache directory.
pub const DB_NAME: &str = "cache.db";
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
    /// Opened with `read_only`: no write reaches SQLite or the directory (D-019).
    read_only: bool,
}

struct Conn {
    /// Never closed from a process other than the one that opened it (see `Drop`).
    db: ManuallyDrop<Connection>,
    /// `conn::fork_generation()` when opened: a different one means we are in a forked child.
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
    /// A read-only connection opened `immutable=1` (no `-wal` file existed then).
    immutable: bool,
}

impl Conn {
    /// The WAL index header to validate remembered reads against, when they may be used: not
    /// inside a transaction (its own writes are uncommitted), and not on an immutable
    /// connection (it has no WAL index to watch, and mapping one would create the -shm file).
    fn header(&mut self) -> Option<[u8; 48]> {
        if self.depth == 0 && !self.immutable {
            self.recent.now(&self.db)
        } else {
            None
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // A connection inherited through fork() belongs to the parent: closing it here could
        // disturb the parent's locks, so the child leaks it instead.
        if self.fork == conn::fork_generation() {
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
pub(crate) const ROW_COLUMNS: &str = row_columns!();

pub(crate) fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn live(expire_time: Option<f64>, now: f64) -> bool {
    expire_time.is_none_or(|t| t > now)
}

impl Cache {
    /// Open (creating if needed) the cache in `directory`.
    ///
    /// Opening is serialised by a directory lock, so any number of processes may open a fresh
    /// directory at once. An existing cache is only read unless a given setting differs.
    pub fn open(directory: impl AsRef<Path>, options: OpenOptions) -> Result<Cache> {
        let directory = directory.as_ref().to_path_buf();
        crate::layout::refuse_fanout_root(&directory)?;
        let db_path = directory.join(DB_NAME);
        let _deadline = Deadline::start(options.timeout);
        let (db, settings, immutable) = if options.read_only {
            // Nothing is created: no directory, no lock file, no schema, no settings (D-019).
            match std::fs::metadata(&directory) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(Error::NotACache(format!(
                        "{} is not a directory",
                        directory.display()
                    )))
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
                return Err(Error::io(
                    "opening a cache read-only: the directory holds no cache database; \
                     read_only=True never creates one",
                    Some(db_path),
                    e,
                ));
            }
            let (db, immutable) = conn::open_read_only(&db_path)?;
            let settings = init_database(&db, &options.settings, true)?;
            (db, settings, immutable)
        } else {
            std::fs::create_dir_all(&directory).map_err(|e| {
                Error::io("creating the cache directory", Some(directory.clone()), e)
            })?;
            let lock = DirLock::exclusive(&directory, options.timeout)?;
            let db = conn::open(&db_path)?;
            let settings = init_database(&db, &options.settings, false)?;
            drop(lock);
            (db, settings, false)
        };
        conn::apply_pragmas(&db, &settings)?;
        let page_size: i64 = db
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .ctx("reading the page size")?;
        let inner = Inner {
            files: ValueFiles::new(&directory),
            directory,
            db_path,
            timeout: options.timeout,
            settings: RwLock::new(settings),
            generation: AtomicU64::new(0),
            page_size,
            conns: ThreadLocal::new(),
            read_only: options.read_only,
        };
        let conn = Conn {
            db: ManuallyDrop::new(db),
            fork: conn::fork_generation(),
            depth: 0,
            generation: 0,
            unlink_on_commit: Vec::new(),
            unlink_on_rollback: Vec::new(),
            recent: Recent::new(),
            immutable,
        };
        *inner.conns.get_or(|| RefCell::new(None)).borrow_mut() = Some(conn);
        Ok(Cache {
            inner: Arc::new(inner),
        })
    }

    pub fn directory(&self) -> &Path {
        &self.inner.directory
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
            return Err(Error::ReadOnly(format!(
                "this cache handle was opened with read_only=True and cannot write; open \
                 {:?} without read_only=True to change it",
                self.inner.directory.display().to_string()
            )));
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
        let _deadline = Deadline::start(self.inner.timeout);
        let cell = self.inner.conns.get_or(|| RefCell::new(None));
        let mut slot = cell.try_borrow_mut().map_err(|_| {
            Error::invalid("a cache call was re-entered on one thread while another was running")
        })?;
        let fork = conn::fork_generation();
        if slot.as_ref().is_some_and(|c| c.fork != fork) {
            *slot = None; // forked: the parent's connection is leaked by Conn::drop, not closed
        }
        if self.inner.read_only
            && slot.as_ref().is_some_and(|c| c.immutable)
            && conn::wal_path(&self.inner.db_path).exists()
        {
            // A writer arrived since this connection opened immutable: share its WAL now.
            *slot = None;
        }
        let conn = match &mut *slot {
            Some(c) => c,
            none => none.insert(self.connect()?),
        };
        let generation = self.inner.generation.load(Ordering::Acquire);
        if conn.generation != generation {
            conn::apply_pragmas(&conn.db, &self.settings())?;
            conn.generation = generation;
        }
        f(conn)
    }

    /// Run `f` on this thread's connection with the remembered reads and the header that
    /// validates them (`None` where they may not be used; see `Conn::header`).
    pub(crate) fn read_remembering<T>(
        &self,
        f: impl FnOnce(&Connection, &mut Recent, Option<[u8; 48]>) -> Result<T>,
    ) -> Result<T> {
        self.with_conn(|c| {
            let header = c.header();
            f(&c.db, &mut c.recent, header)
        })
    }

    /// Run `f` on this thread's connection with no transaction of its own.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.with_conn(|c| f(&c.db))
    }

    fn connect(&self) -> Result<Conn> {
        let (db, immutable) = if self.inner.read_only {
            conn::open_read_only(&self.inner.db_path)?
        } else {
            (conn::open(&self.inner.db_path)?, false)
        };
        conn::apply_pragmas(&db, &self.settings())?;
        Ok(Conn {
            db: ManuallyDrop::new(db),
            fork: conn::fork_generation(),
            depth: 0,
            generation: self.inner.generation.load(Ordering::Acquire),
            unlink_on_commit: Vec::new(),
            unlink_on_rollback: Vec::new(),
            recent: Recent::new(),
            immutable,
        })
    }

    /// Run `f` as one atomic write: its own `BEGIN IMMEDIATE … COMMIT`, or a savepoint inside
    /// this thread's open transaction. `f` lists files to unlink once the write is committed.
    /// `new_file` (with the shared directory lock held since it was written) is unlinked if
    /// the write does not happen.
    pub(crate) fn write<T>(
        &self,
        new_file: Option<(String, DirLock)>,
        f: impl FnOnce(&Connection, &mut Vec<String>) -> Result<T>,
    ) -> Result<T> {
        self.writable()?;
        let (new_name, dir_lock) = match new_file {
            Some((n, l)) => (Some(n), Some(l)),
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
            // Holding the write lock now: a concurrent check(fix=True) sees our row before our file.
            drop(dir_lock);
            let mut unlink = Vec::new();
            match f(&c.db, &mut unlink) {
                Ok(v) if top => match run(&c.db, "COMMIT") {
                    Ok(()) => {
                        unlink.iter().for_each(|n| self.inner.files.remove(n));
                        Ok(v)
                    }
                    Err(e) => {
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

    /// Begin (or nest into) this thread's transaction. Every `begin` needs one `end`.
    pub fn begin(&self) -> Result<()> {
        self.writable()?;
        self.with_conn(|c| {
            if c.depth == 0 {
                run(&c.db, "BEGIN IMMEDIATE")
                    .map_err(|e| sql_error("starting a transaction", e))?;
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
            let committed = if commit { run(&c.db, "COMMIT") } else { Ok(()) };
            if commit && committed.is_ok() {
                c.unlink_on_commit.drain(..).for_each(|n| files.remove(&n));
                c.unlink_on_rollback.clear();
                return Ok(());
            }
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

    /// Whether this thread has a transaction open on this handle (a `begin` without its
    /// `end`). A blocking wait skips waiting then: it holds the write lock, so no other
    /// writer could bring what it waits for.
    pub fn in_transaction(&self) -> bool {
        let fork = conn::fork_generation();
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
                    if c.depth > 0 {
                        let _ = run(&c.db, "ROLLBACK");
                    }
                }
                *slot = None;
            }
        }
    }

    // ----- values in and out ------------------------------------------------------------

    /// Put a large payload in its file (holding the shared directory lock until the row is
    /// written); keep a small one inline.
    pub(crate) fn prepare<'a>(
        &self,
        value: ValueRef<'a>,
    ) -> Result<(Prepared<'a>, Option<(String, DirLock)>)> {
        self.writable()?;
        if matches!(value, ValueRef::Float(f) if f.is_nan()) {
            // SQLite stores a NaN REAL as NULL; encode it (set_value does) instead.
            return Err(Error::invalid(
                "value: a NaN float cannot take the native float path; store it as an encoded value",
            ));
        }
        let payload = value.payload();
        let bytes = payload.bytes();
        let crc = checksum(bytes);
        let min = self.hot().disk_min_file_size;
        let fits_inline =
            matches!(value, ValueRef::Int(_) | ValueRef::Float(_)) || (bytes.len() as i64) < min;
        if fits_inline {
            return Ok((
                Prepared {
                    kind: value.kind(),
                    crc,
                    size: 0,
                    inline: Some(value),
                    file: None,
                },
                None,
            ));
        }
        let lock = DirLock::shared(&self.inner.directory, self.inner.timeout)?;
        let name = ValueFiles::new_name()?;
        self.inner.files.write(&name, bytes)?;
        let prepared = Prepared {
            kind: value.kind(),
            crc,
            size: bytes.len() as i64,
            inline: None,
            file: Some(name.clone()),
        };
        Ok((prepared, Some((name, lock))))
    }

    fn read_row(&self, db: &Connection, key: &Key) -> Result<Option<Row>> {
        let (k, raw) = key_sql(key);
        let mut stmt = db
            .prepare_cached(concat!(
                "SELECT ",
                row_columns!(),
                " FROM cache WHERE key = ?1 AND raw = ?2"
            ))
            .ctx("reading an entry")?;
        stmt.query_row(params![k, raw], row_from)
            .optional()
            .ctx("reading an entry")?
            .transpose()
    }

    pub(crate) fn load(&self, row: &mut Row, as_file: bool) -> Result<Found<StoredValue>> {
        self.load_mode(
            row,
            if as_file {
                FileMode::Handle
            } else {
                FileMode::Read
            },
        )
    }

    fn load_mode(&self, row: &mut Row, mode: FileMode) -> Result<Found<StoredValue>> {
        let kind = Kind::from_i64(row.kind)?;
        let crc = row.crc;
        let Some(name) = row.filename.as_deref() else {
            let inline = std::mem::replace(&mut row.inline, Inline::Null);
            return load_inline(kind, crc, inline).map(Found::Yes);
        };
        let files = &self.inner.files;
        if mode == FileMode::Defer && kind == Kind::Bytes {
            let file = ValueFile {
                name: name.to_owned(),
                crc,
                size: row.size.max(0) as u64,
            };
            return Ok(Found::Yes(StoredValue::Deferred(file)));
        }
        if mode == FileMode::Handle && kind == Kind::Bytes {
            return Ok(match files.verify(name, crc)? {
                Found::Yes(_) => Found::Yes(StoredValue::File(files.path(name))),
                Found::Missing => Found::Missing,
            });
        }
        let data = match files.read(name, crc)? {
            Found::Yes(d) => d,
            Found::Missing => return Ok(Found::Missing),
        };
        Ok(Found::Yes(match kind {
            Kind::Str => StoredValue::Str(
                String::from_utf8(data)
                    .map_err(|_| Error::corrupt("a text value file is not valid UTF-8"))?,
            ),
            Kind::Bytes => StoredValue::Bytes(data),
            Kind::Encoded => StoredValue::Encoded(data),
            Kind::Pickled => StoredValue::Pickled(data),
            Kind::Int | Kind::Float => {
                return Err(Error::corrupt("a numeric value names a value file"))
            }
        }))
    }

    /// A value file named by a row was missing. Inside a read that raced a delete that is a
    /// miss; if the row still names it, the cache was damaged.
    fn missing_file(&self, db: &Connection, key: &Key, name: &str) -> Result<bool> {
        let still = self
            .read_row(db, key)?
            .and_then(|r| r.filename)
            .is_some_and(|f| f == name);
        if still {
            return Err(Error::corrupt(format!(
                "the value file {name:?} of this entry is missing (deleted behind the cache's back?); \
                 check(fix=True) removes such entries"
            )));
        }
        Ok(false)
    }

    // ----- reads ------------------------------------------------------------------------

    /// Read an unexpired entry. With `as_file`, bytes kept in a value file come back as
    /// `StoredValue::File` (checksum verified) rather than read into memory.
    pub fn get(&self, key: &Key, as_file: bool) -> Result<Option<Entry>> {
        self.get_mode(
            key,
            if as_file {
                FileMode::Handle
            } else {
                FileMode::Read
            },
        )
    }

    /// Like `get`, but bytes kept in a value file come back as [`StoredValue::Deferred`], for the
    /// caller to read with [`Cache::read_value_file`] into a buffer of its own: one allocation
    /// and one copy for a large value instead of two.
    pub fn get_deferred(&self, key: &Key) -> Result<Option<Entry>> {
        self.get_mode(key, FileMode::Defer)
    }

    /// Read a deferred value file into `buf` (exactly `file.size` bytes) and verify its checksum.
    /// Returns false if the file is gone (a concurrent delete won; treat the read as a miss and
    /// ask again).
    pub fn read_value_file(&self, file: &ValueFile, buf: &mut [u8]) -> Result<bool> {
        Ok(matches!(
            self.inner.files.read_into(&file.name, file.crc, buf)?,
            Found::Yes(())
        ))
    }

    fn get_mode(&self, key: &Key, mode: FileMode) -> Result<Option<Entry>> {
        let s = self.hot();
        // A read-only handle skips the hit counts and access times rather than failing.
        let bookkeeping = (s.statistics
            || matches!(
                s.eviction_policy,
                EvictionPolicy::LeastRecentlyUsed | EvictionPolicy::LeastFrequentlyUsed
            ))
            && !self.inner.read_only;
        if bookkeeping {
            return self.write(None, |db, _| {
                let now = now();
                let found = match self.read_row(db, key)? {
                    Some(mut row) if live(row.expire_time, now) => {
                        match self.load_mode(&mut row, mode)? {
                            Found::Yes(v) => Some((row, v)),
                            Found::Missing => None,
                        }
                    }
                    _ => None,
                };
                if s.statistics {
                    let col = if found.is_some() { "hits" } else { "misses" };
                    db.prepare_cached(&format!("UPDATE meta SET {col} = {col} + 1"))
                        .and_then(|mut st| st.execute([]))
                        .ctx("counting a hit or miss")?;
                }
                let Some((row, value)) = found else {
                    return Ok(None);
                };
                self.touch_access(db, row.rowid, s.eviction_policy, now)?;
                Ok(Some(Entry {
                    value,
                    expire_time: row.expire_time,
                    tag: row.tag,
                }))
            });
        }
        self.with_conn(|c| loop {
            // Taken before the read: a commit after it shows as a changed header later.
            // An immutable connection has no WAL index to watch (and mapping one would create
            // the -shm file): it reads without the recent-values cache.
            let header = c.header();
            if let Some(h) = &header {
                if let Some(e) = c.recent.get(h, key) {
                    if live(e.expire_time, now()) {
                        return Ok(Some(e.clone()));
                    }
                    return Ok(None);
                }
            }
            let Some(mut row) = self.read_row(&c.db, key)? else {
                return Ok(None);
            };
            if !live(row.expire_time, now()) {
                return Ok(None);
            }
            match self.load_mode(&mut row, mode)? {
                Found::Yes(value) => {
                    let entry = Entry {
                        value,
                        expire_time: row.expire_time,
                        tag: row.tag,
                    };
                    if let Some(h) = header {
                        c.recent.put(h, key, &entry);
                    }
                    return Ok(Some(entry));
                }
                Found::Missing => {
                    let name = row.filename.unwrap_or_default();
                    if !self.missing_file(&c.db, key, &name)? {
                        continue;
                    }
                }
            }
        })
    }

    fn touch_access(
        &self,
        db: &Connection,
        rowid: i64,
        policy: EvictionPolicy,
        now: f64,
    ) -> Result<()> {
        let sql = match policy {
            EvictionPolicy::LeastRecentlyUsed => "UPDATE cache SET access_time = ?2 WHERE rowid = ?1",
            EvictionPolicy::LeastFrequentlyUsed => "UPDATE cache SET access_count = access_count + 1 WHERE rowid = ?1 AND ?2 IS NOT NULL",
            _ => return Ok(()),
        };
        db.prepare_cached(sql)
            .and_then(|mut st| st.execute(params![rowid, now]))
            .ctx("recording an access")?;
        Ok(())
    }

    pub fn contains(&self, key: &Key) -> Result<bool> {
        self.with_conn(|c| {
            let (k, raw) = key_sql(key);
            let mut stmt =
                c.db.prepare_cached("SELECT expire_time FROM cache WHERE key = ?1 AND raw = ?2")
                    .ctx("looking up a key")?;
            let expire: Option<Option<f64>> = stmt
                .query_row(params![k, raw], |r| r.get(0))
                .optional()
                .ctx("looking up a key")?;
            Ok(expire.is_some_and(|e| live(e, now())))
        })
    }

    /// Read many keys in one transaction; `None` for each miss.
    pub fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Entry>>> {
        let s = self.hot();
        if (s.statistics
            || matches!(
                s.eviction_policy,
                EvictionPolicy::LeastRecentlyUsed | EvictionPolicy::LeastFrequentlyUsed
            ))
            && !self.inner.read_only
        {
            // Every read is also a write here; keep one lock round trip per key like get().
            return keys.iter().map(|k| self.get(k, false)).collect();
        }
        self.with_conn(|c| {
            let top = c.depth == 0;
            if top {
                run(&c.db, "BEGIN").ctx("starting a read")?;
            }
            let result = (|| {
                let now = now();
                let mut out = Vec::with_capacity(keys.len());
                for key in keys {
                    let entry = match self.read_row(&c.db, key)? {
                        Some(mut row) if live(row.expire_time, now) => {
                            match self.load(&mut row, false)? {
                                Found::Yes(value) => Some(Entry {
                                    value,
                                    expire_time: row.expire_time,
                                    tag: row.tag,
                                }),
                                Found::Missing => {
                                    let name = row.filename.clone().unwrap_or_default();
                                    self.missing_file(&c.db, key, &name)?;
                                    None
                                }
                            }
                        }
                        _ => None,
                    };
                    out.push(entry);
                }
                Ok(out)
            })();
            if top {
                let _ = run(&c.db, "COMMIT");
            }
            result
        })
    }

    /// The first (`last == false`) or last entry in insertion order. Expired entries met on
    /// the way are deleted, as python-diskcache does.
    pub fn peekitem(&self, last: bool) -> Result<Option<(Key, Entry)>> {
        let order = if last { "DESC" } else { "ASC" };
        if self.inner.read_only {
            return self.peekitem_read_only(order);
        }
        self.write(None, |db, unlink| {
            let now = now();
            let mut delta = Delta::default();
            let sql = format!(concat!("SELECT ", row_columns!(), ", key, raw FROM cache ORDER BY rowid {} LIMIT 1"), order);
            let found = loop {
                let mut stmt = db.prepare_cached(&sql).ctx("peeking")?;
                let got = stmt
                    .query_row([], |r| Ok((row_from(r)?, key_from(r.get_ref(8)?, r.get(9)?))))
                    .optional()
                    .ctx("peeking")?;
                drop(stmt);
                let Some((row, key)) = got else { break None };
                let mut row = row?;
                if !live_or_equal(row.expire_time, now) {
                    delete_row(db, &row, unlink, &mut delta)?;
                    continue;
                }
                match self.load(&mut row, false)? {
                    Found::Yes(value) => break Some((key?, Entry { value, expire_time: row.expire_time, tag: row.tag })),
                    Found::Missing => {
                        return Err(Error::corrupt(format!(
                            "the value file {:?} of an entry is missing; check(fix=True) removes such entries",
                            row.filename.unwrap_or_default()
                        )))
                    }
                }
            };
            apply_delta(db, &delta)?;
            Ok(found)
        })
    }

    /// `peekitem` for a read-only handle: expired entries are skipped, not deleted.
    fn peekitem_read_only(&self, order: &str) -> Result<Option<(Key, Entry)>> {
        self.read(|db| {
            let sql = format!(
                concat!(
                    "SELECT ",
                    row_columns!(),
                    ", key, raw FROM cache WHERE expire_time IS NULL OR expire_time >= ?1 \
                     ORDER BY rowid {} LIMIT 1"
                ),
                order
            );
            let mut stmt = db.prepare_cached(&sql).ctx("peeking")?;
            let got = stmt
                .query_row([now()], |r| {
                    Ok((row_from(r)?, key_from(r.get_ref(8)?, r.get(9)?)))
                })
                .optional()
                .ctx("peeking")?;
            drop(stmt);
            let Some((row, key)) = got else {
                return Ok(None);
            };
            let mut row = row?;
            match self.load(&mut row, false)? {
                Found::Yes(value) => Ok(Some((
                    key?,
                    Entry {
                        value,
                        expire_time: row.expire_time,
                        tag: row.tag,
                    },
                ))),
                Found::Missing => Err(Error::corrupt(format!(
                    "the value file {:?} of an entry is missing; check(fix=True) removes such entries",
                    row.filename.unwrap_or_default()
                ))),
            }
        })
    }

    /// A page of the str keys that start with `prefix`, in key order, strictly after `after`.
    /// An indexed range scan: `[prefix, prefix with its last byte incremented)`.
    pub fn keys_prefixed(
        &self,
        prefix: &str,
        after: Option<&str>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<Key>> {
        let lo = prefix.as_bytes().to_vec();
        let mut hi = lo.clone();
        // The smallest byte string above every string starting with `prefix`.
        while let Some(last) = hi.pop() {
            if last < 0xff {
                hi.push(last + 1);
                break;
            }
        }
        let unbounded = hi.is_empty();
        let (cmp, order) = if reverse { ("<", "DESC") } else { (">", "ASC") };
        let sql = format!(
            "SELECT key FROM cache WHERE raw = 1 AND key >= ?1 AND (?2 OR key < ?3) AND (?4 IS NULL OR key {cmp} ?4) \
             AND typeof(key) = 'text' ORDER BY key {order} LIMIT ?5"
        );
        self.read(|db| {
            let mut stmt = db.prepare_cached(&sql).ctx("listing keys")?;
            let rows = stmt
                .query_map(
                    params![
                        ToSqlOutput::Borrowed(Sql::Text(&lo)),
                        unbounded,
                        ToSqlOutput::Borrowed(Sql::Text(&hi)),
                        after,
                        limit as i64
                    ],
                    |r| Ok(key_from(r.get_ref(0)?, RAW_NATIVE)),
                )
                .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
                .ctx("listing keys")?;
            rows.into_iter().collect()
        })
    }

    /// A page of keys in key order, strictly after `after` (or from the start). Expired keys included.
    pub fn keys_sorted(
        &self,
        after: Option<&Key>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<Key>> {
        self.with_conn(|c| {
            let (cmp, order) = if reverse { ("<", "DESC") } else { (">", "ASC") };
            let limit = limit as i64;
            let rows = match after {
                None => {
                    let sql = format!("SELECT key, raw FROM cache ORDER BY key {order}, raw {order} LIMIT ?1");
                    let mut stmt = c.db.prepare_cached(&sql).ctx("listing keys")?;
                    let rows = stmt.query_map([limit], |r| Ok(key_from(r.get_ref(0)?, r.get(1)?)));
                    rows.and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>()).ctx("listing keys")?
                }
                Some(k) => {
                    let (k, raw) = key_sql(k);
                    let sql = format!(
                        "SELECT key, raw FROM cache WHERE (key, raw) {cmp} (?1, ?2) ORDER BY key {order}, raw {order} LIMIT ?3"
                    );
                    let mut stmt = c.db.prepare_cached(&sql).ctx("listing keys")?;
                    let rows = stmt.query_map(params![k, raw, limit], |r| Ok(key_from(r.get_ref(0)?, r.get(1)?)));
                    rows.and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>()).ctx("listing keys")?
                }
            };
            rows.into_iter().collect()
        })
    }

    /// The highest rowid now in use: iteration in insertion order stops there.
    pub fn max_rowid(&self) -> Result<Option<i64>> {
        self.with_conn(|c| {
            c.db.query_row("SELECT MAX(rowid) FROM cache", [], |r| r.get(0))
                .ctx("reading the last row")
        })
    }

    /// A page of (rowid, key) with `lo < rowid < hi`, in rowid order (descending if not `ascending`).
    pub fn keys_by_rowid(
        &self,
        lo: i64,
        hi: i64,
        ascending: bool,
        limit: usize,
    ) -> Result<Vec<(i64, Key)>> {
        self.with_conn(|c| {
            let order = if ascending { "ASC" } else { "DESC" };
            let sql = format!("SELECT rowid, key, raw FROM cache WHERE ?1 < rowid AND rowid < ?2 ORDER BY rowid {order} LIMIT ?3");
            let mut stmt = c.db.prepare_cached(&sql).ctx("listing keys")?;
            let rows = stmt
                .query_map(params![lo, hi, limit as i64], |r| Ok((r.get::<_, i64>(0)?, key_from(r.get_ref(1)?, r.get(2)?))))
                .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
                .ctx("listing keys")?;
            rows.into_iter().map(|(id, k)| k.map(|k| (id, k))).collect()
        })
    }

    /// Number of entries, expired ones included.
    pub fn len(&self) -> Result<u64> {
        self.meta_value("count").map(|v| v.max(0) as u64)
    }

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Bytes used on disk: database pages plus value files.
    pub fn volume(&self) -> Result<u64> {
        self.with_conn(|c| volume(&c.db, self.inner.page_size))
            .map(|v| v.max(0) as u64)
    }

    fn meta_value(&self, column: &str) -> Result<i64> {
        self.with_conn(|c| {
            c.db.prepare_cached(&format!("SELECT {column} FROM meta"))
                .and_then(|mut st| st.query_row([], |r| r.get(0)))
                .ctx("reading the cache's counters")
        })
    }

    // ----- writes -----------------------------------------------------------------------

    pub fn set(&self, key: &Key, value: ValueRef<'_>, options: &WriteOptions) -> Result<()> {
        let (prepared, file) = self.prepare(value)?;
        let stamp = Stamp::new(options);
        self.write(file, |db, unlink| {
            self.store(db, key, &prepared, &stamp, Fresh::Maybe, unlink)
        })
    }

    /// Store a safe-format value, taking the fast path for ints, floats, text and bytes the way
    /// the Python binding does, so either side reads what the other wrote.
    pub fn set_value(
        &self,
        key: &Key,
        value: &crate::value::Value,
        options: &WriteOptions,
    ) -> Result<()> {
        use crate::value::Value;
        let encoded;
        let v = match value {
            Value::Int(i) => ValueRef::Int(*i),
            Value::Float(f) if !f.is_nan() => ValueRef::Float(*f),
            Value::Str(s) => ValueRef::Str(s),
            Value::Bytes(b) => ValueRef::Bytes(b),
            other => {
                encoded = crate::value::encode(other);
                ValueRef::Encoded(&encoded)
            }
        };
        self.set(key, v, options)
    }

    /// Read an unexpired value as a safe-format value. A pickled value yields `Error::Unsafe`.
    pub fn get_value(&self, key: &Key) -> Result<Option<crate::value::Value>> {
        self.get(key, false)?
            .map(|e| e.value.into_value())
            .transpose()
    }

    /// Store the bytes read from `reader` (python-diskcache's `set(..., read=True)`): always a value file.
    pub fn set_from_reader(
        &self,
        key: &Key,
        reader: &mut dyn Read,
        options: &WriteOptions,
    ) -> Result<()> {
        self.writable()?;
        let lock = DirLock::shared(&self.inner.directory, self.inner.timeout)?;
        let name = ValueFiles::new_name()?;
        let (size, crc) = self.inner.files.write_from(&name, reader)?;
        let prepared = Prepared {
            kind: Kind::Bytes,
            crc,
            size: size as i64,
            inline: None,
            file: Some(name.clone()),
        };
        let stamp = Stamp::new(options);
        self.write(Some((name, lock)), |db, unlink| {
            self.store(db, key, &prepared, &stamp, Fresh::Maybe, unlink)
        })
    }

    /// Store only if the key is absent or expired. Returns whether it stored.
    pub fn add(&self, key: &Key, value: ValueRef<'_>, options: &WriteOptions) -> Result<bool> {
        let (prepared, file) = self.prepare(value)?;
        let new_file = prepared.file.clone();
        let stamp = Stamp::new(options);
        let now = stamp.now;
        self.write(file, |db, unlink| {
            let (k, raw) = key_sql(key);
            let existing: Option<Option<f64>> = db
                .prepare_cached("SELECT expire_time FROM cache WHERE key = ?1 AND raw = ?2")
                .and_then(|mut st| st.query_row(params![k, raw], |r| r.get(0)).optional())
                .ctx("adding an entry")?;
            if existing.is_some_and(|e| live(e, now)) {
                unlink.extend(new_file);
                return Ok(false);
            }
            self.store(db, key, &prepared, &stamp, Fresh::Maybe, unlink)?;
            Ok(true)
        })
    }

    /// Write many items in one transaction.
    pub fn set_many(&self, items: &[(Key, ValueRef<'_>)], options: &WriteOptions) -> Result<()> {
        let values: Vec<ValueRef<'_>> = items.iter().map(|(_, v)| *v).collect();
        let (prepared, files, lock) = self.prepare_many(&values)?;
        let stamp = Stamp::new(options);
        let result = self.write(None, |db, unlink| {
            drop(lock);
            let mut delta = Delta::default();
            for ((key, _), p) in items.iter().zip(&prepared) {
                self.upsert(db, key, p, &stamp, Fresh::Maybe, unlink, &mut delta)?;
            }
            self.cull_in(db, stamp.now, unlink, &mut delta)?;
            apply_delta(db, &delta)
        });
        self.settle_new_files(files, result.is_ok())?;
        result
    }

    /// Prepare several values; files written for them are returned with the shared directory
    /// lock that must be held until the write transaction has begun.
    pub(crate) fn prepare_many<'a>(
        &self,
        values: &[ValueRef<'a>],
    ) -> Result<(Vec<Prepared<'a>>, Vec<String>, Option<DirLock>)> {
        let mut prepared = Vec::with_capacity(values.len());
        let mut files = Vec::new();
        let mut lock = None;
        for value in values {
            match self.prepare(*value) {
                Ok((p, f)) => {
                    if let Some((name, l)) = f {
                        files.push(name);
                        lock.get_or_insert(l);
                    }
                    prepared.push(p);
                }
                Err(e) => {
                    files.iter().for_each(|n| self.inner.files.remove(n));
                    return Err(e);
                }
            }
        }
        Ok((prepared, files, lock))
    }

    /// After a multi-value write: drop its new files if it failed, or, inside an open
    /// transaction, remember them for removal should that transaction roll back.
    pub(crate) fn settle_new_files(&self, files: Vec<String>, written: bool) -> Result<()> {
        if !written {
            files.iter().for_each(|n| self.inner.files.remove(n));
            return Ok(());
        }
        self.with_conn(|c| {
            if c.depth > 0 {
                c.unlink_on_rollback.extend(files);
            }
            Ok(())
        })
    }

    /// Insert or overwrite `key`. Overwrites keep the rowid, so insertion order is stable.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn upsert(
        &self,
        db: &Connection,
        key: &Key,
        p: &Prepared<'_>,
        stamp: &Stamp<'_>,
        fresh: Fresh,
        unlink: &mut Vec<String>,
        delta: &mut Delta,
    ) -> Result<()> {
        let Stamp {
            now,
            expire_time,
            tag,
        } = *stamp;
        let (k, raw) = key_sql(key);
        let old: Option<(i64, Option<String>, i64)> = match fresh {
            Fresh::Known => None,
            Fresh::Maybe => db
                .prepare_cached(
                    "SELECT rowid, filename, size FROM cache WHERE key = ?1 AND raw = ?2",
                )
                .and_then(|mut st| {
                    st.query_row(params![k, raw], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                        .optional()
                })
                .ctx("writing an entry")?,
        };
        let value = inline_sql(p.inline);
        let tag = scalar_sql(tag);
        match old {
            Some((rowid, old_file, old_size)) => {
                db.prepare_cached(
                    "UPDATE cache SET store_time = ?1, expire_time = ?2, access_time = ?1, access_count = 0, \
                     tag = ?3, size = ?4, kind = ?5, crc = ?6, filename = ?7, value = ?8 WHERE rowid = ?9",
                )
                .and_then(|mut st| {
                    st.execute(params![now, expire_time, tag, p.size, p.kind as i64, p.crc, p.file, value, rowid])
                })
                .ctx("writing an entry")?;
                unlink.extend(old_file);
                delta.size += p.size - old_size;
            }
            None => {
                db.prepare_cached(
                    "INSERT INTO cache (key, raw, store_time, expire_time, access_time, access_count, tag, size, kind, crc, filename, value) \
                     VALUES (?1, ?2, ?3, ?4, ?3, 0, ?5, ?6, ?7, ?8, ?9, ?10)",
                )
                .and_then(|mut st| {
                    st.execute(params![k, raw, now, expire_time, tag, p.size, p.kind as i64, p.crc, p.file, value])
                })
                .ctx("writing an entry")?;
                delta.count += 1;
                delta.size += p.size;
            }
        }
        Ok(())
    }

    /// One entry written the way every write does it: upsert, cull on write, update the counters.
    pub(crate) fn store(
        &self,
        db: &Connection,
        key: &Key,
        p: &Prepared<'_>,
        stamp: &Stamp<'_>,
        fresh: Fresh,
        unlink: &mut Vec<String>,
    ) -> Result<()> {
        let mut delta = Delta::default();
        self.upsert(db, key, p, stamp, fresh, unlink, &mut delta)?;
        self.cull_in(db, stamp.now, unlink, &mut delta)?;
        apply_delta(db, &delta)
    }

    /// python-diskcache's cull on write: up to `cull_limit` expired entries, then, while the
    /// volume is at least `size_limit`, up to the rest of `cull_limit` by the eviction policy.
    pub(crate) fn cull_in(
        &self,
        db: &Connection,
        now: f64,
        unlink: &mut Vec<String>,
        delta: &mut Delta,
    ) -> Result<()> {
        let s = self.hot();
        let mut limit = s.cull_limit;
        if limit == 0 {
            return Ok(());
        }
        let expired = select_rows(
            db,
            "SELECT rowid, filename, size FROM cache WHERE expire_time IS NOT NULL AND expire_time < ?1 ORDER BY expire_time LIMIT ?2",
            params![now, limit],
        )?;
        limit -= expired.len() as i64;
        for r in &expired {
            delete_by_rowid(db, r, unlink, delta)?;
        }
        if limit == 0 {
            return Ok(());
        }
        let Some(order) = policy_order(s.eviction_policy) else {
            return Ok(());
        };
        apply_delta(db, delta)?; // volume() reads meta.size
        *delta = Delta::default();
        if volume(db, self.inner.page_size)? < s.size_limit {
            return Ok(());
        }
        let victims = select_rows(
            db,
            &format!("SELECT rowid, filename, size FROM cache ORDER BY {order} LIMIT ?1"),
            params![limit],
        )?;
        for r in &victims {
            delete_by_rowid(db, r, unlink, delta)?;
        }
        Ok(())
    }

    /// Remove and return an unexpired entry.
    pub fn pop(&self, key: &Key) -> Result<Option<Entry>> {
        self.write(None, |db, unlink| {
            let Some(mut row) = self.read_row(db, key)? else {
                return Ok(None);
            };
            if !live(row.expire_time, now()) {
                return Ok(None);
            }
            let value = self.load(&mut row, false)?;
            let mut delta = Delta::default();
            delete_row(db, &row, unlink, &mut delta)?;
            apply_delta(db, &delta)?;
            match value {
                Found::Yes(value) => Ok(Some(Entry {
                    value,
                    expire_time: row.expire_time,
                    tag: row.tag,
                })),
                Found::Missing => Ok(None),
            }
        })
    }

    /// Remove an unexpired entry. Returns whether one was removed.
    pub fn delete(&self, key: &Key) -> Result<bool> {
        self.write(None, |db, unlink| {
            let mut delta = Delta::default();
            let hit = delete_live(db, key, now(), unlink, &mut delta)?;
            apply_delta(db, &delta)?;
            Ok(hit)
        })
    }

    /// Delete many keys in one transaction. Returns how many were present.
    pub fn delete_many(&self, keys: &[Key]) -> Result<u64> {
        self.write(None, |db, unlink| {
            let now = now();
            let mut delta = Delta::default();
            let mut n = 0;
            for key in keys {
                n += delete_live(db, key, now, unlink, &mut delta)? as u64;
            }
            apply_delta(db, &delta)?;
            Ok(n)
        })
    }

    /// Give an unexpired entry a new expiry (seconds from now). Returns whether the key was present.
    pub fn touch(&self, key: &Key, expire: Option<f64>) -> Result<bool> {
        self.write(None, |db, _| {
            let now = now();
            let (k, raw) = key_sql(key);
            let n = db
                .prepare_cached(
                    "UPDATE cache SET expire_time = ?3 WHERE key = ?1 AND raw = ?2 AND (expire_time IS NULL OR expire_time > ?4)",
                )
                .and_then(|mut st| st.execute(params![k, raw, expire.map(|e| now + e), now]))
                .ctx("touching an entry")?;
            Ok(n > 0)
        })
    }

    /// Add `delta` to an int value atomically; an absent or expired key starts at `default`.
    pub fn incr(&self, key: &Key, delta: i64, default: Option<i64>) -> Result<Incr> {
        let policy = self.hot().eviction_policy;
        self.write(None, |db, unlink| {
            let now = now();
            let (k, raw) = key_sql(key);
            let old = db
                .prepare_cached("SELECT rowid, expire_time, kind, crc, filename, value FROM cache WHERE key = ?1 AND raw = ?2")
                .and_then(|mut st| {
                    st.query_row(params![k, raw], |r| {
                        let int = match (r.get::<_, i64>(2)?, r.get::<_, Option<String>>(4)?, r.get_ref(5)?) {
                            (kind, None, Sql::Integer(i)) if kind == Kind::Int as i64 => Some((i, r.get::<_, i64>(3)? as u32)),
                            _ => None,
                        };
                        Ok(Counter { rowid: r.get(0)?, expire_time: r.get(1)?, int })
                    })
                    .optional()
                })
                .ctx("incrementing an entry")?;
            let expired = |e: Option<f64>| e.is_some_and(|t| t < now);
            let fresh = old.as_ref().is_none_or(|c| expired(c.expire_time));
            if fresh {
                let Some(start) = default else { return Ok(Incr::Missing) };
                let Some(value) = start.checked_add(delta) else { return Ok(Incr::NotInt) };
                let p = Prepared {
                    kind: Kind::Int,
                    crc: checksum(&value.to_le_bytes()),
                    size: 0,
                    inline: Some(ValueRef::Int(value)),
                    file: None,
                };
                let stamp = Stamp { now, expire_time: None, tag: &None };
                self.store(db, key, &p, &stamp, Fresh::Maybe, unlink)?;
                return Ok(Incr::Value(value));
            }
            let Some(Counter { rowid, int: Some((current, crc)), .. }) = old else { return Ok(Incr::NotInt) };
            if checksum(&current.to_le_bytes()) != crc {
                return Err(Error::corrupt("a stored value does not match its checksum; the bytes on disk were damaged"));
            }
            let Some(value) = current.checked_add(delta) else { return Ok(Incr::NotInt) };
            let access = match policy {
                EvictionPolicy::LeastRecentlyUsed => ", access_time = ?1",
                EvictionPolicy::LeastFrequentlyUsed => ", access_count = access_count + 1",
                _ => "",
            };
            db.prepare_cached(&format!("UPDATE cache SET store_time = ?1, value = ?2, crc = ?3{access} WHERE rowid = ?4"))
                .and_then(|mut st| st.execute(params![now, value, checksum(&value.to_le_bytes()), rowid]))
                .ctx("incrementing an entry")?;
            Ok(Incr::Value(value))
        })
    }

    // ----- maintenance ------------------------------------------------------------------

    /// Delete rows chosen by `select` in batches, one transaction per batch, so other writers
    /// get the lock in between. `select` takes (?1 cursor, ?2 limit) plus `extra` and returns
    /// (rowid, filename, size, cursor).
    fn delete_batches(
        &self,
        select: &str,
        mut cursor: SqlValue,
        extra: Option<SqlValue>,
    ) -> Result<u64> {
        let mut total = 0u64;
        loop {
            let n = self.write(None, |db, unlink| {
                let mut args = vec![cursor.clone(), SqlValue::Integer(BATCH)];
                args.extend(extra.clone());
                let mut stmt = db
                    .prepare_cached(select)
                    .ctx("selecting entries to remove")?;
                let rows = stmt
                    .query_map(rusqlite::params_from_iter(args), |r| {
                        Ok((
                            DeadRow {
                                rowid: r.get(0)?,
                                filename: r.get(1)?,
                                size: r.get(2)?,
                            },
                            r.get::<_, SqlValue>(3)?,
                        ))
                    })
                    .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
                    .ctx("selecting entries to remove")?;
                drop(stmt);
                let mut delta = Delta::default();
                for (r, c) in &rows {
                    delete_by_rowid(db, r, unlink, &mut delta)?;
                    cursor = c.clone();
                }
                apply_delta(db, &delta)?;
                Ok(rows.len() as u64)
            })?;
            total += n;
            if n == 0 {
                return Ok(total);
            }
        }
    }

    /// Remove entries expired as of `now` (seconds since the epoch; default: now). Returns how many.
    pub fn expire(&self, now: Option<f64>) -> Result<u64> {
        let now = now.unwrap_or_else(crate::cache::now);
        self.delete_batches(
            "SELECT rowid, filename, size, expire_time FROM cache WHERE expire_time IS NOT NULL \
             AND ?1 < expire_time AND expire_time < ?3 ORDER BY expire_time LIMIT ?2",
            SqlValue::Real(0.0),
            Some(SqlValue::Real(now)),
        )
    }

    /// Remove every entry with this tag. Returns how many.
    pub fn evict(&self, tag: &Scalar) -> Result<u64> {
        self.delete_batches(
            "SELECT rowid, filename, size, rowid FROM cache WHERE tag = ?3 AND rowid > ?1 ORDER BY rowid LIMIT ?2",
            SqlValue::Integer(0),
            Some(scalar_value(tag)),
        )
    }

    /// Remove every entry. Returns how many.
    pub fn clear(&self) -> Result<u64> {
        self.delete_batches(
            "SELECT rowid, filename, size, rowid FROM cache WHERE rowid > ?1 ORDER BY rowid LIMIT ?2",
            SqlValue::Integer(0),
            None,
        )
    }

    /// Remove expired entries, then evict by policy until the volume is at most `size_limit`.
    /// Returns how many.
    pub fn cull(&self) -> Result<u64> {
        let now = now();
        let mut count = self.expire(Some(now))?;
        let s = self.hot();
        let Some(order) = policy_order(s.eviction_policy) else {
            return Ok(0);
        };
        while self.volume()? > s.size_limit as u64 {
            let n = self.write(None, |db, unlink| {
                let rows = select_rows(
                    db,
                    &format!("SELECT rowid, filename, size FROM cache ORDER BY {order} LIMIT 10"),
                    [],
                )?;
                let mut delta = Delta::default();
                for r in &rows {
                    delete_by_rowid(db, r, unlink, &mut delta)?;
                }
                apply_delta(db, &delta)?;
                Ok(rows.len() as u64)
            })?;
            if n == 0 {
                break;
            }
            count += n;
        }
        Ok(count)
    }

    /// Check the database and the value files; with `fix`, repair what can be repaired
    /// (vacuum, drop rows whose files are gone or damaged, remove orphan files, recount).
    /// Returns one message per problem found.
    pub fn check(&self, fix: bool) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        self.with_conn(|c| {
            let mut stmt =
                c.db.prepare("PRAGMA integrity_check")
                    .ctx("checking integrity")?;
            let rows: Vec<String> = stmt
                .query_map([], |r| r.get(0))
                .and_then(|it| it.collect())
                .ctx("checking integrity")?;
            if rows != ["ok"] {
                problems.extend(rows.into_iter().map(|m| format!("integrity: {m}")));
            }
            Ok(())
        })?;
        if fix {
            self.writable()?;
            self.with_conn(|c| c.db.execute_batch("VACUUM").ctx("vacuuming"))?;
        }
        // The exclusive directory lock keeps writers from creating files we would call orphans.
        // A read-only handle takes no lock (it creates nothing) and reads in one transaction.
        let _lock = if self.inner.read_only {
            None
        } else {
            Some(DirLock::exclusive(
                &self.inner.directory,
                self.inner.timeout,
            )?)
        };
        let files = &self.inner.files;
        let mut body = |db: &Connection, unlink: &mut Vec<String>| -> Result<()> {
            let mut delta = Delta::default();
            let mut known = std::collections::HashSet::new();
            {
                let mut stmt = db
                    .prepare("SELECT filename FROM jobs WHERE filename IS NOT NULL")
                    .ctx("checking jobs")?;
                let names = stmt
                    .query_map([], |r| r.get::<_, String>(0))
                    .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>());
                known.extend(names.ctx("checking jobs")?);
            }
            let rows = {
                let mut stmt = db
                    .prepare(concat!("SELECT ", row_columns!(), " FROM cache"))
                    .ctx("checking entries")?;
                let rows = stmt
                    .query_map([], row_from)
                    .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>());
                rows.ctx("checking entries")?
            };
            for row in rows {
                let mut row = match row {
                    Ok(r) => r,
                    Err(e) => {
                        problems.push(format!("unreadable row: {e}"));
                        continue;
                    }
                };
                if let Some(name) = &row.filename {
                    known.insert(name.clone());
                    if let Found::Yes(real) = files.size(name).unwrap_or(Found::Missing) {
                        if real as i64 != row.size {
                            problems.push(format!(
                                "wrong file size: {}, {} != {}",
                                files.path(name).display(),
                                real,
                                row.size
                            ));
                            if fix {
                                db.execute(
                                    "UPDATE cache SET size = ?1 WHERE rowid = ?2",
                                    params![real as i64, row.rowid],
                                )
                                .ctx("fixing a file size")?;
                                delta.size += real as i64 - row.size;
                                row.size = real as i64;
                            }
                        }
                    }
                }
                let problem = match self.load(&mut row, true) {
                    Ok(Found::Yes(_)) => None,
                    Ok(Found::Missing) => Some(format!(
                        "file not found: {}",
                        files.path(row.filename.as_deref().unwrap_or("")).display()
                    )),
                    Err(e) => Some(format!("damaged entry (rowid {}): {e}", row.rowid)),
                };
                if let Some(p) = problem {
                    problems.push(p);
                    if fix {
                        delete_row(db, &row, unlink, &mut delta)?;
                    }
                }
            }
            for (name, plain) in files.list()? {
                if plain && known.contains(&name) {
                    continue;
                }
                problems.push(format!(
                    "unknown file: {}",
                    files.root().join(&name).display()
                ));
                if fix {
                    let _ = files.remove_unknown(&name);
                }
            }
            apply_delta(db, &delta)?;
            let (count, size): (i64, i64) = db
                .query_row("SELECT count, size FROM meta", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .ctx("checking counters")?;
            let (real_count, real_size): (i64, i64) = db
                .query_row(
                    "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM cache",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .ctx("checking counters")?;
            if count != real_count {
                problems.push(format!(
                    "meta.count != COUNT(cache); {count} != {real_count}"
                ));
            }
            if size != real_size {
                problems.push(format!(
                    "meta.size != SUM(cache.size); {size} != {real_size}"
                ));
            }
            if fix && (count != real_count || size != real_size) {
                db.execute(
                    "UPDATE meta SET count = ?1, size = ?2",
                    params![real_count, real_size],
                )
                .ctx("fixing counters")?;
            }
            Ok(())
        };
        if self.inner.read_only {
            self.with_conn(|c| {
                run(&c.db, "BEGIN").ctx("starting a read")?;
                let result = body(&c.db, &mut Vec::new());
                let _ = run(&c.db, "COMMIT");
                result
            })?;
        } else {
            self.write(None, body)?;
        }
        Ok(problems)
    }

    /// (hits, misses); `enable` turns counting on or off, `reset` zeroes the counters.
    pub fn stats(&self, enable: bool, reset: bool) -> Result<(u64, u64)> {
        let (hits, misses) = self.with_conn(|c| {
            c.db.query_row("SELECT hits, misses FROM meta", [], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
            })
            .ctx("reading statistics")
        })?;
        if self.inner.read_only {
            // Reading the counters works; turning counting on or off would write (D-019).
            if reset {
                self.writable()?;
            }
            return Ok((hits.max(0) as u64, misses.max(0) as u64));
        }
        if reset {
            self.write(None, |db, _| {
                db.execute("UPDATE meta SET hits = 0, misses = 0", [])
                    .map(drop)
                    .ctx("resetting statistics")
            })?;
        }
        self.reset("statistics", Some(SettingValue::Int(enable as i64)), true)?;
        Ok((hits.max(0) as u64, misses.max(0) as u64))
    }

    /// Read a setting (or one of the counters `count`, `size`, `hits`, `misses`) as stored in
    /// the directory, or with `value` change it; `update` persists the change.
    pub fn reset(
        &self,
        name: &str,
        value: Option<SettingValue>,
        update: bool,
    ) -> Result<SettingValue> {
        if matches!(name, "count" | "size" | "hits" | "misses") {
            if value.is_some() {
                return Err(Error::Setting(format!(
                    "{name} is a counter the cache keeps; it cannot be set"
                )));
            }
            return self.meta_value(name).map(SettingValue::Int);
        }
        let Some(value) = value else {
            let stored: Option<Option<SettingValue>> = self.with_conn(|c| {
                c.db.query_row("SELECT value FROM settings WHERE name = ?1", [name], |r| {
                    Ok(setting_from(r.get_ref(0)?))
                })
                .optional()
                .ctx("reading a setting")
            })?;
            let current = self.settings().get(name)?;
            let Some(stored) = stored.flatten() else {
                return Ok(current);
            };
            if stored != current {
                self.apply_setting(name, &stored)?;
            }
            return Ok(stored);
        };
        let mut next = self.settings();
        next.set(name, &value)?;
        let value = next.get(name)?;
        if update {
            self.write(None, |db, _| {
                persist_setting(db, name, &value)?;
                schema_for_setting(db, name, &next)
            })?;
        }
        self.apply_setting(name, &value)?;
        Ok(value)
    }

    fn apply_setting(&self, name: &str, value: &SettingValue) -> Result<()> {
        if let Ok(mut s) = self.inner.settings.write() {
            s.set(name, value)?;
        }
        if name.starts_with("sqlite_") {
            self.inner.generation.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }

    pub fn create_tag_index(&self) -> Result<()> {
        self.reset("tag_index", Some(SettingValue::Int(1)), true)
            .map(drop)
    }

    pub fn drop_tag_index(&self) -> Result<()> {
        self.reset("tag_index", Some(SettingValue::Int(0)), true)
            .map(drop)
    }
}

// ----- schema ---------------------------------------------------------------------------

const SCHEMA: &str = "
CREATE TABLE settings (name TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE meta (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    count INTEGER NOT NULL,
    size INTEGER NOT NULL,
    hits INTEGER NOT NULL,
    misses INTEGER NOT NULL
);
INSERT INTO meta VALUES (0, 0, 0, 0, 0);
CREATE TABLE cache (
    rowid INTEGER PRIMARY KEY,
    key NOT NULL,
    raw INTEGER NOT NULL,
    store_time REAL NOT NULL,
    expire_time REAL,
    access_time REAL NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    tag,
    size INTEGER NOT NULL DEFAULT 0,
    kind INTEGER NOT NULL,
    crc INTEGER NOT NULL,
    filename TEXT,
    value
);
CREATE UNIQUE INDEX cache_key ON cache (key, raw);
CREATE INDEX cache_expire ON cache (expire_time) WHERE expire_time IS NOT NULL;
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL,
    state INTEGER NOT NULL,
    due REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    lease INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 0,
    dedupe TEXT,
    created REAL NOT NULL,
    error TEXT,
    kind INTEGER NOT NULL,
    crc INTEGER NOT NULL,
    size INTEGER NOT NULL DEFAULT 0,
    filename TEXT,
    value
);
CREATE INDEX jobs_due ON jobs (queue, state, due, id);
CREATE UNIQUE INDEX jobs_dedupe ON jobs (queue, dedupe) WHERE dedupe IS NOT NULL AND state < 2;
";

/// Create or validate the database and reconcile settings. Runs under the exclusive directory
/// lock. Returns the settings in force.
fn init_database(
    db: &Connection,
    overrides: &[(String, SettingValue)],
    read_only: bool,
) -> Result<Settings> {
    let version: i64 = db.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(|e| match &e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::NotADatabase => Error::NotACache(
            "the cache database (cache.db) is not an SQLite database: its header is damaged or it is another \
             kind of file; move it aside or open a new directory"
                .into(),
        ),
        _ => sql_error("reading the format version", e),
    })?;
    let app_id: i64 = db
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .ctx("reading the format version")?;
    if version > FORMAT_VERSION {
        return Err(Error::FormatVersion {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let mut settings = Settings::default();
    if version == 0 {
        let tables: i64 = db
            .query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))
            .ctx("inspecting the database")?;
        if tables > 0 {
            return Err(not_ours());
        }
        if read_only {
            return Err(Error::NotACache(
                "the cache database (cache.db) is empty: no cache was ever created here, and \
                 read_only=True never creates one; open it once without read_only=True"
                    .into(),
            ));
        }
        for (name, value) in overrides {
            settings.set(name, value)?;
        }
        let mode: String = db
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .ctx("switching to WAL")?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::NotACache(format!(
                "SQLite could not put the cache database in WAL mode (it reports {mode:?}); \
                 the directory must be on a local file system that supports shared memory"
            )));
        }
        db.execute_batch(&format!(
            "PRAGMA auto_vacuum = {}",
            settings.sqlite_auto_vacuum
        ))
        .ctx("creating the schema")?;
        db.execute_batch("BEGIN IMMEDIATE")
            .map_err(|e| sql_error("creating the schema", e))?;
        let created = (|| {
            db.execute_batch(SCHEMA).ctx("creating the schema")?;
            for name in crate::SETTING_NAMES {
                persist_setting(db, name, &settings.get(name)?)?;
            }
            schema_for_setting(db, "eviction_policy", &settings)?;
            schema_for_setting(db, "tag_index", &settings)?;
            db.execute_batch(&format!(
                "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {FORMAT_VERSION};"
            ))
            .ctx("creating the schema")
        })();
        return match created.and_then(|()| db.execute_batch("COMMIT").ctx("creating the schema")) {
            Ok(()) => Ok(settings),
            Err(e) => {
                let _ = db.execute_batch("ROLLBACK");
                Err(e)
            }
        };
    }
    if app_id != APPLICATION_ID {
        return Err(not_ours());
    }
    {
        let mut stmt = db
            .prepare("SELECT name, value FROM settings")
            .ctx("reading settings")?;
        let rows = stmt
            .query_map([], |r| {
                Ok((r.get::<_, String>(0)?, setting_from(r.get_ref(1)?)))
            })
            .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
            .ctx("reading settings")?;
        for (name, value) in rows {
            if let Some(v) = value {
                // A setting a newer build added is kept on disk but ignored here.
                let _ = settings.set(&name, &v);
            }
        }
    }
    let mut changed = Vec::new();
    for (name, value) in overrides {
        let before = settings.get(name)?;
        settings.set(name, value)?;
        if settings.get(name)? != before {
            changed.push(name.as_str());
        }
    }
    if changed.is_empty() {
        return Ok(settings);
    }
    if read_only {
        let listed: Vec<String> = changed
            .iter()
            .map(|name| Ok(format!("{name}={}", settings.get(name)?)))
            .collect::<Result<_>>()?;
        return Err(Error::Setting(format!(
            "a read_only=True handle cannot change the settings stored in the directory, and \
             these differ from them: {}; drop them, or open the cache without read_only=True \
             to change them",
            listed.join(", ")
        )));
    }
    db.execute_batch("BEGIN IMMEDIATE")
        .map_err(|e| sql_error("saving settings", e))?;
    let saved = changed.iter().try_for_each(|name| {
        persist_setting(db, name, &settings.get(name)?)?;
        schema_for_setting(db, name, &settings)
    });
    match saved.and_then(|()| db.execute_batch("COMMIT").ctx("saving settings")) {
        Ok(()) => Ok(settings),
        Err(e) => {
            let _ = db.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

fn not_ours() -> Error {
    Error::NotACache(
        "the directory holds an SQLite database (cache.db) that diskcache_oxide did not create, \
         perhaps a python-diskcache cache; diskcache_oxide uses its own format, so open it on a new directory"
            .into(),
    )
}

fn persist_setting(db: &Connection, name: &str, value: &SettingValue) -> Result<()> {
    let v = match value {
        SettingValue::Int(i) => SqlValue::Integer(*i),
        SettingValue::Str(s) => SqlValue::Text(s.clone()),
    };
    db.execute(
        "INSERT OR REPLACE INTO settings (name, value) VALUES (?1, ?2)",
        params![name, v],
    )
    .ctx("saving a setting")?;
    Ok(())
}

/// The indexes a setting implies: one for the eviction policy's order, and the tag index.
fn schema_for_setting(db: &Connection, name: &str, s: &Settings) -> Result<()> {
    let sql = match name {
        "eviction_policy" => {
            let mut sql = String::new();
            for (policy, index, column) in [
                (
                    EvictionPolicy::LeastRecentlyStored,
                    "cache_store_time",
                    "store_time",
                ),
                (
                    EvictionPolicy::LeastRecentlyUsed,
                    "cache_access_time",
                    "access_time",
                ),
                (
                    EvictionPolicy::LeastFrequentlyUsed,
                    "cache_access_count",
                    "access_count",
                ),
            ] {
                if policy == s.eviction_policy {
                    sql += &format!("CREATE INDEX IF NOT EXISTS {index} ON cache ({column});");
                } else {
                    sql += &format!("DROP INDEX IF EXISTS {index};");
                }
            }
            sql
        }
        "tag_index" if s.tag_index => {
            "CREATE INDEX IF NOT EXISTS cache_tag ON cache (tag, rowid) WHERE tag IS NOT NULL"
                .into()
        }
        "tag_index" => "DROP INDEX IF EXISTS cache_tag".into(),
        _ => return Ok(()),
    };
    db.execute_batch(&sql).ctx("updating indexes for a setting")
}

fn setting_from(v: Sql<'_>) -> Option<SettingValue> {
    match v {
        Sql::Integer(i) => Some(SettingValue::Int(i)),
        Sql::Real(f) => Some(SettingValue::Int(f as i64)),
        Sql::Text(t) => std::str::from_utf8(t)
            .ok()
            .map(|s| SettingValue::Str(s.to_owned())),
        _ => None,
    }
}

fn policy_order(policy: EvictionPolicy) -> Option<&'static str> {
    match policy {
        EvictionPolicy::LeastRecentlyStored => Some("store_time"),
        EvictionPolicy::LeastRecentlyUsed => Some("access_time"),
        EvictionPolicy::LeastFrequentlyUsed => Some("access_count"),
        EvictionPolicy::None => None,
    }
}

// ----- row helpers ----------------------------------------------------------------------

pub(crate) fn key_sql(key: &Key) -> (ToSqlOutput<'_>, i64) {
    let v = match key {
        Key::Native(Scalar::Int(i)) => Sql::Integer(*i),
        Key::Native(Scalar::Float(f)) => Sql::Real(*f),
        Key::Native(Scalar::Str(s)) => Sql::Text(s.as_bytes()),
        Key::Native(Scalar::Bytes(b)) | Key::Encoded(b) | Key::Pickled(b) => Sql::Blob(b),
    };
    (ToSqlOutput::Borrowed(v), key.raw())
}

fn scalar_sql(s: &Option<Scalar>) -> ToSqlOutput<'static> {
    ToSqlOutput::Owned(s.as_ref().map_or(SqlValue::Null, scalar_value))
}

fn scalar_value(s: &Scalar) -> SqlValue {
    match s {
        Scalar::Int(i) => SqlValue::Integer(*i),
        Scalar::Float(f) => SqlValue::Real(*f),
        Scalar::Str(s) => SqlValue::Text(s.clone()),
        Scalar::Bytes(b) => SqlValue::Blob(b.clone()),
    }
}

pub(crate) fn inline_sql<'a>(v: Option<ValueRef<'a>>) -> ToSqlOutput<'a> {
    ToSqlOutput::Borrowed(match v {
        None => Sql::Null,
        Some(ValueRef::Int(i)) => Sql::Integer(i),
        Some(ValueRef::Float(f)) => Sql::Real(f),
        Some(ValueRef::Str(s)) => Sql::Text(s.as_bytes()),
        Some(ValueRef::Bytes(b) | ValueRef::Encoded(b) | ValueRef::Pickled(b)) => Sql::Blob(b),
    })
}

fn scalar_from(v: Sql<'_>) -> Result<Option<Scalar>> {
    Ok(match v {
        Sql::Null => None,
        Sql::Integer(i) => Some(Scalar::Int(i)),
        Sql::Real(f) => Some(Scalar::Float(f)),
        Sql::Text(t) => Some(Scalar::Str(
            std::str::from_utf8(t)
                .map_err(|_| Error::corrupt("a stored tag is not valid UTF-8"))?
                .to_owned(),
        )),
        Sql::Blob(b) => Some(Scalar::Bytes(b.to_vec())),
    })
}

pub(crate) fn key_from(v: Sql<'_>, raw: i64) -> Result<Key> {
    match (raw, v) {
        (RAW_NATIVE, v) => match scalar_from(v)? {
            Some(s) => Ok(Key::Native(s)),
            None => Err(Error::corrupt("a stored key is NULL")),
        },
        (RAW_ENCODED, Sql::Blob(b)) => Ok(Key::Encoded(b.to_vec())),
        (RAW_PICKLED, Sql::Blob(b)) => Ok(Key::Pickled(b.to_vec())),
        _ => Err(Error::corrupt(format!(
            "a stored key has an unknown form (raw = {raw})"
        ))),
    }
}

/// Map a `SELECT row_columns!()` row. Damage to the row itself is reported per row.
pub(crate) fn row_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<Row>> {
    let inline = match r.get_ref(7)? {
        Sql::Null => Inline::Null,
        Sql::Integer(i) => Inline::Int(i),
        Sql::Real(f) => Inline::Float(f),
        Sql::Text(t) => Inline::Text(t.to_vec()),
        Sql::Blob(b) => Inline::Blob(b.to_vec()),
    };
    let tag = match scalar_from(r.get_ref(2)?) {
        Ok(t) => t,
        Err(e) => return Ok(Err(e)),
    };
    Ok(Ok(Row {
        rowid: r.get(0)?,
        expire_time: r.get(1)?,
        tag,
        kind: r.get(3)?,
        crc: r.get::<_, i64>(4)? as u32,
        filename: r.get(5)?,
        size: r.get(6)?,
        inline,
    }))
}

fn load_inline(kind: Kind, crc: u32, inline: Inline) -> Result<StoredValue> {
    let check = |bytes: &[u8]| {
        if checksum(bytes) == crc {
            Ok(())
        } else {
            Err(Error::corrupt(
                "a stored value does not match its checksum; the bytes on disk were damaged",
            ))
        }
    };
    Ok(match (kind, inline) {
        (Kind::Int, Inline::Int(i)) => {
            check(&i.to_le_bytes())?;
            StoredValue::Int(i)
        }
        (Kind::Float, Inline::Float(f)) => {
            check(&f.to_le_bytes())?;
            StoredValue::Float(f)
        }
        (Kind::Str, Inline::Text(b) | Inline::Blob(b)) => {
            check(&b)?;
            StoredValue::Str(
                String::from_utf8(b)
                    .map_err(|_| Error::corrupt("a stored text value is not valid UTF-8"))?,
            )
        }
        (Kind::Bytes, Inline::Blob(b)) => {
            check(&b)?;
            StoredValue::Bytes(b)
        }
        (Kind::Encoded, Inline::Blob(b)) => {
            check(&b)?;
            StoredValue::Encoded(b)
        }
        (Kind::Pickled, Inline::Blob(b)) => {
            check(&b)?;
            StoredValue::Pickled(b)
        }
        (kind, _) => {
            return Err(Error::corrupt(format!(
                "a stored value does not have the SQLite type its kind ({kind:?}) needs"
            )))
        }
    })
}

/// What `incr` needs of a row: its int value and checksum, if it holds an inline int.
struct Counter {
    rowid: i64,
    expire_time: Option<f64>,
    int: Option<(i64, u32)>,
}

/// What deleting a row needs to know.
struct DeadRow {
    rowid: i64,
    filename: Option<String>,
    size: i64,
}

fn select_rows(db: &Connection, sql: &str, args: impl rusqlite::Params) -> Result<Vec<DeadRow>> {
    let mut stmt = db.prepare_cached(sql).ctx("selecting entries to remove")?;
    stmt.query_map(args, |r| {
        Ok(DeadRow {
            rowid: r.get(0)?,
            filename: r.get(1)?,
            size: r.get(2)?,
        })
    })
    .and_then(|it| it.collect())
    .ctx("selecting entries to remove")
}

fn delete_by_rowid(
    db: &Connection,
    r: &DeadRow,
    unlink: &mut Vec<String>,
    delta: &mut Delta,
) -> Result<()> {
    let n = db
        .prepare_cached("DELETE FROM cache WHERE rowid = ?1")
        .and_then(|mut st| st.execute([r.rowid]))
        .ctx("removing an entry")?;
    if n > 0 {
        delta.count -= 1;
        delta.size -= r.size;
        unlink.extend(r.filename.clone());
    }
    Ok(())
}

pub(crate) fn delete_rowid(
    db: &Connection,
    rowid: i64,
    filename: Option<String>,
    size: i64,
    unlink: &mut Vec<String>,
    delta: &mut Delta,
) -> Result<()> {
    delete_by_rowid(
        db,
        &DeadRow {
            rowid,
            filename,
            size,
        },
        unlink,
        delta,
    )
}

fn delete_row(
    db: &Connection,
    row: &Row,
    unlink: &mut Vec<String>,
    delta: &mut Delta,
) -> Result<()> {
    delete_by_rowid(
        db,
        &DeadRow {
            rowid: row.rowid,
            filename: row.filename.clone(),
            size: row.size,
        },
        unlink,
        delta,
    )
}

fn delete_live(
    db: &Connection,
    key: &Key,
    now: f64,
    unlink: &mut Vec<String>,
    delta: &mut Delta,
) -> Result<bool> {
    let (k, raw) = key_sql(key);
    let gone: Option<(Option<String>, i64)> = db
        .prepare_cached(
            "DELETE FROM cache WHERE key = ?1 AND raw = ?2 AND (expire_time IS NULL OR expire_time > ?3) RETURNING filename, size",
        )
        .and_then(|mut st| st.query_row(params![k, raw, now], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .ctx("deleting an entry")?;
    let Some((filename, size)) = gone else {
        return Ok(false);
    };
    delta.count -= 1;
    delta.size -= size;
    unlink.extend(filename);
    Ok(true)
}

/// python-diskcache's peekitem treats an entry as expired only once `expire_time < now`.
fn live_or_equal(expire_time: Option<f64>, now: f64) -> bool {
    expire_time.is_none_or(|t| t >= now)
}

/// Run a parameterless statement through the statement cache: BEGIN and COMMIT run on every
/// write, and parsing them each time showed up in profiles.
fn run(db: &Connection, sql: &str) -> rusqlite::Result<()> {
    if sql.contains(';') {
        return db.execute_batch(sql);
    }
    db.prepare_cached(sql)?.raw_execute().map(drop)
}

pub(crate) fn apply_delta(db: &Connection, d: &Delta) -> Result<()> {
    if d.count == 0 && d.size == 0 {
        return Ok(());
    }
    db.prepare_cached("UPDATE meta SET count = count + ?1, size = size + ?2")
        .and_then(|mut st| st.execute(params![d.count, d.size]))
        .ctx("updating the cache's counters")?;
    Ok(())
}

fn volume(db: &Connection, page_size: i64) -> Result<i64> {
    // A plain cached PRAGMA: the pragma_page_count() table function re-parses SQL on every step.
    let pages: i64 = db
        .prepare_cached("PRAGMA page_count")
        .and_then(|mut st| st.query_row([], |r| r.get(0)))
        .ctx("measuring the cache's volume")?;
    let files: i64 = db
        .prepare_cached("SELECT size FROM meta")
        .and_then(|mut st| st.query_row([], |r| r.get(0)))
        .ctx("measuring the cache's volume")?;
    Ok(pages * page_size + files)
}
