//! The cache operations behind `CacheCore`'s cache calls (writes, reads, batch calls and
//! removals), as methods of the `Handle` they run on. Each converts its arguments while
//! attached, runs the engine call with the GIL released, and converts the result.
//! `CacheCore`'s methods (`core.rs`) read the arguments and call these.

use crate::args::Num;
use crate::convert::{
    fetched_to_py, key_from_py, key_to_py, prepare_value, tag_from_py, Fetched, Prepared,
};
use crate::decode::{read_deferred, Got, Hit};
use crate::errors::IntoPy;
use crate::handle::Handle;
use crate::reader::PyReader;
use crate::run::{run, run_removing, run_short};
use crate::shape::{key_error, shape_default, shape_hit};
use diskcache_oxide_engine::{Error, Imported, Incr, Key, ValueRef, WriteOptions};
use pyo3::exceptions::PyKeyError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// One `_import_many` row: `(key, value, read, store_time, expire_time, access_time,
/// access_count, tag)`.
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

impl Handle {
    /// Engine get plus conversion; `None` is a miss (absent, expired, or a decode miss).
    pub(crate) fn get_inner<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        read: bool,
        retry: bool,
    ) -> PyResult<Option<Hit<'py>>> {
        let k = key_from_py(py, key, &self.ctx())?;
        let cache = &*self.cache;
        if !read {
            // A remembered value costs well under a microsecond; releasing and taking back
            // the GIL around it would cost more, and with other threads waiting for the GIL
            // much more. So it is looked up holding the GIL, and only SQLite is left for
            // `run`, which releases it.
            if let Some(e) = cache.get_remembered(&k) {
                let got = Some((Fetched::from(e.value), e.expire_time, e.tag));
                return self.convert_got(py, key, got);
            }
        }
        let fetch = || -> Result<Got, Error> {
            let entry = if read {
                cache.get(&k, true)?
            } else {
                cache.get_deferred(&k)?
            };
            Ok(entry.map(|e| (Fetched::from(e.value), e.expire_time, e.tag)))
        };
        // A read of a value file checks the whole file: that is not short.
        let fetched = if read {
            run(py, retry, fetch)
        } else {
            run_short(py, retry, cache, fetch)
        };
        let got = match fetched {
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
            Ok(got) => self.convert_got(py, key, got),
            Err(e) => self.decode_miss(py, key, e).map(|()| None),
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
        let ctx = self.ctx();
        let k = key_from_py(py, key, &ctx)?;
        let prepared = prepare_value(py, value, &ctx)?;
        let v = prepared.as_ref();
        let cache = &*self.cache;
        if is_small(&v) {
            return run_short(py, retry, cache, || cache.set(&k, v, &options));
        }
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
        let cache = &*self.cache;
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

    /// `add`: store only if the key is absent or expired; whether it was stored.
    pub(crate) fn add(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        options: WriteOptions,
        read: bool,
        retry: bool,
    ) -> PyResult<bool> {
        let ctx = self.ctx();
        let k = key_from_py(py, key, &ctx)?;
        let cache = &*self.cache;
        if read {
            // The engine has no add-from-reader: check and write in one transaction.
            return self.in_transaction(py, retry, || {
                if run(py, false, || cache.contains(&k))? {
                    return Ok(false);
                }
                self.set_from_file(py, &k, value, &options, false)?;
                Ok(true)
            });
        }
        let prepared = prepare_value(py, value, &ctx)?;
        let v = prepared.as_ref();
        if is_small(&v) {
            return run_short(py, retry, cache, || cache.add(&k, v, &options));
        }
        run(py, retry, || cache.add(&k, v, &options))
    }

    /// `incr` for what the engine's i64 arithmetic cannot do: read, add in Python, write,
    /// in one transaction. Expiry and tag of an existing item are kept, as python-diskcache
    /// keeps them.
    fn incr_slow<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        k: &Key,
        delta: &Num<'py>,
        default: &Num<'py>,
        retry: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let cache = &*self.cache;
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
                    let current = fetched_to_py(py, current, self.pickle)?;
                    let options = WriteOptions {
                        expire: expire_time.map(|t| (t - now()).max(0.0)),
                        tag,
                    };
                    (current.add(&delta)?, options)
                }
            };
            let ctx = self.ctx();
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
        let k = key_from_py(py, key, &self.ctx())?;
        let fast_default = match &default {
            Num::Int(i) => Some(Some(*i)),
            Num::Obj(o) if o.is_none() => Some(None),
            Num::Obj(_) => None,
        };
        if let (Num::Int(d), Some(def)) = (&delta, fast_default) {
            let cache = &*self.cache;
            let d = *d;
            match run_short(py, retry, cache, || cache.incr(&k, d, def))? {
                Incr::Value(n) => return Ok(n.into_pyobject(py)?.into_any()),
                Incr::Missing => return Err(key_error(key)),
                Incr::NotInt => {}
            }
        }
        self.incr_slow(py, key, &k, &delta, &default, retry)
    }

    /// `pop`: remove the entry and return its value, shaped as the flags ask, or `default`.
    pub(crate) fn pop<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<&Bound<'py, PyAny>>,
        expire_time: bool,
        tag: bool,
        retry: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let k = key_from_py(py, key, &self.ctx())?;
        let cache = &*self.cache;
        let got: PyResult<Got> = run(py, retry, || {
            Ok(cache
                .pop(&k)?
                .map(|e| (Fetched::from(e.value), e.expire_time, e.tag)))
        });
        let got = match got {
            Ok(got) => self.convert_got(py, key, got)?,
            Err(e) => self.decode_miss(py, key, e).map(|()| None)?,
        };
        match got {
            None => shape_default(py, default, expire_time, tag),
            Some((value, expire, t)) => shape_hit(py, value, expire, t, expire_time, tag),
        }
    }

    /// `peekitem`: the first or last entry as `(key, value)`, shaped as the flags ask.
    pub(crate) fn peekitem<'py>(
        &self,
        py: Python<'py>,
        last: bool,
        expire_time: bool,
        tag: bool,
        retry: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let cache = &*self.cache;
        let got = run(py, retry, || {
            Ok(cache
                .peekitem(last)?
                .map(|(k, e)| (k, Fetched::from(e.value), e.expire_time, e.tag)))
        })?;
        let Some((k, value, expire, t)) = got else {
            return Err(PyKeyError::new_err("dictionary is empty"));
        };
        let key = key_to_py(py, k, self.pickle)?;
        let value = fetched_to_py(py, value, self.pickle)?;
        let item = PyTuple::new(py, [key, value])?.into_any();
        shape_hit(py, item, expire, t, expire_time, tag)
    }

    pub(crate) fn keys_from_iterable(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Key>> {
        let ctx = self.ctx();
        let mut out = Vec::new();
        for key in keys.try_iter()? {
            out.push(key_from_py(py, &key?, &ctx)?);
        }
        Ok(out)
    }

    /// `get_many`: the values of `keys`, in order, `default` for each miss.
    pub(crate) fn get_many<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        default: Option<&Bound<'py, PyAny>>,
        retry: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let key_objs: Vec<Bound<'py, PyAny>> = keys.try_iter()?.collect::<PyResult<_>>()?;
        let ctx = self.ctx();
        let ks = key_objs
            .iter()
            .map(|k| key_from_py(py, k, &ctx))
            .collect::<PyResult<Vec<Key>>>()?;
        let cache = &*self.cache;
        let got: Vec<Got> = run(py, retry, || {
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
            match self.convert_got(py, key, got)? {
                Some((value, _, _)) => out.append(value)?,
                None => out.append(&default)?,
            }
        }
        Ok(out)
    }

    /// `set_many`: every `(key, value)` of `mapping` in one transaction.
    pub(crate) fn set_many(
        &self,
        py: Python<'_>,
        mapping: &Bound<'_, PyAny>,
        options: WriteOptions,
        retry: bool,
    ) -> PyResult<()> {
        let ctx = self.ctx();
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
        let cache = &*self.cache;
        run(py, retry, || cache.set_many(&items, &options))
    }

    /// `_import_many`: write `rows` with their own times (D-041); `(index, error)` for each
    /// row it could not convert.
    pub(crate) fn import_many(
        &self,
        py: Python<'_>,
        rows: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<(usize, Py<PyAny>)>> {
        let ctx = self.ctx();
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
        let cache = &*self.cache;
        run(py, true, || cache.import_many(&items))?;
        refused.sort_by_key(|(i, _)| *i);
        Ok(refused)
    }

    /// `expire`: remove what has expired as of `now` (default: `time.time()`).
    pub(crate) fn expire(
        &self,
        py: Python<'_>,
        now: Option<&Bound<'_, PyAny>>,
        retry: bool,
    ) -> PyResult<u64> {
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
        let cache = &*self.cache;
        run_removing(py, retry, || cache.expire(now))
    }
}

/// Whether a value is small enough to be written holding the GIL (`run_short`): kept inline
/// in its row, never in a value file, whose writing and syncing take longer.
fn is_small(value: &ValueRef<'_>) -> bool {
    const SMALL: usize = 16 * 1024;
    match value {
        ValueRef::Int(_) | ValueRef::Float(_) => true,
        ValueRef::Str(s) => s.len() <= SMALL,
        ValueRef::Bytes(b) | ValueRef::Encoded(b) | ValueRef::Pickled(b) => b.len() <= SMALL,
    }
}
