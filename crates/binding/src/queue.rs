//! The queue operations behind `CacheCore`'s queue calls (push, pull, peek and their
//! batches, `_queues`).
//!
//! `pull` decides about each item inside the engine's write transaction (D-012): the decision
//! callback runs with the GIL released, re-attaches to decode the item, and keeps the Python
//! object it built in the callback's state, so that the item is deleted only once this process
//! has read it. Items of the plain types (int, float, str, bytes) cannot fail to decode and are
//! converted after the engine returns. Waiting (D-013) happens with the GIL released, in slices
//! so that Ctrl-C is noticed (`run::wait_loop`).

use crate::convert::{fetched_to_py, key_to_py, prepare_value, Fetched, Prepared};
use crate::decode::{decode_candidate, Decoded};
use crate::errors::to_py;
use crate::handle::Handle;
use crate::pyobj;
use crate::run::{run, wait_loop};
use crate::shape::Item;
use diskcache_oxide_engine::{Candidate, Entry, Error, Key, Side, Verdict};
use diskcache_oxide_engine::{ValueRef, WriteOptions};
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList};
use std::time::Duration;

/// `(prefix, depth, oldest push)`, as `_queues` reports a queue.
pub(crate) type QueueRow = (Option<String>, u64, Option<f64>);

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
        let found = run(py, retry, || cache.queue(prefix).peek(side))?;
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

/// Push `value` (with `read`, a binary file's bytes) onto the queue `prefix`; its key.
#[allow(clippy::too_many_arguments)]
pub(crate) fn push<'py>(
    py: Python<'py>,
    h: &Handle,
    value: &Bound<'py, PyAny>,
    prefix: Option<&str>,
    side: Side,
    options: WriteOptions,
    read: bool,
    retry: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let cache = &*h.cache;
    let key = if read {
        // The engine streams set(..., read=True) into a value file (set_from_reader) but
        // has no push_from_reader: a pushed file is read into memory here and pushed as
        // bytes (which the engine still writes to a value file when it is large).
        let data = read_whole_file(py, value)?;
        let v = ValueRef::Bytes(data.as_bytes());
        run(py, retry, || cache.queue(prefix).push(v, side, &options))?
    } else {
        let prepared = prepare_value(py, value, &h.ctx())?;
        let v = prepared.as_ref();
        run(py, retry, || cache.queue(prefix).push(v, side, &options))?
    };
    key_to_py(py, key, h.pickle)
}

/// Push several values in one transaction, in order; their keys.
pub(crate) fn push_many<'py>(
    py: Python<'py>,
    h: &Handle,
    values: &Bound<'py, PyAny>,
    prefix: Option<&str>,
    side: Side,
    options: WriteOptions,
    retry: bool,
) -> PyResult<Bound<'py, PyList>> {
    let objs: Vec<Bound<'py, PyAny>> = values.try_iter()?.collect::<PyResult<_>>()?;
    let ctx = h.ctx();
    let prepared = objs
        .iter()
        .map(|v| prepare_value(py, v, &ctx))
        .collect::<PyResult<Vec<Prepared<'_, '_>>>>()?;
    let refs: Vec<ValueRef<'_>> = prepared.iter().map(Prepared::as_ref).collect();
    let cache = &*h.cache;
    let keys = run(py, retry, || {
        cache.queue(prefix).push_many(&refs, side, &options)
    })?;
    let out = PyList::empty(py);
    for key in keys {
        out.append(key_to_py(py, key, h.pickle)?)?;
    }
    Ok(out)
}

/// Every queue in the keys, as `(prefix, depth, oldest)`.
pub(crate) fn queues(py: Python<'_>, h: &Handle) -> PyResult<Vec<QueueRow>> {
    let cache = &*h.cache;
    let found = run(py, true, || cache.queues())?;
    Ok(found
        .into_iter()
        .map(|q| (q.prefix, q.depth, q.oldest))
        .collect())
}
