//! The records of leased jobs (D-014, D-015): the `Job` a worker holds, which settles itself
//! (finish, fail, extend, release) through the engine handle it was taken by, and the
//! `JobInfo` records `JobsCore`'s reads return.

use crate::args::span;
use crate::convert::{fetched_to_py, Fetched};
use crate::decode::{decode_stored, Decoded};
use crate::errors::Exc;
use crate::run::{run, Shared};
use diskcache_oxide_engine::{Cache, JobInfo as Info, JobState, JobValueError, StoredValue};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyString};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What a failed attempt records: a str as it is, an exception as its repr.
fn error_text(error: &Bound<'_, PyAny>) -> PyResult<String> {
    if error.is_instance_of::<pyo3::exceptions::PyBaseException>() {
        return Ok(error.repr()?.to_string());
    }
    if let Ok(text) = error.cast::<PyString>() {
        return Ok(text.to_string());
    }
    Err(PyTypeError::new_err(format!(
        "error must be a str or an exception, not {}",
        error.get_type().name()?
    )))
}

pub(crate) fn state_name(state: JobState) -> &'static str {
    match state {
        JobState::Ready => "ready",
        JobState::Leased => "leased",
        JobState::Dead => "dead",
    }
}

/// A job's value that could not be loaded, as the exception reading it raises.
pub(crate) fn value_error(py: Python<'_>, e: &JobValueError) -> PyErr {
    match e {
        JobValueError::Corrupt(c) => Exc::CorruptValue.err(
            py,
            format!("corrupt value: {}", crate::errors::corruption_text(c)),
        ),
        JobValueError::Unreadable(_) => Exc::CacheError.err(py, e.to_string()),
        JobValueError::NotRead => PyValueError::new_err(
            "this JobInfo was listed with a preview, so its value was not read: read the \
             job by its id (JobQueue.get) for its value, or use its preview",
        ),
    }
}

/// Build a value that `decode_stored` found plain (an int, float, str or bytes).
pub(crate) fn plain(py: Python<'_>, value: StoredValue, pickle: bool) -> PyResult<Py<PyAny>> {
    Ok(fetched_to_py(py, Fetched::from(value), pickle)?.unbind())
}

// ---- Job -----------------------------------------------------------------------------------

/// A job a worker holds: one lease of one job, taken by `JobQueue.take`.
///
/// Read-only, except that `extend` moves `lease_deadline`. `attempts` counts the takes so
/// far, this one included (a `release` gives one back). The lease is fenced by a number that
/// every take raises and nothing lowers: `finish`, `fail`, `extend` and `release` act only
/// while this take still holds it. Once one of them has settled the job (or found the lease
/// lost), the others do nothing and report a lost lease.
///
/// As a context manager, the job is finished on a clean exit and failed (with the
/// exception's repr) when an `Exception` leaves the block, which is then re-raised; a
/// `KeyboardInterrupt`, `SystemExit` or other `BaseException` releases it instead (the worker
/// stopped; the job did not fail), without counting the attempt.
#[pyclass(frozen, module = "diskcache_oxide", name = "Job")]
pub(crate) struct Job {
    /// The job's lasting id.
    #[pyo3(get)]
    pub(crate) id: i64,
    /// The queue it was taken from.
    #[pyo3(get)]
    pub(crate) queue: String,
    /// The value it was put with.
    #[pyo3(get)]
    pub(crate) value: Py<PyAny>,
    /// Takes so far, this one included.
    #[pyo3(get)]
    pub(crate) attempts: u32,
    /// Takes after which a failure sends it to the dead-letter list (0: no limit).
    #[pyo3(get)]
    pub(crate) max_attempts: u32,
    /// Seconds since the epoch, as f64 bits: `extend` moves it.
    pub(crate) deadline: AtomicU64,
    /// When it was put, in seconds since the epoch.
    #[pyo3(get)]
    pub(crate) created: f64,
    /// Why the previous attempt failed, if it did.
    #[pyo3(get)]
    pub(crate) error: Option<String>,
    /// This take's lease number (the fencing token).
    pub(crate) lease: i64,
    /// The queue's lease length, for `extend()` without an argument.
    pub(crate) default_lease: f64,
    pub(crate) settled: AtomicBool,
    /// The engine handle it was taken through.
    pub(crate) cache: Shared,
}

impl Job {
    fn settle<T>(
        &self,
        py: Python<'_>,
        lost: T,
        call: impl Fn(&Cache) -> Result<T, diskcache_oxide_engine::Error> + Sync,
    ) -> PyResult<T>
    where
        T: Send,
    {
        if self.settled.load(Ordering::Acquire) {
            return Ok(lost);
        }
        let cache = &*self.cache;
        let result = run(py, false, || call(cache))?;
        self.settled.store(true, Ordering::Release);
        Ok(result)
    }
}

#[pymethods]
impl Job {
    /// When the lease ends unless extended, in seconds since the epoch.
    #[getter]
    fn lease_deadline(&self) -> f64 {
        f64::from_bits(self.deadline.load(Ordering::Acquire))
    }

    /// This take's lease number: the fencing token `finish`, `fail`, `extend` and `release`
    /// pass to the engine.
    #[getter]
    fn _lease(&self) -> i64 {
        self.lease
    }

    /// Whether this take has settled the job (or found its lease lost).
    #[getter]
    fn _settled(&self) -> bool {
        self.settled.load(Ordering::Acquire)
    }

    /// Done: delete the job. False if the lease was lost (it expired and the job was taken
    /// again, or the job was already settled).
    fn finish(&self, py: Python<'_>) -> PyResult<bool> {
        let (id, lease) = (self.id, self.lease);
        self.settle(py, false, |c| c.jobs().finish(id, lease))
    }

    /// This attempt failed; `error` (a str, or an exception, stored as its repr) is kept with
    /// the job. Returns `'ready'` if it will be retried after `retry_in` seconds, `'dead'` if
    /// it used its attempts and went to the dead-letter list, None if the lease was lost.
    #[pyo3(signature = (error = None, retry_in = None), text_signature = "(self, error='', retry_in=0.0)")]
    fn fail(
        &self,
        py: Python<'_>,
        error: Option<&Bound<'_, PyAny>>,
        retry_in: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<&'static str>> {
        let text = error.map(error_text).transpose()?.unwrap_or_default();
        let delay = retry_in.map(|r| span("retry_in", r)).transpose()?;
        let (id, lease) = (self.id, self.lease);
        let state = self.settle(py, None, |c| {
            c.jobs().fail(id, lease, &text, delay.unwrap_or(0.0))
        })?;
        Ok(state.map(state_name))
    }

    /// Heartbeat: the lease now ends `lease` seconds from now (default: the queue's lease);
    /// updates `lease_deadline`. False if the lease was lost.
    #[pyo3(signature = (lease = None))]
    fn extend(&self, py: Python<'_>, lease: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        let length = match lease {
            Some(l) if !l.is_none() => span("lease", l)?,
            _ => self.default_lease,
        };
        if self.settled.load(Ordering::Acquire) {
            return Ok(false);
        }
        let cache = &*self.cache;
        let (id, token) = (self.id, self.lease);
        match run(py, false, || cache.jobs().extend(id, token, length))? {
            Some(deadline) => {
                self.deadline.store(deadline.to_bits(), Ordering::Release);
                Ok(true)
            }
            None => {
                self.settled.store(true, Ordering::Release);
                Ok(false)
            }
        }
    }

    /// Give the job back, ready again after `delay` seconds; the attempt is not counted.
    /// False if the lease was lost.
    #[pyo3(signature = (delay = None), text_signature = "(self, delay=0.0)")]
    fn release(&self, py: Python<'_>, delay: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        let seconds = delay.map(|d| span("delay", d)).transpose()?.unwrap_or(0.0);
        let (id, lease) = (self.id, self.lease);
        self.settle(py, false, |c| c.jobs().release(id, lease, seconds))
    }

    /// The job itself: `with job:` finishes, fails or releases it at the end of the block.
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Finish on a clean exit, fail on an `Exception` (re-raised), release on any other
    /// `BaseException`; nothing if the job was settled inside the block.
    #[pyo3(signature = (_exc_type, exc, _traceback))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        exc: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        if self.settled.load(Ordering::Acquire) {
            return Ok(false);
        }
        if exc.is_none() {
            self.finish(py)?;
        } else if exc.is_instance_of::<pyo3::exceptions::PyException>() {
            self.fail(py, Some(exc), None)?;
        } else {
            self.release(py, None)?;
        }
        Ok(false)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<Job>()
            .is_ok_and(|o| (o.get().id, o.get().lease) == (self.id, self.lease))
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (self.id, self.lease).hash(&mut h);
        h.finish()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let r = |v: Py<PyAny>| -> PyResult<String> { Ok(v.bind(py).repr()?.to_string()) };
        Ok(format!(
            "Job(id={}, queue={}, value={}, attempts={}, max_attempts={}, lease_deadline={}, \
             created={}, error={})",
            self.id,
            r(self.queue.clone().into_pyobject(py)?.into_any().unbind())?,
            r(self.value.clone_ref(py))?,
            self.attempts,
            self.max_attempts,
            r(PyFloat::new(py, self.lease_deadline()).into_any().unbind())?,
            r(PyFloat::new(py, self.created).into_any().unbind())?,
            r(self.error.clone().into_pyobject(py)?.into_any().unbind())?,
        ))
    }
}

// ---- JobInfo -------------------------------------------------------------------------------

/// A job as `JobQueue.get` and `JobQueue.dead` report it (read-only).
///
/// `due` is, for a ready job, when it may be taken; for a leased one, its lease deadline;
/// for a dead one, when it died. Reading `value` raises the `DecodeError` if this process
/// cannot decode it (the other fields stay readable, so such a job can still be listed,
/// requeued or deleted).
#[pyclass(frozen, module = "diskcache_oxide", name = "JobInfo")]
pub(crate) struct JobInfo {
    /// The job's lasting id.
    #[pyo3(get)]
    pub(crate) id: i64,
    /// Its queue.
    #[pyo3(get)]
    pub(crate) queue: String,
    /// `'ready'`, `'leased'` or `'dead'`.
    #[pyo3(get)]
    pub(crate) state: &'static str,
    /// Ready: when it may be taken; leased: the lease deadline; dead: when it died.
    #[pyo3(get)]
    pub(crate) due: f64,
    /// Takes so far.
    #[pyo3(get)]
    pub(crate) attempts: u32,
    /// Takes after which a failure sends it to the dead-letter list (0: no limit).
    #[pyo3(get)]
    pub(crate) max_attempts: u32,
    /// When it was put.
    #[pyo3(get)]
    pub(crate) created: f64,
    /// Why its last attempt failed, if it did.
    #[pyo3(get)]
    pub(crate) error: Option<String>,
    /// Its unique key, if it was put with one.
    #[pyo3(get)]
    pub(crate) unique: Option<String>,
    /// For a leased job as `JobQueue.list` reports it: when its current lease was taken
    /// (seconds since the epoch); otherwise None.
    #[pyo3(get)]
    pub(crate) taken: Option<f64>,
    /// For a job listed with a preview (the operator's tools, D-046): a short repr-like text
    /// of its value, built without reading it whole or decoding it; otherwise None.
    #[pyo3(get)]
    pub(crate) preview: Option<String>,
    /// The decoded value, or the exception decoding it raised.
    pub(crate) value: Result<Py<PyAny>, Py<PyAny>>,
}

impl JobInfo {
    /// The record of `info`, its value decoded (GIL held).
    pub(crate) fn from_engine(py: Python<'_>, info: Info, pickle: bool) -> JobInfo {
        let value = match info.value {
            Ok(stored) => match decode_stored(&stored, pickle) {
                Decoded::Plain => plain(py, stored, pickle),
                Decoded::Ok(obj) => Ok(obj),
                Decoded::Damaged(e) | Decoded::Unreadable(e) | Decoded::Failed(e) => Err(e),
            },
            Err(e) => Err(value_error(py, &e)),
        };
        JobInfo {
            id: info.id,
            queue: info.queue,
            state: state_name(info.state),
            due: info.due,
            attempts: info.attempts,
            max_attempts: info.max_attempts,
            created: info.created,
            error: info.error,
            unique: info.unique,
            taken: None,
            preview: None,
            value: value.map_err(|e| e.into_value(py).into_any()),
        }
    }
}

#[pymethods]
impl JobInfo {
    /// The job's value; raises the decode error if this process cannot read it.
    #[getter]
    fn value(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match &self.value {
            Ok(v) => Ok(v.clone_ref(py)),
            Err(e) => Err(PyErr::from_value(e.bind(py).clone())),
        }
    }

    fn __eq__(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        let Ok(other) = other.cast::<JobInfo>() else {
            return Ok(false);
        };
        let o = other.get();
        let same = (
            self.id,
            &self.queue,
            self.state,
            self.attempts,
            self.max_attempts,
        ) == (o.id, &o.queue, o.state, o.attempts, o.max_attempts)
            && (self.due, self.created) == (o.due, o.created)
            && (&self.error, &self.unique) == (&o.error, &o.unique);
        Ok(same
            && match (&self.value, &o.value) {
                (Ok(a), Ok(b)) => a.bind(py).eq(b.bind(py))?,
                (Err(a), Err(b)) => a.is(b),
                _ => false,
            })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let r = |v: Bound<'_, PyAny>| -> PyResult<String> { Ok(v.repr()?.to_string()) };
        let value = match (&self.value, &self.preview) {
            (Ok(v), _) => r(v.bind(py).clone())?,
            (Err(_), Some(text)) => format!("<not read; preview: {text}>"),
            (Err(e), None) => format!("<unreadable: {}>", e.bind(py).get_type().name()?),
        };
        Ok(format!(
            "JobInfo(id={}, queue={}, state={}, due={}, attempts={}, max_attempts={}, \
             created={}, error={}, unique={}, value={value})",
            self.id,
            r(self.queue.clone().into_pyobject(py)?.into_any())?,
            r(self.state.into_pyobject(py)?.into_any())?,
            r(PyFloat::new(py, self.due).into_any())?,
            self.attempts,
            self.max_attempts,
            r(PyFloat::new(py, self.created).into_any())?,
            r(self.error.clone().into_pyobject(py)?.into_any())?,
            r(self.unique.clone().into_pyobject(py)?.into_any())?,
        ))
    }
}
