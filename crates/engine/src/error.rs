//! One error type for the whole engine. Each variant maps to one Python exception in the binding.

use std::fmt;
use std::io;
use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The database stayed locked by another connection for longer than the handle's timeout.
    Timeout,
    /// A batch removal (`expire`, `evict`, `clear`, `cull`) timed out after it had committed the
    /// removal of `removed` entries (python-diskcache raises `Timeout(count)`).
    TimeoutAfter { removed: u64 },
    /// Stored bytes failed their checksum or could not be decoded: no build could read them.
    Corrupt(Corruption),
    /// A stored key or value is a pickle, and this handle does not unpickle: unpickling runs
    /// code chosen by whoever wrote it (CVE-2025-69872).
    Unsafe { what: Pickled },
    /// The stored value names a custom type this process has not registered.
    UnknownType(String),
    /// The directory was written by a newer format than this build understands.
    FormatVersion { found: i64, supported: i64 },
    /// The directory holds something that is not a diskcache_oxide cache (or not this layout).
    NotACache(NotCache),
    /// A caller passed a value the engine cannot accept; the message names the argument.
    InvalidArgument(String),
    /// A setting name or value is not valid.
    Setting(String),
    /// A queue ran out of key numbers on one side (D-057).
    Overflow(String),
    /// A write was attempted on a handle opened with `read_only` (D-019); `directory` is the
    /// cache's.
    ReadOnly { directory: PathBuf },
    /// The directory's layout (a plain cache or a FanoutCache root) does not match the way
    /// it is being opened (D-018). Nothing on disk was changed.
    LayoutMismatch(Mismatch),
    /// Memory for a value file read from the directory (`name`, `len` bytes) could not be had:
    /// reported, never an abort (D-035). Reading it as a file handle streams it instead.
    NoMemory { name: String, len: u64 },
    /// A file system operation failed; `advice`, if any, says what to do about it.
    Io {
        context: String,
        advice: Option<IoAdvice>,
        path: Option<PathBuf>,
        source: io::Error,
    },
    /// A read-only handle was opened with settings that differ from those stored in the
    /// directory (each `name=value`, as asked for), which it cannot change (D-019).
    ReadOnlySettings { differ: Vec<String> },
    /// Any other SQLite failure (a full disk, an I/O error, a malformed database).
    Sqlite {
        context: &'static str,
        source: rusqlite::Error,
    },
}

/// What [`Error::Corrupt`] found, and the repair that applies, if one does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    pub message: String,
    pub repair: Option<Repair>,
}

impl Corruption {
    pub(crate) fn new(message: impl Into<String>) -> Corruption {
        Corruption {
            message: message.into(),
            repair: None,
        }
    }
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)?;
        match self.repair {
            None => Ok(()),
            Some(Repair::DropEntry) => write!(f, " (a check with fix drops the entry)"),
            Some(Repair::DropRows) => write!(f, " (a check with fix drops such rows)"),
            Some(Repair::RemoveEntries) => write!(f, "; a check with fix removes such entries"),
        }
    }
}

/// What [`Cache::check`](crate::Cache::check) with `fix` does about a [`Corruption`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Repair {
    /// It drops the entry whose value this is.
    DropEntry,
    /// It drops the rows that name such a file.
    DropRows,
    /// It removes the entries whose value files are missing.
    RemoveEntries,
}

/// How a directory's layout differs from the way it is being opened ([`Error::LayoutMismatch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mismatch {
    /// A plain cache was opened in a FanoutCache root; `shards` is its marker's count, if the
    /// marker could be read.
    FanoutRoot {
        directory: PathBuf,
        shards: Option<u64>,
    },
    /// A FanoutCache was asked for in the directory of a plain cache.
    PlainCache { directory: PathBuf },
    /// The FanoutCache was created with `found` shards, and `asked` were asked for.
    Shards {
        directory: PathBuf,
        found: u64,
        asked: u64,
    },
    /// The marker at `path` is not one this build reads, for the reason `why`.
    BadMarker { path: PathBuf, why: String },
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::names::{DB_NAME, FANOUT_MARKER};
        match self {
            Mismatch::FanoutRoot { directory, shards } => {
                write!(
                    f,
                    "{} is a FanoutCache root (it has {FANOUT_MARKER}), not a plain Cache; open \
                     it as a FanoutCache",
                    directory.display()
                )?;
                if let Some(n) = shards {
                    write!(f, " of {n} shards")?;
                }
                write!(f, ", or open the Cache in a directory of its own")
            }
            Mismatch::PlainCache { directory } => write!(
                f,
                "{} holds a plain Cache (it has {}), not a FanoutCache; open it as a Cache, or \
                 give the FanoutCache a directory of its own",
                directory.display(),
                DB_NAME
            ),
            Mismatch::Shards {
                directory,
                found,
                asked,
            } => write!(
                f,
                "the FanoutCache in {} was created with {found} shards, not {asked}; keys are \
                 spread over shards by count, so open it with {found} shards, or use a new \
                 directory for {asked} shards",
                directory.display()
            ),
            Mismatch::BadMarker { path, why } => write!(
                f,
                "{} is not a valid FanoutCache marker: {why}; it was not written by \
                 diskcache_oxide, or was damaged",
                path.display()
            ),
        }
    }
}

/// Why a directory is not a cache this handle can open ([`Error::NotACache`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotCache {
    /// A read-only open of a path that is not a directory.
    NotADirectory { directory: PathBuf },
    /// `cache.db` is not an SQLite database (a damaged header, or another kind of file).
    NotSqlite,
    /// A read-only open found `cache.db` empty: no cache was ever created there.
    Empty,
    /// SQLite could not put the database in WAL mode; it reports `mode`.
    NoWal { mode: String },
    /// `cache.db` is an SQLite database that diskcache_oxide did not create.
    Foreign,
    /// The lock file at `path` is `kind`, not a regular file.
    LockFile { path: PathBuf, kind: &'static str },
    /// One of the database's files (`path`) is `kind`, not a regular file.
    DatabaseFile { path: PathBuf, kind: &'static str },
}

impl fmt::Display for NotCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::names::DB_NAME;
        match self {
            NotCache::NotADirectory { directory } => {
                write!(f, "{} is not a directory", directory.display())
            }
            NotCache::NotSqlite => write!(
                f,
                "the cache database ({DB_NAME}) is not an SQLite database: its header is damaged \
                 or it is another kind of file; move it aside or open a new directory"
            ),
            NotCache::Empty => write!(
                f,
                "the cache database ({DB_NAME}) is empty: no cache was ever created here, and a \
                 read-only handle never creates one; open it once writable"
            ),
            NotCache::NoWal { mode } => write!(
                f,
                "SQLite could not put the cache database in WAL mode (it reports {mode:?}); the \
                 directory must be on a local file system that supports shared memory"
            ),
            NotCache::Foreign => write!(
                f,
                "the directory holds an SQLite database ({DB_NAME}) that diskcache_oxide did not \
                 create, perhaps a python-diskcache cache. diskcache_oxide uses its own format: \
                 copy the data into a new directory with diskcache_oxide's migration and open \
                 that one"
            ),
            NotCache::LockFile { path, kind } => write!(
                f,
                "the cache's lock file {} is {kind}, not a regular file; diskcache_oxide never \
                 follows a link or locks anything else there. Nothing was created or changed: \
                 remove it (rm {:?}) and the cache makes a new one",
                path.display(),
                path.display().to_string()
            ),
            NotCache::DatabaseFile { path, kind } => write!(
                f,
                "{} is {kind}, not a regular file; diskcache_oxide never follows a link or opens \
                 anything but a regular file among the cache's own files (SQLite would write \
                 through a link, or block reading a FIFO). Nothing was opened: if the link is \
                 yours, replace it with the file it points to; otherwise remove it (with a \
                 damaged cache, move the whole directory aside) and open the cache again",
                path.display()
            ),
        }
    }
}

/// What to do about an [`Error::Io`], when there is one thing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IoAdvice {
    /// Something the cache never follows is in the way: a check with `fix` removes it.
    CheckRemoves,
    /// A read-only open found no database, and a read-only handle never creates one.
    ReadOnlyCreatesNothing,
}

impl IoAdvice {
    /// The advice in the engine's words.
    pub fn text(self) -> &'static str {
        match self {
            IoAdvice::CheckRemoves => "a check with fix removes it",
            IoAdvice::ReadOnlyCreatesNothing => "a read-only handle never creates one",
        }
    }
}

/// What [`Error::Unsafe`] found pickled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pickled {
    Key,
    Value,
}

impl Pickled {
    /// "key" or "value".
    pub fn noun(self) -> &'static str {
        match self {
            Pickled::Key => "key",
            Pickled::Value => "value",
        }
    }
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, path: Option<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            context: context.into(),
            advice: None,
            path,
            source,
        }
    }

    /// [`Error::io`] with what to do about it.
    pub(crate) fn io_advised(
        context: impl Into<String>,
        advice: IoAdvice,
        path: Option<PathBuf>,
        source: io::Error,
    ) -> Self {
        Error::Io {
            context: context.into(),
            advice: Some(advice),
            path,
            source,
        }
    }

    pub(crate) fn corrupt(message: impl Into<String>) -> Self {
        Error::Corrupt(Corruption::new(message))
    }

    /// [`Error::corrupt`], for damage that [`Cache::check`](crate::Cache::check) with `fix`
    /// repairs by `repair`.
    pub(crate) fn corrupt_fixed_by(message: impl Into<String>, repair: Repair) -> Self {
        Error::Corrupt(Corruption {
            message: message.into(),
            repair: Some(repair),
        })
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument(message.into())
    }

    /// Whether the failure was a lack of disk space (SQLite's "database or disk is full", or
    /// `ENOSPC` from a file operation).
    pub(crate) fn is_disk_full(&self) -> bool {
        match self {
            Error::Sqlite {
                source: rusqlite::Error::SqliteFailure(f, _),
                ..
            } => f.code == rusqlite::ErrorCode::DiskFull,
            Error::Io { source, .. } => source.raw_os_error() == Some(libc::ENOSPC),
            _ => false,
        }
    }

    /// What kind of storage failure this is, from SQLite's error code: `None` for an error
    /// that is not an [`Error::Sqlite`]. Each kind has its own [`advice`](Error::advice).
    pub fn storage_failure(&self) -> Option<StorageFailure> {
        use rusqlite::ErrorCode;
        let Error::Sqlite { source, .. } = self else {
            return None;
        };
        Some(match source.sqlite_error_code() {
            Some(ErrorCode::DiskFull) => StorageFailure::DiskFull,
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => StorageFailure::Damaged,
            // SQLite reports a broken lock protocol when its WAL-index locks vanish under it;
            // the usual cause is a second copy of SQLite closing the file in this process.
            Some(ErrorCode::FileLockingProtocolFailed) => StorageFailure::LocksDisturbed,
            Some(ErrorCode::ReadOnly | ErrorCode::PermissionDenied) => StorageFailure::NotPermitted,
            Some(ErrorCode::CannotOpen) => StorageFailure::CannotOpen,
            Some(ErrorCode::SystemIoFailure) => StorageFailure::IoError,
            Some(ErrorCode::OutOfMemory) => StorageFailure::OutOfMemory,
            _ => StorageFailure::Other,
        })
    }

    /// What to do about a storage failure (`Error::Sqlite`), for the message shown to users.
    pub fn advice(&self) -> &'static str {
        match self.storage_failure().unwrap_or(StorageFailure::Other) {
            StorageFailure::DiskFull => "free space on the disk and retry",
            StorageFailure::Damaged => {
                "the database is damaged: run a check of the cache to see where, or move the \
                 directory aside and start a new cache"
            }
            StorageFailure::LocksDisturbed => {
                "the database's locks were disturbed: if this process also opens cache.db with \
                 another SQLite (a second copy of the library, say), stop doing so, then retry"
            }
            StorageFailure::NotPermitted => {
                "this process may not write the cache's files: fix their owner or permissions, \
                 or open the cache read-only"
            }
            StorageFailure::CannotOpen => {
                "the cache's files could not be opened: check that the directory still exists and \
                 that this process may read and write it"
            }
            StorageFailure::IoError => {
                "the operating system reported an I/O error: check the disk and file system, then \
                 run a check of the cache"
            }
            StorageFailure::OutOfMemory => "the process ran out of memory; free some and retry",
            StorageFailure::Other => {
                "if the disk is full, free space and retry; otherwise run a check of the cache to \
                 look for damage, or move the directory aside and start a new cache"
            }
        }
    }
}

/// The kinds of [`Error::Sqlite`] that call for different advice ([`Error::storage_failure`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StorageFailure {
    /// The disk is full.
    DiskFull,
    /// The database file is damaged, or not a database.
    Damaged,
    /// SQLite's WAL index locks vanished under it (another SQLite in the process).
    LocksDisturbed,
    /// The files are read-only or not this process's to write.
    NotPermitted,
    /// The files could not be opened.
    CannotOpen,
    /// The operating system reported an I/O error.
    IoError,
    /// SQLite ran out of memory.
    OutOfMemory,
    /// Anything else.
    Other,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Timeout => write!(
                f,
                "the cache database stayed locked past the handle's timeout; \
                 retry, or open the cache with a larger timeout"
            ),
            Error::TimeoutAfter { removed } => write!(
                f,
                "the cache database stayed locked past the handle's timeout after {removed} \
                 entries were removed; call again to remove the rest, or open the cache with a \
                 larger timeout"
            ),
            Error::Corrupt(m) => write!(f, "corrupt value: {m}"),
            Error::Unsafe { what } => write!(
                f,
                "this {} is a pickle and the handle does not read pickles, so it was not \
                 unpickled (unpickling runs code chosen by whoever wrote it, CVE-2025-69872); \
                 let the handle read pickles only if you trust every writer of this directory",
                what.noun()
            ),
            Error::UnknownType(m) => write!(f, "{m}"),
            Error::FormatVersion { found, supported } => write!(
                f,
                "this cache directory uses format version {found}, but this build of \
                 diskcache_oxide reads only versions up to {supported}; upgrade diskcache_oxide \
                 or use another directory"
            ),
            Error::NotACache(m) => write!(f, "{m}"),
            Error::InvalidArgument(m) => write!(f, "{m}"),
            Error::Setting(m) => write!(f, "{m}"),
            Error::Overflow(m) => write!(f, "{m}"),
            Error::ReadOnly { directory } => write!(
                f,
                "this cache handle was opened read-only and cannot write; open {:?} without \
                 read_only to change it",
                directory.display().to_string()
            ),
            Error::LayoutMismatch(m) => write!(f, "{m}"),
            Error::NoMemory { name, len } => write!(
                f,
                "reading the {len}-byte value file {name:?}: not enough memory; read it as a file \
                 handle to stream it instead"
            ),
            Error::Io {
                context,
                advice,
                path,
                source,
            } => {
                write!(f, "{context}")?;
                if let Some(advice) = advice {
                    write!(f, "; {}", advice.text())?;
                }
                match path {
                    Some(p) => write!(f, " ({}): {source}", p.display()),
                    None => write!(f, ": {source}"),
                }
            }
            Error::ReadOnlySettings { differ } => write!(
                f,
                "a read-only handle cannot change the settings stored in the directory, and \
                 these differ from them: {}; drop them, or open the cache writable to change them",
                differ.join(", ")
            ),
            Error::Sqlite { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Sqlite { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Attach context to SQLite errors, turning lock contention into `Error::Timeout`.
pub(crate) trait SqlContext<T> {
    fn ctx(self, context: &'static str) -> Result<T>;
}

impl<T> SqlContext<T> for rusqlite::Result<T> {
    fn ctx(self, context: &'static str) -> Result<T> {
        self.map_err(|e| sql_error(context, e))
    }
}

pub(crate) fn sql_error(context: &'static str, e: rusqlite::Error) -> Error {
    use rusqlite::ErrorCode;
    if let rusqlite::Error::SqliteFailure(f, _) = &e {
        if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) {
            return Error::Timeout;
        }
    }
    Error::Sqlite { context, source: e }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::ffi;

    fn advice_for(code: std::ffi::c_int) -> &'static str {
        let failure = rusqlite::Error::SqliteFailure(ffi::Error::new(code), None);
        sql_error("testing", failure).advice()
    }

    #[test]
    fn each_kind_of_storage_failure_gets_its_own_advice() {
        assert!(advice_for(ffi::SQLITE_FULL).contains("free space"));
        assert!(advice_for(ffi::SQLITE_CORRUPT).contains("damaged"));
        assert!(advice_for(ffi::SQLITE_PROTOCOL).contains("another SQLite"));
        assert!(advice_for(ffi::SQLITE_READONLY).contains("read-only"));
        assert!(advice_for(ffi::SQLITE_PERM).contains("permissions"));
        assert!(advice_for(ffi::SQLITE_CANTOPEN).contains("directory still exists"));
        assert!(advice_for(ffi::SQLITE_IOERR).contains("I/O error"));
        assert!(advice_for(ffi::SQLITE_NOMEM).contains("memory"));
        // Anything else: the two likely causes, in order.
        assert!(advice_for(ffi::SQLITE_ERROR).starts_with("if the disk is full"));
        // No Python spelling: the binding words its own advice (D-050).
        for code in [
            ffi::SQLITE_CORRUPT,
            ffi::SQLITE_READONLY,
            ffi::SQLITE_IOERR,
            ffi::SQLITE_ERROR,
        ] {
            let advice = advice_for(code);
            assert!(
                !advice.contains("=True") && !advice.contains("()"),
                "{advice}"
            );
        }
    }
}

#[cfg(test)]
mod wording {
    use super::*;

    #[test]
    fn the_engine_names_no_python_call() {
        let errors = [
            Error::Timeout,
            Error::TimeoutAfter { removed: 3 },
            Error::Unsafe { what: Pickled::Key },
            Error::Unsafe {
                what: Pickled::Value,
            },
            Error::ReadOnly {
                directory: "/c".into(),
            },
            Error::NoMemory {
                name: "ab/cd.val".into(),
                len: 9,
            },
            Error::corrupt_fixed_by(
                "value file \"ab/cd.val\" is 7 bytes long",
                Repair::DropEntry,
            ),
            Error::corrupt_fixed_by("a row names \"x\"", Repair::DropRows),
            Error::corrupt_fixed_by("it is missing", Repair::RemoveEntries),
            Error::LayoutMismatch(Mismatch::FanoutRoot {
                directory: "/c".into(),
                shards: Some(4),
            }),
            Error::LayoutMismatch(Mismatch::PlainCache {
                directory: "/c".into(),
            }),
            Error::LayoutMismatch(Mismatch::Shards {
                directory: "/c".into(),
                found: 4,
                asked: 2,
            }),
            Error::NotACache(NotCache::Empty),
            Error::NotACache(NotCache::Foreign),
            Error::ReadOnlySettings {
                differ: vec!["cull_limit=99".into()],
            },
            Error::io_advised(
                "opening a cache read-only: the directory holds no cache database",
                IoAdvice::ReadOnlyCreatesNothing,
                Some("/c/cache.db".into()),
                io::Error::from_raw_os_error(libc::ENOENT),
            ),
            Error::io_advised(
                "creating a value file",
                IoAdvice::CheckRemoves,
                None,
                io::Error::from_raw_os_error(libc::ENOTDIR),
            ),
        ];
        for e in errors {
            let text = e.to_string();
            for python in ["=True", "=False", "shards=", "Cache(", "check(", "migrate("] {
                assert!(!text.contains(python), "{python} in {text}");
            }
        }
        assert_eq!(
            Error::corrupt_fixed_by("it is missing", Repair::RemoveEntries).to_string(),
            "corrupt value: it is missing; a check with fix removes such entries"
        );
    }
}
