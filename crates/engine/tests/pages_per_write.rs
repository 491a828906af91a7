//! The schema's write cost, counted in WAL frames (pages) per committed operation.
//! D-001 records these numbers; python-diskcache's schema dirties about 9 per set.

use diskcache_oxide_engine::{Cache, Key, OpenOptions, SettingValue, ValueRef, WriteOptions};

fn wal_frames(dir: &std::path::Path) -> u64 {
    let len = std::fs::metadata(dir.join("cache.db-wal"))
        .map(|m| m.len())
        .unwrap_or(0);
    // 32-byte WAL header, then (24-byte frame header + 4096-byte page) per frame.
    len.saturating_sub(32) / (24 + 4096)
}

fn frames_per_op(cache: &Cache, dir: &std::path::Path, n: i64, op: impl Fn(i64)) -> f64 {
    let before = wal_frames(dir);
    for i in 0..n {
        op(i);
    }
    let _ = cache;
    (wal_frames(dir) - before) as f64 / n as f64
}

fn measure(policy: &str) -> (f64, f64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions {
        settings: vec![("eviction_policy".into(), SettingValue::Str(policy.into()))],
        ..OpenOptions::default()
    };
    let cache = Cache::open(dir.path(), options).unwrap();
    let w = WriteOptions::default();
    // Warm up so the table and indexes have their interior pages.
    for i in 0..200i64 {
        cache
            .set(&Key::from(-1 - i), ValueRef::Str("warm"), &w)
            .unwrap();
    }
    // An open read snapshot keeps SQLite from rewinding the WAL, so its length counts frames.
    let reader = rusqlite::Connection::open(dir.path().join("cache.db")).unwrap();
    reader
        .execute_batch("BEGIN; SELECT count(*) FROM cache;")
        .unwrap();
    let n = 200;
    let new_key = frames_per_op(&cache, dir.path(), n, |i| {
        cache
            .set(&Key::from(i), ValueRef::Str("value"), &w)
            .unwrap()
    });
    let overwrite = frames_per_op(&cache, dir.path(), n, |i| {
        cache
            .set(&Key::from(i), ValueRef::Str("other"), &w)
            .unwrap()
    });
    let delete = frames_per_op(&cache, dir.path(), n, |i| {
        assert!(cache.delete(&Key::from(i)).unwrap())
    });
    (new_key, overwrite, delete)
}

#[test]
fn default_policy_dirties_at_most_four_pages_per_set() {
    let (new_key, overwrite, delete) = measure("least-recently-stored");
    println!("least-recently-stored: set new {new_key:.2}, overwrite {overwrite:.2}, delete {delete:.2} pages");
    assert!(new_key <= 4.2, "new-key set dirtied {new_key} pages");
    assert!(overwrite <= 3.2, "overwrite dirtied {overwrite} pages");
    assert!(delete <= 4.2, "delete dirtied {delete} pages");
}

#[test]
fn a_queue_cache_without_eviction_dirties_three() {
    let (new_key, overwrite, delete) = measure("none");
    println!("none: set new {new_key:.2}, overwrite {overwrite:.2}, delete {delete:.2} pages");
    assert!(new_key <= 3.2, "new-key set dirtied {new_key} pages");
    assert!(overwrite <= 2.2);
    assert!(delete <= 3.2);
}
