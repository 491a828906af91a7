//! Python binding of diskcache_oxide (module `diskcache_oxide._core`).

use pyo3::prelude::*;

#[pymodule]
fn _core(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
