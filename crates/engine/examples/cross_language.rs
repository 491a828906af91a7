//! A Rust program sharing a cache directory with Python.
//!
//! `cross_language read <dir> <key>` prints the value Python stored under a str key.
//! `cross_language write <dir> <key>` stores the reference record below for Python to read.

use diskcache_oxide_engine::value::{Date, Value};
use diskcache_oxide_engine::{Cache, Key, OpenOptions, WriteOptions};
use std::process::ExitCode;

/// The record both directions exchange (the Python test builds the same one).
fn reference_record() -> Value {
    let s = |x: &str| Value::Str(x.into());
    Value::Dict(vec![
        (s("name"), s("ada")),
        (s("n"), Value::Int(3)),
        (s("ratio"), Value::Float(0.5)),
        (s("ok"), Value::Bool(true)),
        (s("none"), Value::None),
        (s("tags"), Value::Tuple(vec![s("x"), s("y")])),
        (s("ids"), Value::List(vec![Value::Int(1), Value::Int(2)])),
        (s("raw"), Value::Bytes(vec![0, 255])),
        (s("big"), Value::BigInt(vec![0x40, 0, 0, 0, 0, 0, 0, 0, 0])), // 2**70
        (
            s("day"),
            Value::Date(Date {
                year: 2024,
                month: 1,
                day: 2,
            }),
        ),
        (Value::Int(7), Value::FrozenSet(vec![s("k")])),
    ])
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, mode, dir, key] = args.as_slice() else {
        eprintln!("usage: cross_language read|write <dir> <key>");
        return ExitCode::from(2);
    };
    let run = || -> diskcache_oxide_engine::Result<()> {
        let cache = Cache::open(dir, OpenOptions::default())?;
        let key = Key::from(key.as_str());
        match mode.as_str() {
            "read" => match cache.get_value(&key)? {
                Some(v) if v == reference_record() => println!("match"),
                Some(v) => println!("differs: {v:?}"),
                None => println!("missing"),
            },
            _ => cache.set_value(&key, &reference_record(), &WriteOptions::default())?,
        }
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
