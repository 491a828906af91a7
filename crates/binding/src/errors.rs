//! Engine errors to Python exceptions. The exception classes are defined in Python
//! (`diskcache_oxide.errors`) and imported here once (D-008).

use diskcache_oxide_engine::{
    Corruption, Error, IoAdvice, Mismatch, NotCache, Pickled, Repair, StorageFailure, FANOUT_MARKER,
};
use pyo3::exceptions::{PyMemoryError, PyOSError, PyOverflowError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// The exception classes of `diskcache_oxide.errors` the binding raises.
#[derive(Clone, Copy)]
pub(crate) enum Exc {
    CacheError,
    Timeout,
    DecodeError,
    CorruptValue,
    UnsafeValue,
    UnknownType,
    UnsupportedType,
    FormatVersion,
    NotACache,
    Database,
    ReadOnly,
    LayoutMismatch,
}

impl Exc {
    fn class_name(self) -> &'static str {
        match self {
            Exc::CacheError => "CacheError",
            Exc::Timeout => "Timeout",
            Exc::DecodeError => "DecodeError",
            Exc::CorruptValue => "CorruptValueError",
            Exc::UnsafeValue => "UnsafeValueError",
            Exc::UnknownType => "UnknownTypeError",
            Exc::UnsupportedType => "UnsupportedTypeError",
            Exc::FormatVersion => "FormatVersionError",
            Exc::NotACache => "NotACacheError",
            Exc::Database => "DatabaseError",
            Exc::ReadOnly => "ReadOnlyError",
            Exc::LayoutMismatch => "LayoutMismatchError",
        }
    }

    fn cell(self) -> &'static PyOnceLock<Py<PyType>> {
        const COUNT: usize = Exc::LayoutMismatch as usize + 1;
        static CELLS: [PyOnceLock<Py<PyType>>; COUNT] = [const { PyOnceLock::new() }; COUNT];
        &CELLS[self as usize]
    }

    pub(crate) fn class(self, py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
        self.cell()
            .import(py, "diskcache_oxide.errors", self.class_name())
    }

    /// A new exception of this class with `message`.
    pub(crate) fn err(self, py: Python<'_>, message: impl Into<String>) -> PyErr {
        let message = message.into();
        match self.class(py) {
            Ok(class) => PyErr::from_type(class.clone(), message),
            // Only if the package's Python half is missing or broken.
            Err(e) => {
                let err = PyRuntimeError::new_err(format!(
                    "{message} (and diskcache_oxide.errors could not be imported; reinstall diskcache_oxide)"
                ));
                err.set_cause(py, Some(e));
                err
            }
        }
    }

    /// Whether `err` is an instance of this class.
    pub(crate) fn matches(self, py: Python<'_>, err: &PyErr) -> bool {
        match self.class(py) {
            Ok(class) => err.is_instance(py, class.as_any()),
            Err(_) => false,
        }
    }
}

/// `Timeout(count, message)`: python-diskcache's `Timeout(count)` for the batch removals, whose
/// `args[0]` is how many entries were removed, plus what to do next.
pub(crate) fn timeout_with_count(py: Python<'_>, removed: u64, error: &Error) -> PyErr {
    match Exc::Timeout.class(py) {
        Ok(class) => PyErr::from_type(class.clone(), (removed, text(error))),
        Err(_) => Exc::Timeout.err(py, text(error)),
    }
}

/// An engine error's message as Python shows it: the engine's text, with the advice a Python
/// caller can follow in Python's spelling (the engine's messages name no Python argument).
pub(crate) fn text(error: &Error) -> String {
    match error {
        Error::Timeout => "the cache database stayed locked past the handle's timeout; retry, \
                           pass retry=True, or open the cache with a larger timeout"
            .to_owned(),
        Error::TimeoutAfter { removed } => format!(
            "the cache database stayed locked past the handle's timeout after {removed} entries \
             were removed; call again to remove the rest, pass retry=True, or open the cache \
             with a larger timeout"
        ),
        Error::Unsafe { what: Pickled::Key } => {
            "this key is a pickle and the handle was opened with pickle=False; open it with \
              pickle=True if you trust every writer of this directory"
                .to_owned()
        }
        Error::Unsafe { .. } => "this value is a pickle and the cache was opened with \
                                 pickle=False, so it was not unpickled (unpickling runs code \
                                 chosen by whoever wrote it, CVE-2025-69872); open the cache \
                                 with pickle=True only if you trust every writer of this \
                                 directory"
            .to_owned(),
        Error::ReadOnly { directory } => format!(
            "this cache handle was opened with read_only=True and cannot write; open {:?} \
             without read_only=True to change it",
            directory.display().to_string()
        ),
        Error::NoMemory { name, len } => format!(
            "reading the {len}-byte value file {name:?}: not enough memory; read it with \
             read=True to stream it instead"
        ),
        Error::LayoutMismatch(mismatch) => layout_text(mismatch),
        Error::ReadOnlySettings { differ } => format!(
            "a read_only=True handle cannot change the settings stored in the directory, and \
             these differ from them: {}; drop them, or open the cache without read_only=True to \
             change them",
            differ.join(", ")
        ),
        Error::NotACache(NotCache::Empty) => "the cache database (cache.db) is empty: no cache \
                                              was ever created here, and read_only=True never \
                                              creates one; open it once without read_only=True"
            .to_owned(),
        Error::NotACache(NotCache::Foreign) => "the directory holds an SQLite database \
            (cache.db) that diskcache_oxide did not create, perhaps a python-diskcache cache. \
            diskcache_oxide uses its own format: copy the data into a new directory with \
            `diskcache-oxide migrate SRC DST` (or diskcache_oxide.migrate(src, dst)) and open \
            that one"
            .to_owned(),
        Error::Corrupt(corruption) => format!("corrupt value: {}", corruption_text(corruption)),
        other => other.to_string(),
    }
}

/// What is damaged, with the repair in Python's terms (`check(fix=True)`).
pub(crate) fn corruption_text(corruption: &Corruption) -> String {
    let repair = match corruption.repair {
        None => "",
        Some(Repair::DropEntry) => " (run check(fix=True) to drop the entry)",
        Some(Repair::DropRows) => " (run check(fix=True) to drop such rows)",
        Some(Repair::RemoveEntries) => "; check(fix=True) removes such entries",
        Some(_) => return corruption.to_string(),
    };
    format!("{}{repair}", corruption.message)
}

/// What to do about an I/O failure, in Python's terms.
fn io_advice(advice: IoAdvice) -> &'static str {
    match advice {
        IoAdvice::CheckRemoves => "run check(fix=True) to remove it",
        IoAdvice::ReadOnlyCreatesNothing => "read_only=True never creates one",
        other => other.text(),
    }
}

/// A layout mismatch in Python's terms: the call that opens the directory the right way.
fn layout_text(mismatch: &Mismatch) -> String {
    let quoted = |d: &std::path::Path| format!("{:?}", d.display().to_string());
    match mismatch {
        Mismatch::FanoutRoot { directory, shards } => {
            let call = match shards {
                Some(n) => format!("FanoutCache({}, shards={n})", quoted(directory)),
                None => format!("FanoutCache({})", quoted(directory)),
            };
            format!(
                "{} is a FanoutCache root (it has {FANOUT_MARKER}), not a plain Cache; open it \
                 with {call}, or open the Cache in a directory of its own",
                directory.display()
            )
        }
        Mismatch::PlainCache { directory } => format!(
            "{} holds a plain Cache (it has {}), not a FanoutCache; open it with Cache({}), or \
             give the FanoutCache a directory of its own",
            directory.display(),
            diskcache_oxide_engine::DB_NAME,
            quoted(directory)
        ),
        Mismatch::Shards {
            directory,
            found,
            asked,
        } => format!(
            "the FanoutCache in {} was created with shards={found}, not shards={asked}; keys \
             are spread over shards by count, so open it with FanoutCache({}, shards={found}), \
             or use a new directory for {asked} shards",
            directory.display(),
            quoted(directory)
        ),
        other => other.to_string(),
    }
}

/// What to do about a storage failure, in Python's terms (the engine's [`Error::advice`] names
/// no Python call).
fn advice(error: &Error) -> &'static str {
    match error.storage_failure() {
        Some(StorageFailure::Damaged) => {
            "the database is damaged: run cache.check() to see where, or move the directory \
             aside and start a new cache"
        }
        Some(StorageFailure::LocksDisturbed) => {
            "the database's locks were disturbed: if this process also opens cache.db with \
             another SQLite (Python's sqlite3 module, say), stop doing so, then retry"
        }
        Some(StorageFailure::NotPermitted) => {
            "this process may not write the cache's files: fix their owner or permissions, or \
             open the cache with read_only=True"
        }
        Some(StorageFailure::IoError) => {
            "the operating system reported an I/O error: check the disk and file system, then \
             run cache.check()"
        }
        Some(StorageFailure::Other) | None => {
            "if the disk is full, free space and retry; otherwise run cache.check() to look for \
             damage, or move the directory aside and start a new cache"
        }
        // The rest name no Python call: the engine's words.
        Some(_) => error.advice(),
    }
}

/// Map an engine error to the Python exception documented in D-008.
pub(crate) fn to_py(py: Python<'_>, error: Error) -> PyErr {
    to_py_ref(py, &error)
}

/// [`to_py`] for an error the caller keeps (a queue item's, seen by a pull's decision).
pub(crate) fn to_py_ref(py: Python<'_>, error: &Error) -> PyErr {
    match error {
        Error::Timeout => Exc::Timeout.err(py, text(error)),
        Error::TimeoutAfter { removed } => timeout_with_count(py, *removed, error),
        Error::Corrupt(_) => Exc::CorruptValue.err(
            py,
            format!(
                "{}; delete the key and store it again, or open the cache with \
                 on_decode_error='miss' to treat unreadable values as misses",
                text(error)
            ),
        ),
        Error::Unsafe { .. } => Exc::UnsafeValue.err(py, text(error)),
        Error::UnknownType(_) => Exc::UnknownType.err(py, text(error)),
        Error::FormatVersion { .. } => Exc::FormatVersion.err(py, text(error)),
        Error::NotACache(_) => Exc::NotACache.err(py, text(error)),
        Error::InvalidArgument(_) | Error::Setting(_) | Error::ReadOnlySettings { .. } => {
            PyValueError::new_err(text(error))
        }
        Error::Overflow(_) => PyOverflowError::new_err(text(error)),
        Error::ReadOnly { .. } => Exc::ReadOnly.err(py, text(error)),
        Error::LayoutMismatch(_) => Exc::LayoutMismatch.err(py, text(error)),
        Error::NoMemory { .. } => PyMemoryError::new_err(text(error)),
        Error::Io {
            context,
            advice,
            path,
            source,
        } => {
            let errno = source.raw_os_error();
            // The OS text without Rust's " (os error N)": Python shows the errno itself.
            let text = source.to_string();
            let text = match errno {
                Some(n) => text
                    .strip_suffix(&format!(" (os error {n})"))
                    .unwrap_or(&text)
                    .to_owned(),
                None => text,
            };
            let message = match advice {
                Some(advice) => format!("{context}; {}: {text}", io_advice(*advice)),
                None => format!("{context}: {text}"),
            };
            match (errno, path) {
                (Some(errno), Some(path)) => {
                    PyOSError::new_err((errno, message, path.to_string_lossy().into_owned()))
                }
                (Some(errno), None) => PyOSError::new_err((errno, message)),
                _ => PyOSError::new_err(error.to_string()),
            }
        }
        Error::Sqlite { .. } => {
            let advice = advice(error);
            Exc::Database.err(py, format!("{}; {advice}", text(error)))
        }
        other => Exc::CacheError.err(py, text(other)),
    }
}

/// `Result<T, Error>` to `PyResult<T>`.
pub(crate) trait IntoPy<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, Error> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
