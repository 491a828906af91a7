//! Decoding what the engine returns, where a call needs more than `convert`: a queue item or
//! a job's value decoded inside the engine's transaction (`Decoded`, `decode_candidate`,
//! `decode_stored`), and a large value file read straight into a `bytes` (`read_deferred`).
//! Uses only `convert` and `errors`.

use crate::convert::{decode_bytes, fetched_to_py, from_value, unpickle, Fetched};
use crate::errors::{to_py_ref, Exc, IntoPy};
use diskcache_oxide_engine::{Cache, Candidate, Scalar, StoredValue, ValueFile};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// An engine hit before conversion: the value, its expire time and its tag.
pub(crate) type Got = Option<(Fetched, Option<f64>, Option<Scalar>)>;

/// A hit, converted: the value, its expire time and its tag.
pub(crate) type Hit<'py> = (Bound<'py, PyAny>, Option<f64>, Option<Scalar>);

/// What this process makes of a queue item.
pub(crate) enum Decoded {
    /// An int, float, str or bytes: cannot fail, built once the pull has returned.
    Plain,
    Ok(Py<PyAny>),
    /// No build could read it (`CorruptValueError`): it is removed.
    Damaged(PyErr),
    /// This process cannot read it, another may (`UnsafeValueError`, `UnknownTypeError`):
    /// it is left in place.
    Unreadable(PyErr),
    /// Anything else (the application's decoder raised, an I/O error): left in place.
    Failed(PyErr),
}

pub(crate) fn classify(py: Python<'_>, err: PyErr) -> Decoded {
    if Exc::CorruptValue.matches(py, &err) {
        Decoded::Damaged(err)
    } else if Exc::DecodeError.matches(py, &err) {
        Decoded::Unreadable(err)
    } else {
        Decoded::Failed(err)
    }
}

fn settle(py: Python<'_>, built: PyResult<Bound<'_, PyAny>>) -> Decoded {
    match built {
        Ok(obj) => Decoded::Ok(obj.unbind()),
        Err(e) => classify(py, e),
    }
}

/// Decode a candidate. Call it with the GIL released: the safe format is decoded first, and
/// Python is re-attached only to build objects.
pub(crate) fn decode_candidate(c: &Candidate, pickle: bool) -> Decoded {
    match &c.entry {
        Ok(entry) => decode_stored(&entry.value, pickle),
        Err(e) => Python::attach(|py| classify(py, to_py_ref(py, e))),
    }
}

/// Decode a stored value that was loaded whole (a queue item's, a job's), with the GIL
/// released as for [`decode_candidate`].
pub(crate) fn decode_stored(value: &StoredValue, pickle: bool) -> Decoded {
    match value {
        StoredValue::Int(_)
        | StoredValue::Float(_)
        | StoredValue::Str(_)
        | StoredValue::Bytes(_) => Decoded::Plain,
        StoredValue::Encoded(bytes) => {
            let value = decode_bytes(bytes);
            Python::attach(|py| {
                let built = match value {
                    Ok(v) => from_value(py, v, 0),
                    Err(m) => Err(crate::convert::corrupt(py, "value", &m)),
                };
                settle(py, built)
            })
        }
        StoredValue::Pickled(bytes) => Python::attach(|py| settle(py, unpickle(py, bytes, pickle))),
        StoredValue::File(handle) => Python::attach(|py| {
            settle(py, fetched_to_py(py, Fetched::File(handle.clone()), pickle))
        }),
        // Only `get_deferred` defers; queue and job reads load values whole.
        StoredValue::Deferred(_) => Python::attach(|py| {
            settle(
                py,
                Err(crate::convert::corrupt(
                    py,
                    "value",
                    "unexpected deferred value",
                )),
            )
        }),
    }
}

/// Read a large value file straight into a new `bytes` (one allocation, one copy), the GIL
/// released while reading. `None` if the file is gone.
pub(crate) fn read_deferred<'py>(
    py: Python<'py>,
    cache: &Cache,
    file: &ValueFile,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let len = isize::try_from(file.size)
        .map_err(|_| PyValueError::new_err("a value file is too large for a bytes object"))?;
    // Not `PyBytes::new_with`, which zero-fills first: 6% of a 1 MB get.
    // SAFETY: with a NULL source CPython returns a new bytes object of `len` uninitialised
    // bytes, which we own and which nothing else can see until we return it.
    let bytes = unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            pyo3::ffi::PyBytes_FromStringAndSize(std::ptr::null(), len),
        )?
        .cast_into_unchecked::<PyBytes>()
    };
    // SAFETY: the buffer is `len` bytes long, owned by `bytes`, and written only here, before
    // anyone else can see the object. It is returned only once fully written (a read that
    // fails or finds no file drops it).
    let buf = unsafe {
        std::slice::from_raw_parts_mut(
            pyo3::ffi::PyBytes_AsString(bytes.as_ptr()).cast::<u8>(),
            file.size as usize,
        )
    };
    let found = py.detach(|| cache.read_value_file(file, buf)).py_err(py)?;
    Ok(found.then_some(bytes))
}
