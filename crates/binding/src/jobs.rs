//! Leased jobs (D-014, D-015): the `Job` a worker holds and the `JobInfo` records, as Rust
//! classes, and the calls behind `diskcache_oxide.JobQueue`.
//!
//! `JobQueue` (`diskcache_oxide/jobs.py`) checks its own arguments and names the queues; what
//! happens to a job is decided here and in the engine's `Jobs`: a take decodes each job's
//! value inside the take's transaction and, for one this process cannot decode, leaves it
//! ready (another process may read it) or buries it (no build can), in that same transaction.
//! A `Job` settles itself (finish, fail, extend, release) through the handle it was taken by.
//! Every engine call runs with the GIL released; safe-format bytes are decoded there too.

use crate::convert::{fetched_to_py, prepare_value, Fetched, Prepared};
use crate::core::CacheCore;
use crate::core::{run, Handle};
use crate::errors::Exc;
use crate::queue::{classify, decode_stored, wait_loop, CountArg, Decoded, WaitArg};
use diskcache_oxide_engine::value::PREVIEW_MAX_WIDTH;
use diskcache_oxide_engine::{
    pass_delay, JobInfo as Info, JobOptions, JobState, JobValueError, ListState, ListValues,
    StoredValue, TakeVerdict, ValueRef,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyString};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

// ---- arguments -----------------------------------------------------------------------------

/// A number of seconds >= 0, as `JobQueue` checks them (the same messages).
fn seconds(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<f64> {
    let number = !obj.is_instance_of::<PyBool>()
        && (obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyFloat>());
    if !number {
        return Err(PyTypeError::new_err(format!(
            "{name} must be a number of seconds, not {}",
            obj.get_type().name()?
        )));
    }
    let value: f64 = obj.extract()?;
    if !value.is_finite() || value < 0.0 {
        return Err(PyValueError::new_err(format!(
            "{name} must be a finite number of seconds >= 0, not {}",
            obj.repr()?
        )));
    }
    Ok(value)
}

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

fn state_name(state: JobState) -> &'static str {
    match state {
        JobState::Ready => "ready",
        JobState::Leased => "leased",
        JobState::Dead => "dead",
    }
}

/// A job's value that could not be loaded, as the exception reading it raises.
fn value_error(py: Python<'_>, e: &JobValueError) -> PyErr {
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

/// A preview's width from Python: None, or 1 to the engine's widest.
pub(crate) fn preview_width(width: Option<i64>) -> PyResult<Option<usize>> {
    match width {
        None => Ok(None),
        Some(w) if (1..=PREVIEW_MAX_WIDTH as i64).contains(&w) => Ok(Some(w as usize)),
        Some(w) => Err(PyValueError::new_err(format!(
            "preview: a width of 1 to {PREVIEW_MAX_WIDTH} characters, or None, not {w}"
        ))),
    }
}

/// Build a value that `decode_stored` found plain (an int, float, str or bytes).
fn plain(py: Python<'_>, value: StoredValue, pickle: bool) -> PyResult<Py<PyAny>> {
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
    id: i64,
    /// The queue it was taken from.
    #[pyo3(get)]
    queue: String,
    /// The value it was put with.
    #[pyo3(get)]
    value: Py<PyAny>,
    /// Takes so far, this one included.
    #[pyo3(get)]
    attempts: u32,
    /// Takes after which a failure sends it to the dead-letter list (0: no limit).
    #[pyo3(get)]
    max_attempts: u32,
    /// Seconds since the epoch, as f64 bits: `extend` moves it.
    deadline: AtomicU64,
    /// When it was put, in seconds since the epoch.
    #[pyo3(get)]
    created: f64,
    /// Why the previous attempt failed, if it did.
    #[pyo3(get)]
    error: Option<String>,
    /// This take's lease number (the fencing token).
    lease: i64,
    /// The queue's lease length, for `extend()` without an argument.
    default_lease: f64,
    settled: AtomicBool,
    core: Py<CacheCore>,
}

impl Job {
    fn settle<T>(
        &self,
        py: Python<'_>,
        lost: T,
        call: impl Fn(&Handle) -> Result<T, diskcache_oxide_engine::Error> + Sync,
    ) -> PyResult<T>
    where
        T: Send,
    {
        if self.settled.load(Ordering::Acquire) {
            return Ok(lost);
        }
        let h = self.core.get().h()?;
        let result = run(py, false, || call(h))?;
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
        self.settle(py, false, |h| h.cache.jobs().finish(id, lease))
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
        let delay = retry_in.map(|r| seconds("retry_in", r)).transpose()?;
        let (id, lease) = (self.id, self.lease);
        let state = self.settle(py, None, |h| {
            h.cache.jobs().fail(id, lease, &text, delay.unwrap_or(0.0))
        })?;
        Ok(state.map(state_name))
    }

    /// Heartbeat: the lease now ends `lease` seconds from now (default: the queue's lease);
    /// updates `lease_deadline`. False if the lease was lost.
    #[pyo3(signature = (lease = None))]
    fn extend(&self, py: Python<'_>, lease: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        let length = match lease {
            Some(l) if !l.is_none() => seconds("lease", l)?,
            _ => self.default_lease,
        };
        if self.settled.load(Ordering::Acquire) {
            return Ok(false);
        }
        let h = self.core.get().h()?;
        let (id, token) = (self.id, self.lease);
        match run(py, false, || h.cache.jobs().extend(id, token, length))? {
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
        let seconds = delay
            .map(|d| seconds("delay", d))
            .transpose()?
            .unwrap_or(0.0);
        let (id, lease) = (self.id, self.lease);
        self.settle(py, false, |h| h.cache.jobs().release(id, lease, seconds))
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
    id: i64,
    /// Its queue.
    #[pyo3(get)]
    queue: String,
    /// `'ready'`, `'leased'` or `'dead'`.
    #[pyo3(get)]
    state: &'static str,
    /// Ready: when it may be taken; leased: the lease deadline; dead: when it died.
    #[pyo3(get)]
    due: f64,
    /// Takes so far.
    #[pyo3(get)]
    attempts: u32,
    /// Takes after which a failure sends it to the dead-letter list (0: no limit).
    #[pyo3(get)]
    max_attempts: u32,
    /// When it was put.
    #[pyo3(get)]
    created: f64,
    /// Why its last attempt failed, if it did.
    #[pyo3(get)]
    error: Option<String>,
    /// Its unique key, if it was put with one.
    #[pyo3(get)]
    unique: Option<String>,
    /// For a leased job as `JobQueue.list` reports it: when its current lease was taken
    /// (seconds since the epoch); otherwise None.
    #[pyo3(get)]
    taken: Option<f64>,
    /// For a job listed with a preview (the operator's tools, D-046): a short repr-like text
    /// of its value, built without reading it whole or decoding it; otherwise None.
    #[pyo3(get)]
    preview: Option<String>,
    /// The decoded value, or the exception decoding it raised.
    value: Result<Py<PyAny>, Py<PyAny>>,
}

impl JobInfo {
    /// The record of `info`, its value decoded (GIL held).
    fn from_engine(py: Python<'_>, info: Info, pickle: bool) -> JobInfo {
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

// ---- the calls -----------------------------------------------------------------------------

fn put(
    py: Python<'_>,
    h: &Handle,
    queue: &str,
    value: &Bound<'_, PyAny>,
    options: JobOptions,
) -> PyResult<i64> {
    let prepared = prepare_value(py, value, &h.ctx())?;
    let v = prepared.as_ref();
    let cache = &*h.cache;
    run(py, false, || {
        cache.jobs().put(queue, v, &options).map(|p| p.id())
    })
}

fn put_many(
    py: Python<'_>,
    h: &Handle,
    queue: &str,
    values: &Bound<'_, PyAny>,
    options: JobOptions,
) -> PyResult<Vec<i64>> {
    let objs: Vec<Bound<'_, PyAny>> = values.try_iter()?.collect::<PyResult<_>>()?;
    let ctx = h.ctx();
    let prepared = objs
        .iter()
        .map(|v| prepare_value(py, v, &ctx))
        .collect::<PyResult<Vec<Prepared<'_, '_>>>>()?;
    let refs: Vec<ValueRef<'_>> = prepared.iter().map(Prepared::as_ref).collect();
    let cache = &*h.cache;
    run(py, false, || cache.jobs().put_many(queue, &refs, &options))
}

/// What a take did with a job it could not take, as it is logged.
enum Refusal {
    /// Passed over (D-047): ready again after `delay` seconds, or dead if `dead`.
    Passed { delay: f64, dead: bool },
    /// A damaged value, moved to the dead-letter list.
    Buried,
}

/// Why a job offered to a take was not taken: the error to log, its cause the decode error.
fn refused(py: Python<'_>, id: i64, queue: &str, problem: PyErr, how: Refusal) -> PyErr {
    let text = match how {
        Refusal::Buried => format!(
            "job {id} of queue {queue:?} has a damaged value that no build can read; it was \
             moved to the dead-letter list, where dead() lists it and delete() removes it"
        ),
        Refusal::Passed { dead: true, .. } => format!(
            "job {id} of queue {queue:?} cannot be decoded by this process ({}); it has used its \
             attempts and went to the dead-letter list: run a worker that can read it (the \
             right pickle= setting, its type registered) and requeue it with retry()",
            describe(py, &problem)
        ),
        Refusal::Passed { delay, dead: false } => format!(
            "job {id} of queue {queue:?} cannot be decoded by this process ({}); it was passed \
             over and is offered again in {delay:.0} s, to a worker that can read it",
            describe(py, &problem)
        ),
    };
    let exc = match how {
        Refusal::Buried => Exc::CorruptValue,
        Refusal::Passed { .. } => Exc::DecodeError,
    };
    let err = exc.err(py, text);
    err.set_cause(py, Some(problem));
    err
}

/// `Type: message` of an exception, at most 300 characters (it is stored with the job).
fn describe(py: Python<'_>, err: &PyErr) -> String {
    let kind = err
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let message = err
        .value(py)
        .str()
        .map(|s| s.to_string())
        .unwrap_or_default();
    let mut text = format!("{kind}: {message}");
    if text.chars().count() > 300 {
        text = text.chars().take(299).collect::<String>() + "…";
    }
    text
}

/// What a take's transaction decided, per job offered.
#[derive(Default)]
struct Decided {
    /// The values decoded inside the transaction, one per taken job (None: plain, built after).
    values: Vec<Option<Py<PyAny>>>,
    /// Jobs it could not take: id, queue, the decode error, and what it did with the job.
    refused: Vec<(i64, String, PyErr, Refusal)>,
}

#[pymethods]
impl CacheCore {
    #[pyo3(signature = (queue, value, delay, unique, max_attempts))]
    fn _job_put(
        &self,
        py: Python<'_>,
        queue: &str,
        value: &Bound<'_, PyAny>,
        delay: f64,
        unique: Option<String>,
        max_attempts: u32,
    ) -> PyResult<i64> {
        let options = JobOptions {
            delay,
            unique,
            max_attempts,
        };
        put(py, self.h()?, queue, value, options)
    }

    #[pyo3(signature = (queue, values, delay, max_attempts))]
    fn _job_put_many(
        &self,
        py: Python<'_>,
        queue: &str,
        values: &Bound<'_, PyAny>,
        delay: f64,
        max_attempts: u32,
    ) -> PyResult<Vec<i64>> {
        let options = JobOptions {
            delay,
            unique: None,
            max_attempts,
        };
        put_many(py, self.h()?, queue, values, options)
    }

    /// Lease up to `n` jobs of `queues` (priority order) for `lease` seconds; with `timeout`,
    /// wait while none is due. Returns `(jobs, errors)`: the `Job`s taken, and, to be logged,
    /// the errors of the jobs this process could not decode, which the take passed over (an
    /// unsafe value, an unregistered type or a decoder that raised: `DecodeError`; another
    /// process may read it, D-047) or buried (a damaged value: `CorruptValueError`) on its way
    /// to the jobs behind them.
    #[pyo3(signature = (queues, lease, n, timeout=WaitArg(None), default_lease=None), text_signature = "(self, queues, lease, n, timeout=None, default_lease=None)")]
    fn _job_take<'py>(
        slf: &Bound<'py, Self>,
        queues: Vec<String>,
        lease: f64,
        n: CountArg,
        timeout: WaitArg,
        default_lease: Option<f64>,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
        let py = slf.py();
        let h = slf.get().h()?;
        let (jobs_out, errors_out) = (PyList::empty(py), PyList::empty(py));
        if n.0 == 0 {
            return Ok((jobs_out, errors_out));
        }
        let cache = &*h.cache;
        let pickle = h.pickle;
        let names: Vec<&str> = queues.iter().map(String::as_str).collect();
        let pid = std::process::id();
        // What every attempt of a waiting take passed over or buried, to report at the end.
        let mut refusals = Vec::new();
        let attempt = || {
            let mut decided = Decided::default();
            let mut decide = |job: &diskcache_oxide_engine::Job| -> TakeVerdict {
                let outcome = match &job.value {
                    Ok(stored) => decode_stored(stored, pickle),
                    Err(e) => Python::attach(|py| classify(py, value_error(py, e))),
                };
                match outcome {
                    Decoded::Plain => {
                        decided.values.push(None);
                        TakeVerdict::Take
                    }
                    Decoded::Ok(obj) => {
                        decided.values.push(Some(obj));
                        TakeVerdict::Take
                    }
                    Decoded::Damaged(err) => {
                        let text = Python::attach(|py| describe(py, &err));
                        decided
                            .refused
                            .push((job.id, job.queue.clone(), err, Refusal::Buried));
                        TakeVerdict::Bury(format!("damaged value: {text}"))
                    }
                    Decoded::Unreadable(err) | Decoded::Failed(err) => {
                        // Another worker may read it: pass it over, and say which process
                        // could not and why, where an operator looks (JobQueue.get, jobs ls).
                        let text = Python::attach(|py| describe(py, &err));
                        let dead = job.max_attempts > 0 && job.attempts >= job.max_attempts;
                        let delay = pass_delay(job.attempts, lease);
                        decided.refused.push((
                            job.id,
                            job.queue.clone(),
                            err,
                            Refusal::Passed { delay, dead },
                        ));
                        TakeVerdict::Pass(format!(
                            "passed over by a worker that cannot decode it (pid {pid}): {text}"
                        ))
                    }
                }
            };
            // A take that stopped after its share of passes is made again at once: each pass
            // moved a job out of the due ones, so this ends, and the jobs behind are reached.
            let taken = loop {
                let got = cache
                    .jobs()
                    .take_deciding(&names, lease, n.0, &mut decide)?;
                if !got.jobs.is_empty() || !got.more {
                    break got.jobs;
                }
            };
            refusals.append(&mut decided.refused);
            // Only a job taken ends a wait: one passed over is no reason to stop waiting.
            Ok((!taken.is_empty()).then_some((taken, decided.values)))
        };
        let found = wait_loop(py, cache, timeout.0, false, attempt)?;
        for (id, queue, problem, how) in refusals {
            errors_out.append(refused(py, id, &queue, problem, how).into_value(py))?;
        }
        let Some((taken, values)) = found else {
            return Ok((jobs_out, errors_out));
        };
        let core: Py<CacheCore> = slf.clone().unbind();
        for (job, decoded) in taken.into_iter().zip(values) {
            let value = match (decoded, job.value) {
                (Some(obj), _) => obj,
                (None, Ok(stored)) => plain(py, stored, pickle)?,
                (None, Err(e)) => return Err(value_error(py, &e)),
            };
            let held = Job {
                id: job.id,
                queue: job.queue,
                value,
                attempts: job.attempts,
                max_attempts: job.max_attempts,
                deadline: AtomicU64::new(job.lease_deadline.to_bits()),
                created: job.created,
                error: job.error,
                lease: job.lease,
                default_lease: default_lease.unwrap_or(lease),
                settled: AtomicBool::new(false),
                core: core.clone_ref(py),
            };
            jobs_out.append(Py::new(py, held)?)?;
        }
        Ok((jobs_out, errors_out))
    }

    #[pyo3(signature = (queue=None))]
    fn _job_sweep(&self, py: Python<'_>, queue: Option<&str>) -> PyResult<(u64, u64)> {
        let cache = &*self.h()?.cache;
        let swept = run(py, false, || cache.jobs().sweep(queue))?;
        Ok((swept.requeued, swept.dead))
    }

    fn _job_counts(&self, py: Python<'_>, queue: &str) -> PyResult<(u64, u64, u64, u64)> {
        let cache = &*self.h()?.cache;
        let c = run(py, false, || cache.jobs().counts(queue))?;
        Ok((c.ready, c.scheduled, c.leased, c.dead))
    }

    /// The `JobInfo` of job `id`, or None.
    fn _job_info(&self, py: Python<'_>, id: i64) -> PyResult<Option<JobInfo>> {
        let h = self.h()?;
        let cache = &*h.cache;
        let found = run(py, false, || cache.jobs().info(id))?;
        Ok(found.map(|info| JobInfo::from_engine(py, info, h.pickle)))
    }

    /// Up to `limit` dead jobs of `queue` after id `after`, as `JobInfo`s.
    fn _job_dead(
        &self,
        py: Python<'_>,
        queue: &str,
        after: i64,
        limit: usize,
    ) -> PyResult<Vec<JobInfo>> {
        let h = self.h()?;
        let cache = &*h.cache;
        let rows = run(py, false, || cache.jobs().dead(queue, after, limit))?;
        Ok(rows
            .into_iter()
            .map(|info| JobInfo::from_engine(py, info, h.pickle))
            .collect())
    }

    /// The names of the queues that hold jobs, sorted.
    fn _job_queues(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.jobs().queues())
    }

    /// Up to `limit` jobs of `queue` after id `after`, in `state` (`'ready'`, `'leased'`,
    /// `'dead'`, or None for all), as `JobInfo`s with `taken` set for leased ones.
    /// A queue's jobs for an operator (D-046): in `state` (`'ready'`: ready and due now;
    /// `'scheduled'`: ready, due later; `'leased'`; `'dead'`; None: all), by id after
    /// `after`, at most `limit`, the state chosen in SQL. With `preview=WIDTH` each value is
    /// left unread and the JobInfo carries a preview at most WIDTH characters wide instead
    /// (its `value` then raises `ValueError`).
    #[pyo3(signature = (queue, state=None, after=0, limit=100, preview=None))]
    fn _job_list(
        &self,
        py: Python<'_>,
        queue: &str,
        state: Option<&str>,
        after: i64,
        limit: usize,
        preview: Option<i64>,
    ) -> PyResult<Vec<JobInfo>> {
        let state = match state {
            None => None,
            Some("ready") => Some(ListState::Ready),
            Some("scheduled") => Some(ListState::Scheduled),
            Some("leased") => Some(ListState::Leased),
            Some("dead") => Some(ListState::Dead),
            Some(other) => {
                return Err(PyValueError::new_err(format!(
                    "state must be 'ready', 'scheduled', 'leased', 'dead' or None, not {other:?}"
                )))
            }
        };
        let values = match preview_width(preview)? {
            Some(width) => ListValues::Preview(width),
            None => ListValues::Load,
        };
        let h = self.h()?;
        let cache = &*h.cache;
        let rows = run(py, false, || {
            cache.jobs().list(queue, state, after, limit, values)
        })?;
        Ok(rows
            .into_iter()
            .map(|listed| {
                let mut info = JobInfo::from_engine(py, listed.info, h.pickle);
                info.taken = listed.taken;
                info.preview = listed.preview;
                info
            })
            .collect())
    }

    /// Send a ready or leased job to the dead-letter list with `error`, whoever holds it.
    fn _job_bury_any(&self, py: Python<'_>, id: i64, error: &str) -> PyResult<bool> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.jobs().bury_any(id, error))
    }

    /// Delete every dead job of `queue`; how many there were.
    fn _job_purge_dead(&self, py: Python<'_>, queue: &str) -> PyResult<u64> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.jobs().purge_dead(queue))
    }

    fn _job_requeue(&self, py: Python<'_>, id: i64, delay: f64) -> PyResult<bool> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.jobs().requeue(id, delay))
    }

    fn _job_delete(&self, py: Python<'_>, id: i64) -> PyResult<bool> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.jobs().delete(id))
    }
}
