//! This thread's SQLite connection: what it carries besides the SQLite handle, how a call
//! gets it (opened lazily, dropped and opened again after a fork or when an immutable
//! connection's files change, checked now and then that `cache.db` was not replaced), and
//! closing it. Every call goes through here, so these rules hold for all of them.

use super::*;
use std::mem::ManuallyDrop;
use std::time::Instant;

/// This thread's connection to `cache.db`, with the state of its transaction and of its
/// remembered reads.
pub(super) struct Conn {
    /// Never closed from a process other than the one that opened it (see `Drop`).
    pub(super) db: ManuallyDrop<Db>,
    /// Its entry in the registry a forked child closes inherited connections from (D-028).
    pub(super) live: fork::Live,
    /// `fork::fork_generation()` when opened: a different one means we are in a forked child.
    pub(super) fork: u64,
    /// Nesting depth of `begin()` on this thread.
    pub(super) depth: u32,
    generation: u64,
    /// Files to unlink once the outermost transaction commits.
    pub(super) unlink_on_commit: Vec<String>,
    /// Files written inside the transaction: unlinked if it rolls back.
    pub(super) unlink_on_rollback: Vec<String>,
    /// Small values read lately, valid until anyone commits (D-017).
    pub(super) recent: Recent,
    /// A read-only connection opened `immutable=1` (no `-wal` file existed then): the stamp
    /// of the files it reads, which must hold for it to serve a call (D-019).
    at_rest: Option<conn::AtRest>,
    /// When this connection last checked that `cache.db` is still the file it opened.
    checked: Instant,
}

impl Conn {
    pub(super) fn new(
        db: Connection,
        generation: u64,
        at_rest: Option<conn::AtRest>,
        notes: Option<Notes>,
        memo: Arc<std::sync::Mutex<Memo>>,
    ) -> Conn {
        Conn {
            live: fork::Live::register(&db),
            db: ManuallyDrop::new(Db::new(db)),
            fork: fork::fork_generation(),
            depth: 0,
            generation,
            unlink_on_commit: Vec::new(),
            unlink_on_rollback: Vec::new(),
            recent: Recent::new(notes.map(Arc::new), memo),
            at_rest,
            checked: Instant::now(),
        }
    }

    /// `COMMIT` this connection's transaction, leaving the note of what it changed for every
    /// other connection's memo (D-065).
    pub(super) fn commit(&mut self) -> rusqlite::Result<()> {
        self.recent.committing(&self.db);
        commit(&self.db)
    }

    /// The WAL index header to validate remembered reads against, when they may be used: not
    /// inside a transaction (its own writes are uncommitted), and not on an immutable
    /// connection (it has no WAL index to watch, and mapping one would create the -shm file).
    pub(super) fn header(&mut self) -> Option<[u8; 48]> {
        if self.depth == 0 && self.at_rest.is_none() {
            self.recent.now(&self.db)
        } else {
            None
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // A connection inherited through fork() is closed (or deliberately leaked) through the
        // registry by the child's first open (D-028); its Rust side must never touch it again.
        if self.fork == fork::fork_generation() {
            let _active = fork::Active::enter();
            self.recent.unmap();
            self.live.deregister();
            // SAFETY: dropped exactly once, here.
            unsafe { ManuallyDrop::drop(&mut self.db) }
        }
    }
}

/// How often a connection checks that `cache.db` was not deleted behind its back: a stat of
/// the path, too dear for every call and cheap once in this long.
const MOVED_CHECK_INTERVAL: Duration = Duration::from_millis(500);
/// How often a read on an immutable connection is made again when `cache.db` changed under it.
const READ_ONLY_RETRIES: usize = 3;

impl Cache {
    /// Run `f` on this thread's connection.
    pub(super) fn with_conn<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        self.call_on_conn(f, None)
    }

    /// Run a read `f` on this thread's connection. On a read-only handle reading a database
    /// at rest (`immutable=1`), a writer may checkpoint into `cache.db` while `f` reads it;
    /// then the result may mix two versions, so the read is made again on a new connection.
    pub(super) fn read_call<T>(&self, mut f: impl FnMut(&mut Conn) -> Result<T>) -> Result<T> {
        if !self.inner.read_only {
            return self.with_conn(f);
        }
        let torn = std::cell::Cell::new(false);
        for _ in 0..READ_ONLY_RETRIES {
            torn.set(false);
            let result = self.call_on_conn(&mut f, Some(&torn));
            if !torn.get() {
                return result;
            }
        }
        self.with_conn(f)
    }

    /// `with_conn`, telling `torn` when an immutable connection's files changed during `f`
    /// (the connection is dropped then, so the next call opens a new one).
    fn call_on_conn<T>(
        &self,
        f: impl FnOnce(&mut Conn) -> Result<T>,
        torn: Option<&std::cell::Cell<bool>>,
    ) -> Result<T> {
        let _deadline = Deadline::start(self.inner.timeout);
        let _active = fork::Active::enter();
        let cell = self.inner.conns.get_or(|| RefCell::new(None));
        let mut slot = cell.try_borrow_mut().map_err(|_| {
            Error::invalid("a cache call was re-entered on one thread while another was running")
        })?;
        let fork = fork::fork_generation();
        if slot.as_ref().is_some_and(|c| c.fork != fork) {
            *slot = None; // forked: the parent's connection is leaked by Conn::drop, not closed
        }
        if slot
            .as_ref()
            .and_then(|c| c.at_rest)
            .is_some_and(|stamp| !stamp.holds(&self.inner.db_path))
        {
            // A writer arrived (or came and went) since this connection opened immutable:
            // open again, sharing the writer's WAL if it is still there.
            *slot = None;
        }
        let conn = match &mut *slot {
            Some(c) => c,
            none => none.insert(self.connect()?),
        };
        let _call = conn.live.call();
        if conn.checked.elapsed() >= MOVED_CHECK_INTERVAL {
            self.check_not_moved(conn)?;
        }
        let generation = self.inner.generation.load(Ordering::Acquire);
        if conn.generation != generation {
            conn::apply_pragmas(&conn.db, &self.settings())?;
            conn.generation = generation;
        }
        let result = f(conn);
        let changed = conn
            .at_rest
            .is_some_and(|stamp| !stamp.unchanged(&self.inner.db_path));
        drop(_call);
        if changed {
            *slot = None;
            if let Some(torn) = torn {
                torn.set(true);
            }
        }
        result
    }

    /// Run `f` on this thread's connection with the remembered reads and the header that
    /// validates them (`None` where they may not be used; see `Conn::header`).
    pub(crate) fn read_remembering<T>(
        &self,
        mut f: impl FnMut(&Db, &mut Recent, Option<[u8; 48]>) -> Result<T>,
    ) -> Result<T> {
        self.read_call(|c| {
            let header = c.header();
            f(&c.db, &mut c.recent, header)
        })
    }

    /// Run `f` on this thread's connection if it is open and may serve remembered reads now:
    /// opened in this process, and checked lately not to have been moved (`check_not_moved`).
    /// Nothing here calls SQLite, so no deadline and no fork section are needed.
    pub(super) fn remembered<T>(&self, f: impl FnOnce(&mut Conn) -> Option<T>) -> Option<T> {
        let cell = self.inner.conns.get()?;
        let mut slot = cell.try_borrow_mut().ok()?;
        let conn = slot.as_mut()?;
        if conn.fork != fork::fork_generation() || conn.checked.elapsed() >= MOVED_CHECK_INTERVAL {
            return None;
        }
        f(conn)
    }

    /// Run `f` on this thread's connection with no transaction of its own.
    pub(crate) fn read<T>(&self, mut f: impl FnMut(&Db) -> Result<T>) -> Result<T> {
        self.read_call(|c| f(&c.db))
    }

    fn connect(&self) -> Result<Conn> {
        crate::store::files::refuse_unsafe_db_files(&self.inner.db_path)?;
        let (db, at_rest) = if self.inner.read_only {
            conn::open_read_only(&self.inner.db_path)?
        } else {
            (conn::open(&self.inner.db_path)?, None)
        };
        let conn = Conn::new(
            db,
            self.inner.generation.load(Ordering::Acquire),
            at_rest,
            Notes::open(
                &self.inner.directory,
                !self.inner.read_only,
                self.inner.modes,
                self.inner.kept.clone(),
            ),
            self.inner.memo.clone(),
        );
        {
            let _call = conn.live.call();
            conn::apply_pragmas(&conn.db, &self.settings())?;
        }
        Ok(conn)
    }

    /// Fail if `cache.db` was deleted or replaced since this connection opened it. SQLite
    /// would go on using the unlinked file, and every write from here on would be invisible
    /// to other processes (which open a new, empty `cache.db`): a silent split.
    fn check_not_moved(&self, conn: &mut Conn) -> Result<()> {
        let mut moved: std::os::raw::c_int = 0;
        // SAFETY: the handle is open; HAS_MOVED writes one int through the pointer.
        let rc = unsafe {
            rusqlite::ffi::sqlite3_file_control(
                conn.db.handle(),
                c"main".as_ptr(),
                rusqlite::ffi::SQLITE_FCNTL_HAS_MOVED,
                (&mut moved as *mut std::os::raw::c_int).cast(),
            )
        };
        if rc == rusqlite::ffi::SQLITE_OK && moved != 0 {
            return Err(Error::io(
                "the cache database was deleted or replaced while this handle had it open, so \
                 its writes would be invisible to every other process; close this handle and \
                 open the cache again",
                Some(self.inner.db_path.clone()),
                std::io::Error::from_raw_os_error(libc::ENOENT),
            ));
        }
        conn.checked = Instant::now();
        Ok(())
    }

    /// Close this thread's connection (others close when the handle drops).
    pub fn close(&self) {
        if let Some(cell) = self.inner.conns.get() {
            if let Ok(mut slot) = cell.try_borrow_mut() {
                if let Some(c) = slot.as_mut() {
                    // An inherited connection may already be closed by the child (D-028).
                    if c.depth > 0 && c.fork == fork::fork_generation() {
                        let _active = fork::Active::enter();
                        let _call = c.live.call();
                        let _ = run(&c.db, "ROLLBACK");
                    }
                }
                *slot = None;
            }
        }
    }
}
