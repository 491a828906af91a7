//! The engine's value and key frames (`diskcache_oxide_engine::frame`) for Python: the one
//! codec a store without the cache's columns uses (the Redis backend, D-058), so that a
//! directory, Redis and a Rust program read the same bytes. No second codec: the frames hold
//! exactly the payloads a directory stores, made by the same conversion (`convert`).

use crate::args::Flag;
use crate::convert::{fetched_to_py, key_from_py, key_to_py, prepare_value, Ctx, Fetched};
use crate::errors::IntoPy;
use diskcache_oxide_engine::frame;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The frame of `value` in the safe format (a pickle only with `pickle=True`, and only when
/// the safe format cannot hold the value), as bytes.
#[pyfunction]
#[pyo3(signature = (value, pickle=Flag(false)), text_signature = "(value, pickle=False)")]
pub(crate) fn encode_value<'py>(
    py: Python<'py>,
    value: &Bound<'py, PyAny>,
    pickle: Flag,
) -> PyResult<Bound<'py, PyBytes>> {
    let ctx = Ctx {
        pickle: pickle.0,
        cache: None,
    };
    let prepared = prepare_value(py, value, &ctx)?;
    Ok(PyBytes::new(py, &frame::encode_value(prepared.as_ref())))
}

/// The value a frame holds. Damaged or foreign bytes raise `CorruptValueError`; a pickle
/// raises `UnsafeValueError` unless `pickle=True`.
#[pyfunction]
#[pyo3(signature = (data, pickle=Flag(false)), text_signature = "(data, pickle=False)")]
pub(crate) fn decode_value<'py>(
    py: Python<'py>,
    data: &[u8],
    pickle: Flag,
) -> PyResult<Bound<'py, PyAny>> {
    let stored = frame::decode_value(data).py_err(py)?;
    fetched_to_py(py, Fetched::from(stored), pickle.0)
}

/// The frame of a key: keys a directory holds as one (`1` and `1.0`) give one frame.
#[pyfunction]
#[pyo3(signature = (key, pickle=Flag(false)), text_signature = "(key, pickle=False)")]
pub(crate) fn encode_key<'py>(
    py: Python<'py>,
    key: &Bound<'py, PyAny>,
    pickle: Flag,
) -> PyResult<Bound<'py, PyBytes>> {
    let ctx = Ctx {
        pickle: pickle.0,
        cache: None,
    };
    let key = key_from_py(py, key, &ctx)?;
    Ok(PyBytes::new(py, &frame::encode_key(&key)))
}

/// The key a frame names (an integral float key comes back as an int).
#[pyfunction]
#[pyo3(signature = (data, pickle=Flag(false)), text_signature = "(data, pickle=False)")]
pub(crate) fn decode_key<'py>(
    py: Python<'py>,
    data: &[u8],
    pickle: Flag,
) -> PyResult<Bound<'py, PyAny>> {
    let key = frame::decode_key(data).py_err(py)?;
    key_to_py(py, key, pickle.0)
}
