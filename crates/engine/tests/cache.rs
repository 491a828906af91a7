//! Engine behaviour through the public Rust API.

use diskcache_oxide_engine::{
    Cache, Error, Incr, Key, NotCache, OpenOptions, Problem, Scalar, SettingValue, StoredValue,
    ValueRef, WriteOptions,
};
use std::time::Duration;

fn open(dir: &std::path::Path) -> Cache {
    Cache::open(dir, OpenOptions::default()).expect("open")
}

fn opts() -> WriteOptions {
    WriteOptions::default()
}

fn get(cache: &Cache, key: &str) -> Option<StoredValue> {
    cache.get(&Key::from(key), false).unwrap().map(|e| e.value)
}

#[test]
fn set_get_each_kind_inline_and_in_files() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    let big = vec![7u8; 100_000];
    let big_text = "x".repeat(40_000);
    cache
        .set(&"int".into(), ValueRef::Int(-5), &opts())
        .unwrap();
    cache
        .set(&"float".into(), ValueRef::Float(1.5), &opts())
        .unwrap();
    cache
        .set(&"str".into(), ValueRef::Str("héllo"), &opts())
        .unwrap();
    cache
        .set(&"bytes".into(), ValueRef::Bytes(b"\x00\x01"), &opts())
        .unwrap();
    cache
        .set(&"big".into(), ValueRef::Bytes(&big), &opts())
        .unwrap();
    cache
        .set(&"bigtext".into(), ValueRef::Str(&big_text), &opts())
        .unwrap();
    cache
        .set(&"enc".into(), ValueRef::Encoded(b"\xf6"), &opts())
        .unwrap();
    assert_eq!(get(&cache, "int"), Some(StoredValue::Int(-5)));
    assert_eq!(get(&cache, "float"), Some(StoredValue::Float(1.5)));
    assert_eq!(get(&cache, "str"), Some(StoredValue::Str("héllo".into())));
    assert_eq!(get(&cache, "bytes"), Some(StoredValue::Bytes(vec![0, 1])));
    assert_eq!(get(&cache, "big"), Some(StoredValue::Bytes(big.clone())));
    assert_eq!(get(&cache, "bigtext"), Some(StoredValue::Str(big_text)));
    assert_eq!(get(&cache, "enc"), Some(StoredValue::Encoded(vec![0xf6])));
    assert_eq!(get(&cache, "missing"), None);
    assert_eq!(cache.len().unwrap(), 7);
    // A read handle is the verified file's path.
    match cache.get(&"big".into(), true).unwrap().unwrap().value {
        StoredValue::File(h) => {
            assert_eq!(std::fs::read(h.path()).unwrap(), big);
            assert_eq!(
                std::io::read_to_string(h.into_file().unwrap())
                    .unwrap()
                    .len(),
                big.len()
            );
        }
        other => panic!("expected a file, got {other:?}"),
    }
    // Overwriting a file value with a small one removes the file.
    cache.set(&"big".into(), ValueRef::Int(1), &opts()).unwrap();
    assert!(cache.check(false).unwrap().is_empty());
    assert!(cache.volume().unwrap() > 40_000);
}

#[test]
fn int_and_float_keys_are_one_key_and_keys_sort_like_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    cache
        .set(&Key::Native(Scalar::Int(1)), ValueRef::Str("int"), &opts())
        .unwrap();
    cache
        .set(
            &Key::Native(Scalar::Float(1.0)),
            ValueRef::Str("float"),
            &opts(),
        )
        .unwrap();
    assert_eq!(cache.len().unwrap(), 1);
    cache
        .set(&Key::from("b"), ValueRef::Int(0), &opts())
        .unwrap();
    cache
        .set(&Key::from(&b"a"[..]), ValueRef::Int(0), &opts())
        .unwrap();
    cache
        .set(&Key::Native(Scalar::Float(0.5)), ValueRef::Int(0), &opts())
        .unwrap();
    let keys = cache.keys_sorted(None, false, 100).unwrap();
    assert_eq!(
        keys,
        vec![
            Key::Native(Scalar::Float(0.5)),
            Key::Native(Scalar::Int(1)),
            Key::from("b"),
            Key::from(&b"a"[..]),
        ]
    );
    let after = cache.keys_sorted(Some(&keys[1]), false, 100).unwrap();
    assert_eq!(after, keys[2..].to_vec());
    let back = cache.keys_sorted(Some(&keys[2]), true, 100).unwrap();
    assert_eq!(back, vec![keys[1].clone(), keys[0].clone()]);
}

#[test]
fn expiry_tags_touch_and_maintenance() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    let gone = WriteOptions {
        expire: Some(-1.0),
        tag: None,
    };
    let tagged = WriteOptions {
        expire: None,
        tag: Some(Scalar::from("t")),
    };
    cache.set(&"old".into(), ValueRef::Int(1), &gone).unwrap();
    assert_eq!(
        cache.len().unwrap(),
        0,
        "a write culls expired entries, its own included"
    );
    let soon = WriteOptions {
        expire: Some(0.05),
        tag: None,
    };
    cache.set(&"old".into(), ValueRef::Int(1), &soon).unwrap();
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(get(&cache, "old"), None);
    assert!(!cache.contains(&"old".into()).unwrap());
    assert!(!cache.delete(&"old".into()).unwrap());
    assert!(!cache.touch(&"old".into(), None).unwrap());
    assert_eq!(
        cache.len().unwrap(),
        1,
        "expired entries stay until removed"
    );
    assert_eq!(cache.expire(None).unwrap(), 1);
    cache.set(&"a".into(), ValueRef::Int(1), &tagged).unwrap();
    cache.set(&"b".into(), ValueRef::Int(2), &tagged).unwrap();
    let e = cache.get(&"a".into(), false).unwrap().unwrap();
    assert_eq!(e.tag, Some(Scalar::from("t")));
    assert!(cache.touch(&"a".into(), Some(100.0)).unwrap());
    assert!(cache
        .get(&"a".into(), false)
        .unwrap()
        .unwrap()
        .expire_time
        .is_some());
    assert_eq!(cache.evict(&Scalar::from("t")).unwrap(), 2);
    assert_eq!(cache.len().unwrap(), 0);
    for i in 0..250 {
        cache.set(&Key::from(i), ValueRef::Int(i), &opts()).unwrap();
    }
    assert_eq!(cache.clear().unwrap(), 250);
    assert!(cache.is_empty().unwrap());
}

#[test]
fn add_pop_incr() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    assert!(cache.add(&"k".into(), ValueRef::Int(1), &opts()).unwrap());
    assert!(!cache.add(&"k".into(), ValueRef::Int(2), &opts()).unwrap());
    assert_eq!(cache.incr(&"k".into(), 5, Some(0)).unwrap(), Incr::Value(6));
    assert_eq!(cache.incr(&"n".into(), 1, None).unwrap(), Incr::Missing);
    assert_eq!(
        cache.incr(&"n".into(), -3, Some(10)).unwrap(),
        Incr::Value(7)
    );
    cache.set(&"s".into(), ValueRef::Str("x"), &opts()).unwrap();
    assert_eq!(cache.incr(&"s".into(), 1, Some(0)).unwrap(), Incr::NotInt);
    cache
        .set(&"max".into(), ValueRef::Int(i64::MAX), &opts())
        .unwrap();
    assert_eq!(cache.incr(&"max".into(), 1, Some(0)).unwrap(), Incr::NotInt);
    let popped = cache.pop(&"k".into()).unwrap().unwrap();
    assert_eq!(popped.value, StoredValue::Int(6));
    assert!(cache.pop(&"k".into()).unwrap().is_none());
}

#[test]
fn insertion_order_iteration_and_peekitem() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    for k in ["c", "a", "b"] {
        cache.set(&k.into(), ValueRef::Str(k), &opts()).unwrap();
    }
    cache
        .set(&"c".into(), ValueRef::Str("again"), &opts())
        .unwrap();
    let max = cache.max_rowid().unwrap().unwrap();
    let keys: Vec<Key> = cache
        .keys_by_rowid(0, max + 1, true, 100)
        .unwrap()
        .into_iter()
        .map(|(_, k)| k)
        .collect();
    assert_eq!(
        keys,
        vec![Key::from("c"), Key::from("a"), Key::from("b")],
        "overwrites keep their place"
    );
    let (k, e) = cache.peekitem(true).unwrap().unwrap();
    assert_eq!((k, e.value), (Key::from("b"), StoredValue::Str("b".into())));
    let (k, _) = cache.peekitem(false).unwrap().unwrap();
    assert_eq!(k, Key::from("c"));
    cache
        .set(
            &"z".into(),
            ValueRef::Int(0),
            &WriteOptions {
                expire: Some(-1.0),
                tag: None,
            },
        )
        .unwrap();
    let (k, _) = cache.peekitem(true).unwrap().unwrap();
    assert_eq!(
        k,
        Key::from("b"),
        "peekitem skips and removes expired entries"
    );
    assert_eq!(cache.len().unwrap(), 3);
}

#[test]
fn transactions_roll_back_rows_and_new_files() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    let big = vec![1u8; 50_000];
    let r: Result<(), Error> = cache.transact(|| {
        cache.set(&"a".into(), ValueRef::Bytes(&big), &opts())?;
        cache.begin()?; // re-entrant
        cache.set(&"b".into(), ValueRef::Int(1), &opts())?;
        cache.end(true)?;
        Err(Error::InvalidArgument("boom".into()))
    });
    assert!(r.is_err());
    assert_eq!(cache.len().unwrap(), 0);
    assert!(
        cache.check(false).unwrap().is_empty(),
        "the rolled-back value file was removed"
    );
    cache
        .transact(|| cache.set(&"a".into(), ValueRef::Bytes(&big), &opts()))
        .unwrap();
    assert_eq!(get(&cache, "a"), Some(StoredValue::Bytes(big)));
}

#[test]
fn eviction_by_size_limit_culls_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions {
        settings: vec![
            ("size_limit".into(), SettingValue::Int(200_000)),
            ("cull_limit".into(), SettingValue::Int(2)),
        ],
        ..OpenOptions::default()
    };
    let cache = Cache::open(dir.path(), options).unwrap();
    let blob = vec![3u8; 40_000];
    for i in 0..20i64 {
        cache
            .set(&Key::from(i), ValueRef::Bytes(&blob), &opts())
            .unwrap();
    }
    assert!(cache.volume().unwrap() < 400_000);
    assert!(get_key(&cache, 19).is_some(), "the newest survives");
    assert!(get_key(&cache, 0).is_none(), "the oldest was culled");
    assert!(cache.check(false).unwrap().is_empty());
}

fn get_key(cache: &Cache, i: i64) -> Option<StoredValue> {
    cache.get(&Key::from(i), false).unwrap().map(|e| e.value)
}

#[test]
fn settings_persist_and_reopening_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    {
        let options = OpenOptions {
            settings: vec![("cull_limit".into(), SettingValue::Int(3))],
            ..OpenOptions::default()
        };
        let cache = Cache::open(dir.path(), options).unwrap();
        cache.set(&"k".into(), ValueRef::Int(1), &opts()).unwrap();
    }
    // The database and a non-empty WAL, hashed (an empty WAL appears whenever a connection opens).
    let snapshot = |d: &std::path::Path| -> Vec<(String, u32)> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .filter(|(n, data)| {
                n.starts_with("cache.db") && !n.ends_with("-shm") && !data.is_empty()
            })
            .map(|(n, data)| (n, diskcache_oxide_engine::checksum(&data)))
            .collect();
        v.sort();
        v
    };
    let before = snapshot(dir.path());
    let cache = open(dir.path());
    assert_eq!(cache.settings().cull_limit, 3);
    assert_eq!(get(&cache, "k"), Some(StoredValue::Int(1)));
    assert_eq!(
        snapshot(dir.path()),
        before,
        "opening and reading wrote nothing"
    );
    drop(cache);
    let bad = OpenOptions {
        settings: vec![("nope".into(), SettingValue::Int(1))],
        ..OpenOptions::default()
    };
    assert!(matches!(
        Cache::open(dir.path(), bad),
        Err(Error::Setting(_))
    ));
}

#[test]
fn refuses_newer_formats_and_foreign_databases() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    {
        let db = rusqlite::Connection::open(dir.path().join("cache.db")).unwrap();
        db.execute_batch("PRAGMA user_version = 99").unwrap();
    }
    assert!(matches!(
        Cache::open(dir.path(), OpenOptions::default()),
        Err(Error::FormatVersion { found: 99, .. })
    ));
    let other = tempfile::tempdir().unwrap();
    {
        let db = rusqlite::Connection::open(other.path().join("cache.db")).unwrap();
        db.execute_batch("CREATE TABLE Cache (key BLOB)").unwrap();
    }
    assert!(matches!(
        Cache::open(other.path(), OpenOptions::default()),
        Err(Error::NotACache(_))
    ));
}

#[test]
fn damaged_values_are_reported_not_returned() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    cache
        .set(&"v".into(), ValueRef::Bytes(b"hello"), &opts())
        .unwrap();
    let big = vec![9u8; 60_000];
    cache
        .set(&"f".into(), ValueRef::Bytes(&big), &opts())
        .unwrap();
    {
        let db = rusqlite::Connection::open(dir.path().join("cache.db")).unwrap();
        db.execute(
            "UPDATE cache SET value = x'68656c6c6f21' WHERE key = 'v'",
            [],
        )
        .unwrap();
        let name: String = db
            .query_row("SELECT filename FROM cache WHERE key = 'f'", [], |r| {
                r.get(0)
            })
            .unwrap();
        std::fs::write(dir.path().join("values").join(name), b"garbage").unwrap();
    }
    assert!(matches!(
        cache.get(&"v".into(), false),
        Err(Error::Corrupt(_))
    ));
    assert!(matches!(
        cache.get(&"f".into(), false),
        Err(Error::Corrupt(_))
    ));
    assert!(matches!(
        cache.get(&"f".into(), true),
        Err(Error::Corrupt(_))
    ));
    // A file of the wrong length is one damaged entry, refused before it is read (D-035).
    let found = cache.check(false).unwrap();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        matches!(&found[1], Problem::DamagedEntry { .. })
            && found[1]
                .to_string()
                .contains("is 7 bytes long, but its row says 60000"),
        "{found:?}"
    );
}

#[test]
fn file_names_outside_the_cache_are_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.val");
    std::fs::write(&secret, b"do not read").unwrap();
    let cache = open(dir.path());
    let big = vec![1u8; 40_000];
    cache
        .set(&"f".into(), ValueRef::Bytes(&big), &opts())
        .unwrap();
    let db = rusqlite::Connection::open(dir.path().join("cache.db")).unwrap();
    let name: String = db
        .query_row("SELECT filename FROM cache WHERE key = 'f'", [], |r| {
            r.get(0)
        })
        .unwrap();
    // A symlink where the value file was.
    let file = dir.path().join("values").join(&name);
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&secret, &file).unwrap();
    assert!(matches!(
        cache.get(&"f".into(), false),
        Err(Error::Corrupt(_))
    ));
    // Names that try to escape.
    for evil in [
        secret.to_str().unwrap(),
        "../../etc/passwd",
        "ab/../../x.val",
    ] {
        db.execute("UPDATE cache SET filename = ?1 WHERE key = 'f'", [evil])
            .unwrap();
        assert!(matches!(
            cache.get(&"f".into(), false),
            Err(Error::Corrupt(_))
        ));
        assert!(cache.delete(&"f".into()).unwrap());
        cache
            .set(&"f".into(), ValueRef::Bytes(&big), &opts())
            .unwrap();
    }
    assert_eq!(std::fs::read(&secret).unwrap(), b"do not read");
}

#[test]
fn check_fix_removes_orphans_and_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    let big = vec![1u8; 40_000];
    cache
        .set(&"a".into(), ValueRef::Bytes(&big), &opts())
        .unwrap();
    cache
        .set(&"b".into(), ValueRef::Bytes(&big), &opts())
        .unwrap();
    let sub = dir.path().join("values").join("00");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(sub.join("0123456789abcdef0123456789abcd.val"), b"orphan").unwrap();
    let db = rusqlite::Connection::open(dir.path().join("cache.db")).unwrap();
    let name: String = db
        .query_row("SELECT filename FROM cache WHERE key = 'b'", [], |r| {
            r.get(0)
        })
        .unwrap();
    std::fs::remove_file(dir.path().join("values").join(name)).unwrap();
    assert!(matches!(
        cache.get(&"b".into(), false),
        Err(Error::Corrupt(_))
    ));
    let problems = cache.check(true).unwrap();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(cache.check(false).unwrap().is_empty());
    assert_eq!(cache.len().unwrap(), 1);
    assert_eq!(get(&cache, "a"), Some(StoredValue::Bytes(big)));
}

#[test]
fn threads_share_a_handle() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    cache.set(&"n".into(), ValueRef::Int(0), &opts()).unwrap();
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..200 {
                    assert!(matches!(
                        cache.incr(&"n".into(), 1, Some(0)).unwrap(),
                        Incr::Value(_)
                    ));
                }
            });
        }
    });
    assert_eq!(get(&cache, "n"), Some(StoredValue::Int(1600)));
}

#[test]
fn a_held_write_lock_times_out_other_writers() {
    let dir = tempfile::tempdir().unwrap();
    let holder = open(dir.path());
    let options = OpenOptions {
        timeout: Duration::from_millis(100),
        ..OpenOptions::default()
    };
    let waiter = Cache::open(dir.path(), options).unwrap();
    holder.begin().unwrap();
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(matches!(
                waiter.set(&"k".into(), ValueRef::Int(1), &opts()),
                Err(Error::Timeout)
            ))
        });
    });
    assert!(started.elapsed() < Duration::from_secs(5));
    holder.end(true).unwrap();
    waiter.set(&"k".into(), ValueRef::Int(1), &opts()).unwrap();
}

#[test]
fn a_damaged_database_header_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let db = dir.path().join("cache.db");
    let mut bytes = std::fs::read(&db).unwrap();
    bytes[..16].copy_from_slice(b"not a database!!");
    std::fs::write(&db, bytes).unwrap();
    let _ = std::fs::remove_file(dir.path().join("cache.db-wal"));
    let _ = std::fs::remove_file(dir.path().join("cache.db-shm"));
    match Cache::open(dir.path(), OpenOptions::default()) {
        Err(Error::NotACache(why)) => assert_eq!(why, NotCache::NotSqlite, "{why}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("opened a damaged database"),
    }
}

#[test]
fn nan_floats_round_trip_through_set_value() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    assert!(cache
        .set(&"n".into(), ValueRef::Float(f64::NAN), &opts())
        .is_err());
    let nan = diskcache_oxide_engine::value::Value::Float(f64::NAN);
    cache.set_value(&"n".into(), &nan, &opts()).unwrap();
    match cache.get_value(&"n".into()).unwrap() {
        Some(diskcache_oxide_engine::value::Value::Float(f)) => assert!(f.is_nan()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn prefixed_key_scans_see_only_their_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    for k in [
        "running:a",
        "running:b",
        "running;",
        "runnin",
        "transcode-1",
        "running:\u{10FFFF}",
    ] {
        cache.set(&k.into(), ValueRef::Int(0), &opts()).unwrap();
    }
    cache
        .set(&Key::from(&b"running:c"[..]), ValueRef::Int(0), &opts())
        .unwrap();
    let keys = cache.keys_prefixed("running:", None, false, 100).unwrap();
    assert_eq!(
        keys,
        vec![
            Key::from("running:a"),
            Key::from("running:b"),
            Key::from("running:\u{10FFFF}")
        ]
    );
    let page = cache
        .keys_prefixed("running:", Some("running:a"), false, 1)
        .unwrap();
    assert_eq!(page, vec![Key::from("running:b")]);
    let back = cache
        .keys_prefixed("running:", Some("running:b"), true, 10)
        .unwrap();
    assert_eq!(back, vec![Key::from("running:a")]);
    assert_eq!(cache.keys_prefixed("", None, false, 100).unwrap().len(), 6);
}

#[test]
fn deferred_reads_fill_the_callers_buffer_and_check_it() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    let big = vec![4u8; 70_000];
    cache
        .set(&"f".into(), ValueRef::Bytes(&big), &opts())
        .unwrap();
    cache
        .set(&"small".into(), ValueRef::Bytes(b"abc"), &opts())
        .unwrap();
    assert_eq!(
        cache.get_deferred(&"small".into()).unwrap().unwrap().value,
        StoredValue::Bytes(b"abc".to_vec()),
        "inline values are returned as usual"
    );
    let StoredValue::Deferred(file) = cache.get_deferred(&"f".into()).unwrap().unwrap().value
    else {
        panic!("expected a deferred value");
    };
    assert_eq!(file.size, 70_000);
    let mut buf = vec![0u8; file.size as usize];
    assert!(cache.read_value_file(&file, &mut buf).unwrap());
    assert_eq!(buf, big);
    assert!(matches!(
        cache.read_value_file(&file, &mut [0u8; 3]),
        Err(Error::Corrupt(_))
    ));
    cache.delete(&"f".into()).unwrap();
    assert!(
        !cache.read_value_file(&file, &mut buf).unwrap(),
        "a deleted file reads as gone"
    );
}

#[test]
fn a_repeated_read_sees_every_write_committed_in_between() {
    let dir = tempfile::tempdir().unwrap();
    let reader = open(dir.path());
    let writer = open(dir.path());
    std::thread::scope(|s| {
        s.spawn(|| {
            // The writer runs on its own thread, so on its own connection.
            for i in 0..300i64 {
                writer.set(&"k".into(), ValueRef::Int(i), &opts()).unwrap();
                for _ in 0..3 {
                    assert_eq!(
                        get(&reader, "k"),
                        Some(StoredValue::Int(i)),
                        "stale read after write {i}"
                    );
                }
            }
        });
    });
    // Expiry is checked on every read, cached or not.
    reader
        .set(
            &"e".into(),
            ValueRef::Int(1),
            &WriteOptions {
                expire: Some(0.05),
                tag: None,
            },
        )
        .unwrap();
    assert!(get(&reader, "e").is_some());
    assert!(get(&reader, "e").is_some());
    std::thread::sleep(Duration::from_millis(60));
    assert!(get(&reader, "e").is_none());
    // Inside a transaction a read sees the transaction's own writes.
    reader.set(&"t".into(), ValueRef::Int(1), &opts()).unwrap();
    assert_eq!(get(&reader, "t"), Some(StoredValue::Int(1)));
    reader.begin().unwrap();
    reader.set(&"t".into(), ValueRef::Int(2), &opts()).unwrap();
    assert_eq!(get(&reader, "t"), Some(StoredValue::Int(2)));
    reader.end(false).unwrap();
    assert_eq!(get(&reader, "t"), Some(StoredValue::Int(1)));
}
