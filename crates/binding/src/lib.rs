//! Python binding of diskcache_oxide (module `diskcache_oxide._core`).
//!
//! A thin layer: it converts Python objects to engine keys and values and back, maps engine
//! errors to the exception classes of `diskcache_oxide.errors`, and releases the GIL
//! (`Python::detach`) around every engine call. Storage logic lives in the engine.

use pyo3::prelude::*;

mod convert;
mod core;
mod errors;
mod iter;
mod jobs;
mod pyobj;
mod queue;
mod reader;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<core::CacheCore>()?;
    m.add_class::<iter::KeyIterator>()?;
    m.add_function(wrap_pyfunction!(pyobj::set_registry, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
