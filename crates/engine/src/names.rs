//! The names of the files a cache directory holds: a leaf that imports nothing (D-050), so
//! that every layer, [`crate::error`]'s messages included, can name them.

/// The database file inside a cache directory.
pub const DB_NAME: &str = "cache.db";

/// The marker file of a FanoutCache root (D-018).
pub const FANOUT_MARKER: &str = "fanout.json";
