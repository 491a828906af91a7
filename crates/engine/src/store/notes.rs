//! What each commit changed, noted for the memo of recent reads in every process (D-065).
//!
//! The memo (D-017, `recent`) is valid while SQLite's WAL index header is unchanged, and any
//! commit changes it; so with a write every ten calls, as in python-diskcache's mixed
//! workload, almost no get found its value remembered. Here each of our commits leaves a
//! note: the header before it, the header after it and the rowids of the `cache` rows it
//! inserted, updated or deleted. A connection whose header moved on walks the notes from
//! its snapshot to the header it sees now and forgets only the rows they name.
//!
//! Why this cannot serve a stale value:
//! - A note is written only for a commit that is known to be the one move from `before` to
//!   `after`: `before` is read holding the write lock (no one else can commit), and `after`
//!   is read once the commit returns, taken only if its frame count is the one SQLite told
//!   the WAL hook, its salts are `before`'s and its change counter is one more.
//! - A reader accepts a chain only if each note's `before` is, byte for byte, the previous
//!   note's `after` (the 48-byte header holds the change counter, the frame count, the
//!   salts and the running checksum of the WAL's frames), from its snapshot to now. A commit
//!   that left no note (a stock SQLite, a process killed before writing its note, a WAL
//!   started over) breaks the chain, and the reader forgets everything, as before.
//! - The rowids come from SQLite's update hook, which sees every row a statement inserts,
//!   updates or deletes in a rowid table; the cache table has no `REPLACE` and no
//!   unconditional `DELETE`, the two cases the hook does not see. A remembered entry names
//!   the row it was read from; a key written again is either that row updated or that row
//!   deleted (the key index is unique), so both show up in a note.
//! - A torn note (two writers in one slot, or a reader racing a writer) fails its checksum
//!   and counts as missing. A note written over by a newer one counts as missing.
//!
//! The file is `.notes` in the cache directory, 256 slots of 512 bytes, written with
//! `pwrite` and read with `pread`: nothing is mapped, so a file truncated under us can only
//! make a note missing. It is opened without following a link and used only if it is a
//! regular file; otherwise (and on a read-only handle that finds none) the memo forgets
//! everything at every commit, as it did before notes.

use crate::os::modes::Modes;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;

/// The notes file's name inside a cache directory.
pub(crate) const NOTES_NAME: &str = ".notes";

/// Size of one copy of SQLite's `WalIndexHdr`.
pub(crate) const HEADER: usize = 48;
pub(crate) type Header = [u8; HEADER];

const SLOTS: u64 = 256;
const SLOT: usize = 512;
/// Rowids a note can name; a commit that changed more rows says "anything may have changed".
pub(crate) const MAX_ROWIDS: usize = 48;
const MAGIC: u32 = 0x444e_5431; // "DNT1"
/// `n` for a commit that changed more rows than a note holds.
const OVERFLOW: u16 = u16::MAX;

const AT_CRC: usize = 4;
const AT_BEFORE: usize = 8;
const AT_AFTER: usize = AT_BEFORE + HEADER;
const AT_COUNT: usize = AT_AFTER + HEADER;
const AT_ROWIDS: usize = AT_COUNT + 8;
const _: () = assert!(AT_ROWIDS + MAX_ROWIDS * 8 <= SLOT);

/// The WAL index header's change counter (`iChange`), bumped by every commit.
pub(crate) fn change_counter(h: &Header) -> u32 {
    u32::from_ne_bytes([h[8], h[9], h[10], h[11]])
}

/// The header's frame count (`mxFrame`).
pub(crate) fn frames(h: &Header) -> u32 {
    u32::from_ne_bytes([h[16], h[17], h[18], h[19]])
}

/// The header's salts: they change when the WAL is started over.
fn salts(h: &Header) -> &[u8] {
    &h[32..40]
}

/// Whether `after` is the header a single commit of `frames` frames made from `before`.
pub(crate) fn one_commit(before: &Header, after: &Header, frames_now: u32) -> bool {
    frames(after) == frames_now
        && salts(after) == salts(before)
        && change_counter(after) == change_counter(before).wrapping_add(1)
}

/// SQLite's WAL index header checksum (`walChecksumBytes`, native byte order) of the
/// header's first 40 bytes.
fn header_checksum(h: &Header) -> [u8; 8] {
    let (mut s1, mut s2) = (0u32, 0u32);
    for pair in h[..40].chunks_exact(8) {
        let a = u32::from_ne_bytes(pair[..4].try_into().expect("4 bytes"));
        let b = u32::from_ne_bytes(pair[4..].try_into().expect("4 bytes"));
        s1 = s1.wrapping_add(a).wrapping_add(s2);
        s2 = s2.wrapping_add(b).wrapping_add(s1);
    }
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&s1.to_ne_bytes());
    out[4..].copy_from_slice(&s2.to_ne_bytes());
    out
}

/// The header SQLite will publish for a commit made from `before` whose commit frame, with
/// `frame` as its 24-byte header, was written at `offset` in the WAL: what
/// `sqlite3WalFrames` and `walIndexWriteHdr` compute. The salts are the frame's: when the
/// commit started the WAL over, they are new. `None` when SQLite left the frame's salts and
/// checksum to be filled in later (it zeroes them when it rewrites frames of the same
/// transaction). A wrong guess is harmless: no reader's header ever equals it, so its chain
/// breaks and it forgets everything.
pub(crate) fn predict_after(before: &Header, frame: &[u8; 24], offset: i64) -> Option<Header> {
    if frame[8..24].iter().all(|&b| b == 0) {
        return None;
    }
    let coded = u32::from(u16::from_ne_bytes([before[14], before[15]]));
    let page = (coded & 0xfe00) + ((coded & 1) << 16);
    let frame_size = i64::from(page) + 24;
    if page == 0 || offset < 32 || (offset - 32) % frame_size != 0 {
        return None;
    }
    let index = u32::try_from((offset - 32) / frame_size + 1).ok()?;
    let mut after = *before;
    after[0..4].copy_from_slice(&3_007_000u32.to_ne_bytes()); // WALINDEX_MAX_VERSION
    after[8..12].copy_from_slice(&change_counter(before).wrapping_add(1).to_ne_bytes());
    after[12] = 1; // isInit
    after[16..20].copy_from_slice(&index.to_ne_bytes());
    after[32..40].copy_from_slice(&frame[8..16]); // aSalt, as bytes
    let be = |at: usize| u32::from_be_bytes(frame[at..at + 4].try_into().expect("4 bytes"));
    after[20..24].copy_from_slice(&be(4).to_ne_bytes()); // nPage
    after[24..28].copy_from_slice(&be(16).to_ne_bytes()); // aFrameCksum
    after[28..32].copy_from_slice(&be(20).to_ne_bytes());
    let sum = header_checksum(&after);
    after[40..48].copy_from_slice(&sum);
    Some(after)
}

thread_local! {
    /// The WAL's frame count after this thread's last commit that wrote frames, as SQLite
    /// tells the WAL hook; taken by `committed_frames`.
    static COMMITTED: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
}

/// The WAL hook saw this thread commit, leaving `frames` frames in the WAL.
pub(crate) fn commit_seen(frames: u32) {
    let _ = COMMITTED.try_with(|c| c.set(Some(frames)));
}

/// Forget any commit seen so far on this thread, before running a `COMMIT`.
pub(crate) fn expect_commit() {
    let _ = COMMITTED.try_with(|c| c.set(None));
}

/// The WAL's frame count after the commit this thread just ran, if it wrote frames.
pub(crate) fn committed_frames() -> Option<u32> {
    COMMITTED.try_with(|c| c.take()).ok().flatten()
}

thread_local! {
    /// The `after` of the note this thread's commit left from the VFS, if it did.
    static PREDICTED: std::cell::Cell<Option<Header>> = const { std::cell::Cell::new(None) };
}

/// Leave the note of this thread's coming `COMMIT` as soon as its commit frame is in the WAL,
/// before SQLite publishes the new header: a reader that sees the header finds the note.
pub(crate) fn note_at_commit(notes: Arc<Notes>, before: Header, rowids: Option<Vec<i64>>) {
    let _ = PREDICTED.try_with(|p| p.set(None));
    crate::os::vfs::on_commit_frame(Some(Box::new(move |frame, offset| {
        if let Some(after) = predict_after(&before, frame, offset) {
            notes.publish(&Note {
                before,
                after,
                rowids,
            });
            let _ = PREDICTED.try_with(|p| p.set(Some(after)));
        }
    })));
}

/// The `after` of the note left at this thread's commit, if any; and no more observing.
pub(crate) fn noted_at_commit() -> Option<Header> {
    crate::os::vfs::on_commit_frame(None);
    PREDICTED.try_with(|p| p.take()).ok().flatten()
}

/// What one commit changed in the `cache` table.
#[derive(Clone)]
pub(crate) struct Note {
    pub(crate) before: Header,
    pub(crate) after: Header,
    /// `None`: more rows than a note holds; anything may have changed.
    pub(crate) rowids: Option<Vec<i64>>,
}

pub(crate) struct Notes {
    file: File,
    kept: Arc<Kept>,
}

/// Notes kept in memory: more than the file holds, since a thread that waited its turn for
/// the GIL may find thousands of commits by the others since it last read.
const KEPT: usize = 4096;

/// The notes this handle's connections wrote lately, by change counter, shared by them: the
/// threads of one process find each other's notes without a system call.
pub(crate) struct Kept {
    slots: std::sync::Mutex<Vec<Option<Arc<Note>>>>,
}

impl Kept {
    pub(crate) fn new() -> Kept {
        Kept {
            slots: std::sync::Mutex::new(vec![None; KEPT]),
        }
    }

    fn put(&self, note: Note) {
        if let Ok(mut slots) = self.slots.lock() {
            let at = change_counter(&note.before) as usize % KEPT;
            slots[at] = Some(Arc::new(note));
        }
    }

    fn get(&self, before: &Header) -> Option<Arc<Note>> {
        let slots = self.slots.lock().ok()?;
        slots[change_counter(before) as usize % KEPT]
            .as_ref()
            .filter(|n| &n.before == before)
            .cloned()
    }
}

impl Notes {
    /// Open (a writable handle: creating) the directory's notes file, or `None` where there
    /// is none to use: a read-only handle that finds none, or anything but a regular file.
    pub(crate) fn open(
        directory: &Path,
        writable: bool,
        modes: Modes,
        kept: Arc<Kept>,
    ) -> Option<Notes> {
        let path = directory.join(NOTES_NAME);
        let mut options = OpenOptions::new();
        options
            .read(true)
            .write(writable)
            .create(writable)
            .truncate(false)
            .mode(modes.file)
            // Never through a symlink, and never blocking on a FIFO put in its place (D-035).
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC);
        let file = options.open(&path).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() {
            return None;
        }
        if writable {
            modes.widen(&file).ok()?;
            if meta.len() < SLOTS * SLOT as u64 {
                file.set_len(SLOTS * SLOT as u64).ok()?;
            }
        }
        Some(Notes { file, kept })
    }

    /// Write the note of one commit. A failure (a full disk) only loses the note.
    pub(crate) fn publish(&self, note: &Note) {
        let mut slot = [0u8; SLOT];
        slot[..4].copy_from_slice(&MAGIC.to_le_bytes());
        slot[AT_BEFORE..AT_AFTER].copy_from_slice(&note.before);
        slot[AT_AFTER..AT_COUNT].copy_from_slice(&note.after);
        match &note.rowids {
            Some(rowids) if rowids.len() <= MAX_ROWIDS => {
                slot[AT_COUNT..AT_COUNT + 2].copy_from_slice(&(rowids.len() as u16).to_le_bytes());
                for (i, r) in rowids.iter().enumerate() {
                    let at = AT_ROWIDS + i * 8;
                    slot[at..at + 8].copy_from_slice(&r.to_le_bytes());
                }
            }
            _ => slot[AT_COUNT..AT_COUNT + 2].copy_from_slice(&OVERFLOW.to_le_bytes()),
        }
        let crc = crate::format::stored::checksum(&slot[AT_BEFORE..]);
        slot[AT_CRC..AT_BEFORE].copy_from_slice(&crc.to_le_bytes());
        let _ = self.file.write_all_at(&slot, offset(&note.before));
        self.kept.put(note.clone());
    }

    /// The note of the commit made from `before`, if there is one and it is whole.
    pub(crate) fn find(&self, before: &Header) -> Option<Arc<Note>> {
        if let Some(note) = self.kept.get(before) {
            return Some(note);
        }
        let mut slot = [0u8; SLOT];
        self.file.read_exact_at(&mut slot, offset(before)).ok()?;
        if slot[..4] != MAGIC.to_le_bytes() || slot[AT_BEFORE..AT_AFTER] != before[..] {
            return None;
        }
        let crc = u32::from_le_bytes(slot[AT_CRC..AT_BEFORE].try_into().ok()?);
        if crc != crate::format::stored::checksum(&slot[AT_BEFORE..]) {
            return None;
        }
        let count = u16::from_le_bytes([slot[AT_COUNT], slot[AT_COUNT + 1]]);
        let rowids = match count {
            OVERFLOW => None,
            n if usize::from(n) <= MAX_ROWIDS => Some(
                (0..usize::from(n))
                    .map(|i| {
                        let at = AT_ROWIDS + i * 8;
                        i64::from_le_bytes(slot[at..at + 8].try_into().expect("8 bytes"))
                    })
                    .collect(),
            ),
            _ => return None,
        };
        Some(Arc::new(Note {
            before: *before,
            after: slot[AT_AFTER..AT_COUNT].try_into().ok()?,
            rowids,
        }))
    }
}

/// Where the note of the commit made from `before` goes: one slot per change counter, so a
/// reader finds it with one read.
fn offset(before: &Header) -> u64 {
    slot(before) as u64 * SLOT as u64
}

fn slot(before: &Header) -> usize {
    (u64::from(change_counter(before)) % SLOTS) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cache, Key, OpenOptions, ValueRef, WriteOptions};

    /// The WAL index header as SQLite last published it (the `-shm` file's first copy).
    fn published(dir: &Path) -> Header {
        let shm = std::fs::read(dir.join("cache.db-shm")).unwrap();
        shm[..HEADER].try_into().unwrap()
    }

    #[test]
    fn each_commit_leaves_the_note_that_leads_to_the_header_sqlite_published() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path(), OpenOptions::default()).unwrap();
        cache
            .set(&Key::from(0), ValueRef::Int(0), &WriteOptions::default())
            .unwrap();
        let notes = Notes::open(dir.path(), false, Modes::PRIVATE, Arc::new(Kept::new())).unwrap();
        let mut before = published(dir.path());
        for i in 1..400i64 {
            let key = Key::from(i % 37);
            if i % 5 == 0 {
                cache.delete(&key).unwrap();
            } else {
                cache
                    .set(&key, ValueRef::Int(i), &WriteOptions::default())
                    .unwrap();
            }
            let now = published(dir.path());
            if now == before {
                continue; // a delete that found nothing wrote nothing
            }
            // Past 1,000 frames a checkpoint lets the next commit start the WAL over: its
            // note has the new salts.
            let note = notes.find(&before).expect("a note from the header before");
            // The guess made at the commit frame is SQLite's header, byte for byte (a wrong
            // guess would have been written over, but only after readers had missed it).
            assert_eq!(note.after, now, "commit {i}");
            let rowids = note.rowids.as_ref().expect("one row named");
            assert!(!rowids.is_empty() || i % 5 == 0, "commit {i}");
            before = now;
        }
        // Many rows in one transaction: the note says anything may have changed.
        cache
            .transact(|| {
                for i in 0..100i64 {
                    cache.set(
                        &Key::from(1000 + i),
                        ValueRef::Int(i),
                        &WriteOptions::default(),
                    )?;
                }
                Ok(())
            })
            .unwrap();
        let note = notes.find(&before).expect("a note for the transaction");
        assert_eq!(note.after, published(dir.path()));
        assert!(note.rowids.is_none());
    }

    #[test]
    fn a_torn_or_foreign_slot_is_no_note() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path(), OpenOptions::default()).unwrap();
        let before = published(dir.path());
        cache
            .set(&Key::from(1), ValueRef::Int(1), &WriteOptions::default())
            .unwrap();
        let notes = Notes::open(dir.path(), false, Modes::PRIVATE, Arc::new(Kept::new())).unwrap();
        assert!(notes.find(&before).is_some());
        // One byte of the slot changed: its checksum fails.
        let path = dir.path().join(NOTES_NAME);
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(&[0xAA], offset(&before) + 300).unwrap();
        assert!(notes.find(&before).is_none());
        // A header no commit started from has no note.
        let mut other = before;
        other[40] ^= 1;
        assert!(notes.find(&other).is_none());
    }
}
