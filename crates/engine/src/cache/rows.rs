//! Moving keys, tags, values and rows between Rust and SQLite.

use super::*;

pub(crate) fn key_sql(key: &Key) -> (ToSqlOutput<'_>, i64) {
    let v = match key {
        Key::Native(Scalar::Int(i)) => Sql::Integer(*i),
        Key::Native(Scalar::Float(f)) => Sql::Real(*f),
        Key::Native(Scalar::Str(s)) => Sql::Text(s.as_bytes()),
        Key::Native(Scalar::Bytes(b)) | Key::Encoded(b) | Key::Pickled(b) => Sql::Blob(b),
    };
    (ToSqlOutput::Borrowed(v), key.raw())
}

pub(super) fn scalar_sql(s: &Option<Scalar>) -> ToSqlOutput<'static> {
    ToSqlOutput::Owned(s.as_ref().map_or(SqlValue::Null, scalar_value))
}

pub(super) fn scalar_value(s: &Scalar) -> SqlValue {
    match s {
        Scalar::Int(i) => SqlValue::Integer(*i),
        Scalar::Float(f) => SqlValue::Real(*f),
        Scalar::Str(s) => SqlValue::Text(s.clone()),
        Scalar::Bytes(b) => SqlValue::Blob(b.clone()),
    }
}

pub(crate) fn inline_sql<'a>(v: Option<ValueRef<'a>>) -> ToSqlOutput<'a> {
    ToSqlOutput::Borrowed(match v {
        None => Sql::Null,
        Some(ValueRef::Int(i)) => Sql::Integer(i),
        Some(ValueRef::Float(f)) => Sql::Real(f),
        Some(ValueRef::Str(s)) => Sql::Text(s.as_bytes()),
        Some(ValueRef::Bytes(b) | ValueRef::Encoded(b) | ValueRef::Pickled(b)) => Sql::Blob(b),
    })
}

pub(super) fn scalar_from(v: Sql<'_>) -> Result<Option<Scalar>> {
    Ok(match v {
        Sql::Null => None,
        Sql::Integer(i) => Some(Scalar::Int(i)),
        Sql::Real(f) => Some(Scalar::Float(f)),
        Sql::Text(t) => Some(Scalar::Str(
            std::str::from_utf8(t)
                .map_err(|_| Error::corrupt("a stored tag is not valid UTF-8"))?
                .to_owned(),
        )),
        Sql::Blob(b) => Some(Scalar::Bytes(b.to_vec())),
    })
}

pub(crate) fn key_from(v: Sql<'_>, raw: i64) -> Result<Key> {
    match (raw, v) {
        (RAW_NATIVE, v) => match scalar_from(v)? {
            Some(s) => Ok(Key::Native(s)),
            None => Err(Error::corrupt("a stored key is NULL")),
        },
        (RAW_ENCODED, Sql::Blob(b)) => Ok(Key::Encoded(b.to_vec())),
        (RAW_PICKLED, Sql::Blob(b)) => Ok(Key::Pickled(b.to_vec())),
        _ => Err(Error::corrupt(format!(
            "a stored key has an unknown form (raw = {raw})"
        ))),
    }
}

/// Map a `SELECT row_columns!()` row. Damage to the row itself is reported per row.
pub(crate) fn row_from(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<Row>> {
    let inline = inline_from(r.get_ref(7)?);
    let tag = match scalar_from(r.get_ref(2)?) {
        Ok(t) => t,
        Err(e) => return Ok(Err(e)),
    };
    Ok(Ok(Row {
        rowid: r.get(0)?,
        expire_time: r.get(1)?,
        tag,
        kind: r.get(3)?,
        crc: r.get::<_, i64>(4)? as u32,
        filename: r.get(5)?,
        size: r.get(6)?,
        inline,
    }))
}

/// An inline value column, copied out of SQLite.
pub(super) fn inline_from(v: Sql<'_>) -> Inline {
    match v {
        Sql::Null => Inline::Null,
        Sql::Integer(i) => Inline::Int(i),
        Sql::Real(f) => Inline::Float(f),
        Sql::Text(t) => Inline::Text(t.to_vec()),
        Sql::Blob(b) => Inline::Blob(b.to_vec()),
    }
}

pub(super) fn load_inline(kind: Kind, crc: u32, inline: Inline) -> Result<StoredValue> {
    let check = |bytes: &[u8]| {
        if checksum(bytes) == crc {
            Ok(())
        } else {
            Err(Error::corrupt(
                "a stored value does not match its checksum; the bytes on disk were damaged",
            ))
        }
    };
    Ok(match (kind, inline) {
        (Kind::Int, Inline::Int(i)) => {
            check(&i.to_le_bytes())?;
            StoredValue::Int(i)
        }
        (Kind::Float, Inline::Float(f)) => {
            check(&f.to_le_bytes())?;
            StoredValue::Float(f)
        }
        (Kind::Str, Inline::Text(b) | Inline::Blob(b)) => {
            check(&b)?;
            StoredValue::Str(
                String::from_utf8(b)
                    .map_err(|_| Error::corrupt("a stored text value is not valid UTF-8"))?,
            )
        }
        (Kind::Bytes, Inline::Blob(b)) => {
            check(&b)?;
            StoredValue::Bytes(b)
        }
        (Kind::Encoded, Inline::Blob(b)) => {
            check(&b)?;
            StoredValue::Encoded(b)
        }
        (Kind::Pickled, Inline::Blob(b)) => {
            check(&b)?;
            StoredValue::Pickled(b)
        }
        (kind, _) => {
            return Err(Error::corrupt(format!(
                "a stored value does not have the SQLite type its kind ({kind:?}) needs"
            )))
        }
    })
}

/// What `incr` needs of a row: its int value and checksum, if it holds an inline int.
pub(super) struct Counter {
    pub(super) rowid: i64,
    pub(super) expire_time: Option<f64>,
    pub(super) int: Option<(i64, u32)>,
}

/// What deleting a row needs to know.
/// A row being deleted: what removing it must update. Its fields are the cache module's.
pub(crate) struct DeadRow {
    pub(super) rowid: i64,
    pub(super) filename: Option<String>,
    pub(super) size: i64,
}

pub(super) fn select_rows(
    db: &Db,
    sql: &'static str,
    args: impl rusqlite::Params,
) -> Result<Vec<DeadRow>> {
    let mut stmt = db.held(sql).ctx("selecting entries to remove")?;
    stmt.query_map(args, |r| {
        Ok(DeadRow {
            rowid: r.get(0)?,
            filename: r.get(1)?,
            size: r.get(2)?,
        })
    })
    .and_then(|it| it.collect())
    .ctx("selecting entries to remove")
}

pub(super) fn delete_by_rowid(
    db: &Db,
    r: &DeadRow,
    unlink: &mut Vec<String>,
    delta: &mut Delta,
) -> Result<()> {
    let n = db
        .held("DELETE FROM cache WHERE rowid = ?1")
        .and_then(|mut st| st.execute([r.rowid]))
        .ctx("removing an entry")?;
    if n > 0 {
        delta.count -= 1;
        delta.size -= r.size;
        unlink.extend(r.filename.clone());
    }
    Ok(())
}

pub(super) fn delete_row(
    db: &Db,
    row: &Row,
    unlink: &mut Vec<String>,
    delta: &mut Delta,
) -> Result<()> {
    delete_by_rowid(
        db,
        &DeadRow {
            rowid: row.rowid,
            filename: row.filename.clone(),
            size: row.size,
        },
        unlink,
        delta,
    )
}

pub(super) fn delete_live(
    db: &Db,
    key: &Key,
    now: f64,
    unlink: &mut Vec<String>,
    delta: &mut Delta,
) -> Result<bool> {
    let (k, raw) = key_sql(key);
    // Found first, then deleted by rowid, rather than `DELETE … RETURNING`: RETURNING builds an
    // ephemeral table (a pager and its page cache, some 90 KB malloc'd and freed) on every
    // call, and when the allocator has given that memory back since the last one, taking it
    // again (brk and page faults) made a delete 50 µs instead of 20 (D-016, issue 32).
    let found: Option<DeadRow> = db
        .held(
            "SELECT rowid, filename, size FROM cache WHERE key = ?1 AND raw = ?2 AND (expire_time IS NULL OR expire_time > ?3)",
        )
        .and_then(|mut st| {
            st.query_row(params![k, raw, now], |r| {
                Ok(DeadRow {
                    rowid: r.get(0)?,
                    filename: r.get(1)?,
                    size: r.get(2)?,
                })
            })
            .optional()
        })
        .ctx("deleting an entry")?;
    let Some(row) = found else {
        return Ok(false);
    };
    // Found inside this write transaction, so the row is there to delete.
    delete_by_rowid(db, &row, unlink, delta)?;
    Ok(true)
}

/// python-diskcache's peekitem treats an entry as expired only once `expire_time < now`.
pub(super) fn live_or_equal(expire_time: Option<f64>, now: f64) -> bool {
    expire_time.is_none_or(|t| t >= now)
}

/// Run a parameterless statement through the statement cache: BEGIN and COMMIT run on every
/// write, and parsing them each time showed up in profiles.
pub(super) fn run(db: &Db, sql: &'static str) -> rusqlite::Result<()> {
    if sql.contains(';') {
        return db.execute_batch(sql);
    }
    db.held(sql)?.raw_execute().map(drop)
}

/// `COMMIT`, with the WAL hook's report of it taken fresh (D-065): what it wrote is this
/// commit's, not an earlier one's.
pub(super) fn commit(db: &Db) -> rusqlite::Result<()> {
    crate::store::notes::expect_commit();
    run(db, "COMMIT")
}

pub(crate) fn apply_delta(db: &Db, d: &Delta) -> Result<()> {
    if d.count == 0 && d.size == 0 {
        return Ok(());
    }
    db.held("UPDATE meta SET count = count + ?1, size = size + ?2")
        .and_then(|mut st| st.execute(params![d.count, d.size]))
        .ctx("updating the cache's counters")?;
    Ok(())
}

/// python-diskcache's volume: the database's pages plus the bytes in value files. `committed`
/// takes the page count from the last commit (D-031), which is cheap and, inside a write, off
/// only by the pages this write adds; otherwise it is exact.
pub(super) fn volume(db: &Db, page_size: i64, committed: bool) -> Result<i64> {
    let known = if committed {
        crate::store::recent::committed_pages(db)
    } else {
        None
    };
    let pages: i64 = match known {
        Some(pages) => pages,
        None => db
            .held("PRAGMA page_count")
            .and_then(|mut st| st.query_row([], |r| r.get(0)))
            .ctx("measuring the cache's volume")?,
    };
    let files: i64 = db
        .held("SELECT size FROM meta")
        .and_then(|mut st| st.query_row([], |r| r.get(0)))
        .ctx("measuring the cache's volume")?;
    Ok(pages * page_size + files)
}
