//! Cache operations for modules that find entries by their own SQL (the queue finds the
//! entry at one end of its key range). They see keys and entries; the row's columns, how a
//! value is loaded and what deleting it must update stay in this module.

use super::*;

/// Where a found entry is stored: what removing it needs. Opaque outside the cache module.
pub(crate) type Placed = DeadRow;

/// A `SELECT` of whole entries: `rest` is the statement after `WHERE` (its terms, order and
/// limit), for [`Cache::first_entry`].
pub(crate) fn entry_select(rest: &str) -> String {
    format!("SELECT {ROW_COLUMNS}, key FROM cache WHERE {rest}")
}

impl Cache {
    /// The first entry `sql` (made by [`entry_select`]) finds, with its value loaded whole:
    /// where it is, its key, and its entry or why that could not be read (a damaged row or
    /// value, a missing value file).
    pub(crate) fn first_entry(
        &self,
        db: &Db,
        sql: &'static str,
        params: impl rusqlite::Params,
    ) -> Result<Option<(Placed, Key, Result<Entry>)>> {
        let found = db
            .held(sql)
            .and_then(|mut st| {
                st.query_row(params, |r| Ok((row_from(r)?, key_from(r.get_ref(8)?, 1))))
                    .optional()
            })
            .ctx("reading an entry")?;
        let Some((row, key)) = found else {
            return Ok(None);
        };
        let mut row = row?;
        let key = key?;
        let entry = match self.load(&mut row, false) {
            Ok(Found::Yes(value)) => Ok(Entry {
                value,
                expire_time: row.expire_time,
                tag: row.tag.clone(),
            }),
            Ok(Found::Missing) => Err(Error::corrupt(format!(
                "the value file {:?} of queue item {key:?} is missing",
                row.filename.as_deref().unwrap_or("")
            ))),
            Err(e) => Err(e),
        };
        let placed = Placed {
            rowid: row.rowid,
            filename: row.filename,
            size: row.size,
        };
        Ok(Some((placed, key, entry)))
    }

    /// Remove an entry found by [`Cache::first_entry`] inside the same write; its value file
    /// goes once the write commits, and `delta` collects the change to the counters.
    pub(crate) fn remove_placed(
        &self,
        db: &Db,
        placed: Placed,
        unlink: &mut Vec<String>,
        delta: &mut Delta,
    ) -> Result<()> {
        delete_by_rowid(db, &placed, unlink, delta)
    }

    /// Remove the entry under `key` whatever its state (its value could not be read, so it is
    /// not loaded); true if it was there.
    pub(crate) fn remove_damaged(&self, key: &Key) -> Result<bool> {
        self.freeing(|db, unlink| {
            let (k, raw) = key_sql(key);
            let gone: Option<(Option<String>, i64)> = db
                .held("DELETE FROM cache WHERE key = ?1 AND raw = ?2 RETURNING filename, size")
                .and_then(|mut st| {
                    st.query_row(params![k, raw], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()
                })
                .ctx("removing a damaged item")?;
            let Some((filename, size)) = gone else {
                return Ok(false);
            };
            unlink.extend(filename);
            apply_delta(
                db,
                &Delta {
                    count: -1,
                    size: -size,
                },
            )?;
            Ok(true)
        })
    }
}
