//! Writes and transactions: one atomic write (its own `BEGIN IMMEDIATE ... COMMIT`, or a
//! savepoint inside this thread's transaction), the retry that lets a removal through on a
//! full disk, and the `begin`/`end` nesting. Kept together because they share the
//! bookkeeping of which value files to unlink on commit and which on rollback.

use super::*;

/// The checkpoints a removal on a full disk tries, mildest first (D-039): a passive one lets
/// the next write start the WAL over in the space it already has; a truncating one (which
/// waits for readers) gives the WAL's space back.
const FULL_DISK_CHECKPOINTS: [&str; 2] = [
    "PRAGMA wal_checkpoint(PASSIVE)",
    "PRAGMA wal_checkpoint(TRUNCATE)",
];

impl Cache {
    /// Run `f` as one atomic write: its own `BEGIN IMMEDIATE … COMMIT`, or a savepoint inside
    /// this thread's open transaction. `f` lists files to unlink once the write is committed.
    /// `new_file` (with the shared directory lock held since it was written) is unlinked if
    /// the write does not happen.
    pub(crate) fn write<T>(
        &self,
        new_file: Option<NewFile>,
        f: impl FnOnce(&Db, &mut Vec<String>) -> Result<T>,
    ) -> Result<T> {
        self.writable()?;
        let (new_name, dir_lock) = match new_file {
            Some((n, l)) => (Some(n), l),
            None => (None, None),
        };
        let result = self.with_conn(|c| {
            let top = c.depth == 0;
            run(
                &c.db,
                if top {
                    "BEGIN IMMEDIATE"
                } else {
                    "SAVEPOINT op"
                },
            )
            .map_err(|e| sql_error("starting a write", e))?;
            if top {
                c.recent.writing(&c.db);
            }
            // Holding the write lock now: a concurrent check(fix=True) sees our row before our file.
            drop(dir_lock);
            let mut unlink = Vec::new();
            match f(&c.db, &mut unlink) {
                Ok(v) if top => match c.commit() {
                    Ok(()) => {
                        c.recent.committed(&c.db);
                        unlink.iter().for_each(|n| self.inner.files.remove(n));
                        Ok(v)
                    }
                    Err(e) => {
                        c.recent.rolled_back();
                        let _ = run(&c.db, "ROLLBACK");
                        Err(sql_error("committing a write", e))
                    }
                },
                Ok(v) => {
                    run(&c.db, "RELEASE op").ctx("ending a write inside a transaction")?;
                    c.unlink_on_commit.append(&mut unlink);
                    c.unlink_on_rollback.extend(new_name.iter().cloned());
                    Ok(v)
                }
                Err(e) => {
                    if top {
                        c.recent.rolled_back();
                    }
                    let _ = run(
                        &c.db,
                        if top {
                            "ROLLBACK"
                        } else {
                            "ROLLBACK TO op; RELEASE op"
                        },
                    );
                    Err(e)
                }
            }
        });
        if result.is_err() {
            if let Some(n) = &new_name {
                self.inner.files.remove(n);
            }
        }
        result
    }

    /// A write that removes entries and so frees space (D-039). On a full disk it gives up the
    /// reserve, lets the WAL start over (a passive checkpoint, with the reserve's room to grow
    /// `cache.db`; then, if that was not enough, a truncating one) and runs `f` again: a full
    /// cache can always be emptied and a full queue drained. `f` must be safe to run again
    /// after a rollback.
    pub(crate) fn freeing<T>(
        &self,
        mut f: impl FnMut(&Db, &mut Vec<String>) -> Result<T>,
    ) -> Result<T> {
        let first = self.write(None, &mut f);
        if !first.as_ref().is_err_and(Error::is_disk_full) {
            if first.is_ok() {
                if let Some(reserve) = &self.inner.reserve {
                    reserve.ensure_if_missing(self.inner.modes.file);
                }
            }
            return first;
        }
        if let Some(reserve) = &self.inner.reserve {
            reserve.release();
        }
        let mut result = first;
        for checkpoint in FULL_DISK_CHECKPOINTS {
            // A checkpoint that fails (readers, or still no room) leaves the WAL as it was.
            let _ = self.with_conn(|c| {
                c.db.query_row(checkpoint, [], |_| Ok(()))
                    .ctx("checkpointing the WAL")
            });
            result = self.write(None, &mut f);
            if !result.as_ref().is_err_and(Error::is_disk_full) {
                break;
            }
        }
        if result.is_ok() {
            if let Some(reserve) = &self.inner.reserve {
                reserve.ensure(self.inner.modes.file);
            }
        }
        result
    }

    /// Begin (or nest into) this thread's transaction. Every `begin` needs one `end`.
    pub fn begin(&self) -> Result<()> {
        self.writable()?;
        self.with_conn(|c| {
            if c.depth == 0 {
                run(&c.db, "BEGIN IMMEDIATE")
                    .map_err(|e| sql_error("starting a transaction", e))?;
                c.recent.writing(&c.db);
            }
            c.depth += 1;
            Ok(())
        })
    }

    /// End this thread's innermost transaction level, committing (or rolling back) at the outermost.
    pub fn end(&self, commit: bool) -> Result<()> {
        self.with_conn(|c| {
            if c.depth == 0 {
                return Err(Error::invalid(
                    "end() without a matching begin() on this thread",
                ));
            }
            c.depth -= 1;
            if c.depth > 0 {
                return Ok(());
            }
            let files = &self.inner.files;
            let committed = if commit { c.commit() } else { Ok(()) };
            if commit && committed.is_ok() {
                c.recent.committed(&c.db);
                c.unlink_on_commit.drain(..).for_each(|n| files.remove(&n));
                c.unlink_on_rollback.clear();
                return Ok(());
            }
            c.recent.rolled_back();
            let rolled_back = run(&c.db, "ROLLBACK");
            c.unlink_on_rollback
                .drain(..)
                .for_each(|n| files.remove(&n));
            c.unlink_on_commit.clear();
            match committed {
                Err(e) => Err(sql_error(
                    "committing a transaction (it was rolled back)",
                    e,
                )),
                Ok(()) => rolled_back.ctx("rolling back a transaction"),
            }
        })
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

    /// Run the WAL checkpoint that this thread's last commit under
    /// [`crate::without_waiting`] left for later, if it left one. A checkpoint syncs the disk;
    /// the caller runs this once it no longer holds its own lock. A checkpoint that fails is
    /// tried again after a later commit, as after any commit.
    pub fn run_deferred_checkpoint(&self) -> Result<()> {
        let Some(due) = conn::take_deferred() else {
            return Ok(());
        };
        self.with_conn(|c| {
            if c.depth == 0 {
                // SAFETY: this thread's open connection, with no statement running.
                unsafe { conn::run_deferred(c.db.handle(), due) };
            }
            Ok(())
        })
    }

    /// The shared directory lock a writer holds from creating a value file until it holds
    /// SQLite's write lock (D-005). Inside a transaction it already holds that lock, so
    /// `check(fix=True)` cannot be sweeping; taking the directory lock there would only make
    /// the writer and a waiting `check()` wait for each other.
    pub(crate) fn file_guard(&self) -> Result<Option<DirLock>> {
        if self.in_transaction() {
            return Ok(None);
        }
        DirLock::shared(&self.inner.directory, self.inner.timeout, self.inner.modes).map(Some)
    }

    /// Whether this thread has a transaction open on this handle (a `begin` without its
    /// `end`). A blocking wait skips waiting then: it holds the write lock, so no other
    /// writer could bring what it waits for.
    pub fn in_transaction(&self) -> bool {
        let fork = fork::fork_generation();
        self.inner
            .conns
            .get()
            .and_then(|cell| {
                cell.try_borrow()
                    .ok()
                    .map(|slot| slot.as_ref().is_some_and(|c| c.depth > 0 && c.fork == fork))
            })
            .unwrap_or(false)
    }
}
