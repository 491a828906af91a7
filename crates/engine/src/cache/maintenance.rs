//! Maintenance: expire, evict, clear, cull, check, statistics and settings.

use super::*;

/// One batch's count, or, if it timed out, the timeout with what earlier batches removed.
fn removed_so_far<T>(batch: Result<T>, before: u64) -> Result<T> {
    match batch {
        Err(Error::Timeout) => Err(Error::TimeoutAfter { removed: before }),
        other => other,
    }
}

impl Cache {
    /// Delete rows chosen by `select` in batches, one transaction per batch, so other writers
    /// get the lock in between. `select` takes (?1 cursor, ?2 limit) plus `extra` and returns
    /// (rowid, filename, size, cursor). A timeout reports what the committed batches removed.
    pub(super) fn delete_batches(
        &self,
        select: &str,
        mut cursor: SqlValue,
        extra: Option<SqlValue>,
    ) -> Result<u64> {
        let mut total = 0u64;
        loop {
            // The cursor moves only once a batch has committed: on a full disk the batch is
            // rolled back and run again (D-039).
            let batch = self.freeing(|db, unlink| {
                let mut args = vec![cursor.clone(), SqlValue::Integer(BATCH)];
                args.extend(extra.clone());
                let mut stmt = db
                    .prepare_cached(select)
                    .ctx("selecting entries to remove")?;
                let rows = stmt
                    .query_map(rusqlite::params_from_iter(args), |r| {
                        Ok((
                            DeadRow {
                                rowid: r.get(0)?,
                                filename: r.get(1)?,
                                size: r.get(2)?,
                            },
                            r.get::<_, SqlValue>(3)?,
                        ))
                    })
                    .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
                    .ctx("selecting entries to remove")?;
                drop(stmt);
                let mut delta = Delta::default();
                for (r, _) in &rows {
                    delete_by_rowid(db, r, unlink, &mut delta)?;
                }
                apply_delta(db, &delta)?;
                Ok((rows.len() as u64, rows.last().map(|(_, c)| c.clone())))
            });
            let (n, last) = removed_so_far(batch, total)?;
            if let Some(last) = last {
                cursor = last;
            }
            total += n;
            if n == 0 {
                return Ok(total);
            }
        }
    }

    /// Remove entries expired as of `now` (seconds since the epoch; default: now). Returns how many.
    pub fn expire(&self, now: Option<f64>) -> Result<u64> {
        let now = now.unwrap_or_else(crate::cache::now);
        self.delete_batches(
            "SELECT rowid, filename, size, expire_time FROM cache WHERE expire_time IS NOT NULL \
             AND ?1 < expire_time AND expire_time < ?3 ORDER BY expire_time LIMIT CAST(?2 AS INTEGER)",
            SqlValue::Real(0.0),
            Some(SqlValue::Real(now)),
        )
    }

    /// Remove every entry with this tag. Returns how many.
    pub fn evict(&self, tag: &Scalar) -> Result<u64> {
        self.delete_batches(
            "SELECT rowid, filename, size, rowid FROM cache WHERE tag = ?3 AND rowid > ?1 ORDER BY rowid LIMIT CAST(?2 AS INTEGER)",
            SqlValue::Integer(0),
            Some(scalar_value(tag)),
        )
    }

    /// Remove every entry. Returns how many.
    pub fn clear(&self) -> Result<u64> {
        self.delete_batches(
            "SELECT rowid, filename, size, rowid FROM cache WHERE rowid > ?1 ORDER BY rowid LIMIT CAST(?2 AS INTEGER)",
            SqlValue::Integer(0),
            None,
        )
    }

    /// Remove expired entries, then evict by policy until the volume is at most `size_limit`.
    /// Returns how many.
    pub fn cull(&self) -> Result<u64> {
        let now = now();
        let mut count = self.expire(Some(now))?;
        let s = self.hot();
        let Some(victims) = policy_victims(s.eviction_policy) else {
            return Ok(0);
        };
        while self.volume()? > s.size_limit as u64 {
            let batch = self.freeing(|db, unlink| {
                let rows = select_rows(db, victims, [10])?;
                let mut delta = Delta::default();
                for r in &rows {
                    delete_by_rowid(db, r, unlink, &mut delta)?;
                }
                apply_delta(db, &delta)?;
                Ok(rows.len() as u64)
            });
            let n = removed_so_far(batch, count)?;
            if n == 0 {
                break;
            }
            count += n;
        }
        Ok(count)
    }

    /// Check the database and the value files; with `fix`, repair what can be repaired
    /// (vacuum, drop rows whose files are gone or damaged, remove orphan files, recount).
    /// Returns one message per problem found.
    pub fn check(&self, fix: bool) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        self.with_conn(|c| {
            let mut stmt =
                c.db.prepare("PRAGMA integrity_check")
                    .ctx("checking integrity")?;
            let rows: Vec<String> = stmt
                .query_map([], |r| r.get(0))
                .and_then(|it| it.collect())
                .ctx("checking integrity")?;
            if rows != ["ok"] {
                problems.extend(rows.into_iter().map(|m| format!("integrity: {m}")));
            }
            Ok(())
        })?;
        if fix {
            self.writable()?;
            // VACUUM dirties every page in one statement: let it spill rather than hold the whole
            // database in memory. Nothing of it is left half-done across a fork (D-028).
            self.with_conn(|c| {
                c.db.execute_batch("PRAGMA cache_spill = ON")
                    .ctx("vacuuming")?;
                let vacuumed = c.db.execute_batch("VACUUM").ctx("vacuuming");
                c.db.execute_batch("PRAGMA cache_spill = OFF")
                    .ctx("vacuuming")?;
                vacuumed
            })?;
        }
        // The exclusive directory lock keeps writers from creating files we would call orphans.
        // A read-only handle takes no lock (it creates nothing) and reads in one transaction.
        let _lock = if self.inner.read_only {
            None
        } else {
            Some(DirLock::exclusive(
                &self.inner.directory,
                self.inner.timeout,
                self.inner.modes,
            )?)
        };
        let files = &self.inner.files;
        let mut body = |db: &Db, unlink: &mut Vec<String>| -> Result<()> {
            let mut delta = Delta::default();
            let mut known = std::collections::HashSet::new();
            {
                let mut stmt = db
                    .prepare("SELECT filename FROM jobs WHERE filename IS NOT NULL")
                    .ctx("checking jobs")?;
                let names = stmt
                    .query_map([], |r| r.get::<_, String>(0))
                    .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>());
                known.extend(names.ctx("checking jobs")?);
            }
            let rows = {
                let mut stmt = db
                    .prepare(concat!("SELECT ", row_columns!(), " FROM cache"))
                    .ctx("checking entries")?;
                let rows = stmt
                    .query_map([], row_from)
                    .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>());
                rows.ctx("checking entries")?
            };
            for row in rows {
                let mut row = match row {
                    Ok(r) => r,
                    Err(e) => {
                        problems.push(format!("unreadable row: {e}"));
                        continue;
                    }
                };
                if let Some(name) = &row.filename {
                    known.insert(name.clone());
                }
                // A file of another length than its row's, or anything but a regular file, is
                // refused before a byte is read (D-035): reported as damage, dropped with fix.
                let problem = match self.load(&mut row, true) {
                    Ok(Found::Yes(_)) => None,
                    Ok(Found::Missing) => Some(format!(
                        "file not found: {}",
                        files.path(row.filename.as_deref().unwrap_or("")).display()
                    )),
                    Err(e) => Some(format!("damaged entry (rowid {}): {e}", row.rowid)),
                };
                if let Some(p) = problem {
                    problems.push(p);
                    if fix {
                        delete_row(db, &row, unlink, &mut delta)?;
                    }
                }
            }
            if let Some(kind) = files.root_kind()? {
                // Never entered: a symlink here could point anywhere.
                problems.push(format!(
                    "values is {kind}, not a directory: {} was not followed; check(fix=True) \
                     removes it (a link itself, never what it points to) and the cache makes a \
                     new values directory",
                    files.root().display()
                ));
                if fix {
                    let _ = files.remove_root();
                }
            } else {
                for entry in files.list()? {
                    let relative = entry.relative();
                    if entry.plain && known.contains(&relative) {
                        continue;
                    }
                    problems.push(format!(
                        "unknown file: {}",
                        files.root().join(&relative).display()
                    ));
                    if fix {
                        let _ = files.remove_unknown(&entry);
                    }
                }
            }
            apply_delta(db, &delta)?;
            let (count, size): (i64, i64) = db
                .query_row("SELECT count, size FROM meta", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .ctx("checking counters")?;
            let (real_count, real_size): (i64, i64) = db
                .query_row(
                    "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM cache",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .ctx("checking counters")?;
            if count != real_count {
                problems.push(format!(
                    "meta.count != COUNT(cache); {count} != {real_count}"
                ));
            }
            if size != real_size {
                problems.push(format!(
                    "meta.size != SUM(cache.size); {size} != {real_size}"
                ));
            }
            if fix && (count != real_count || size != real_size) {
                db.execute(
                    "UPDATE meta SET count = ?1, size = ?2",
                    params![real_count, real_size],
                )
                .ctx("fixing counters")?;
            }
            Ok(())
        };
        if self.inner.read_only {
            self.with_conn(|c| {
                run(&c.db, "BEGIN").ctx("starting a read")?;
                let result = body(&c.db, &mut Vec::new());
                let _ = run(&c.db, "COMMIT");
                result
            })?;
        } else {
            self.write(None, body)?;
        }
        Ok(problems)
    }

    /// (hits, misses); `enable` turns counting on or off, `reset` zeroes the counters.
    pub fn stats(&self, enable: bool, reset: bool) -> Result<(u64, u64)> {
        let (hits, misses) = self.with_conn(|c| {
            c.db.query_row("SELECT hits, misses FROM meta", [], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
            })
            .ctx("reading statistics")
        })?;
        if self.inner.read_only {
            // Reading the counters works; turning counting on or off would write (D-019).
            if reset {
                self.writable()?;
            }
            return Ok((hits.max(0) as u64, misses.max(0) as u64));
        }
        if reset {
            self.write(None, |db, _| {
                db.execute("UPDATE meta SET hits = 0, misses = 0", [])
                    .map(drop)
                    .ctx("resetting statistics")
            })?;
        }
        self.reset("statistics", Some(SettingValue::Int(enable as i64)), true)?;
        Ok((hits.max(0) as u64, misses.max(0) as u64))
    }

    /// Read a setting (or one of the counters `count`, `size`, `hits`, `misses`) as stored in
    /// the directory, or with `value` change it; `update` persists the change.
    pub fn reset(
        &self,
        name: &str,
        value: Option<SettingValue>,
        update: bool,
    ) -> Result<SettingValue> {
        if matches!(name, "count" | "size" | "hits" | "misses") {
            if value.is_some() {
                return Err(Error::Setting(format!(
                    "{name} is a counter the cache keeps; it cannot be set"
                )));
            }
            return self.meta_value(name).map(SettingValue::Int);
        }
        let Some(value) = value else {
            let stored: Option<Option<SettingValue>> = self.with_conn(|c| {
                c.db.query_row("SELECT value FROM settings WHERE name = ?1", [name], |r| {
                    Ok(setting_from(r.get_ref(0)?))
                })
                .optional()
                .ctx("reading a setting")
            })?;
            let current = self.settings().get(name)?;
            let Some(stored) = stored.flatten() else {
                return Ok(current);
            };
            if stored != current {
                self.apply_setting(name, &stored)?;
            }
            return Ok(stored);
        };
        let mut next = self.settings();
        next.set(name, &value)?;
        let value = next.get(name)?;
        if update {
            self.write(None, |db, _| {
                persist_setting(db, name, &value)?;
                schema_for_setting(db, name, &next)
            })?;
        }
        self.apply_setting(name, &value)?;
        Ok(value)
    }

    pub(super) fn apply_setting(&self, name: &str, value: &SettingValue) -> Result<()> {
        if let Ok(mut s) = self.inner.settings.write() {
            s.set(name, value)?;
        }
        if name.starts_with("sqlite_") {
            self.inner.generation.fetch_add(1, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Rebuild the database file without its free pages (SQLite's `VACUUM`), after the WAL is
    /// checkpointed into it: for an operator, after large deletions. Needs free disk space
    /// about the size of `cache.db`, and waits for other writers like any write.
    pub fn vacuum(&self) -> Result<()> {
        self.writable()?;
        self.with_conn(|c| {
            if c.depth > 0 {
                return Err(Error::invalid(
                    "vacuum: not inside a transaction; call it outside transact()",
                ));
            }
            c.db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
                .ctx("checkpointing the WAL")?;
            c.db.execute_batch("VACUUM").map_err(|e| {
                crate::error::sql_error(
                    "vacuuming the database (it needs free disk space about the size of cache.db)",
                    e,
                )
            })
        })
    }

    pub fn create_tag_index(&self) -> Result<()> {
        self.reset("tag_index", Some(SettingValue::Int(1)), true)
            .map(drop)
    }

    pub fn drop_tag_index(&self) -> Result<()> {
        self.reset("tag_index", Some(SettingValue::Int(0)), true)
            .map(drop)
    }
}
