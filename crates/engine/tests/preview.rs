//! Previews (value::preview, D-046): every kind, every type of the safe format, the width, a
//! prefix cut anywhere, damaged bytes; and the cache's and the job list's previews, which read
//! only a prefix of a value file.

use diskcache_oxide_engine::value::{
    encode, preview, Date, DateTime, PathKind, PathValue, Time, TimeDelta, TimeZone, Value,
    PREVIEW_MAX_WIDTH,
};
use diskcache_oxide_engine::{
    Cache, JobOptions, Key, Kind, ListState, ListValues, OpenOptions, Scalar, SettingValue,
    ValueRef, WriteOptions,
};
use proptest::prelude::*;

fn encoded(v: &Value, width: usize) -> String {
    let bytes = encode(v);
    preview(Kind::Encoded, &bytes, bytes.len() as u64, width)
}

fn s(text: &str) -> Value {
    Value::Str(text.into())
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

fn date(year: i32, month: u8, day: u8) -> Date {
    Date { year, month, day }
}

#[test]
fn each_plain_kind() {
    let int = 42i64.to_le_bytes();
    assert_eq!(preview(Kind::Int, &int, 8, 60), "42");
    let neg = (-7i64).to_le_bytes();
    assert_eq!(preview(Kind::Int, &neg, 8, 60), "-7");
    let float = 1.5f64.to_le_bytes();
    assert_eq!(preview(Kind::Float, &float, 8, 60), "1.5");
    assert_eq!(preview(Kind::Str, b"hello", 5, 60), "'hello'");
    assert_eq!(preview(Kind::Str, "it's".as_bytes(), 4, 60), "\"it's\"");
    assert_eq!(
        preview(Kind::Bytes, b"\x00\x01ab", 4, 60),
        "b'\\x00\\x01ab'"
    );
    assert_eq!(
        preview(Kind::Pickled, b"\x80\x05\x95", 1234, 60),
        "<pickle, 1234 bytes>"
    );
}

#[test]
fn a_long_value_is_cut_inside_its_quotes_and_brackets() {
    // The payload goes on past the prefix: the text says so, and closes what it opened.
    assert_eq!(preview(Kind::Str, b"hello", 5_000_000, 60), "'hello…'");
    assert_eq!(preview(Kind::Bytes, b"\x00", 5_000_000, 60), "b'\\x00…'");
    let dict = Value::Dict(vec![(s("a"), Value::Int(1)), (s("b"), s(&"x".repeat(100)))]);
    let text = encoded(&dict, 20);
    assert_eq!(text, "{'a': 1, 'b': 'xx…'}");
    assert_eq!(text.chars().count(), 20);
    let bytes = encode(&dict);
    assert_eq!(
        preview(Kind::Encoded, &bytes[..4], bytes.len() as u64, 60),
        "{'a': 1, …}"
    );
    // Exactly the width: not cut.
    assert_eq!(preview(Kind::Str, b"abc", 3, 5), "'abc'");
    assert_eq!(preview(Kind::Str, b"abcd", 4, 5), "'ab…'");
}

#[test]
fn every_type_of_the_safe_format() {
    let utc = Some(TimeZone::Fixed {
        offset_us: 0,
        name: None,
    });
    let est = Some(TimeZone::Fixed {
        offset_us: -5 * 3600 * 1_000_000,
        name: Some("EST".into()),
    });
    let odd = Some(TimeZone::Fixed {
        offset_us: 3600 * 1_000_000 + 5,
        name: None,
    });
    let paris = Some(TimeZone::Zone("Europe/Paris".into()));
    let cases: Vec<(Value, &str)> = vec![
        (Value::None, "None"),
        (Value::Bool(true), "True"),
        (Value::Bool(false), "False"),
        (Value::Int(-12), "-12"),
        (Value::Int(i64::MAX), "9223372036854775807"),
        (
            Value::BigInt(vec![0x01, 0, 0, 0, 0, 0, 0, 0, 0]),
            "18446744073709551616",
        ),
        (
            Value::BigInt(vec![0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            "-18446744073709551617",
        ),
        (Value::Float(1e16), "1e+16"),
        (Value::Float(-0.0), "-0.0"),
        (Value::Float(2.5e-7), "2.5e-07"),
        (s("say \"hi\""), "'say \"hi\"'"),
        (s("both ' \""), "'both \\' \"'"),
        (
            s("tab\tnl\ncr\r\\ \x00 \x7f \u{85} \u{a0} \u{200b} \u{202e} é 😀"),
            "'tab\\tnl\\ncr\\r\\\\ \\x00 \\x7f \\x85 \\xa0 \\u200b \\u202e é 😀'",
        ),
        (Value::Bytes(b"it's".to_vec()), "b\"it's\""),
        (Value::List(vec![]), "[]"),
        (Value::List(vec![Value::Int(1), s("a")]), "[1, 'a']"),
        (Value::Tuple(vec![]), "()"),
        (Value::Tuple(vec![Value::Int(1)]), "(1,)"),
        (Value::Tuple(vec![Value::Int(1), Value::Int(2)]), "(1, 2)"),
        (Value::Dict(vec![]), "{}"),
        (
            Value::Dict(vec![(Value::Int(1), Value::List(vec![Value::None]))]),
            "{1: [None]}",
        ),
        (Value::Set(vec![]), "set()"),
        (Value::Set(vec![Value::Int(1)]), "{1}"),
        (Value::FrozenSet(vec![]), "frozenset()"),
        (Value::FrozenSet(vec![Value::Int(1)]), "frozenset({1})"),
        (
            Value::DateTime(DateTime {
                date: date(2025, 1, 2),
                time: time(3, 4, 0, 0, None),
            }),
            "datetime.datetime(2025, 1, 2, 3, 4)",
        ),
        (
            Value::DateTime(DateTime {
                date: date(2025, 1, 2),
                time: time(3, 4, 0, 7, None),
            }),
            "datetime.datetime(2025, 1, 2, 3, 4, 0, 7)",
        ),
        (
            Value::DateTime(DateTime {
                date: date(2025, 1, 2),
                time: time(3, 4, 5, 6, utc.clone()),
            }),
            "datetime.datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc)",
        ),
        (
            Value::DateTime(DateTime {
                date: date(2025, 1, 2),
                time: Time {
                    fold: 1,
                    ..time(3, 4, 0, 0, None)
                },
            }),
            "datetime.datetime(2025, 1, 2, 3, 4, fold=1)",
        ),
        (
            Value::DateTime(DateTime {
                date: date(2025, 1, 2),
                time: time(0, 0, 0, 0, est),
            }),
            "datetime.datetime(2025, 1, 2, 0, 0, tzinfo=datetime.timezone(\
             datetime.timedelta(days=-1, seconds=68400), 'EST'))",
        ),
        (
            Value::DateTime(DateTime {
                date: date(2025, 1, 2),
                time: time(0, 0, 0, 0, odd),
            }),
            "datetime.datetime(2025, 1, 2, 0, 0, tzinfo=datetime.timezone(\
             datetime.timedelta(seconds=3600, microseconds=5)))",
        ),
        (
            Value::DateTime(DateTime {
                date: date(2025, 1, 2),
                time: time(0, 0, 0, 0, paris),
            }),
            "datetime.datetime(2025, 1, 2, 0, 0, tzinfo=zoneinfo.ZoneInfo(key='Europe/Paris'))",
        ),
        (Value::Date(date(2025, 1, 2)), "datetime.date(2025, 1, 2)"),
        (Value::Time(time(3, 4, 0, 0, None)), "datetime.time(3, 4)"),
        (
            Value::Time(time(0, 0, 0, 1, utc)),
            "datetime.time(0, 0, 0, 1, tzinfo=datetime.timezone.utc)",
        ),
        (
            Value::TimeDelta(TimeDelta {
                days: 0,
                seconds: 0,
                microseconds: 0,
            }),
            "datetime.timedelta(0)",
        ),
        (
            Value::TimeDelta(TimeDelta {
                days: -1,
                seconds: 0,
                microseconds: 0,
            }),
            "datetime.timedelta(days=-1)",
        ),
        (
            Value::TimeDelta(TimeDelta {
                days: 2,
                seconds: 1,
                microseconds: 3,
            }),
            "datetime.timedelta(days=2, seconds=1, microseconds=3)",
        ),
        (Value::Decimal("1.10".into()), "Decimal('1.10')"),
        (
            Value::Uuid(0x12345678123456781234567812345678u128.to_be_bytes()),
            "UUID('12345678-1234-5678-1234-567812345678')",
        ),
        (
            Value::Path(PathValue {
                kind: PathKind::Posix,
                path: "/a".into(),
            }),
            "PosixPath('/a')",
        ),
        (
            Value::Path(PathValue {
                kind: PathKind::PureWindows,
                path: "c:/x".into(),
            }),
            "PureWindowsPath('c:/x')",
        ),
        (
            Value::Custom {
                name: "Point".into(),
                value: Box::new(Value::Tuple(vec![Value::Int(1), Value::Int(2)])),
            },
            "<Point: registered type, (1, 2)>",
        ),
    ];
    for (value, text) in cases {
        assert_eq!(encoded(&value, PREVIEW_MAX_WIDTH), text, "{value:?}");
    }
}

#[test]
fn the_width_is_kept_whatever_is_asked() {
    let long = Value::List((0..1000).map(Value::Int).collect());
    for width in [
        0,
        1,
        2,
        3,
        5,
        10,
        60,
        PREVIEW_MAX_WIDTH,
        PREVIEW_MAX_WIDTH + 1,
        usize::MAX,
    ] {
        let text = encoded(&long, width);
        let n = text.chars().count();
        assert!(n <= width.clamp(1, PREVIEW_MAX_WIDTH), "{width}: {n}");
        assert!(
            text.ends_with('…') || text.ends_with("…]"),
            "{width}: {text}"
        );
    }
    assert_eq!(encoded(&long, 1), "…");
    assert_eq!(encoded(&long, 10), "[0, 1, 2…]");
}

#[test]
fn a_prefix_cut_anywhere_renders_what_it_has() {
    let v = Value::Dict(vec![
        (s("name"), s("Ada")),
        (s("tags"), Value::Set(vec![s("x"), s("y")])),
        (
            s("when"),
            Value::Date(Date {
                year: 1815,
                month: 12,
                day: 10,
            }),
        ),
        (s("n"), Value::BigInt(vec![0x01; 40])),
        (s("raw"), Value::Bytes(vec![0; 50])),
    ]);
    let bytes = encode(&v);
    let full = encoded(&v, PREVIEW_MAX_WIDTH);
    assert!(!full.contains('…') && !full.contains("damaged"), "{full}");
    for k in 0..bytes.len() {
        let text = preview(
            Kind::Encoded,
            &bytes[..k],
            bytes.len() as u64,
            PREVIEW_MAX_WIDTH,
        );
        assert!(text.contains('…'), "cut at {k}: {text}");
        assert!(!text.contains("damaged"), "cut at {k}: {text}");
        // What it shows is what the whole value starts with, up to the cut.
        let shown = text.split('…').next().unwrap();
        assert!(full.starts_with(shown), "cut at {k}: {text} / {full}");
    }
    // A str cut inside a character.
    let e = "é".repeat(10);
    assert_eq!(preview(Kind::Str, &e.as_bytes()[..5], 20, 60), "'éé…'");
}

#[test]
fn damaged_bytes_are_named() {
    let whole = |b: &[u8]| preview(Kind::Encoded, b, b.len() as u64, 80);
    assert_eq!(
        whole(&[0xff]),
        "<damaged: unreadable item head 0xff at byte 0>"
    );
    assert_eq!(
        whole(&[0xd9, 0xff, 0xff, 0x00]),
        "<damaged: unknown tag 65535 at byte 0>"
    );
    assert_eq!(
        whole(&[0x82, 0x01]),
        "[1, <damaged: unexpected end of the value at byte 2>"
    );
    assert_eq!(
        whole(&[0x01, 0x02]),
        "1<damaged: trailing bytes after the value at byte 1>"
    );
    assert_eq!(
        whole(&[0x62, b'a', 0xff]),
        "<damaged: invalid UTF-8 at byte 2>"
    );
    assert_eq!(
        preview(Kind::Str, b"ab\xffcd", 5, 60),
        "<damaged: invalid UTF-8 at byte 2>"
    );
    assert_eq!(
        preview(Kind::Int, b"abc", 3, 60),
        "<damaged: a number of 3 bytes, not 8>"
    );
    // Nesting deeper than the decoder allows.
    let deep = [0x81u8; 300];
    let text = preview(Kind::Encoded, &deep, 300, PREVIEW_MAX_WIDTH);
    assert!(
        text.ends_with("<damaged: nesting deeper than 256 at byte 256>"),
        "{text}"
    );
    // The damage keeps its place when the text is cut to the width (damage past the width
    // is not looked for: the walk stops there).
    let mut long = vec![0x98, 100];
    long.extend(std::iter::repeat_n(0x01, 12));
    long.push(0xff);
    let text = preview(Kind::Encoded, &long, long.len() as u64, 60);
    assert_eq!(
        text,
        "[1, 1, 1, 1,…<damaged: unreadable item head 0xff at byte 14>"
    );
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::None),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        any::<f64>().prop_map(Value::Float),
        ".{0,20}".prop_map(Value::Str),
        prop::collection::vec(any::<u8>(), 0..20).prop_map(Value::Bytes),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::List),
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Tuple),
            prop::collection::vec((inner.clone(), inner.clone()), 0..8).prop_map(Value::Dict),
            ("[A-Za-z]{1,8}", inner).prop_map(|(name, v)| Value::Custom {
                name,
                value: Box::new(v)
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_give_a_text_within_the_width(
        bytes in prop::collection::vec(any::<u8>(), 0..200),
        total in 0u64..400,
        kind in 1i64..=6,
        width in 0usize..120,
    ) {
        let kind = [Kind::Int, Kind::Float, Kind::Str, Kind::Bytes, Kind::Encoded, Kind::Pickled]
            [(kind - 1) as usize];
        let text = preview(kind, &bytes, total, width);
        prop_assert!(text.chars().count() <= width.clamp(1, PREVIEW_MAX_WIDTH));
    }

    #[test]
    fn a_whole_value_is_never_damaged(v in arb_value(), width in 1usize..200) {
        let text = encoded(&v, width);
        prop_assert!(!text.contains("<damaged"), "{}", text);
        prop_assert!(text.chars().count() <= width);
    }

    #[test]
    fn a_cut_value_is_never_damaged(v in arb_value(), cut in 0.0f64..1.0) {
        let bytes = encode(&v);
        let k = (bytes.len() as f64 * cut) as usize;
        let text = preview(Kind::Encoded, &bytes[..k], bytes.len() as u64, 200);
        prop_assert!(!text.contains("<damaged"), "{}", text);
    }
}

// ---- previews of what a cache holds ----------------------------------------------------------

fn open_with_files(min_file: i64) -> (tempfile::TempDir, Cache) {
    let dir = tempfile::tempdir().unwrap();
    let options = OpenOptions {
        settings: vec![("disk_min_file_size".into(), SettingValue::Int(min_file))],
        ..OpenOptions::default()
    };
    let cache = Cache::open(dir.path(), options).unwrap();
    (dir, cache)
}

fn key(k: &str) -> Key {
    Key::Native(Scalar::Str(k.into()))
}

fn value_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for sub in std::fs::read_dir(dir.join("values")).unwrap() {
        for f in std::fs::read_dir(sub.unwrap().path()).unwrap() {
            found.push(f.unwrap().path());
        }
    }
    found
}

#[test]
fn a_cache_entry_previews_from_a_prefix_of_its_file() {
    let (dir, cache) = open_with_files(1024);
    let big = vec![7u8; 5_000_000];
    cache
        .set(&key("big"), ValueRef::Bytes(&big), &WriteOptions::default())
        .unwrap();
    cache
        .set(&key("small"), ValueRef::Str("hi"), &WriteOptions::default())
        .unwrap();
    cache
        .set(&key("n"), ValueRef::Int(3), &WriteOptions::default())
        .unwrap();
    assert_eq!(
        cache.preview(&key("big"), 16).unwrap().as_deref(),
        Some("b'\\x07\\x07\\x07…'")
    );
    assert_eq!(
        cache.preview(&key("small"), 16).unwrap().as_deref(),
        Some("'hi'")
    );
    assert_eq!(cache.preview(&key("n"), 16).unwrap().as_deref(), Some("3"));
    assert_eq!(cache.preview(&key("absent"), 16).unwrap(), None);
    // Damage past the prefix does not reach a preview (get finds it by the checksum).
    let [file] = <[_; 1]>::try_from(value_files(dir.path())).unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    *bytes.last_mut().unwrap() ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();
    assert_eq!(
        cache.preview(&key("big"), 16).unwrap().as_deref(),
        Some("b'\\x07\\x07\\x07…'")
    );
    assert!(cache.get(&key("big"), false).is_err());
    // A file cut short, or gone, is named in the preview; nothing is raised.
    std::fs::write(&file, &bytes[..10]).unwrap();
    let text = cache.preview(&key("big"), 200).unwrap().unwrap();
    assert!(
        text.starts_with("<damaged: value file") && text.contains("10 bytes long"),
        "{text}"
    );
    std::fs::remove_file(&file).unwrap();
    let text = cache.preview(&key("big"), 200).unwrap().unwrap();
    assert_eq!(text, "<value file missing>");
}

#[test]
fn a_whole_small_value_is_checked_against_its_checksum() {
    let (dir, cache) = open_with_files(8);
    cache
        .set(
            &key("k"),
            ValueRef::Str("a value file"),
            &WriteOptions::default(),
        )
        .unwrap();
    let [file] = <[_; 1]>::try_from(value_files(dir.path())).unwrap();
    std::fs::write(&file, b"a value fil!").unwrap();
    assert_eq!(
        cache.preview(&key("k"), 80).unwrap().as_deref(),
        Some("<damaged: the stored bytes do not match their checksum>")
    );
}

#[test]
fn a_job_list_previews_without_reading_the_values() {
    let (_d, cache) = open_with_files(1024);
    let jobs = cache.jobs();
    let big = vec![0u8; 5_000_000];
    let id = jobs
        .put("q", ValueRef::Bytes(&big), &JobOptions::default())
        .unwrap()
        .id();
    let listed = jobs
        .list("q", Some(ListState::Ready), 0, 10, ListValues::Preview(12))
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].info.id, id);
    assert_eq!(listed[0].preview.as_deref(), Some("b'\\x00\\x00…'"));
    assert!(listed[0].info.value.is_err(), "the value was not read");
    let loaded = jobs.list("q", None, 0, 10, ListValues::Load).unwrap();
    assert_eq!(loaded[0].preview, None);
    assert!(loaded[0].info.value.is_ok());
}
