//! An operator's reads and repairs: counts by state, one job, the dead-letter list, the queues,
//! a page of a queue's jobs with previews (D-046), and burying, requeueing, purging and deleting
//! jobs whoever holds them. Apart from the workers' calls because none of it takes part in
//! leasing: it is what the dashboard and the command line use.

use super::{
    check_queue, check_seconds, info_of, job_row, job_row_of, JobInfo, JobRow, JobState,
    JobValueError, Jobs, JOB_COLUMNS, JOB_FIELDS, LEASED, READY, VALUE_FROM,
};
use crate::cache::{now, PreviewColumns, PREVIEW_COLUMNS};
use crate::error::SqlContext;
use crate::format::value::PREVIEW_MAX_WIDTH;
use crate::{Error, Result};
use rusqlite::{params, OptionalExtension};

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

impl Jobs<'_> {
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
}

/// A row of [`Jobs::list`]: its value loaded, or its preview's columns.
enum ListedRow {
    Loaded(JobRow),
    Previewed(JobRow<PreviewColumns>),
}

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

#[cfg(test)]
mod tests {
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
