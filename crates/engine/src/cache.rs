//! The cache: one directory, one SQLite database in WAL mode, value files beside it.

use crate::settings::{SettingValue, Settings};
use crate::stored::{Entry, ValueRef};
use crate::{Key, Result, Scalar};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How to open a cache directory.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// How long a call waits on a database another connection holds locked before `Error::Timeout`.
    pub timeout: Duration,
    /// Settings to apply; the rest come from the directory, or the defaults for a new one.
    pub settings: Vec<(String, SettingValue)>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions { timeout: Duration::from_secs(60), settings: Vec::new() }
    }
}

/// Expiry and tag for a write.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Seconds from now until the item expires; `None` never expires.
    pub expire: Option<f64>,
    pub tag: Option<Scalar>,
}

/// Result of [`Cache::incr`].
#[derive(Debug, Clone, PartialEq)]
pub enum Incr {
    /// The new value, stored.
    Value(i64),
    /// The key was absent (or expired) and no default was given.
    Missing,
    /// The stored value is not an i64 int, or the sum overflows i64: nothing was written;
    /// the caller may do the arithmetic itself inside a transaction.
    NotInt,
}

/// A handle on one cache directory. Cheap to share between threads: each thread
/// gets its own SQLite connection, and a handle keeps working in a forked child.
pub struct Cache {
    // filled in by the implementation
}

impl Cache {
    pub fn open(directory: impl AsRef<Path>, options: OpenOptions) -> Result<Cache> {
        let _ = (directory, options);
        todo!()
    }

    pub fn directory(&self) -> &Path {
        todo!()
    }

    pub fn timeout(&self) -> Duration {
        todo!()
    }

    /// The settings as this handle currently applies them.
    pub fn settings(&self) -> Settings {
        todo!()
    }

    pub fn set(&self, key: &Key, value: ValueRef<'_>, options: &WriteOptions) -> Result<()> {
        let _ = (key, value, options);
        todo!()
    }

    /// Store the bytes read from `reader` (python-diskcache's `set(..., read=True)`): always a value file.
    pub fn set_from_reader(&self, key: &Key, reader: &mut dyn Read, options: &WriteOptions) -> Result<()> {
        let _ = (key, reader, options);
        todo!()
    }

    /// Store only if the key is absent or expired. Returns whether it stored.
    pub fn add(&self, key: &Key, value: ValueRef<'_>, options: &WriteOptions) -> Result<bool> {
        let _ = (key, value, options);
        todo!()
    }

    /// Read an unexpired entry. With `as_file`, bytes kept in a value file come back as
    /// `StoredValue::File` rather than read into memory.
    pub fn get(&self, key: &Key, as_file: bool) -> Result<Option<Entry>> {
        let _ = (key, as_file);
        todo!()
    }

    pub fn contains(&self, key: &Key) -> Result<bool> {
        let _ = key;
        todo!()
    }

    /// Remove and return an unexpired entry.
    pub fn pop(&self, key: &Key) -> Result<Option<Entry>> {
        let _ = key;
        todo!()
    }

    /// Remove an unexpired entry. Returns whether one was removed.
    pub fn delete(&self, key: &Key) -> Result<bool> {
        let _ = key;
        todo!()
    }

    /// Give an unexpired entry a new expiry. Returns whether the key was present.
    pub fn touch(&self, key: &Key, expire: Option<f64>) -> Result<bool> {
        let _ = (key, expire);
        todo!()
    }

    /// Add `delta` to an int value atomically; an absent key starts at `default`.
    pub fn incr(&self, key: &Key, delta: i64, default: Option<i64>) -> Result<Incr> {
        let _ = (key, delta, default);
        todo!()
    }

    /// Read many keys in one transaction; `None` for each miss.
    pub fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Entry>>> {
        let _ = keys;
        todo!()
    }

    /// Write many items in one transaction.
    pub fn set_many(&self, items: &[(Key, ValueRef<'_>)], options: &WriteOptions) -> Result<()> {
        let _ = (items, options);
        todo!()
    }

    /// Delete many keys in one transaction. Returns how many were present.
    pub fn delete_many(&self, keys: &[Key]) -> Result<u64> {
        let _ = keys;
        todo!()
    }

    /// The first (`last == false`) or last entry in insertion order, skipping expired ones.
    pub fn peekitem(&self, last: bool) -> Result<Option<(Key, Entry)>> {
        let _ = last;
        todo!()
    }

    /// A page of keys in key order, strictly after `after` (or from the start). Expired keys included.
    pub fn keys_sorted(&self, after: Option<&Key>, reverse: bool, limit: usize) -> Result<Vec<Key>> {
        let _ = (after, reverse, limit);
        todo!()
    }

    /// The highest rowid now in use: iteration in insertion order stops there.
    pub fn max_rowid(&self) -> Result<Option<i64>> {
        todo!()
    }

    /// A page of (rowid, key) with `lo < rowid < hi`, in rowid order (descending if not `ascending`).
    pub fn keys_by_rowid(&self, lo: i64, hi: i64, ascending: bool, limit: usize) -> Result<Vec<(i64, Key)>> {
        let _ = (lo, hi, ascending, limit);
        todo!()
    }

    /// Number of entries, expired ones included.
    pub fn len(&self) -> Result<u64> {
        todo!()
    }

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Bytes used on disk: database pages plus value files.
    pub fn volume(&self) -> Result<u64> {
        todo!()
    }

    /// Remove expired entries (as of `now`, seconds since the epoch). Returns how many.
    pub fn expire(&self, now: Option<f64>) -> Result<u64> {
        let _ = now;
        todo!()
    }

    /// Remove every entry with this tag. Returns how many.
    pub fn evict(&self, tag: &Scalar) -> Result<u64> {
        let _ = tag;
        todo!()
    }

    /// Remove every entry. Returns how many.
    pub fn clear(&self) -> Result<u64> {
        todo!()
    }

    /// Remove expired entries, then evict by policy until under `size_limit`. Returns how many.
    pub fn cull(&self) -> Result<u64> {
        todo!()
    }

    /// Check consistency; with `fix`, repair what can be repaired. Returns the problems found.
    pub fn check(&self, fix: bool) -> Result<Vec<String>> {
        let _ = fix;
        todo!()
    }

    /// (hits, misses); `enable` turns counting on or off, `reset` zeroes the counters.
    pub fn stats(&self, enable: bool, reset: bool) -> Result<(u64, u64)> {
        let _ = (enable, reset);
        todo!()
    }

    /// Read a setting, or with `value` change it; `update` persists the change to the directory.
    pub fn reset(&self, name: &str, value: Option<SettingValue>, update: bool) -> Result<SettingValue> {
        let _ = (name, value, update);
        todo!()
    }

    pub fn create_tag_index(&self) -> Result<()> {
        todo!()
    }

    pub fn drop_tag_index(&self) -> Result<()> {
        todo!()
    }

    /// Begin (or nest into) this thread's transaction. Every `begin` needs one `end`.
    pub fn begin(&self) -> Result<()> {
        todo!()
    }

    /// End this thread's innermost transaction level, committing (or rolling back) at the outermost.
    pub fn end(&self, commit: bool) -> Result<()> {
        let _ = commit;
        todo!()
    }

    /// Run `f` in a transaction: committed if it returns Ok, rolled back otherwise.
    pub fn transact<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.begin()?;
        match f() {
            Ok(v) => {
                self.end(true)?;
                Ok(v)
            }
            Err(e) => {
                let _ = self.end(false);
                Err(e)
            }
        }
    }

    /// Close this thread's connection (others close when the handle drops).
    pub fn close(&self) {
        todo!()
    }

    /// Path of a value file stored under `relative` (for the binding's `read=True`).
    pub fn value_path(&self, relative: &str) -> PathBuf {
        let _ = relative;
        todo!()
    }
}
