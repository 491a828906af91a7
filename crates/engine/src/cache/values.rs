//! Values in and out: preparing payloads for writes, loading them on reads.

use super::*;

impl Cache {
    /// Put a large payload in its file (holding the shared directory lock until the row is
    /// written); keep a small one inline.
    pub(crate) fn prepare<'a>(
        &self,
        value: ValueRef<'a>,
    ) -> Result<(Prepared<'a>, Option<NewFile>)> {
        self.writable()?;
        if matches!(value, ValueRef::Float(f) if f.is_nan()) {
            // SQLite stores a NaN REAL as NULL; encode it (set_value does) instead.
            return Err(Error::invalid(
                "value: a NaN float cannot take the native float path; store it as an encoded value",
            ));
        }
        let payload = value.payload();
        let bytes = payload.bytes();
        let crc = checksum(bytes);
        let min = self.hot().disk_min_file_size;
        let fits_inline =
            matches!(value, ValueRef::Int(_) | ValueRef::Float(_)) || (bytes.len() as i64) < min;
        if fits_inline {
            return Ok((
                Prepared {
                    kind: value.kind(),
                    crc,
                    size: 0,
                    inline: Some(value),
                    file: None,
                },
                None,
            ));
        }
        let lock = self.file_guard()?;
        let name = ValueFiles::new_name()?;
        self.inner.files.write(&name, bytes)?;
        let prepared = Prepared {
            kind: value.kind(),
            crc,
            size: bytes.len() as i64,
            inline: None,
            file: Some(name.clone()),
        };
        Ok((prepared, Some((name, lock))))
    }

    pub(super) fn read_row(&self, db: &Db, key: &Key) -> Result<Option<Row>> {
        let (k, raw) = key_sql(key);
        let mut stmt = db
            .held(concat!(
                "SELECT ",
                row_columns!(),
                " FROM cache WHERE key = ?1 AND raw = ?2"
            ))
            .ctx("reading an entry")?;
        stmt.query_row(params![k, raw], row_from)
            .optional()
            .ctx("reading an entry")?
            .transpose()
    }

    pub(crate) fn load(&self, row: &mut Row, as_file: bool) -> Result<Found<StoredValue>> {
        self.load_mode(
            row,
            if as_file {
                FileMode::Handle
            } else {
                FileMode::Read
            },
        )
    }

    pub(super) fn load_mode(&self, row: &mut Row, mode: FileMode) -> Result<Found<StoredValue>> {
        let kind = Kind::from_i64(row.kind)?;
        let crc = row.crc;
        let Some(name) = row.filename.as_deref() else {
            let inline = std::mem::replace(&mut row.inline, Inline::Null);
            return load_inline(kind, crc, inline).map(Found::Yes);
        };
        let files = &self.inner.files;
        if mode == FileMode::Defer && kind == Kind::Bytes {
            let file = ValueFile {
                name: name.to_owned(),
                crc,
                size: row.size.max(0) as u64,
            };
            return Ok(Found::Yes(StoredValue::Deferred(file)));
        }
        if mode == FileMode::Handle && kind == Kind::Bytes {
            return Ok(match files.verify(name, crc, row.size)? {
                Found::Yes(file) => Found::Yes(StoredValue::File(ValueHandle {
                    path: files.path(name),
                    file: std::sync::Arc::new(file),
                    size: row.size as u64,
                })),
                Found::Missing => Found::Missing,
            });
        }
        let data = match files.read(name, crc, row.size)? {
            Found::Yes(d) => d,
            Found::Missing => return Ok(Found::Missing),
        };
        Ok(Found::Yes(match kind {
            Kind::Str => StoredValue::Str(
                String::from_utf8(data)
                    .map_err(|_| Error::corrupt("a text value file is not valid UTF-8"))?,
            ),
            Kind::Bytes => StoredValue::Bytes(data),
            Kind::Encoded => StoredValue::Encoded(data),
            Kind::Pickled => StoredValue::Pickled(data),
            Kind::Int | Kind::Float => {
                return Err(Error::corrupt("a numeric value names a value file"))
            }
        }))
    }

    /// A value file named by a row was missing. Inside a read that raced a delete that is a
    /// miss; if the row still names it, the cache was damaged.
    pub(super) fn missing_file(&self, db: &Db, key: &Key, name: &str) -> Result<bool> {
        let still = self
            .read_row(db, key)?
            .and_then(|r| r.filename)
            .is_some_and(|f| f == name);
        if still {
            return Err(Error::corrupt(format!(
                "the value file {name:?} of this entry is missing (deleted behind the cache's back?); \
                 check(fix=True) removes such entries"
            )));
        }
        Ok(false)
    }
}

/// A stored value's columns, as every table that holds values has them, in this order:
/// `kind, crc, filename, value, size` (the cache's rows and the jobs table). What another
/// module reads of a value it stores in its own table; the loading stays here.
pub(crate) struct ValueColumns {
    kind: i64,
    crc: u32,
    filename: Option<String>,
    inline: Inline,
    size: i64,
}

/// The column list [`ValueColumns::from_row`] reads (the jobs table's test checks its own).
#[cfg(test)]
pub(crate) const VALUE_COLUMNS: &str = "kind, crc, filename, value, size";

impl ValueColumns {
    /// Read the five value columns starting at index `first` of a row.
    pub(crate) fn from_row(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<Self> {
        Ok(ValueColumns {
            kind: r.get(first)?,
            crc: r.get::<_, i64>(first + 1)? as u32,
            filename: r.get(first + 2)?,
            inline: inline_from(r.get_ref(first + 3)?),
            size: r.get(first + 4)?,
        })
    }
}

impl Cache {
    /// Load a value stored in another table's [`ValueColumns`] (`id` names it in errors):
    /// checked against its CRC and, for a value file, against its recorded size (D-035).
    pub(crate) fn load_columns(&self, id: i64, v: ValueColumns) -> Result<Found<StoredValue>> {
        let mut row = Row {
            rowid: id,
            expire_time: None,
            tag: None,
            kind: v.kind,
            crc: v.crc,
            filename: v.filename,
            size: v.size,
            inline: v.inline,
        };
        self.load(&mut row, false)
    }
}
