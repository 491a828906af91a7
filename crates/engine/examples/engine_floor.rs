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
    println!(
        "set new    {:7.1} µs",
        time(n, |i| cache
            .set(&Key::from(i), ValueRef::Str("value"), &w)
            .unwrap())
    );
    println!(
        "overwrite  {:7.1} µs",
        time(n, |i| cache
            .set(&Key::from(i), ValueRef::Str("other"), &w)
            .unwrap())
    );
    println!(
        "get        {:7.1} µs",
        time(n, |i| {
            let _ = cache.get(&Key::from(i), false).unwrap();
        })
    );
    println!(
        "incr       {:7.1} µs",
        time(n, |_| {
            let _ = cache.incr(&Key::from("n"), 1, Some(0;
        }).unwrap()
        ))
    );
    println!(
        "add        {:7.1} µs",
        time(n, |i| {
            let _ = cache.add(&Key::from(i + n), ValueRef::Int(i), &w).unwrap();
        })
    );
    println!(
        "delete     {:7.1} µs",
        time(n, |i| {
            let _ = cache.delete(&Key::from(i)).unwrap();
        })
    );
    println!(
        "set 1 MB   {:7.1} µs",
        time(200, |i| cache
            .set(&Key::from(i % 10), ValueRef::Bytes(&big), &w)
            .unwrap())
    );
    println!(
        "get 1 MB   {:7.1} µs",
        time(200, |i| {
            let _ = cache.get(&Key::from(i % 10), false).unwrap();
        })
    );
}
