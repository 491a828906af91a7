//! The cache calls of `CacheCore`: writes, reads, batch calls, removals, statistics and
//! settings, and iteration. Each converts its arguments while attached, runs the engine call
//! with the GIL released, and converts the result; the hot ones (get, set, add, delete, incr,
//! `[]`, `in`) reach Rust from Python without a Python frame in between.

use crate::convert::{
    fetched_to_py, key_from_py, key_to_py, opt_scalar_to_py, prepare_value, setting_from_py,
    setting_to_py, tag_from_py, Fetched, Flag, Prepared,
};
use crate::core::{run, CacheCore, Handle};
use crate::errors::{Exc, IntoPy};
use crate::iter::KeyIterator;
use crate::pyobj;
use crate::queue::{ExpireArg, PrefixArg};
use crate::reader::PyReader;
use diskcache_oxide_engine::{
    Error, Imported, Incr, Key, Scalar, SettingValue, ValueRef, WriteOptions,
};
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyFloat, PyInt, PyList, PyTuple};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) type Got = Option<(Fetched, Option<f64>, Option<Scalar>)>;

/// A hit, converted: the value, its expire time and its tag.
pub(crate) type Hit<'py> = (Bound<'py, PyAny>, Option<f64>, Option<Scalar>);

/// [`run`] for the batch removals, which count what they removed (python-diskcache's
/// semantics): with `retry` a timeout resumes and the count covers every attempt; without,
/// `Timeout(count, message)`.
pub(crate) fn run_removing<F>(py: Python<'_>, retry: bool, f: F) -> PyResult<u64>
where
    F: Fn() -> Result<u64, Error> + Sync,
{
    let mut removed = 0u64;
    loop {
        match py.detach(&f) {
            Ok(n) => return Ok(removed + n),
            Err(Error::TimeoutAfter { removed: n }) if retry => {
                removed += n;
                py.check_signals()?;
            }
            Err(Error::TimeoutAfter { removed: n }) => {
                let error = Error::TimeoutAfter {
                    removed: removed + n,
                };
                return Err(crate::errors::timeout_with_count(py, removed + n, &error));
            }
            Err(e) => return Err(crate::errors::to_py(py, e)),
        }
    }
}

/// Read a large value file straight into a new `bytes` (one allocation, one copy), the GIL
/// released while reading. `None` if the file is gone.
pub(crate) fn read_deferred<'py>(
    py: Python<'py>,
    cache: &diskcache_oxide_engine::Cache,
    file: &diskcache_oxide_engine::ValueFile,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let len = isize::try_from(file.size)
        .map_err(|_| PyValueError::new_err("a value file is too large for a bytes object"))?;
    // Not `PyBytes::new_with`, which zero-fills first: 6% of a 1 MB get.
    // SAFETY: with a NULL source CPython returns a new bytes object of `len` uninitialised
    // bytes, which we own and which nothing else can see until we return it.
    let bytes = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), len),
        )?
        .cast_into_unchecked::<PyBytes>()
    };
    // SAFETY: the buffer is `len` bytes long, owned by `bytes`, and written only here, before
    // anyone else can see the object. It is returned only once fully written (a read that
    // fails or finds no file drops it).
    let buf = unsafe {
        std::slice::from_raw_parts_mut(
            pyo3::ffi::PyBytes_AsString(bytes.as_ptr()).cast::<u8>(),
            file.size as usize,
        )
    };
    let found = py.detach(|| cache.read_value_file(file, buf)).py_err(py)?;
    Ok(found.then_some(bytes))
}

pub(crate) fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

pub(crate) fn key_error(key: &Bound<'_, PyAny>) -> PyErr {
    PyKeyError::new_err((key.clone().unbind(),))
}

/// `value`, `(value, x)` or `(value, expire_time, tag)`, as python-diskcache shapes results.
pub(crate) fn shape<'py>(
    py: Python<'py>,
    value: Bound<'py, PyAny>,
    expire: Bound<'py, PyAny>,
    tag: Bound<'py, PyAny>,
    want_expire: bool,
    want_tag: bool,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match (want_expire, want_tag) {
        (true, true) => PyTuple::new(py, [value, expire, tag])?.into_any(),
        (true, false) => PyTuple::new(py, [value, expire])?.into_any(),
        (false, true) => PyTuple::new(py, [value, tag])?.into_any(),
        (false, false) => value,
    })
}

pub(crate) fn shape_default<'py>(
    py: Python<'py>,
    default: Option<&Bound<'py, PyAny>>,
    want_expire: bool,
    want_tag: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let default = match default {
        Some(d) => d.clone(),
        None => py.None().into_bound(py),
    };
    let none = || py.None().into_bound(py);
    shape(py, default, none(), none(), want_expire, want_tag)
}

pub(crate) fn float_or_none(py: Python<'_>, f: Option<f64>) -> PyResult<Bound<'_, PyAny>> {
    Ok(match f {
        Some(f) => f.into_pyobject(py)?.into_any(),
        None => py.None().into_bound(py),
    })
}

/// An int argument that is usually an i64 (delta and default of `incr`).
pub(crate) enum Num<'py> {
    Int(i64),
    Obj(Bound<'py, PyAny>),
}

impl<'a, 'py> FromPyObject<'a, 'py> for Num<'py> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_exact_instance_of::<PyInt>() {
            if let Ok(i) = obj.extract::<i64>() {
                return Ok(Num::Int(i));
            }
        }
        Ok(Num::Obj(obj.to_owned()))
    }
}

impl<'py> Num<'py> {
    /// `delta` of incr/decr: an int or a float, named in the error otherwise.
    pub(crate) fn check_delta(&self) -> PyResult<()> {
        match self {
            Num::Int(_) => Ok(()),
            Num::Obj(o) if o.is_instance_of::<PyInt>() || o.is_instance_of::<PyFloat>() => Ok(()),
            Num::Obj(o) => Err(PyTypeError::new_err(format!(
                "delta must be an int or a float, not {}",
                o.get_type().name()?
            ))),
        }
    }

    fn to_object(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self {
            Num::Int(i) => i.into_pyobject(py)?.into_any(),
            Num::Obj(o) => o.clone(),
        })
    }
}

/// The helpers the cache calls share.
impl CacheCore {
    /// On a decode error with `on_decode_error='miss'`: log it and report a miss (Ok).
    pub(crate) fn decode_miss(
        &self,
        py: Python<'_>,
        h: &Handle,
        key: &Bound<'_, PyAny>,
        err: PyErr,
    ) -> PyResult<()> {
        if !(h.miss && Exc::DecodeError.matches(py, &err)) {
            return Err(err);
        }
        let message = err.value(py).str()?;
        pyobj::logger(py)?.call_method1(
            intern!(py, "warning"),
            (
                "treating key %r in %s as a miss (on_decode_error='miss'): %s",
                key,
                h.directory.as_str(),
                message,
            ),
        )?;
        Ok(())
    }

    /// The value (converted) or `None` for a miss; the metadata is passed through.
    pub(crate) fn convert_got<'py>(
        &self,
        py: Python<'py>,
        h: &Handle,
        key: &Bound<'py, PyAny>,
        got: Got,
    ) -> PyResult<Option<Hit<'py>>> {
        let Some((value, expire, tag)) = got else {
            return Ok(None);
        };
        match fetched_to_py(py, value, h.pickle) {
            Ok(v) => Ok(Some((v, expire, tag))),
            Err(e) => self.decode_miss(py, h, key, e).map(|()| None),
        }
    }

    /// Engine get plus conversion; `None` is a miss (absent, expired, or a decode miss).
    pub(crate) fn get_inner<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        read: bool,
        retry: bool,
    ) -> PyResult<Option<Hit<'py>>> {
        let h = self.h()?;
        let k = key_from_py(py, key, &h.ctx())?;
        let cache = &*h.cache;
        let fetch = || -> Result<Got, Error> {
            let entry = if read {
                cache.get(&k, true)?
            } else {
                cache.get_deferred(&k)?
            };
            Ok(entry.map(|e| (Fetched::from(e.value), e.expire_time, e.tag)))
        };
        let got = match run(py, retry, fetch) {
            Ok(Some((Fetched::Deferred(file), expire, tag))) => {
                match read_deferred(py, cache, &file) {
                    Ok(Some(bytes)) => return Ok(Some((bytes.into_any(), expire, tag))),
                    // The file went away under a concurrent delete or overwrite: ask again.
                    Ok(None) => run(py, retry, || {
                        Ok(cache
                            .get(&k, false)?
                            .map(|e| (Fetched::from(e.value), e.expire_time, e.tag)))
                    }),
                    Err(e) => Err(e),
                }
            }
            other => other,
        };
        match got {
            Ok(got) => self.convert_got(py, h, key, got),
            Err(e) => self.decode_miss(py, h, key, e).map(|()| None),
        }
    }

    pub(crate) fn set_inner(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        options: WriteOptions,
        retry: bool,
    ) -> PyResult<()> {
        let h = self.h()?;
        let ctx = h.ctx();
        let k = key_from_py(py, key, &ctx)?;
        let prepared = prepare_value(py, value, &ctx)?;
        let v = prepared.as_ref();
        let cache = &*h.cache;
        run(py, retry, || cache.set(&k, v, &options))
    }

    /// `set(..., read=True)`: stream a binary file into a value file.
    pub(crate) fn set_from_file(
        &self,
        py: Python<'_>,
        k: &Key,
        file: &Bound<'_, PyAny>,
        options: &WriteOptions,
        retry: bool,
    ) -> PyResult<()> {
        let cache = &*self.h()?.cache;
        // Where the file starts, so that a retry after a timeout can read it again.
        let start = file.call_method0(intern!(py, "tell")).ok().filter(|_| {
            file.call_method0(intern!(py, "seekable"))
                .and_then(|s| s.is_truthy())
                .unwrap_or(false)
        });
        loop {
            let mut reader = PyReader::new(file.clone().unbind());
            let result = py.detach(|| cache.set_from_reader(k, &mut reader, options));
            if let Some(e) = reader.error.take() {
                return Err(e);
            }
            match result {
                Err(Error::Timeout) if retry && start.is_some() => {
                    py.check_signals()?;
                    if let Some(start) = &start {
                        file.call_method1(intern!(py, "seek"), (start,))?;
                    }
                }
                result => return result.py_err(py),
            }
        }
    }

    /// `incr` for what the engine's i64 arithmetic cannot do: read, add in Python, write,
    /// in one transaction. Expiry and tag of an existing item are kept, as python-diskcache
    /// keeps them.
    pub(crate) fn incr_slow<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        k: &Key,
        delta: &Num<'py>,
        default: &Num<'py>,
        retry: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let h = self.h()?;
        let cache = &*h.cache;
        self.in_transaction(py, retry, || {
            let got: Got = run(py, false, || {
                Ok(cache
                    .get_quietly(k)?
                    .map(|e| (Fetched::from(e.value), e.expire_time, e.tag)))
            })?;
            let delta = delta.to_object(py)?;
            let (value, options) = match got {
                None => {
                    let default = default.to_object(py)?;
                    if default.is_none() {
                        return Err(key_error(key));
                    }
                    (default.add(&delta)?, WriteOptions::default())
                }
                Some((current, expire_time, tag)) => {
                    let current = fetched_to_py(py, current, h.pickle)?;
                    let options = WriteOptions {
                        expire: expire_time.map(|t| (t - now()).max(0.0)),
                        tag,
                    };
                    (current.add(&delta)?, options)
                }
            };
            let ctx = h.ctx();
            let prepared = prepare_value(py, &value, &ctx)?;
            let v = prepared.as_ref();
            run(py, false, || cache.set(k, v, &options))?;
            Ok(value)
        })
    }

    pub(crate) fn incr_inner<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        delta: Num<'py>,
        default: Num<'py>,
        retry: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let h = self.h()?;
        let k = key_from_py(py, key, &h.ctx())?;
        let fast_default = match &default {
            Num::Int(i) => Some(Some(*i)),
            Num::Obj(o) if o.is_none() => Some(None),
            Num::Obj(_) => None,
        };
        if let (Num::Int(d), Some(def)) = (&delta, fast_default) {
            let cache = &*h.cache;
            let d = *d;
            match run(py, retry, || cache.incr(&k, d, def))? {
                Incr::Value(n) => return Ok(n.into_pyobject(py)?.into_any()),
                Incr::Missing => return Err(key_error(key)),
                Incr::NotInt => {}
            }
        }
        self.incr_slow(py, key, &k, &delta, &default, retry)
    }

    pub(crate) fn keys_from_iterable(
        &self,
        py: Python<'_>,
        h: &Handle,
        keys: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Key>> {
        let ctx = h.ctx();
        let mut out = Vec::new();
        for key in keys.try_iter()? {
            out.push(key_from_py(py, &key?, &ctx)?);
        }
        Ok(out)
    }
}

#[pymethods]
impl CacheCore {
    // ---- writes ----------------------------------------------------------------------------

    /// Store `value` under `key`, replacing what was there. `expire` is seconds from now
    /// (None: never), `tag` a str, bytes, int or float to group entries for `evict`, and
    /// `read=True` means `value` is a binary file to copy in. Returns True (False only on a
    /// durable handle that could not write). Culls first if the cache is over `size_limit`.
    #[pyo3(signature = (key, value, expire=ExpireArg(None), read=Flag(false), tag=None, retry=Flag(false)), text_signature = "(self, key, value, expire=None, read=False, tag=None, retry=False)")]
    #[allow(clippy::too_many_arguments)]
    fn set(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        expire: ExpireArg,
        read: Flag,
        tag: Option<&Bound<'_, PyAny>>,
        retry: Flag,
    ) -> PyResult<bool> {
        let options = WriteOptions {
            expire: expire.0,
            tag: tag_from_py(tag)?,
        };
        if read.0 {
            let k = key_from_py(py, key, &self.h()?.ctx())?;
            self.set_from_file(py, &k, value, &options, retry.0)?;
        } else {
            self.set_inner(py, key, value, options, retry.0)?;
        }
        Ok(true)
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.set_inner(py, key, value, WriteOptions::default(), true)
    }

    /// Store `value` under `key` only if the key is absent or expired; returns True if it was
    /// stored. The check and the write are one transaction, so of several processes adding the
    /// same key exactly one wins. Arguments as for `set`.
    #[pyo3(signature = (key, value, expire=ExpireArg(None), read=Flag(false), tag=None, retry=Flag(false)), text_signature = "(self, key, value, expire=None, read=False, tag=None, retry=False)")]
    #[allow(clippy::too_many_arguments)]
    fn add(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        expire: ExpireArg,
        read: Flag,
        tag: Option<&Bound<'_, PyAny>>,
        retry: Flag,
    ) -> PyResult<bool> {
        let h = self.h()?;
        let ctx = h.ctx();
        let k = key_from_py(py, key, &ctx)?;
        let options = WriteOptions {
            expire: expire.0,
            tag: tag_from_py(tag)?,
        };
        let cache = &*h.cache;
        if read.0 {
            // The engine has no add-from-reader: check and write in one transaction.
            return self.in_transaction(py, retry.0, || {
                if run(py, false, || cache.contains(&k))? {
                    return Ok(false);
                }
                self.set_from_file(py, &k, value, &options, false)?;
                Ok(true)
            });
        }
        let prepared = prepare_value(py, value, &ctx)?;
        let v = prepared.as_ref();
        run(py, retry.0, || cache.add(&k, v, &options))
    }

    /// Give an unexpired entry a new expiry (`expire` seconds from now; None: never). Returns
    /// whether the key was present.
    #[pyo3(signature = (key, expire=ExpireArg(None), retry=Flag(false)), text_signature = "(self, key, expire=None, retry=False)")]
    fn touch(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        expire: ExpireArg,
        retry: Flag,
    ) -> PyResult<bool> {
        let h = self.h()?;
        let k = key_from_py(py, key, &h.ctx())?;
        let cache = &*h.cache;
        run(py, retry.0, || cache.touch(&k, expire.0))
    }

    /// Add `delta` to the int stored under `key` atomically and return the new value. An absent
    /// or expired key starts at `default`; `default=None` raises KeyError for it instead.
    #[pyo3(signature = (key, delta=Num::Int(1), default=Num::Int(0), retry=Flag(false)), text_signature = "(self, key, delta=1, default=0, retry=False)")]
    fn incr<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        delta: Num<'py>,
        default: Num<'py>,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyAny>> {
        delta.check_delta()?;
        self.incr_inner(py, key, delta, default, retry.0)
    }

    /// Subtract `delta` from the int stored under `key` atomically and return the new value: the
    /// same as `incr(key, -delta, default)`.
    #[pyo3(signature = (key, delta=Num::Int(1), default=Num::Int(0), retry=Flag(false)), text_signature = "(self, key, delta=1, default=0, retry=False)")]
    fn decr<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        delta: Num<'py>,
        default: Num<'py>,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyAny>> {
        delta.check_delta()?;
        let negated = match delta {
            Num::Int(i) => match i.checked_neg() {
                Some(n) => Num::Int(n),
                None => Num::Obj(i.into_pyobject(py)?.into_any().neg()?),
            },
            Num::Obj(o) => Num::Obj(o.neg()?),
        };
        self.incr_inner(py, key, negated, default, retry.0)
    }

    // ---- reads -----------------------------------------------------------------------------

    /// The value stored under `key`, or `default` if it is absent or expired. `read=True` returns
    /// a file-value as an open binary file; `expire_time=True` and `tag=True` return a tuple with
    /// the expiry (seconds since the epoch, or None) and the tag beside the value.
    #[pyo3(signature = (key, default=None, read=Flag(false), expire_time=Flag(false), tag=Flag(false), retry=Flag(false)), text_signature = "(self, key, default=None, read=False, expire_time=False, tag=False, retry=False)")]
    #[allow(clippy::too_many_arguments)]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<&Bound<'py, PyAny>>,
        read: Flag,
        expire_time: Flag,
        tag: Flag,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.get_inner(py, key, read.0, retry.0)? {
            None => shape_default(py, default, expire_time.0, tag.0),
            Some((value, expire, t)) => {
                if !(expire_time.0 || tag.0) {
                    return Ok(value);
                }
                let expire = float_or_none(py, expire)?;
                let t = opt_scalar_to_py(py, t)?;
                shape(py, value, expire, t, expire_time.0, tag.0)
            }
        }
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.get_inner(py, key, false, true)? {
            Some((value, _, _)) => Ok(value),
            None => Err(key_error(key)),
        }
    }

    /// An open binary file for the value stored under `key` (a value kept in a value file), to
    /// stream it; raises KeyError if the key is absent or expired.
    #[pyo3(signature = (key, retry=Flag(false)), text_signature = "(self, key, retry=False)")]
    fn read<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.get_inner(py, key, true, retry.0)? {
            Some((value, _, _)) => Ok(value),
            None => Err(key_error(key)),
        }
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let h = self.h()?;
        let k = key_from_py(py, key, &h.ctx())?;
        let cache = &*h.cache;
        run(py, false, || cache.contains(&k))
    }

    /// A short repr-like text of the live value under `key`, at most `width` characters, for
    /// the operator's tools (D-046): built from at most the first few KiB of its stored bytes,
    /// never decoded or unpickled, and without counting a hit or touching its access time.
    /// None if the key is absent or expired. A damaged value is described, not raised.
    #[pyo3(signature = (key, width=60))]
    fn _preview(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        width: i64,
    ) -> PyResult<Option<String>> {
        let width = crate::jobs::preview_width(Some(width))?.unwrap_or(1);
        let h = self.h()?;
        let k = key_from_py(py, key, &h.ctx())?;
        let cache = &*h.cache;
        run(py, false, || cache.preview(&k, width))
    }

    /// Remove the entry under `key` and return its value, or `default` if it is absent or
    /// expired. `expire_time=True` and `tag=True` return them beside the value, as `get` does.
    #[pyo3(signature = (key, default=None, expire_time=Flag(false), tag=Flag(false), retry=Flag(false)), text_signature = "(self, key, default=None, expire_time=False, tag=False, retry=False)")]
    fn pop<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<&Bound<'py, PyAny>>,
        expire_time: Flag,
        tag: Flag,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyAny>> {
        let h = self.h()?;
        let k = key_from_py(py, key, &h.ctx())?;
        let cache = &*h.cache;
        let got: PyResult<Got> = run(py, retry.0, || {
            Ok(cache
                .pop(&k)?
                .map(|e| (Fetched::from(e.value), e.expire_time, e.tag)))
        });
        let got = match got {
            Ok(got) => self.convert_got(py, h, key, got)?,
            Err(e) => self.decode_miss(py, h, key, e).map(|()| None)?,
        };
        match got {
            None => shape_default(py, default, expire_time.0, tag.0),
            Some((value, expire, t)) => {
                let expire = float_or_none(py, expire)?;
                let t = opt_scalar_to_py(py, t)?;
                shape(py, value, expire, t, expire_time.0, tag.0)
            }
        }
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let h = self.h()?;
        let k = key_from_py(py, key, &h.ctx())?;
        let cache = &*h.cache;
        if run(py, true, || cache.delete(&k))? {
            Ok(())
        } else {
            Err(key_error(key))
        }
    }

    /// Remove the entry under `key`; returns whether an unexpired entry was removed.
    #[pyo3(signature = (key, retry=Flag(false)), text_signature = "(self, key, retry=False)")]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, retry: Flag) -> PyResult<bool> {
        let h = self.h()?;
        let k = key_from_py(py, key, &h.ctx())?;
        let cache = &*h.cache;
        run(py, retry.0, || cache.delete(&k))
    }

    /// The first (`last=False`) or last (`last=True`) entry in insertion order, as a
    /// `(key, value)` pair, without removing it; raises KeyError if the cache is empty. Expired
    /// entries met on the way are deleted.
    #[pyo3(signature = (last=Flag(true), expire_time=Flag(false), tag=Flag(false), retry=Flag(false)), text_signature = "(self, last=True, expire_time=False, tag=False, retry=False)")]
    fn peekitem<'py>(
        &self,
        py: Python<'py>,
        last: Flag,
        expire_time: Flag,
        tag: Flag,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyAny>> {
        let h = self.h()?;
        let cache = &*h.cache;
        let got = run(py, retry.0, || {
            Ok(cache
                .peekitem(last.0)?
                .map(|(k, e)| (k, Fetched::from(e.value), e.expire_time, e.tag)))
        })?;
        let Some((k, value, expire, t)) = got else {
            return Err(PyKeyError::new_err("dictionary is empty"));
        };
        let key = key_to_py(py, k, h.pickle)?;
        let value = fetched_to_py(py, value, h.pickle)?;
        let item = PyTuple::new(py, [key, value])?.into_any();
        let expire = float_or_none(py, expire)?;
        let t = opt_scalar_to_py(py, t)?;
        shape(py, item, expire, t, expire_time.0, tag.0)
    }

    // ---- bulk (D-010) ----------------------------------------------------------------------

    /// The values of `keys`, in order, with `default` for each key that is absent or expired.
    /// One read transaction for all of them.
    #[pyo3(signature = (keys, default=None, retry=Flag(false)), text_signature = "(self, keys, default=None, retry=False)")]
    fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        default: Option<&Bound<'py, PyAny>>,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyList>> {
        let h = self.h()?;
        let key_objs: Vec<Bound<'py, PyAny>> = keys.try_iter()?.collect::<PyResult<_>>()?;
        let ctx = h.ctx();
        let ks = key_objs
            .iter()
            .map(|k| key_from_py(py, k, &ctx))
            .collect::<PyResult<Vec<Key>>>()?;
        let cache = &*h.cache;
        let got: Vec<Got> = run(py, retry.0, || {
            Ok(cache
                .get_many(&ks)?
                .into_iter()
                .map(|o| o.map(|e| (Fetched::from(e.value), e.expire_time, e.tag)))
                .collect())
        })?;
        let default = match default {
            Some(d) => d.clone(),
            None => py.None().into_bound(py),
        };
        let out = PyList::empty(py);
        for (key, got) in key_objs.iter().zip(got) {
            match self.convert_got(py, h, key, got)? {
                Some((value, _, _)) => out.append(value)?,
                None => out.append(&default)?,
            }
        }
        Ok(out)
    }

    /// Store every `(key, value)` of `mapping` (a mapping or an iterable of pairs) in one
    /// transaction, with the same `expire` and `tag` for all. Returns None; on a durable
    /// handle, False when it could not write.
    #[pyo3(signature = (mapping, expire=ExpireArg(None), tag=None, retry=Flag(false)), text_signature = "(self, mapping, expire=None, tag=None, retry=False)")]
    fn set_many(
        &self,
        py: Python<'_>,
        mapping: &Bound<'_, PyAny>,
        expire: ExpireArg,
        tag: Option<&Bound<'_, PyAny>>,
        retry: Flag,
    ) -> PyResult<()> {
        let h = self.h()?;
        let ctx = h.ctx();
        let options = WriteOptions {
            expire: expire.0,
            tag: tag_from_py(tag)?,
        };
        let pairs = if mapping.hasattr(intern!(py, "items"))? {
            mapping.call_method0(intern!(py, "items"))?
        } else {
            mapping.clone()
        };
        let mut keys = Vec::new();
        let mut values = Vec::new();
        for pair in pairs.try_iter()? {
            let (key, value): (Bound<'_, PyAny>, Bound<'_, PyAny>) = pair?.extract()?;
            keys.push(key_from_py(py, &key, &ctx)?);
            values.push(value);
        }
        let prepared = values
            .iter()
            .map(|v| prepare_value(py, v, &ctx))
            .collect::<PyResult<Vec<Prepared<'_, '_>>>>()?;
        let items: Vec<(Key, ValueRef<'_>)> = keys
            .into_iter()
            .zip(prepared.iter().map(Prepared::as_ref))
            .collect();
        let cache = &*h.cache;
        run(py, retry.0, || cache.set_many(&items, &options))
    }

    /// Write `rows` with the times they had in another cache (a migration, D-041), in one
    /// transaction: each row is `(key, value, read, store_time, expire_time, access_time,
    /// access_count, tag)`, stored as `set` would store it (`read`: the value is a binary
    /// file, read whole), but with these absolute times and count, without culling or
    /// counting hits. Returns `(index, error)` for each row it could not convert; the others
    /// are written.
    fn _import_many(
        &self,
        py: Python<'_>,
        rows: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<(usize, Py<PyAny>)>> {
        type Row<'py> = (
            Bound<'py, PyAny>,
            Bound<'py, PyAny>,
            bool,
            f64,
            Option<f64>,
            f64,
            i64,
            Option<Bound<'py, PyAny>>,
        );
        let h = self.h()?;
        let ctx = h.ctx();
        let mut refused = Vec::new();
        let mut converted = Vec::new();
        for (index, row) in rows.try_iter()?.enumerate() {
            let row = row?;
            let attempt = (|| -> PyResult<_> {
                let (key, value, read, store_time, expire_time, access_time, access_count, tag): Row<'_> =
                    row.extract()?;
                let value = if read {
                    value.call_method0(intern!(py, "read"))?
                } else {
                    value
                };
                Ok((
                    key_from_py(py, &key, &ctx)?,
                    value,
                    store_time,
                    expire_time,
                    access_time,
                    access_count,
                    tag_from_py(tag.as_ref())?,
                ))
            })();
            match attempt {
                Ok(parts) => converted.push((index, parts)),
                Err(e) => refused.push((index, e.into_value(py).into_any())),
            }
        }
        // Values are prepared after the rows are read, so each borrows from a live object.
        let mut prepared = Vec::with_capacity(converted.len());
        let mut kept = Vec::with_capacity(converted.len());
        for (position, (index, parts)) in converted.iter().enumerate() {
            match prepare_value(py, &parts.1, &ctx) {
                Ok(p) => {
                    prepared.push(p);
                    kept.push(position);
                }
                Err(e) => refused.push((*index, e.into_value(py).into_any())),
            }
        }
        let items: Vec<Imported<'_>> = kept
            .iter()
            .zip(&prepared)
            .map(|(&i, p)| {
                let (key, _, store_time, expire_time, access_time, access_count, tag) =
                    &converted[i].1;
                Imported {
                    key: key.clone(),
                    value: p.as_ref(),
                    store_time: *store_time,
                    expire_time: *expire_time,
                    access_time: *access_time,
                    access_count: *access_count,
                    tag: tag.clone(),
                }
            })
            .collect();
        let cache = &*h.cache;
        run(py, true, || cache.import_many(&items))?;
        refused.sort_by_key(|(i, _)| *i);
        Ok(refused)
    }

    /// Remove every key of `keys` in one transaction; returns how many were present.
    #[pyo3(signature = (keys, retry=Flag(false)), text_signature = "(self, keys, retry=False)")]
    fn delete_many(&self, py: Python<'_>, keys: &Bound<'_, PyAny>, retry: Flag) -> PyResult<u64> {
        let h = self.h()?;
        let ks = self.keys_from_iterable(py, h, keys)?;
        let cache = &*h.cache;
        run(py, retry.0, || cache.delete_many(&ks))
    }

    // ---- removal in bulk -------------------------------------------------------------------

    /// Remove every entry that has expired as of `now` (seconds since the epoch; default: the
    /// current `time.time()`). Returns how many were removed. In batches, each its own transaction.
    #[pyo3(signature = (now=None, retry=Flag(false)), text_signature = "(self, now=None, retry=False)")]
    fn expire(&self, py: Python<'_>, now: Option<&Bound<'_, PyAny>>, retry: Flag) -> PyResult<u64> {
        // python-diskcache uses `now or time.time()`. `time.time` is looked up at each call,
        // so a test that patches the clock (mock.patch, freezegun) moves what expire() sees,
        // as it does there; get and set keep the engine's clock (D-038).
        let now = match now {
            Some(n) if n.is_truthy()? => n.extract::<f64>()?,
            _ => py
                .import("time")?
                .getattr("time")?
                .call0()?
                .extract::<f64>()?,
        };
        let now = Some(now);
        let cache = &*self.h()?.cache;
        run_removing(py, retry.0, || cache.expire(now))
    }

    /// Remove every entry whose tag is `tag`; returns how many. In batches, each its own
    /// transaction.
    #[pyo3(signature = (tag, retry=Flag(false)), text_signature = "(self, tag, retry=False)")]
    fn evict(&self, py: Python<'_>, tag: &Bound<'_, PyAny>, retry: Flag) -> PyResult<u64> {
        let cache = &*self.h()?.cache;
        // A NULL tag matches no row in python-diskcache (`tag = NULL`).
        let Some(tag) = tag_from_py(Some(tag))? else {
            return Ok(0);
        };
        run_removing(py, retry.0, || cache.evict(&tag))
    }

    /// Remove every entry, value files included; returns how many. In batches, each its own
    /// transaction, so other processes keep working meanwhile.
    #[pyo3(signature = (retry=Flag(false)), text_signature = "(self, retry=False)")]
    fn clear(&self, py: Python<'_>, retry: Flag) -> PyResult<u64> {
        let cache = &*self.h()?.cache;
        run_removing(py, retry.0, || cache.clear())
    }

    /// Remove expired entries, then evict by the eviction policy until the volume is under
    /// `size_limit`. Returns how many entries were removed.
    #[pyo3(signature = (retry=Flag(false)), text_signature = "(self, retry=False)")]
    fn cull(&self, py: Python<'_>, retry: Flag) -> PyResult<u64> {
        let cache = &*self.h()?.cache;
        run_removing(py, retry.0, || cache.cull())
    }

    #[pyo3(signature = (fix=Flag(false), retry=Flag(false)), text_signature = "(self, fix=False, retry=False)")]
    fn _check(
        &self,
        py: Python<'_>,
        fix: Flag,
        retry: Flag,
    ) -> PyResult<Vec<(String, Py<pyo3::types::PyType>)>> {
        let cache = &*self.h()?.cache;
        crate::check::warnings(py, run(py, retry.0, || cache.check(fix.0))?)
    }

    // ---- metadata and settings -------------------------------------------------------------

    /// The (hits, misses) counters. `enable` turns counting on or off for the directory;
    /// `reset=True` sets both back to zero.
    #[pyo3(signature = (enable=Flag(true), reset=Flag(false)), text_signature = "(self, enable=True, reset=False)")]
    fn stats(&self, py: Python<'_>, enable: Flag, reset: Flag) -> PyResult<(u64, u64)> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.stats(enable.0, reset.0))
    }

    /// The cache's size on disk as python-diskcache measures it: the database's pages plus the
    /// bytes of the value files.
    #[pyo3(text_signature = "(self)")]
    fn volume(&self, py: Python<'_>) -> PyResult<u64> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.volume())
    }

    #[pyo3(signature = (name, value=None, update=Flag(true)), text_signature = "(self, name, value=None, update=True)")]
    fn _reset(
        &self,
        py: Python<'_>,
        name: &str,
        value: Option<&Bound<'_, PyAny>>,
        update: Flag,
    ) -> PyResult<Py<PyAny>> {
        let cache = &*self.h()?.cache;
        let value: Option<SettingValue> = value.map(|v| setting_from_py(name, v)).transpose()?;
        let result = run(py, false, || cache.reset(name, value.clone(), update.0))?;
        Ok(setting_to_py(py, result)?.unbind())
    }

    /// Rebuild the database without its free pages (SQLite's VACUUM), after checkpointing the
    /// WAL; needs free disk space about the size of cache.db.
    fn _vacuum(&self, py: Python<'_>) -> PyResult<()> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.vacuum())
    }

    /// Create the index on tags that makes `evict(tag)` fast (the `tag_index` setting).
    #[pyo3(text_signature = "(self)")]
    fn create_tag_index(&self, py: Python<'_>) -> PyResult<()> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.create_tag_index())
    }

    /// Drop the index on tags (the `tag_index` setting).
    #[pyo3(text_signature = "(self)")]
    fn drop_tag_index(&self, py: Python<'_>) -> PyResult<()> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.drop_tag_index())
    }

    // ---- iteration -------------------------------------------------------------------------

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let cache = &*self.h()?.cache;
        let n = run(py, false, || cache.len())?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<KeyIterator> {
        let h = self.h()?;
        KeyIterator::by_rowid(py, h.cache.clone(), h.pickle, true)
    }

    /// The keys in reverse insertion order (newest first), as `reversed(cache)` gives them.
    fn __reversed__(&self, py: Python<'_>) -> PyResult<KeyIterator> {
        let h = self.h()?;
        KeyIterator::by_rowid(py, h.cache.clone(), h.pickle, false)
    }

    /// Keys in sorted order; with `prefix`, only the str keys that start with it (an indexed
    /// range scan, read in pages of 100, so deleting while iterating is safe).
    #[pyo3(signature = (reverse=Flag(false), prefix=PrefixArg(None)), text_signature = "(self, reverse=False, prefix=None)")]
    fn iterkeys(&self, reverse: Flag, prefix: PrefixArg) -> PyResult<KeyIterator> {
        let h = self.h()?;
        Ok(match prefix.0 {
            None => KeyIterator::sorted(h.cache.clone(), h.pickle, reverse.0),
            Some(p) => KeyIterator::prefixed(h.cache.clone(), h.pickle, p, reverse.0),
        })
    }
}

/// `pull`'s and `peek`'s `default`: python-diskcache's `(None, None)` unless one is given
/// (an explicit `None` included).
pub(crate) enum PairDefault<'py> {
    Pair,
    Given(Bound<'py, PyAny>),
}

impl<'a, 'py> FromPyObject<'a, 'py> for PairDefault<'py> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(PairDefault::Given(obj.to_owned()))
    }
}

impl<'py> PairDefault<'py> {
    pub(crate) fn resolve(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            PairDefault::Given(obj) => Ok(obj),
            PairDefault::Pair => Ok(PyTuple::new(py, [py.None(), py.None()])?.into_any()),
        }
    }
}
