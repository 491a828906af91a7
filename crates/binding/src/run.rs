//! Running engine calls with the GIL released: the call loop every engine call runs in
//! (`run`), the short calls tried holding the GIL first (`run_short`), the one for batch removals that count (`run_removing`), the blocking wait of
//! `pull(timeout=...)` and the job queue's `take(timeout=...)` (`wait_loop`), and dropping an
//! engine handle off the GIL (`release`, `Shared`). Uses only `errors`.

use crate::errors::{timeout_with_count, to_py, IntoPy};
use diskcache_oxide_engine::{checkpoint_deferred, without_waiting, Cache, Error};
use pyo3::prelude::*;
use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest stretch a blocking wait spends with the GIL released before it checks for signals.
pub(crate) const WAIT_SLICE: Duration = Duration::from_millis(200);

/// Run an engine call with the GIL released; with `retry`, run it again after each
/// `Error::Timeout` (python-diskcache's `retry=True`), checking for Ctrl-C in between.
pub(crate) fn run<T, F>(py: Python<'_>, retry: bool, f: F) -> PyResult<T>
where
    F: Fn() -> Result<T, Error> + Sync,
    T: Send,
{
    loop {
        match py.detach(&f) {
            Err(Error::Timeout) if retry => py.check_signals()?,
            result => return result.py_err(py),
        }
    }
}

/// [`run`] for a call that is short unless it has to wait for a lock: a get that SQLite
/// answers, a small write. It is made first holding the GIL and waiting for nothing, and only
/// if a lock is held elsewhere made again as [`run`] makes it, with the GIL released.
///
/// Releasing the GIL and taking it back costs little alone, but when other threads want it,
/// each release hands it over and the caller waits for it to come back: on one handle
/// shared by 8 threads (90% get, 10% set), every call releasing gave 104k calls a second
/// against 301k for one thread (`benches/bench_threads.py`, D-065). A commit's WAL
/// checkpoint, which syncs the disk, is left for after the call and run with the GIL
/// released.
pub(crate) fn run_short<T, F>(py: Python<'_>, retry: bool, cache: &Cache, f: F) -> PyResult<T>
where
    F: Fn() -> Result<T, Error> + Sync,
    T: Send,
{
    match without_waiting(&f) {
        Err(Error::Timeout) => run(py, retry, f),
        result => {
            if checkpoint_deferred() {
                // A failed checkpoint is tried again after a later commit.
                let _ = py.detach(|| cache.run_deferred_checkpoint());
            }
            result.py_err(py)
        }
    }
}

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
                return Err(timeout_with_count(py, removed + n, &error));
            }
            Err(e) => return Err(to_py(py, e)),
        }
    }
}

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

/// Drop `value` with the GIL released.
pub(crate) fn release<T: Send>(value: T) {
    Python::attach(|py| py.detach(move || drop(value)));
}

/// The engine handle as `JobsCore`, `ClaimsCore` and a `Job` share it with the `CacheCore`
/// that opened it. Closing the last handle closes SQLite connections (and may checkpoint the
/// WAL): whichever of them goes last does that with the GIL released.
pub(crate) struct Shared(Option<Arc<Cache>>);

impl Shared {
    pub(crate) fn new(cache: Arc<Cache>) -> Self {
        Shared(Some(cache))
    }
}

impl Clone for Shared {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl Deref for Shared {
    type Target = Cache;

    fn deref(&self) -> &Cache {
        // Taken only by `drop`.
        self.0
            .as_deref()
            .expect("a Shared handle is used after drop")
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Only the last reference closes anything: the others drop without leaving the GIL.
        if let Some(cache) = self.0.take().and_then(Arc::into_inner) {
            release(cache);
        }
    }
}
