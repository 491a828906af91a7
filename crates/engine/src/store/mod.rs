//! The directory's storage (D-050): the SQLite connections, the value files beside the
//! database and the layout marker. Built on `os` and `format`; the features (`cache`,
//! `queue`, `jobs`, `claims`) are built on it.
//!
//! | module | what |
//! |---|---|
//! | `conn` | per-thread SQLite connections and the busy wait |
//! | `statements` | prepared statements found by the address of their SQL (D-031) |
//! | `recent` | recently read small values, valid while their rows are unchanged (D-017) |
//! | `notes` | what each commit changed, for every process's `recent` (D-065) |
//! | `files` | value files, opened without following a link (D-035) |
//! | `layout` | a plain cache or a FanoutCache root (D-018) |

pub(crate) mod conn;
pub(crate) mod files;
pub(crate) mod layout;
pub(crate) mod notes;
pub(crate) mod recent;
pub(crate) mod statements;
