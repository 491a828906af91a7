//! Reads: get, contains, peekitem, iteration, counters.

use super::*;

impl Cache {
    /// Read an unexpired entry. With `as_file`, bytes kept in a value file come back as
    /// `StoredValue::File` (checksum verified) rather than read into memory.
    pub fn get(&self, key: &Key, as_file: bool) -> Result<Option<Entry>> {
        self.get_mode(
            key,
            if as_file {
                FileMode::Handle
            } else {
                FileMode::Read
            },
        )
    }

    /// Like `get`, but bytes kept in a value file come back as [`StoredValue::Deferred`], for the
    /// caller to read with [`Cache::read_value_file`] into a buffer of its own: one allocation
    /// and one copy for a large value instead of two.
    pub fn get_deferred(&self, key: &Key) -> Result<Option<Entry>> {
        self.get_mode(key, FileMode::Defer)
    }

    /// Read a deferred value file into `buf` (exactly `file.size` bytes) and verify its checksum.
    /// Returns false if the file is gone (a concurrent delete won; treat the read as a miss and
    /// ask again).
    pub fn read_value_file(&self, file: &ValueFile, buf: &mut [u8]) -> Result<bool> {
        Ok(matches!(
            self.inner.files.read_into(&file.name, file.crc, buf)?,
            Found::Yes(())
        ))
    }

    pub(super) fn get_mode(&self, key: &Key, mode: FileMode) -> Result<Option<Entry>> {
        let s = self.hot();
        // A read-only handle skips the hit counts and access times rather than failing.
        let bookkeeping = s.reads_write() && !self.inner.read_only;
        if bookkeeping {
            return self.write(None, |db, _| {
                let now = now();
                let found = match self.read_row(db, key)? {
                    Some(mut row) if live(row.expire_time, now) => {
                        match self.load_mode(&mut row, mode)? {
                            Found::Yes(v) => Some((row, v)),
                            // Under the write lock the row cannot have changed: damage.
                            Found::Missing => {
                                let name = row.filename.clone().unwrap_or_default();
                                self.missing_file(db, key, &name)?;
                                None
                            }
                        }
                    }
                    _ => None,
                };
                if s.statistics {
                    let col = if found.is_some() { "hits" } else { "misses" };
                    db.prepare_cached(&format!("UPDATE meta SET {col} = {col} + 1"))
                        .and_then(|mut st| st.execute([]))
                        .ctx("counting a hit or miss")?;
                }
                let Some((row, value)) = found else {
                    return Ok(None);
                };
                self.touch_access(db, row.rowid, s.eviction_policy, now)?;
                Ok(Some(Entry {
                    value,
                    expire_time: row.expire_time,
                    tag: row.tag,
                }))
            });
        }
        self.read_entry(key, mode)
    }

    /// A live entry for `key` from this thread's memo of recent reads (D-017, D-065), found
    /// without a call into SQLite, a lock or a system call but the odd read of a note; `None`
    /// when only SQLite can answer (not remembered, expired, a connection not yet open on
    /// this thread, a transaction open, or a cache that counts hits or access times). Cheap
    /// enough that the binding calls it without releasing the GIL, which costs more.
    pub fn get_remembered(&self, key: &Key) -> Option<Entry> {
        let s = self.hot();
        if s.reads_write() && !self.inner.read_only {
            return None;
        }
        self.remembered(|c| {
            let header = c.header()?;
            let entry = c.recent.get(&header, key)?;
            live(entry.expire_time, now()).then_some(entry)
        })
    }

    /// Read an unexpired entry without counting a hit or miss or recording an access, as
    /// python-diskcache's `incr` reads the value it is about to replace.
    pub fn get_quietly(&self, key: &Key) -> Result<Option<Entry>> {
        self.read_entry(key, FileMode::Read)
    }

    fn read_entry(&self, key: &Key, mode: FileMode) -> Result<Option<Entry>> {
        self.read_call(|c| loop {
            // Taken before the read: a commit after it shows as a changed header later.
            // An immutable connection has no WAL index to watch (and mapping one would create
            // the -shm file): it reads without the recent-values cache.
            let header = c.header();
            if let Some(h) = &header {
                if let Some(e) = c.recent.get(h, key) {
                    if live(e.expire_time, now()) {
                        return Ok(Some(e));
                    }
                    return Ok(None);
                }
            }
            let Some(mut row) = self.read_row(&c.db, key)? else {
                return Ok(None);
            };
            if !live(row.expire_time, now()) {
                return Ok(None);
            }
            match self.load_mode(&mut row, mode)? {
                Found::Yes(value) => {
                    let entry = Entry {
                        value,
                        expire_time: row.expire_time,
                        tag: row.tag,
                    };
                    if let Some(h) = header {
                        c.recent.put(h, key, &entry, row.rowid);
                    }
                    return Ok(Some(entry));
                }
                Found::Missing => {
                    let name = row.filename.unwrap_or_default();
                    if !self.missing_file(&c.db, key, &name)? {
                        continue;
                    }
                }
            }
        })
    }

    pub(super) fn touch_access(
        &self,
        db: &Db,
        rowid: i64,
        policy: EvictionPolicy,
        now: f64,
    ) -> Result<()> {
        let sql = match policy {
            EvictionPolicy::LeastRecentlyUsed => "UPDATE cache SET access_time = ?2 WHERE rowid = ?1",
            EvictionPolicy::LeastFrequentlyUsed => "UPDATE cache SET access_count = access_count + 1 WHERE rowid = ?1 AND ?2 IS NOT NULL",
            _ => return Ok(()),
        };
        db.held(sql)
            .and_then(|mut st| st.execute(params![rowid, now]))
            .ctx("recording an access")?;
        Ok(())
    }

    pub fn contains(&self, key: &Key) -> Result<bool> {
        self.read_call(|c| {
            let (k, raw) = key_sql(key);
            let mut stmt =
                c.db.held("SELECT expire_time FROM cache WHERE key = ?1 AND raw = ?2")
                    .ctx("looking up a key")?;
            let expire: Option<Option<f64>> = stmt
                .query_row(params![k, raw], |r| r.get(0))
                .optional()
                .ctx("looking up a key")?;
            Ok(expire.is_some_and(|e| live(e, now())))
        })
    }

    /// Read many keys in one transaction; `None` for each miss.
    pub fn get_many(&self, keys: &[Key]) -> Result<Vec<Option<Entry>>> {
        let s = self.hot();
        if s.reads_write() && !self.inner.read_only {
            // Every read is also a write here; keep one lock round trip per key like get().
            return keys.iter().map(|k| self.get(k, false)).collect();
        }
        self.read_call(|c| {
            let top = c.depth == 0;
            if top {
                run(&c.db, "BEGIN").ctx("starting a read")?;
            }
            let mut stale = Vec::new();
            let result = (|| {
                let now = now();
                let mut out = Vec::with_capacity(keys.len());
                for key in keys {
                    let entry = match self.read_row(&c.db, key)? {
                        Some(mut row) if live(row.expire_time, now) => {
                            match self.load(&mut row, false)? {
                                Found::Yes(value) => Some(Entry {
                                    value,
                                    expire_time: row.expire_time,
                                    tag: row.tag,
                                }),
                                // Inside this read's snapshot the row still names the file
                                // a writer may have committed away and unlinked since: ask
                                // again once the snapshot is over.
                                Found::Missing if top => {
                                    stale.push(out.len());
                                    None
                                }
                                // Under the caller's write lock nothing changed: damage.
                                Found::Missing => {
                                    let name = row.filename.clone().unwrap_or_default();
                                    self.missing_file(&c.db, key, &name)?;
                                    None
                                }
                            }
                        }
                        _ => None,
                    };
                    out.push(entry);
                }
                Ok(out)
            })();
            if top {
                let _ = run(&c.db, "COMMIT");
            }
            result.map(|out| (out, stale))
        })
        .and_then(|(mut out, stale)| {
            for i in stale {
                out[i] = self.read_entry(&keys[i], FileMode::Read)?;
            }
            Ok(out)
        })
    }

    /// The first (`last == false`) or last entry in insertion order. Expired entries met on
    /// the way are deleted, as python-diskcache does.
    pub fn peekitem(&self, last: bool) -> Result<Option<(Key, Entry)>> {
        let order = if last { "DESC" } else { "ASC" };
        if self.inner.read_only {
            return self.peekitem_read_only(order);
        }
        self.write(None, |db, unlink| {
            let now = now();
            let mut delta = Delta::default();
            let sql = format!(
                concat!(
                    "SELECT ",
                    row_columns!(),
                    ", key, raw FROM cache ORDER BY rowid {} LIMIT 1"
                ),
                order
            );
            let found = loop {
                let mut stmt = db.prepare_cached(&sql).ctx("peeking")?;
                let got = stmt
                    .query_row([], |r| {
                        Ok((row_from(r)?, key_from(r.get_ref(8)?, r.get(9)?)))
                    })
                    .optional()
                    .ctx("peeking")?;
                drop(stmt);
                let Some((row, key)) = got else { break None };
                let mut row = row?;
                if !live_or_equal(row.expire_time, now) {
                    delete_row(db, &row, unlink, &mut delta)?;
                    continue;
                }
                match self.load(&mut row, false)? {
                    Found::Yes(value) => {
                        break Some((
                            key?,
                            Entry {
                                value,
                                expire_time: row.expire_time,
                                tag: row.tag,
                            },
                        ))
                    }
                    Found::Missing => {
                        return Err(Error::corrupt_fixed_by(
                            format!(
                                "the value file {:?} of an entry is missing",
                                row.filename.unwrap_or_default()
                            ),
                            crate::error::Repair::RemoveEntries,
                        ))
                    }
                }
            };
            apply_delta(db, &delta)?;
            Ok(found)
        })
    }

    /// `peekitem` for a read-only handle: expired entries are skipped, not deleted.
    pub(super) fn peekitem_read_only(&self, order: &str) -> Result<Option<(Key, Entry)>> {
        self.read(|db| {
            let sql = format!(
                concat!(
                    "SELECT ",
                    row_columns!(),
                    ", key, raw FROM cache WHERE expire_time IS NULL OR expire_time >= ?1 \
                     ORDER BY rowid {} LIMIT 1"
                ),
                order
            );
            let mut stmt = db.prepare_cached(&sql).ctx("peeking")?;
            let got = stmt
                .query_row([now()], |r| {
                    Ok((row_from(r)?, key_from(r.get_ref(8)?, r.get(9)?)))
                })
                .optional()
                .ctx("peeking")?;
            drop(stmt);
            let Some((row, key)) = got else {
                return Ok(None);
            };
            let mut row = row?;
            match self.load(&mut row, false)? {
                Found::Yes(value) => Ok(Some((
                    key?,
                    Entry {
                        value,
                        expire_time: row.expire_time,
                        tag: row.tag,
                    },
                ))),
                Found::Missing => Err(Error::corrupt_fixed_by(
                    format!(
                        "the value file {:?} of an entry is missing",
                        row.filename.unwrap_or_default()
                    ),
                    crate::error::Repair::RemoveEntries,
                )),
            }
        })
    }

    /// A page of the str keys that start with `prefix`, in key order, strictly after `after`.
    /// An indexed range scan: `[prefix, prefix with its last byte incremented)`.
    pub fn keys_prefixed(
        &self,
        prefix: &str,
        after: Option<&str>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<Key>> {
        let lo = prefix.as_bytes().to_vec();
        let mut hi = lo.clone();
        // The smallest byte string above every string starting with `prefix`.
        while let Some(last) = hi.pop() {
            if last < 0xff {
                hi.push(last + 1);
                break;
            }
        }
        let unbounded = hi.is_empty();
        let (cmp, order) = if reverse { ("<", "DESC") } else { (">", "ASC") };
        let sql = format!(
            "SELECT key FROM cache WHERE raw = 1 AND key >= ?1 AND (?2 OR key < ?3) AND (?4 IS NULL OR key {cmp} ?4) \
             AND typeof(key) = 'text' ORDER BY key {order} LIMIT CAST(?5 AS INTEGER)"
        );
        self.read(|db| {
            let mut stmt = db.prepare_cached(&sql).ctx("listing keys")?;
            let rows = stmt
                .query_map(
                    params![
                        ToSqlOutput::Borrowed(Sql::Text(&lo)),
                        unbounded,
                        ToSqlOutput::Borrowed(Sql::Text(&hi)),
                        after,
                        limit as i64
                    ],
                    |r| Ok(key_from(r.get_ref(0)?, RAW_NATIVE)),
                )
                .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
                .ctx("listing keys")?;
            rows.into_iter().collect()
        })
    }

    /// A page of keys in key order, strictly after `after` (or from the start). Expired keys included.
    pub fn keys_sorted(
        &self,
        after: Option<&Key>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<Key>> {
        self.read_call(|c| {
            let (cmp, order) = if reverse { ("<", "DESC") } else { (">", "ASC") };
            let limit = limit as i64;
            let rows = match after {
                None => {
                    let sql = format!("SELECT key, raw FROM cache ORDER BY key {order}, raw {order} LIMIT CAST(?1 AS INTEGER)");
                    let mut stmt = c.db.prepare_cached(&sql).ctx("listing keys")?;
                    let rows = stmt.query_map([limit], |r| Ok(key_from(r.get_ref(0)?, r.get(1)?)));
                    rows.and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>()).ctx("listing keys")?
                }
                Some(k) => {
                    let (k, raw) = key_sql(k);
                    let sql = format!(
                        "SELECT key, raw FROM cache WHERE (key, raw) {cmp} (?1, ?2) ORDER BY key {order}, raw {order} LIMIT CAST(?3 AS INTEGER)"
                    );
                    let mut stmt = c.db.prepare_cached(&sql).ctx("listing keys")?;
                    let rows = stmt.query_map(params![k, raw, limit], |r| Ok(key_from(r.get_ref(0)?, r.get(1)?)));
                    rows.and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>()).ctx("listing keys")?
                }
            };
            rows.into_iter().collect()
        })
    }

    /// The highest rowid now in use: iteration in insertion order stops there.
    pub fn max_rowid(&self) -> Result<Option<i64>> {
        self.read_call(|c| {
            c.db.query_row("SELECT MAX(rowid) FROM cache", [], |r| r.get(0))
                .ctx("reading the last row")
        })
    }

    /// A page of (rowid, key) with `lo < rowid < hi`, in rowid order (descending if not `ascending`).
    pub fn keys_by_rowid(
        &self,
        lo: i64,
        hi: i64,
        ascending: bool,
        limit: usize,
    ) -> Result<Vec<(i64, Key)>> {
        self.read_call(|c| {
            let order = if ascending { "ASC" } else { "DESC" };
            let sql = format!("SELECT rowid, key, raw FROM cache WHERE ?1 < rowid AND rowid < ?2 ORDER BY rowid {order} LIMIT CAST(?3 AS INTEGER)");
            let mut stmt = c.db.prepare_cached(&sql).ctx("listing keys")?;
            let rows = stmt
                .query_map(params![lo, hi, limit as i64], |r| Ok((r.get::<_, i64>(0)?, key_from(r.get_ref(1)?, r.get(2)?))))
                .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
                .ctx("listing keys")?;
            rows.into_iter().map(|(id, k)| k.map(|k| (id, k))).collect()
        })
    }

    /// Number of entries, expired ones included.
    pub fn len(&self) -> Result<u64> {
        self.meta_value("count").map(|v| v.max(0) as u64)
    }

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Bytes used on disk: database pages plus value files.
    pub fn volume(&self) -> Result<u64> {
        self.read_call(|c| volume(&c.db, self.inner.page_size, false))
            .map(|v| v.max(0) as u64)
    }

    pub(super) fn meta_value(&self, column: &str) -> Result<i64> {
        self.read_call(|c| {
            c.db.prepare_cached(&format!("SELECT {column} FROM meta"))
                .and_then(|mut st| st.query_row([], |r| r.get(0)))
                .ctx("reading the cache's counters")
        })
    }
}
