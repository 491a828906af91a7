//! Claims: "someone is working on this key" marks with a lifetime, kept apart from the cache's
//! entries (D-044).
//!
//! A claim lives in the `claims` table of the cache database, so every thread and process that
//! opens the directory sees it, and no `clear`, eviction, expiry, cull or size limit removes
//! it. It is held by a token: only that token releases or extends it. Once its lifetime has
//! passed it counts as free: the next `try_acquire` replaces it, so a holder that died blocks
//! the key for at most one lifetime. Every change commits a write, which rings the directory's
//! bell: a waiter in [`Cache::wait_for`] wakes when a claim is released.

use crate::cache::{key_from, key_sql, now, Cache};
use crate::error::SqlContext;
use crate::format::key::Key;
use crate::{Error, Result};
use rusqlite::{params, OptionalExtension};

/// Who holds a claim.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimInfo {
    /// The holder's token.
    pub token: String,
    /// The holder's host name and process id, for people reading `holder()`.
    pub host: String,
    pub pid: i64,
    /// When it was taken, and when it ends unless extended (seconds since the epoch).
    pub acquired: f64,
    pub expires: f64,
}

/// A live claim, as [`Cache::all_claims`] lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedClaim {
    pub namespace: String,
    pub key: Key,
    pub info: ClaimInfo,
}

/// The claims of one namespace in a cache directory: get them with [`Cache::claims`]. A
/// borrowed view, free to make.
pub struct Claims<'c> {
    cache: &'c Cache,
    namespace: &'c str,
}

impl Cache {
    /// The claims of `namespace` (claims on the same key in two namespaces are separate).
    pub fn claims<'c>(&'c self, namespace: &'c str) -> Claims<'c> {
        Claims {
            cache: self,
            namespace,
        }
    }

    /// Every live claim in the directory, by namespace and then key.
    pub fn all_claims(&self) -> Result<Vec<ListedClaim>> {
        list(self, None, 0, None)
    }

    /// A page of the live claims (of `namespace`, or of every namespace), in
    /// [`Cache::all_claims`]' order: at most `limit` after skipping `offset`. For an
    /// operator's page (D-046): only the claims on it are read into keys.
    pub fn claims_page(
        &self,
        namespace: Option<&str>,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<ListedClaim>> {
        list(self, namespace, offset, Some(limit))
    }

    /// How many live claims there are (of `namespace`, or of every namespace).
    pub fn claims_count(&self, namespace: Option<&str>) -> Result<u64> {
        let found = self.read(|db| {
            db.prepare_cached(
                "SELECT COUNT(*) FROM claims WHERE expires > ?1 AND (?2 IS NULL OR namespace = ?2)",
            )
            .and_then(|mut st| st.query_row(params![now(), namespace], |r| r.get::<_, i64>(0)))
            .ctx("counting claims")
        });
        match found {
            Ok(n) => Ok(n.max(0) as u64),
            Err(e) if missing_table(&e) => Ok(0),
            Err(e) => Err(e),
        }
    }
}

fn check_lifetime(lease: f64) -> Result<()> {
    crate::basics::check_seconds("lease", lease, true)
}

const COLUMNS: &str = "token, host, pid, acquired, expires";

fn info(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<ClaimInfo> {
    Ok(ClaimInfo {
        token: r.get(first)?,
        host: r.get(first + 1)?,
        pid: r.get(first + 2)?,
        acquired: r.get(first + 3)?,
        expires: r.get(first + 4)?,
    })
}

/// A read-only handle may open a directory made before the claims table: no table, no claims.
fn missing_table(e: &Error) -> bool {
    matches!(e, Error::Sqlite { source, .. } if source.to_string().contains("no such table: claims"))
}

fn list(
    cache: &Cache,
    namespace: Option<&str>,
    offset: usize,
    limit: Option<usize>,
) -> Result<Vec<ListedClaim>> {
    // SQLite takes a negative LIMIT as none.
    let limit = limit.map_or(-1, |n| n.min(i64::MAX as usize) as i64);
    let offset = offset.min(i64::MAX as usize) as i64;
    let found = cache.read(|db| {
        let mut st = db
            .prepare_cached(&format!(
                "SELECT namespace, key, raw, {COLUMNS} FROM claims \
                 WHERE expires > ?1 AND (?2 IS NULL OR namespace = ?2) ORDER BY namespace, key, raw \
                 LIMIT ?3 OFFSET ?4"
            ))
            .ctx("listing claims")?;
        let rows = st
            .query_map(params![now(), namespace, limit, offset], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    key_from(r.get_ref(1)?, r.get(2)?),
                    info(r, 3)?,
                ))
            })
            .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
            .ctx("listing claims")?;
        rows.into_iter()
            .map(|(namespace, key, info)| {
                Ok(ListedClaim {
                    namespace,
                    key: key?,
                    info,
                })
            })
            .collect()
    });
    match found {
        Err(e) if missing_table(&e) => Ok(Vec::new()),
        other => other,
    }
}

impl Claims<'_> {
    /// Take the claim on `key` for `lease` seconds with `token`, if nobody holds it (an
    /// expired claim counts as free). True if it was taken. Never waits for the claim.
    pub fn try_acquire(
        &self,
        key: &Key,
        lease: f64,
        token: &str,
        host: &str,
        pid: i64,
    ) -> Result<bool> {
        check_lifetime(lease)?;
        let (k, raw) = key_sql(key);
        self.cache.write(None, |db, _| {
            let now = now();
            db.held(
                "DELETE FROM claims WHERE namespace = ?1 AND key = ?2 AND raw = ?3 AND expires <= ?4",
            )
            .and_then(|mut st| st.execute(params![self.namespace, k, raw, now]))
            .ctx("taking a claim")?;
            let added = db
                .held(
                    "INSERT OR IGNORE INTO claims (namespace, key, raw, token, host, pid, acquired, expires) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .and_then(|mut st| {
                    st.execute(params![self.namespace, k, raw, token, host, pid, now, now + lease])
                })
                .ctx("taking a claim")?;
            Ok(added == 1)
        })
    }

    /// Release the claim on `key` if `token` holds it and it is live; true if it did.
    pub fn release(&self, key: &Key, token: &str) -> Result<bool> {
        let (k, raw) = key_sql(key);
        self.cache.write(None, |db, _| {
            let n = db
                .held(
                    "DELETE FROM claims WHERE namespace = ?1 AND key = ?2 AND raw = ?3 \
                     AND token = ?4 AND expires > ?5",
                )
                .and_then(|mut st| st.execute(params![self.namespace, k, raw, token, now()]))
                .ctx("releasing a claim")?;
            Ok(n > 0)
        })
    }

    /// Make the claim on `key` end `lease` seconds from now if `token` holds it and it is
    /// live (a heartbeat). The new end, or `None` if the claim was not `token`'s.
    pub fn extend(&self, key: &Key, token: &str, lease: f64) -> Result<Option<f64>> {
        check_lifetime(lease)?;
        let (k, raw) = key_sql(key);
        self.cache.write(None, |db, _| {
            let now = now();
            let n = db
                .held(
                    "UPDATE claims SET expires = ?6 WHERE namespace = ?1 AND key = ?2 AND raw = ?3 \
                     AND token = ?4 AND expires > ?5",
                )
                .and_then(|mut st| {
                    st.execute(params![self.namespace, k, raw, token, now, now + lease])
                })
                .ctx("extending a claim")?;
            Ok((n > 0).then_some(now + lease))
        })
    }

    /// Who holds the live claim on `key`; `None` if nobody does.
    pub fn holder(&self, key: &Key) -> Result<Option<ClaimInfo>> {
        let (k, raw) = key_sql(key);
        let found = self.cache.read(|db| {
            db.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM claims WHERE namespace = ?1 AND key = ?2 AND raw = ?3 AND expires > ?4"
            ))
            .and_then(|mut st| {
                st.query_row(params![self.namespace, k, raw, now()], |r| info(r, 0))
                    .optional()
            })
            .ctx("reading a claim")
        });
        match found {
            Err(e) if missing_table(&e) => Ok(None),
            other => other,
        }
    }

    /// Remove the claim on `key` whoever holds it (an operator's tool); true if there was a
    /// live one.
    pub fn break_claim(&self, key: &Key) -> Result<bool> {
        let (k, raw) = key_sql(key);
        self.cache.write(None, |db, _| {
            let n = db
                .held(
                    "DELETE FROM claims WHERE namespace = ?1 AND key = ?2 AND raw = ?3 AND expires > ?4",
                )
                .and_then(|mut st| st.execute(params![self.namespace, k, raw, now()]))
                .ctx("breaking a claim")?;
            Ok(n > 0)
        })
    }

    /// This namespace's live claims, by key.
    pub fn list(&self) -> Result<Vec<ListedClaim>> {
        list(self.cache, Some(self.namespace), 0, None)
    }
}
