//! The engine's VFS writes each commit's WAL frames at once (D-029). What it must keep: other
//! programs using a stock SQLite read every commit as it lands, a transaction larger than the
//! write buffer commits or rolls back whole, and the WAL stays valid for recovery.

use diskcache_oxide_engine::{Cache, Key, OpenOptions, StoredValue, ValueRef, WriteOptions};
use rusqlite::{Connection, OpenFlags};

fn stock(dir: &std::path::Path) -> Connection {
    // SQLite's default VFS, as any other program would open the file.
    Connection::open_with_flags(
        dir.join("cache.db"),
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .unwrap()
}

fn count(db: &Connection) -> i64 {
    db.query_row("SELECT COUNT(*) FROM cache", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_stock_sqlite_sees_each_commit_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), OpenOptions::default()).unwrap();
    let db = stock(dir.path());
    for i in 0..300i64 {
        cache
            .set(&Key::from(i), ValueRef::Int(i), &WriteOptions::default())
            .unwrap();
        assert_eq!(count(&db), i + 1);
    }
    // and the other way round
    db.execute(
        "DELETE FROM cache WHERE rowid IN (SELECT rowid FROM cache LIMIT 10)",
        [],
    )
    .unwrap();
    let live = (0..300i64)
        .filter(|i| cache.get(&Key::from(*i), false).unwrap().is_some())
        .count();
    assert_eq!(live, 290);
    let ok: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}

#[test]
fn a_transaction_larger_than_the_buffer_commits_or_rolls_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), OpenOptions::default()).unwrap();
    let value = vec![9u8; 3000]; // inline, about one page each: ~6 MiB of frames
    let write_all = |tag: u8| {
        for i in 0..2000i64 {
            let mut v = value.clone();
            v[0] = tag;
            cache
                .set(&Key::from(i), ValueRef::Bytes(&v), &WriteOptions::default())
                .unwrap();
        }
    };
    cache
        .transact(|| {
            write_all(1);
            Ok(())
        })
        .unwrap();
    let failed: Result<(), _> = cache.transact(|| {
        write_all(2);
        Err(diskcache_oxide_engine::Error::InvalidArgument(
            "roll back".into(),
        ))
    });
    assert!(failed.is_err());
    let db = stock(dir.path());
    assert_eq!(count(&db), 2000);
    for i in (0..2000i64).step_by(97) {
        match cache.get(&Key::from(i), false).unwrap().map(|e| e.value) {
            Some(StoredValue::Bytes(b)) => assert_eq!(b[0], 1, "key {i}"),
            other => panic!("key {i}: {other:?}"),
        }
    }
    let ok: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}

#[test]
fn the_wal_recovers_after_the_process_state_is_lost() {
    // Copy the database and its WAL while a handle is open (as a crash would leave them):
    // recovery from the copy must find every commit.
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path(), OpenOptions::default()).unwrap();
    for i in 0..500i64 {
        cache
            .set(
                &Key::from(i),
                ValueRef::Int(i * 2),
                &WriteOptions::default(),
            )
            .unwrap();
    }
    let copy = tempfile::tempdir().unwrap();
    for name in ["cache.db", "cache.db-wal"] {
        std::fs::copy(dir.path().join(name), copy.path().join(name)).unwrap();
    }
    let db = stock(copy.path());
    assert_eq!(count(&db), 500);
    let ok: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}
