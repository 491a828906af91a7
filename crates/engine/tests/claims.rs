//! Claims: taken once, held by a token, free after their lease, apart from the cache's entries.

use diskcache_oxide_engine::{Cache, Key, OpenOptions, ValueRef, WriteOptions};
use std::time::Duration;

fn open(dir: &std::path::Path) -> Cache {
    Cache::open(dir, OpenOptions::default()).unwrap()
}

#[test]
fn a_claim_is_taken_once_and_held_by_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    let claims = cache.claims("default");
    let key = Key::from("article:7");
    assert!(claims.try_acquire(&key, 30.0, "a", "host", 1).unwrap());
    assert!(!claims.try_acquire(&key, 30.0, "b", "host", 2).unwrap());
    assert!(
        cache
            .claims("other")
            .try_acquire(&key, 30.0, "c", "host", 3)
            .unwrap(),
        "namespaces are separate"
    );
    let held = claims.holder(&key).unwrap().unwrap();
    assert_eq!((held.token.as_str(), held.pid), ("a", 1));
    assert!(
        !claims.release(&key, "b").unwrap(),
        "another token cannot release it"
    );
    assert!(claims.extend(&key, "a", 60.0).unwrap().is_some());
    assert!(claims.extend(&key, "b", 60.0).unwrap().is_none());
    assert_eq!(claims.list().unwrap().len(), 1);
    assert_eq!(cache.all_claims().unwrap().len(), 2);
    assert!(claims.release(&key, "a").unwrap());
    assert!(claims.holder(&key).unwrap().is_none());
    assert!(claims.try_acquire(&key, 30.0, "b", "host", 2).unwrap());
}

#[test]
fn an_expired_claim_is_free_and_cannot_be_released() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    let claims = cache.claims("default");
    let key = Key::from(1i64);
    assert!(claims.try_acquire(&key, 0.05, "a", "host", 1).unwrap());
    std::thread::sleep(Duration::from_millis(80));
    assert!(claims.holder(&key).unwrap().is_none());
    assert!(!claims.release(&key, "a").unwrap());
    assert!(claims.try_acquire(&key, 30.0, "b", "host", 2).unwrap());
}

#[test]
fn clearing_culling_and_expiring_the_cache_leave_claims_alone() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    let key = Key::from("k");
    assert!(cache
        .claims("default")
        .try_acquire(&key, 30.0, "a", "h", 1)
        .unwrap());
    let opts = WriteOptions {
        expire: Some(0.0),
        ..WriteOptions::default()
    };
    cache.set(&key, ValueRef::Int(1), &opts).unwrap();
    cache.expire(None).unwrap();
    cache.clear().unwrap();
    cache.cull().unwrap();
    assert_eq!(cache.len().unwrap(), 0);
    assert!(cache.claims("default").holder(&key).unwrap().is_some());
}

#[test]
fn a_directory_made_before_the_claims_table_gets_one() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let db = rusqlite::Connection::open(dir.path().join("cache.db")).unwrap();
    db.execute_batch("DROP TABLE claims").unwrap();
    drop(db);
    let read_only = Cache::open(
        dir.path(),
        OpenOptions {
            read_only: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    assert!(read_only
        .claims("default")
        .holder(&Key::from("k"))
        .unwrap()
        .is_none());
    assert!(read_only.all_claims().unwrap().is_empty());
    drop(read_only);
    let cache = open(dir.path());
    assert!(cache
        .claims("default")
        .try_acquire(&Key::from("k"), 1.0, "a", "h", 1)
        .unwrap());
}

#[test]
fn an_operator_pages_through_the_live_claims() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    for n in 0..25 {
        let key = Key::from(format!("k{n:02}").as_str());
        let ns = if n % 5 == 0 { "other" } else { "default" };
        assert!(cache
            .claims(ns)
            .try_acquire(&key, 30.0, "t", "h", 1)
            .unwrap());
    }
    assert_eq!(cache.claims_count(None).unwrap(), 25);
    assert_eq!(cache.claims_count(Some("other")).unwrap(), 5);
    let every = cache.all_claims().unwrap();
    let mut paged = Vec::new();
    for offset in (0..30).step_by(10) {
        let page = cache.claims_page(None, offset, 10).unwrap();
        assert!(page.len() <= 10);
        paged.extend(page);
    }
    assert_eq!(paged, every, "the pages are the whole list, in its order");
    let other = cache.claims_page(Some("other"), 1, 2).unwrap();
    assert_eq!(other.len(), 2);
    assert!(other.iter().all(|c| c.namespace == "other"));
    assert!(cache.claims_page(None, 100, 10).unwrap().is_empty());
}
