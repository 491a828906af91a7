//! Hostile or damaged files in a cache directory (D-035): errors, never an abort, a hang or an
//! escape from the directory.

use diskcache_oxide_engine::{
    Cache, Error, OpenOptions, Problem, StoredValue, ValueRef, WriteOptions,
};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

const BIG: usize = 100_000;

fn open(dir: &Path) -> Result<Cache, Error> {
    Cache::open(dir, OpenOptions::default())
}

/// Run `f` on another thread; panic (failing the test) if it blocks for more than 20 s.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the call blocked")
}

/// The only value file of the cache in `dir`.
fn only_value_file(dir: &Path) -> PathBuf {
    let mut found = Vec::new();
    for sub in std::fs::read_dir(dir.join("values")).unwrap() {
        for f in std::fs::read_dir(sub.unwrap().path()).unwrap() {
            found.push(f.unwrap().path());
        }
    }
    assert_eq!(found.len(), 1, "{found:?}");
    found.pop().unwrap()
}

fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn corrupt<T: std::fmt::Debug>(r: Result<T, Error>) -> String {
    match r {
        Err(Error::Corrupt(m)) => m.to_string(),
        other => panic!("expected Error::Corrupt, got {other:?}"),
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Extended,
    Fifo,
    Directory,
    Symlink,
}

fn plant(path: &Path, kind: Kind, outside: &Path) {
    if let Kind::Extended = kind {
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.set_len(1 << 40).unwrap(); // sparse 1 TiB
        return;
    }
    std::fs::remove_file(path).unwrap();
    match kind {
        Kind::Fifo => mkfifo(path),
        Kind::Directory => std::fs::create_dir(path).unwrap(),
        Kind::Symlink => std::os::unix::fs::symlink(outside.join("secret"), path).unwrap(),
        Kind::Extended => unreachable!(),
    }
}

#[test]
fn hostile_value_files_are_errors_on_every_read_and_check_drops_them() {
    for kind in [Kind::Extended, Kind::Fifo, Kind::Directory, Kind::Symlink] {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"keep").unwrap();
        let cache = open(dir.path()).unwrap();
        let key = "k".into();
        let big = vec![3u8; BIG];
        cache
            .set(&key, ValueRef::Bytes(&big), &WriteOptions::default())
            .unwrap();
        let text = "t".repeat(BIG);
        let tkey = "t".into();
        let path = only_value_file(dir.path());
        plant(&path, kind, outside.path());
        cache
            .set(&tkey, ValueRef::Str(&text), &WriteOptions::default())
            .unwrap();

        let c = cache.clone();
        let k = key.clone();
        let m = corrupt(bounded(move || c.get(&k, false)));
        if let Kind::Extended = kind {
            assert!(
                m.contains("1099511627776 bytes long, but its row says 100000"),
                "{m}"
            );
        }
        let c = cache.clone();
        let k = key.clone();
        corrupt(bounded(move || c.get(&k, true)));
        let c = cache.clone();
        let k = key.clone();
        corrupt(bounded(move || c.pop(&k)));
        let c = cache.clone();
        let k = key.clone();
        let deferred = bounded(move || c.get_deferred(&k)).unwrap().unwrap();
        let StoredValue::Deferred(file) = deferred.value else {
            panic!("expected a deferred value")
        };
        let mut buf = vec![0u8; file.size as usize];
        corrupt(cache.read_value_file(&file, &mut buf));

        let c = cache.clone();
        let found = bounded(move || c.check(false)).unwrap();
        assert!(
            found
                .iter()
                .any(|p| matches!(p, Problem::DamagedEntry { .. })
                    && p.to_string().starts_with("damaged entry")),
            "{kind:?} {found:?}"
        );
        let c = cache.clone();
        bounded(move || c.check(true)).unwrap();
        let left = cache.check(false).unwrap();
        assert!(left.is_empty(), "{kind:?} {left:?}");
        assert!(cache.get(&key, false).unwrap().is_none());
        // The other entry was left alone.
        match cache.get(&tkey, false).unwrap().unwrap().value {
            StoredValue::Str(s) => assert_eq!(s, text),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            std::fs::read(outside.path().join("secret")).unwrap(),
            b"keep"
        );
    }
}

#[test]
fn a_read_handle_reads_the_verified_file_even_after_it_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path()).unwrap();
    let big = vec![5u8; BIG];
    cache
        .set(&"k".into(), ValueRef::Bytes(&big), &WriteOptions::default())
        .unwrap();
    let StoredValue::File(handle) = cache.get(&"k".into(), true).unwrap().unwrap().value else {
        panic!("expected a file")
    };
    assert!(cache.delete(&"k".into()).unwrap());
    assert!(!handle.path().exists());
    assert_eq!(handle.size(), BIG as u64);
    let mut f = handle.into_file().unwrap();
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut f, &mut got).unwrap();
    assert_eq!(got, big);
}

#[test]
fn a_symlinked_values_directory_is_never_entered() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let cache = open(dir.path()).unwrap();
    let big = vec![1u8; BIG];
    cache
        .set(&"k".into(), ValueRef::Bytes(&big), &WriteOptions::default())
        .unwrap();
    let values = dir.path().join("values");
    // The other directory looks like values/: a subdirectory with an "orphan" in it.
    std::fs::create_dir(outside.path().join("ab")).unwrap();
    let victim = outside
        .path()
        .join("ab")
        .join(format!("{}.val", "0".repeat(30)));
    std::fs::write(&victim, b"victim").unwrap();
    std::fs::remove_dir_all(&values).unwrap();
    std::os::unix::fs::symlink(outside.path(), &values).unwrap();
    corrupt(cache.get(&"k".into(), false));
    let found = cache.check(false).unwrap();
    assert!(
        found.iter().any(|p| matches!(
            p,
            Problem::ValuesNotADirectory {
                kind: "a symbolic link",
                ..
            }
        ) && p.to_string().contains("values is a symbolic link")),
        "{found:?}"
    );
    cache.check(true).unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"victim");
    assert!(!values.exists());
    cache
        .set(&"k".into(), ValueRef::Bytes(&big), &WriteOptions::default())
        .unwrap();
    assert!(std::fs::symlink_metadata(&values).unwrap().is_dir());
    assert_eq!(std::fs::read(&victim).unwrap(), b"victim");
}

#[test]
fn links_and_fifos_among_the_database_files_and_the_lock_are_refused_at_open() {
    for name in [".lock", "cache.db", "cache.db-wal", "cache.db-shm"] {
        for fifo in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            drop(open(dir.path()).unwrap());
            let path = dir.path().join(name);
            let _ = std::fs::remove_file(&path);
            let target = outside.path().join("created");
            if fifo {
                mkfifo(&path);
            } else {
                std::os::unix::fs::symlink(&target, &path).unwrap();
            }
            let d = dir.path().to_path_buf();
            match bounded(move || open(&d).map(drop)) {
                Err(Error::NotACache(why)) => {
                    let m = why.to_string();
                    assert!(m.contains(name) && m.contains("remove it"), "{m}")
                }
                other => panic!("{name}: expected NotACache, got {other:?}"),
            }
            assert!(!target.exists(), "{name}: the link's target was created");
        }
    }
}

#[test]
fn a_declared_length_never_sizes_an_allocation() {
    // An array head claiming 2^63 items, then a few bytes: an error, not an abort.
    let mut bytes = vec![0x9b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
    bytes.extend(std::iter::repeat_n(0x00, 1 << 20));
    assert!(diskcache_oxide_engine::value::decode(&bytes).is_err());
    let mut map = vec![0xbb, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
    map.extend(std::iter::repeat_n(0x00, 1 << 20));
    assert!(diskcache_oxide_engine::value::decode(&map).is_err());
}
