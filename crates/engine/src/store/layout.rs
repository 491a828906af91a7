//! Layout records: what kind of store a directory holds (D-018).
//!
//! A directory is either a plain cache (it has `cache.db`) or a FanoutCache root, marked by
//! `<dir>/fanout.json` = `{"layout": "fanout", "shards": N, "format": 1}`. Opening a
//! directory the wrong way raises [`Error::LayoutMismatch`] and changes nothing on disk.

use crate::error::Mismatch;
use crate::{Error, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::names::{DB_NAME, FANOUT_MARKER};
/// The version of the marker's format.
const MARKER_FORMAT: u64 = 1;

fn marker_text(shards: u64) -> String {
    format!("{{\"layout\": \"fanout\", \"shards\": {shards}, \"format\": {MARKER_FORMAT}}}\n")
}

/// The shard count a marker records, or a message saying what is wrong with it.
fn parse_marker(text: &str) -> std::result::Result<u64, String> {
    // A tiny reader for the one flat object we write: `"name": value` pairs.
    let field = |name: &str| -> Option<&str> {
        let at = text.find(&format!("\"{name}\""))?;
        let rest = text[at + name.len() + 2..].trim_start().strip_prefix(':')?;
        let rest = rest.trim_start();
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        Some(rest[..end].trim())
    };
    if field("layout") != Some("\"fanout\"") {
        return Err("it does not record the layout \"fanout\"".into());
    }
    let shards = field("shards")
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|&n| n > 0)
        .ok_or("it records no valid shard count")?;
    match field("format").and_then(|s| s.parse::<u64>().ok()) {
        Some(MARKER_FORMAT) => Ok(shards),
        Some(other) => Err(format!(
            "it uses marker format {other}, and this build reads only format {MARKER_FORMAT}; \
             upgrade diskcache_oxide"
        )),
        None => Err("it records no format".into()),
    }
}

/// The most a marker may hold: ours are well under 100 bytes.
const MARKER_MAX: u64 = 4096;

/// Read a marker without following a symlink, blocking on a FIFO or a device, or reading
/// more than [`MARKER_MAX`] bytes (D-035).
fn read_marker(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let invalid = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => invalid("it is a symbolic link, which is never followed".into()),
            _ => e,
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(invalid(format!(
            "it is {}, not a regular file",
            crate::basics::kind_of(&meta.file_type())
        )));
    }
    if meta.len() > MARKER_MAX {
        return Err(invalid(format!(
            "it is {} bytes long, more than a marker ever is ({MARKER_MAX})",
            meta.len()
        )));
    }
    let mut text = String::new();
    file.take(MARKER_MAX).read_to_string(&mut text)?;
    Ok(text)
}

/// The shard count recorded in `<directory>/fanout.json`, if the marker exists.
pub fn fanout_shards(directory: impl AsRef<Path>) -> Result<Option<u64>> {
    let path = directory.as_ref().join(FANOUT_MARKER);
    let text = match read_marker(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("reading the FanoutCache marker", Some(path), e)),
    };
    parse_marker(&text)
        .map(Some)
        .map_err(|why| Error::LayoutMismatch(Mismatch::BadMarker { path, why }))
}

/// Refuse to open `directory` as a plain cache if it is a FanoutCache root. Writes nothing.
pub(crate) fn refuse_fanout_root(directory: &Path) -> Result<()> {
    if !directory.join(FANOUT_MARKER).exists() {
        return Ok(());
    }
    Err(Error::LayoutMismatch(Mismatch::FanoutRoot {
        directory: directory.to_path_buf(),
        shards: fanout_shards(directory).ok().flatten(),
    }))
}

/// Claim `directory` as the root of a FanoutCache with `shards` shards.
///
/// Creates the directory if needed. Raises [`Error::LayoutMismatch`] (changing nothing) if a
/// plain cache lives there or the marker records another shard count. Otherwise writes the
/// marker atomically (a temporary file hard-linked into place, so concurrent callers agree on
/// one marker) — or writes nothing when the marker already matches.
pub fn claim_fanout(directory: impl AsRef<Path>, shards: u64) -> Result<()> {
    let directory = directory.as_ref();
    if shards == 0 {
        return Err(Error::invalid("shards must be at least 1"));
    }
    let db = directory.join(DB_NAME);
    if db.exists() {
        return Err(Error::LayoutMismatch(Mismatch::PlainCache {
            directory: directory.to_path_buf(),
        }));
    }
    if let Some(found) = fanout_shards(directory)? {
        return check_shards(directory, found, shards);
    }
    std::fs::create_dir_all(directory).map_err(|e| {
        Error::io(
            "creating the FanoutCache directory",
            Some(directory.to_path_buf()),
            e,
        )
    })?;
    let marker = directory.join(FANOUT_MARKER);
    let temp = temp_path(directory);
    let written = (|| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        f.write_all(marker_text(shards).as_bytes())?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(Error::io(
            "writing the FanoutCache marker",
            Some(temp.clone()),
            e,
        ));
    }
    // link() fails with EEXIST if another caller got there first: then theirs stands.
    let linked = std::fs::hard_link(&temp, &marker);
    let _ = std::fs::remove_file(&temp);
    match linked {
        Ok(()) => {
            if let Ok(d) = std::fs::File::open(directory) {
                let _ = d.sync_all();
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let found = fanout_shards(directory)?.unwrap_or(shards);
            check_shards(directory, found, shards)
        }
        Err(e) => Err(Error::io("writing the FanoutCache marker", Some(marker), e)),
    }
}

fn check_shards(directory: &Path, found: u64, asked: u64) -> Result<()> {
    if found == asked {
        return Ok(());
    }
    Err(Error::LayoutMismatch(Mismatch::Shards {
        directory: directory.to_path_buf(),
        found,
        asked,
    }))
}

fn temp_path(directory: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    directory.join(format!(
        ".{FANOUT_MARKER}.{}.{n}.{nanos}.tmp",
        std::process::id()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_round_trips() {
        assert_eq!(parse_marker(&marker_text(8)), Ok(8));
        assert!(parse_marker("{\"layout\": \"plain\", \"shards\": 8, \"format\": 1}").is_err());
        assert!(parse_marker("{\"layout\": \"fanout\", \"shards\": 0, \"format\": 1}").is_err());
        assert!(parse_marker("{\"layout\": \"fanout\", \"shards\": 4, \"format\": 2}").is_err());
        assert_eq!(
            parse_marker("{ \"format\":1,\"shards\" : 3 , \"layout\":\"fanout\" }"),
            Ok(3)
        );
    }
}
