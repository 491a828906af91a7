//! `CacheCore`, the Rust base class of `diskcache_oxide.Cache`, and its one `#[pymethods]`
//! block: every call `Cache` inherits from the binding. The hot ones (get, set, add, delete,
//! incr, `[]`, `in`) reach Rust from Python without a Python frame in between.
//!
//! Each method reads its Python arguments (`args`), calls the operation behind it, and shapes
//! the result (`shape`); the operations that take more than a few lines live by concept on
//! the `Handle` that `_open` sets: the cache's in `cache.rs`, the queue's in `queue.rs`. The
//! engine's other handles have pyclasses of their own, which `CacheCore` gives out: `_jobs`
//! (`JobsCore`, `jobs.rs`) and `_claims` (`ClaimsCore`, `claims.rs`). Every engine call runs
//! with the GIL released (`run.rs`).
//!
//! The binding's modules, each using only those below it (no cycle):
//!
//! | module     | what it holds                                                              |
//! |------------|----------------------------------------------------------------------------|
//! | `lib`      | the `_core` module: its classes and functions                              |
//! | `fanout`   | `FanoutCore`: FanoutCache's calls on one key, routed to the key's shard    |
//! | `core`     | `CacheCore` and its methods                                                |
//! | `cache`    | the cache operations (get, set, add, incr, pop, bulk calls, import)        |
//! | `queue`    | the queue operations (push, pull, peek), decided inside the transaction    |
//! | `jobs`     | `JobsCore`: put, take, and an operator's reads and repairs of jobs         |
//! | `job`      | the `Job` a worker holds and the `JobInfo` records                         |
//! | `claims`   | `ClaimsCore`: acquire, extend, release, list, and the compute-once wait    |
//! | `codec`    | the engine's value and key frames as functions, for stores without columns |
//! | `iter`     | `KeyIterator`, the paged key iterators                                     |
//! | `handle`   | `Handle`: what `_open` sets, its transactions, decode errors as misses     |
//! | `decode`   | decoding queue items and job values in the transaction; large value files  |
//! | `shape`    | result shaping as python-diskcache returns results                         |
//! | `run`      | engine calls off the GIL: `run`, `wait_loop`, `release`, `Shared`          |
//! | `args`     | argument types and the one check of a number of seconds                    |
//! | `convert`  | Python objects to engine keys and values and back                          |
//! | `reader`   | a Python file object as a `std::io::Read`                                  |
//! | `pyobj`    | Python objects looked up once: the logger, std types, the type registry    |
//! | `errors`   | engine errors as the exception classes of `diskcache_oxide.errors`         |

use crate::args::{preview_width, ExpireArg, Flag, Num, PairDefault, PrefixArg, SideArg};
use crate::args::{CountArg, WaitArg};
use crate::claims::ClaimsCore;
use crate::convert::{key_from_py, setting_from_py, setting_to_py, tag_from_py};
use crate::handle::Handle;
use crate::iter::KeyIterator;
use crate::jobs::JobsCore;
use crate::queue::{self, QueueRow};
use crate::run::{release, run, run_removing, run_short, Shared};
use crate::shape::{key_error, shape_default, shape_hit, shape_item};
use diskcache_oxide_engine::{SettingValue, Side, WriteOptions};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::sync::OnceLock;

/// What `_open` sets once: the handle, and the engine's other handles made from it.
struct Opened {
    handle: Handle,
    jobs: Py<JobsCore>,
    claims: Py<ClaimsCore>,
}

#[pyclass(subclass, frozen, module = "diskcache_oxide", name = "CacheCore")]
pub(crate) struct CacheCore {
    opened: OnceLock<Opened>,
}

impl Drop for CacheCore {
    /// Closing the last handle closes SQLite connections (and may checkpoint the WAL):
    /// do that with the GIL released too.
    fn drop(&mut self) {
        if let Some(Opened {
            handle,
            jobs,
            claims,
        }) = self.opened.take()
        {
            // Attached here (a deallocation): their engine handle is not the last one.
            drop((jobs, claims));
            release(handle);
        }
    }
}

impl CacheCore {
    fn opened(&self) -> PyResult<&Opened> {
        self.opened.get().ok_or_else(|| {
            PyRuntimeError::new_err(
                "this Cache is not open: its __init__ did not run; a subclass that overrides \
                 __init__ must call super().__init__(directory, ...)",
            )
        })
    }

    fn h(&self) -> PyResult<&Handle> {
        self.opened().map(|o| &o.handle)
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
            opened: OnceLock::new(),
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
        if self.opened.get().is_some() {
            return Err(PyRuntimeError::new_err(
                "this Cache is already open; make a new Cache object to open another directory",
            ));
        }
        let handle = Handle::open(
            py,
            directory,
            timeout,
            pickle,
            on_decode_error,
            settings,
            read_only,
            durable,
        )?;
        let shared = Shared::new(handle.cache.clone());
        let opened = Opened {
            jobs: Py::new(py, JobsCore::new(shared.clone(), pickle))?,
            claims: Py::new(py, ClaimsCore::new(shared, pickle))?,
            handle,
        };
        self.opened
            .set(opened)
            .map_err(|_| PyRuntimeError::new_err("this Cache was opened twice at once"))
    }

    /// The handle's jobs (`diskcache_oxide.JobQueue` calls them): the engine's `jobs()`.
    #[getter]
    fn _jobs(&self, py: Python<'_>) -> PyResult<Py<JobsCore>> {
        Ok(self.opened()?.jobs.clone_ref(py))
    }

    /// The handle's claims (`diskcache_oxide.Claims` calls them): the engine's `claims()`.
    #[getter]
    fn _claims(&self, py: Python<'_>) -> PyResult<Py<ClaimsCore>> {
        Ok(self.opened()?.claims.clone_ref(py))
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
        self.h()?.setting(py, "statistics")
    }

    #[getter]
    fn tag_index(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.h()?.setting(py, "tag_index")
    }

    #[getter]
    fn eviction_policy(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.h()?.setting(py, "eviction_policy")
    }

    #[getter]
    fn size_limit(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.h()?.setting(py, "size_limit")
    }

    #[getter]
    fn cull_limit(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.h()?.setting(py, "cull_limit")
    }

    #[getter]
    fn sqlite_auto_vacuum(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.h()?.setting(py, "sqlite_auto_vacuum")
    }

    #[getter]
    fn sqlite_cache_size(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.h()?.setting(py, "sqlite_cache_size")
    }

    #[getter]
    fn sqlite_journal_mode(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.h()?.setting(py, "sqlite_journal_mode")
    }

    #[getter]
    fn sqlite_mmap_size(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.h()?.setting(py, "sqlite_mmap_size")
    }

    #[getter]
    fn sqlite_synchronous(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.h()?.setting(py, "sqlite_synchronous")
    }

    #[getter]
    fn disk_min_file_size(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.h()?.setting(py, "disk_min_file_size")
    }

    #[getter]
    fn disk_pickle_protocol(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.h()?.setting(py, "disk_pickle_protocol")
    }

    // ---- transactions and connection -------------------------------------------------------

    #[pyo3(signature = (retry=Flag(false)), text_signature = "(self, retry=False)")]
    fn _begin(&self, py: Python<'_>, retry: Flag) -> PyResult<()> {
        self.h()?.begin(py, retry.0)
    }

    fn _end(&self, py: Python<'_>, commit: bool) -> PyResult<()> {
        self.h()?.end(py, commit)
    }

    /// Close this thread's connection to the database, rolling back a transaction it left
    /// open. A later call on the handle opens a new one, as in python-diskcache.
    #[pyo3(text_signature = "(self)")]
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        // Closing a handle that never opened is a no-op, as in python-diskcache.
        if let Some(opened) = self.opened.get() {
            let cache = &*opened.handle.cache;
            py.detach(|| cache.close());
        }
        Ok(())
    }

    // ---- writes ----------------------------------------------------------------------------

    /// Store `value` under `key`, replacing what was there. `expire` is seconds from now
    /// (None: never), `tag` a str, bytes, int or float to group entries for `evict`, and
    /// `read=True` means `value` is a binary file to copy in. Returns True (False only on a
    /// durable handle that could not write). Culls first if the cache is over `size_limit`.
    #[pyo3(signature = (key, value, expire=ExpireArg(None), read=Flag(false), tag=None, retry=Flag(false)), text_signature = "(self, key, value, expire=None, read=False, tag=None, retry=False)")]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn set(
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
        let h = self.h()?;
        if read.0 {
            let k = key_from_py(py, key, &h.ctx())?;
            h.set_from_file(py, &k, value, &options, retry.0)?;
        } else {
            h.set_inner(py, key, value, options, retry.0)?;
        }
        Ok(true)
    }

    pub(crate) fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.h()?
            .set_inner(py, key, value, WriteOptions::default(), true)
    }

    /// Store `value` under `key` only if the key is absent or expired; returns True if it was
    /// stored. The check and the write are one transaction, so of several processes adding the
    /// same key exactly one wins. Arguments as for `set`.
    #[pyo3(signature = (key, value, expire=ExpireArg(None), read=Flag(false), tag=None, retry=Flag(false)), text_signature = "(self, key, value, expire=None, read=False, tag=None, retry=False)")]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add(
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
        let options = WriteOptions {
            expire: expire.0,
            tag: tag_from_py(tag)?,
        };
        h.add(py, key, value, options, read.0, retry.0)
    }

    /// Give an unexpired entry a new expiry (`expire` seconds from now; None: never). Returns
    /// whether the key was present.
    #[pyo3(signature = (key, expire=ExpireArg(None), retry=Flag(false)), text_signature = "(self, key, expire=None, retry=False)")]
    pub(crate) fn touch(
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
    pub(crate) fn incr<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        delta: Num<'py>,
        default: Num<'py>,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyAny>> {
        delta.check_delta()?;
        self.h()?.incr_inner(py, key, delta, default, retry.0)
    }

    /// Subtract `delta` from the int stored under `key` atomically and return the new value: the
    /// same as `incr(key, -delta, default)`.
    #[pyo3(signature = (key, delta=Num::Int(1), default=Num::Int(0), retry=Flag(false)), text_signature = "(self, key, delta=1, default=0, retry=False)")]
    pub(crate) fn decr<'py>(
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
        self.h()?.incr_inner(py, key, negated, default, retry.0)
    }

    // ---- reads -----------------------------------------------------------------------------

    /// The value stored under `key`, or `default` if it is absent or expired. `read=True` returns
    /// a file-value as an open binary file; `expire_time=True` and `tag=True` return a tuple with
    /// the expiry (seconds since the epoch, or None) and the tag beside the value.
    #[pyo3(signature = (key, default=None, read=Flag(false), expire_time=Flag(false), tag=Flag(false), retry=Flag(false)), text_signature = "(self, key, default=None, read=False, expire_time=False, tag=False, retry=False)")]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<&Bound<'py, PyAny>>,
        read: Flag,
        expire_time: Flag,
        tag: Flag,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.h()?.get_inner(py, key, read.0, retry.0)? {
            None => shape_default(py, default, expire_time.0, tag.0),
            Some((value, expire, t)) => {
                if !(expire_time.0 || tag.0) {
                    return Ok(value);
                }
                shape_hit(py, value, expire, t, expire_time.0, tag.0)
            }
        }
    }

    pub(crate) fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.h()?.get_inner(py, key, false, true)? {
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
        match self.h()?.get_inner(py, key, true, retry.0)? {
            Some((value, _, _)) => Ok(value),
            None => Err(key_error(key)),
        }
    }

    pub(crate) fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
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
        let width = preview_width(Some(width))?.unwrap_or(1);
        let h = self.h()?;
        let k = key_from_py(py, key, &h.ctx())?;
        let cache = &*h.cache;
        run(py, false, || cache.preview(&k, width))
    }

    /// Remove the entry under `key` and return its value, or `default` if it is absent or
    /// expired. `expire_time=True` and `tag=True` return them beside the value, as `get` does.
    #[pyo3(signature = (key, default=None, expire_time=Flag(false), tag=Flag(false), retry=Flag(false)), text_signature = "(self, key, default=None, expire_time=False, tag=False, retry=False)")]
    pub(crate) fn pop<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<&Bound<'py, PyAny>>,
        expire_time: Flag,
        tag: Flag,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (expire_time, tag) = (expire_time.0, tag.0);
        self.h()?.pop(py, key, default, expire_time, tag, retry.0)
    }

    pub(crate) fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let h = self.h()?;
        let k = key_from_py(py, key, &h.ctx())?;
        let cache = &*h.cache;
        if run_short(py, true, cache, || cache.delete(&k))? {
            Ok(())
        } else {
            Err(key_error(key))
        }
    }

    /// Remove the entry under `key`; returns whether an unexpired entry was removed.
    #[pyo3(signature = (key, retry=Flag(false)), text_signature = "(self, key, retry=False)")]
    pub(crate) fn delete(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        retry: Flag,
    ) -> PyResult<bool> {
        let h = self.h()?;
        let k = key_from_py(py, key, &h.ctx())?;
        let cache = &*h.cache;
        run_short(py, retry.0, cache, || cache.delete(&k))
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
        self.h()?
            .peekitem(py, last.0, expire_time.0, tag.0, retry.0)
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
        self.h()?.get_many(py, keys, default, retry.0)
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
        let options = WriteOptions {
            expire: expire.0,
            tag: tag_from_py(tag)?,
        };
        h.set_many(py, mapping, options, retry.0)
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
        self.h()?.import_many(py, rows)
    }

    /// Remove every key of `keys` in one transaction; returns how many were present.
    #[pyo3(signature = (keys, retry=Flag(false)), text_signature = "(self, keys, retry=False)")]
    fn delete_many(&self, py: Python<'_>, keys: &Bound<'_, PyAny>, retry: Flag) -> PyResult<u64> {
        let h = self.h()?;
        let ks = h.keys_from_iterable(py, keys)?;
        let cache = &*h.cache;
        run(py, retry.0, || cache.delete_many(&ks))
    }

    // ---- removal in bulk -------------------------------------------------------------------

    /// Remove every entry that has expired as of `now` (seconds since the epoch; default: the
    /// current `time.time()`). Returns how many were removed. In batches, each its own transaction.
    #[pyo3(signature = (now=None, retry=Flag(false)), text_signature = "(self, now=None, retry=False)")]
    fn expire(&self, py: Python<'_>, now: Option<&Bound<'_, PyAny>>, retry: Flag) -> PyResult<u64> {
        self.h()?.expire(py, now, retry.0)
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

    // ---- the queue -----------------------------------------------------------------------

    /// Push `value` onto the queue named `prefix` (int keys without one) at `side`; returns
    /// its key. `read=True` takes a binary file and stores its bytes.
    #[pyo3(signature = (value, prefix=PrefixArg(None), side=SideArg(Side::Back), expire=ExpireArg(None), read=Flag(false), tag=None, retry=Flag(false)), text_signature = "(self, value, prefix=None, side='back', expire=None, read=False, tag=None, retry=False)")]
    #[allow(clippy::too_many_arguments)]
    fn push<'py>(
        &self,
        py: Python<'py>,
        value: &Bound<'py, PyAny>,
        prefix: PrefixArg,
        side: SideArg,
        expire: ExpireArg,
        read: Flag,
        tag: Option<&Bound<'py, PyAny>>,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyAny>> {
        let h = self.h()?;
        let options = WriteOptions {
            expire: expire.0,
            tag: tag_from_py(tag)?,
        };
        let prefix = prefix.0.as_deref();
        queue::push(py, h, value, prefix, side.0, options, read.0, retry.0)
    }

    /// Push several values in one transaction, in order; returns their keys.
    #[pyo3(signature = (values, prefix=PrefixArg(None), side=SideArg(Side::Back), expire=ExpireArg(None), tag=None, retry=Flag(false)), text_signature = "(self, values, prefix=None, side='back', expire=None, tag=None, retry=False)")]
    #[allow(clippy::too_many_arguments)]
    fn push_many<'py>(
        &self,
        py: Python<'py>,
        values: &Bound<'py, PyAny>,
        prefix: PrefixArg,
        side: SideArg,
        expire: ExpireArg,
        tag: Option<&Bound<'py, PyAny>>,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyList>> {
        let h = self.h()?;
        let options = WriteOptions {
            expire: expire.0,
            tag: tag_from_py(tag)?,
        };
        let prefix = prefix.0.as_deref();
        queue::push_many(py, h, values, prefix, side.0, options, retry.0)
    }

    /// Take the item at `side` of the queue: `(key, value)`, or `default` when it is empty;
    /// with `timeout`, wait up to that many seconds for an item (GIL released).
    #[pyo3(signature = (prefix=PrefixArg(None), default=PairDefault::Pair, side=SideArg(Side::Front), expire_time=Flag(false), tag=Flag(false), retry=Flag(false), timeout=WaitArg(None)), text_signature = "(self, prefix=None, default=(None, None), side='front', expire_time=False, tag=False, retry=False, timeout=None)")]
    #[allow(clippy::too_many_arguments)]
    fn pull<'py>(
        &self,
        py: Python<'py>,
        prefix: PrefixArg,
        default: PairDefault<'py>,
        side: SideArg,
        expire_time: Flag,
        tag: Flag,
        retry: Flag,
        timeout: WaitArg,
    ) -> PyResult<Bound<'py, PyAny>> {
        let h = self.h()?;
        let items = queue::pull(py, h, prefix.0.as_deref(), side.0, 1, timeout.0, retry.0)?;
        match items.into_iter().next() {
            Some(item) => shape_item(py, item, expire_time.0, tag.0),
            None => {
                let default = default.resolve(py)?;
                shape_default(py, Some(&default), expire_time.0, tag.0)
            }
        }
    }

    /// Take up to `n` items in one transaction; with `timeout`, wait while there are none.
    #[pyo3(signature = (n, prefix=PrefixArg(None), side=SideArg(Side::Front), expire_time=Flag(false), tag=Flag(false), retry=Flag(false), timeout=WaitArg(None)), text_signature = "(self, n, prefix=None, side='front', expire_time=False, tag=False, retry=False, timeout=None)")]
    #[allow(clippy::too_many_arguments)]
    fn pull_many<'py>(
        &self,
        py: Python<'py>,
        n: CountArg,
        prefix: PrefixArg,
        side: SideArg,
        expire_time: Flag,
        tag: Flag,
        retry: Flag,
        timeout: WaitArg,
    ) -> PyResult<Bound<'py, PyList>> {
        let h = self.h()?;
        let items = queue::pull(py, h, prefix.0.as_deref(), side.0, n.0, timeout.0, retry.0)?;
        let out = PyList::empty(py);
        for item in items {
            out.append(shape_item(py, item, expire_time.0, tag.0)?)?;
        }
        Ok(out)
    }

    /// Every queue in the keys, as `(prefix, depth, oldest)`: the prefix (None for the int
    /// keys' queue), its live items, and when its oldest live item was pushed. A scan of
    /// every key: for operators (the CLI, the dashboard), not for workers.
    fn _queues(&self, py: Python<'_>) -> PyResult<Vec<QueueRow>> {
        queue::queues(py, self.h()?)
    }

    /// The item at `side` of the queue, left in place: `(key, value)`, or `default`.
    #[pyo3(signature = (prefix=PrefixArg(None), default=PairDefault::Pair, side=SideArg(Side::Front), expire_time=Flag(false), tag=Flag(false), retry=Flag(false)), text_signature = "(self, prefix=None, default=(None, None), side='front', expire_time=False, tag=False, retry=False)")]
    #[allow(clippy::too_many_arguments)]
    fn peek<'py>(
        &self,
        py: Python<'py>,
        prefix: PrefixArg,
        default: PairDefault<'py>,
        side: SideArg,
        expire_time: Flag,
        tag: Flag,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyAny>> {
        let h = self.h()?;
        match queue::peek(py, h, prefix.0.as_deref(), side.0, retry.0)? {
            Some(item) => shape_item(py, item, expire_time.0, tag.0),
            None => {
                let default = default.resolve(py)?;
                shape_default(py, Some(&default), expire_time.0, tag.0)
            }
        }
    }
}
