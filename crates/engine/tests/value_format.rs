//! The safe value format (D-002): round trips, canonical keys, and a decoder that refuses bad input
//! without panicking.

use diskcache_oxide_engine::value::{
    decode, encode, encode_key, Date, DateTime, PathKind, PathValue, Time, TimeDelta, TimeZone,
    Value, MAX_DEPTH,
};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Helpers

/// Structural equality with floats compared by bits, so NaN equals itself and -0.0 differs from 0.0.
fn same(a: &Value, b: &Value) -> bool {
    use Value::*;
    let all =
        |x: &[Value], y: &[Value]| x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q));
    match (a, b) {
        (Float(x), Float(y)) => x.to_bits() == y.to_bits(),
        (List(x), List(y))
        | (Tuple(x), Tuple(y))
        | (Set(x), Set(y))
        | (FrozenSet(x), FrozenSet(y)) => all(x, y),
        (Dict(x), Dict(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((k1, v1), (k2, v2))| same(k1, k2) && same(v1, v2))
        }
        (
            Custom {
                name: n1,
                value: v1,
            },
            Custom {
                name: n2,
                value: v2,
            },
        ) => n1 == n2 && same(v1, v2),
        _ => a == b,
    }
}

/// Sets and dicts put in the order `encode_key` writes them, recursively.
fn key_order(v: &Value) -> Value {
    use Value::*;
    let sort = |items: &[Value]| {
        let mut items: Vec<Value> = items.iter().map(key_order).collect();
        items.sort_by_cached_key(encode_key);
        items
    };
    match v {
        List(x) => List(x.iter().map(key_order).collect()),
        Tuple(x) => Tuple(x.iter().map(key_order).collect()),
        Set(x) => Set(sort(x)),
        FrozenSet(x) => FrozenSet(sort(x)),
        Dict(pairs) => {
            let mut pairs: Vec<(Value, Value)> = pairs
                .iter()
                .map(|(k, v)| (key_order(k), key_order(v)))
                .collect();
            pairs.sort_by_cached_key(|(k, v)| (encode_key(k), encode_key(v)));
            Dict(pairs)
        }
        Custom { name, value } => Custom {
            name: name.clone(),
            value: Box::new(key_order(value)),
        },
        other => other.clone(),
    }
}

/// Reorders every set, frozenset and dict in the tree (a seeded pseudo-random permutation).
fn permute(v: &Value, seed: &mut u64) -> Value {
    use Value::*;
    fn shuffle<T>(items: &mut [T], seed: &mut u64) {
        for i in (1..items.len()).rev() {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            items.swap(i, (*seed % (i as u64 + 1)) as usize);
        }
    }
    let each = |x: &[Value], seed: &mut u64| x.iter().map(|c| permute(c, seed)).collect::<Vec<_>>();
    match v {
        List(x) => List(each(x, seed)),
        Tuple(x) => Tuple(each(x, seed)),
        Set(x) | FrozenSet(x) => {
            let mut items = each(x, seed);
            shuffle(&mut items, seed);
            if matches!(v, Set(_)) {
                Set(items)
            } else {
                FrozenSet(items)
            }
        }
        Dict(pairs) => {
            let mut pairs: Vec<(Value, Value)> = pairs
                .iter()
                .map(|(k, v)| (permute(k, seed), permute(v, seed)))
                .collect();
            shuffle(&mut pairs, seed);
            Dict(pairs)
        }
        Custom { name, value } => Custom {
            name: name.clone(),
            value: Box::new(permute(value, seed)),
        },
        other => other.clone(),
    }
}

/// The one `Value` for an integer given as two's-complement big-endian bytes of any padding.
fn int_from_bytes(bytes: &[u8]) -> Value {
    let mut b = bytes;
    while b.len() > 1 && ((b[0] == 0 && b[1] & 0x80 == 0) || (b[0] == 0xff && b[1] & 0x80 != 0)) {
        b = &b[1..];
    }
    if b.len() <= 8 {
        let fill = if b.first().is_some_and(|&x| x & 0x80 != 0) {
            0xff
        } else {
            0
        };
        let mut a = [fill; 8];
        a[8 - b.len()..].copy_from_slice(b);
        Value::Int(i64::from_be_bytes(a))
    } else {
        Value::BigInt(b.to_vec())
    }
}

fn int128(n: i128) -> Value {
    int_from_bytes(&n.to_be_bytes())
}

/// An independent statement of the integer rule: major 0/1 within 64 bits, else tag 2/3.
fn reference_int_encoding(n: i128) -> Vec<u8> {
    fn head(major: u8, n: u64) -> Vec<u8> {
        let m = major << 5;
        match n {
            0..=23 => vec![m | n as u8],
            24..=0xff => vec![m | 24, n as u8],
            0x100..=0xffff => [&[m | 25][..], &(n as u16).to_be_bytes()].concat(),
            0x1_0000..=0xffff_ffff => [&[m | 26][..], &(n as u32).to_be_bytes()].concat(),
            _ => [&[m | 27][..], &n.to_be_bytes()].concat(),
        }
    }
    let (major, tag, magnitude) = if n >= 0 {
        (0, 0xc2, n as u128)
    } else {
        (1, 0xc3, (-1 - n) as u128)
    };
    if let Ok(small) = u64::try_from(magnitude) {
        return head(major, small);
    }
    let bytes = magnitude.to_be_bytes();
    let skip = bytes.iter().take_while(|&&x| x == 0).count();
    [
        vec![tag],
        head(2, (16 - skip) as u64),
        bytes[skip..].to_vec(),
    ]
    .concat()
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn decode_err(bytes: &[u8]) -> String {
    match decode(bytes) {
        Ok(v) => panic!("decoded {bytes:02x?} to {v:?}, expected an error"),
        Err(e) => e.to_string(),
    }
}

fn days_in_month(year: i32, month: u8) -> u8 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => 31,
    }
}

fn date(year: i32, month: u8, day: u8) -> Date {
    Date { year, month, day }
}

fn time(hour: u8, minute: u8, second: u8, microsecond: u32, tz: Option<TimeZone>) -> Time {
    Time {
        hour,
        minute,
        second,
        microsecond,
        tz,
        fold: 0,
    }
}

// ---------------------------------------------------------------------------------------------
// Strategies: values within the ranges Python can construct.

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-c]{0,3}", // small alphabet, so sets and dict keys collide and sort on content
        vec(any::<char>(), 0..12).prop_map(|c| c.into_iter().collect()),
    ]
}

fn arb_float() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        any::<u64>().prop_map(f64::from_bits), // every bit pattern, NaN payloads included
        Just(0.0),
        Just(-0.0),
        Just(1.0),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::NAN),
    ]
}

fn arb_int() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::Int),
        (-30i64..30).prop_map(Value::Int),
        vec(any::<u8>(), 1..=24).prop_map(|b| int_from_bytes(&b)),
    ]
}

fn arb_date() -> impl Strategy<Value = Date> {
    (1i32..=9999, 1u8..=12)
        .prop_flat_map(|(y, m)| (Just(y), Just(m), 1..=days_in_month(y, m)))
        .prop_map(|(year, month, day)| Date { year, month, day })
}

fn arb_tz() -> impl Strategy<Value = Option<TimeZone>> {
    prop_oneof![
        Just(None),
        (-86_399_999_999i64..=86_399_999_999, option::of(arb_text()))
            .prop_map(|(offset_us, name)| Some(TimeZone::Fixed { offset_us, name })),
        (-24i64..=24).prop_map(|h| Some(TimeZone::Fixed {
            offset_us: h * 3_600_000_000 / 2,
            name: None
        })),
        "[A-Za-z_]{1,8}(/[A-Za-z_]{1,8})?".prop_map(|k| Some(TimeZone::Zone(k))),
    ]
}

fn arb_time() -> impl Strategy<Value = Time> {
    (
        0u8..24,
        0u8..60,
        0u8..60,
        0u32..1_000_000,
        arb_tz(),
        0u8..=1,
    )
        .prop_map(|(hour, minute, second, microsecond, tz, fold)| Time {
            hour,
            minute,
            second,
            microsecond,
            tz,
            fold,
        })
}

fn arb_decimal() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "NaN",
            "-NaN",
            "sNaN",
            "-sNaN",
            "NaN123",
            "Infinity",
            "-Infinity",
            "0",
            "-0",
            "0E-7",
            "1E+3",
            "1.10",
            "-1E-1999999999999999997",
            "9E+999999999999999999",
        ])
        .prop_map(String::from),
        "-?[0-9]{1,30}(\\.[0-9]{1,12})?(E[+-][0-9]{1,6})?",
    ]
}

fn arb_path() -> impl Strategy<Value = PathValue> {
    (
        prop::sample::select(vec![
            PathKind::Posix,
            PathKind::Windows,
            PathKind::PurePosix,
            PathKind::PureWindows,
        ]),
        arb_text(),
    )
        .prop_map(|(kind, path)| PathValue { kind, path })
}

fn arb_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::None),
        any::<bool>().prop_map(Value::Bool),
        arb_int(),
        arb_float().prop_map(Value::Float),
        arb_text().prop_map(Value::Str),
        vec(any::<u8>(), 0..24).prop_map(Value::Bytes),
        arb_date().prop_map(Value::Date),
        arb_time().prop_map(Value::Time),
        (arb_date(), arb_time()).prop_map(|(date, time)| Value::DateTime(DateTime { date, time })),
        (-999_999_999i32..=999_999_999, 0i32..86_400, 0i32..1_000_000).prop_map(
            |(days, seconds, microseconds)| Value::TimeDelta(TimeDelta {
                days,
                seconds,
                microseconds
            })
        ),
        arb_decimal().prop_map(Value::Decimal),
        any::<[u8; 16]>().prop_map(Value::Uuid),
        arb_path().prop_map(Value::Path),
    ]
}

fn arb_value() -> impl Strategy<Value = Value> {
    arb_leaf().prop_recursive(5, 96, 6, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::List),
            vec(inner.clone(), 0..6).prop_map(Value::Tuple),
            vec(inner.clone(), 0..6).prop_map(Value::Set),
            vec(inner.clone(), 0..6).prop_map(Value::FrozenSet),
            vec((inner.clone(), inner.clone()), 0..6).prop_map(Value::Dict),
            ("[a-z.]{1,12}", inner).prop_map(|(name, value)| Value::Custom {
                name,
                value: Box::new(value)
            }),
        ]
    })
}

/// Bytes rich in heads that start long or nested items, so random input gets past the first byte.
fn arb_cbor_ish() -> impl Strategy<Value = Vec<u8>> {
    let interesting = prop::sample::select(vec![
        0x00, 0x17, 0x18, 0x1b, 0x20, 0x3b, 0x40, 0x41, 0x5b, 0x60, 0x61, 0x7b, 0x80, 0x81, 0x83,
        0x9b, 0x9f, 0xa0, 0xa1, 0xbb, 0xc2, 0xc3, 0xd8, 0x25, 0xd9, 0x01, 0x02, 0xe5, 0xb0, 0xb1,
        0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xf4, 0xf5, 0xf6, 0xf7, 0xf9, 0xfa, 0xfb,
        0xff,
    ]);
    vec(prop_oneof![any::<u8>(), interesting], 0..128)
}

// ---------------------------------------------------------------------------------------------
// Properties

proptest! {
    // 512 cases by default; PROPTEST_CASES=100000 for a longer hunt.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    #[test]
    fn encode_round_trips(v in arb_value()) {
        let bytes = encode(&v);
        let back = decode(&bytes).map_err(|e| TestCaseError::fail(format!("{e}: {bytes:02x?}")))?;
        prop_assert!(same(&back, &v), "{v:?}\n -> {back:?}");
    }

    #[test]
    fn encode_key_round_trips_up_to_order(v in arb_value()) {
        let bytes = encode_key(&v);
        let back = decode(&bytes).map_err(|e| TestCaseError::fail(format!("{e}: {bytes:02x?}")))?;
        prop_assert!(same(&key_order(&back), &key_order(&v)), "{v:?}\n -> {back:?}");
        prop_assert_eq!(encode_key(&back), bytes.clone(), "not idempotent");
        // The two encoders differ in order only.
        prop_assert_eq!(encode(&v).len(), bytes.len());
        prop_assert_eq!(encode(&key_order(&v)), bytes);
    }

    #[test]
    fn encode_key_ignores_set_and_dict_order(v in arb_value(), seed in 1u64..) {
        let mut seed = seed;
        prop_assert_eq!(encode_key(&permute(&v, &mut seed)), encode_key(&v));
    }

    #[test]
    fn encode_key_ignores_shuffled_elements(
        (items, shuffled) in vec(arb_value(), 0..8).prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle()))
    ) {
        prop_assert_eq!(encode_key(&Value::Set(shuffled.clone())), encode_key(&Value::Set(items.clone())));
        prop_assert_eq!(
            encode_key(&Value::FrozenSet(shuffled.clone())),
            encode_key(&Value::FrozenSet(items.clone()))
        );
        let pairs = |v: &[Value]| Value::Dict(v.iter().map(|k| (k.clone(), Value::Int(0))).collect());
        prop_assert_eq!(encode_key(&pairs(&shuffled)), encode_key(&pairs(&items)));
    }

    #[test]
    fn integers_have_one_form_and_one_encoding(n in any::<i128>(), pad in 0usize..4) {
        let v = int128(n);
        let bytes = encode(&v);
        prop_assert_eq!(&bytes, &reference_int_encoding(n));
        prop_assert_eq!(decode(&bytes).unwrap(), v);
        // Redundant sign bytes change nothing.
        let sign = if n < 0 { 0xff } else { 0x00 };
        let padded = [vec![sign; pad], n.to_be_bytes().to_vec()].concat();
        prop_assert_eq!(encode(&Value::BigInt(padded)), bytes);
    }

    #[test]
    fn wide_integers_round_trip(b in vec(any::<u8>(), 1..80)) {
        let v = int_from_bytes(&b);
        prop_assert_eq!(decode(&encode(&v)).unwrap(), v);
    }

    #[test]
    fn random_bytes_never_panic(bytes in vec(any::<u8>(), 0..256)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn cbor_like_bytes_never_panic(bytes in arb_cbor_ish()) {
        if let Ok(v) = decode(&bytes) {
            // Whatever is accepted is valid: it encodes and reads back as itself.
            prop_assert!(same(&decode(&encode(&v)).unwrap(), &v));
        }
    }

    #[test]
    fn mutated_encodings_never_panic(
        v in arb_value(),
        edits in vec((any::<prop::sample::Index>(), 1u8.., 0u8..3), 1..4),
    ) {
        let mut bytes = encode(&v);
        for (at, byte, op) in edits {
            match op {
                0 if !bytes.is_empty() => {
                    let i = at.index(bytes.len());
                    bytes[i] ^= byte;
                }
                1 => bytes.truncate(at.index(bytes.len() + 1)),
                _ => bytes.insert(at.index(bytes.len() + 1), byte),
            }
        }
        if let Ok(v) = decode(&bytes) {
            prop_assert!(same(&decode(&encode(&v)).unwrap(), &v));
        }
    }

    #[test]
    fn truncations_are_errors(v in arb_value(), cut in any::<prop::sample::Index>()) {
        let bytes = encode(&v);
        let cut = cut.index(bytes.len());
        prop_assert!(decode(&bytes[..cut]).is_err());
    }
}

// ---------------------------------------------------------------------------------------------
// Known encodings

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

// ---------------------------------------------------------------------------------------------
// Refusals

#[test]
fn nesting_depth_is_limited() {
    let nested = |n: usize| [vec![0x81; n], vec![0x00]].concat();
    assert!(decode(&nested(MAX_DEPTH)).is_ok());
    let e = decode_err(&nested(MAX_DEPTH + 1));
    assert!(e.contains("nesting deeper than 256 at byte 256"), "{e}");
    let e = decode_err(&nested(100_000));
    assert!(e.contains("nesting deeper than 256"), "{e}");

    // Maps, tagged containers and custom values count as levels too.
    for open in [
        "a1 00",
        "d9e5b0 81",
        "d90102 81",
        "d9e5b1 81",
        "d9e5b8 82 6161",
    ] {
        let bytes: Vec<u8> = (0..=MAX_DEPTH)
            .flat_map(|_| hex(open))
            .chain([0x00])
            .collect();
        assert!(
            decode_err(&bytes).contains("nesting deeper than 256"),
            "{open}"
        );
    }

    // A writer that nests deeper produces bytes no reader accepts.
    let mut deep = Value::None;
    for _ in 0..=MAX_DEPTH {
        deep = Value::Tuple(vec![deep]);
    }
    assert!(decode(&encode(&deep)).is_err());
}

#[test]
fn tags_do_not_nest_by_themselves() {
    // Each tag reads its content by shape, so a chain of tags is one error, not deep recursion.
    let e = decode_err(&vec![0xc2; 1_000_000]);
    assert!(
        e.contains("bignum: expected a byte string at byte 1"),
        "{e}"
    );
    let e = decode_err(&[0xd9, 0xe5, 0xb0].repeat(100_000));
    assert!(e.contains("tuple: expected an array at byte 3"), "{e}");
}

#[test]
fn huge_declared_lengths_are_rejected_fast() {
    let start = Instant::now();
    for head in [
        "9bffffffffffffffff",           // array
        "bbffffffffffffffff",           // map
        "5bffffffffffffffff",           // byte string
        "7bffffffffffffffff",           // text string
        "9b0000010000000000",           // array of 2**40: preallocating it would abort the process
        "bb0000010000000000",           // map of 2**40
        "c25bffffffffffffffff",         // bignum
        "d9e5b0 9bffffffffffffffff",    // tuple
        "d9e5b8 82 7bffffffffffffffff", // custom type name
    ] {
        assert!(decode(&hex(head)).is_err(), "{head}");
        assert!(
            decode(&[hex(head), vec![0; 1000]].concat()).is_err(),
            "{head}"
        );
    }
    // A long array of valid items that ends early.
    let mut bytes = hex("9a ffffffff");
    bytes.extend(std::iter::repeat_n(0x00, 1 << 20));
    let e = decode_err(&bytes);
    assert!(e.contains("unexpected end of input at byte 1048581"), "{e}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );

    let e = decode_err(&hex("5a 00010000 0102"));
    assert!(
        e.contains("byte string of 65536 bytes runs past the end of the input (2 left) at byte 0"),
        "{e}"
    );
}

#[test]
fn trailing_bytes_are_rejected() {
    let e = decode_err(&hex("01 00"));
    assert_eq!(e, "trailing bytes after the value at byte 1");
    let mut bytes = encode(&Value::List(vec![Value::Str("x".into())]));
    bytes.push(0xf6);
    assert!(decode_err(&bytes).contains("trailing bytes"));
    assert!(decode_err(&[]).contains("unexpected end of input at byte 0"));
}

#[test]
fn malformed_items_are_rejected_with_their_offset() {
    let cases: &[(&str, &str)] = &[
        ("9f ff", "indefinite-length item (not supported) at byte 0"),
        (
            "82 01 5f 41 00 ff",
            "indefinite-length item (not supported) at byte 2",
        ),
        ("7f ff", "indefinite-length item (not supported) at byte 0"),
        ("bf ff", "indefinite-length item (not supported) at byte 0"),
        ("ff", "unexpected break (0xff) at byte 0"),
        ("81 ff", "unexpected break (0xff) at byte 1"),
        ("1f", "invalid additional information 31 at byte 0"),
        ("1c", "reserved additional information 28 at byte 0"),
        (
            "19 01",
            "item head of 2 bytes runs past the end of the input (1 left) at byte 0",
        ),
        ("63 61 ff 62", "invalid UTF-8 in a text string at byte 2"),
        (
            "62 c3",
            "text string of 2 bytes runs past the end of the input (1 left) at byte 0",
        ),
        ("f7", "undefined (not supported) at byte 0"),
        ("f0", "unsupported simple value 16 at byte 0"),
        ("f8 20", "unsupported simple value 32 at byte 0"),
        ("d9 1234 00", "unknown tag 4660 at byte 0"),
        (
            "82 00 db 0000000100000000 00",
            "unknown tag 4294967296 at byte 2",
        ),
        ("c1 00", "unknown tag 1 at byte 0"),
        (
            "d9e5b9 63 555443",
            "time zone outside a time or datetime at byte 0",
        ),
        (
            "d825 4f 000102030405060708090a0b0c0d0e",
            "uuid of 15 bytes, expected 16 at byte 2",
        ),
        ("d825 00", "uuid: expected a byte string at byte 2"),
        ("d9e5b0 a0", "tuple: expected an array at byte 3"),
        ("d90102 a0", "set: expected an array at byte 3"),
        ("d9e5b6 00", "decimal: expected a text string at byte 3"),
        (
            "d9e5b3 82 01 01",
            "date: expected an array of 3 items at byte 3",
        ),
        (
            "d9e5b7 82 04 60",
            "path kind 4 out of range 0..=3 at byte 4",
        ),
        (
            "d9e5b7 82 61 78 60",
            "path kind: expected an integer at byte 4",
        ),
        (
            "d9e5b8 82 00 00",
            "custom value: expected a type name at byte 4",
        ),
        (
            "d9e5b4 86 00 00 00 00 00 00",
            "time zone: expected null or tag 58809 at byte 9",
        ),
        (
            "d9e5b4 86 00 00 00 00 00 d9e5b9 00",
            "time zone: expected a zone key or [offset, name] at byte 12",
        ),
        (
            "d9e5b4 86 00 00 00 00 00 d9e5b9 82 00 00",
            "time zone name: expected text or null at byte 14",
        ),
        (
            "d9e5b3 83 19 07e8 02 3b 7fffffffffffffff",
            "day -9223372036854775808 out of range 1..=31 at byte 8",
        ),
        (
            "d9e5b3 83 01 01 1b ffffffffffffffff",
            "day 18446744073709551615 out of range 1..=31 at byte 6",
        ),
    ];
    for (bytes, expected) in cases {
        assert_eq!(decode_err(&hex(bytes)), *expected, "{bytes}");
    }
}

#[test]
fn out_of_range_fields_are_rejected() {
    let dt = |d: Date, t: Time| Value::DateTime(DateTime { date: d, time: t });
    let midnight = time(0, 0, 0, 0, None);
    let bad: Vec<(Value, &str)> = vec![
        (Value::Date(date(0, 1, 1)), "year 0 out of range 1..=9999"),
        (Value::Date(date(10_000, 1, 1)), "year 10000 out of range"),
        (Value::Date(date(-5, 1, 1)), "year -5 out of range"),
        (Value::Date(date(2024, 0, 1)), "month 0 out of range 1..=12"),
        (Value::Date(date(2024, 13, 1)), "month 13 out of range"),
        (Value::Date(date(2024, 1, 0)), "day 0 out of range 1..=31"),
        (Value::Date(date(2024, 1, 32)), "day 32 out of range"),
        (
            Value::Date(date(2023, 2, 29)),
            "day 29 out of range for 2023-02",
        ),
        (
            Value::Date(date(1900, 2, 29)),
            "day 29 out of range for 1900-02",
        ),
        (
            Value::Date(date(2024, 4, 31)),
            "day 31 out of range for 2024-04",
        ),
        (
            Value::Time(time(24, 0, 0, 0, None)),
            "hour 24 out of range 0..=23",
        ),
        (
            Value::Time(time(0, 60, 0, 0, None)),
            "minute 60 out of range 0..=59",
        ),
        (
            Value::Time(time(0, 0, 60, 0, None)),
            "second 60 out of range 0..=59",
        ),
        (
            Value::Time(time(0, 0, 0, 1_000_000, None)),
            "microsecond 1000000 out of range",
        ),
        (
            Value::Time(Time {
                fold: 2,
                ..midnight.clone()
            }),
            "fold 2 out of range 0..=1",
        ),
        (
            dt(date(2024, 2, 30), midnight.clone()),
            "day 30 out of range for 2024-02",
        ),
        (
            dt(
                date(2024, 2, 1),
                time(
                    0,
                    0,
                    0,
                    0,
                    Some(TimeZone::Fixed {
                        offset_us: 86_400_000_000,
                        name: None,
                    }),
                ),
            ),
            "time zone offset 86400000000 out of range",
        ),
        (
            Value::Time(time(
                0,
                0,
                0,
                0,
                Some(TimeZone::Fixed {
                    offset_us: -86_400_000_000,
                    name: None,
                }),
            )),
            "time zone offset -86400000000 out of range",
        ),
        (
            Value::TimeDelta(TimeDelta {
                days: 1_000_000_000,
                seconds: 0,
                microseconds: 0,
            }),
            "timedelta days 1000000000 out of range",
        ),
        (
            Value::TimeDelta(TimeDelta {
                days: -1_000_000_000,
                seconds: 0,
                microseconds: 0,
            }),
            "timedelta days -1000000000 out of range",
        ),
        (
            Value::TimeDelta(TimeDelta {
                days: 0,
                seconds: 86_400,
                microseconds: 0,
            }),
            "timedelta seconds 86400 out of range 0..=86399",
        ),
        (
            Value::TimeDelta(TimeDelta {
                days: 0,
                seconds: -1,
                microseconds: 0,
            }),
            "timedelta seconds -1 out of range",
        ),
        (
            Value::TimeDelta(TimeDelta {
                days: 0,
                seconds: 0,
                microseconds: 1_000_000,
            }),
            "timedelta microseconds 1000000 out of range",
        ),
    ];
    for (value, expected) in bad {
        let e = decode_err(&encode(&value));
        assert!(e.contains(expected), "{value:?}: {e}");
        assert!(e.contains(" at byte "), "{e}");
    }
    let good = [
        Value::Date(date(2024, 2, 29)),
        Value::Date(date(2000, 2, 29)),
        Value::Date(date(9999, 12, 31)),
        Value::Time(time(
            23,
            59,
            59,
            999_999,
            Some(TimeZone::Fixed {
                offset_us: 86_399_999_999,
                name: None,
            }),
        )),
        Value::Time(time(
            0,
            0,
            0,
            0,
            Some(TimeZone::Fixed {
                offset_us: -86_399_999_999,
                name: Some(String::new()),
            }),
        )),
        Value::TimeDelta(TimeDelta {
            days: -999_999_999,
            seconds: 0,
            microseconds: 0,
        }),
        Value::TimeDelta(TimeDelta {
            days: 999_999_999,
            seconds: 86_399,
            microseconds: 999_999,
        }),
    ];
    for value in good {
        assert_eq!(decode(&encode(&value)).unwrap(), value);
    }
}

#[test]
fn decimals_are_checked_against_python_rules() {
    let good = [
        "0",
        "-0",
        "+1",
        "1.10",
        ".5",
        "5.",
        "1E+3",
        "1e-3",
        "-1.5E+10",
        "NaN",
        "-nan",
        "NaN123",
        "sNaN",
        "-sNaN7",
        "Infinity",
        "-Infinity",
        "inf",
        "-INF",
        "0E-7",
        "1E+999999999999999999",
        "0E+999999999999999999",
        "0.001E+1000000000000000001",
        "1E-1999999999999999997",
        "1E+00000000000000000000000000001",
        "0000000000000000000000000123E+999999999999999997",
    ];
    for s in good {
        let v = Value::Decimal(s.into());
        assert_eq!(decode(&encode(&v)).unwrap(), v, "{s}");
    }
    let bad = [
        "",
        "-",
        "+",
        ".",
        "e5",
        "1e",
        "1e+",
        "1.2.3",
        " 1",
        "1 ",
        "1_000",
        "Infinit",
        "Infinityy",
        "NaNx",
        "NaN-1",
        "sNaN.1",
        "0x10",
        "１",
        "1E+1000000000000000000",
        "10E+999999999999999999",
        "0E+1000000000000000000",
        "1E-1999999999999999998",
        "0.1E-1999999999999999997",
        "1E+99999999999999999999999999999999999999999999",
    ];
    for s in bad {
        let e = decode_err(&encode(&Value::Decimal(s.into())));
        assert_eq!(
            e, "decimal: not a number Python's Decimal accepts at byte 3",
            "{s:?}"
        );
    }
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
