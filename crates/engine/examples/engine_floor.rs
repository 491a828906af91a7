//! Median per-operation latency of the engine alone (no Python), for comparing schema choices.
//! `cargo run --release -p diskcache-oxide-engine --example engine_floor`

use diskcache_oxide_engine::{Cache, Key, OpenOptions, ValueRef, WriteOptions};
use std::time::Instant;

fn median_us(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}

fn time(n: i64, mut op: impl FnMut(i64)) -> f64 {
    let samples = (0..n)
        .map(|i| {
            let t = Instant::now();
            op(i);
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    median_us(samples)
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = Cache::open(dir.path(), OpenOptions::default()).expect("open");
    let w = WriteOptions::default();
    let n = 5000;
    let big = vec![7u8; 1 << 20];
    let set_new = time(n, |i| {
        cache
            .set(&Key::from(i), ValueRef::Str("value"), &w)
            .unwrap()
    });
    let overwrite = time(n, |i| {
        cache
            .set(&Key::from(i), ValueRef::Str("other"), &w)
            .unwrap()
    });
    let get = time(n, |i| {
        cache.get(&Key::from(i), false).unwrap();
    });
    let incr = time(n, |_| {
        cache.incr(&Key::from("n"), 1, Some(0)).unwrap();
    });
    let add = time(n, |i| {
        cache.add(&Key::from(i + n), ValueRef::Int(i), &w).unwrap();
    });
    let delete = time(n, |i| {
        cache.delete(&Key::from(i)).unwrap();
    });
    let set_big = time(200, |i| {
        cache
            .set(&Key::from(i % 10), ValueRef::Bytes(&big), &w)
            .unwrap()
    });
    let get_big = time(200, |i| {
        cache.get(&Key::from(i % 10), false).unwrap();
    });
    for (name, us) in [
        ("set new", set_new),
        ("overwrite", overwrite),
        ("get", get),
        ("incr", incr),
        ("add", add),
        ("delete", delete),
        ("set 1 MB", set_big),
        ("get 1 MB", get_big),
    ] {
        println!("{name:10} {us:8.1} µs");
    }
}
