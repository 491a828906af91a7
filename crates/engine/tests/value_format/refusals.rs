//! Refusals: nesting depth, nested tags, huge declared lengths, trailing bytes, malformed items,
//! out-of-range fields and decimals Python would not accept, each with its error message.

use crate::support::{date, decode_err, hex, time};
use diskcache_oxide_engine::value::{
    decode, encode, Date, DateTime, Time, TimeDelta, TimeZone, Value, MAX_DEPTH,
};
use std::time::{Duration, Instant};

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
