//! Layout records (D-018) and read-only handles (D-019).

use diskcache_oxide_engine::{
    claim_fanout, Cache, Error, Key, Mismatch, OpenOptions, SettingValue, ValueRef, WriteOptions,
    FANOUT_MARKER,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every file under `dir` (relative path -> bytes); directories as `None`.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().to_path_buf();
            if path.is_dir() {
                out.insert(rel, None);
                stack.push(path);
            } else {
                out.insert(rel, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

fn read_only() -> OpenOptions {
    OpenOptions {
        read_only: true,
        ..OpenOptions::default()
    }
}

/// A closed cache with a small and a large (file-backed) value.
fn make_cache(dir: &Path) {
    let cache = Cache::open(dir, OpenOptions::default()).unwrap();
    let w = WriteOptions::default();
    cache
        .set(&Key::from("small"), ValueRef::Str("hello"), &w)
        .unwrap();
    cache
        .set(&Key::from("big"), ValueRef::Bytes(&[7u8; 100_000]), &w)
        .unwrap();
    drop(cache);
}

#[test]
fn claim_fanout_writes_the_marker_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("fan");
    claim_fanout(&root, 4).unwrap();
    let text = std::fs::read_to_string(root.join(FANOUT_MARKER)).unwrap();
    assert!(text.contains("\"shards\": 4"), "{text}");
    let before = snapshot(&root);
    claim_fanout(&root, 4).unwrap();
    assert_eq!(snapshot(&root), before, "a matching claim writes nothing");
}

#[test]
fn claim_fanout_with_another_shard_count_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    claim_fanout(dir.path(), 8).unwrap();
    let before = snapshot(dir.path());
    let err = claim_fanout(dir.path(), 4).unwrap_err();
    assert!(
        matches!(
            err,
            Error::LayoutMismatch(Mismatch::Shards {
                found: 8,
                asked: 4,
                ..
            })
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("created with 8 shards, not 4"),
        "{err}"
    );
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn claim_fanout_on_a_cache_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    make_cache(dir.path());
    let before = snapshot(dir.path());
    let err = claim_fanout(dir.path(), 8).unwrap_err();
    assert!(
        matches!(err, Error::LayoutMismatch(Mismatch::PlainCache { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("open it as a Cache"), "{err}");
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn cache_on_a_fanout_root_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    claim_fanout(dir.path(), 2).unwrap();
    let before = snapshot(dir.path());
    for options in [OpenOptions::default(), read_only()] {
        let err = Cache::open(dir.path(), options).err().unwrap();
        assert!(
            matches!(
                err,
                Error::LayoutMismatch(Mismatch::FanoutRoot {
                    shards: Some(2),
                    ..
                })
            ),
            "{err}"
        );
        // The Python call that opens it (`FanoutCache(..., shards=2)`) is the binding's words.
        assert!(err.to_string().contains("FanoutCache of 2 shards"), "{err}");
        assert!(!err.to_string().contains("shards="), "{err}");
        assert_eq!(snapshot(dir.path()), before);
    }
}

#[test]
fn concurrent_claims_agree() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("race");
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let root = &root;
                s.spawn(move || claim_fanout(root, if i % 2 == 0 { 3 } else { 5 }))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert!(
        (1..8).contains(&ok),
        "some claims win, the others see a mismatch"
    );
    let text = std::fs::read_to_string(root.join(FANOUT_MARKER)).unwrap();
    let winner = if text.contains("\"shards\": 3") { 3 } else { 5 };
    assert!(claim_fanout(&root, winner).is_ok());
    let names: Vec<_> = std::fs::read_dir(&root).unwrap().collect();
    assert_eq!(names.len(), 1, "no temporary files left behind");
}

#[test]
fn read_only_open_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    make_cache(dir.path());
    let before = snapshot(dir.path());
    let cache = Cache::open(dir.path(), read_only()).unwrap();
    assert!(cache.read_only());
    let small = cache.get(&Key::from("small"), false).unwrap().unwrap();
    assert!(matches!(
        small.value,
        diskcache_oxide_engine::StoredValue::Str(ref s) if s == "hello"
    ));
    assert!(cache.get(&Key::from("big"), false).unwrap().is_some());
    assert!(cache.contains(&Key::from("small")).unwrap());
    assert_eq!(cache.len().unwrap(), 2);
    assert!(cache.volume().unwrap() > 0);
    assert!(cache.peekitem(true).unwrap().is_some());
    assert_eq!(cache.keys_sorted(None, false, 10).unwrap().len(), 2);
    assert_eq!(cache.stats(true, false).unwrap(), (0, 0));
    assert!(cache.check(false).unwrap().is_empty());
    drop(cache);
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn read_only_skips_bookkeeping_reads_would_write() {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions {
        settings: vec![
            ("statistics".into(), SettingValue::Int(1)),
            (
                "eviction_policy".into(),
                SettingValue::Str("least-recently-used".into()),
            ),
        ],
        ..OpenOptions::default()
    };
    let cache = Cache::open(dir.path(), options).unwrap();
    cache
        .set(&Key::from("k"), ValueRef::Int(1), &WriteOptions::default())
        .unwrap();
    drop(cache);
    let before = snapshot(dir.path());
    let cache = Cache::open(dir.path(), read_only()).unwrap();
    assert!(cache.get(&Key::from("k"), false).unwrap().is_some());
    assert!(cache.get(&Key::from("nope"), false).unwrap().is_none());
    assert_eq!(cache.get_many(&[Key::from("k")]).unwrap().len(), 1);
    drop(cache);
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn read_only_refuses_every_write() {
    let dir = tempfile::tempdir().unwrap();
    make_cache(dir.path());
    let before = snapshot(dir.path());
    let cache = Cache::open(dir.path(), read_only()).unwrap();
    let k = Key::from("small");
    let w = WriteOptions::default();
    let big = [1u8; 100_000];
    let refused: Vec<(&str, Result<(), Error>)> = vec![
        ("set", cache.set(&k, ValueRef::Int(1), &w)),
        ("set big", cache.set(&k, ValueRef::Bytes(&big), &w)),
        ("add", cache.add(&k, ValueRef::Int(1), &w).map(drop)),
        ("delete", cache.delete(&k).map(drop)),
        ("pop", cache.pop(&k).map(drop)),
        ("incr", cache.incr(&k, 1, Some(0)).map(drop)),
        ("touch", cache.touch(&k, None).map(drop)),
        ("clear", cache.clear().map(drop)),
        ("expire", cache.expire(None).map(drop)),
        ("cull", cache.cull().map(drop)),
        ("evict", cache.evict(&"t".into()).map(drop)),
        ("check fix", cache.check(true).map(drop)),
        ("stats reset", cache.stats(true, true).map(drop)),
        (
            "reset",
            cache
                .reset("cull_limit", Some(SettingValue::Int(3)), true)
                .map(drop),
        ),
        ("begin", cache.begin()),
        (
            "push",
            cache
                .queue(None)
                .push(ValueRef::Int(1), diskcache_oxide_engine::Side::Back, &w)
                .map(drop),
        ),
    ];
    for (name, result) in refused {
        match result {
            Err(e @ Error::ReadOnly { .. }) => {
                let m = e.to_string();
                assert!(m.contains("opened read-only"), "{name}: {m}");
                assert!(!m.contains("=True"), "{name}: no Python in the engine: {m}");
            }
            other => panic!("{name}: expected Error::ReadOnly, got {:?}", other.err()),
        }
    }
    drop(cache);
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn read_only_missing_directory_or_database_raises() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = Cache::open(&missing, read_only()).err().unwrap();
    match &err {
        Error::Io { path, source, .. } => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            assert_eq!(path.as_deref(), Some(missing.as_path()));
        }
        other => panic!("{other}"),
    }
    assert!(!missing.exists());
    let err = Cache::open(dir.path(), read_only()).err().unwrap();
    assert!(
        matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn read_only_refuses_changed_settings() {
    let dir = tempfile::tempdir().unwrap();
    make_cache(dir.path());
    let before = snapshot(dir.path());
    let options = OpenOptions {
        settings: vec![("cull_limit".into(), SettingValue::Int(99))],
        read_only: true,
        ..OpenOptions::default()
    };
    let err = Cache::open(dir.path(), options).err().unwrap();
    assert!(
        matches!(&err, Error::ReadOnlySettings { differ } if differ == &["cull_limit=99"]),
        "{err}"
    );
    let same = OpenOptions {
        settings: vec![("cull_limit".into(), SettingValue::Int(10))],
        read_only: true,
        ..OpenOptions::default()
    };
    Cache::open(dir.path(), same).unwrap();
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn read_only_sees_a_live_writer() {
    let dir = tempfile::tempdir().unwrap();
    make_cache(dir.path());
    let reader = Cache::open(dir.path(), read_only()).unwrap();
    assert!(reader.get(&Key::from("later"), false).unwrap().is_none());
    let writer = Cache::open(dir.path(), OpenOptions::default()).unwrap();
    writer
        .set(
            &Key::from("later"),
            ValueRef::Int(5),
            &WriteOptions::default(),
        )
        .unwrap();
    assert!(reader.get(&Key::from("later"), false).unwrap().is_some());
    writer
        .set(
            &Key::from("later2"),
            ValueRef::Int(6),
            &WriteOptions::default(),
        )
        .unwrap();
    assert!(reader.get(&Key::from("later2"), false).unwrap().is_some());
}
