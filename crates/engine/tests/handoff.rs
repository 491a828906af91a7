//! The write lock's bell (D-070): a writer refused the WAL write lock for long sleeps on a
//! futex word in the `-shm` file, and the process that releases the lock rings it. What must
//! hold: the release wakes the sleeper and leaves no sleeper counted; a holder that never
//! rings (a stock SQLite) still lets the waiter through; a word scribbled over by someone who
//! can write into the directory costs no write; a stock SQLite still reads the database.
//!
//! These read the word as a file (the `-shm` page is shared), never time a call.
#![cfg(target_os = "linux")]

use diskcache_oxide_engine::{Cache, Key, OpenOptions, StoredValue, ValueRef, WriteOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// `WalCkptInfo.notUsed0` in the `-shm` file.
const WORD: u64 = 132;

fn engine_locks() -> bool {
    diskcache_oxide_engine::platform::backends().wal_index_locks == "engine"
}

fn open(dir: &Path) -> Cache {
    let options = OpenOptions {
        timeout: Duration::from_secs(30),
        ..OpenOptions::default()
    };
    Cache::open(dir, options).unwrap()
}

fn word(dir: &Path) -> u32 {
    let shm = std::fs::File::open(dir.join("cache.db-shm")).unwrap();
    let mut bytes = [0u8; 4];
    shm.read_exact_at(&mut bytes, WORD).unwrap();
    u32::from_ne_bytes(bytes)
}

fn scribble(dir: &Path, value: u32) {
    let shm = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cache.db-shm"))
        .unwrap();
    shm.write_all_at(&value.to_ne_bytes(), WORD).unwrap();
}

fn sleepers(w: u32) -> u32 {
    w >> 16
}

fn rings(w: u32) -> u32 {
    w & 0xffff
}

/// Wait (up to 10 s) until `dir`'s bell counts a sleeper.
fn until_someone_sleeps(dir: &Path) -> bool {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if sleepers(word(dir)) > 0 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

fn set(cache: &Cache, key: &str, value: i64) {
    cache
        .set(
            &Key::from(key),
            ValueRef::Int(value),
            &WriteOptions::default(),
        )
        .unwrap();
}

#[test]
fn the_release_wakes_the_writer_sleeping_on_the_bell_and_leaves_no_sleeper() {
    if !engine_locks() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let holder = open(dir.path());
    let waiter = open(dir.path());
    set(&holder, "a", 0);
    holder.begin().unwrap();
    set(&holder, "a", 1);
    std::thread::scope(|s| {
        let done = s.spawn(|| set(&waiter, "b", 2));
        assert!(
            until_someone_sleeps(dir.path()),
            "the refused writer never slept on the bell"
        );
        let before = rings(word(dir.path()));
        holder.end(true).unwrap();
        done.join().unwrap();
        let after = word(dir.path());
        assert_ne!(rings(after), before, "releasing the lock did not ring");
        assert_eq!(sleepers(after), 0, "a sleeper is still counted: {after:#x}");
    });
    let got = |k: &str| holder.get(&Key::from(k), false).unwrap().map(|e| e.value);
    assert_eq!(got("a"), Some(StoredValue::Int(1)));
    assert_eq!(got("b"), Some(StoredValue::Int(2)));
}

#[test]
fn a_stock_sqlite_holding_the_lock_never_rings_and_the_writer_still_gets_through() {
    if !engine_locks() {
        return;
    }
    use std::io::{BufRead, Write};
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    set(&cache, "a", 0);
    // Another process (POSIX locks are per process): Python's sqlite3, a stock SQLite.
    let script = "import sqlite3, sys\n\
        c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
        c.execute('BEGIN IMMEDIATE')\n\
        print('held', flush=True)\n\
        sys.stdin.readline()\n\
        c.execute('COMMIT')\n\
        print(c.execute('SELECT COUNT(*) FROM cache').fetchone()[0], flush=True)\n\
        sys.stdin.readline()\n";
    let Ok(mut stock) = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir.path().join("cache.db"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
    else {
        return; // no python3 here: nothing to hold the lock from outside
    };
    let mut input = stock.stdin.take().unwrap();
    let mut output = std::io::BufReader::new(stock.stdout.take().unwrap());
    let mut line = String::new();
    output.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "held");
    std::thread::scope(|s| {
        let done = s.spawn(|| set(&cache, "b", 2));
        assert!(until_someone_sleeps(dir.path()));
        let before = rings(word(dir.path()));
        writeln!(input).unwrap();
        line.clear();
        output.read_line(&mut line).unwrap();
        done.join().unwrap();
        // Only our own release rang, after the write: the stock commit did not.
        assert!(rings(word(dir.path())).wrapping_sub(before) & 0xffff <= 1);
        assert_eq!(sleepers(word(dir.path())), 0);
    });
    writeln!(input).unwrap();
    stock.wait().unwrap();
    let got = |k: &str| cache.get(&Key::from(k), false).unwrap().map(|e| e.value);
    assert_eq!(got("b"), Some(StoredValue::Int(2)));
}

#[test]
fn a_scribbled_bell_costs_no_write() {
    if !engine_locks() {
        return;
    }
    for garbage in [u32::MAX, 0xffff_0000, 0x0000_ffff, 0x1234_5678] {
        let dir = tempfile::tempdir().unwrap();
        let first = open(dir.path());
        set(&first, "n", 0);
        scribble(dir.path(), garbage);
        let threads = 4;
        let per = 150;
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let cache = open(dir.path());
                    for _ in 0..per {
                        cache.incr(&Key::from("n"), 1, Some(0)).unwrap();
                    }
                });
            }
            // And a long hold while they run, so some of them sleep on the scribbled word.
            first.begin().unwrap();
            std::thread::sleep(Duration::from_millis(20));
            first.end(true).unwrap();
        });
        let total = first.get(&Key::from("n"), false).unwrap().map(|e| e.value);
        assert_eq!(
            total,
            Some(StoredValue::Int(threads * per)),
            "garbage {garbage:#x}"
        );
    }
}
