//! The cache: one directory, one SQLite database in WAL mode, value files beside it.
//!
//! This file holds the handle, the state its clones share, and the small types the calls
//! pass between them. Opening is in `open`, this thread's connection in `connection`, atomic
//! writes and transactions in `transaction`; the calls themselves are in `read`, `write`,
//! `maintenance` and `check`, over the row and value helpers of `rows`, `entries` and
//! `values`, and the schema in `schema`.
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
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use thread_local::ThreadLocal;

/// The on-disk format this build writes and the newest it reads (`PRAGMA user_version`).
pub const FORMAT_VERSION: i64 = 1;
/// `PRAGMA application_id`: marks a database as ours ("DCOX").
const APPLICATION_ID: i64 = 0x4443_4f58;
pub use crate::names::DB_NAME;
/// Rows per batch in the maintenance loops that release the write lock between batches.
const BATCH: i64 = 100;

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

impl Cache {
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
}

// Declared after `row_columns!` so the submodules can use it.
mod check;
mod connection;
mod entries;
mod maintenance;
mod open;
mod read;
mod rows;
mod schema;
mod transaction;
mod values;
mod write;

pub use check::Problem;
use connection::Conn;
pub(crate) use entries::{entry_select, Placed};
pub use open::OpenOptions;
use rows::*;
pub(crate) use rows::{apply_delta, inline_sql, key_from, key_sql};
use schema::*;
#[cfg(test)]
pub(crate) use values::VALUE_COLUMNS;
pub(crate) use values::{PreviewColumns, ValueColumns, PREVIEW_COLUMNS};
