//! `Handle`, what `CacheCore._open` sets once and every call reads: the engine handle, the
//! directory, the options the Python layer asked for; how it opens, its transactions, and how
//! a decode error becomes a miss under `on_decode_error='miss'`.

use crate::args::{seconds_f64, Seconds};
use crate::convert::{fetched_to_py, setting_from_py, setting_to_py, Ctx};
use crate::decode::{Got, Hit};
use crate::errors::{Exc, IntoPy};
use crate::pyobj;
use crate::run::run;
use diskcache_oxide_engine::{Cache, OpenOptions};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;
use std::time::Duration;

/// What `_open` sets once; read by every call.
pub(crate) struct Handle {
    pub(crate) cache: Arc<Cache>,
    pub(crate) directory: String,
    pub(crate) timeout: f64,
    pub(crate) pickle: bool,
    /// `on_decode_error='miss'`.
    pub(crate) miss: bool,
    /// `durable=True`: the Python layer turns operational errors into misses (D-020).
    pub(crate) durable: bool,
}

impl Handle {
    /// Open the cache in `directory` (the GIL released while it opens).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn open(
        py: Python<'_>,
        directory: String,
        timeout: f64,
        pickle: bool,
        on_decode_error: &str,
        settings: Option<&Bound<'_, PyDict>>,
        read_only: bool,
        durable: bool,
    ) -> PyResult<Handle> {
        let miss = match on_decode_error {
            "raise" => false,
            "miss" => true,
            other => {
                return Err(PyValueError::new_err(format!(
                    "on_decode_error must be 'raise' or 'miss', not {other:?}"
                )))
            }
        };
        let duration =
            Duration::from_secs_f64(seconds_f64(py, "timeout", timeout, Seconds::LOCK_WAIT)?);
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
        Ok(Handle {
            cache: Arc::new(cache),
            directory,
            timeout,
            pickle,
            miss,
            durable,
        })
    }

    pub(crate) fn ctx(&self) -> Ctx<'_> {
        Ctx {
            pickle: self.pickle,
            cache: Some(&self.cache),
        }
    }

    pub(crate) fn begin(&self, py: Python<'_>, retry: bool) -> PyResult<()> {
        let cache = &*self.cache;
        run(py, retry, || cache.begin())
    }

    pub(crate) fn end(&self, py: Python<'_>, commit: bool) -> PyResult<()> {
        let cache = &*self.cache;
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
        let cache = &*self.cache;
        let settings = py.detach(|| cache.settings());
        let value = settings.get(name).py_err(py)?;
        Ok(setting_to_py(py, value)?.unbind())
    }

    /// On a decode error with `on_decode_error='miss'`: log it and report a miss (Ok).
    pub(crate) fn decode_miss(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        err: PyErr,
    ) -> PyResult<()> {
        if !(self.miss && Exc::DecodeError.matches(py, &err)) {
            return Err(err);
        }
        let message = err.value(py).str()?;
        pyobj::logger(py)?.call_method1(
            intern!(py, "warning"),
            (
                "treating key %r in %s as a miss (on_decode_error='miss'): %s",
                key,
                self.directory.as_str(),
                message,
            ),
        )?;
        Ok(())
    }

    /// The value (converted) or `None` for a miss; the metadata is passed through.
    pub(crate) fn convert_got<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        got: Got,
    ) -> PyResult<Option<Hit<'py>>> {
        let Some((value, expire, tag)) = got else {
            return Ok(None);
        };
        match fetched_to_py(py, value, self.pickle) {
            Ok(v) => Ok(Some((v, expire, tag))),
            Err(e) => self.decode_miss(py, key, e).map(|()| None),
        }
    }
}
