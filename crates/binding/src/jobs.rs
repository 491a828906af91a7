//! `JobsCore`, the binding's handle on the engine's `Cache::jobs()`: the calls behind
//! `diskcache_oxide.JobQueue` (put, take, and the reads and repairs an operator makes).
//! `CacheCore._jobs` gives it out; every `Job` it takes settles itself through the same
//! engine handle (`job.rs`).
//!
//! `JobQueue` (`diskcache_oxide/jobs.py`) checks its own arguments and names the queues; what
//! happens to a job is decided here and in the engine's `Jobs`: a take decodes each job's
//! value inside the take's transaction and, for one this process cannot decode, leaves it
//! ready (another process may read it) or buries it (no build can), in that same transaction.
//! Every engine call runs with the GIL released; safe-format bytes are decoded there too.

use crate::args::{preview_width, CountArg, WaitArg};
use crate::convert::{prepare_value, Ctx, Prepared};
use crate::decode::{classify, decode_stored, Decoded};
use crate::errors::Exc;
use crate::job::{plain, value_error, Job, JobInfo};
use crate::run::{run, wait_loop, Shared};
use diskcache_oxide_engine::{
    pass_delay, JobOptions, ListState, ListValues, TakeVerdict, ValueRef,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::sync::atomic::{AtomicBool, AtomicU64};

/// The jobs of one cache: `CacheCore._jobs`. Holds the engine handle it shares with the
/// `CacheCore` that opened it, and the handle's `pickle` setting, for values.
#[pyclass(frozen, module = "diskcache_oxide", name = "JobsCore")]
pub(crate) struct JobsCore {
    cache: Shared,
    pickle: bool,
}

impl JobsCore {
    pub(crate) fn new(cache: Shared, pickle: bool) -> Self {
        JobsCore { cache, pickle }
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            pickle: self.pickle,
            cache: Some(&self.cache),
        }
    }
}

// ---- the calls -----------------------------------------------------------------------------

fn put(
    py: Python<'_>,
    jobs: &JobsCore,
    queue: &str,
    value: &Bound<'_, PyAny>,
    options: JobOptions,
) -> PyResult<i64> {
    let prepared = prepare_value(py, value, &jobs.ctx())?;
    let v = prepared.as_ref();
    let cache = &*jobs.cache;
    run(py, false, || {
        cache.jobs().put(queue, v, &options).map(|p| p.id())
    })
}

fn put_many(
    py: Python<'_>,
    jobs: &JobsCore,
    queue: &str,
    values: &Bound<'_, PyAny>,
    options: JobOptions,
) -> PyResult<Vec<i64>> {
    let objs: Vec<Bound<'_, PyAny>> = values.try_iter()?.collect::<PyResult<_>>()?;
    let ctx = jobs.ctx();
    let prepared = objs
        .iter()
        .map(|v| prepare_value(py, v, &ctx))
        .collect::<PyResult<Vec<Prepared<'_, '_>>>>()?;
    let refs: Vec<ValueRef<'_>> = prepared.iter().map(Prepared::as_ref).collect();
    let cache = &*jobs.cache;
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
impl JobsCore {
    #[pyo3(signature = (queue, value, delay, unique, max_attempts))]
    fn put(
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
        put(py, self, queue, value, options)
    }

    #[pyo3(signature = (queue, values, delay, max_attempts))]
    fn put_many(
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
        put_many(py, self, queue, values, options)
    }

    /// Lease up to `n` jobs of `queues` (priority order) for `lease` seconds; with `timeout`,
    /// wait while none is due. Returns `(jobs, errors)`: the `Job`s taken, and, to be logged,
    /// the errors of the jobs this process could not decode, which the take passed over (an
    /// unsafe value, an unregistered type or a decoder that raised: `DecodeError`; another
    /// process may read it, D-047) or buried (a damaged value: `CorruptValueError`) on its way
    /// to the jobs behind them.
    #[pyo3(signature = (queues, lease, n, timeout=WaitArg(None), default_lease=None), text_signature = "(self, queues, lease, n, timeout=None, default_lease=None)")]
    fn take<'py>(
        &self,
        py: Python<'py>,
        queues: Vec<String>,
        lease: f64,
        n: CountArg,
        timeout: WaitArg,
        default_lease: Option<f64>,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
        let (jobs_out, errors_out) = (PyList::empty(py), PyList::empty(py));
        if n.0 == 0 {
            return Ok((jobs_out, errors_out));
        }
        let cache = &*self.cache;
        let pickle = self.pickle;
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
                cache: self.cache.clone(),
            };
            jobs_out.append(Py::new(py, held)?)?;
        }
        Ok((jobs_out, errors_out))
    }

    #[pyo3(signature = (queue=None))]
    fn sweep(&self, py: Python<'_>, queue: Option<&str>) -> PyResult<(u64, u64)> {
        let cache = &*self.cache;
        let swept = run(py, false, || cache.jobs().sweep(queue))?;
        Ok((swept.requeued, swept.dead))
    }

    fn counts(&self, py: Python<'_>, queue: &str) -> PyResult<(u64, u64, u64, u64)> {
        let cache = &*self.cache;
        let c = run(py, false, || cache.jobs().counts(queue))?;
        Ok((c.ready, c.scheduled, c.leased, c.dead))
    }

    /// The `JobInfo` of job `id`, or None.
    fn info(&self, py: Python<'_>, id: i64) -> PyResult<Option<JobInfo>> {
        let cache = &*self.cache;
        let found = run(py, false, || cache.jobs().info(id))?;
        Ok(found.map(|info| JobInfo::from_engine(py, info, self.pickle)))
    }

    /// Up to `limit` dead jobs of `queue` after id `after`, as `JobInfo`s.
    fn dead(
        &self,
        py: Python<'_>,
        queue: &str,
        after: i64,
        limit: usize,
    ) -> PyResult<Vec<JobInfo>> {
        let cache = &*self.cache;
        let rows = run(py, false, || cache.jobs().dead(queue, after, limit))?;
        Ok(rows
            .into_iter()
            .map(|info| JobInfo::from_engine(py, info, self.pickle))
            .collect())
    }

    /// The names of the queues that hold jobs, sorted.
    fn queues(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let cache = &*self.cache;
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
    fn list(
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
        let cache = &*self.cache;
        let rows = run(py, false, || {
            cache.jobs().list(queue, state, after, limit, values)
        })?;
        Ok(rows
            .into_iter()
            .map(|listed| {
                let mut info = JobInfo::from_engine(py, listed.info, self.pickle);
                info.taken = listed.taken;
                info.preview = listed.preview;
                info
            })
            .collect())
    }

    /// Send a ready or leased job to the dead-letter list with `error`, whoever holds it.
    fn bury_any(&self, py: Python<'_>, id: i64, error: &str) -> PyResult<bool> {
        let cache = &*self.cache;
        run(py, false, || cache.jobs().bury_any(id, error))
    }

    /// Delete every dead job of `queue`; how many there were.
    fn purge_dead(&self, py: Python<'_>, queue: &str) -> PyResult<u64> {
        let cache = &*self.cache;
        run(py, false, || cache.jobs().purge_dead(queue))
    }

    fn requeue(&self, py: Python<'_>, id: i64, delay: f64) -> PyResult<bool> {
        let cache = &*self.cache;
        run(py, false, || cache.jobs().requeue(id, delay))
    }

    fn delete(&self, py: Python<'_>, id: i64) -> PyResult<bool> {
        let cache = &*self.cache;
        run(py, false, || cache.jobs().delete(id))
    }
}
