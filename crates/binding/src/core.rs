//! `CacheCore`, the Rust base class of `diskcache_oxide.Cache`: the handle, how it opens,
//! its properties, transactions and close, and the loop every engine call runs in (`run`).
//!
//! Its calls live by concept, each file a `#[pymethods]` block of its own: the cache calls in
//! `cache.rs`, the queue calls in `queue.rs`, the leased-job calls in `jobs.rs`. Every method
//! converts its Python arguments while attached, runs the engine call with the GIL released
//! (`Python::detach`), and converts the result after re-attaching.

use crate::convert::{setting_from_py, setting_to_py, Ctx, Flag};
use crate::errors::IntoPy;
use diskcache_oxide_engine::{Cache, Error, OpenOptions};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// What `_open` sets once; read by every call.
pub(crate) struct Handle {
    pub(crate) cache: Arc<Cache>,
    pub(crate) directory: String,
    timeout: f64,
    pub(crate) pickle: bool,
    /// `on_decode_error='miss'`.
    pub(crate) miss: bool,
    /// `durable=True`: the Python layer turns operational errors into misses (D-020).
    durable: bool,
}

impl Handle {
    pub(crate) fn ctx(&self) -> Ctx<'_> {
        Ctx {
            pickle: self.pickle,
            cache: &self.cache,
        }
    }
}

/// Run an engine call with the GIL released; with `retry`, run it again after each
/// `Error::Timeout` (python-diskcache's `retry=True`), checking for Ctrl-C in between.
pub(crate) fn run<T, F>(py: Python<'_>, retry: bool, f: F) -> PyResult<T>
where
    F: Fn() -> Result<T, Error> + Sync,
    T: Send,
{
    loop {
        match py.detach(&f) {
            Err(Error::Timeout) if retry => py.check_signals()?,
            result => return result.py_err(py),
        }
    }
}

#[pyclass(subclass, frozen, module = "diskcache_oxide", name = "CacheCore")]
pub(crate) struct CacheCore {
    handle: OnceLock<Handle>,
}

impl Drop for CacheCore {
    /// Closing the last handle closes SQLite connections (and may checkpoint the WAL):
    /// do that with the GIL released too.
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            release(handle);
        }
    }
}

/// Drop `value` with the GIL released.
pub(crate) fn release<T: Send>(value: T) {
    Python::attach(|py| py.detach(move || drop(value)));
}

impl CacheCore {
    pub(crate) fn h(&self) -> PyResult<&Handle> {
        self.handle.get().ok_or_else(|| {
            PyRuntimeError::new_err(
                "this Cache is not open: its __init__ did not run; a subclass that overrides \
                 __init__ must call super().__init__(directory, ...)",
            )
        })
    }

    pub(crate) fn begin(&self, py: Python<'_>, retry: bool) -> PyResult<()> {
        let cache = &*self.h()?.cache;
        run(py, retry, || cache.begin())
    }

    pub(crate) fn end(&self, py: Python<'_>, commit: bool) -> PyResult<()> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.end(commit))
    }

    /// Run `f` inside an engine transaction: committed if it succeeds, rolled back if not.
    pub(crate) fn in_transaction<T>(
        &self,
        py: Python<'_>,
        retry: bool,
        f: impl FnOnce() -> PyResult<T>,
    ) -> PyResult<T> {
        self.begin(py, retry)?;
        match f() {
            Ok(v) => {
                self.end(py, true)?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.end(py, false);
                Err(e)
            }
        }
    }

    pub(crate) fn setting(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        let cache = &*self.h()?.cache;
        let settings = py.detach(|| cache.settings());
        let value = settings.get(name).py_err(py)?;
        Ok(setting_to_py(py, value)?.unbind())
    }
}

#[pymethods]
impl CacheCore {
    /// The handle opens in `_open`, called by `Cache.__init__`, so that subclasses may
    /// override `__init__` as they could with python-diskcache.
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        CacheCore {
            handle: OnceLock::new(),
        }
    }

    #[pyo3(signature = (directory, timeout, pickle, on_decode_error, settings=None, read_only=false, durable=false))]
    #[allow(clippy::too_many_arguments)]
    fn _open(
        &self,
        py: Python<'_>,
        directory: String,
        timeout: f64,
        pickle: bool,
        on_decode_error: &str,
        settings: Option<&Bound<'_, PyDict>>,
        read_only: bool,
        durable: bool,
    ) -> PyResult<()> {
        if self.handle.get().is_some() {
            return Err(PyRuntimeError::new_err(
                "this Cache is already open; make a new Cache object to open another directory",
            ));
        }
        let miss = match on_decode_error {
            "raise" => false,
            "miss" => true,
            other => {
                return Err(PyValueError::new_err(format!(
                    "on_decode_error must be 'raise' or 'miss', not {other:?}"
                )))
            }
        };
        let duration = Duration::try_from_secs_f64(timeout).map_err(|_| {
            PyValueError::new_err(format!(
                "timeout must be a finite number of seconds >= 0, not {timeout}"
            ))
        })?;
        let mut options = OpenOptions {
            timeout: duration,
            settings: Vec::new(),
            read_only,
        };
        if let Some(settings) = settings {
            for (name, value) in settings.iter() {
                let name: String = name
                    .extract()
                    .map_err(|_| PyTypeError::new_err("setting names must be str"))?;
                let value = setting_from_py(&name, &value)?;
                options.settings.push((name, value));
            }
        }
        let cache = {
            let dir = directory.as_str();
            py.detach(|| Cache::open(dir, options)).py_err(py)?
        };
        let handle = Handle {
            cache: Arc::new(cache),
            directory,
            timeout,
            pickle,
            miss,
            durable,
        };
        self.handle
            .set(handle)
            .map_err(|_| PyRuntimeError::new_err("this Cache was opened twice at once"))
    }

    // ---- properties ------------------------------------------------------------------------

    #[getter]
    fn directory(&self) -> PyResult<&str> {
        Ok(&self.h()?.directory)
    }

    #[getter]
    fn timeout(&self) -> PyResult<f64> {
        Ok(self.h()?.timeout)
    }

    /// Whether the handle was opened with `read_only=True`: every write raises `ReadOnlyError`.
    #[getter]
    fn read_only(&self) -> PyResult<bool> {
        Ok(self.h()?.cache.read_only())
    }

    /// Whether the handle was opened with `durable=True`: operational errors become misses.
    #[getter]
    fn durable(&self) -> PyResult<bool> {
        Ok(self.h()?.durable)
    }

    #[getter]
    fn pickle(&self) -> PyResult<bool> {
        Ok(self.h()?.pickle)
    }

    #[getter]
    fn on_decode_error(&self) -> PyResult<&'static str> {
        Ok(if self.h()?.miss { "miss" } else { "raise" })
    }

    #[getter]
    fn statistics(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.setting(py, "statistics")
    }

    #[getter]
    fn tag_index(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.setting(py, "tag_index")
    }

    #[getter]
    fn eviction_policy(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.setting(py, "eviction_policy")
    }

    #[getter]
    fn size_limit(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.setting(py, "size_limit")
    }

    #[getter]
    fn cull_limit(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.setting(py, "cull_limit")
    }

    #[getter]
    fn sqlite_auto_vacuum(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.setting(py, "sqlite_auto_vacuum")
    }

    #[getter]
    fn sqlite_cache_size(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.setting(py, "sqlite_cache_size")
    }

    #[getter]
    fn sqlite_journal_mode(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.setting(py, "sqlite_journal_mode")
    }

    #[getter]
    fn sqlite_mmap_size(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.setting(py, "sqlite_mmap_size")
    }

    #[getter]
    fn sqlite_synchronous(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.setting(py, "sqlite_synchronous")
    }

    #[getter]
    fn disk_min_file_size(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.setting(py, "disk_min_file_size")
    }

    #[getter]
    fn disk_pickle_protocol(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.setting(py, "disk_pickle_protocol")
    }

    // ---- transactions and connection -------------------------------------------------------

    #[pyo3(signature = (retry=Flag(false)), text_signature = "(self, retry=False)")]
    fn _begin(&self, py: Python<'_>, retry: Flag) -> PyResult<()> {
        self.begin(py, retry.0)
    }

    fn _end(&self, py: Python<'_>, commit: bool) -> PyResult<()> {
        self.end(py, commit)
    }

    /// Close this thread's connection to the database, rolling back a transaction it left
    /// open. A later call on the handle opens a new one, as in python-diskcache.
    #[pyo3(text_signature = "(self)")]
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        // Closing a handle that never opened is a no-op, as in python-diskcache.
        if let Some(h) = self.handle.get() {
            let cache = &*h.cache;
            py.detach(|| cache.close());
        }
        Ok(())
    }
}
