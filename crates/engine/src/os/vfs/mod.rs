//! A thin VFS over SQLite's own unix VFS: it writes each commit's WAL frames in one `pwrite`
//! (D-029, this file) and takes the WAL index locks with fewer `fcntl` calls (D-033, `locks`).
//!
//! SQLite appends a frame to the WAL as two writes, its 24-byte header and then the page, so a
//! commit of four pages costs eight system calls. This VFS collects a WAL file's appended
//! writes in memory and writes them out together as soon as the commit frame's page arrives
//! (the commit frame is the one whose header carries a database size), inside that `xWrite`,
//! so a failure (a full disk) is still reported to SQLite before it publishes the commit in
//! the WAL index. Any other call on the WAL file (read, sync, truncate, size, close, ...) and
//! any write that is not an append writes out what was collected first, so SQLite never sees
//! the file other than it would without this layer. Everything but the WAL file is SQLite's
//! own unix VFS, untouched: the on-disk format and the locking protocol are unchanged, and
//! other programs with a stock SQLite share the directory as before.

mod handoff;
mod locks;

pub(crate) use locks::{
    after_fork_in_child, after_fork_in_parent, before_fork, kernel_dropped_locks, settle,
    wait_for_write_lock,
};

use rusqlite::ffi;
use std::ffi::{c_int, c_void, CStr};
use std::ptr;
use std::sync::OnceLock;

/// The name this VFS is registered under.
pub(crate) const NAME: &CStr = c"diskcache_oxide";

/// The unix VFS writes at most 128 KiB - 1 bytes per call (it masks larger sizes), so what
/// is collected is written out once it reaches this, even before the commit frame.
const MAX_PENDING: usize = 124 * 1024;

const FRAME_HEADER: usize = 24;

/// What follows SQLite's own file object in ours, for a WAL file.
struct Pending {
    /// The unix VFS's methods for this file, which still do the work.
    real: *const ffi::sqlite3_io_methods,
    /// Appended bytes not yet written, starting at file offset `start`.
    bytes: Vec<u8>,
    start: i64,
    /// The last append was a commit frame's header: its page ends the commit.
    commit_next: bool,
    /// That header and its offset in the WAL, for the thread's commit observer.
    commit_frame: Option<([u8; FRAME_HEADER], i64)>,
}

/// Told of a commit frame once it is in the WAL: its header and its offset.
pub(crate) type CommitObserver = Box<dyn FnOnce(&[u8; FRAME_HEADER], i64)>;

thread_local! {
    /// Called when this thread's next commit frame is written, before SQLite publishes the
    /// commit in the WAL index (D-065).
    static ON_COMMIT: std::cell::RefCell<Option<CommitObserver>> =
        const { std::cell::RefCell::new(None) };
}

/// Have `observer` told of this thread's next commit frame (`None`: no longer).
pub(crate) fn on_commit_frame(observer: Option<CommitObserver>) {
    let _ = ON_COMMIT.try_with(|o| {
        if let Ok(mut o) = o.try_borrow_mut() {
            *o = observer;
        }
    });
}

fn commit_frame_written(header: &[u8; FRAME_HEADER], offset: i64) {
    let observer = ON_COMMIT
        .try_with(|o| o.try_borrow_mut().ok().and_then(|mut o| o.take()))
        .ok()
        .flatten();
    if let Some(observer) = observer {
        observer(header, offset);
    }
}

/// Our file object: SQLite's unix file first (so its methods can be handed the same pointer),
/// then a pointer: for a WAL file to its pending writes, for a main database file to its
/// connection's WAL index locks (`locks::Conn`), null for other files.
fn pending_slot(file: *mut ffi::sqlite3_file, root: &ffi::sqlite3_vfs) -> *mut *mut Pending {
    // SAFETY: xOpen was given `szOsFile` bytes, which is the root's size plus one pointer,
    // rounded up below so the slot is aligned.
    unsafe {
        file.cast::<u8>()
            .add(slot_offset(root))
            .cast::<*mut Pending>()
    }
}

fn slot_offset(root: &ffi::sqlite3_vfs) -> usize {
    let size = root.szOsFile as usize;
    let align = std::mem::align_of::<*mut Pending>();
    size.div_ceil(align) * align
}

struct Registered {
    root: *mut ffi::sqlite3_vfs,
}

// SAFETY: points to the unix VFS, which lives for the process and which SQLite itself shares
// between threads.
unsafe impl Send for Registered {}
unsafe impl Sync for Registered {}

static REGISTERED: OnceLock<Result<Registered, c_int>> = OnceLock::new();

/// Register the VFS (once per process). Returns SQLite's error code if it could not be.
pub(crate) fn register() -> Result<(), c_int> {
    let registered = REGISTERED.get_or_init(|| {
        // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS (unix), which lives for the
        // process; our copy is leaked for the same reason.
        unsafe {
            let rc = ffi::sqlite3_initialize();
            if rc != ffi::SQLITE_OK {
                return Err(rc);
            }
            let root = ffi::sqlite3_vfs_find(ptr::null());
            if root.is_null() {
                return Err(ffi::SQLITE_ERROR);
            }
            let mut ours: ffi::sqlite3_vfs = *root;
            ours.zName = NAME.as_ptr();
            ours.pNext = ptr::null_mut();
            ours.szOsFile = (slot_offset(&*root) + std::mem::size_of::<*mut Pending>()) as c_int;
            ours.xOpen = Some(open);
            ours.xSleep = Some(sleep);
            let ours = Box::into_raw(Box::new(ours));
            let rc = ffi::sqlite3_vfs_register(ours, 0);
            if rc != ffi::SQLITE_OK {
                return Err(rc);
            }
            Ok(Registered { root })
        }
    });
    registered.as_ref().map(|_| ()).map_err(|rc| *rc)
}

fn root() -> &'static ffi::sqlite3_vfs {
    match REGISTERED.get() {
        // SAFETY: registered before any connection uses the VFS; lives for the process.
        Some(Ok(r)) => unsafe { &*r.root },
        _ => unreachable!("the VFS is registered before it is opened"),
    }
}

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let root = root();
    let slot = pending_slot(file, root);
    // SAFETY: `file` has room for the root's object and our slot; the root VFS opens into the
    // start of it, exactly as if it had been handed the object directly.
    unsafe {
        *slot = ptr::null_mut();
        let xopen = root.xOpen.expect("the unix VFS has xOpen");
        let rc = xopen(root as *const _ as *mut _, name, file, flags, out_flags);
        if rc != ffi::SQLITE_OK || (*file).pMethods.is_null() {
            return rc;
        }
        if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 && !name.is_null() {
            let real = (*file).pMethods;
            let m = &*real;
            if crate::os::platform::engine_wal_index_locks()
                && m.iVersion >= 2
                && m.xShmMap.is_some()
                && m.xShmLock.is_some()
                && m.xShmUnmap.is_some()
                && m.xClose.is_some()
            {
                let path = CStr::from_ptr(name);
                *slot = Box::into_raw(Box::new(Db {
                    real,
                    locks: locks::Conn::new(path),
                }))
                .cast();
                (*file).pMethods = db_methods(real);
            }
            return ffi::SQLITE_OK;
        }
        if flags & ffi::SQLITE_OPEN_WAL == 0 {
            return rc;
        }
        let real = (*file).pMethods;
        *slot = Box::into_raw(Box::new(Pending {
            real,
            bytes: Vec::new(),
            start: 0,
            commit_next: false,
            commit_frame: None,
        }));
        (*file).pMethods = wal_methods(real);
    }
    ffi::SQLITE_OK
}

/// Our methods for WAL files: the unix methods' version and capabilities, with each call
/// writing out pending bytes first.
fn wal_methods(real: *const ffi::sqlite3_io_methods) -> *const ffi::sqlite3_io_methods {
    static METHODS: OnceLock<MethodsPtr> = OnceLock::new();
    METHODS
        .get_or_init(|| {
            // SAFETY: `real` is the unix VFS's static method table.
            let r = unsafe { &*real };
            let methods = ffi::sqlite3_io_methods {
                iVersion: r.iVersion,
                xClose: Some(close),
                xRead: Some(read),
                xWrite: Some(write),
                xTruncate: Some(truncate),
                xSync: Some(sync),
                xFileSize: Some(file_size),
                xLock: Some(lock),
                xUnlock: Some(unlock),
                xCheckReservedLock: Some(check_reserved_lock),
                xFileControl: Some(file_control),
                xSectorSize: Some(sector_size),
                xDeviceCharacteristics: Some(device_characteristics),
                xShmMap: r.xShmMap.map(|_| shm_map as _),
                xShmLock: r.xShmLock.map(|_| shm_lock as _),
                xShmBarrier: r.xShmBarrier.map(|_| shm_barrier as _),
                xShmUnmap: r.xShmUnmap.map(|_| shm_unmap as _),
                xFetch: r.xFetch.map(|_| fetch as _),
                xUnfetch: r.xUnfetch.map(|_| unfetch as _),
            };
            MethodsPtr(Box::into_raw(Box::new(methods)))
        })
        .0
}

/// Our methods for main database files: the unix methods, with the WAL index locks taken
/// through `locks`.
fn db_methods(real: *const ffi::sqlite3_io_methods) -> *const ffi::sqlite3_io_methods {
    static METHODS: OnceLock<MethodsPtr> = OnceLock::new();
    METHODS
        .get_or_init(|| {
            // SAFETY: `real` is the unix VFS's static method table.
            let mut methods = unsafe { *real };
            methods.xClose = Some(db_close);
            methods.xShmMap = Some(db_shm_map);
            methods.xShmLock = Some(db_shm_lock);
            methods.xShmUnmap = Some(db_shm_unmap);
            MethodsPtr(Box::into_raw(Box::new(methods)))
        })
        .0
}

/// What follows SQLite's unix object for a main database file.
struct Db {
    real: *const ffi::sqlite3_io_methods,
    locks: locks::Conn,
}

/// # Safety
/// `file` must be a main database file opened by `open` with `db_methods`, not yet closed.
unsafe fn db<'a>(file: *mut ffi::sqlite3_file) -> &'a mut Db {
    // SAFETY: per the contract, the slot holds the box made in `open`. SQLite uses a file
    // from one thread at a time.
    unsafe { &mut *(*pending_slot(file, root())).cast::<Db>() }
}

unsafe extern "C" fn db_shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    // SAFETY: SQLite calls us on a database file we opened; the unix method gets the same
    // object and arguments.
    unsafe {
        let d = db(file);
        let map = (*d.real).xShmMap.expect("checked in open");
        let rc = map(file, region, size, extend, out);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        match d.locks.attach() {
            ffi::SQLITE_OK => rc,
            err => err,
        }
    }
}

unsafe extern "C" fn db_shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: as for `db_shm_map`.
    unsafe { db(file).locks.lock(offset, n, flags) }
}

unsafe extern "C" fn db_shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    // SAFETY: as for `db_shm_map`. Our locks are released (and our descriptor closed, if this
    // was the process's last connection) before the unix VFS closes its own descriptor.
    unsafe {
        let d = db(file);
        d.locks.detach();
        ((*d.real).xShmUnmap.expect("checked in open"))(file, delete)
    }
}

unsafe extern "C" fn db_close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes each file once; the box made in `open` is freed here.
    unsafe {
        let slot = pending_slot(file, root());
        let mut d = Box::from_raw((*slot).cast::<Db>());
        *slot = ptr::null_mut();
        d.locks.detach();
        (*file).pMethods = d.real;
        ((*d.real).xClose.expect("unix files have xClose"))(file)
    }
}

/// SQLite sleeps between retries of a busy lock: settle held-back releases first, so this
/// thread never waits while holding more than SQLite asked for.
unsafe extern "C" fn sleep(_vfs: *mut ffi::sqlite3_vfs, micros: c_int) -> c_int {
    settle();
    let root = root();
    // SAFETY: the unix VFS's own xSleep.
    unsafe { (root.xSleep.expect("the unix VFS has xSleep"))(root as *const _ as *mut _, micros) }
}

struct MethodsPtr(*const ffi::sqlite3_io_methods);
// SAFETY: an immutable table, leaked for the process.
unsafe impl Send for MethodsPtr {}
unsafe impl Sync for MethodsPtr {}

/// The pending writes and the unix methods of one of our WAL files.
///
/// # Safety
/// `file` must be a WAL file opened by `open` and not yet closed.
unsafe fn pending<'a>(file: *mut ffi::sqlite3_file) -> &'a mut Pending {
    // SAFETY: per the contract, the slot holds the box made in `open`. SQLite uses a file
    // from one thread at a time.
    unsafe { &mut **pending_slot(file, root()) }
}

/// Write out what was collected. On failure the bytes are dropped: SQLite is told the write
/// failed and does not commit, and frames it never committed are never read.
unsafe fn flush(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: forwarded contract.
    let p = unsafe { pending(file) };
    p.commit_next = false;
    if p.bytes.is_empty() {
        return ffi::SQLITE_OK;
    }
    let xwrite = unsafe { (*p.real).xWrite.expect("unix files have xWrite") };
    let mut rc = ffi::SQLITE_OK;
    let mut offset = p.start;
    for chunk in p.bytes.chunks(MAX_PENDING) {
        // SAFETY: the unix xWrite on the same object, with our own buffer; a chunk is at
        // most MAX_PENDING bytes, so it fits in a c_int and in one unix write.
        rc = unsafe { xwrite(file, chunk.as_ptr().cast(), chunk.len() as c_int, offset) };
        if rc != ffi::SQLITE_OK {
            break;
        }
        offset += chunk.len() as i64;
    }
    p.bytes.clear();
    rc
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: SQLite calls us on a WAL file we opened, with `amount` readable bytes at `data`.
    unsafe {
        let p = pending(file);
        let appends = !p.bytes.is_empty() && offset == p.start + p.bytes.len() as i64;
        if !appends {
            let rc = flush(file);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
        }
        let p = pending(file);
        if p.bytes.is_empty() {
            p.start = offset;
        }
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), amount.max(0) as usize);
        p.bytes.extend_from_slice(bytes);
        if p.commit_next && appends {
            // The commit frame's page: write the whole commit now, while a failure can still
            // stop SQLite from publishing it.
            let frame = p.commit_frame.take();
            let rc = flush(file);
            if let (ffi::SQLITE_OK, Some((header, at))) = (rc, frame) {
                commit_frame_written(&header, at);
            }
            return rc;
        }
        // A frame header with a database size marks the commit frame (SQLite's WAL format).
        p.commit_next = bytes.len() == FRAME_HEADER && bytes[4..8] != [0, 0, 0, 0];
        p.commit_frame = if p.commit_next {
            let mut header = [0u8; FRAME_HEADER];
            header.copy_from_slice(bytes);
            Some((header, offset))
        } else {
            None
        };
        if p.bytes.len() >= MAX_PENDING {
            return flush(file);
        }
        ffi::SQLITE_OK
    }
}

/// Forward a call to the unix method after writing out pending bytes.
macro_rules! flushed {
    ($name:ident, $method:ident, ($($arg:ident: $ty:ty),*)) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            // SAFETY: SQLite calls us on a WAL file we opened; the unix method gets the same
            // object and arguments.
            unsafe {
                let rc = flush(file);
                if rc != ffi::SQLITE_OK {
                    return rc;
                }
                let m = (*pending(file).real).$method.expect(concat!("unix files have ", stringify!($method)));
                m(file $(, $arg)*)
            }
        }
    };
}

flushed!(read, xRead, (buf: *mut c_void, amount: c_int, offset: i64));
flushed!(truncate, xTruncate, (size: i64));
flushed!(sync, xSync, (flags: c_int));
flushed!(file_size, xFileSize, (size: *mut i64));
flushed!(lock, xLock, (level: c_int));
flushed!(unlock, xUnlock, (level: c_int));
flushed!(check_reserved_lock, xCheckReservedLock, (out: *mut c_int));
flushed!(file_control, xFileControl, (op: c_int, arg: *mut c_void));
flushed!(shm_map, xShmMap, (region: c_int, size: c_int, extend: c_int, out: *mut *mut c_void));
flushed!(shm_lock, xShmLock, (offset: c_int, n: c_int, flags: c_int));
flushed!(shm_unmap, xShmUnmap, (delete: c_int));
flushed!(fetch, xFetch, (offset: i64, amount: c_int, out: *mut *mut c_void));
flushed!(unfetch, xUnfetch, (offset: i64, page: *mut c_void));

unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    // SAFETY: as for the other methods. Nothing is pending here in practice: a commit is
    // written out with its last page, before SQLite touches the WAL index.
    unsafe {
        let _ = flush(file);
        if let Some(m) = (*pending(file).real).xShmBarrier {
            m(file)
        }
    }
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: as above; no I/O, so nothing to write out first.
    unsafe {
        ((*pending(file).real)
            .xSectorSize
            .expect("unix files have xSectorSize"))(file)
    }
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: as above.
    unsafe {
        ((*pending(file).real)
            .xDeviceCharacteristics
            .expect("unix files have xDeviceCharacteristics"))(file)
    }
}

/// Pending bytes are dropped, not written: a commit is never left pending, so they can only be
/// frames of a transaction that closing rolls back (or, in a forked child closing a connection
/// it inherited, frames of the parent's own commit in progress, which must not be touched).
unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes each file once; the box made in `open` is freed here.
    unsafe {
        let slot = pending_slot(file, root());
        let p = Box::from_raw(*slot);
        *slot = ptr::null_mut();
        (*file).pMethods = p.real;
        (p.real
            .as_ref()
            .and_then(|m| m.xClose)
            .expect("unix files have xClose"))(file)
    }
}
