//! The leased-job calls behind `diskcache_oxide.JobQueue` (D-014, D-015).
//!
//! Thin on purpose: the Python layer (`diskcache_oxide/jobs.py`) validates arguments, shapes
//! results into `Job`/`JobInfo` objects and decides what to do with a job it cannot decode.
//! Values go through the same safe conversion as cache values (pickle only on a `pickle=True`
//! handle). Every engine call runs with the GIL released; safe-format bytes are decoded there too.

use crate::convert::{fetched_to_py, prepare_value, Fetched, Prepared};
use crate::core::CacheCore;
use crate::core::{run, Handle};
use crate::errors::Exc;
use crate::queue::wait_loop;
use crate::queue::{CountArg, WaitArg};
use diskcache_oxide_engine::{JobInfo, JobOptions, JobState, JobValueError, StoredValue, ValueRef};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::time::Duration;

/// A job's value after the GIL-free part of reading, or why it could not be read.
type Raw = Result<Fetched, JobValueError>;

fn raw(value: Result<StoredValue, JobValueError>) -> Raw {
    value.map(Fetched::from)
}

/// `(value, None)` or `(None, exception)`: a job whose value cannot be decoded is still
/// reported, so that the Python layer can release or bury it and raise.
fn value_to_py(py: Python<'_>, value: Raw, pickle: bool) -> (Py<PyAny>, Py<PyAny>) {
    let built = match value {
        Ok(fetched) => fetched_to_py(py, fetched, pickle),
        Err(e @ JobValueError::Corrupt(_)) => Err(Exc::CorruptValue.err(py, e.to_string())),
        Err(e @ JobValueError::Unreadable(_)) => Err(Exc::CacheError.err(py, e.to_string())),
    };
    match built {
        Ok(v) => (v.unbind(), py.None()),
        Err(e) => (py.None(), e.into_value(py).into_any()),
    }
}

fn state_name(state: JobState) -> &'static str {
    match state {
        JobState::Ready => "ready",
        JobState::Leased => "leased",
        JobState::Dead => "dead",
    }
}

pub(crate) fn put(
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
        cache.job_put(queue, v, &options).map(|p| p.id())
    })
}

pub(crate) fn put_many(
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
    run(py, false, || cache.job_put_many(queue, &refs, &options))
}

/// A taken job without its value.
struct Taken {
    id: i64,
    queue: String,
    attempts: u32,
    lease: i64,
    max_attempts: u32,
    lease_deadline: f64,
    created: f64,
    error: Option<String>,
}

/// Lease up to `n` jobs of `queues` (priority order); with `timeout`, wait while none is due.
/// Each job is `(id, queue, attempts, max_attempts, lease_deadline, created, error, value,
/// problem, lease)`, `problem` being the exception that decoding its value raised (or None)
/// and `lease` the fencing token its holder passes back.
pub(crate) fn take<'py>(
    py: Python<'py>,
    h: &Handle,
    queues: &[String],
    lease: f64,
    n: usize,
    timeout: Option<Duration>,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    if n == 0 {
        return Ok(out);
    }
    let cache = &*h.cache;
    let names: Vec<&str> = queues.iter().map(String::as_str).collect();
    let attempt = || {
        let jobs = cache.job_take(&names, lease, n)?;
        Ok((!jobs.is_empty()).then(|| {
            jobs.into_iter()
                .map(|j| {
                    let taken = Taken {
                        id: j.id,
                        queue: j.queue,
                        attempts: j.attempts,
                        lease: j.lease,
                        max_attempts: j.max_attempts,
                        lease_deadline: j.lease_deadline,
                        created: j.created,
                        error: j.error,
                    };
                    (taken, raw(j.value))
                })
                .collect::<Vec<_>>()
        }))
    };
    let Some(jobs) = wait_loop(py, cache, timeout, false, attempt)? else {
        return Ok(out);
    };
    for (j, value) in jobs {
        let (value, problem) = value_to_py(py, value, h.pickle);
        let row = (
            j.id,
            j.queue,
            j.attempts,
            j.max_attempts,
            j.lease_deadline,
            j.created,
            j.error,
            value,
            problem,
            j.lease,
        );
        out.append(row.into_pyobject(py)?)?;
    }
    Ok(out)
}

/// `(id, queue, state, due, attempts, max_attempts, created, error, unique, value, problem)`.
fn info_to_py<'py>(
    py: Python<'py>,
    info: JobInfo,
    value: Raw,
    pickle: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let (value, problem) = value_to_py(py, value, pickle);
    (
        info.id,
        info.queue,
        state_name(info.state),
        info.due,
        info.attempts,
        info.max_attempts,
        info.created,
        info.error,
        info.unique,
        value,
        problem,
    )
        .into_pyobject(py)
}

fn split(info: JobInfo) -> (JobInfo, Raw) {
    let mut info = info;
    let value = std::mem::replace(
        &mut info.value,
        Err(JobValueError::Unreadable(String::new())),
    );
    (info, raw(value))
}

pub(crate) fn info<'py>(
    py: Python<'py>,
    h: &Handle,
    id: i64,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let cache = &*h.cache;
    let found = run(py, false, || Ok(cache.job_info(id)?.map(split)))?;
    found
        .map(|(info, value)| info_to_py(py, info, value, h.pickle))
        .transpose()
}

pub(crate) fn dead<'py>(
    py: Python<'py>,
    h: &Handle,
    queue: &str,
    after: i64,
    limit: usize,
) -> PyResult<Bound<'py, PyList>> {
    let cache = &*h.cache;
    let rows = run(py, false, || {
        Ok(cache
            .job_dead(queue, after, limit)?
            .into_iter()
            .map(split)
            .collect::<Vec<_>>())
    })?;
    let out = PyList::empty(py);
    for (info, value) in rows {
        out.append(info_to_py(py, info, value, h.pickle)?)?;
    }
    Ok(out)
}

// ---- the leased-job calls of CacheCore (the Python layer is diskcache_oxide/jobs.py) ----

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

    #[pyo3(signature = (queues, lease, n, timeout=WaitArg(None)), text_signature = "(self, queues, lease, n, timeout=None)")]
    fn _job_take<'py>(
        &self,
        py: Python<'py>,
        queues: Vec<String>,
        lease: f64,
        n: CountArg,
        timeout: WaitArg,
    ) -> PyResult<Bound<'py, PyList>> {
        take(py, self.h()?, &queues, lease, n.0, timeout.0)
    }

    fn _job_finish(&self, py: Python<'_>, id: i64, lease: i64) -> PyResult<bool> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.job_finish(id, lease))
    }

    fn _job_fail(
        &self,
        py: Python<'_>,
        id: i64,
        lease: i64,
        error: &str,
        retry_in: f64,
    ) -> PyResult<Option<&'static str>> {
        let cache = &*self.h()?.cache;
        let state = run(py, false, || cache.job_fail(id, lease, error, retry_in))?;
        Ok(state.map(|s| match s {
            JobState::Dead => "dead",
            JobState::Leased => "leased",
            JobState::Ready => "ready",
        }))
    }

    fn _job_extend(
        &self,
        py: Python<'_>,
        id: i64,
        lease_id: i64,
        lease: f64,
    ) -> PyResult<Option<f64>> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.job_extend(id, lease_id, lease))
    }

    fn _job_release(&self, py: Python<'_>, id: i64, lease: i64, delay: f64) -> PyResult<bool> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.job_release(id, lease, delay))
    }

    fn _job_bury(&self, py: Python<'_>, id: i64, lease: i64, error: &str) -> PyResult<bool> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.job_bury(id, lease, error))
    }

    #[pyo3(signature = (queue=None))]
    fn _job_sweep(&self, py: Python<'_>, queue: Option<&str>) -> PyResult<(u64, u64)> {
        let cache = &*self.h()?.cache;
        let swept = run(py, false, || cache.job_sweep(queue))?;
        Ok((swept.requeued, swept.dead))
    }

    fn _job_counts(&self, py: Python<'_>, queue: &str) -> PyResult<(u64, u64, u64, u64)> {
        let cache = &*self.h()?.cache;
        let c = run(py, false, || cache.job_counts(queue))?;
        Ok((c.ready, c.scheduled, c.leased, c.dead))
    }

    fn _job_info<'py>(&self, py: Python<'py>, id: i64) -> PyResult<Option<Bound<'py, PyTuple>>> {
        info(py, self.h()?, id)
    }

    fn _job_dead<'py>(
        &self,
        py: Python<'py>,
        queue: &str,
        after: i64,
        limit: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        dead(py, self.h()?, queue, after, limit)
    }

    fn _job_requeue(&self, py: Python<'_>, id: i64, delay: f64) -> PyResult<bool> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.job_requeue(id, delay))
    }

    fn _job_delete(&self, py: Python<'_>, id: i64) -> PyResult<bool> {
        let cache = &*self.h()?.cache;
        run(py, false, || cache.job_delete(id))
    }
}
