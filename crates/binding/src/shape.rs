//! Result shaping: how the cache and queue calls return what they found, as python-diskcache
//! shapes it (`value`, `(value, expire_time)`, `(value, tag)` or all three; a `KeyError`).
//! Uses only `convert`.

use crate::convert::opt_scalar_to_py;
use diskcache_oxide_engine::Scalar;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// A decoded queue item as `pull`/`peek` return it: key, value, expire time, tag.
pub(crate) type Item<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Option<f64>,
    Option<Scalar>,
);

pub(crate) fn key_error(key: &Bound<'_, PyAny>) -> PyErr {
    PyKeyError::new_err((key.clone().unbind(),))
}

/// `value`, `(value, x)` or `(value, expire_time, tag)`, as python-diskcache shapes results.
pub(crate) fn shape<'py>(
    py: Python<'py>,
    value: Bound<'py, PyAny>,
    expire: Bound<'py, PyAny>,
    tag: Bound<'py, PyAny>,
    want_expire: bool,
    want_tag: bool,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match (want_expire, want_tag) {
        (true, true) => PyTuple::new(py, [value, expire, tag])?.into_any(),
        (true, false) => PyTuple::new(py, [value, expire])?.into_any(),
        (false, true) => PyTuple::new(py, [value, tag])?.into_any(),
        (false, false) => value,
    })
}

/// [`shape`] for a value found with its expire time and tag.
pub(crate) fn shape_hit<'py>(
    py: Python<'py>,
    value: Bound<'py, PyAny>,
    expire: Option<f64>,
    tag: Option<Scalar>,
    want_expire: bool,
    want_tag: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let expire = float_or_none(py, expire)?;
    let tag = opt_scalar_to_py(py, tag)?;
    shape(py, value, expire, tag, want_expire, want_tag)
}

pub(crate) fn shape_default<'py>(
    py: Python<'py>,
    default: Option<&Bound<'py, PyAny>>,
    want_expire: bool,
    want_tag: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let default = match default {
        Some(d) => d.clone(),
        None => py.None().into_bound(py),
    };
    let none = || py.None().into_bound(py);
    shape(py, default, none(), none(), want_expire, want_tag)
}

pub(crate) fn float_or_none(py: Python<'_>, f: Option<f64>) -> PyResult<Bound<'_, PyAny>> {
    Ok(match f {
        Some(f) => f.into_pyobject(py)?.into_any(),
        None => py.None().into_bound(py),
    })
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
    shape_hit(py, pair, expire, tag, want_expire, want_tag)
}
