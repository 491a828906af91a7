//! Proptest strategies: values within the ranges Python can construct, and CBOR-like bytes.

use crate::support::{days_in_month, int_from_bytes};
use diskcache_oxide_engine::value::{
    Date, DateTime, PathKind, PathValue, Time, TimeDelta, TimeZone, Value,
};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

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

pub(crate) fn arb_value() -> impl Strategy<Value = Value> {
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
pub(crate) fn arb_cbor_ish() -> impl Strategy<Value = Vec<u8>> {
    let interesting = prop::sample::select(vec![
        0x00, 0x17, 0x18, 0x1b, 0x20, 0x3b, 0x40, 0x41, 0x5b, 0x60, 0x61, 0x7b, 0x80, 0x81, 0x83,
        0x9b, 0x9f, 0xa0, 0xa1, 0xbb, 0xc2, 0xc3, 0xd8, 0x25, 0xd9, 0x01, 0x02, 0xe5, 0xb0, 0xb1,
        0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xf4, 0xf5, 0xf6, 0xf7, 0xf9, 0xfa, 0xfb,
        0xff,
    ]);
    vec(prop_oneof![any::<u8>(), interesting], 0..128)
}
