//! Leased jobs: leases, fencing by lease number, retries, the dead-letter list, uniqueness, priorities.

use diskcache_oxide_engine::{
    Cache, JobOptions, JobState, JobValueError, ListState, ListValues, OpenOptions, Put,
    StoredValue, ValueRef,
};
use std::time::Duration;

fn open() -> (tempfile::TempDir, Cache) {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), OpenOptions::default()).unwrap();
    (dir, cache)
}

fn put(cache: &Cache, queue: &str, v: i64) -> i64 {
    cache
        .jobs()
        .put(queue, ValueRef::Int(v), &JobOptions::default())
        .unwrap()
        .id()
}

#[test]
fn take_finish_and_lasting_ids() {
    let (_d, cache) = open();
    let a = put(&cache, "q", 1);
    let b = put(&cache, "q", 2);
    assert!(b > a);
    let jobs = cache.jobs().take(&["q"], 30.0, 1).unwrap();
    let job = &jobs[0];
    assert_eq!(
        (job.id, job.attempts, job.value.clone()),
        (a, 1, Ok(StoredValue::Int(1)))
    );
    assert!(job.lease_deadline > 0.0);
    assert!(cache.jobs().finish(job.id, job.lease).unwrap());
    assert!(
        !cache.jobs().finish(job.id, job.lease).unwrap(),
        "finishing twice does nothing"
    );
    let c = put(&cache, "q", 3);
    assert!(c > b, "ids are never reused");
    assert_eq!(cache.jobs().counts("q").unwrap().ready, 2);
}

#[test]
fn an_expired_lease_is_taken_again_and_the_old_holder_is_fenced_off() {
    let (_d, cache) = open();
    let id = put(&cache, "q", 1);
    let first = cache.jobs().take(&["q"], 0.01, 1).unwrap().remove(0);
    std::thread::sleep(Duration::from_millis(20));
    let second = cache.jobs().take(&["q"], 30.0, 1).unwrap().remove(0);
    assert_eq!((second.id, second.attempts), (id, 2));
    assert_eq!(second.error.as_deref(), Some("lease expired"));
    assert!(
        !cache.jobs().finish(first.id, first.lease).unwrap(),
        "the first worker lost its lease"
    );
    assert!(cache
        .jobs()
        .extend(first.id, first.lease, 10.0)
        .unwrap()
        .is_none());
    assert!(cache
        .jobs()
        .extend(second.id, second.lease, 60.0)
        .unwrap()
        .is_some());
    assert!(cache.jobs().finish(second.id, second.lease).unwrap());
}

#[test]
fn failures_retry_then_go_to_the_dead_letter_list() {
    let (_d, cache) = open();
    let opts = JobOptions {
        max_attempts: 2,
        ..JobOptions::default()
    };
    let id = cache
        .jobs()
        .put("q", ValueRef::Str("payload"), &opts)
        .unwrap()
        .id();
    let j = cache.jobs().take(&["q"], 30.0, 1).unwrap().remove(0);
    assert_eq!(
        cache.jobs().fail(j.id, j.lease, "boom", 0.05).unwrap(),
        Some(JobState::Ready)
    );
    assert!(
        cache.jobs().take(&["q"], 30.0, 1).unwrap().is_empty(),
        "not before its retry time"
    );
    assert_eq!(cache.jobs().counts("q").unwrap().scheduled, 1);
    std::thread::sleep(Duration::from_millis(60));
    let j = cache.jobs().take(&["q"], 30.0, 1).unwrap().remove(0);
    assert_eq!(j.error.as_deref(), Some("boom"));
    assert_eq!(
        cache.jobs().fail(j.id, j.lease, "boom again", 0.0).unwrap(),
        Some(JobState::Dead)
    );
    let dead = cache.jobs().dead("q", 0, 10).unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        (dead[0].id, dead[0].attempts, dead[0].error.as_deref()),
        (id, 2, Some("boom again"))
    );
    assert_eq!(dead[0].value, Ok(StoredValue::Str("payload".into())));
    assert!(cache.jobs().requeue(id, 0.0).unwrap());
    let j = cache.jobs().take(&["q"], 30.0, 1).unwrap().remove(0);
    assert_eq!((j.id, j.attempts), (id, 1));
}

#[test]
fn abandoned_leases_die_after_max_attempts_and_sweep_reports_it() {
    let (_d, cache) = open();
    cache
        .jobs()
        .put(
            "q",
            ValueRef::Int(1),
            &JobOptions {
                max_attempts: 1,
                ..JobOptions::default()
            },
        )
        .unwrap();
    cache
        .jobs()
        .put("q", ValueRef::Int(2), &JobOptions::default())
        .unwrap();
    assert_eq!(cache.jobs().take(&["q"], 0.0, 2).unwrap().len(), 2);
    std::thread::sleep(Duration::from_millis(5));
    let swept = cache.jobs().sweep(None).unwrap();
    assert_eq!((swept.requeued, swept.dead), (1, 1));
    let c = cache.jobs().counts("q").unwrap();
    assert_eq!((c.ready, c.leased, c.dead), (1, 0, 1));
}

#[test]
fn release_does_not_count_an_attempt() {
    let (_d, cache) = open();
    put(&cache, "q", 1);
    let j = cache.jobs().take(&["q"], 30.0, 1).unwrap().remove(0);
    assert!(cache.jobs().release(j.id, j.lease, 0.0).unwrap());
    let j = cache.jobs().take(&["q"], 30.0, 1).unwrap().remove(0);
    assert_eq!(j.attempts, 1);
}

#[test]
fn unique_keys_priorities_and_delays() {
    let (_d, cache) = open();
    let u = JobOptions {
        unique: Some("episode-7".into()),
        ..JobOptions::default()
    };
    let first = cache.jobs().put("email", ValueRef::Int(1), &u).unwrap();
    assert!(matches!(first, Put::Added(_)));
    assert_eq!(
        cache.jobs().put("email", ValueRef::Int(2), &u).unwrap(),
        Put::Duplicate(first.id())
    );
    let later = JobOptions {
        delay: 60.0,
        ..JobOptions::default()
    };
    cache
        .jobs()
        .put("urgent", ValueRef::Int(0), &later)
        .unwrap();
    put(&cache, "urgent", 10);
    put(&cache, "transcode", 20);
    let taken = cache
        .jobs()
        .take(&["urgent", "transcode", "email"], 30.0, 10)
        .unwrap();
    let taken_email_lease = taken[2].lease;
    let order: Vec<StoredValue> = taken.into_iter().map(|j| j.value.unwrap()).collect();
    assert_eq!(
        order,
        vec![
            StoredValue::Int(10),
            StoredValue::Int(20),
            StoredValue::Int(1)
        ]
    );
    let taken = cache.jobs().take(&["email"], 30.0, 1).unwrap();
    assert!(taken.is_empty());
    // Once the unique job is finished, the key is free again.
    let info = cache.jobs().info(first.id()).unwrap().unwrap();
    assert_eq!(info.state, JobState::Leased);
    let lease = cache.jobs().info(first.id()).unwrap().unwrap();
    assert_eq!(lease.attempts, 1);
    assert!(cache.jobs().finish(first.id(), taken_email_lease).unwrap());
    assert!(matches!(
        cache.jobs().put("email", ValueRef::Int(3), &u).unwrap(),
        Put::Added(_)
    ));
}

#[test]
fn large_job_values_live_in_files_that_check_knows() {
    let (_d, cache) = open();
    let big = vec![5u8; 100_000];
    let ids = cache
        .jobs()
        .put_many(
            "q",
            &[ValueRef::Bytes(&big), ValueRef::Int(1)],
            &JobOptions::default(),
        )
        .unwrap();
    assert_eq!(ids.len(), 2);
    assert!(cache.check(false).unwrap().is_empty());
    let j = cache.jobs().take(&["q"], 30.0, 1).unwrap().remove(0);
    assert_eq!(j.value, Ok(StoredValue::Bytes(big)));
    assert!(cache.jobs().finish(j.id, j.lease).unwrap());
    assert!(
        cache.check(false).unwrap().is_empty(),
        "the finished job's file was removed"
    );
}

#[test]
fn bad_arguments_are_refused() {
    let (_d, cache) = open();
    assert!(cache
        .jobs()
        .put("", ValueRef::Int(1), &JobOptions::default())
        .is_err());
    assert!(cache
        .jobs()
        .put(
            "q",
            ValueRef::Int(1),
            &JobOptions {
                delay: f64::NAN,
                ..JobOptions::default()
            }
        )
        .is_err());
    assert!(cache.jobs().take(&["q"], -1.0, 1).is_err());
}

#[test]
fn threads_take_each_job_once() {
    let (_d, cache) = open();
    let n = 300;
    let values: Vec<i64> = (0..n).collect();
    let refs: Vec<ValueRef<'_>> = values.iter().map(|v| ValueRef::Int(*v)).collect();
    cache
        .jobs()
        .put_many("q", &refs, &JobOptions::default())
        .unwrap();
    let seen = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| loop {
                let jobs = cache.jobs().take(&["q"], 30.0, 7).unwrap();
                if jobs.is_empty() {
                    break;
                }
                for j in jobs {
                    if let Ok(StoredValue::Int(v)) = j.value {
                        seen.lock().unwrap().push(v);
                    }
                    assert!(cache.jobs().finish(j.id, j.lease).unwrap());
                }
            });
        }
    });
    let mut seen = seen.into_inner().unwrap();
    seen.sort();
    assert_eq!(seen, values);
}

#[test]
fn burying_sends_a_job_to_the_dead_letter_list_at_once() {
    let (_d, cache) = open();
    let id = put(&cache, "q", 1);
    let j = cache.jobs().take(&["q"], 30.0, 1).unwrap().remove(0);
    assert!(cache.jobs().bury(j.id, j.lease, "unreadable").unwrap());
    assert_eq!(cache.jobs().dead("q", 0, 10).unwrap()[0].id, id);
}

#[test]
fn a_released_or_requeued_job_gets_a_new_lease_so_stale_holders_are_fenced_off() {
    let (_d, cache) = open();
    let opts = JobOptions {
        max_attempts: 1,
        ..JobOptions::default()
    };
    let id = cache.jobs().put("q", ValueRef::Int(1), &opts).unwrap().id();
    let first = cache.jobs().take(&["q"], 30.0, 1).unwrap().remove(0);
    assert!(cache.jobs().release(first.id, first.lease, 0.0).unwrap());
    let second = cache.jobs().take(&["q"], 30.0, 1).unwrap().remove(0);
    assert_eq!(second.attempts, 1, "the release did not count");
    assert!(
        !cache.jobs().finish(first.id, first.lease).unwrap(),
        "the first holder is fenced off"
    );
    assert_eq!(
        cache
            .jobs()
            .fail(second.id, second.lease, "x", 0.0)
            .unwrap(),
        Some(JobState::Dead)
    );
    assert!(cache.jobs().requeue(id, 0.0).unwrap());
    let third = cache.jobs().take(&["q"], 30.0, 1).unwrap().remove(0);
    assert_eq!(third.attempts, 1);
    assert!(!cache.jobs().finish(second.id, second.lease).unwrap());
    assert!(cache.jobs().finish(third.id, third.lease).unwrap());
}

#[test]
fn a_job_whose_value_file_is_gone_is_taken_with_a_typed_corrupt_error() {
    let (dir, cache) = open();
    let big = vec![7u8; 100_000]; // over disk_min_file_size: kept in a value file
    let id = cache
        .jobs()
        .put("q", ValueRef::Bytes(&big), &JobOptions::default())
        .unwrap()
        .id();
    for entry in walk(&dir.path().join("values")) {
        std::fs::remove_file(entry).unwrap();
    }
    let jobs = cache.jobs().take(&["q"], 30.0, 1).unwrap();
    assert_eq!(jobs[0].id, id);
    match &jobs[0].value {
        Err(JobValueError::Corrupt(m)) => assert!(m.message.contains("missing"), "{m}"),
        other => panic!("expected a corrupt-value error, got {other:?}"),
    }
    // The job itself is intact: it can still be buried.
    assert!(cache.jobs().bury(id, jobs[0].lease, "unreadable").unwrap());
    assert_eq!(
        cache.jobs().info(id).unwrap().unwrap().state,
        JobState::Dead
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_take_decides_each_job_inside_its_transaction() {
    use diskcache_oxide_engine::TakeVerdict;
    let (_d, cache) = open();
    let passed = put(&cache, "q", 1);
    let buried = put(&cache, "q", 2);
    let taken = put(&cache, "q", 3);
    let mut seen = Vec::new();
    let before = now();
    let got = cache
        .jobs()
        .take_deciding(&["q"], 30.0, 1, &mut |job| {
            // The job is offered with the attempt and lease number a take would give it.
            seen.push((job.id, job.attempts, job.lease));
            match job.value {
                Ok(StoredValue::Int(1)) => TakeVerdict::Pass("cannot read it here".into()),
                Ok(StoredValue::Int(2)) => TakeVerdict::Bury("damaged value: test".into()),
                _ => TakeVerdict::Take,
            }
        })
        .unwrap();
    // n = 1, and the first two due jobs were not takeable: the take went on past them.
    assert_eq!(seen, vec![(passed, 1, 1), (buried, 1, 1), (taken, 1, 1)]);
    assert_eq!(
        got.jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![taken]
    );
    assert!(!got.more);
    let info = cache.jobs().info(passed).unwrap().unwrap();
    assert_eq!(
        (info.state, info.attempts, info.error.as_deref()),
        (JobState::Ready, 1, Some("cannot read it here")),
        "a pass is counted and its reason kept"
    );
    assert!(
        info.due >= before + 1.0,
        "a job passed over waits a pass delay before it is offered again"
    );
    let dead = cache.jobs().info(buried).unwrap().unwrap();
    assert_eq!(dead.state, JobState::Dead);
    assert_eq!(dead.error.as_deref(), Some("damaged value: test"));
    assert!(cache.jobs().finish(taken, got.jobs[0].lease).unwrap());
}

#[test]
fn a_job_passed_over_until_its_attempts_are_used_is_dead() {
    use diskcache_oxide_engine::TakeVerdict;
    let (_d, cache) = open();
    let options = JobOptions {
        max_attempts: 2,
        ..JobOptions::default()
    };
    let id = cache
        .jobs()
        .put("q", ValueRef::Int(7), &options)
        .unwrap()
        .id();
    for pass in 1..=2u32 {
        // Make it due again at once instead of waiting out the pass delay.
        if pass > 1 {
            assert!(cache.jobs().info(id).unwrap().unwrap().state == JobState::Ready);
            set_due_now(&cache, id);
        }
        let got = cache
            .jobs()
            .take_deciding(&["q"], 30.0, 1, &mut |_| {
                TakeVerdict::Pass(format!("pass {pass}"))
            })
            .unwrap();
        assert!(got.jobs.is_empty());
    }
    let info = cache.jobs().info(id).unwrap().unwrap();
    assert_eq!(
        (info.state, info.attempts, info.error.as_deref()),
        (JobState::Dead, 2, Some("pass 2"))
    );
}

#[test]
fn a_backlog_of_passes_is_taken_in_bounded_steps() {
    use diskcache_oxide_engine::{TakeVerdict, PASSES_PER_TAKE};
    let (_d, cache) = open();
    let backlog = PASSES_PER_TAKE + 10;
    for _ in 0..backlog {
        put(&cache, "q", 0);
    }
    let good = put(&cache, "q", 1);
    let mut decide = |job: &diskcache_oxide_engine::Job| match job.value {
        Ok(StoredValue::Int(1)) => TakeVerdict::Take,
        _ => TakeVerdict::Pass("not here".into()),
    };
    let first = cache
        .jobs()
        .take_deciding(&["q"], 30.0, 1, &mut decide)
        .unwrap();
    assert!(first.jobs.is_empty());
    assert!(
        first.more,
        "it stopped after PASSES_PER_TAKE passes and says so"
    );
    let second = cache
        .jobs()
        .take_deciding(&["q"], 30.0, 1, &mut decide)
        .unwrap();
    assert_eq!(
        second.jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![good]
    );
    assert!(!second.more);
}

#[test]
fn the_pass_delay_doubles_up_to_a_lease() {
    use diskcache_oxide_engine::pass_delay;
    assert_eq!(pass_delay(1, 60.0), 1.0);
    assert_eq!(pass_delay(2, 60.0), 2.0);
    assert_eq!(pass_delay(4, 60.0), 8.0);
    assert_eq!(pass_delay(10, 60.0), 60.0);
    assert_eq!(pass_delay(u32::MAX, 60.0), 60.0);
    assert_eq!(pass_delay(3, 0.0), 1.0, "never under a second");
}

fn set_due_now(cache: &Cache, id: i64) {
    let db = rusqlite::Connection::open(cache.directory().join("cache.db")).unwrap();
    db.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
    db.execute("UPDATE jobs SET due = 0 WHERE id = ?1", [id])
        .unwrap();
}

#[test]
fn an_operator_lists_buries_and_purges_jobs() {
    let (_d, cache) = open();
    let a = put(&cache, "mail", 1);
    let b = put(&cache, "mail", 2);
    put(&cache, "other", 3);
    let taken = cache.jobs().take(&["mail"], 30.0, 1).unwrap().remove(0);
    assert_eq!(cache.jobs().queues().unwrap(), vec!["mail", "other"]);
    let listed = cache
        .jobs()
        .list("mail", None, 0, 10, ListValues::Load)
        .unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].info.state, JobState::Leased);
    assert!(
        listed[0].taken.is_some(),
        "a leased job says when its lease was taken"
    );
    assert!(listed[1].taken.is_none());
    assert!(cache.jobs().bury_any(b, "stuck").unwrap());
    assert!(
        !cache.jobs().bury_any(b, "again").unwrap(),
        "a dead job stays as it is"
    );
    assert!(cache.jobs().bury_any(a, "taken away").unwrap());
    assert!(
        !cache.jobs().finish(taken.id, taken.lease).unwrap(),
        "the holder of a buried job finds its lease lost"
    );
    let dead = cache
        .jobs()
        .list("mail", Some(ListState::Dead), 0, 10, ListValues::Load)
        .unwrap();
    assert_eq!(dead.len(), 2);
    assert_eq!(cache.jobs().purge_dead("mail").unwrap(), 2);
    assert!(cache
        .jobs()
        .list("mail", None, 0, 10, ListValues::Load)
        .unwrap()
        .is_empty());
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}
