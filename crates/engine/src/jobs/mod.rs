//! Leased jobs: a job queue with lasting ids, leases, retries and a dead-letter list.
//!
//! A job is `ready` (takeable once `due`), `leased` (taken; `due` is the lease deadline) or
//! `dead` (out of attempts). Every take counts an attempt and draws a new lease number, which
//! is never reused (a release or a requeue lowers the attempt count, never the lease number):
//! finishing, failing, extending or releasing a job names the lease it holds, so a worker whose
//! lease expired and was taken over cannot touch the new holder's job.

use crate::cache::{now, Cache, Prepared, PreviewColumns, ValueColumns, PREVIEW_COLUMNS};
use crate::error::{Corruption, SqlContext};
use crate::format::stored::{StoredValue, ValueRef};
use crate::format::value::PREVIEW_MAX_WIDTH;
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

/// A job as [`Jobs::list`] shows it to an operator.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedJob {
    /// The job; with [`ListValues::Preview`], its `value` is [`JobValueError::NotRead`].
    pub info: JobInfo,
    /// For a leased job, when its current lease was taken (seconds since the epoch); `None`
    /// otherwise, or for a lease taken by a build before this column.
    pub taken: Option<f64>,
    /// With [`ListValues::Preview`], the value's preview ([`crate::value::preview`]).
    pub preview: Option<String>,
}

/// Which of a queue's jobs [`Jobs::list`] lists. `Ready` and `Scheduled` split the ready jobs
/// by whether they are due now, as [`JobCounts`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListState {
    /// Ready and due: a take would get them now.
    Ready,
    /// Ready, but not due yet (delayed, or waiting to retry).
    Scheduled,
    Leased,
    Dead,
}

/// What [`Jobs::list`] does with each job's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListValues {
    /// Load it whole (a value file is read and checked).
    Load,
    /// Leave it unread and give a preview at most this many characters wide, built from at
    /// most the first [`crate::value::PREVIEW_BYTES`] of it.
    Preview(usize),
}

/// Jobs of one queue by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobCounts {
    /// Ready now.
    pub ready: u64,
    /// Ready, but not before a later time (delayed or waiting to retry).
    pub scheduled: u64,
    pub leased: u64,
    pub dead: u64,
}

/// What a sweep of expired leases did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    pub requeued: u64,
    pub dead: u64,
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
    if !v.is_finite() || v < 0.0 {
        return Err(Error::invalid(format!(
            "{name}: expected a finite number of seconds >= 0, got {v}"
        )));
    }
    Ok(())
}

/// What a take's caller decides about a job it is offered, inside the take's transaction (so
/// no other worker can take the job meanwhile).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeVerdict {
    /// Lease it: this caller holds it now.
    Take,
    /// Pass it over: this caller cannot read its value, another may (D-047). The pass counts
    /// as an attempt and `reason` becomes the job's error, so an operator sees it; the job is
    /// ready again after [`pass_delay`], and once it has used its attempts it goes to the
    /// dead-letter list. The take goes on to the next due job.
    Pass(String),
    /// Send it to the dead-letter list with this error (no build could read its value). The
    /// take goes on to the next due job.
    Bury(String),
}

/// How long a job passed over for the `attempts`-th time (1 for the first pass) waits before
/// a take may offer it again: 1 s, doubling with every attempt it has used, at most one lease
/// (and never under 1 s). The wait is what keeps a worker that cannot read a job from meeting
/// it again on every take; it is short at first because a worker that can read it should get
/// it soon.
pub fn pass_delay(attempts: u32, lease: f64) -> f64 {
    let doubling = 2f64.powi(attempts.saturating_sub(1).min(30) as i32);
    doubling.min(lease.max(1.0))
}

/// At most this many jobs are passed over or buried in one take's transaction, so that a
/// backlog of unreadable jobs cannot hold the write lock for long; the take reports that it
/// stopped early ([`Taken::more`]) and its caller takes again.
pub const PASSES_PER_TAKE: usize = 64;

/// What [`Jobs::take_deciding`] did.
#[derive(Debug, Default)]
pub struct Taken {
    /// The jobs leased, at most `n`.
    pub jobs: Vec<Job>,
    /// True if it stopped after [`PASSES_PER_TAKE`] passes or burials with fewer than `n`
    /// jobs leased: more due jobs may be behind those, and a take made now will see them.
    pub more: bool,
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

    /// Lease up to `n` ready jobs for `lease` seconds, trying `queues` in order (the first is the
    /// most urgent). Leases that expired in those queues are requeued (or sent to the dead-letter
    /// list) first.
    ///
    /// Every job offered is leased, including one whose value cannot be read (its `value` is
    /// the error; fail, release or bury it). See [`Jobs::take_deciding`] to decide per job.
    pub fn take(&self, queues: &[&str], lease: f64, n: usize) -> Result<Vec<Job>> {
        Ok(self
            .take_deciding(queues, lease, n, &mut |_| TakeVerdict::Take)?
            .jobs)
    }

    /// [`Jobs::take`], where `decide` sees each due job, value loaded, inside the take's
    /// transaction, and says whether to lease it, pass it over, or bury it. The job it is
    /// shown carries the attempt count and lease number it would get. A job passed over or
    /// buried does not count towards `n`: the take goes on to the jobs behind it, so one job
    /// this caller cannot read never delays another (D-047), up to [`PASSES_PER_TAKE`] of
    /// them per call.
    pub fn take_deciding(
        &self,
        queues: &[&str],
        lease: f64,
        n: usize,
        decide: &mut dyn FnMut(&Job) -> TakeVerdict,
    ) -> Result<Taken> {
        queues.iter().try_for_each(|q| check_queue(q))?;
        check_seconds("lease", lease)?;
        self.cache.write(None, |db, _| {
            let now = now();
            let mut taken = Taken::default();
            let mut passes = 0;
            for queue in queues {
                sweep_queue(db, queue, now)?;
                // A job passed over or buried is no longer due, so each batch starts where the
                // last one's decisions left the queue; the loop ends when a batch is all taken.
                while taken.jobs.len() < n && !taken.more {
                    let rows = due_jobs(db, queue, now, n - taken.jobs.len())?;
                    let offered = rows.len();
                    let before = taken.jobs.len();
                    for row in rows {
                        if passes == PASSES_PER_TAKE {
                            taken.more = true;
                            break;
                        }
                        let job = self.offer(row, now, lease);
                        match decide(&job) {
                            TakeVerdict::Take => {
                                lease_job(db, &job, now)?;
                                taken.jobs.push(job);
                            }
                            TakeVerdict::Pass(reason) => {
                                passes += 1;
                                pass_job(db, &job, now, lease, &reason)?;
                            }
                            TakeVerdict::Bury(error) => {
                                passes += 1;
                                bury_offered(db, job.id, now, &error)?;
                            }
                        }
                    }
                    if offered == 0 || taken.jobs.len() - before == offered {
                        break;
                    }
                }
            }
            Ok(taken)
        })
    }

    /// The job `row` as a take offers it: the attempt count and lease number it would get.
    fn offer(&self, row: JobRow, now: f64, lease: f64) -> Job {
        let id = row.id;
        Job {
            id,
            queue: row.queue,
            attempts: row.attempts.saturating_add(1),
            lease: row.lease + 1,
            max_attempts: row.max_attempts,
            lease_deadline: now + lease,
            created: row.created,
            error: row.error,
            value: self.value(id, row.stored),
        }
    }

    /// Finish a job: it is deleted. False if `lease_id` no longer holds the lease.
    pub fn finish(&self, id: i64, lease_id: i64) -> Result<bool> {
        self.cache.freeing(|db, unlink| {
            let gone: Option<Option<String>> = db
                .held("DELETE FROM jobs WHERE id = ?1 AND state = 1 AND lease = ?2 RETURNING filename")
                .and_then(|mut st| st.query_row(params![id, lease_id], |r| r.get(0)).optional())
                .ctx("finishing a job")?;
            Ok(gone.map(|f| unlink.extend(f)).is_some())
        })
    }

    /// Fail an attempt. The job is retried after `retry_in` seconds, or goes to the dead-letter
    /// list once it has used `max_attempts`. `None` if `lease_id` no longer holds the lease.
    pub fn fail(
        &self,
        id: i64,
        lease_id: i64,
        error: &str,
        retry_in: f64,
    ) -> Result<Option<JobState>> {
        check_seconds("retry_in", retry_in)?;
        self.cache.write(None, |db, _| {
            let state: Option<i64> = db
                .held(
                    "UPDATE jobs SET state = CASE WHEN max_attempts > 0 AND attempts >= max_attempts THEN 2 ELSE 0 END, \
                     due = CASE WHEN max_attempts > 0 AND attempts >= max_attempts THEN ?3 ELSE ?3 + ?4 END, error = ?5 \
                     WHERE id = ?1 AND state = 1 AND lease = ?2 RETURNING state",
                )
                .and_then(|mut st| st.query_row(params![id, lease_id, now(), retry_in, error], |r| r.get(0)).optional())
                .ctx("failing a job")?;
            Ok(state.map(|s| if s == DEAD { JobState::Dead } else { JobState::Ready }))
        })
    }

    /// Extend a lease to `lease` seconds from now (a heartbeat). Returns the new deadline, or
    /// `None` if `lease_id` no longer holds the lease.
    pub fn extend(&self, id: i64, lease_id: i64, lease: f64) -> Result<Option<f64>> {
        check_seconds("lease", lease)?;
        self.cache.write(None, |db, _| {
            let deadline = now() + lease;
            let n = db
                .held("UPDATE jobs SET due = ?3 WHERE id = ?1 AND state = 1 AND lease = ?2")
                .and_then(|mut st| st.execute(params![id, lease_id, deadline]))
                .ctx("extending a lease")?;
            Ok((n > 0).then_some(deadline))
        })
    }

    /// Give a job back without counting the attempt, ready again after `delay` seconds.
    pub fn release(&self, id: i64, lease_id: i64, delay: f64) -> Result<bool> {
        check_seconds("delay", delay)?;
        self.cache.write(None, |db, _| {
            let n = db
                .held(
                    "UPDATE jobs SET state = 0, due = ?3, attempts = attempts - 1 WHERE id = ?1 AND state = 1 AND lease = ?2",
                )
                .and_then(|mut st| st.execute(params![id, lease_id, now() + delay]))
                .ctx("releasing a job")?;
            Ok(n > 0)
        })
    }

    /// Requeue every expired lease of `queue` (or of every queue), or send it to the
    /// dead-letter list if it has used its attempts.
    pub fn sweep(&self, queue: Option<&str>) -> Result<Swept> {
        if let Some(q) = queue {
            check_queue(q)?;
        }
        self.cache.write(None, |db, _| {
            let now = now();
            match queue {
                Some(q) => sweep_queue(db, q, now),
                None => {
                    let queues: Vec<String> = db
                        .prepare("SELECT DISTINCT queue FROM jobs WHERE state = 1 AND due < ?1")
                        .and_then(|mut st| st.query_map([now], |r| r.get(0))?.collect())
                        .ctx("sweeping leases")?;
                    let mut total = Swept::default();
                    for q in queues {
                        let s = sweep_queue(db, &q, now)?;
                        total.requeued += s.requeued;
                        total.dead += s.dead;
                    }
                    Ok(total)
                }
            }
        })
    }

    /// Counts of one queue's jobs by state.
    pub fn counts(&self, queue: &str) -> Result<JobCounts> {
        self.cache.read(|db| {
            let now = now();
            let mut stmt = db
                .held(
                    "SELECT state, due <= ?2, COUNT(*) FROM jobs WHERE queue = ?1 GROUP BY state, due <= ?2",
                )
                .ctx("counting jobs")?;
            let rows: Vec<(i64, bool, i64)> = stmt
                .query_map(params![queue, now], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .and_then(|it| it.collect())
                .ctx("counting jobs")?;
            let mut c = JobCounts::default();
            for (state, due, n) in rows {
                let n = n as u64;
                match (state, due) {
                    (READY, true) => c.ready += n,
                    (READY, false) => c.scheduled += n,
                    (LEASED, _) => c.leased += n,
                    _ => c.dead += n,
                }
            }
            Ok(c)
        })
    }

    /// One job by id, in any state.
    pub fn info(&self, id: i64) -> Result<Option<JobInfo>> {
        let row = self.cache.read(|db| {
            db.prepare_cached(&format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"))
                .and_then(|mut st| st.query_row([id], job_row).optional())
                .ctx("reading a job")
        })?;
        Ok(row.map(|r| self.info_from(r)))
    }

    /// Dead jobs of a queue, oldest death first, after id `after` (for paging).
    pub fn dead(&self, queue: &str, after: i64, limit: usize) -> Result<Vec<JobInfo>> {
        let rows = self.cache.read(|db| {
            db.prepare_cached(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs WHERE queue = ?1 AND state = 2 AND id > ?2 ORDER BY id LIMIT CAST(?3 AS INTEGER)"
            ))
            .and_then(|mut st| st.query_map(params![queue, after, limit as i64], job_row)?.collect::<rusqlite::Result<Vec<_>>>())
            .ctx("listing dead jobs")
        })?;
        Ok(rows.into_iter().map(|r| self.info_from(r)).collect())
    }

    /// The names of the queues that hold jobs, in any state, sorted.
    pub fn queues(&self) -> Result<Vec<String>> {
        self.cache.read(|db| {
            db.prepare_cached("SELECT DISTINCT queue FROM jobs ORDER BY queue")
                .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
                .ctx("listing job queues")
        })
    }

    /// A queue's jobs for an operator: in `state` (all states if `None`), by id after `after`,
    /// at most `limit`; each with when its current lease was taken, for a leased job, and its
    /// value loaded or previewed as `values` says (D-046).
    ///
    /// The state is chosen in SQL: the ids come from the `jobs_due` index alone (which holds
    /// queue, state, due and id), so a page reads at most `limit` rows of the table whatever
    /// the queue holds, and only the index entries of the state asked for (the same entries
    /// [`Jobs::counts`] counts).
    pub fn list(
        &self,
        queue: &str,
        state: Option<ListState>,
        after: i64,
        limit: usize,
        values: ListValues,
    ) -> Result<Vec<ListedJob>> {
        let limit = limit.min(i64::MAX as usize) as i64;
        let rows = self.cache.read(|db| {
            // A directory made before the taken column, opened read-only, lists without it.
            let has_taken: bool = db
                .query_row(
                    "SELECT EXISTS (SELECT 1 FROM pragma_table_info('jobs') WHERE name = 'taken')",
                    [],
                    |r| r.get(0),
                )
                .ctx("listing jobs")?;
            let preview = matches!(values, ListValues::Preview(_));
            let sql = list_sql(state, has_taken, preview);
            let now = now();
            let mut args: Vec<&dyn rusqlite::ToSql> = vec![&queue, &after, &limit];
            if matches!(state, Some(ListState::Ready | ListState::Scheduled)) {
                args.push(&now);
            }
            db.prepare_cached(&sql)
                .and_then(|mut st| {
                    st.query_map(args.as_slice(), |r| {
                        // The taken column comes after the value's (see list_sql).
                        Ok(if preview {
                            let row = job_row_of(r, |r| PreviewColumns::from_row(r, VALUE_FROM))?;
                            (
                                ListedRow::Previewed(row),
                                r.get::<_, Option<f64>>(VALUE_FROM + 6)?,
                            )
                        } else {
                            (ListedRow::Loaded(job_row(r)?), r.get(VALUE_FROM + 5)?)
                        })
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()
                })
                .ctx("listing jobs")
        })?;
        Ok(rows
            .into_iter()
            .map(|(row, taken)| {
                let (info, preview) = match row {
                    ListedRow::Previewed(row) => {
                        let (row, columns) = row.split();
                        let width = match values {
                            ListValues::Preview(width) => width,
                            ListValues::Load => PREVIEW_MAX_WIDTH,
                        };
                        let text = self.cache.preview_columns(columns, width);
                        (info_of(row, Err(JobValueError::NotRead)), Some(text))
                    }
                    ListedRow::Loaded(row) => (self.info_from(row), None),
                };
                let leased = info.state == JobState::Leased;
                ListedJob {
                    info,
                    taken: taken.filter(|_| leased),
                    preview,
                }
            })
            .collect())
    }

    /// Send a leased job straight to the dead-letter list (its value can never be read, say).
    /// False if `lease_id` no longer holds the lease.
    pub fn bury(&self, id: i64, lease_id: i64, error: &str) -> Result<bool> {
        self.cache.write(None, |db, _| {
            let n = db
                .held("UPDATE jobs SET state = 2, due = ?3, error = ?4 WHERE id = ?1 AND state = 1 AND lease = ?2")
                .and_then(|mut st| st.execute(params![id, lease_id, now(), error]))
                .ctx("burying a job")?;
            Ok(n > 0)
        })
    }

    /// An operator's bury: send a ready or leased job to the dead-letter list with `error`,
    /// whoever holds it (a leased job's holder then finds its lease lost). False if the job is
    /// absent or already dead.
    pub fn bury_any(&self, id: i64, error: &str) -> Result<bool> {
        self.cache.write(None, |db, _| {
            let n = db
                .held("UPDATE jobs SET state = 2, due = ?2, error = ?3, lease = lease + 1 WHERE id = ?1 AND state < 2")
                .and_then(|mut st| st.execute(params![id, now(), error]))
                .ctx("burying a job")?;
            Ok(n > 0)
        })
    }

    /// Delete every dead job of `queue` (an operator's purge of the dead-letter list); how
    /// many there were.
    pub fn purge_dead(&self, queue: &str) -> Result<u64> {
        check_queue(queue)?;
        self.cache.freeing(|db, unlink| {
            let files: Vec<Option<String>> = db
                .held("DELETE FROM jobs WHERE queue = ?1 AND state = 2 RETURNING filename")
                .and_then(|mut st| st.query_map([queue], |r| r.get(0))?.collect())
                .ctx("purging dead jobs")?;
            let n = files.len() as u64;
            unlink.extend(files.into_iter().flatten());
            Ok(n)
        })
    }

    /// Put a dead job back in its queue with its attempts reset. False if it is not dead.
    pub fn requeue(&self, id: i64, delay: f64) -> Result<bool> {
        check_seconds("delay", delay)?;
        self.cache.write(None, |db, _| {
            let n = db
                .held("UPDATE jobs SET state = 0, due = ?2, attempts = 0 WHERE id = ?1 AND state = 2")
                .and_then(|mut st| st.execute(params![id, now() + delay]))
                .map_err(|e| match &e {
                    rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation => {
                        Error::invalid(format!(
                            "job {id}: another ready or leased job has the same unique key; finish or delete it first"
                        ))
                    }
                    _ => crate::error::sql_error("requeueing a job", e),
                })?;
            Ok(n > 0)
        })
    }

    /// Delete a job in any state. False if there was none.
    pub fn delete(&self, id: i64) -> Result<bool> {
        self.cache.freeing(|db, unlink| {
            let gone: Option<Option<String>> = db
                .held("DELETE FROM jobs WHERE id = ?1 RETURNING filename")
                .and_then(|mut st| st.query_row([id], |r| r.get(0)).optional())
                .ctx("deleting a job")?;
            Ok(gone.map(|f| unlink.extend(f)).is_some())
        })
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

/// A row of [`Jobs::list`]: its value loaded, or its preview's columns.
enum ListedRow {
    Loaded(JobRow),
    Previewed(JobRow<PreviewColumns>),
}

/// The columns of a job before its value's (the start of [`JOB_COLUMNS`]).
const JOB_FIELDS: &str =
    "id, queue, state, due, attempts, max_attempts, created, error, dedupe, lease";

/// [`Jobs::list`]'s statement: `?1` queue, `?2` after, `?3` limit, `?4` now (for the states
/// split by due time). The ids are chosen in a subquery that reads only the `jobs_due` index
/// (`INDEXED BY`, so that the planner never walks the table by rowid instead, which reads
/// every row of other queues or states it passes); the table is then read by id, `limit`
/// rows at most. The subquery's sort holds only `limit` ids.
fn list_sql(state: Option<ListState>, has_taken: bool, preview: bool) -> String {
    let filter = match state {
        None => "",
        Some(ListState::Ready) => "AND state = 0 AND due <= ?4",
        Some(ListState::Scheduled) => "AND state = 0 AND due > ?4",
        Some(ListState::Leased) => "AND state = 1",
        Some(ListState::Dead) => "AND state = 2",
    };
    let columns = if preview {
        format!("{JOB_FIELDS}, {PREVIEW_COLUMNS}")
    } else {
        JOB_COLUMNS.to_owned()
    };
    let taken = if has_taken { "taken" } else { "NULL" };
    format!(
        "SELECT {columns}, {taken} FROM jobs WHERE id IN (\
         SELECT id FROM jobs INDEXED BY jobs_due WHERE queue = ?1 {filter} AND id > ?2 \
         ORDER BY id LIMIT CAST(?3 AS INTEGER)) ORDER BY id"
    )
}

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

/// Up to `limit` due ready jobs of `queue`, oldest due first.
fn due_jobs(db: &Db, queue: &str, now: f64, limit: usize) -> Result<Vec<JobRow>> {
    db.held(concat!(
        "SELECT ",
        job_columns!(),
        " FROM jobs WHERE queue = ?1 AND state = 0 AND due <= ?2 \
         ORDER BY due, id LIMIT CAST(?3 AS INTEGER)"
    ))
    .and_then(|mut st| {
        st.query_map(params![queue, now, limit as i64], job_row)?
            .collect()
    })
    .ctx("taking a job")
}

fn lease_job(db: &Db, job: &Job, now: f64) -> Result<()> {
    db.held(
        "UPDATE jobs SET state = 1, due = ?2, attempts = attempts + 1, \
         lease = lease + 1, taken = ?3 WHERE id = ?1",
    )
    .and_then(|mut st| st.execute(params![job.id, job.lease_deadline, now]))
    .ctx("taking a job")?;
    Ok(())
}

/// A pass (D-047): the attempt is counted and the lease number drawn, as for a take that
/// failed at once, so the job reaches the dead-letter list after its attempts; until then it
/// is ready again after [`pass_delay`].
fn pass_job(db: &Db, job: &Job, now: f64, lease: f64, reason: &str) -> Result<()> {
    let out_of_attempts = job.max_attempts > 0 && job.attempts >= job.max_attempts;
    let (state, due) = if out_of_attempts {
        (DEAD, now)
    } else {
        (READY, now + pass_delay(job.attempts, lease))
    };
    db.held(
        "UPDATE jobs SET state = ?2, due = ?3, attempts = attempts + 1, \
         lease = lease + 1, error = ?4 WHERE id = ?1",
    )
    .and_then(|mut st| st.execute(params![job.id, state, due, reason]))
    .ctx("passing over a job")?;
    Ok(())
}

fn bury_offered(db: &Db, id: i64, now: f64, error: &str) -> Result<()> {
    // The attempt that found the value unreadable is counted.
    db.held(
        "UPDATE jobs SET state = 2, due = ?2, attempts = attempts + 1, \
         lease = lease + 1, error = ?3 WHERE id = ?1",
    )
    .and_then(|mut st| st.execute(params![id, now, error]))
    .ctx("burying a job")?;
    Ok(())
}

/// Expired leases of one queue: back to ready, or dead once out of attempts.
fn sweep_queue(db: &Db, queue: &str, now: f64) -> Result<Swept> {
    // Every take sweeps, and almost never finds an expired lease: ask the index first. The
    // UPDATE … RETURNING below builds an ephemeral table (a pager and its page cache, some
    // 90 KB malloc'd and freed) even when it changes nothing.
    let expired: bool = db
        .held("SELECT EXISTS (SELECT 1 FROM jobs WHERE queue = ?1 AND state = 1 AND due < ?2)")
        .and_then(|mut st| st.query_row(params![queue, now], |r| r.get(0)))
        .ctx("looking for expired leases")?;
    if !expired {
        return Ok(Swept::default());
    }
    let states: Vec<i64> = db
        .held(
            "UPDATE jobs SET state = CASE WHEN max_attempts > 0 AND attempts >= max_attempts THEN 2 ELSE 0 END, \
             due = ?2, error = 'lease expired' WHERE queue = ?1 AND state = 1 AND due < ?2 RETURNING state",
        )
        .and_then(|mut st| st.query_map(params![queue, now], |r| r.get(0))?.collect())
        .ctx("requeueing expired leases")?;
    let dead = states.iter().filter(|s| **s == DEAD).count() as u64;
    Ok(Swept {
        requeued: states.len() as u64 - dead,
        dead,
    })
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

    use super::{list_sql, ListState};
    use crate::{Cache, JobOptions, OpenOptions, ValueRef};

    const STATES: [Option<ListState>; 5] = [
        None,
        Some(ListState::Ready),
        Some(ListState::Scheduled),
        Some(ListState::Leased),
        Some(ListState::Dead),
    ];

    /// A page of any state reads the table by id only (at most `limit` rows), never by a scan:
    /// with 100,000 ready jobs, listing the one scheduled job reads one row (issue 19).
    #[test]
    fn a_list_reads_the_table_only_by_id() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path(), OpenOptions::default()).unwrap();
        let jobs = cache.jobs();
        let values: Vec<ValueRef<'_>> = (0..100_000).map(ValueRef::Int).collect();
        jobs.put_many("bulk", &values, &JobOptions::default())
            .unwrap();
        let delayed = JobOptions {
            delay: 3600.0,
            ..JobOptions::default()
        };
        jobs.put("bulk", ValueRef::Int(-1), &delayed).unwrap();
        for state in STATES {
            for preview in [false, true] {
                let sql = list_sql(state, true, preview);
                let (plan, fullscan, rows) = cache
                    .read(|db| {
                        let plan: Vec<String> = db
                            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                            .and_then(|mut st| {
                                st.query_map(rusqlite::params_from_iter(plan_args(state)), |r| {
                                    r.get::<_, String>(3)
                                })?
                                .collect()
                            })
                            .unwrap();
                        let mut st = db.prepare(&sql).unwrap();
                        let rows = st
                            .query_map(rusqlite::params_from_iter(plan_args(state)), |_| Ok(()))
                            .unwrap()
                            .count();
                        let fullscan = st.get_status(rusqlite::StatementStatus::FullscanStep);
                        Ok((plan, fullscan, rows))
                    })
                    .unwrap();
                assert!(
                    plan.iter().all(|step| !step.starts_with("SCAN")),
                    "{state:?}: {plan:?}"
                );
                assert!(
                    plan.iter().any(|s| s.contains("COVERING INDEX jobs_due")),
                    "{state:?}: {plan:?}"
                );
                assert_eq!(fullscan, 0, "{state:?}");
                let expected = match state {
                    Some(ListState::Scheduled) => 1,
                    Some(ListState::Leased | ListState::Dead) => 0,
                    _ => 50,
                };
                assert_eq!(rows, expected, "{state:?}");
            }
        }
        let listed = jobs
            .list(
                "bulk",
                Some(ListState::Scheduled),
                0,
                50,
                super::ListValues::Load,
            )
            .unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].info.value, Ok(crate::StoredValue::Int(-1)));
    }

    fn plan_args(state: Option<ListState>) -> Vec<rusqlite::types::Value> {
        use rusqlite::types::Value::{Integer, Real, Text};
        let mut args = vec![Text("bulk".into()), Integer(0), Integer(50)];
        if matches!(state, Some(ListState::Ready | ListState::Scheduled)) {
            args.push(Real(crate::cache::now()));
        }
        args
    }
}
