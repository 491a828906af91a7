//! `ClaimsCore`, the binding's handle on the engine's claims (`Cache::claims(namespace)`,
//! D-044): the calls behind `diskcache_oxide.Claims`, on the claims table that no clear,
//! eviction, expiry or cull touches, and the wait a compute-once waiter sleeps in until the
//! value is stored or the claim is released or runs out. `CacheCore._claims` gives it out.

use crate::convert::{key_from_py, key_to_py, Ctx};
use crate::errors::to_py;
use crate::run::{run, Shared, WAIT_SLICE};
use diskcache_oxide_engine::{ClaimInfo, Error};
use pyo3::prelude::*;
use std::time::{Duration, Instant};

/// `(token, host, pid, acquired, expires)`.
type InfoTuple = (String, String, i64, f64, f64);

fn tuple(info: ClaimInfo) -> InfoTuple {
    (info.token, info.host, info.pid, info.acquired, info.expires)
}

/// The claims of one cache, in every namespace: `CacheCore._claims`. Holds the engine handle
/// it shares with the `CacheCore` that opened it, and the handle's `pickle` setting, for keys.
#[pyclass(frozen, module = "diskcache_oxide", name = "ClaimsCore")]
pub(crate) struct ClaimsCore {
    cache: Shared,
    pickle: bool,
}

impl ClaimsCore {
    pub(crate) fn new(cache: Shared, pickle: bool) -> Self {
        ClaimsCore { cache, pickle }
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            pickle: self.pickle,
            cache: Some(&self.cache),
        }
    }
}

#[pymethods]
impl ClaimsCore {
    /// Take the claim on `key` in `namespace` for `lease` seconds with `token`; True if taken.
    #[allow(clippy::too_many_arguments)] // the holder's host and pid ride along for holder()
    fn acquire(
        &self,
        py: Python<'_>,
        namespace: &str,
        key: &Bound<'_, PyAny>,
        lease: f64,
        token: &str,
        host: &str,
        pid: i64,
    ) -> PyResult<bool> {
        let k = key_from_py(py, key, &self.ctx())?;
        let cache = &*self.cache;
        run(py, true, || {
            cache
                .claims(namespace)
                .try_acquire(&k, lease, token, host, pid)
        })
    }

    /// Release the claim if `token` holds it; True if it did.
    fn release(
        &self,
        py: Python<'_>,
        namespace: &str,
        key: &Bound<'_, PyAny>,
        token: &str,
    ) -> PyResult<bool> {
        let k = key_from_py(py, key, &self.ctx())?;
        let cache = &*self.cache;
        run(py, true, || cache.claims(namespace).release(&k, token))
    }

    /// Make the claim end `lease` seconds from now if `token` holds it: the new end, or None.
    fn extend(
        &self,
        py: Python<'_>,
        namespace: &str,
        key: &Bound<'_, PyAny>,
        token: &str,
        lease: f64,
    ) -> PyResult<Option<f64>> {
        let k = key_from_py(py, key, &self.ctx())?;
        let cache = &*self.cache;
        run(py, true, || {
            cache.claims(namespace).extend(&k, token, lease)
        })
    }

    /// Who holds the live claim, as `(token, host, pid, acquired, expires)`, or None.
    fn holder(
        &self,
        py: Python<'_>,
        namespace: &str,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<Option<InfoTuple>> {
        let k = key_from_py(py, key, &self.ctx())?;
        let cache = &*self.cache;
        Ok(run(py, true, || cache.claims(namespace).holder(&k))?.map(tuple))
    }

    /// Remove the live claim whoever holds it; True if there was one.
    fn break_claim(
        &self,
        py: Python<'_>,
        namespace: &str,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let k = key_from_py(py, key, &self.ctx())?;
        let cache = &*self.cache;
        run(py, true, || cache.claims(namespace).break_claim(&k))
    }

    /// The live claims of `namespace` (or of every namespace), as
    /// `(namespace, key, token, host, pid, acquired, expires)`, by namespace and key; with
    /// `limit`, at most that many after skipping `offset` (an operator's page, D-046).
    #[pyo3(signature = (namespace=None, limit=None, offset=0))]
    fn list<'py>(
        &self,
        py: Python<'py>,
        namespace: Option<&str>,
        limit: Option<usize>,
        offset: usize,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let cache = &*self.cache;
        let found = run(py, true, || match (namespace, limit, offset) {
            (Some(ns), None, 0) => cache.claims(ns).list(),
            (None, None, 0) => cache.all_claims(),
            (ns, limit, offset) => cache.claims_page(ns, offset, limit.unwrap_or(usize::MAX)),
        })?;
        found
            .into_iter()
            .map(|c| {
                let key = key_to_py(py, c.key, self.pickle)?;
                let i = c.info;
                (
                    c.namespace,
                    key,
                    i.token,
                    i.host,
                    i.pid,
                    i.acquired,
                    i.expires,
                )
                    .into_pyobject(py)
                    .map(Bound::into_any)
            })
            .collect()
    }

    /// How many live claims there are (of `namespace`, or of every namespace).
    #[pyo3(signature = (namespace=None))]
    fn count(&self, py: Python<'_>, namespace: Option<&str>) -> PyResult<u64> {
        let cache = &*self.cache;
        run(py, true, || cache.claims_count(namespace))
    }

    /// Wait, with the GIL released, until `key`'s claim in `namespace` is free (released, or
    /// run out) or, with `value`, `key` has a value, or `timeout` seconds pass. True if one
    /// of them holds. A
    /// waiter wakes when the winner's commit rings the directory's bell, and at the moment
    /// the claim runs out; where there is no bell (D-040) it polls.
    #[pyo3(signature = (namespace, key, timeout, value=true))]
    fn wait(
        &self,
        py: Python<'_>,
        namespace: &str,
        key: &Bound<'_, PyAny>,
        timeout: f64,
        value: bool,
    ) -> PyResult<bool> {
        let k = key_from_py(py, key, &self.ctx())?;
        let cache = &*self.cache;
        let total = Duration::try_from_secs_f64(timeout.max(0.0)).unwrap_or(Duration::ZERO);
        let deadline = Instant::now() + total;
        loop {
            // In slices, so that Ctrl-C is seen and a claim's end is never slept past.
            let left = deadline.saturating_duration_since(Instant::now());
            let slice = left.min(WAIT_SLICE);
            let ready = py.detach(|| {
                cache.wait_for(slice, || {
                    if value && cache.contains(&k)? {
                        return Ok(Some(()));
                    }
                    Ok(match cache.claims(namespace).holder(&k)? {
                        None => Some(()),
                        Some(_) => None,
                    })
                })
            });
            match ready {
                Ok(Some(())) => return Ok(true),
                Ok(None) if left <= slice => return Ok(false),
                Ok(None) => py.check_signals()?,
                Err(Error::Timeout) => py.check_signals()?,
                Err(e) => return Err(to_py(py, e)),
            }
        }
    }
}
