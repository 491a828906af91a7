//! Writes: set, add, pop, delete, touch, incr and their batch forms.

use super::*;

impl Cache {
    pub fn set(&self, key: &Key, value: ValueRef<'_>, options: &WriteOptions) -> Result<()> {
        let (prepared, file) = self.prepare(value)?;
        let stamp = Stamp::new(options);
        self.write(file, |db, unlink| {
            self.store(db, key, &prepared, &stamp, Fresh::Maybe, unlink)
        })
    }

    /// Store a safe-format value, taking the fast path for ints, floats, text and bytes the way
    /// the Python binding does, so either side reads what the other wrote.
    pub fn set_value(
        &self,
        key: &Key,
        value: &crate::format::value::Value,
        options: &WriteOptions,
    ) -> Result<()> {
        use crate::format::value::Value;
        let encoded;
        let v = match value {
            Value::Int(i) => ValueRef::Int(*i),
            Value::Float(f) if !f.is_nan() => ValueRef::Float(*f),
            Value::Str(s) => ValueRef::Str(s),
            Value::Bytes(b) => ValueRef::Bytes(b),
            other => {
                encoded = crate::format::value::encode(other);
                ValueRef::Encoded(&encoded)
            }
        };
        self.set(key, v, options)
    }

    /// Read an unexpired value as a safe-format value. A pickled value yields `Error::Unsafe`.
    pub fn get_value(&self, key: &Key) -> Result<Option<crate::format::value::Value>> {
        self.get(key, false)?
            .map(|e| e.value.into_value())
            .transpose()
    }

    /// Store the bytes read from `reader` (python-diskcache's `set(..., read=True)`): always a value file.
    pub fn set_from_reader(
        &self,
        key: &Key,
        reader: &mut dyn Read,
        options: &WriteOptions,
    ) -> Result<()> {
        self.writable()?;
        let lock = self.file_guard()?;
        let name = ValueFiles::new_name()?;
        let (size, crc) = self.inner.files.write_from(&name, reader)?;
        let prepared = Prepared {
            kind: Kind::Bytes,
            crc,
            size: size as i64,
            inline: None,
            file: Some(name.clone()),
        };
        let stamp = Stamp::new(options);
        self.write(Some((name, lock)), |db, unlink| {
            self.store(db, key, &prepared, &stamp, Fresh::Maybe, unlink)
        })
    }

    /// Store only if the key is absent or expired. Returns whether it stored.
    pub fn add(&self, key: &Key, value: ValueRef<'_>, options: &WriteOptions) -> Result<bool> {
        let (prepared, file) = self.prepare(value)?;
        let new_file = prepared.file.clone();
        let stamp = Stamp::new(options);
        let now = stamp.now;
        self.write(file, |db, unlink| {
            let (k, raw) = key_sql(key);
            let existing: Option<Option<f64>> = db
                .held("SELECT expire_time FROM cache WHERE key = ?1 AND raw = ?2")
                .and_then(|mut st| st.query_row(params![k, raw], |r| r.get(0)).optional())
                .ctx("adding an entry")?;
            if existing.is_some_and(|e| live(e, now)) {
                unlink.extend(new_file);
                return Ok(false);
            }
            let fresh = if existing.is_none() {
                Fresh::Known
            } else {
                Fresh::Maybe
            };
            self.store(db, key, &prepared, &stamp, fresh, unlink)?;
            Ok(true)
        })
    }

    /// Write many items in one transaction.
    pub fn set_many(&self, items: &[(Key, ValueRef<'_>)], options: &WriteOptions) -> Result<()> {
        let values: Vec<ValueRef<'_>> = items.iter().map(|(_, v)| *v).collect();
        let (prepared, files, lock) = self.prepare_many(&values)?;
        let stamp = Stamp::new(options);
        let result = self.write(None, |db, unlink| {
            drop(lock);
            let mut delta = Delta::default();
            for ((key, _), p) in items.iter().zip(&prepared) {
                self.upsert(db, key, p, &stamp, Fresh::Maybe, unlink, &mut delta)?;
            }
            self.cull_in(db, stamp.now, unlink, &mut delta)?;
            apply_delta(db, &delta)
        });
        self.settle_new_files(files, result.is_ok())?;
        result
    }

    /// Write entries with the times and access counts they had elsewhere (a migration from
    /// another cache, D-041), in one transaction: each as [`Cache::set`] would store it, but
    /// stored at `store_time`, last read at `access_time`, read `access_count` times. Nothing
    /// is culled and no hit or miss is counted; the caller applies a size limit afterwards.
    pub fn import_many(&self, items: &[Imported<'_>]) -> Result<()> {
        let values: Vec<ValueRef<'_>> = items.iter().map(|i| i.value).collect();
        let (prepared, files, lock) = self.prepare_many(&values)?;
        let result = self.write(None, |db, unlink| {
            drop(lock);
            let mut delta = Delta::default();
            for (item, p) in items.iter().zip(&prepared) {
                let stamp = Stamp {
                    now: item.store_time,
                    expire_time: item.expire_time,
                    tag: &item.tag,
                };
                self.upsert(db, &item.key, p, &stamp, Fresh::Maybe, unlink, &mut delta)?;
                let (k, raw) = key_sql(&item.key);
                db.held("UPDATE cache SET access_time = ?3, access_count = ?4 WHERE key = ?1 AND raw = ?2")
                    .and_then(|mut st| {
                        st.execute(params![k, raw, item.access_time, item.access_count])
                    })
                    .ctx("importing an entry")?;
            }
            apply_delta(db, &delta)
        });
        self.settle_new_files(files, result.is_ok())?;
        result
    }

    /// Prepare several values; files written for them are returned with the shared directory
    /// lock that must be held until the write transaction has begun.
    pub(crate) fn prepare_many<'a>(
        &self,
        values: &[ValueRef<'a>],
    ) -> Result<(Vec<Prepared<'a>>, Vec<String>, Option<DirLock>)> {
        let mut prepared = Vec::with_capacity(values.len());
        let mut files = Vec::new();
        let mut lock = None;
        for value in values {
            match self.prepare(*value) {
                Ok((p, f)) => {
                    if let Some((name, l)) = f {
                        files.push(name);
                        if lock.is_none() {
                            lock = l;
                        }
                    }
                    prepared.push(p);
                }
                Err(e) => {
                    files.iter().for_each(|n| self.inner.files.remove(n));
                    return Err(e);
                }
            }
        }
        Ok((prepared, files, lock))
    }

    /// After a multi-value write: drop its new files if it failed, or, inside an open
    /// transaction, remember them for removal should that transaction roll back.
    pub(crate) fn settle_new_files(&self, files: Vec<String>, written: bool) -> Result<()> {
        if !written {
            files.iter().for_each(|n| self.inner.files.remove(n));
            return Ok(());
        }
        self.with_conn(|c| {
            if c.depth > 0 {
                c.unlink_on_rollback.extend(files);
            }
            Ok(())
        })
    }

    /// Insert or overwrite `key`. Overwrites keep the rowid, so insertion order is stable.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn upsert(
        &self,
        db: &Db,
        key: &Key,
        p: &Prepared<'_>,
        stamp: &Stamp<'_>,
        fresh: Fresh,
        unlink: &mut Vec<String>,
        delta: &mut Delta,
    ) -> Result<()> {
        let Stamp {
            now,
            expire_time,
            tag,
        } = *stamp;
        let (k, raw) = key_sql(key);
        let old: Option<(i64, Option<String>, i64)> = match fresh {
            Fresh::Known => None,
            Fresh::Maybe => db
                .held("SELECT rowid, filename, size FROM cache WHERE key = ?1 AND raw = ?2")
                .and_then(|mut st| {
                    st.query_row(params![k, raw], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                        .optional()
                })
                .ctx("writing an entry")?,
        };
        let value = inline_sql(p.inline);
        let tag = scalar_sql(tag);
        match old {
            Some((rowid, old_file, old_size)) => {
                db.held(
                    "UPDATE cache SET store_time = ?1, expire_time = ?2, access_time = ?1, access_count = 0, \
                     tag = ?3, size = ?4, kind = ?5, crc = ?6, filename = ?7, value = ?8 WHERE rowid = ?9",
                )
                .and_then(|mut st| {
                    st.execute(params![now, expire_time, tag, p.size, p.kind as i64, p.crc, p.file, value, rowid])
                })
                .ctx("writing an entry")?;
                unlink.extend(old_file);
                delta.size += p.size - old_size;
            }
            None => {
                db.held(
                    "INSERT INTO cache (key, raw, store_time, expire_time, access_time, access_count, tag, size, kind, crc, filename, value) \
                     VALUES (?1, ?2, ?3, ?4, ?3, 0, ?5, ?6, ?7, ?8, ?9, ?10)",
                )
                .and_then(|mut st| {
                    st.execute(params![k, raw, now, expire_time, tag, p.size, p.kind as i64, p.crc, p.file, value])
                })
                .ctx("writing an entry")?;
                delta.count += 1;
                delta.size += p.size;
            }
        }
        Ok(())
    }

    /// One entry written the way every write does it: upsert, cull on write, update the counters.
    pub(crate) fn store(
        &self,
        db: &Db,
        key: &Key,
        p: &Prepared<'_>,
        stamp: &Stamp<'_>,
        fresh: Fresh,
        unlink: &mut Vec<String>,
    ) -> Result<()> {
        let mut delta = Delta::default();
        self.upsert(db, key, p, stamp, fresh, unlink, &mut delta)?;
        self.cull_in(db, stamp.now, unlink, &mut delta)?;
        apply_delta(db, &delta)
    }

    /// python-diskcache's cull on write: up to `cull_limit` expired entries, then, while the
    /// volume is at least `size_limit`, up to the rest of `cull_limit` by the eviction policy.
    pub(crate) fn cull_in(
        &self,
        db: &Db,
        now: f64,
        unlink: &mut Vec<String>,
        delta: &mut Delta,
    ) -> Result<()> {
        let s = self.hot();
        let mut limit = s.cull_limit;
        if limit == 0 {
            return Ok(());
        }
        let expired = select_rows(
            db,
            "SELECT rowid, filename, size FROM cache WHERE expire_time IS NOT NULL AND expire_time < ?1 ORDER BY expire_time LIMIT CAST(?2 AS INTEGER)",
            params![now, limit],
        )?;
        limit -= expired.len() as i64;
        for r in &expired {
            delete_by_rowid(db, r, unlink, delta)?;
        }
        if limit == 0 {
            return Ok(());
        }
        let Some(victims) = policy_victims(s.eviction_policy) else {
            return Ok(());
        };
        apply_delta(db, delta)?; // volume() reads meta.size
        *delta = Delta::default();
        if volume(db, self.inner.page_size, true)? < s.size_limit {
            return Ok(());
        }
        let victims = select_rows(db, victims, params![limit])?;
        for r in &victims {
            delete_by_rowid(db, r, unlink, delta)?;
        }
        Ok(())
    }

    /// Remove and return an unexpired entry.
    pub fn pop(&self, key: &Key) -> Result<Option<Entry>> {
        self.freeing(|db, unlink| {
            let Some(mut row) = self.read_row(db, key)? else {
                return Ok(None);
            };
            if !live(row.expire_time, now()) {
                return Ok(None);
            }
            let value = self.load(&mut row, false)?;
            let mut delta = Delta::default();
            delete_row(db, &row, unlink, &mut delta)?;
            apply_delta(db, &delta)?;
            match value {
                Found::Yes(value) => Ok(Some(Entry {
                    value,
                    expire_time: row.expire_time,
                    tag: row.tag,
                })),
                Found::Missing => Ok(None),
            }
        })
    }

    /// Remove an unexpired entry. Returns whether one was removed.
    pub fn delete(&self, key: &Key) -> Result<bool> {
        self.freeing(|db, unlink| {
            let mut delta = Delta::default();
            let hit = delete_live(db, key, now(), unlink, &mut delta)?;
            apply_delta(db, &delta)?;
            Ok(hit)
        })
    }

    /// Delete many keys in one transaction. Returns how many were present.
    pub fn delete_many(&self, keys: &[Key]) -> Result<u64> {
        self.freeing(|db, unlink| {
            let now = now();
            let mut delta = Delta::default();
            let mut n = 0;
            for key in keys {
                n += delete_live(db, key, now, unlink, &mut delta)? as u64;
            }
            apply_delta(db, &delta)?;
            Ok(n)
        })
    }

    /// Give an unexpired entry a new expiry (seconds from now). Returns whether the key was present.
    pub fn touch(&self, key: &Key, expire: Option<f64>) -> Result<bool> {
        self.write(None, |db, _| {
            let now = now();
            let (k, raw) = key_sql(key);
            let n = db
                .held(
                    "UPDATE cache SET expire_time = ?3 WHERE key = ?1 AND raw = ?2 AND (expire_time IS NULL OR expire_time > ?4)",
                )
                .and_then(|mut st| st.execute(params![k, raw, expire.map(|e| now + e), now]))
                .ctx("touching an entry")?;
            Ok(n > 0)
        })
    }

    /// Add `delta` to an int value atomically; an absent or expired key starts at `default`.
    pub fn incr(&self, key: &Key, delta: i64, default: Option<i64>) -> Result<Incr> {
        let policy = self.hot().eviction_policy;
        self.write(None, |db, unlink| {
            let now = now();
            let (k, raw) = key_sql(key);
            let old = db
                .held("SELECT rowid, expire_time, kind, crc, filename, value FROM cache WHERE key = ?1 AND raw = ?2")
                .and_then(|mut st| {
                    st.query_row(params![k, raw], |r| {
                        let int = match (r.get::<_, i64>(2)?, r.get::<_, Option<String>>(4)?, r.get_ref(5)?) {
                            (kind, None, Sql::Integer(i)) if kind == Kind::Int as i64 => Some((i, r.get::<_, i64>(3)? as u32)),
                            _ => None,
                        };
                        Ok(Counter { rowid: r.get(0)?, expire_time: r.get(1)?, int })
                    })
                    .optional()
                })
                .ctx("incrementing an entry")?;
            let expired = |e: Option<f64>| e.is_some_and(|t| t < now);
            let fresh = old.as_ref().is_none_or(|c| expired(c.expire_time));
            if fresh {
                let Some(start) = default else { return Ok(Incr::Missing) };
                let Some(value) = start.checked_add(delta) else { return Ok(Incr::NotInt) };
                let p = Prepared {
                    kind: Kind::Int,
                    crc: checksum(&value.to_le_bytes()),
                    size: 0,
                    inline: Some(ValueRef::Int(value)),
                    file: None,
                };
                let stamp = Stamp { now, expire_time: None, tag: &None };
                self.store(db, key, &p, &stamp, Fresh::Maybe, unlink)?;
                return Ok(Incr::Value(value));
            }
            let Some(Counter { rowid, int: Some((current, crc)), .. }) = old else { return Ok(Incr::NotInt) };
            if checksum(&current.to_le_bytes()) != crc {
                return Err(Error::corrupt("a stored value does not match its checksum; the bytes on disk were damaged"));
            }
            let Some(value) = current.checked_add(delta) else { return Ok(Incr::NotInt) };
            let sql = match policy {
                EvictionPolicy::LeastRecentlyUsed => "UPDATE cache SET store_time = ?1, value = ?2, crc = ?3, access_time = ?1 WHERE rowid = ?4",
                EvictionPolicy::LeastFrequentlyUsed => "UPDATE cache SET store_time = ?1, value = ?2, crc = ?3, access_count = access_count + 1 WHERE rowid = ?4",
                _ => "UPDATE cache SET store_time = ?1, value = ?2, crc = ?3 WHERE rowid = ?4",
            };
            db.held(sql)
                .and_then(|mut st| st.execute(params![now, value, checksum(&value.to_le_bytes()), rowid]))
                .ctx("incrementing an entry")?;
            Ok(Incr::Value(value))
        })
    }
}
