//! Leased jobs: a job queue with lasting ids, leases, retries and a dead-letter list.
//!
//! A job is `ready` (takeable once `due`), `leased` (taken; `due` is the lease deadline) or
//! `dead` (out of attempts). Every take counts an attempt and draws a new lease number, which
//! is never reused (a release or a requeue lowers the attempt count, never the lease number):
//! finishing, failing, extending or releasing a job names the lease it holds, so a worker whose
//! lease expired and was taken over cannot touch the new holder's job.
//!
//! The code lives by concept, one file each: this file holds the handle ([`Jobs`]), the types a
//! caller holds, `put`, and the rows every part reads; `take.rs` the transaction that takes
//! (and passes over or buries the jobs its caller cannot read); `lease.rs` what the holder of a
//! lease does with it (finish, fail, extend, release, bury) and the sweep of expired leases;
//! `operator.rs` an operator's reads and repairs (counts, list, dead letters, requeue, purge).

use crate::cache::{now, Cache, Prepared, ValueColumns};
use crate::error::{Corruption, SqlContext};
use crate::format::stored::{StoredValue, ValueRef};
use crate::store::files::Found;
use crate::store::statements::Db;
use crate::{Error, Result};
use rusqlite::{params, OptionalExtension};

/// A job's columns (see [`JOB_COLUMNS`]), as a macro so that hot statements can be literals.
macro_rules! job_columns {
    () => {
        "id, queue, state, due, attempts, max_attempts, created, error, dedupe, lease, kind, crc, filename, value, size"
    };
}

// After the macro, which the submodules use.
mod lease;
mod operator;
mod take;

pub use lease::Swept;
pub use operator::{JobCounts, ListState, ListValues, ListedJob};
pub use take::{pass_delay, TakeVerdict, Taken, PASSES_PER_TAKE};

const READY: i64 = 0;
const LEASED: i64 = 1;
const DEAD: i64 = 2;

/// How to enqueue a job.
#[derive(Debug, Clone, Default)]
pub struct JobOptions {
    /// Seconds before the job may be taken.
    pub delay: f64,
    /// At most one ready or leased job per queue has this key; a second put returns the first's id.
    pub unique: Option<String>,
    /// Takes after which a failed or abandoned job goes to the dead-letter list; 0 means no limit.
    pub max_attempts: u32,
}

/// What `job_put` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    Added(i64),
    /// A ready or leased job with the same unique key exists; nothing was added.
    Duplicate(i64),
}

impl Put {
    pub fn id(self) -> i64 {
        match self {
            Put::Added(id) | Put::Duplicate(id) => id,
        }
    }
}

/// A job as a worker holds it after `job_take`.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: i64,
    pub queue: String,
    /// How many attempts it has used, this one included (releases are not counted).
    pub attempts: u32,
    /// This lease's number: the fencing token to pass to finish, fail, extend and release.
    pub lease: i64,
    pub max_attempts: u32,
    /// Seconds since the epoch when the lease ends unless extended.
    pub lease_deadline: f64,
    pub created: f64,
    /// Why the previous attempt failed, if it did.
    pub error: Option<String>,
    /// The value, or why it could not be read (the job stays leased; fail or release it).
    pub value: Result<StoredValue, JobValueError>,
}

/// Why a job's value could not be loaded. The job itself is intact: it can still be failed,
/// released, buried or deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobValueError {
    /// Its stored bytes or value file are damaged or missing: no build could read them.
    Corrupt(Corruption),
    /// Its value file could not be read for another reason (I/O, permissions).
    Unreadable(String),
    /// It was not read: the job was listed with a preview ([`ListValues::Preview`]).
    NotRead,
}

impl std::fmt::Display for JobValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobValueError::Corrupt(m) => write!(f, "corrupt value: {m}"),
            JobValueError::Unreadable(m) => write!(f, "{m}"),
            JobValueError::NotRead => write!(
                f,
                "the value was not read: the job was listed with a preview (read one job to get it)"
            ),
        }
    }
}

impl std::error::Error for JobValueError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Ready,
    Leased,
    Dead,
}

/// A job as `job_info` and `job_dead` report it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobInfo {
    pub id: i64,
    pub queue: String,
    pub state: JobState,
    /// Ready: when it may be taken; leased: the lease deadline; dead: when it died.
    pub due: f64,
    pub attempts: u32,
    pub max_attempts: u32,
    pub created: f64,
    pub error: Option<String>,
    pub unique: Option<String>,
    pub value: Result<StoredValue, JobValueError>,
}

fn check_queue(queue: &str) -> Result<()> {
    if queue.is_empty() || queue.contains('\0') {
        return Err(Error::invalid(
            "queue: a job queue needs a non-empty name without NUL characters",
        ));
    }
    Ok(())
}

fn check_seconds(name: &str, v: f64) -> Result<()> {
    crate::basics::check_seconds(name, v, false)
}

/// The leased jobs of a cache directory: their own table, which the cache's eviction, `clear`
/// and `len` never touch. Get one with [`Cache::jobs`]; it is a borrowed view, free to make.
pub struct Jobs<'c> {
    cache: &'c Cache,
}

impl Cache {
    /// The directory's leased jobs.
    pub fn jobs(&self) -> Jobs<'_> {
        Jobs { cache: self }
    }
}

impl Jobs<'_> {
    /// Enqueue a job. Returns its lasting id (or, for a duplicate unique key, the existing job's).
    pub fn put(&self, queue: &str, value: ValueRef<'_>, options: &JobOptions) -> Result<Put> {
        check_queue(queue)?;
        check_seconds("delay", options.delay)?;
        let (prepared, file) = self.cache.prepare(value)?;
        let new_file = prepared.file.clone();
        self.cache.write(file, |db, unlink| {
            if let Some(u) = &options.unique {
                let existing: Option<i64> = db
                    .held("SELECT id FROM jobs WHERE queue = ?1 AND dedupe = ?2 AND state < 2")
                    .and_then(|mut st| st.query_row(params![queue, u], |r| r.get(0)).optional())
                    .ctx("checking a unique job")?;
                if let Some(id) = existing {
                    unlink.extend(new_file);
                    return Ok(Put::Duplicate(id));
                }
            }
            let now = now();
            let id = insert_job(db, queue, &prepared, now + options.delay, options, now)?;
            Ok(Put::Added(id))
        })
    }

    /// Enqueue many jobs of one queue in one transaction.
    pub fn put_many(
        &self,
        queue: &str,
        values: &[ValueRef<'_>],
        options: &JobOptions,
    ) -> Result<Vec<i64>> {
        check_queue(queue)?;
        check_seconds("delay", options.delay)?;
        if options.unique.is_some() {
            return Err(Error::invalid(
                "unique: one unique key cannot name several jobs; put them one by one",
            ));
        }
        let (prepared, files, lock) = self.cache.prepare_many(values)?;
        let result = self.cache.write(None, |db, _| {
            drop(lock);
            let now = now();
            prepared
                .iter()
                .map(|p| insert_job(db, queue, p, now + options.delay, options, now))
                .collect()
        });
        self.cache.settle_new_files(files, result.is_ok())?;
        result
    }

    fn value(&self, id: i64, stored: ValueColumns) -> Result<StoredValue, JobValueError> {
        match self.cache.load_columns(id, stored) {
            Ok(Found::Yes(v)) => Ok(v),
            Ok(Found::Missing) => Err(JobValueError::Corrupt(Corruption::new(format!(
                "the value file of job {id} is missing"
            )))),
            Err(Error::Corrupt(m)) => Err(JobValueError::Corrupt(m)),
            Err(e) => Err(JobValueError::Unreadable(e.to_string())),
        }
    }

    fn info_from(&self, r: JobRow) -> JobInfo {
        let (r, stored) = r.split();
        let value = self.value(r.id, stored);
        info_of(r, value)
    }
}

fn info_of(r: JobRow<()>, value: Result<StoredValue, JobValueError>) -> JobInfo {
    JobInfo {
        id: r.id,
        queue: r.queue,
        state: match r.state {
            READY => JobState::Ready,
            LEASED => JobState::Leased,
            _ => JobState::Dead,
        },
        due: r.due,
        attempts: r.attempts,
        max_attempts: r.max_attempts,
        created: r.created,
        error: r.error,
        unique: r.dedupe,
        value,
    }
}

/// The columns of a job before its value's (the start of [`JOB_COLUMNS`]).
const JOB_FIELDS: &str =
    "id, queue, state, due, attempts, max_attempts, created, error, dedupe, lease";

/// A job's columns; the last five are the value's, in the order [`ValueColumns`] reads them.
const JOB_COLUMNS: &str = job_columns!();
const VALUE_FROM: usize = 10;

struct JobRow<V = ValueColumns> {
    id: i64,
    queue: String,
    state: i64,
    due: f64,
    attempts: u32,
    max_attempts: u32,
    created: f64,
    error: Option<String>,
    dedupe: Option<String>,
    lease: i64,
    /// Its value, loaded through the cache (which checks a value file's length, D-035), or
    /// what a preview reads of it.
    stored: V,
}

impl<V> JobRow<V> {
    /// The row without its value, and its value.
    fn split(self) -> (JobRow<()>, V) {
        let JobRow {
            id,
            queue,
            state,
            due,
            attempts,
            max_attempts,
            created,
            error,
            dedupe,
            lease,
            stored,
        } = self;
        let row = JobRow {
            id,
            queue,
            state,
            due,
            attempts,
            max_attempts,
            created,
            error,
            dedupe,
            lease,
            stored: (),
        };
        (row, stored)
    }
}

fn job_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<JobRow> {
    job_row_of(r, |r| ValueColumns::from_row(r, VALUE_FROM))
}

/// A job's row, its value read by `stored`.
fn job_row_of<V>(
    r: &rusqlite::Row<'_>,
    stored: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<V>,
) -> rusqlite::Result<JobRow<V>> {
    Ok(JobRow {
        id: r.get(0)?,
        queue: r.get(1)?,
        state: r.get(2)?,
        due: r.get(3)?,
        attempts: r.get::<_, i64>(4)?.clamp(0, u32::MAX as i64) as u32,
        max_attempts: r.get::<_, i64>(5)?.clamp(0, u32::MAX as i64) as u32,
        created: r.get(6)?,
        error: r.get(7)?,
        dedupe: r.get(8)?,
        lease: r.get(9)?,
        stored: stored(r)?,
    })
}

fn insert_job(
    db: &Db,
    queue: &str,
    p: &Prepared<'_>,
    due: f64,
    o: &JobOptions,
    now: f64,
) -> Result<i64> {
    let value = crate::cache::inline_sql(p.inline);
    db.held(
        "INSERT INTO jobs (queue, state, due, attempts, max_attempts, dedupe, created, kind, crc, size, filename, value) \
         VALUES (?1, 0, ?2, 0, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )
    .and_then(|mut st| {
        st.execute(params![queue, due, o.max_attempts, o.unique, now, p.kind as i64, p.crc, p.size, p.file, value])
    })
    .ctx("enqueueing a job")?;
    Ok(db.last_insert_rowid())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_jobs_value_columns_are_the_caches() {
        let value =
            &super::JOB_COLUMNS[super::JOB_COLUMNS.len() - crate::cache::VALUE_COLUMNS.len()..];
        assert_eq!(value, crate::cache::VALUE_COLUMNS);
        assert_eq!(
            super::JOB_COLUMNS.split(", ").nth(super::VALUE_FROM),
            Some("kind")
        );
        assert!(super::JOB_COLUMNS.starts_with(&format!("{}, kind", super::JOB_FIELDS)));
    }
}
