//! Known encodings: the RFC 8949 vectors, our tags' numbers and layouts, integer and float forms,
//! key order, and a documented example value read back from a file.

use crate::support::{date, hex, int128, same, time};
use diskcache_oxide_engine::value::{
    decode, encode, encode_key, DateTime, PathKind, PathValue, Time, TimeDelta, TimeZone, Value,
};

#[test]
fn rfc_8949_appendix_a_vectors() {
    let cases: &[(Value, &str)] = &[
        (Value::Int(0), "00"),
        (Value::Int(23), "17"),
        (Value::Int(24), "1818"),
        (Value::Int(100), "1864"),
        (Value::Int(1000), "1903e8"),
        (Value::Int(1_000_000), "1a000f4240"),
        (Value::Int(1_000_000_000_000), "1b000000e8d4a51000"),
        (int128(u64::MAX.into()), "1bffffffffffffffff"),
        (int128(1 << 64), "c249010000000000000000"),
        (int128(-(1 << 64)), "3bffffffffffffffff"),
        (int128(-(1 << 64) - 1), "c349010000000000000000"),
        (Value::Int(-1), "20"),
        (Value::Int(-10), "29"),
        (Value::Int(-100), "3863"),
        (Value::Int(-1000), "3903e7"),
        (Value::Float(1.1), "fb3ff199999999999a"),
        (Value::Float(-4.1), "fbc010666666666666"),
        (Value::Bool(false), "f4"),
        (Value::Bool(true), "f5"),
        (Value::None, "f6"),
        (Value::Bytes(vec![]), "40"),
        (Value::Bytes(vec![1, 2, 3, 4]), "4401020304"),
        (Value::Str(String::new()), "60"),
        (Value::Str("a".into()), "6161"),
        (Value::Str("IETF".into()), "6449455446"),
        (Value::Str("\u{00fc}".into()), "62c3bc"),
        (Value::List(vec![]), "80"),
        (
            Value::List(vec![Value::Int(1), Value::Int(2), Value::Int(3)]),
            "83010203",
        ),
        (Value::Dict(vec![]), "a0"),
        (
            Value::Dict(vec![
                (Value::Int(1), Value::Int(2)),
                (Value::Int(3), Value::Int(4)),
            ]),
            "a201020304",
        ),
        (
            Value::Uuid(hex("8c8a8d48c8ea4bd8a2a5c9e2c0e09c4e").try_into().unwrap()),
            "d825508c8a8d48c8ea4bd8a2a5c9e2c0e09c4e",
        ),
        (Value::Set(vec![Value::Int(1)]), "d9010281 01"),
    ];
    for (value, expected) in cases {
        assert_eq!(encode(value), hex(expected), "{value:?}");
        assert_eq!(decode(&hex(expected)).unwrap(), *value, "{expected}");
    }
}

#[test]
fn our_tags_have_the_documented_numbers_and_layouts() {
    let dt = DateTime {
        date: date(2024, 2, 29),
        time: Time {
            fold: 1,
            ..time(23, 59, 58, 999_999, Some(TimeZone::Zone("UTC".into())))
        },
    };
    let cases: &[(Value, &str)] = &[
        (Value::Tuple(vec![Value::Int(1)]), "d9e5b0 81 01"),
        (Value::FrozenSet(vec![]), "d9e5b1 80"),
        (
            Value::DateTime(dt),
            "d9e5b2 89 1907e8 02 181d 17 183b 183a 1a000f423f 01 d9e5b9 63555443",
        ),
        (Value::Date(date(1, 1, 1)), "d9e5b3 83 01 01 01"),
        (
            Value::Time(time(
                0,
                0,
                0,
                0,
                Some(TimeZone::Fixed {
                    offset_us: -3_600_000_000,
                    name: None,
                }),
            )),
            "d9e5b4 86 00 00 00 00 00 d9e5b9 82 3ad693a3ff f6",
        ),
        (
            Value::Time(time(
                1,
                2,
                3,
                4,
                Some(TimeZone::Fixed {
                    offset_us: 0,
                    name: Some("UTC".into()),
                }),
            )),
            "d9e5b4 86 01 02 03 04 00 d9e5b9 82 00 63555443",
        ),
        (
            Value::Time(time(1, 2, 3, 4, None)),
            "d9e5b4 86 01 02 03 04 00 f6",
        ),
        (
            Value::TimeDelta(TimeDelta {
                days: -1,
                seconds: 86_399,
                microseconds: 999_999,
            }),
            "d9e5b5 83 20 1a0001517f 1a000f423f",
        ),
        (
            Value::Decimal("-1.10E+3".into()),
            "d9e5b6 68 2d312e3130452b33",
        ),
        (
            Value::Path(PathValue {
                kind: PathKind::PureWindows,
                path: "C:\\".into(),
            }),
            "d9e5b7 82 03 63 433a5c",
        ),
        (
            Value::Custom {
                name: "app.Point".into(),
                value: Box::new(Value::List(vec![])),
            },
            "d9e5b8 82 69 6170702e506f696e74 80",
        ),
    ];
    for (value, expected) in cases {
        assert_eq!(encode(value), hex(expected), "{value:?}");
        assert_eq!(decode(&hex(expected)).unwrap(), *value, "{expected}");
    }
}

#[test]
fn integer_boundaries() {
    let cases: &[(i128, &str)] = &[
        (i64::MAX.into(), "1b7fffffffffffffff"),
        (i64::MIN.into(), "3b7fffffffffffffff"),
        (i128::from(i64::MAX) + 1, "1b8000000000000000"),
        (i128::from(i64::MIN) - 1, "3b8000000000000000"),
        (u64::MAX.into(), "1bffffffffffffffff"),
        (-(1 << 64), "3bffffffffffffffff"),
        (1 << 64, "c249010000000000000000"),
        (-(1 << 64) - 1, "c349010000000000000000"),
        (i128::MAX, "c2507fffffffffffffffffffffffffffffff"),
        (i128::MIN, "c3507fffffffffffffffffffffffffffffff"),
    ];
    for &(n, expected) in cases {
        let v = int128(n);
        assert_eq!(encode(&v), hex(expected), "{n}");
        assert_eq!(decode(&hex(expected)).unwrap(), v, "{n}");
    }
    // The two's-complement forms outside i64.
    assert_eq!(
        int128(u64::MAX.into()),
        Value::BigInt(hex("00ffffffffffffffff"))
    );
    assert_eq!(int128(-(1 << 64)), Value::BigInt(hex("ff0000000000000000")));
    assert_eq!(
        int128(i128::from(i64::MIN) - 1),
        Value::BigInt(hex("ff7fffffffffffffff"))
    );

    // Far outside any fixed width: 2**200 and -(2**200).
    let huge = Value::BigInt([vec![1], vec![0; 25]].concat());
    assert_eq!(encode(&huge), [hex("c2581a01"), vec![0; 25]].concat());
    assert_eq!(decode(&encode(&huge)).unwrap(), huge);
    let minus_huge = Value::BigInt([vec![0xff], vec![0; 25]].concat());
    assert_eq!(
        encode(&minus_huge),
        [hex("c35819"), vec![0xff; 25]].concat()
    );
    assert_eq!(decode(&encode(&minus_huge)).unwrap(), minus_huge);
}

#[test]
fn non_canonical_integers_decode_to_their_one_form() {
    let cases: &[(&str, Value)] = &[
        ("1805", Value::Int(5)),
        ("1b0000000000000005", Value::Int(5)),
        ("3a00000001", Value::Int(-2)),
        ("c2430000 05", Value::Int(5)),
        ("c240", Value::Int(0)),
        ("c340", Value::Int(-1)),
        ("c34101", Value::Int(-2)),
        ("c2487fffffffffffffff", Value::Int(i64::MAX)),
        ("c3487fffffffffffffff", Value::Int(i64::MIN)),
        (
            "c24900ffffffffffffffff",
            Value::BigInt(hex("00ffffffffffffffff")),
        ),
        (
            "c3 4b 0000 01 0000000000000000",
            Value::BigInt(hex("feffffffffffffffff")),
        ),
    ];
    for (bytes, expected) in cases {
        assert_eq!(decode(&hex(bytes)).unwrap(), *expected, "{bytes}");
    }
    // Badly padded BigInts from a Rust caller still get the canonical encoding.
    assert_eq!(
        encode(&Value::BigInt(hex("000005"))),
        encode(&Value::Int(5))
    );
    assert_eq!(encode(&Value::BigInt(hex("ffff"))), encode(&Value::Int(-1)));
    assert_eq!(encode(&Value::BigInt(vec![])), encode(&Value::Int(0)));
}

#[test]
fn one_float_and_true_are_three_different_things() {
    let int = encode(&Value::Int(1));
    let float = encode(&Value::Float(1.0));
    let boolean = encode(&Value::Bool(true));
    assert_eq!(int, hex("01"));
    assert_eq!(float, hex("fb3ff0000000000000"));
    assert_eq!(boolean, hex("f5"));
    // And inside keys, where it matters.
    let key = |v: Value| encode_key(&Value::Tuple(vec![v]));
    assert_ne!(key(Value::Int(1)), key(Value::Float(1.0)));
    assert_ne!(key(Value::Int(1)), key(Value::Bool(true)));
    assert_ne!(key(Value::Float(1.0)), key(Value::Bool(true)));
}

#[test]
fn special_floats_round_trip_bit_exactly() {
    for f in [
        -0.0,
        0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MIN_POSITIVE,
        5e-324,
        f64::MAX,
    ] {
        let bytes = encode(&Value::Float(f));
        assert_eq!(bytes.len(), 9);
        assert!(same(&decode(&bytes).unwrap(), &Value::Float(f)), "{f}");
    }
    assert_eq!(encode(&Value::Float(-0.0)), hex("fb8000000000000000"));
    assert_eq!(
        encode(&Value::Float(f64::INFINITY)),
        hex("fb7ff0000000000000")
    );
    let Value::Float(nan) = decode(&encode(&Value::Float(f64::NAN))).unwrap() else {
        panic!()
    };
    assert!(nan.is_nan());
}

#[test]
fn shorter_floats_from_other_writers_are_read() {
    let cases: &[(&str, f64)] = &[
        ("f90000", 0.0),
        ("f98000", -0.0),
        ("f93c00", 1.0),
        ("f93e00", 1.5),
        ("f97bff", 65504.0),
        ("f90001", 5.960464477539063e-8),
        ("f90400", 6.103515625e-5),
        ("f9c400", -4.0),
        ("f97c00", f64::INFINITY),
        ("f9fc00", f64::NEG_INFINITY),
        ("fa47c35000", 100000.0),
        ("fa7f800000", f64::INFINITY),
    ];
    for (bytes, expected) in cases {
        assert!(
            same(&decode(&hex(bytes)).unwrap(), &Value::Float(*expected)),
            "{bytes}"
        );
    }
    for nan in ["f97e00", "fa7fc00000"] {
        assert!(matches!(decode(&hex(nan)).unwrap(), Value::Float(f) if f.is_nan()));
    }
}

#[test]
fn keys_sort_sets_and_dicts_by_encoded_bytes() {
    // 10 = 0a, 100 = 1864, -1 = 20, "b" = 6162: bytewise order, shorter heads first.
    let items = vec![
        Value::Str("b".into()),
        Value::Int(-1),
        Value::Int(100),
        Value::Int(10),
    ];
    assert_eq!(
        encode_key(&Value::Set(items.clone())),
        hex("d90102 84 0a 1864 20 6162")
    );
    assert_eq!(
        encode(&Value::Set(items.clone())),
        hex("d90102 84 6162 20 1864 0a")
    );
    let dict = Value::Dict(items.iter().cloned().map(|k| (k, Value::None)).collect());
    assert_eq!(encode_key(&dict), hex("a4 0af6 1864f6 20f6 6162f6"));
    // Lists and tuples keep their order, also in keys.
    let list = Value::List(items);
    assert_eq!(encode_key(&list), encode(&list));
}

#[test]
fn doc_example_values_read_back_from_a_file() {
    // What one process writes, another reads: the bytes are the whole contract.
    let value = Value::Dict(vec![
        (
            Value::Tuple(vec![Value::Str("user".into()), Value::Int(42)]),
            Value::Date(date(2024, 5, 17)),
        ),
        (Value::Str("uuid".into()), Value::Uuid([7; 16])),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("value.cbor");
    std::fs::write(&path, encode(&value)).unwrap();
    assert_eq!(decode(&std::fs::read(&path).unwrap()).unwrap(), value);
}
