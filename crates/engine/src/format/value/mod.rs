//! The safe value format: a language-neutral tree of values and its CBOR (RFC 8949) encoding.
//!
//! Nothing here executes code while decoding: the format can only describe data. The tag
//! numbers used for the types CBOR lacks natively, and the layout of each, are specified in
//! `docs/decisions/D-002-value-format.md`.
//!
//! ```
//! use diskcache_oxide_engine::value::{decode, encode, encode_key, Value};
//!
//! let dict = Value::Dict(vec![
//!     (Value::Str("b".into()), Value::Tuple(vec![Value::Int(1), Value::Float(1.0)])),
//!     (Value::Str("a".into()), Value::Bytes(b"raw".to_vec())),
//! ]);
//! let bytes = encode(&dict);
//! assert_eq!(decode(&bytes)?, dict); // insertion order kept
//!
//! // As a key the entries are sorted, so the same dict built in another order gives the same bytes.
//! let Value::Dict(mut pairs) = dict.clone() else { unreachable!() };
//! pairs.reverse();
//! assert_eq!(encode_key(&Value::Dict(pairs)), encode_key(&dict));
//!
//! assert!(decode(&[0xd9, 0xff, 0xff, 0x00]).unwrap_err().to_string().contains("unknown tag 65535"));
//! # Ok::<(), diskcache_oxide_engine::value::DecodeError>(())
//! ```

mod cbor;
mod preview;

pub use cbor::{decode, encode, encode_key, DecodeError, MAX_DEPTH};
pub(crate) use preview::fit;
pub use preview::{preview, PREVIEW_BYTES, PREVIEW_MAX_WIDTH};

/// One value of the safe format. Each variant round-trips to exactly one Python type.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    /// Integers that fit in i64.
    Int(i64),
    /// Integers outside i64: two's-complement, big-endian, minimal length
    /// (Python's `int.to_bytes(n, "big", signed=True)`).
    BigInt(Vec<u8>),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Value>),
    Tuple(Vec<Value>),
    /// Insertion-ordered pairs; keys may be any value.
    Dict(Vec<(Value, Value)>),
    Set(Vec<Value>),
    FrozenSet(Vec<Value>),
    DateTime(DateTime),
    Date(Date),
    Time(Time),
    TimeDelta(TimeDelta),
    /// The exact text of a decimal, as Python's `str(Decimal)` gives it ("1.10", "-0", "NaN", "sNaN", "-Infinity", "1E+3").
    Decimal(String),
    Uuid([u8; 16]),
    Path(PathValue),
    /// A value of a type registered by name in the application; `value` is what its encoder returned.
    Custom {
        name: String,
        value: Box<Value>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Date {
    pub year: i32,
    pub month: u8,
    pub day: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Time {
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub microsecond: u32,
    pub tz: Option<TimeZone>,
    pub fold: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DateTime {
    pub date: Date,
    pub time: Time,
}

/// A Python `timedelta`, normalised as Python keeps it: 0 <= seconds < 86400, 0 <= microseconds < 1e6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeDelta {
    pub days: i32,
    pub seconds: i32,
    pub microseconds: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeZone {
    /// `datetime.timezone(offset, name)`: a fixed offset in microseconds east of UTC.
    Fixed {
        offset_us: i64,
        name: Option<String>,
    },
    /// An IANA zone by its key, e.g. `zoneinfo.ZoneInfo("Europe/Paris")`.
    Zone(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// `pathlib.PosixPath` (what `Path()` is on POSIX).
    Posix,
    /// `pathlib.WindowsPath`.
    Windows,
    PurePosix,
    PureWindows,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathValue {
    pub kind: PathKind,
    pub path: String,
}
