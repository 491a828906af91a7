//! Queues on the cache's key space: `push` at one end, `pull` from the other.
//!
//! A queue is the range of keys of exactly one shape (D-054): `"{prefix}-"` and 15 digits, or
//! an int in `0..=999_999_999_999_999` without a prefix. Other keys that sort inside the range
//! are stepped over, never pulled or numbered.

use crate::cache::{apply_delta, entry_select, now, Cache, Delta, Fresh, Placed, Stamp};
use crate::error::SqlContext;
use crate::format::key::{Key, Scalar, Side};
use crate::format::stored::{Entry, ValueRef};
use crate::store::statements::Db;
use crate::{Error, Result, WriteOptions};
use rusqlite::types::ToSqlOutput;
use rusqlite::{params, OptionalExtension};

/// The first number a queue hands out; each side then has 500 trillion numbers (D-057).
pub const QUEUE_START: i64 = 500_000_000_000_000;
/// The last number of the 15-digit space.
pub const QUEUE_MAX: i64 = 999_999_999_999_999;

/// What a `pull` caller decides about the item at the end of the queue, inside the pull's
/// write transaction (so no other worker can take it meanwhile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Remove it and return it.
    Take,
    /// Leave it where it is and stop (this process cannot read it; another may).
    Leave,
    /// Remove it (no build could read it) and stop.
    DropAndStop,
    /// Remove it and look at the next one.
    DropAndContinue,
}

/// An item at the end of a queue, as `pull` offers it: its entry, or why it could not be read.
pub struct Candidate {
    pub key: Key,
    pub entry: Result<Entry>,
    /// Which run of the pull's transaction saw it: 0, or more when the transaction was
    /// rolled back and run again (a removal on a full disk, D-039). A caller that keeps state
    /// across the candidates of one pull starts it over when this changes.
    pub attempt: u32,
}

/// A queue's key range and shape filter, bound into SQL.
struct Range {
    prefix: Option<String>,
}

impl Range {
    fn new(prefix: Option<&str>) -> Range {
        Range {
            prefix: prefix.map(str::to_owned),
        }
    }

    fn key(&self, num: i64) -> Key {
        match &self.prefix {
            Some(p) => Key::Native(Scalar::Str(format!("{p}-{num:015}"))),
            None => Key::Native(Scalar::Int(num)),
        }
    }

    fn number(&self, key: &Key) -> Result<i64> {
        match (key, &self.prefix) {
            (Key::Native(Scalar::Int(i)), None) => Ok(*i),
            (Key::Native(Scalar::Str(s)), Some(p)) => s[p.len() + 1..]
                .parse()
                .map_err(|_| Error::corrupt("a queue key lost its number")),
            _ => Err(Error::corrupt("a queue key has the wrong type")),
        }
    }

    /// `WHERE` terms selecting exactly this queue's keys; parameters ?1 ?2 (bounds), ?3 ?4 (shape).
    fn filter_for(prefixed: bool) -> &'static str {
        if prefixed {
            "key >= ?1 AND key <= ?2 AND raw = 1 AND length(key) = ?3 \
             AND substr(key, ?4) NOT GLOB '*[^0-9]*'"
        } else {
            "key >= ?1 AND key <= ?2 AND raw = 1 AND typeof(key) = 'integer' AND ?3 IS NULL AND ?4 IS NULL"
        }
    }

    fn args(&self) -> [ToSqlOutput<'static>; 4] {
        use rusqlite::types::Value as V;
        let owned = |v: V| ToSqlOutput::Owned(v);
        match &self.prefix {
            Some(p) => {
                let chars = p.chars().count() as i64;
                [
                    owned(V::Text(format!("{p}-000000000000000"))),
                    owned(V::Text(format!("{p}-999999999999999"))),
                    owned(V::Integer(chars + 16)),
                    owned(V::Integer(chars + 2)),
                ]
            }
            None => [
                owned(V::Integer(0)),
                owned(V::Integer(QUEUE_MAX)),
                owned(V::Null),
                owned(V::Null),
            ],
        }
    }
}

pub(crate) fn check_prefix(prefix: Option<&str>) -> Result<()> {
    if let Some(p) = prefix {
        if p.contains('\0') {
            return Err(Error::invalid("prefix: must not contain NUL characters"));
        }
    }
    Ok(())
}

/// The queue named by a prefix, on a cache's keys: get one with [`Cache::queue`]. It is a
/// borrowed view, free to make; its items are ordinary cache entries, so `get`, `delete` and
/// the cache's expiry see them too.
pub struct Queue<'c> {
    cache: &'c Cache,
    prefix: Option<&'c str>,
    range: Range,
}

/// A queue's figures, as [`Cache::queues`] reports them.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueStats {
    /// The queue's prefix; `None` for the queue of int keys.
    pub prefix: Option<String>,
    /// Its live items (expired ones not counted).
    pub depth: u64,
    /// When its oldest live item was pushed (seconds since the epoch).
    pub oldest: Option<f64>,
}

impl Cache {
    /// Every queue in the cache's keys, with its depth and the age of its oldest item: the
    /// keys of the queue shape (D-054), grouped by prefix. A full scan of the keys: for
    /// operators, not for a worker's loop.
    pub fn queues(&self) -> Result<Vec<QueueStats>> {
        self.read(|db| {
            let mut st = db
                .prepare_cached(
                    "SELECT CASE WHEN typeof(key) = 'integer' THEN NULL ELSE substr(key, 1, length(key) - 16) END, \
                     COUNT(*), MIN(store_time) FROM cache \
                     WHERE raw = 1 AND (expire_time IS NULL OR expire_time > ?1) AND ( \
                       (typeof(key) = 'integer' AND key >= 0 AND key <= ?2) OR \
                       (typeof(key) = 'text' AND length(key) >= 17 AND substr(key, -16, 1) = '-' \
                        AND substr(key, -15) NOT GLOB '*[^0-9]*')) \
                     GROUP BY 1 ORDER BY 1",
                )
                .ctx("listing queues")?;
            let rows = st
                .query_map(params![now(), QUEUE_MAX], |r| {
                    Ok(QueueStats {
                        prefix: r.get(0)?,
                        depth: r.get::<_, i64>(1)?.max(0) as u64,
                        oldest: r.get(2)?,
                    })
                })
                .and_then(|it| it.collect::<rusqlite::Result<Vec<_>>>())
                .ctx("listing queues")?;
            Ok(rows)
        })
    }

    /// The queue of the keys `"{prefix}-"` + 15 digits, or of int keys without a prefix.
    pub fn queue<'c>(&'c self, prefix: Option<&'c str>) -> Queue<'c> {
        Queue {
            cache: self,
            prefix,
            range: Range::new(prefix),
        }
    }
}

impl Queue<'_> {
    /// Push onto one end of the queue. Returns the item's key.
    pub fn push(&self, value: ValueRef<'_>, side: Side, options: &WriteOptions) -> Result<Key> {
        check_prefix(self.prefix)?;
        let cache = self.cache;
        let (prepared, file) = cache.prepare(value)?;
        let stamp = Stamp::new(options);
        cache.write(file, |db, unlink| {
            let key = next_key(db, &self.range, side)?;
            cache.store(db, &key, &prepared, &stamp, Fresh::Known, unlink)?;
            Ok(key)
        })
    }

    /// Push many values in one transaction, in order. Returns their keys.
    pub fn push_many(
        &self,
        values: &[ValueRef<'_>],
        side: Side,
        options: &WriteOptions,
    ) -> Result<Vec<Key>> {
        check_prefix(self.prefix)?;
        let cache = self.cache;
        let (prepared, files, lock) = cache.prepare_many(values)?;
        let stamp = Stamp::new(options);
        let result = cache.write(None, |db, unlink| {
            drop(lock);
            let mut delta = Delta::default();
            let mut keys = Vec::with_capacity(values.len());
            for p in &prepared {
                let key = next_key(db, &self.range, side)?;
                cache.upsert(db, &key, p, &stamp, Fresh::Known, unlink, &mut delta)?;
                keys.push(key);
            }
            cache.cull_in(db, stamp.now, unlink, &mut delta)?;
            apply_delta(db, &delta)?;
            Ok(keys)
        });
        cache.settle_new_files(files, result.is_ok())?;
        result
    }

    /// Pull from one end of the queue. `decide` sees each live item at that end, inside the
    /// write transaction, and says whether to take it. Returns the taken item, or `None` when
    /// the queue is empty or `decide` stopped.
    pub fn pull(
        &self,
        side: Side,
        decide: &mut dyn FnMut(&Candidate) -> Verdict,
    ) -> Result<Option<(Key, Entry)>> {
        Ok(self.pull_many(side, 1, decide)?.pop())
    }

    /// Pull up to `n` items in one transaction.
    pub fn pull_many(
        &self,
        side: Side,
        n: usize,
        decide: &mut dyn FnMut(&Candidate) -> Verdict,
    ) -> Result<Vec<(Key, Entry)>> {
        check_prefix(self.prefix)?;
        let cache = self.cache;
        let mut attempts = 0u32;
        cache.freeing(|db, unlink| {
            let attempt = attempts;
            attempts += 1;
            let mut taken = Vec::new();
            let mut delta = Delta::default();
            while taken.len() < n {
                let Some((placed, mut candidate)) = self.front(db, side)? else {
                    break;
                };
                candidate.attempt = attempt;
                let verdict = decide(&candidate);
                if verdict == Verdict::Leave {
                    break;
                }
                cache.remove_placed(db, placed, unlink, &mut delta)?;
                match (verdict, candidate.entry) {
                    (Verdict::Take, Ok(entry)) => taken.push((candidate.key, entry)),
                    (Verdict::DropAndContinue, _) => continue,
                    _ => break,
                }
            }
            apply_delta(db, &delta)?;
            Ok(taken)
        })
    }

    /// The live item at one end of the queue, left in place. Takes no write lock.
    pub fn peek(&self, side: Side) -> Result<Option<Candidate>> {
        check_prefix(self.prefix)?;
        let prefix = self.prefix;
        self.cache.read_remembering(|db, recent, header| {
            if let Some(h) = &header {
                if let Some(item) = recent.front(h, prefix, side, now()) {
                    return Ok(item.map(|(key, e)| Candidate {
                        key,
                        entry: Ok(e),
                        attempt: 0,
                    }));
                }
            }
            let found = self.front(db, side)?.map(|(_, candidate)| candidate);
            if let Some(h) = header {
                match &found {
                    None => recent.put_front(h, prefix, side, None),
                    Some(Candidate {
                        key,
                        entry: Ok(e),
                        attempt: 0,
                    }) => recent.put_front(h, prefix, side, Some((key, e))),
                    Some(_) => {}
                }
            }
            Ok(found)
        })
    }

    /// Remove a damaged item found by `peek` (the caller saw its error); true if it was still there.
    pub fn discard(&self, key: &Key) -> Result<bool> {
        self.cache.remove_damaged(key)
    }

    /// The first live item of the queue at `side`, with where it is stored.
    fn front(&self, db: &Db, side: Side) -> Result<Option<(Placed, Candidate)>> {
        let sql = statement(QueueSql::Front, &self.range, side);
        let [a, b, c, d] = self.range.args();
        let found = self
            .cache
            .first_entry(db, sql, params![a, b, c, d, now()])?;
        Ok(found.map(|(placed, key, entry)| {
            (
                placed,
                Candidate {
                    key,
                    entry,
                    attempt: 0,
                },
            )
        }))
    }
}

/// The key a push to `side` takes: one past the current end, including expired items, which
/// keep their numbers until removed.
fn next_key(db: &Db, range: &Range, side: Side) -> Result<Key> {
    let sql = statement(QueueSql::NextKey, range, side);
    let [a, b, c, d] = range.args();
    let end: Option<Key> = db
        .held(sql)
        .and_then(|mut st| {
            st.query_row(params![a, b, c, d], |r| {
                Ok(crate::cache::key_from(r.get_ref(0)?, 1))
            })
            .optional()
        })
        .ctx("finding the end of a queue")?
        .transpose()?;
    let num = match end {
        None => QUEUE_START,
        Some(k) => {
            let n = range.number(&k)?;
            match side {
                Side::Back if n < QUEUE_MAX => n + 1,
                Side::Front if n > 0 => n - 1,
                _ => {
                    return Err(Error::Overflow(format!(
                        "the queue {:?} has used every number at its {} end (500 trillion pushes); nothing was \
                         overwritten. Drain it and start a new prefix",
                        range.prefix.as_deref().unwrap_or("(int keys)"),
                        if side == Side::Back { "back" } else { "front" }
                    )))
                }
            }
        }
    };
    Ok(range.key(num))
}

#[derive(Clone, Copy)]
enum QueueSql {
    /// The first live item at a side.
    Front,
    /// The key at the end of a side, expired items included.
    NextKey,
}

/// The text of a queue statement for this key shape and side, built once per process (the
/// connection keeps it prepared by its address).
fn statement(which: QueueSql, range: &Range, side: Side) -> &'static str {
    static TEXTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let texts = TEXTS.get_or_init(|| {
        let mut texts = Vec::new();
        for which in [QueueSql::Front, QueueSql::NextKey] {
            for prefixed in [false, true] {
                for side in [Side::Front, Side::Back] {
                    let filter = Range::filter_for(prefixed);
                    let order = side.order();
                    texts.push(match which {
                        QueueSql::Front => entry_select(&format!(
                            "{filter} AND (expire_time IS NULL OR expire_time > ?5) ORDER BY key {order} LIMIT 1"
                        )),
                        QueueSql::NextKey => {
                            format!("SELECT key FROM cache WHERE {filter} ORDER BY key {order} LIMIT 1")
                        }
                    });
                }
            }
        }
        texts
    });
    let index = (which as usize) * 4 + (range.prefix.is_some() as usize) * 2 + (side as usize);
    &texts[index]
}
