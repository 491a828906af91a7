//! Maintenance: expire, evict, clear, cull, statistics and settings (check is in `check`).

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
                    "vacuum: not inside a transaction; call it once the transaction has ended",
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
