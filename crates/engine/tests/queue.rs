//! Queue behaviour of the engine: key shape (D-054), overflow (D-057), verdicts, transactions.

use std::time::{Duration, Instant};

use diskcache_oxide_engine::{
    Cache, Candidate, Error, Key, OpenOptions, Scalar, Side, StoredValue, ValueRef, Verdict,
    WriteOptions,
};

fn open() -> (tempfile::TempDir, Cache) {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), OpenOptions::default()).unwrap();
    (dir, cache)
}

fn w() -> WriteOptions {
    WriteOptions::default()
}

fn take(_: &Candidate) -> Verdict {
    Verdict::Take
}

fn pull(cache: &Cache, prefix: Option<&str>, side: Side) -> Option<(Key, StoredValue)> {
    cache
        .queue(prefix)
        .pull(side, &mut take)
        .unwrap()
        .map(|(k, e)| (k, e.value))
}

fn s(x: &str) -> Key {
    Key::from(x)
}

#[test]
fn keys_have_the_queue_shape_and_numbers_are_reused_at_the_front() {
    let (_d, cache) = open();
    let k0 = cache
        .queue(Some("transcode"))
        .push(ValueRef::Int(510), Side::Back, &w())
        .unwrap();
    let k1 = cache
        .queue(Some("transcode"))
        .push(ValueRef::Int(511), Side::Back, &w())
        .unwrap();
    assert_eq!(k0, s("transcode-500000000000000"));
    assert_eq!(k1, s("transcode-500000000000001"));
    assert_eq!(
        pull(&cache, Some("transcode"), Side::Front),
        Some((k0.clone(), StoredValue::Int(510)))
    );
    let again = cache
        .queue(Some("transcode"))
        .push(ValueRef::Int(509), Side::Front, &w())
        .unwrap();
    assert_eq!(
        again, k0,
        "a push to the front takes the pulled number again"
    );
    assert_eq!(
        pull(&cache, Some("transcode"), Side::Back),
        Some((k1, StoredValue::Int(511)))
    );
    let int_key = cache
        .queue(None)
        .push(ValueRef::Str("x"), Side::Back, &w())
        .unwrap();
    assert_eq!(int_key, Key::Native(Scalar::Int(500_000_000_000_000)));
}

#[test]
fn other_keys_in_the_range_are_never_pulled_or_numbered() {
    let (_d, cache) = open();
    for k in [
        "transcode-settings",
        "transcode-512",
        "transcode-5000000000000000",
        "transcode-hd-500000000000000",
    ] {
        cache.set(&s(k), ValueRef::Str(k), &w()).unwrap();
    }
    cache
        .set(
            &Key::Native(Scalar::Float(500_000_000_000_001.0)),
            ValueRef::Int(0),
            &w(),
        )
        .unwrap();
    assert!(cache
        .queue(Some("transcode"))
        .peek(Side::Front)
        .unwrap()
        .is_none());
    assert!(pull(&cache, Some("transcode"), Side::Front).is_none());
    let k = cache
        .queue(Some("transcode"))
        .push(ValueRef::Int(1), Side::Back, &w())
        .unwrap();
    assert_eq!(k, s("transcode-500000000000000"));
    assert_eq!(
        cache
            .queue(None)
            .push(ValueRef::Int(1), Side::Back, &w())
            .unwrap(),
        Key::Native(Scalar::Int(500_000_000_000_000))
    );
    let hd = cache
        .queue(Some("transcode-hd"))
        .push(ValueRef::Int(2), Side::Back, &w())
        .unwrap();
    assert_eq!(
        hd,
        s("transcode-hd-500000000000001"),
        "the queue 'transcode-hd' has its own numbers"
    );
    assert_eq!(pull(&cache, Some("transcode"), Side::Front).unwrap().0, k);
    assert_eq!(cache.len().unwrap(), 7);
}

#[test]
fn pushing_past_the_end_raises_overflow_and_overwrites_nothing() {
    let (_d, cache) = open();
    cache
        .set(&s("q-999999999999999"), ValueRef::Str("last"), &w())
        .unwrap();
    assert!(matches!(
        cache
            .queue(Some("q"))
            .push(ValueRef::Int(1), Side::Back, &w()),
        Err(Error::Overflow(_))
    ));
    cache
        .set(&s("q-000000000000000"), ValueRef::Str("first"), &w())
        .unwrap();
    assert!(matches!(
        cache
            .queue(Some("q"))
            .push(ValueRef::Int(1), Side::Front, &w()),
        Err(Error::Overflow(_))
    ));
    assert_eq!(cache.len().unwrap(), 2);
    assert_eq!(
        cache
            .get(&s("q-999999999999999"), false)
            .unwrap()
            .unwrap()
            .value,
        StoredValue::Str("last".into())
    );
}

#[test]
fn expired_items_are_passed_over_but_keep_their_numbers() {
    let (_d, cache) = open();
    let opts = WriteOptions {
        expire: Some(0.02),
        tag: None,
    };
    let doomed = cache
        .queue(Some("q"))
        .push(ValueRef::Int(1), Side::Back, &opts)
        .unwrap();
    let alive = cache
        .queue(Some("q"))
        .push(ValueRef::Int(2), Side::Back, &w())
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(30));
    let peeked = cache.queue(Some("q")).peek(Side::Front).unwrap().unwrap();
    assert_eq!(peeked.key, alive);
    assert_eq!(
        cache
            .queue(Some("q"))
            .push(ValueRef::Int(0), Side::Front, &w())
            .unwrap(),
        s("q-499999999999999")
    );
    assert_eq!(
        cache.len().unwrap(),
        2,
        "that push's cleanup removed the expired item after numbering"
    );
    assert!(cache.get(&doomed, false).unwrap().is_none());
}

#[test]
fn verdicts_leave_drop_and_continue() {
    let (_d, cache) = open();
    for i in 0..3 {
        cache
            .queue(Some("q"))
            .push(ValueRef::Int(i), Side::Back, &w())
            .unwrap();
    }
    assert!(cache
        .queue(Some("q"))
        .pull(Side::Front, &mut |_| Verdict::Leave)
        .unwrap()
        .is_none());
    assert_eq!(cache.len().unwrap(), 3, "a left item stays at the front");
    assert!(cache
        .queue(Some("q"))
        .pull(Side::Front, &mut |_| Verdict::DropAndStop)
        .unwrap()
        .is_none());
    assert_eq!(cache.len().unwrap(), 2);
    let mut seen = 0;
    let got = cache
        .queue(Some("q"))
        .pull(Side::Front, &mut |_| {
            seen += 1;
            if seen == 1 {
                Verdict::DropAndContinue
            } else {
                Verdict::Take
            }
        })
        .unwrap()
        .unwrap();
    assert_eq!(got.1.value, StoredValue::Int(2));
    assert!(cache.is_empty().unwrap());
}

#[test]
fn a_rolled_back_transaction_puts_a_pulled_item_back() {
    let (_d, cache) = open();
    let k = cache
        .queue(Some("q"))
        .push(ValueRef::Int(7), Side::Back, &w())
        .unwrap();
    let r: Result<(), Error> = cache.transact(|| {
        let got = cache.queue(Some("q")).pull(Side::Front, &mut take)?;
        assert!(got.is_some());
        Err(Error::InvalidArgument("worker failed".into()))
    });
    assert!(r.is_err());
    assert_eq!(
        pull(&cache, Some("q"), Side::Front),
        Some((k, StoredValue::Int(7)))
    );
}

#[test]
fn batches_push_and_pull_in_order() {
    let (_d, cache) = open();
    let big = vec![1u8; 50_000];
    let values = [
        ValueRef::Int(1),
        ValueRef::Bytes(&big),
        ValueRef::Str("three"),
    ];
    let keys = cache
        .queue(Some("b"))
        .push_many(&values, Side::Back, &w())
        .unwrap();
    assert_eq!(keys.len(), 3);
    let got = cache
        .queue(Some("b"))
        .pull_many(Side::Front, 10, &mut take)
        .unwrap();
    let values: Vec<StoredValue> = got.into_iter().map(|(_, e)| e.value).collect();
    assert_eq!(
        values,
        vec![
            StoredValue::Int(1),
            StoredValue::Bytes(big),
            StoredValue::Str("three".into())
        ]
    );
    assert!(cache.check(false).unwrap().is_empty());
}

#[test]
fn threads_each_get_distinct_items() {
    let (_d, cache) = open();
    let n = 400;
    for i in 0..n {
        cache
            .queue(Some("q"))
            .push(ValueRef::Int(i), Side::Back, &w())
            .unwrap();
    }
    let seen = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|sc| {
        for _ in 0..4 {
            sc.spawn(|| {
                while let Some((_, StoredValue::Int(i))) = pull(&cache, Some("q"), Side::Front) {
                    seen.lock().unwrap().push(i);
                }
            });
        }
    });
    let mut seen = seen.into_inner().unwrap();
    seen.sort();
    assert_eq!(seen, (0..n).collect::<Vec<_>>());
}

#[test]
fn a_waiting_pull_wakes_for_a_push_from_another_handle() {
    let (dir, cache) = open();
    let other = Cache::open(dir.path(), OpenOptions::default()).unwrap();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            other
                .queue(Some("q"))
                .push(ValueRef::Int(42), Side::Back, &w())
                .unwrap();
        });
        let got = cache
            .wait_for(std::time::Duration::from_secs(30), || {
                cache.queue(Some("q")).pull(Side::Front, &mut take)
            })
            .unwrap();
        assert_eq!(got.map(|(_, e)| e.value), Some(StoredValue::Int(42)));
    });
    let nothing = cache
        .wait_for(std::time::Duration::from_millis(30), || {
            cache.queue(Some("q")).pull(Side::Front, &mut take)
        })
        .unwrap();
    assert!(nothing.is_none());
}

#[test]
fn in_transaction_reports_this_threads_open_transaction() {
    let (dir, cache) = open();
    let other = Cache::open(dir.path(), OpenOptions::default()).unwrap();
    assert!(!cache.in_transaction());
    cache.begin().unwrap();
    assert!(cache.in_transaction());
    cache.begin().unwrap();
    cache.end(true).unwrap();
    assert!(cache.in_transaction(), "still inside the outer level");
    // Another handle, and another thread on the same handle, have no transaction.
    assert!(!other.in_transaction());
    std::thread::scope(|sc| {
        sc.spawn(|| assert!(!cache.in_transaction()));
    });
    cache.end(false).unwrap();
    assert!(!cache.in_transaction());
    cache
        .transact(|| {
            assert!(cache.in_transaction());
            Ok(())
        })
        .unwrap();
    assert!(!cache.in_transaction());
}

#[test]
fn waits_that_find_work_at_once_stay_cheap() {
    // Each thread keeps its armed bell between waits: closing an inotify descriptor costs
    // milliseconds (a kernel grace period), which a wait per item would pay every time.
    let (dir, cache) = open();
    let found = || Ok(Some(()));
    cache.wait_for(Duration::from_secs(5), found).unwrap();
    let start = Instant::now();
    for _ in 0..50 {
        assert!(cache
            .wait_for(Duration::from_secs(5), found)
            .unwrap()
            .is_some());
    }
    let took = start.elapsed();
    assert!(took < Duration::from_millis(150), "50 waits took {took:?}");
    // A kept bell still rings for a later write from another handle.
    let other = Cache::open(dir.path(), OpenOptions::default()).unwrap();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            other
                .queue(Some("q"))
                .push(ValueRef::Int(7), Side::Back, &w())
                .unwrap();
        });
        let start = Instant::now();
        let got = cache
            .wait_for(Duration::from_secs(30), || {
                cache.queue(Some("q")).pull(Side::Front, &mut take)
            })
            .unwrap();
        assert_eq!(got.map(|(_, e)| e.value), Some(StoredValue::Int(7)));
        assert!(start.elapsed() < Duration::from_secs(5));
    });
}

#[test]
fn a_directory_made_again_under_the_same_path_is_watched_anew() {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("cache");
    let first = Cache::open(&path, OpenOptions::default()).unwrap();
    // This thread now keeps a bell armed on the first directory.
    assert!(first
        .wait_for(Duration::from_millis(1), || Ok(Some(())))
        .unwrap()
        .is_some());
    drop(first);
    std::fs::remove_dir_all(&path).unwrap();
    let cache = Cache::open(&path, OpenOptions::default()).unwrap();
    let other = Cache::open(&path, OpenOptions::default()).unwrap();
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(100));
            other
                .queue(Some("q"))
                .push(ValueRef::Int(9), Side::Back, &w())
                .unwrap();
        });
        let start = Instant::now();
        let got = cache
            .wait_for(Duration::from_secs(20), || {
                cache.queue(Some("q")).pull(Side::Front, &mut take)
            })
            .unwrap();
        assert_eq!(got.map(|(_, e)| e.value), Some(StoredValue::Int(9)));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "woken only by the timeout"
        );
    });
}

#[test]
fn repeated_peeks_see_every_push_and_pull_of_another_connection() {
    let (dir, watcher) = open();
    let worker = Cache::open(dir.path(), OpenOptions::default()).unwrap();
    let front = |c: &Cache| c.queue(Some("q")).peek(Side::Front).unwrap().map(|c| c.key);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            for i in 0..100i64 {
                assert_eq!(front(&watcher), None, "round {i}: the queue is empty");
                let k = worker
                    .queue(Some("q"))
                    .push(ValueRef::Int(i), Side::Back, &w())
                    .unwrap();
                for _ in 0..3 {
                    assert_eq!(
                        front(&watcher),
                        Some(k.clone()),
                        "round {i}: stale peek after a push"
                    );
                }
                assert!(pull(&worker, Some("q"), Side::Front).is_some());
            }
            assert_eq!(front(&watcher), None);
        });
    });
    // An item that expires while remembered is not shown again.
    let opts = WriteOptions {
        expire: Some(0.03),
        tag: None,
    };
    watcher
        .queue(Some("e"))
        .push(ValueRef::Int(1), Side::Back, &opts)
        .unwrap();
    assert!(watcher
        .queue(Some("e"))
        .peek(Side::Front)
        .unwrap()
        .is_some());
    std::thread::sleep(std::time::Duration::from_millis(40));
    assert!(watcher
        .queue(Some("e"))
        .peek(Side::Front)
        .unwrap()
        .is_none());
}

#[test]
fn queues_are_listed_with_their_depth_and_oldest_item() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), OpenOptions::default()).unwrap();
    for i in 0..3 {
        cache
            .queue(Some("mail"))
            .push(ValueRef::Int(i), Side::Back, &w())
            .unwrap();
    }
    cache
        .queue(None)
        .push(ValueRef::Int(9), Side::Back, &w())
        .unwrap();
    cache
        .set(&Key::from("mail-not-a-number"), ValueRef::Int(0), &w())
        .unwrap();
    let found = cache.queues().unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!((found[0].prefix.clone(), found[0].depth), (None, 1));
    assert_eq!(
        (found[1].prefix.as_deref(), found[1].depth),
        (Some("mail"), 3)
    );
    assert!(found[1].oldest.is_some());
}
