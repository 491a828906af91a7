//! The queue calls of `Cache` (push, pull, peek and their batches) and the blocking wait that
//! `pull(timeout=...)` and the job queue's `take(timeout=...)` share.
//!
//! `pull` decides about each item inside the engine's write transaction (D-012): the decision
//! callback runs with the GIL released, re-attaches to decode the item, and keeps the Python
//! object it built in the callback's state, so that the item is deleted only once this process
//! has read it. Items of the plain types (int, float, str, bytes) cannot fail to decode and are
//! converted after the engine returns. Waiting (D-013) happens with the GIL released, in slices
//! so that Ctrl-C is noticed.

use crate::cache::{float_or_none, shape, shape_default, PairDefault};
use crate::convert::opt_scalar_to_py;
use crate::convert::{decode_bytes, fetched_to_py, from_value, key_to_py, unpickle, Fetched};
use crate::convert::{prepare_value, tag_from_py, Flag, Prepared};
use crate::core::Handle;
use crate::core::{run, CacheCore};
use crate::errors::{to_py, to_py_ref, Exc};
use crate::pyobj;
use diskcache_oxide_engine::{Cache, Candidate, Entry, Error, Key, Side, StoredValue, Verdict};
use diskcache_oxide_engine::{ValueRef, WriteOptions};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyList;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};
use pyo3::types::{PyByteArray, PyBytes, PyTuple};
use std::time::{Duration, Instant};

// ---- arguments -----------------------------------------------------------------------------

/// Longest stretch a blocking wait spends with the GIL released before it checks for signals.
const WAIT_SLICE: Duration = Duration::from_millis(200);

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "<unknown type>".to_owned())
}

/// `prefix`: a str or None.
pub(crate) struct PrefixArg(pub Option<String>);

impl<'a, 'py> FromPyObject<'a, 'py> for PrefixArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_none() {
            return Ok(PrefixArg(None));
        }
        match obj.cast::<PyString>() {
            Ok(s) => Ok(PrefixArg(Some(s.to_str()?.to_owned()))),
            Err(_) => Err(PyTypeError::new_err(format!(
                "prefix must be a str or None, not {}",
                type_name(&obj.to_owned())
            ))),
        }
    }
}

/// `side`: 'front' or 'back'.
pub(crate) struct SideArg(pub Side);

impl<'a, 'py> FromPyObject<'a, 'py> for SideArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(s) = obj.cast::<PyString>() {
            match s.to_str()? {
                "front" => return Ok(SideArg(Side::Front)),
                "back" => return Ok(SideArg(Side::Back)),
                _ => {}
            }
        }
        Err(PyValueError::new_err(format!(
            "side must be 'front' or 'back', not {}",
            obj.repr()?
        )))
    }
}

/// A blocking `timeout`: None (do not wait) or a finite number of seconds >= 0.
pub(crate) struct WaitArg(pub Option<Duration>);

impl<'a, 'py> FromPyObject<'a, 'py> for WaitArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_none() {
            return Ok(WaitArg(None));
        }
        let number = !obj.is_instance_of::<PyBool>()
            && (obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyFloat>());
        if !number {
            return Err(PyTypeError::new_err(format!(
                "timeout must be None or a number of seconds, not {}",
                type_name(&obj.to_owned())
            )));
        }
        let seconds: f64 = obj.extract()?;
        Duration::try_from_secs_f64(seconds)
            .map(|d| WaitArg(Some(d)))
            .map_err(|_| {
                PyValueError::new_err(format!(
                    "timeout must be None or a finite number of seconds >= 0, not {seconds}"
                ))
            })
    }
}

/// An `expire`: None (never) or a number of seconds from now; NaN is refused because it would
/// make the entry neither live nor expired.
pub(crate) struct ExpireArg(pub Option<f64>);

impl<'a, 'py> FromPyObject<'a, 'py> for ExpireArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_none() {
            return Ok(ExpireArg(None));
        }
        if !(obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyFloat>()) {
            return Err(PyTypeError::new_err(format!(
                "expire must be None or a number of seconds, not {}",
                type_name(&obj.to_owned())
            )));
        }
        let seconds: f64 = obj.extract()?;
        if seconds.is_nan() {
            return Err(PyValueError::new_err(
                "expire must be None or a number of seconds, not NaN",
            ));
        }
        Ok(ExpireArg(Some(seconds)))
    }
}

/// A count `n`: an int >= 0.
pub(crate) struct CountArg(pub usize);

impl<'a, 'py> FromPyObject<'a, 'py> for CountArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
            return Err(PyTypeError::new_err(format!(
                "n must be an int, not {}",
                type_name(&obj.to_owned())
            )));
        }
        let n: i64 = obj.extract().map_err(|_| {
            PyValueError::new_err(format!(
                "n must be an int >= 0 that fits in 64 bits, not {}",
                obj.to_owned()
            ))
        })?;
        usize::try_from(n)
            .map(CountArg)
            .map_err(|_| PyValueError::new_err(format!("n must be >= 0, not {n}")))
    }
}

/// `(prefix, depth, oldest push)`, as `_queues` reports a queue.
type QueueRow = (Option<String>, u64, Option<f64>);

// ---- the blocking wait ---------------------------------------------------------------------

/// Run `attempt` until it returns `Some`; with `timeout`, keep trying until it passes, sleeping
/// (GIL released) until some process writes to the cache (D-013). Inside a transaction of this
/// thread it tries once: holding the write lock, it would wait for writes that cannot happen.
/// With `retry`, a lock timeout (`Error::Timeout`) is retried rather than raised.
pub(crate) fn wait_loop<T, F>(
    py: Python<'_>,
    cache: &Cache,
    timeout: Option<Duration>,
    retry: bool,
    mut attempt: F,
) -> PyResult<Option<T>>
where
    F: FnMut() -> Result<Option<T>, Error> + Send,
    T: Send,
{
    let deadline = match timeout {
        Some(t) if !cache.in_transaction() => Some(Instant::now() + t),
        _ => None,
    };
    loop {
        let result = py.detach(|| match deadline {
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                cache.wait_for(left.min(WAIT_SLICE), &mut attempt)
            }
            None => attempt(),
        });
        match result {
            Ok(Some(v)) => return Ok(Some(v)),
            Ok(None) => match deadline {
                Some(d) if Instant::now() < d => py.check_signals()?,
                _ => return Ok(None),
            },
            Err(Error::Timeout) if retry => py.check_signals()?,
            Err(e) => return Err(to_py(py, e)),
        }
    }
}

// ---- decoding an item inside the pull ------------------------------------------------------

/// What this process makes of a queue item.
pub(crate) enum Decoded {
    /// An int, float, str or bytes: cannot fail, built once the pull has returned.
    Plain,
    Ok(Py<PyAny>),
    /// No build could read it (`CorruptValueError`): it is removed.
    Damaged(PyErr),
    /// This process cannot read it, another may (`UnsafeValueError`, `UnknownTypeError`):
    /// it is left in place.
    Unreadable(PyErr),
    /// Anything else (the application's decoder raised, an I/O error): left in place.
    Failed(PyErr),
}

pub(crate) fn classify(py: Python<'_>, err: PyErr) -> Decoded {
    if Exc::CorruptValue.matches(py, &err) {
        Decoded::Damaged(err)
    } else if Exc::DecodeError.matches(py, &err) {
        Decoded::Unreadable(err)
    } else {
        Decoded::Failed(err)
    }
}

fn settle(py: Python<'_>, built: PyResult<Bound<'_, PyAny>>) -> Decoded {
    match built {
        Ok(obj) => Decoded::Ok(obj.unbind()),
        Err(e) => classify(py, e),
    }
}

/// Decode a candidate. Call it with the GIL released: the safe format is decoded first, and
/// Python is re-attached only to build objects.
pub(crate) fn decode_candidate(c: &Candidate, pickle: bool) -> Decoded {
    match &c.entry {
        Ok(entry) => decode_stored(&entry.value, pickle),
        Err(e) => Python::attach(|py| classify(py, to_py_ref(py, e))),
    }
}

/// Decode a stored value that was loaded whole (a queue item's, a job's), with the GIL
/// released as for [`decode_candidate`].
pub(crate) fn decode_stored(value: &StoredValue, pickle: bool) -> Decoded {
    match value {
        StoredValue::Int(_)
        | StoredValue::Float(_)
        | StoredValue::Str(_)
        | StoredValue::Bytes(_) => Decoded::Plain,
        StoredValue::Encoded(bytes) => {
            let value = decode_bytes(bytes);
            Python::attach(|py| {
                let built = match value {
                    Ok(v) => from_value(py, v, 0),
                    Err(m) => Err(crate::convert::corrupt(py, "value", &m)),
                };
                settle(py, built)
            })
        }
        StoredValue::Pickled(bytes) => Python::attach(|py| settle(py, unpickle(py, bytes, pickle))),
        StoredValue::File(handle) => Python::attach(|py| {
            settle(py, fetched_to_py(py, Fetched::File(handle.clone()), pickle))
        }),
        // Only `get_deferred` defers; queue and job reads load values whole.
        StoredValue::Deferred(_) => Python::attach(|py| {
            settle(
                py,
                Err(crate::convert::corrupt(
                    py,
                    "value",
                    "unexpected deferred value",
                )),
            )
        }),
    }
}

/// A decoded item as `pull`/`peek` return it: key, value, expire time, tag.
pub(crate) type Item<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Option<f64>,
    Option<diskcache_oxide_engine::Scalar>,
);

fn item<'py>(
    py: Python<'py>,
    key: Key,
    entry: Entry,
    value: Option<Py<PyAny>>,
    pickle: bool,
) -> PyResult<Item<'py>> {
    let key = key_to_py(py, key, pickle)?;
    let value = match value {
        Some(v) => v.into_bound(py),
        None => fetched_to_py(py, Fetched::from(entry.value), pickle)?,
    };
    Ok((key, value, entry.expire_time, entry.tag))
}

/// A decode problem reported under `on_decode_error='miss'`, logged once the engine returned.
struct Logged {
    key: Key,
    err: PyErr,
    removed: bool,
}

fn emit(py: Python<'_>, h: &Handle, lines: Vec<Logged>) -> PyResult<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let logger = pyobj::logger(py)?;
    for line in lines {
        let key = key_to_py(py, line.key, h.pickle)?;
        let message = line.err.value(py).str()?;
        let template = if line.removed {
            "removed damaged queue item %r from %s (on_decode_error='miss'): %s"
        } else {
            "left queue item %r in %s at the front of its queue: this process cannot read it \
             (on_decode_error='miss'): %s"
        };
        logger.call_method1(
            intern!(py, "warning"),
            (template, key, h.directory.as_str(), message),
        )?;
    }
    Ok(())
}

/// One pull's outcome: the items taken (with what the decision built), or the error to raise.
struct Pulled {
    items: Vec<(Key, Entry, Option<Py<PyAny>>)>,
    error: Option<PyErr>,
}

/// Pull up to `n` items; with `timeout`, wait while nothing could be taken.
///
/// The decode rules (spec and D-012): an item this process cannot read is left at the front
/// (`'raise'`: raised; `'miss'`: logged, nothing returned); a damaged one is removed (`'raise'`:
/// raised; `'miss'`: logged, and the pull moves on). Once a batch has taken items, a problem
/// item stops it without raising and stays at the front, so the items already taken are
/// returned (not lost) and the next call reports it.
pub(crate) fn pull<'py>(
    py: Python<'py>,
    h: &Handle,
    prefix: Option<&str>,
    side: Side,
    n: usize,
    timeout: Option<Duration>,
    retry: bool,
) -> PyResult<Vec<Item<'py>>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let cache = &*h.cache;
    let (pickle, miss) = (h.pickle, h.miss);
    let mut logs: Vec<Logged> = Vec::new();
    let mut logged_unreadable = false;
    let attempt = || -> Result<Option<Pulled>, Error> {
        let mut decoded: Vec<Option<Py<PyAny>>> = Vec::new();
        let mut error: Option<PyErr> = None;
        let mut lines: Vec<Logged> = Vec::new();
        let mut attempt = 0u32;
        let mut decide = |c: &Candidate| -> Verdict {
            if c.attempt != attempt {
                // The transaction was rolled back and is being run again (D-039): what the
                // earlier run decided is void.
                attempt = c.attempt;
                decoded.clear();
                lines.clear();
                error = None;
            }
            let first = decoded.is_empty();
            match decode_candidate(c, pickle) {
                Decoded::Plain => {
                    decoded.push(None);
                    Verdict::Take
                }
                Decoded::Ok(obj) => {
                    decoded.push(Some(obj));
                    Verdict::Take
                }
                Decoded::Damaged(err) if miss => {
                    lines.push(Logged {
                        key: c.key.clone(),
                        err,
                        removed: true,
                    });
                    Verdict::DropAndContinue
                }
                _ if !first => Verdict::Leave,
                Decoded::Damaged(err) => {
                    error = Some(err);
                    Verdict::DropAndStop
                }
                Decoded::Unreadable(err) if miss => {
                    // Logged once per call, however often a wait looks at it again.
                    if !logged_unreadable {
                        lines.push(Logged {
                            key: c.key.clone(),
                            err,
                            removed: false,
                        });
                    }
                    Verdict::Leave
                }
                Decoded::Unreadable(err) | Decoded::Failed(err) => {
                    error = Some(err);
                    Verdict::Leave
                }
            }
        };
        // On an engine error the transaction rolled back: what `decide` built is dropped.
        let taken = cache.queue(prefix).pull_many(side, n, &mut decide)?;
        logged_unreadable |= lines.iter().any(|line| !line.removed);
        logs.append(&mut lines);
        let done = !taken.is_empty() || error.is_some();
        let items = taken
            .into_iter()
            .zip(decoded)
            .map(|((k, e), v)| (k, e, v))
            .collect();
        Ok(done.then_some(Pulled { items, error }))
    };
    let pulled = wait_loop(py, cache, timeout, retry, attempt);
    emit(py, h, logs)?;
    let Some(pulled) = pulled? else {
        return Ok(Vec::new());
    };
    if let Some(err) = pulled.error {
        return Err(err);
    }
    pulled
        .items
        .into_iter()
        .map(|(k, e, v)| item(py, k, e, v, pickle))
        .collect()
}

/// The item at one end of the queue, left in place. Takes no write lock, except under
/// `'miss'` to remove damaged items at that end (then it looks again). Under `'raise'` a
/// damaged item is raised and left for the next pull to remove.
pub(crate) fn peek<'py>(
    py: Python<'py>,
    h: &Handle,
    prefix: Option<&str>,
    side: Side,
    retry: bool,
) -> PyResult<Option<Item<'py>>> {
    let cache = &*h.cache;
    let pickle = h.pickle;
    let mut stuck: Option<Key> = None;
    loop {
        let found = crate::core::run(py, retry, || cache.queue(prefix).peek(side))?;
        let Some(candidate) = found else {
            return Ok(None);
        };
        let decoded = py.detach(|| decode_candidate(&candidate, pickle));
        match decoded {
            Decoded::Plain | Decoded::Ok(_) => {
                let value = match decoded {
                    Decoded::Ok(obj) => Some(obj),
                    _ => None,
                };
                let entry = candidate.entry.map_err(|e| to_py(py, e))?;
                return item(py, candidate.key, entry, value, pickle).map(Some);
            }
            Decoded::Unreadable(err) if h.miss => {
                let line = Logged {
                    key: candidate.key,
                    err,
                    removed: false,
                };
                emit(py, h, vec![line])?;
                return Ok(None);
            }
            Decoded::Damaged(_) if h.miss && stuck.as_ref() != Some(&candidate.key) => {}
            Decoded::Damaged(err) | Decoded::Unreadable(err) | Decoded::Failed(err) => {
                return Err(err)
            }
        }
        // Remove the damaged items at this end under the write lock, deciding again there (the
        // front may have changed since the read).
        let lines = loop {
            let mut lines: Vec<Logged> = Vec::new();
            let result = py.detach(|| {
                let mut attempt = 0u32;
                let mut decide = |c: &Candidate| {
                    if c.attempt != attempt {
                        // Run again after a rollback (D-039): start the list over.
                        attempt = c.attempt;
                        lines.clear();
                    }
                    match decode_candidate(c, pickle) {
                        Decoded::Damaged(err) => {
                            lines.push(Logged {
                                key: c.key.clone(),
                                err,
                                removed: true,
                            });
                            Verdict::DropAndContinue
                        }
                        _ => Verdict::Leave,
                    }
                };
                cache
                    .queue(prefix)
                    .pull_many(side, 1, &mut decide)
                    .map(|_| ())
            });
            match result {
                Ok(()) => break lines,
                Err(Error::Timeout) if retry => py.check_signals()?,
                Err(e) => return Err(to_py(py, e)),
            }
        };
        let none_removed = lines.is_empty();
        emit(py, h, lines)?;
        // If nothing could be removed, a damaged item seen again is raised, not looped on.
        stuck = none_removed.then_some(candidate.key);
    }
}

/// `(key, value)`, with the expire time and tag beside it as the flags ask (as `get` does).
pub(crate) fn shape_item<'py>(
    py: Python<'py>,
    item: Item<'py>,
    want_expire: bool,
    want_tag: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let (key, value, expire, tag) = item;
    let pair = PyTuple::new(py, [key, value])?.into_any();
    let expire = float_or_none(py, expire)?;
    let tag = opt_scalar_to_py(py, tag)?;
    shape(py, pair, expire, tag, want_expire, want_tag)
}

/// All of a binary file's bytes, for `push(..., read=True)`.
pub(crate) fn read_whole_file<'py>(
    py: Python<'py>,
    file: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let not_a_file = |what: String| {
        PyTypeError::new_err(format!(
            "push(..., read=True) needs a binary file-like object whose read() returns bytes, \
             but {what}; open the file with 'rb', or push the bytes without read=True"
        ))
    };
    let type_name = |obj: &Bound<'py, PyAny>| {
        obj.get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    };
    let Ok(read) = file.getattr(intern!(py, "read")) else {
        return Err(not_a_file(format!("got {}", type_name(file))));
    };
    let data = read.call0()?;
    if let Ok(b) = data.cast::<PyBytes>() {
        return Ok(b.clone());
    }
    if let Ok(b) = data.cast::<PyByteArray>() {
        return Ok(PyBytes::new(py, &b.to_vec()));
    }
    Err(not_a_file(format!("read() returned {}", type_name(&data))))
}

// ---- the queue calls of CacheCore -------------------------------------------------------

#[pymethods]
impl CacheCore {
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
        let cache = &*h.cache;
        let prefix = prefix.0.as_deref();
        let key = if read.0 {
            // The engine streams set(..., read=True) into a value file (set_from_reader) but
            // has no push_from_reader: a pushed file is read into memory here and pushed as
            // bytes (which the engine still writes to a value file when it is large).
            let data = read_whole_file(py, value)?;
            let v = ValueRef::Bytes(data.as_bytes());
            run(py, retry.0, || {
                cache.queue(prefix).push(v, side.0, &options)
            })?
        } else {
            let prepared = prepare_value(py, value, &h.ctx())?;
            let v = prepared.as_ref();
            run(py, retry.0, || {
                cache.queue(prefix).push(v, side.0, &options)
            })?
        };
        key_to_py(py, key, h.pickle)
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
        let objs: Vec<Bound<'py, PyAny>> = values.try_iter()?.collect::<PyResult<_>>()?;
        let ctx = h.ctx();
        let prepared = objs
            .iter()
            .map(|v| prepare_value(py, v, &ctx))
            .collect::<PyResult<Vec<Prepared<'_, '_>>>>()?;
        let refs: Vec<ValueRef<'_>> = prepared.iter().map(Prepared::as_ref).collect();
        let cache = &*h.cache;
        let prefix = prefix.0.as_deref();
        let keys = run(py, retry.0, || {
            cache.queue(prefix).push_many(&refs, side.0, &options)
        })?;
        let out = PyList::empty(py);
        for key in keys {
            out.append(key_to_py(py, key, h.pickle)?)?;
        }
        Ok(out)
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
        let items = pull(py, h, prefix.0.as_deref(), side.0, 1, timeout.0, retry.0)?;
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
        let items = pull(py, h, prefix.0.as_deref(), side.0, n.0, timeout.0, retry.0)?;
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
        let cache = &*self.h()?.cache;
        let found = crate::core::run(py, true, || cache.queues())?;
        Ok(found
            .into_iter()
            .map(|q| (q.prefix, q.depth, q.oldest))
            .collect())
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
        match peek(py, h, prefix.0.as_deref(), side.0, retry.0)? {
            Some(item) => shape_item(py, item, expire_time.0, tag.0),
            None => {
                let default = default.resolve(py)?;
                shape_default(py, Some(&default), expire_time.0, tag.0)
            }
        }
    }
}
