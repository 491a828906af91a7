//! Key iterators: insertion (rowid) order for `__iter__`/`__reversed__`, key order for
//! `iterkeys`, and the str keys starting with a prefix for `iterkeys(prefix=...)`. All read
//! pages of 100 keys, as python-diskcache does, so a long iteration never holds the database
//! and deleting keys while iterating is safe.

use crate::convert::key_to_py;
use crate::errors::IntoPy;
use diskcache_oxide_engine::{Cache, Key, Scalar};
use pyo3::prelude::*;
use std::collections::VecDeque;
use std::sync::Arc;

const PAGE: usize = 100;

enum Order {
    /// `lo < rowid < hi`; ascending moves `lo` up, descending moves `hi` down.
    Rowid { ascending: bool, lo: i64, hi: i64 },
    /// Strictly after `after` (None: from the start) in key order.
    Sorted { reverse: bool, after: Option<Key> },
    /// The str keys starting with `prefix`, in key order, strictly after `after`.
    Prefixed {
        prefix: String,
        reverse: bool,
        after: Option<String>,
    },
}

#[pyclass(module = "diskcache_oxide")]
pub(crate) struct KeyIterator {
    /// Always `Some` until dropped.
    cache: Option<Arc<Cache>>,
    pickle: bool,
    order: Order,
    page: VecDeque<Key>,
    done: bool,
}

impl KeyIterator {
    /// Iteration in insertion order over the rows present now (python-diskcache's `_iter`:
    /// the upper bound is read when the iterator is made).
    pub(crate) fn by_rowid(
        py: Python<'_>,
        cache: Arc<Cache>,
        pickle: bool,
        ascending: bool,
    ) -> PyResult<Self> {
        let max = {
            let cache = &cache;
            py.detach(|| cache.max_rowid()).py_err(py)?
        };
        let (order, done) = match max {
            None => (
                Order::Rowid {
                    ascending,
                    lo: 0,
                    hi: 0,
                },
                true,
            ),
            Some(max) => {
                let bound = max.saturating_add(1);
                (
                    Order::Rowid {
                        ascending,
                        lo: 0,
                        hi: bound,
                    },
                    false,
                )
            }
        };
        Ok(KeyIterator {
            cache: Some(cache),
            pickle,
            order,
            page: VecDeque::new(),
            done,
        })
    }

    /// Iteration in key order; nothing is read until the first `next()`.
    pub(crate) fn sorted(cache: Arc<Cache>, pickle: bool, reverse: bool) -> Self {
        KeyIterator {
            cache: Some(cache),
            pickle,
            order: Order::Sorted {
                reverse,
                after: None,
            },
            page: VecDeque::new(),
            done: false,
        }
    }

    /// The str keys starting with `prefix`, in key order; nothing is read until the first `next()`.
    pub(crate) fn prefixed(cache: Arc<Cache>, pickle: bool, prefix: String, reverse: bool) -> Self {
        KeyIterator {
            cache: Some(cache),
            pickle,
            order: Order::Prefixed {
                prefix,
                reverse,
                after: None,
            },
            page: VecDeque::new(),
            done: false,
        }
    }

    fn fetch(&mut self, py: Python<'_>) -> PyResult<()> {
        let Some(cache) = &self.cache else {
            self.done = true;
            return Ok(());
        };
        match &mut self.order {
            Order::Rowid { ascending, lo, hi } => {
                let (ascending, l, h) = (*ascending, *lo, *hi);
                let rows = py
                    .detach(|| cache.keys_by_rowid(l, h, ascending, PAGE))
                    .py_err(py)?;
                match rows.last() {
                    None => self.done = true,
                    Some((rowid, _)) if ascending => *lo = *rowid,
                    Some((rowid, _)) => *hi = *rowid,
                }
                self.page.extend(rows.into_iter().map(|(_, key)| key));
            }
            Order::Sorted { reverse, after } => {
                let reverse = *reverse;
                let start = after.as_ref();
                let keys = py
                    .detach(|| cache.keys_sorted(start, reverse, PAGE))
                    .py_err(py)?;
                match keys.last() {
                    None => self.done = true,
                    Some(last) => *after = Some(last.clone()),
                }
                self.page.extend(keys);
            }
            Order::Prefixed {
                prefix,
                reverse,
                after,
            } => {
                let (prefix, reverse, start) = (prefix.as_str(), *reverse, after.as_deref());
                let keys = py
                    .detach(|| cache.keys_prefixed(prefix, start, reverse, PAGE))
                    .py_err(py)?;
                match keys.last() {
                    None => self.done = true,
                    Some(Key::Native(Scalar::Str(last))) => *after = Some(last.clone()),
                    // keys_prefixed returns only str keys; stop rather than loop on anything else.
                    Some(_) => self.done = true,
                }
                self.page.extend(keys);
            }
        }
        Ok(())
    }
}

impl Drop for KeyIterator {
    fn drop(&mut self) {
        // This may be the last reference to the engine handle (see `CacheCore::drop`).
        if let Some(cache) = self.cache.take() {
            crate::run::release(cache);
        }
    }
}

#[pymethods]
impl KeyIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        if self.page.is_empty() && !self.done {
            self.fetch(py)?;
        }
        match self.page.pop_front() {
            Some(key) => Ok(Some(key_to_py(py, key, self.pickle)?.unbind())),
            None => Ok(None),
        }
    }
}
