//! Python binding of diskcache_oxide (module `diskcache_oxide._core`).
//!
//! A thin layer: it converts Python objects to engine keys and values and back, maps engine
//! errors to the exception classes of `diskcache_oxide.errors`, and releases the GIL
//! (`Python::detach`) around every engine call. Storage logic lives in the engine.

use pyo3::prelude::*;

mod args;
mod cache;
mod check;
mod claims;
mod codec;
mod convert;
mod core;
mod decode;
mod errors;
mod fanout;
mod handle;
mod iter;
mod job;
mod jobs;
mod pyobj;
mod queue;
mod reader;
mod run;
mod shape;

/// Claim `directory` as the root of a FanoutCache with `shards` shards (D-018): creates it
/// if needed and writes `fanout.json`, or checks the one there. Raises `LayoutMismatchError`
/// (changing nothing) for a plain Cache's directory or another recorded shard count.
#[pyfunction]
fn claim_fanout(py: Python<'_>, directory: std::path::PathBuf, shards: u64) -> PyResult<()> {
    use errors::IntoPy;
    py.detach(|| diskcache_oxide_engine::claim_fanout(&directory, shards))
        .py_err(py)
}

/// Which implementation of each platform piece this process uses (D-040): a dict with
/// `wake` ("inotify" or "polling"), `wal_index_locks` ("engine" or "sqlite") and
/// `preallocate` ("posix_fallocate" or "zeros"). `DISKCACHE_OXIDE_PORTABLE=1` in the
/// environment selects the portable fallbacks on Linux too.
#[pyfunction]
fn platform_backends(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let b = diskcache_oxide_engine::platform::backends();
    let d = pyo3::types::PyDict::new(py);
    d.set_item("wake", b.wake)?;
    d.set_item("wal_index_locks", b.wal_index_locks)?;
    d.set_item("preallocate", b.preallocate)?;
    Ok(d)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<core::CacheCore>()?;
    m.add_class::<fanout::FanoutCore>()?;
    m.add_class::<iter::KeyIterator>()?;
    m.add_class::<jobs::JobsCore>()?;
    m.add_class::<claims::ClaimsCore>()?;
    m.add_class::<job::Job>()?;
    m.add_class::<job::JobInfo>()?;
    m.add_function(wrap_pyfunction!(pyobj::set_registry, m)?)?;
    m.add_function(wrap_pyfunction!(claim_fanout, m)?)?;
    m.add_function(wrap_pyfunction!(platform_backends, m)?)?;
    m.add_function(wrap_pyfunction!(codec::encode_value, m)?)?;
    m.add_function(wrap_pyfunction!(codec::decode_value, m)?)?;
    m.add_function(wrap_pyfunction!(codec::encode_key, m)?)?;
    m.add_function(wrap_pyfunction!(codec::decode_key, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
