//! A connection with its hot statements kept prepared and found by the address of their SQL
//! text (D-031).
//!
//! rusqlite's statement cache hashes the SQL text twice and copies it into a new `Arc<str>` on
//! every use, about 100 ns here; a small write runs five or six statements. The statements of
//! the hot paths are `&'static str` literals, so their address is a key that costs nothing.
//! Anything else still goes through `prepare_cached`. Text chosen from a small fixed set (a
//! queue's side and key shape) is built once per process and keeps its address.

use rusqlite::{ffi, Connection, Statement};
use std::cell::{RefCell, UnsafeCell};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ops::{Deref, DerefMut};

pub(crate) struct Db {
    /// Declared before `conn`, so dropped first: statements are finalized before the
    /// connection closes. Each borrows `*conn`, whose box never moves.
    held: RefCell<Vec<(usize, Statement<'static>)>>,
    conn: Box<Connection>,
    /// Rows of `cache` changed since `start_changes`, as SQLite's update hook reports them
    /// (D-065). Declared after `conn`, so the hook's pointer to it outlives the connection.
    changed: Box<UnsafeCell<Changed>>,
}

/// The rowids of the `cache` table a write changed, up to what a note holds.
#[derive(Default)]
struct Changed {
    rowids: Vec<i64>,
    overflow: bool,
}

/// SQLite's update hook: called for each row an `INSERT`, `UPDATE` or `DELETE` changes in a
/// rowid table, on the thread running the statement.
unsafe extern "C" fn row_changed(
    arg: *mut c_void,
    _op: c_int,
    database: *const c_char,
    table: *const c_char,
    rowid: ffi::sqlite3_int64,
) {
    // SAFETY: SQLite passes NUL-terminated names; `arg` is the `Changed` installed with the
    // hook, which outlives the connection, and only the thread using the connection runs it.
    unsafe {
        if CStr::from_ptr(table).to_bytes() != b"cache"
            || CStr::from_ptr(database).to_bytes() != b"main"
        {
            return;
        }
        let changed = &mut *arg.cast::<Changed>();
        if changed.rowids.len() < crate::store::notes::MAX_ROWIDS {
            changed.rowids.push(rowid);
        } else {
            changed.overflow = true;
        }
    }
}

// SAFETY: the statements and the connection they belong to move between threads together, as
// one value; rusqlite's `Connection` is `Send` for the same reason (SQLite allows a connection
// and its statements to be used from any one thread at a time). `Held` borrows `Db`, so a
// statement cannot be used while `Db` is moved.
unsafe impl Send for Db {}

impl Db {
    pub(crate) fn new(conn: Connection) -> Db {
        let changed = Box::new(UnsafeCell::new(Changed::default()));
        // SAFETY: an open connection; the pointer stays valid until after it closes (field
        // order), and a connection leaked in a forked child leaks its `Db` with it.
        unsafe {
            ffi::sqlite3_update_hook(conn.handle(), Some(row_changed), changed.get().cast());
        }
        Db {
            held: RefCell::new(Vec::new()),
            conn: Box::new(conn),
            changed,
        }
    }

    /// Start collecting the rows of `cache` that this connection changes.
    pub(crate) fn start_changes(&self) {
        // SAFETY: the hook only runs inside a statement on this connection, never during this.
        let changed = unsafe { &mut *self.changed.get() };
        changed.rowids.clear();
        changed.overflow = false;
    }

    /// The rows of `cache` changed since `start_changes` so far, or `None` for more than a
    /// note holds.
    pub(crate) fn changes(&self) -> Option<Vec<i64>> {
        // SAFETY: as in `start_changes`.
        let changed = unsafe { &*self.changed.get() };
        (!changed.overflow).then(|| changed.rowids.clone())
    }

    /// The rows of `cache` changed since `start_changes`, or `None` for more than a note holds.
    pub(crate) fn take_changes(&self) -> Option<Vec<i64>> {
        // SAFETY: as in `start_changes`.
        let changed = unsafe { &mut *self.changed.get() };
        let rowids = std::mem::take(&mut changed.rowids);
        (!std::mem::take(&mut changed.overflow)).then_some(rowids)
    }

    /// The prepared statement for `sql`, a literal; it goes back to the connection when the
    /// returned guard drops.
    pub(crate) fn held(&self, sql: &'static str) -> rusqlite::Result<Held<'_>> {
        let key = sql.as_ptr() as usize;
        let found = {
            let mut held = self.held.borrow_mut();
            held.iter()
                .position(|(k, _)| *k == key)
                .map(|i| held.swap_remove(i).1)
        };
        let stmt = match found {
            Some(stmt) => stmt,
            None => {
                let stmt = self.conn.prepare(sql)?;
                // SAFETY: the statement borrows `*self.conn`, which lives in a box that is
                // neither moved nor dropped before `held` (field order), and `Held` hands it
                // out only for the lifetime of `&self`.
                unsafe { std::mem::transmute::<Statement<'_>, Statement<'static>>(stmt) }
            }
        };
        Ok(Held {
            db: self,
            key,
            stmt: Some(stmt),
        })
    }
}

impl Deref for Db {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.conn
    }
}

pub(crate) struct Held<'a> {
    db: &'a Db,
    key: usize,
    stmt: Option<Statement<'static>>,
}

impl<'a> Deref for Held<'a> {
    type Target = Statement<'a>;

    fn deref(&self) -> &Statement<'a> {
        self.stmt.as_ref().expect("present until dropped")
    }
}

impl<'a> DerefMut for Held<'a> {
    fn deref_mut(&mut self) -> &mut Statement<'a> {
        let stmt: *mut Statement<'static> = self.stmt.as_mut().expect("present until dropped");
        // SAFETY: only shortens the borrow of the connection to `'a`, which the connection
        // outlives; nothing can be stored in the statement through it for longer.
        unsafe { &mut *stmt.cast::<Statement<'a>>() }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Some(stmt) = self.stmt.take() {
            self.db.held.borrow_mut().push((self.key, stmt));
        }
    }
}
