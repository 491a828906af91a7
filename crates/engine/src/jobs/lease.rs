//! A held job: what the holder of a lease does with it (finish, fail, extend, release, bury),
//! each naming the lease it holds so that a worker whose lease was taken over cannot touch the
//! job, and the sweep that ends expired leases (which every take runs first). Apart from the
//! take because these settle one job already taken, outside any decision.

use super::{check_queue, check_seconds, JobState, Jobs, DEAD};
use crate::cache::now;
use crate::error::SqlContext;
use crate::store::statements::Db;
use crate::Result;
use rusqlite::{params, OptionalExtension};

/// What a sweep of expired leases did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    pub requeued: u64,
    pub dead: u64,
}

impl Jobs<'_> {
    /// Finish a job: it is deleted. False if `lease_id` no longer holds the lease.
    pub fn finish(&self, id: i64, lease_id: i64) -> Result<bool> {
        self.cache.freeing(|db, unlink| {
            // Found, then deleted: `DELETE … RETURNING` builds an ephemeral table on every call
            // (see `sweep_queue`, and `cache::rows::delete_live`, D-016).
            let found: Option<Option<String>> = db
                .held("SELECT filename FROM jobs WHERE id = ?1 AND state = 1 AND lease = ?2")
                .and_then(|mut st| st.query_row(params![id, lease_id], |r| r.get(0)).optional())
                .ctx("finishing a job")?;
            let Some(filename) = found else {
                return Ok(false);
            };
            let n = db
                .held("DELETE FROM jobs WHERE id = ?1")
                .and_then(|mut st| st.execute([id]))
                .ctx("finishing a job")?;
            if n > 0 {
                unlink.extend(filename);
            }
            Ok(n > 0)
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
            // Updated, then its new state read: no `UPDATE … RETURNING` (see `finish`).
            let n = db
                .held(
                    "UPDATE jobs SET state = CASE WHEN max_attempts > 0 AND attempts >= max_attempts THEN 2 ELSE 0 END, \
                     due = CASE WHEN max_attempts > 0 AND attempts >= max_attempts THEN ?3 ELSE ?3 + ?4 END, error = ?5 \
                     WHERE id = ?1 AND state = 1 AND lease = ?2",
                )
                .and_then(|mut st| st.execute(params![id, lease_id, now(), retry_in, error]))
                .ctx("failing a job")?;
            if n == 0 {
                return Ok(None);
            }
            let state: i64 = db
                .held("SELECT state FROM jobs WHERE id = ?1")
                .and_then(|mut st| st.query_row([id], |r| r.get(0)))
                .ctx("failing a job")?;
            Ok(Some(if state == DEAD { JobState::Dead } else { JobState::Ready }))
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
}

/// Expired leases of one queue: back to ready, or dead once out of attempts.
pub(super) fn sweep_queue(db: &Db, queue: &str, now: f64) -> Result<Swept> {
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
