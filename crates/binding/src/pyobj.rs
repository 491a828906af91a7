//! Python objects the binding looks up once per process: modules' functions, the standard
//! library types the safe format knows, and the custom-type registry of the package.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyType};

/// Import `module.attr` once and keep it for the life of the process.
pub(crate) fn cached<'py>(
    cell: &'static PyOnceLock<Py<PyAny>>,
    py: Python<'py>,
    module: &str,
    attr: &str,
) -> PyResult<&'py Bound<'py, PyAny>> {
    cell.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import(module)?.getattr(attr)?.unbind())
    })
    .map(|obj| obj.bind(py))
}

macro_rules! cached_object {
    ($fn_name:ident, $module:literal, $attr:literal) => {
        pub(crate) fn $fn_name(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
            static CELL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
            cached(&CELL, py, $module, $attr)
        }
    };
}

cached_object!(pickle_dumps, "pickle", "dumps");
cached_object!(pickle_loads, "pickle", "loads");
cached_object!(pickletools_optimize, "pickletools", "optimize");
cached_object!(open_value_file, "diskcache_oxide._files", "open_value_file");

/// `logging.getLogger('diskcache_oxide')`.
pub(crate) fn logger(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static CELL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    CELL.get_or_try_init(py, || {
        Ok::<_, PyErr>(
            py.import("logging")?
                .getattr("getLogger")?
                .call1(("diskcache_oxide",))?
                .unbind(),
        )
    })
    .map(|obj| obj.bind(py))
}

/// The standard-library types the safe format stores, found by exact type.
pub(crate) struct StdTypes {
    pub datetime: Py<PyType>,
    pub date: Py<PyType>,
    pub time: Py<PyType>,
    pub timedelta: Py<PyType>,
    pub timezone: Py<PyType>,
    /// `None` if this Python lacks `zoneinfo`.
    pub zoneinfo: Option<Py<PyType>>,
    pub decimal: Py<PyType>,
    pub uuid: Py<PyType>,
    pub posix_path: Py<PyType>,
    pub windows_path: Py<PyType>,
    pub pure_posix_path: Py<PyType>,
    pub pure_windows_path: Py<PyType>,
}

pub(crate) fn std_types(py: Python<'_>) -> PyResult<&StdTypes> {
    static CELL: PyOnceLock<StdTypes> = PyOnceLock::new();
    CELL.get_or_try_init(py, || {
        let ty = |module: &str, attr: &str| -> PyResult<Py<PyType>> {
            Ok(py
                .import(module)?
                .getattr(attr)?
                .cast_into::<PyType>()?
                .unbind())
        };
        Ok::<_, PyErr>(StdTypes {
            datetime: ty("datetime", "datetime")?,
            date: ty("datetime", "date")?,
            time: ty("datetime", "time")?,
            timedelta: ty("datetime", "timedelta")?,
            timezone: ty("datetime", "timezone")?,
            zoneinfo: ty("zoneinfo", "ZoneInfo").ok(),
            decimal: ty("decimal", "Decimal")?,
            uuid: ty("uuid", "UUID")?,
            posix_path: ty("pathlib", "PosixPath")?,
            windows_path: ty("pathlib", "WindowsPath")?,
            pure_posix_path: ty("pathlib", "PurePosixPath")?,
            pure_windows_path: ty("pathlib", "PureWindowsPath")?,
        })
    })
}

/// The package's custom-type registry: `by_type` maps a class to `(name, encode)`,
/// `by_name` maps a name to `(class, decode)`. Both dicts are owned and mutated by
/// `diskcache_oxide.registry`; the binding only reads them.
pub(crate) struct Registry {
    pub by_type: Py<PyDict>,
    pub by_name: Py<PyDict>,
}

static REGISTRY: PyOnceLock<Registry> = PyOnceLock::new();

pub(crate) fn registry(py: Python<'_>) -> Option<&Registry> {
    REGISTRY.get(py)
}

/// Hand the binding the registry dicts (called once by `diskcache_oxide.registry`).
#[pyfunction]
pub(crate) fn set_registry(
    py: Python<'_>,
    by_type: Bound<'_, PyDict>,
    by_name: Bound<'_, PyDict>,
) -> PyResult<()> {
    let registry = Registry {
        by_type: by_type.unbind(),
        by_name: by_name.unbind(),
    };
    REGISTRY.set(py, registry).map_err(|_| {
        PyTypeError::new_err(
            "the custom-type registry is already installed; use diskcache_oxide.register_type",
        )
    })
}
