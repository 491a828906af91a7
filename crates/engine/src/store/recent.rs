//! Recently read small values, valid only while no process has committed a write (D-017).
//!
//! A read costs two `fcntl` calls on SQLite's shared-memory WAL index, which is most of a
//! get. Every commit, by any process, rewrites the WAL index header; this connection maps that
//! header, so comparing it with the snapshot taken before a cached read proves that nothing
//! changed since, and the cached entry is the current one. Any difference clears the cache.
//! Inside a transaction, and for values kept in files, reads always go to SQLite.

use crate::format::key::Side;
use crate::format::key::{Key, Scalar};
use crate::format::stored::{Entry, StoredValue};
use rusqlite::{ffi, Connection};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::os::raw::c_void;

/// Size of one copy of SQLite's `WalIndexHdr`, at the start of the first shared-memory region.
const HEADER: usize = 48;
/// Values larger than this are not kept.
const MAX_VALUE: usize = 16 * 1024;
/// At most this many bytes of values per connection (cleared when exceeded).
const MAX_BYTES: usize = 4 * 1024 * 1024;
const MAX_ENTRIES: usize = 8192;

/// A queue's end: its prefix and side.
type QueueEnd = (Option<String>, Side);

pub(crate) struct Recent {
    header: Option<Header>,
    snapshot: [u8; HEADER],
    entries: HashMap<u64, (Key, Entry)>,
    /// Queue ends lately peeked, by (prefix, side): the live item there, or none.
    fronts: HashMap<QueueEnd, Option<(Key, Entry)>>,
    bytes: usize,
}

/// The WAL index header as this connection maps it. Valid while the connection is open; the
/// `Recent` that holds it lives in the same `Conn` and is dropped with it.
struct Header(*const [u8; HEADER]);

// SAFETY: only the thread currently owning the connection reads through the pointer, and the
// mapping lives as long as the connection, which moves with it.
unsafe impl Send for Header {}

/// The first region of a connection's WAL index (`-shm`), as SQLite's VFS mapped it, or `None`
/// before it is mapped.
///
/// # Safety
/// `db` must be an open connection; the pointer is valid while it stays open.
pub(crate) unsafe fn wal_index(db: *mut ffi::sqlite3) -> Option<*const u8> {
    // SAFETY: per the contract; we only ask SQLite's own VFS for the first shared-memory region
    // this connection already mapped (bExtend = 0).
    unsafe {
        let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
        let rc = ffi::sqlite3_file_control(
            db,
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_FILE_POINTER,
            (&mut file as *mut *mut ffi::sqlite3_file).cast::<c_void>(),
        );
        if rc != ffi::SQLITE_OK || file.is_null() || (*file).pMethods.is_null() {
            return None;
        }
        let methods = &*(*file).pMethods;
        let map = if methods.iVersion >= 2 {
            methods.xShmMap?
        } else {
            return None;
        };
        let mut region: *mut c_void = std::ptr::null_mut();
        if map(file, 0, 32 * 1024, 0, &mut region) != ffi::SQLITE_OK || region.is_null() {
            return None;
        }
        Some(region as *const u8)
    }
}

impl Header {
    fn map(db: &Connection) -> Option<Header> {
        // SAFETY: the handle is valid for the connection's life, and so is the mapping.
        unsafe { wal_index(db.handle()) }.map(|p| Header(p as *const [u8; HEADER]))
    }

    fn read(&self) -> [u8; HEADER] {
        // SAFETY: the region is at least 32 KiB and mapped while the connection is open.
        // Writers update it concurrently; a torn read can only differ from the snapshot.
        unsafe { std::ptr::read_volatile(self.0) }
    }
}

/// The database's size in pages as of the last commit by any process, from the WAL index
/// header (`nPage`), or `None` when that is not known there. `PRAGMA page_count` says the
/// same but is prepared again on every run, which cost a write more than a microsecond.
pub(crate) fn committed_pages(db: &Connection) -> Option<i64> {
    let h = Header::map(db)?.read();
    let pages = u32::from_ne_bytes([h[20], h[21], h[22], h[23]]);
    (h[12] != 0 && pages != 0).then_some(i64::from(pages))
}

impl Recent {
    pub(crate) fn new() -> Recent {
        Recent {
            header: None,
            snapshot: [0; HEADER],
            entries: HashMap::new(),
            fronts: HashMap::new(),
            bytes: 0,
        }
    }

    /// The header now, or `None` when it cannot be read (not mapped yet, or not initialised).
    pub(crate) fn now(&mut self, db: &Connection) -> Option<[u8; HEADER]> {
        if self.header.is_none() {
            self.header = Header::map(db);
        }
        let h = self.header.as_ref()?.read();
        (h[12] != 0).then_some(h) // isInit
    }

    /// A cached entry for `key`, if nothing was committed since it was read.
    pub(crate) fn get(&mut self, header: &[u8; HEADER], key: &Key) -> Option<&Entry> {
        if header != &self.snapshot {
            self.clear();
            return None;
        }
        match self.entries.get(&hash(key)) {
            Some((k, e)) if k == key => Some(e),
            _ => None,
        }
    }

    /// Remember an entry read from SQLite after `header` was taken.
    pub(crate) fn put(&mut self, header: [u8; HEADER], key: &Key, entry: &Entry) {
        let size = match &entry.value {
            StoredValue::Int(_) | StoredValue::Float(_) => 8,
            StoredValue::Str(s) => s.len(),
            StoredValue::Bytes(b) | StoredValue::Encoded(b) | StoredValue::Pickled(b) => b.len(),
            StoredValue::File(_) | StoredValue::Deferred(_) => return,
        };
        if size > MAX_VALUE {
            return;
        }
        if header != self.snapshot {
            self.clear();
            self.snapshot = header;
        }
        if self.bytes + size > MAX_BYTES || self.entries.len() >= MAX_ENTRIES {
            self.clear();
        }
        self.bytes += size;
        self.entries.insert(hash(key), (key.clone(), entry.clone()));
    }

    /// The remembered end of a queue, if nothing was committed since it was read and the item
    /// there has not expired since (then the next one may be live, and only SQLite knows).
    /// `Some(None)`: the queue was empty, and nothing committed since can have filled it.
    pub(crate) fn front(
        &mut self,
        header: &[u8; HEADER],
        prefix: Option<&str>,
        side: Side,
        now: f64,
    ) -> Option<Option<(Key, Entry)>> {
        if header != &self.snapshot {
            self.clear();
            return None;
        }
        let found = self.fronts.get(&(prefix.map(str::to_owned), side))?;
        match found {
            Some((_, e)) if e.expire_time.is_some_and(|t| t <= now) => None,
            other => Some(other.clone()),
        }
    }

    pub(crate) fn put_front(
        &mut self,
        header: [u8; HEADER],
        prefix: Option<&str>,
        side: Side,
        item: Option<(&Key, &Entry)>,
    ) {
        if header != self.snapshot {
            self.clear();
            self.snapshot = header;
        }
        if let Some((_, e)) = item {
            if matches!(e.value, StoredValue::File(_) | StoredValue::Deferred(_)) {
                return;
            }
        }
        if self.fronts.len() >= 64 {
            self.fronts.clear();
        }
        let item = item.map(|(k, e)| (k.clone(), e.clone()));
        self.fronts.insert((prefix.map(str::to_owned), side), item);
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.fronts.clear();
        self.bytes = 0;
    }
}

fn hash(key: &Key) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    match key {
        Key::Native(Scalar::Int(i)) => (0u8, i).hash(&mut h),
        Key::Native(Scalar::Float(f)) => (1u8, f.to_bits()).hash(&mut h),
        Key::Native(Scalar::Str(s)) => (2u8, s).hash(&mut h),
        Key::Native(Scalar::Bytes(b)) => (3u8, b).hash(&mut h),
        Key::Encoded(b) => (4u8, b).hash(&mut h),
        Key::Pickled(b) => (5u8, b).hash(&mut h),
    }
    h.finish()
}
