//! Engine errors to Python exceptions. The exception classes are defined in Python
//! (`diskcache_oxide.errors`) and imported here once (D-008).

use diskcache_oxide_engine::Error;
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
        Ok(class) => PyErr::from_type(class.clone(), (removed, error.to_string())),
        Err(_) => Exc::Timeout.err(py, error.to_string()),
    }
}

/// An engine error's message as Python shows it: the engine's text, with the advice a Python
/// caller can follow in Python's spelling (the engine's messages name no Python argument).
pub(crate) fn text(error: &Error) -> String {
    error.to_string()
}

/// Map an engine error to the Python exception documented in D-008.
pub(crate) fn to_py(py: Python<'_>, error: Error) -> PyErr {
    to_py_ref(py, &error)
}

/// [`to_py`] for an error the caller keeps (a queue item's, seen by a pull's decision).
pub(crate) fn to_py_ref(py: Python<'_>, error: &Error) -> PyErr {
    match error {
        Error::Timeout => Exc::Timeout.err(py, error.to_string()),
        Error::TimeoutAfter { removed } => timeout_with_count(py, *removed, error),
        Error::Corrupt(_) => Exc::CorruptValue.err(
            py,
            format!(
                "{error}; delete the key and store it again, or open the cache with \
                 on_decode_error='miss' to treat unreadable values as misses"
            ),
        ),
        Error::Unsafe(_) => Exc::UnsafeValue.err(py, error.to_string()),
        Error::UnknownType(_) => Exc::UnknownType.err(py, error.to_string()),
        Error::FormatVersion { .. } => Exc::FormatVersion.err(py, error.to_string()),
        Error::NotACache(_) => Exc::NotACache.err(py, error.to_string()),
        Error::InvalidArgument(_) | Error::Setting(_) => PyValueError::new_err(error.to_string()),
        Error::Overflow(_) => PyOverflowError::new_err(error.to_string()),
        Error::ReadOnly(_) => Exc::ReadOnly.err(py, error.to_string()),
        Error::LayoutMismatch(_) => Exc::LayoutMismatch.err(py, error.to_string()),
        Error::NoMemory(_) => PyMemoryError::new_err(error.to_string()),
        Error::Io {
            context,
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
            let message = format!("{context}: {text}");
            match (errno, path) {
                (Some(errno), Some(path)) => {
                    PyOSError::new_err((errno, message, path.to_string_lossy().into_owned()))
                }
                (Some(errno), None) => PyOSError::new_err((errno, message)),
                _ => PyOSError::new_err(error.to_string()),
            }
        }
        Error::Sqlite { .. } => {
            let advice = error.advice();
            Exc::Database.err(py, format!("{error}; {advice}"))
        }
        other => Exc::CacheError.err(py, other.to_string()),
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
