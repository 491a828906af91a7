//! A leaf module: small helpers that every layer uses, and that depend on no other engine
//! module but [`crate::error`] (D-050; the file names are in [`crate::names`]). Keeping them
//! here is what lets the OS plumbing (`os`), the formats (`format`) and the directory's files
//! (`store`) import each other only downwards.

use crate::{Error, Result};

/// "a FIFO", "a directory", ...: what a file type is, for messages.
pub(crate) fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_file() {
        "a regular file"
    } else {
        "an unknown kind of file"
    }
}

/// Reserve exactly `len` more bytes for the value file `name`, or fail with
/// [`Error::NoMemory`] instead of aborting (D-035).
pub(crate) fn reserve(data: &mut Vec<u8>, len: u64, name: &str) -> Result<()> {
    usize::try_from(len)
        .ok()
        .and_then(|n| data.try_reserve_exact(n).ok())
        .ok_or_else(|| Error::NoMemory {
            name: name.to_owned(),
            len,
        })
}

/// The engine's one check of a number of seconds a caller passes (a delay, a lease, a retry):
/// finite, and `>= 0`, or `> 0` when `positive`. A Rust caller meets it; the binding checks
/// Python's arguments before they get here, with Python's wording (D-049).
pub(crate) fn check_seconds(name: &str, v: f64, positive: bool) -> Result<()> {
    let ok = v.is_finite() && if positive { v > 0.0 } else { v >= 0.0 };
    if !ok {
        let bound = if positive { "> 0" } else { ">= 0" };
        return Err(Error::invalid(format!(
            "{name}: expected a finite number of seconds {bound}, got {v}"
        )));
    }
    Ok(())
}
