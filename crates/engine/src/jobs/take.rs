//! Taking jobs: the one transaction that sweeps a queue's expired leases, reads its due jobs,
//! lets the caller decide about each (take, pass over or bury, D-047) and leases those taken.
//! Apart from the rest because it is the hot path and the only part with a caller's decision
//! inside the transaction.

use super::lease::sweep_queue;
use super::{check_queue, check_seconds, job_row, Job, JobRow, Jobs, DEAD, READY};
use crate::cache::now;
use crate::error::SqlContext;
use crate::store::statements::Db;
use crate::Result;
use rusqlite::params;

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

impl Jobs<'_> {
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
