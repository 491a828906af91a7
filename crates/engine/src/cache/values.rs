//! Values in and out: preparing payloads for writes, loading them on reads.

use super::*;
use crate::format::value::{fit, preview, PREVIEW_BYTES};

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
            return Err(Error::corrupt_fixed_by(
                format!(
                    "the value file {name:?} of this entry is missing (deleted behind the cache's \
                     back?)"
                ),
                crate::error::Repair::RemoveEntries,
            ));
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

/// The columns a preview reads of a stored value, in [`ValueColumns`]' order, but with the
/// inline value cut to [`PREVIEW_BYTES`] by SQLite and its whole length after them: `kind,
/// crc, filename, prefix, size, length`. SQLite still reads an inline value whole (at most
/// `disk_min_file_size` bytes); a value file is read only as far as the prefix (D-046).
pub(crate) const PREVIEW_COLUMNS: &str = "kind, crc, filename, \
     CASE WHEN typeof(value) IN ('blob', 'text') THEN substr(CAST(value AS BLOB), 1, 4096) ELSE value END, \
     size, octet_length(value)";

/// A stored value's columns as [`PREVIEW_COLUMNS`] selects them.
pub(crate) struct PreviewColumns {
    kind: i64,
    crc: u32,
    filename: Option<String>,
    prefix: Inline,
    size: i64,
    length: Option<i64>,
}

impl PreviewColumns {
    /// Read the six preview columns starting at index `first` of a row.
    pub(crate) fn from_row(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<Self> {
        Ok(PreviewColumns {
            kind: r.get(first)?,
            crc: r.get::<_, i64>(first + 1)? as u32,
            filename: r.get(first + 2)?,
            prefix: inline_from(r.get_ref(first + 3)?),
            size: r.get(first + 4)?,
            length: r.get(first + 5)?,
        })
    }
}

impl Cache {
    /// A preview of the live entry under `key`, at most `width` characters (D-046): built
    /// from at most the first [`PREVIEW_BYTES`] of its value, never decoded or unpickled, and
    /// without touching its access time or the hit counters. `None` if there is no such entry.
    /// A damaged or missing value is described in the text, not raised.
    pub fn preview(&self, key: &Key, width: usize) -> Result<Option<String>> {
        let found = self.read(|db| {
            let (k, raw) = key_sql(key);
            db.prepare_cached(&format!(
                "SELECT expire_time, {PREVIEW_COLUMNS} FROM cache WHERE key = ?1 AND raw = ?2"
            ))
            .and_then(|mut st| {
                st.query_row(params![k, raw], |r| {
                    Ok((r.get::<_, Option<f64>>(0)?, PreviewColumns::from_row(r, 1)?))
                })
                .optional()
            })
            .ctx("previewing an entry")
        })?;
        Ok(match found {
            Some((expire_time, columns)) if live(expire_time, now()) => {
                Some(self.preview_columns(columns, width))
            }
            _ => None,
        })
    }

    /// The preview of a value stored in [`PreviewColumns`]: reads at most [`PREVIEW_BYTES`] of
    /// its value file, and checks the checksum when it has the whole payload.
    pub(crate) fn preview_columns(&self, v: PreviewColumns, width: usize) -> String {
        let Ok(kind) = Kind::from_i64(v.kind) else {
            return fit(&format!("<damaged: unknown value kind {}>", v.kind), width);
        };
        let (bytes, total) = match (v.filename, v.prefix, kind) {
            (Some(name), _, _) => {
                match self.inner.files.read_prefix(&name, v.size, PREVIEW_BYTES) {
                    Ok(Found::Yes(bytes)) => (bytes, v.size.max(0) as u64),
                    // Deleted by a writer since the row was read, or behind the cache's back.
                    Ok(Found::Missing) => return fit("<value file missing>", width),
                    Err(Error::Corrupt(m)) => return fit(&format!("<damaged: {m}>"), width),
                    Err(e) => return fit(&format!("<unreadable: {e}>"), width),
                }
            }
            (None, Inline::Int(i), Kind::Int) => (i.to_le_bytes().to_vec(), 8),
            (None, Inline::Float(f), Kind::Float) => (f.to_le_bytes().to_vec(), 8),
            (
                None,
                Inline::Text(b) | Inline::Blob(b),
                Kind::Str | Kind::Bytes | Kind::Encoded | Kind::Pickled,
            ) => {
                let total = v.length.map_or(b.len() as u64, |n| n.max(0) as u64);
                (b, total)
            }
            _ => return fit("<damaged: the stored value does not match its kind>", width),
        };
        if bytes.len() as u64 == total && checksum(&bytes) != v.crc {
            return fit(
                "<damaged: the stored bytes do not match their checksum>",
                width,
            );
        }
        preview(kind, &bytes, total, width)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_sql_cuts_inline_values_where_previews_stop() {
        let cut = format!("substr(CAST(value AS BLOB), 1, {})", super::PREVIEW_BYTES);
        assert!(super::PREVIEW_COLUMNS.contains(&cut));
    }
}
