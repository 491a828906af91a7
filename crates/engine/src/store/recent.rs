//! Recently read small values, valid while no process has committed a write to their rows
//! (D-017, D-065).
//!
//! A read costs two `fcntl` calls on SQLite's shared-memory WAL index, which is most of a
//! get. Every commit, by any process, rewrites the WAL index header; this connection maps that
//! header, so comparing it with the snapshot taken before a cached read proves that nothing
//! changed since, and the cached entry is the current one. When the header did change, the
//! notes of the commits since (`notes`) say which rows they changed, and only those entries
//! are forgotten; where the notes do not reach from the snapshot to now, everything is.
//! Inside a transaction, and for values kept in files, reads always go to SQLite.

use crate::format::key::Side;
use crate::format::key::{Key, Scalar};
use crate::format::stored::{Entry, StoredValue};
use crate::os::fork;
use crate::store::notes::{self, Header as Snapshot, Note, Notes};
use crate::store::statements::Db;
use rusqlite::{ffi, Connection};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::os::raw::c_void;
use std::sync::{Arc, Mutex, MutexGuard};

/// Size of one copy of SQLite's `WalIndexHdr`, at the start of the first shared-memory region.
const HEADER: usize = notes::HEADER;
/// Values larger than this are not kept.
const MAX_VALUE: usize = 16 * 1024;
/// At most this many bytes of values per connection (cleared when exceeded).
const MAX_BYTES: usize = 4 * 1024 * 1024;
const MAX_ENTRIES: usize = 8192;
/// Notes followed at most per call (as many as a handle keeps in memory); further behind
/// than this, everything is forgotten.
const MAX_NOTES: usize = 4096;

/// A queue's end: its prefix and side.
type QueueEnd = (Option<String>, Side);

/// A connection's side of the memo: its mapping of the WAL index header, the notes file and
/// the header its open write transaction started from. The remembered entries themselves
/// are the handle's, shared by its threads' connections (`Memo`).
pub(crate) struct Recent {
    /// The mapping, once this connection has one. While it is held, this connection keeps
    /// SQLite's shared lock on the WAL index (its `DMS` byte) and on `cache.db`, so no
    /// process can delete the WAL and start a new one from scratch: see `Memo::hold`.
    header: Option<Header>,
    /// `fork::fork_generation()` when `header` was mapped.
    mapped_in: u64,
    /// The directory's notes, where there is a file to keep them in.
    notes: Option<Arc<Notes>>,
    /// The header when this connection's open write transaction took the write lock.
    writing_from: Option<Snapshot>,
    memo: Arc<Mutex<Memo>>,
}

/// The entries one handle remembers, valid as of `snapshot`. One per handle, not per
/// connection: a value any of its threads read serves them all, and a thread that waited for
/// the GIL finds the entries the others kept current.
pub(crate) struct Memo {
    snapshot: [u8; HEADER],
    /// By the key's hash: the key, its entry and the rowid it was read from.
    entries: HashMap<u64, (Key, Entry, i64)>,
    /// The key hash of each remembered rowid.
    rows: HashMap<i64, u64>,
    /// Queue ends lately peeked, by (prefix, side): the live item there, or none.
    fronts: HashMap<QueueEnd, Option<(Key, Entry)>>,
    bytes: usize,
    /// How many of this handle's connections map the WAL index now, in the process of fork
    /// generation `holders_in`.
    holders: usize,
    holders_in: u64,
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

    /// The header, if both of SQLite's copies agree: a writer writes the second copy, then
    /// the first, so two equal copies read first to second are one whole header (SQLite
    /// reads them the same way). `None` while a writer is between the two.
    fn read_whole(&self) -> Option<[u8; HEADER]> {
        let first = self.read();
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        // SAFETY: the second copy follows the first in the same mapped region.
        let second = unsafe { std::ptr::read_volatile(self.0.add(1)) };
        (first == second).then_some(first)
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

impl Memo {
    pub(crate) fn new() -> Memo {
        Memo {
            snapshot: [0; HEADER],
            entries: HashMap::new(),
            rows: HashMap::new(),
            fronts: HashMap::new(),
            bytes: 0,
            holders: 0,
            holders_in: fork::fork_generation(),
        }
    }

    /// A connection of this handle mapped the WAL index. If none did until now, everything
    /// is forgotten: the header proves nothing across a time when this handle held no
    /// mapping. When the last connection of all processes closes, SQLite checkpoints the
    /// WAL and deletes it with the `-shm`; the next connection rebuilds the header from an
    /// empty WAL, byte for byte the header of any other empty WAL, whatever was committed
    /// meanwhile. A mapping held shuts that door (the closing connection cannot take the
    /// exclusive lock it needs to delete), so entries read while some connection of ours
    /// held one stay provable by the header and the notes. In a forked child none of the
    /// parent's locks are held: the count starts over.
    fn hold(&mut self) {
        let generation = fork::fork_generation();
        if self.holders_in != generation {
            self.holders_in = generation;
            self.holders = 0;
        }
        if self.holders == 0 {
            self.clear();
            self.snapshot = [0; HEADER]; // never a header: isInit is 0
        }
        self.holders += 1;
    }

    /// A connection that mapped the WAL index in fork generation `mapped_in` closed.
    fn release(&mut self, mapped_in: u64) {
        if self.holders_in == mapped_in && mapped_in == fork::fork_generation() {
            self.holders = self.holders.saturating_sub(1);
        }
    }

    /// Bring the snapshot up to `header`, forgetting the entries whose rows the commits since
    /// changed. False when the notes do not reach: then everything was forgotten, and the
    /// snapshot is left for the next `put` to set.
    fn sync(&mut self, header: &[u8; HEADER], notes: Option<&Notes>) -> bool {
        if header == &self.snapshot {
            return true;
        }
        if self.entries.is_empty() && self.fronts.is_empty() {
            self.snapshot = *header; // nothing to keep: no note needs reading
            return true;
        }
        if let Some(notes) = notes {
            for _ in 0..MAX_NOTES {
                let Some(note) = notes.find(&self.snapshot) else {
                    break;
                };
                self.apply(&note);
                if &self.snapshot == header {
                    return true;
                }
            }
        }
        self.clear();
        false
    }

    /// Forget what `note`'s commit changed; the snapshot moves to its `after`.
    fn apply(&mut self, note: &Note) {
        match &note.rowids {
            None => self.clear(),
            Some(rowids) => {
                if !rowids.is_empty() {
                    self.fronts.clear();
                }
                for rowid in rowids {
                    if let Some(h) = self.rows.remove(rowid) {
                        if let Some((_, e, _)) = self.entries.remove(&h) {
                            self.bytes -= size_of(&e).unwrap_or(0);
                        }
                    }
                }
            }
        }
        self.snapshot = note.after;
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.rows.clear();
        self.fronts.clear();
        self.bytes = 0;
    }
}

impl Recent {
    pub(crate) fn new(notes: Option<Arc<Notes>>, memo: Arc<Mutex<Memo>>) -> Recent {
        Recent {
            header: None,
            mapped_in: 0,
            notes,
            writing_from: None,
            memo,
        }
    }

    fn memo(&self) -> MutexGuard<'_, Memo> {
        // A panic while the memo was held can only have left entries to forget.
        self.memo.lock().unwrap_or_else(|poisoned| {
            let mut memo = poisoned.into_inner();
            memo.clear();
            memo
        })
    }

    /// This connection's mapping of the header, mapped now if it was not yet (and then
    /// counted as the handle's, `Memo::hold`).
    fn mapped(&mut self, db: &Connection) -> Option<&Header> {
        if self.header.is_none() {
            self.header = Header::map(db);
            if self.header.is_some() {
                self.mapped_in = fork::fork_generation();
                self.memo().hold();
            }
        }
        self.header.as_ref()
    }

    /// The header now, or `None` when it cannot be read (not mapped yet, not initialised, or
    /// a writer is changing it).
    pub(crate) fn now(&mut self, db: &Connection) -> Option<[u8; HEADER]> {
        let h = self.mapped(db)?.read_whole()?;
        (h[12] != 0).then_some(h) // isInit
    }

    /// A cached entry for `key`, if no commit since it was read changed its row.
    pub(crate) fn get(&mut self, header: &[u8; HEADER], key: &Key) -> Option<Entry> {
        let notes = self.notes.as_deref();
        let mut memo = self.memo();
        if !memo.sync(header, notes) {
            return None;
        }
        match memo.entries.get(&hash(key)) {
            Some((k, e, _)) if k == key => Some(e.clone()),
            _ => None,
        }
    }

    /// Remember an entry read from row `rowid` after `header` was taken.
    pub(crate) fn put(&mut self, header: [u8; HEADER], key: &Key, entry: &Entry, rowid: i64) {
        let Some(size) = size_of(entry) else {
            return;
        };
        if size > MAX_VALUE {
            return;
        }
        let notes = self.notes.as_deref();
        let mut memo = self.memo();
        if !memo.sync(&header, notes) {
            memo.snapshot = header;
        }
        if memo.bytes + size > MAX_BYTES || memo.entries.len() >= MAX_ENTRIES {
            memo.clear();
        }
        let h = hash(key);
        if let Some((_, old, old_row)) = memo.entries.insert(h, (key.clone(), entry.clone(), rowid))
        {
            memo.bytes -= size_of(&old).unwrap_or(0);
            memo.rows.remove(&old_row);
        }
        if let Some(other) = memo.rows.insert(rowid, h) {
            // Another key read from this rowid earlier: that row was since deleted and its
            // rowid reused, so the earlier entry is not current.
            if other != h {
                if let Some((_, e, _)) = memo.entries.remove(&other) {
                    memo.bytes -= size_of(&e).unwrap_or(0);
                }
            }
        }
        memo.bytes += size;
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
        let notes = self.notes.as_deref();
        let mut memo = self.memo();
        if !memo.sync(header, notes) {
            return None;
        }
        let found = memo.fronts.get(&(prefix.map(str::to_owned), side))?;
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
        if let Some((_, e)) = item {
            if matches!(e.value, StoredValue::File(_) | StoredValue::Deferred(_)) {
                return;
            }
        }
        let notes = self.notes.as_deref();
        let mut memo = self.memo();
        if !memo.sync(&header, notes) {
            memo.snapshot = header;
        }
        if memo.fronts.len() >= 64 {
            memo.fronts.clear();
        }
        let item = item.map(|(k, e)| (k.clone(), e.clone()));
        memo.fronts.insert((prefix.map(str::to_owned), side), item);
    }

    /// This connection just took the write lock for a transaction (`BEGIN IMMEDIATE`): note
    /// the header, which no one else can change until it commits, and start collecting the
    /// rows it changes.
    pub(crate) fn writing(&mut self, db: &Db) {
        db.start_changes();
        self.writing_from = self.mapped(db).and_then(Header::read_whole);
    }

    /// The transaction is about to commit: have its note left the moment its commit frame
    /// is in the WAL (`notes::note_at_commit`).
    pub(crate) fn committing(&mut self, db: &Db) {
        if let (Some(before), Some(notes)) = (self.writing_from, &self.notes) {
            notes::note_at_commit(notes.clone(), before, db.changes());
        }
    }

    /// The transaction rolled back: nothing to note.
    pub(crate) fn rolled_back(&mut self) {
        self.writing_from = None;
        notes::noted_at_commit();
    }

    /// This connection's transaction committed: make sure every other connection can find
    /// the note of what it changed, and apply it to the memo. The note left at the commit
    /// frame stands unless the header after the commit, read now, shows it guessed wrong;
    /// nothing is noted when the commit wrote nothing, and no better note is made when the
    /// header now cannot be shown to be this commit's (another commit already followed it,
    /// or the WAL was started over): readers then forget everything.
    pub(crate) fn committed(&mut self, db: &Db) {
        let predicted = notes::noted_at_commit();
        let Some(before) = self.writing_from.take() else {
            return;
        };
        let rowids = db.take_changes();
        let Some(frames) = notes::committed_frames() else {
            return; // wrote no frames: the header did not move
        };
        let seen = self
            .header
            .as_ref()
            .and_then(Header::read_whole)
            .filter(|after| notes::one_commit(&before, after, frames));
        let after = match (seen, predicted) {
            (Some(after), Some(guess)) if after == guess => after,
            (Some(after), _) => {
                let note = Note {
                    before,
                    after,
                    rowids: rowids.clone(),
                };
                if let Some(notes) = &self.notes {
                    notes.publish(&note);
                }
                after
            }
            (None, Some(guess)) => guess,
            (None, None) => return,
        };
        let mut memo = self.memo();
        if memo.snapshot == before {
            memo.apply(&Note {
                before,
                after,
                rowids,
            });
        }
    }
}

impl Recent {
    /// The connection is about to close: it no longer counts as holding the WAL index. Done
    /// before the close, so that a thread opening a connection meanwhile forgets everything
    /// rather than trusting a header that this close may let SQLite delete.
    pub(crate) fn unmap(&mut self) {
        if self.header.take().is_some() {
            let mapped_in = self.mapped_in;
            self.memo().release(mapped_in);
        }
    }
}

impl Drop for Recent {
    fn drop(&mut self) {
        // Inherited through fork(), a connection is never closed by this process, and
        // `release` ignores the parent's count.
        self.unmap();
    }
}

/// The bytes a remembered entry counts for, or `None` for a value that is never remembered.
fn size_of(entry: &Entry) -> Option<usize> {
    match &entry.value {
        StoredValue::Int(_) | StoredValue::Float(_) => Some(8),
        StoredValue::Str(s) => Some(s.len()),
        StoredValue::Bytes(b) | StoredValue::Encoded(b) | StoredValue::Pickled(b) => Some(b.len()),
        StoredValue::File(_) | StoredValue::Deferred(_) => None,
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
