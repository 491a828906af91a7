//! D-027: what a cache creates is private to its owner by default; `permissions = "group"`
//! shares it with the directory's group, and later handles follow the directory.

use diskcache_oxide_engine::{
    Cache, Error, Key, OpenOptions, SettingValue, ValueRef, WriteOptions,
};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn with(permissions: Option<&str>) -> OpenOptions {
    let mut options = OpenOptions::default();
    if let Some(p) = permissions {
        options
            .settings
            .push(("permissions".into(), SettingValue::Str(p.into())));
    }
    options
}

/// Every file and directory under `dir` (the directory included), with its mode.
fn modes(dir: &Path) -> Vec<(String, u32, bool)> {
    let mut out = vec![(".".into(), mode(dir), true)];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let is_dir = p.is_dir();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            out.push((rel, mode(&p), is_dir));
            if is_dir {
                stack.push(p);
            }
        }
    }
    out
}

fn fill(cache: &Cache) {
    let big = vec![7u8; 40_000];
    let w = WriteOptions::default();
    cache
        .set(&Key::from("small"), ValueRef::Int(1), &w)
        .unwrap();
    cache
        .set(&Key::from("big"), ValueRef::Bytes(&big), &w)
        .unwrap();
}

fn names(found: &[(String, u32, bool)]) -> Vec<&str> {
    found.iter().map(|(n, _, _)| n.as_str()).collect()
}

#[test]
fn new_caches_are_private() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("c");
    // A permissive umask must not widen anything.
    let old = unsafe { libc::umask(0) };
    let cache = Cache::open(&dir, with(None)).unwrap();
    unsafe { libc::umask(old) };
    fill(&cache);
    let found = modes(&dir);
    for want in [
        "cache.db",
        "cache.db-wal",
        "cache.db-shm",
        ".lock",
        "values",
    ] {
        assert!(names(&found).contains(&want), "{want} missing: {found:?}");
    }
    assert!(found.iter().any(|(n, _, d)| n.ends_with(".val") && !d));
    for (name, m, is_dir) in &found {
        let want = if *is_dir { 0o700 } else { 0o600 };
        assert_eq!(*m, want, "{name} has mode {m:o}");
    }
}

#[test]
fn group_shares_and_later_handles_follow_the_directory() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("q");
    let old = unsafe { libc::umask(0o022) };
    let cache = Cache::open(&dir, with(Some("group"))).unwrap();
    fill(&cache);
    drop(cache);
    // A handle opened without the option writes group-readable files too.
    let again = Cache::open(&dir, with(None)).unwrap();
    let big = vec![8u8; 40_000];
    again
        .set(
            &Key::from("big2"),
            ValueRef::Bytes(&big),
            &WriteOptions::default(),
        )
        .unwrap();
    unsafe { libc::umask(old) };
    let found = modes(&dir);
    assert_eq!(
        found.iter().filter(|(n, _, _)| n.ends_with(".val")).count(),
        2
    );
    for (name, m, is_dir) in &found {
        if *is_dir {
            assert_eq!(*m, 0o2770, "{name} has mode {m:o}");
        } else {
            assert_eq!(*m, 0o660, "{name} has mode {m:o}");
        }
    }
    // Asking for private on a group cache contradicts the directory: refused, by name.
    match Cache::open(&dir, with(Some("private"))) {
        Err(Error::Setting(m)) => assert!(m.contains("permissions"), "{m}"),
        Err(e) => panic!("wrong error {e}"),
        Ok(_) => panic!("opened"),
    }
}

#[test]
fn bad_values_and_existing_directories() {
    let parent = tempfile::tempdir().unwrap();
    for bad in [SettingValue::Str("world".into()), SettingValue::Int(0o777)] {
        let mut options = OpenOptions::default();
        options.settings.push(("permissions".into(), bad));
        match Cache::open(parent.path().join("x"), options) {
            Err(Error::Setting(m)) => assert!(m.starts_with("permissions"), "{m}"),
            other => panic!("expected a setting error, got {:?}", other.err()),
        }
    }
    // An existing, empty, world-readable directory: files inside are private anyway.
    let dir = parent.path().join("existing");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    fill(&Cache::open(&dir, with(None)).unwrap());
    for (name, m, is_dir) in modes(&dir) {
        if name != "." {
            assert_eq!(m, if is_dir { 0o700 } else { 0o600 }, "{name}");
        }
    }
    assert_eq!(mode(&dir), 0o755, "an existing directory keeps its mode");
    // 'group' on a fresh (cache-less) existing directory is applied to it.
    let fresh = parent.path().join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    fill(&Cache::open(&fresh, with(Some("group"))).unwrap());
    assert_eq!(mode(&fresh) & 0o070, 0o070);
    assert_eq!(mode(&fresh.join("cache.db")), 0o660);
    // ...but not to a private cache that already exists.
    assert!(matches!(
        Cache::open(&dir, with(Some("group"))),
        Err(Error::Setting(_))
    ));
}
