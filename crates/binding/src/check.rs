//! `check()`'s problems to Python warnings: each engine [`Problem`] becomes its message and
//! the warning class it is raised as, chosen by its variant (never by its text).

use crate::errors;
use diskcache_oxide_engine::Problem;
use pyo3::exceptions::PyUserWarning;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// `diskcache_oxide.errors.UnknownFileWarning`, python-diskcache's class for a file in the
/// directory that no row names.
fn unknown_file_warning(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static CELL: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    CELL.import(py, "diskcache_oxide.errors", "UnknownFileWarning")
}

/// The message a problem is raised with: the engine's, with the Python spelling of its advice.
fn message(problem: &Problem) -> String {
    match problem {
        Problem::UnreadableRow { error } => format!("unreadable row: {}", errors::text(error)),
        Problem::DamagedEntry { rowid, error } => {
            format!("damaged entry (rowid {rowid}): {}", errors::text(error))
        }
        Problem::ValuesNotADirectory { path, kind } => format!(
            "values is {kind}, not a directory: {} was not followed; check(fix=True) removes it \
             (a link itself, never what it points to) and the cache makes a new values directory",
            path.display()
        ),
        other => other.to_string(),
    }
}

/// Each problem as `(message, category)`, for `Cache.check` to raise with `warnings.warn`.
pub(crate) fn warnings(
    py: Python<'_>,
    problems: Vec<Problem>,
) -> PyResult<Vec<(String, Py<PyType>)>> {
    problems
        .iter()
        .map(|problem| {
            let category = match problem {
                Problem::UnknownFile { .. } => unknown_file_warning(py)?.clone(),
                _ => py.get_type::<PyUserWarning>(),
            };
            Ok((message(problem), category.unbind()))
        })
        .collect()
}
