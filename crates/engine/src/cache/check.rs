//! `check`: what is wrong with a cache directory, as typed [`Problem`]s, and its repair.

use super::*;
use std::fmt;

/// One problem [`Cache::check`] found. Its `Display` is the message shown to users; the
/// variants let a caller sort problems without reading that text (the binding gives
/// [`Problem::UnknownFile`] its own warning class).
#[derive(Debug)]
#[non_exhaustive]
pub enum Problem {
    /// A line of SQLite's `PRAGMA integrity_check` other than `ok`.
    Integrity { message: String },
    /// A row of the `cache` table whose columns could not be read.
    UnreadableRow { error: Error },
    /// A row names a value file that is not there (`fix` drops the row).
    MissingFile { path: PathBuf },
    /// An entry whose value could not be loaded: a file of another length than its row says,
    /// not a regular file, or bytes that fail their checksum (`fix` drops the row).
    DamagedEntry { rowid: i64, error: Error },
    /// `values` is `kind` (a symbolic link, a file...), not a directory, and was not followed
    /// (`fix` removes it, a link itself and never its target).
    ValuesNotADirectory { path: PathBuf, kind: &'static str },
    /// A file or directory under `values/` that no row names (`fix` removes it).
    UnknownFile { path: PathBuf },
    /// The recorded entry count is not the number of rows (`fix` recounts).
    CountMismatch { recorded: i64, actual: i64 },
    /// The recorded total size is not the sum of the rows' sizes (`fix` recounts).
    SizeMismatch { recorded: i64, actual: i64 },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Integrity { message } => write!(f, "integrity: {message}"),
            Problem::UnreadableRow { error } => write!(f, "unreadable row: {error}"),
            Problem::MissingFile { path } => write!(f, "file not found: {}", path.display()),
            Problem::DamagedEntry { rowid, error } => {
                write!(f, "damaged entry (rowid {rowid}): {error}")
            }
            Problem::ValuesNotADirectory { path, kind } => write!(
                f,
                "values is {kind}, not a directory: {} was not followed; a check with fix \
                 removes it (a link itself, never what it points to) and the cache makes a new \
                 values directory",
                path.display()
            ),
            Problem::UnknownFile { path } => write!(f, "unknown file: {}", path.display()),
            Problem::CountMismatch { recorded, actual } => {
                write!(f, "meta.count != COUNT(cache); {recorded} != {actual}")
            }
            Problem::SizeMismatch { recorded, actual } => {
                write!(f, "meta.size != SUM(cache.size); {recorded} != {actual}")
            }
        }
    }
}

impl Cache {
    /// Check the database and the value files; with `fix`, repair what can be repaired
    /// (vacuum, drop rows whose files are gone or damaged, remove orphan files, recount).
    /// Returns the problems found, in the order found (a [`Problem`] displays as a message).
    pub fn check(&self, fix: bool) -> Result<Vec<Problem>> {
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
                problems.extend(
                    rows.into_iter()
                        .map(|message| Problem::Integrity { message }),
                );
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
                        problems.push(Problem::UnreadableRow { error: e });
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
                    Ok(Found::Missing) => Some(Problem::MissingFile {
                        path: files.path(row.filename.as_deref().unwrap_or("")),
                    }),
                    Err(error) => Some(Problem::DamagedEntry {
                        rowid: row.rowid,
                        error,
                    }),
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
                problems.push(Problem::ValuesNotADirectory {
                    path: files.root().to_path_buf(),
                    kind,
                });
                if fix {
                    let _ = files.remove_root();
                }
            } else {
                for entry in files.list()? {
                    let relative = entry.relative();
                    if entry.plain && known.contains(&relative) {
                        continue;
                    }
                    problems.push(Problem::UnknownFile {
                        path: files.root().join(&relative),
                    });
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
                problems.push(Problem::CountMismatch {
                    recorded: count,
                    actual: real_count,
                });
            }
            if size != real_size {
                problems.push(Problem::SizeMismatch {
                    recorded: size,
                    actual: real_size,
                });
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_problem_displays_as_the_message_check_always_gave() {
        let path = PathBuf::from("/c/values/ab/cd.val");
        let cases = [
            (
                Problem::Integrity {
                    message: "row 3 missing from index".into(),
                },
                "integrity: row 3 missing from index",
            ),
            (
                Problem::MissingFile { path: path.clone() },
                "file not found: /c/values/ab/cd.val",
            ),
            (
                Problem::DamagedEntry {
                    rowid: 7,
                    error: Error::corrupt("bad"),
                },
                "damaged entry (rowid 7): corrupt value: bad",
            ),
            (
                Problem::UnknownFile { path },
                "unknown file: /c/values/ab/cd.val",
            ),
            (
                Problem::CountMismatch {
                    recorded: 2,
                    actual: 3,
                },
                "meta.count != COUNT(cache); 2 != 3",
            ),
            (
                Problem::SizeMismatch {
                    recorded: 5,
                    actual: 0,
                },
                "meta.size != SUM(cache.size); 5 != 0",
            ),
        ];
        for (problem, text) in cases {
            assert_eq!(problem.to_string(), text);
        }
        let values = Problem::ValuesNotADirectory {
            path: "/c/values".into(),
            kind: "a symbolic link",
        };
        assert!(values
            .to_string()
            .starts_with("values is a symbolic link, not a directory: /c/values was not followed"));
        assert!(
            !values.to_string().contains("fix=True"),
            "no Python in the engine"
        );
    }
}
