//! `Cache::import_many`, the call a migration writes through (D-041): each entry stored with
//! the times and access count it had in the cache it comes from, read back from the database
//! itself (a read-only connection of its own), not from what the call was given.

use diskcache_oxide_engine::{
    Cache, Imported, Key, OpenOptions, Scalar, SettingValue, StoredValue, ValueRef,
};
use rusqlite::{Connection, OpenFlags};

/// One row of the cache table as stored: key, store_time, expire_time, access_time,
/// access_count, tag.
type Stored = (String, f64, Option<f64>, f64, i64, Option<String>);

fn stored_rows(dir: &std::path::Path) -> Vec<Stored> {
    let db = Connection::open_with_flags(
        dir.join("cache.db"),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .unwrap();
    let mut statement = db
        .prepare(
            "SELECT key, store_time, expire_time, access_time, access_count, tag \
             FROM cache ORDER BY rowid",
        )
        .unwrap();
    let rows = statement
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .unwrap();
    rows.collect::<rusqlite::Result<_>>().unwrap()
}

fn meta(dir: &std::path::Path) -> (i64, i64, i64) {
    let db = Connection::open_with_flags(dir.join("cache.db"), OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    db.query_row("SELECT count, hits, misses FROM meta", [], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })
    .unwrap()
}

fn tag(text: &str) -> Option<Scalar> {
    Some(Scalar::Str(text.into()))
}

fn value(cache: &Cache, key: &str) -> StoredValue {
    cache.get(&Key::from(key), false).unwrap().unwrap().value
}

#[test]
fn each_entry_keeps_its_own_store_time_access_time_and_count() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), OpenOptions::default()).unwrap();
    let big = vec![5u8; 100_000]; // over disk_min_file_size: a value file
    let items = [
        Imported {
            key: "inline".into(),
            value: ValueRef::Int(42),
            store_time: 1_600_000_000.125,
            expire_time: None,
            access_time: 1_650_000_000.5,
            access_count: 7,
            tag: tag("t"),
        },
        Imported {
            key: "text".into(),
            value: ValueRef::Str("héllo"),
            store_time: 1_500_000_000.0,
            expire_time: Some(4_000_000_000.25),
            access_time: 1_500_000_001.75,
            access_count: 0,
            tag: None,
        },
        Imported {
            key: "file".into(),
            value: ValueRef::Bytes(&big),
            store_time: 1_700_000_000.062_5,
            expire_time: Some(4_100_000_000.0),
            access_time: 1_700_000_123.0,
            access_count: i64::MAX,
            tag: tag("big"),
        },
    ];
    cache.import_many(&items).unwrap();
    // Read before any get: a read may update the access columns (by the eviction policy).
    assert_eq!(
        stored_rows(dir.path()),
        vec![
            (
                "inline".into(),
                1_600_000_000.125,
                None,
                1_650_000_000.5,
                7,
                Some("t".into())
            ),
            (
                "text".into(),
                1_500_000_000.0,
                Some(4_000_000_000.25),
                1_500_000_001.75,
                0,
                None
            ),
            (
                "file".into(),
                1_700_000_000.062_5,
                Some(4_100_000_000.0),
                1_700_000_123.0,
                i64::MAX,
                Some("big".into())
            ),
        ]
    );
    assert_eq!(value(&cache, "inline"), StoredValue::Int(42));
    assert_eq!(value(&cache, "text"), StoredValue::Str("héllo".into()));
    assert_eq!(value(&cache, "file"), StoredValue::Bytes(big));
    assert_eq!(cache.len().unwrap(), 3);
    assert!(
        cache.check(false).unwrap().is_empty(),
        "counts, sizes and files agree"
    );
}

#[test]
fn an_existing_key_is_overwritten_in_place_and_the_rest_follow_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), OpenOptions::default()).unwrap();
    let big = vec![1u8; 60_000];
    cache
        .set(&"b".into(), ValueRef::Bytes(&big), &Default::default())
        .unwrap();
    let items: Vec<Imported<'_>> = ["a", "b", "c"]
        .iter()
        .enumerate()
        .map(|(n, name)| Imported {
            key: (*name).into(),
            value: ValueRef::Int(n as i64),
            store_time: 1_000.0 + n as f64,
            expire_time: None,
            access_time: 2_000.0 + n as f64,
            access_count: n as i64,
            tag: None,
        })
        .collect();
    cache.import_many(&items).unwrap();
    let keys: Vec<Key> = cache
        .keys_by_rowid(i64::MIN, i64::MAX, true, 10)
        .unwrap()
        .into_iter()
        .map(|(_, key)| key)
        .collect();
    // "b" keeps the row it had, so the insertion order is b, then a and c as given.
    assert_eq!(keys, vec![Key::from("b"), Key::from("a"), Key::from("c")]);
    let rows = stored_rows(dir.path());
    assert_eq!(rows[0], ("b".into(), 1_001.0, None, 2_001.0, 1, None));
    assert_eq!(value(&cache, "b"), StoredValue::Int(1));
    assert_eq!(cache.len().unwrap(), 3);
    // The value file "b" had is gone with the value it held.
    assert!(cache.check(false).unwrap().is_empty());
}

#[test]
fn nothing_is_culled_and_no_hit_or_miss_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions {
        settings: vec![
            ("size_limit".into(), SettingValue::Int(200_000)),
            ("cull_limit".into(), SettingValue::Int(10)),
            ("statistics".into(), SettingValue::Int(1)),
        ],
        ..OpenOptions::default()
    };
    let cache = Cache::open(dir.path(), options).unwrap();
    let blob = vec![3u8; 40_000];
    let items: Vec<Imported<'_>> = (0..20i64)
        .map(|n| Imported {
            key: Key::from(n),
            value: ValueRef::Bytes(&blob),
            store_time: 1_000.0 + n as f64,
            expire_time: None,
            access_time: 1_000.0 + n as f64,
            access_count: 0,
            tag: None,
        })
        .collect();
    cache.import_many(&items).unwrap();
    // 800,000 bytes of values against a limit of 200,000: all are kept (the caller applies
    // the size limit once the import is done), and the statistics count no read.
    assert!(cache.volume().unwrap() > 800_000);
    assert_eq!(meta(dir.path()), (20, 0, 0));
    for n in 0..20i64 {
        let entry = cache.get(&Key::from(n), false).unwrap();
        assert_eq!(
            entry.map(|e| e.value),
            Some(StoredValue::Bytes(blob.clone()))
        );
    }
}

#[test]
fn nothing_to_import_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), OpenOptions::default()).unwrap();
    cache.import_many(&[]).unwrap();
    assert_eq!(cache.len().unwrap(), 0);
    assert!(stored_rows(dir.path()).is_empty());
}
