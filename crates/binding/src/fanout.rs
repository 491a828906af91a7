//! `FanoutCore`, the Rust base class of `diskcache_oxide.FanoutCache` (D-069). The calls on one
//! key (get, set, add, delete, incr, `[]`, `in`, ...) hash the key, pick its shard and call
//! that shard's `CacheCore` method from Rust: a routed call costs one argument parse and one
//! hash more than the same call on a `Cache`, where it used to cost a Python frame, a Python
//! hash and a second call through Python.
//!
//! What a routed call returns when its shard stays locked is FanoutCache's (the API table's
//! `fanout` column, `_api.CALLS`): False for the writes, None for incr and decr, the bare
//! default for get and pop; the item protocols let `Timeout` through.
//!
//! `_shards` is the tuple of shards `FanoutCache` opened. When each shard's class keeps
//! `CacheCore`'s own routed calls (a plain `Cache`), they are called directly; otherwise (a
//! durable handle, whose calls are guarded in Python) each call goes through Python. Anything
//! but a tuple assigned to `_shards` (python-diskcache's own tests patch in a mock) is used,
//! through Python, until it is deleted, which brings the tuple back.

use crate::args::{ExpireArg, Flag, Num};
use crate::core::CacheCore;
use crate::errors::Exc;
use crate::pyobj::cached;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyFloat, PyInt, PyString, PyTuple};
use std::sync::{Arc, PoisonError, RwLock};

/// The calls `FanoutCore` routes. A shard class that overrides any of them is called through
/// Python, so that what it adds (a durable handle's guard) still runs.
const ROUTED: [&str; 12] = [
    "set",
    "__setitem__",
    "add",
    "touch",
    "incr",
    "decr",
    "get",
    "__getitem__",
    "__contains__",
    "pop",
    "__delitem__",
    "delete",
];

/// python-diskcache's shard hash is reduced modulo this (and masked to 32 bits).
const MASK: u32 = 0xFFFF_FFFF;

/// Adler-32 (RFC 1950) as `zlib.adler32` computes it from its starting value 1. The sums are
/// reduced every 5,552 bytes (zlib's NMAX), the most that cannot overflow 32 bits.
fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5_552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// `diskcache_oxide.fanout.shard_hash` for the keys the cache stores natively (exact `str`,
/// `bytes`, `int` within 64 bits, `float`): python-diskcache's hash, computed here. Any other
/// key (and a `str` with lone surrogates, which has no UTF-8 form) is hashed by the Python
/// function, whose canonical encoding is the definition.
fn shard_hash(py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u32> {
    if key.is_exact_instance_of::<PyString>() {
        // Safe: checked just above.
        let text = unsafe { key.cast_unchecked::<PyString>() };
        if let Ok(utf8) = text.to_str() {
            return Ok(adler32(utf8.as_bytes()));
        }
    } else if key.is_exact_instance_of::<PyBytes>() {
        let raw = unsafe { key.cast_unchecked::<PyBytes>() };
        return Ok(adler32(raw.as_bytes()));
    } else if key.is_exact_instance_of::<PyInt>() {
        if let Ok(int) = key.extract::<i64>() {
            // Python's `key % 0xFFFFFFFF`: never negative for a positive modulus.
            let reduced = int.rem_euclid(i64::from(MASK));
            return Ok(u32::try_from(reduced).unwrap_or(0));
        }
    } else if key.is_exact_instance_of::<PyFloat>() {
        let float = unsafe { key.cast_unchecked::<PyFloat>() };
        return Ok(adler32(&float.value().to_be_bytes()));
    }
    static PYTHON: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let hash = cached(&PYTHON, py, "diskcache_oxide.fanout", "shard_hash")?;
    hash.call1((key,))?.extract()
}

/// What `_shards` holds.
struct Shards {
    /// The tuple of shards last assigned (`FanoutCache` assigns it once it has opened them).
    opened: Py<PyAny>,
    /// Its shards as `CacheCore`s, when every one keeps `CacheCore`'s routed calls.
    direct: Option<Arc<[Py<CacheCore>]>>,
    /// How many shards `opened` has.
    count: usize,
    /// Something other than a tuple, assigned over `opened` until deleted.
    stand_in: Option<Py<PyAny>>,
}

/// The shard a key routes to.
enum Shard<'py> {
    Direct(Py<CacheCore>),
    Python(Bound<'py, PyAny>),
}

/// Whether every item of `shards` is a `CacheCore` whose class keeps `CacheCore`'s routed
/// calls; if so, those `CacheCore`s.
fn direct_route(
    py: Python<'_>,
    shards: &Bound<'_, PyTuple>,
) -> PyResult<Option<Arc<[Py<CacheCore>]>>> {
    let base = py.get_type::<CacheCore>();
    let mut direct = Vec::with_capacity(shards.len());
    for shard in shards.iter() {
        let Ok(core) = shard.cast::<CacheCore>() else {
            return Ok(None);
        };
        let class = shard.get_type();
        for name in ROUTED {
            if !class.getattr(name)?.is(&base.getattr(name)?) {
                return Ok(None);
            }
        }
        direct.push(core.clone().unbind());
    }
    Ok(Some(direct.into()))
}

#[pyclass(subclass, frozen, module = "diskcache_oxide", name = "FanoutCore")]
pub(crate) struct FanoutCore {
    shards: RwLock<Shards>,
}

impl FanoutCore {
    /// The shard that holds `key`. No lock is held when this returns: the shard's call may
    /// release the GIL, and a thread assigning `_shards` must not wait on it holding the GIL.
    fn shard<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Shard<'py>> {
        // Before the lock: hashing an unusual key runs Python code.
        let hash = shard_hash(py, key)?;
        let (stand_in, index) = {
            let shards = self.shards.read().unwrap_or_else(PoisonError::into_inner);
            if shards.count == 0 {
                return Err(PyRuntimeError::new_err(
                    "this FanoutCache has no shards: its __init__ did not run; a subclass that \
                     overrides __init__ must call super().__init__(directory, ...)",
                ));
            }
            let index = usize::try_from(hash).unwrap_or(0) % shards.count;
            match (&shards.stand_in, &shards.direct) {
                (None, Some(direct)) => return Ok(Shard::Direct(direct[index].clone_ref(py))),
                (Some(stand_in), _) => (stand_in.clone_ref(py), index),
                (None, None) => (shards.opened.clone_ref(py), index),
            }
        };
        Ok(Shard::Python(stand_in.bind(py).get_item(index)?))
    }
}

/// Whether `error` is the shard's lock timing out (`diskcache_oxide.Timeout`).
fn timed_out(py: Python<'_>, error: &PyErr) -> PyResult<bool> {
    Ok(error.is_instance(py, Exc::Timeout.class(py)?))
}

/// `result`, or `miss` if it is a `Timeout`.
fn or_miss<'py, T>(py: Python<'py>, result: PyResult<T>, miss: impl FnOnce() -> T) -> PyResult<T> {
    match result {
        Err(error) if timed_out(py, &error)? => Ok(miss()),
        other => other,
    }
}

fn expire_object<'py>(py: Python<'py>, expire: &ExpireArg) -> PyResult<Bound<'py, PyAny>> {
    Ok(match expire.0 {
        Some(seconds) => seconds.into_pyobject(py)?.into_any(),
        None => py.None().into_bound(py),
    })
}

fn object_or_none<'py>(py: Python<'py>, obj: Option<&Bound<'py, PyAny>>) -> Bound<'py, PyAny> {
    obj.cloned().unwrap_or_else(|| py.None().into_bound(py))
}

#[pymethods]
impl FanoutCore {
    /// The calls routed here, for the test that holds this list to `_api.FANOUT_CORE` (the
    /// Python table that decides which FanoutCache calls are not generated).
    #[classattr]
    #[pyo3(name = "_ROUTED")]
    fn routed_names(py: Python<'_>) -> PyResult<Py<PyTuple>> {
        Ok(PyTuple::new(py, ROUTED)?.unbind())
    }

    /// The shards are assigned by `FanoutCache.__init__` (`_shards`), so that subclasses may
    /// override `__init__` as they could with python-diskcache.
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(
        py: Python<'_>,
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, PyDict>>,
    ) -> Self {
        FanoutCore {
            shards: RwLock::new(Shards {
                opened: PyTuple::empty(py).into_any().unbind(),
                direct: None,
                count: 0,
                stand_in: None,
            }),
        }
    }

    /// The shards, one `Cache` each, in order.
    #[getter(_shards)]
    fn get_shards(&self, py: Python<'_>) -> Py<PyAny> {
        let shards = self.shards.read().unwrap_or_else(PoisonError::into_inner);
        shards
            .stand_in
            .as_ref()
            .unwrap_or(&shards.opened)
            .clone_ref(py)
    }

    /// `del fanout._shards` (a patch ending): the tuple last assigned is back.
    #[deleter(_shards)]
    fn delete_shards(&self) {
        let mut shards = self.shards.write().unwrap_or_else(PoisonError::into_inner);
        shards.stand_in = None;
    }

    #[setter(_shards)]
    fn set_shards(&self, py: Python<'_>, value: Bound<'_, PyAny>) -> PyResult<()> {
        let Ok(tuple) = value.cast::<PyTuple>() else {
            let mut shards = self.shards.write().unwrap_or_else(PoisonError::into_inner);
            shards.stand_in = Some(value.unbind());
            return Ok(());
        };
        // Computed before the lock: it reads the shards' classes (Python code may run).
        let direct = direct_route(py, tuple)?;
        let mut shards = self.shards.write().unwrap_or_else(PoisonError::into_inner);
        *shards = Shards {
            opened: tuple.clone().into_any().unbind(),
            direct,
            count: tuple.len(),
            stand_in: None,
        };
        Ok(())
    }

    // ---- writes: False when the shard stays locked ------------------------------------------

    /// `Cache.set` on the shard that holds `key`; False if that shard stays locked (without
    /// `retry`).
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
        self.store(py, "set", key, value, expire, read, tag, retry)
    }

    /// `Cache.__setitem__` on the shard that holds `key`.
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        match self.shard(py, key)? {
            Shard::Direct(shard) => shard.get().__setitem__(py, key, value),
            Shard::Python(shard) => shard.set_item(key, value),
        }
    }

    /// `Cache.add` on the shard that holds `key`; False if that shard stays locked (without
    /// `retry`).
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
        self.store(py, "add", key, value, expire, read, tag, retry)
    }

    /// `Cache.touch` on the shard that holds `key`; False if that shard stays locked (without
    /// `retry`).
    #[pyo3(signature = (key, expire=ExpireArg(None), retry=Flag(false)), text_signature = "(self, key, expire=None, retry=False)")]
    fn touch(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        expire: ExpireArg,
        retry: Flag,
    ) -> PyResult<bool> {
        let result = match self.shard(py, key)? {
            Shard::Direct(shard) => shard.get().touch(py, key, expire, retry),
            Shard::Python(shard) => {
                let args = (key, expire_object(py, &expire)?, retry.0);
                shard
                    .call_method1("touch", args)
                    .and_then(|r| r.is_truthy())
            }
        };
        or_miss(py, result, || false)
    }

    /// `Cache.incr` on the shard that holds `key`; None if that shard stays locked (without
    /// `retry`).
    #[pyo3(signature = (key, delta=Num::Int(1), default=Num::Int(0), retry=Flag(false)), text_signature = "(self, key, delta=1, default=0, retry=False)")]
    fn incr<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        delta: Num<'py>,
        default: Num<'py>,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.counter(py, "incr", key, delta, default, retry)
    }

    /// `Cache.decr` on the shard that holds `key`; None if that shard stays locked (without
    /// `retry`).
    #[pyo3(signature = (key, delta=Num::Int(1), default=Num::Int(0), retry=Flag(false)), text_signature = "(self, key, delta=1, default=0, retry=False)")]
    fn decr<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        delta: Num<'py>,
        default: Num<'py>,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.counter(py, "decr", key, delta, default, retry)
    }

    // ---- reads and removals -----------------------------------------------------------------

    /// `Cache.get` on the shard that holds `key`; if that shard stays locked (without
    /// `retry`), the bare `default` (without the expire time or tag asked for), as
    /// python-diskcache returns it.
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
        let result = match self.shard(py, key)? {
            Shard::Direct(shard) => {
                shard
                    .get()
                    .get(py, key, default, read, expire_time, tag, retry)
            }
            Shard::Python(shard) => {
                let args = (
                    key,
                    object_or_none(py, default),
                    read.0,
                    expire_time.0,
                    tag.0,
                    retry.0,
                );
                shard.call_method1("get", args)
            }
        };
        or_miss(py, result, || object_or_none(py, default))
    }

    /// `Cache.__getitem__` on the shard that holds `key`.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match self.shard(py, key)? {
            Shard::Direct(shard) => shard.get().__getitem__(py, key),
            Shard::Python(shard) => shard.get_item(key),
        }
    }

    /// `Cache.__contains__` on the shard that holds `key`.
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        match self.shard(py, key)? {
            Shard::Direct(shard) => shard.get().__contains__(py, key),
            Shard::Python(shard) => shard.contains(key),
        }
    }

    /// `Cache.pop` on the shard that holds `key`; if that shard stays locked (without
    /// `retry`), the bare `default`, as python-diskcache returns it.
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
        let result = match self.shard(py, key)? {
            Shard::Direct(shard) => shard.get().pop(py, key, default, expire_time, tag, retry),
            Shard::Python(shard) => {
                let args = (
                    key,
                    object_or_none(py, default),
                    expire_time.0,
                    tag.0,
                    retry.0,
                );
                shard.call_method1("pop", args)
            }
        };
        or_miss(py, result, || object_or_none(py, default))
    }

    /// `Cache.__delitem__` on the shard that holds `key`.
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        match self.shard(py, key)? {
            Shard::Direct(shard) => shard.get().__delitem__(py, key),
            Shard::Python(shard) => shard.del_item(key),
        }
    }

    /// `Cache.delete` on the shard that holds `key`; False if that shard stays locked
    /// (without `retry`).
    #[pyo3(signature = (key, retry=Flag(false)), text_signature = "(self, key, retry=False)")]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, retry: Flag) -> PyResult<bool> {
        let result = match self.shard(py, key)? {
            Shard::Direct(shard) => shard.get().delete(py, key, retry),
            Shard::Python(shard) => shard
                .call_method1("delete", (key, retry.0))
                .and_then(|r| r.is_truthy()),
        };
        or_miss(py, result, || false)
    }
}

impl FanoutCore {
    /// `set` or `add` (`name`) on the shard that holds `key`; False if it stays locked.
    #[allow(clippy::too_many_arguments)]
    fn store(
        &self,
        py: Python<'_>,
        name: &str,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        expire: ExpireArg,
        read: Flag,
        tag: Option<&Bound<'_, PyAny>>,
        retry: Flag,
    ) -> PyResult<bool> {
        let result = match self.shard(py, key)? {
            Shard::Direct(shard) if name == "set" => {
                shard.get().set(py, key, value, expire, read, tag, retry)
            }
            Shard::Direct(shard) => shard.get().add(py, key, value, expire, read, tag, retry),
            Shard::Python(shard) => {
                let args = (
                    key,
                    value,
                    expire_object(py, &expire)?,
                    read.0,
                    object_or_none(py, tag),
                    retry.0,
                );
                shard.call_method1(name, args).and_then(|r| r.is_truthy())
            }
        };
        or_miss(py, result, || false)
    }

    /// `incr` or `decr` (`name`) on the shard that holds `key`; None if it stays locked.
    fn counter<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        key: &Bound<'py, PyAny>,
        delta: Num<'py>,
        default: Num<'py>,
        retry: Flag,
    ) -> PyResult<Bound<'py, PyAny>> {
        let result = match self.shard(py, key)? {
            Shard::Direct(shard) if name == "incr" => {
                shard.get().incr(py, key, delta, default, retry)
            }
            Shard::Direct(shard) => shard.get().decr(py, key, delta, default, retry),
            Shard::Python(shard) => {
                let args = (key, delta.to_object(py)?, default.to_object(py)?, retry.0);
                shard.call_method1(name, args)
            }
        };
        or_miss(py, result, || py.None().into_bound(py))
    }
}

#[cfg(test)]
mod tests {
    use super::adler32;

    #[test]
    fn adler32_matches_the_rfc_1950_examples() {
        assert_eq!(adler32(b""), 1);
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        // Longer than NMAX, where the sums are reduced mid-way.
        let long = vec![0xFFu8; 100_000];
        let (mut a, mut b) = (1u64, 0u64);
        for &byte in &long {
            a = (a + u64::from(byte)) % 65_521;
            b = (b + a) % 65_521;
        }
        assert_eq!(u64::from(adler32(&long)), (b << 16) | a);
    }
}
