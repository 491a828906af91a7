//! CBOR (RFC 8949) encoding and decoding of [`Value`].
//!
//! The tag numbers and the layout of each tagged type are specified in
//! `docs/decisions/D-002-value-format.md`; the constants below must match that table.

use super::{Date, DateTime, PathKind, PathValue, Time, TimeDelta, TimeZone, Value};
use std::fmt;

/// Why bytes could not be decoded. Decoding never panics: every input decodes or yields this.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub message: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DecodeError {}

/// How many arrays and maps may enclose an item. Deeper input is refused so that decoding
/// (and the recursive conversion to Python objects after it) has a bounded stack.
/// [`encode`] does not check it: a writer must not produce deeper values, or they won't read back.
pub const MAX_DEPTH: usize = 256;
/// The most array or map slots reserved before their items are read: a declared length is
/// only a claim until the items arrive.
const PREALLOCATE: u64 = 1024;

const MAJOR_UINT: u8 = 0;
const MAJOR_NINT: u8 = 1;
const MAJOR_BYTES: u8 = 2;
const MAJOR_TEXT: u8 = 3;
const MAJOR_ARRAY: u8 = 4;
const MAJOR_MAP: u8 = 5;
const MAJOR_TAG: u8 = 6;
const MAJOR_SIMPLE: u8 = 7;

const FALSE: u8 = 0xf4;
const TRUE: u8 = 0xf5;
const NULL: u8 = 0xf6;
const FLOAT64: u8 = 0xfb;

// IANA-registered tags (the previews read them too: preview/reader.rs).
pub(super) const TAG_POS_BIGNUM: u64 = 2;
pub(super) const TAG_NEG_BIGNUM: u64 = 3;
pub(super) const TAG_UUID: u64 = 37;
pub(super) const TAG_SET: u64 = 258;
// Ours (D-002): consecutive numbers in the first-come-first-served range with a 3-byte head.
pub(super) const TAG_TUPLE: u64 = 58800;
pub(super) const TAG_FROZENSET: u64 = 58801;
pub(super) const TAG_DATETIME: u64 = 58802;
pub(super) const TAG_DATE: u64 = 58803;
pub(super) const TAG_TIME: u64 = 58804;
pub(super) const TAG_TIMEDELTA: u64 = 58805;
pub(super) const TAG_DECIMAL: u64 = 58806;
pub(super) const TAG_PATH: u64 = 58807;
pub(super) const TAG_CUSTOM: u64 = 58808;
pub(super) const TAG_TIMEZONE: u64 = 58809;

/// Python's `timezone` accepts offsets strictly inside ±24 h.
const MAX_OFFSET_US: i64 = 86_400_000_000 - 1;
const MAX_TIMEDELTA_DAYS: i64 = 999_999_999;

/// Encode a value (dict and set order preserved as given).
pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(size_hint(value, true));
    write::<false>(&mut out, value);
    out
}

/// Encode a value as a cache key: deterministic, so equal keys give equal bytes
/// (set and frozenset elements and dict entries sorted by their encoded bytes).
/// "Equal" is structural: `1`, `1.0` and `True` stay distinct, as in D-002.
pub fn encode_key(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(size_hint(value, true));
    write::<true>(&mut out, value);
    out
}

/// Decode bytes produced by [`encode`] or [`encode_key`]. Any other input, however hostile,
/// yields an error naming the byte offset, in time and memory bounded by its length.
pub fn decode(bytes: &[u8]) -> Result<Value, DecodeError> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let value = r.item(0)?;
    if r.pos != bytes.len() {
        return Err(error(r.pos, "trailing bytes after the value"));
    }
    Ok(value)
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// A cheap guess of the encoded size, so most values are written without reallocating.
/// Looks one level into containers only: a full pass would cost as much as encoding.
fn size_hint(value: &Value, deep: bool) -> usize {
    match value {
        Value::Str(s) | Value::Decimal(s) => 12 + s.len(),
        Value::Bytes(b) | Value::BigInt(b) => 12 + b.len(),
        Value::List(items) | Value::Tuple(items) | Value::Set(items) | Value::FrozenSet(items) => {
            if deep {
                12 + items.iter().map(|v| size_hint(v, false)).sum::<usize>()
            } else {
                12 + 8 * items.len()
            }
        }
        Value::Dict(pairs) => {
            if deep {
                12 + pairs
                    .iter()
                    .map(|(k, v)| size_hint(k, false) + size_hint(v, false))
                    .sum::<usize>()
            } else {
                12 + 16 * pairs.len()
            }
        }
        Value::Path(p) => 16 + p.path.len(),
        Value::Custom { name, value } => {
            16 + name.len() + if deep { size_hint(value, false) } else { 0 }
        }
        Value::DateTime(_) | Value::Time(_) => 48,
        _ => 20,
    }
}

fn write<const KEY: bool>(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::None => out.push(NULL),
        Value::Bool(b) => out.push(if *b { TRUE } else { FALSE }),
        Value::Int(i) => int(out, *i),
        Value::BigInt(b) => bigint(out, b),
        // Always 64-bit, never the shortest float: keeps floats apart from ints and bit-exact.
        Value::Float(f) => {
            out.push(FLOAT64);
            out.extend_from_slice(&f.to_bits().to_be_bytes());
        }
        Value::Str(s) => text(out, s),
        Value::Bytes(b) => {
            head(out, MAJOR_BYTES, b.len() as u64);
            out.extend_from_slice(b);
        }
        Value::List(items) => array::<KEY>(out, items, false),
        Value::Tuple(items) => {
            head(out, MAJOR_TAG, TAG_TUPLE);
            array::<KEY>(out, items, false);
        }
        Value::Set(items) => {
            head(out, MAJOR_TAG, TAG_SET);
            array::<KEY>(out, items, KEY);
        }
        Value::FrozenSet(items) => {
            head(out, MAJOR_TAG, TAG_FROZENSET);
            array::<KEY>(out, items, KEY);
        }
        Value::Dict(pairs) => map::<KEY>(out, pairs),
        Value::DateTime(dt) => {
            head(out, MAJOR_TAG, TAG_DATETIME);
            head(out, MAJOR_ARRAY, 9);
            date_fields(out, &dt.date);
            time_fields(out, &dt.time);
        }
        Value::Date(d) => {
            head(out, MAJOR_TAG, TAG_DATE);
            head(out, MAJOR_ARRAY, 3);
            date_fields(out, d);
        }
        Value::Time(t) => {
            head(out, MAJOR_TAG, TAG_TIME);
            head(out, MAJOR_ARRAY, 6);
            time_fields(out, t);
        }
        Value::TimeDelta(td) => {
            head(out, MAJOR_TAG, TAG_TIMEDELTA);
            head(out, MAJOR_ARRAY, 3);
            int(out, td.days.into());
            int(out, td.seconds.into());
            int(out, td.microseconds.into());
        }
        Value::Decimal(s) => {
            head(out, MAJOR_TAG, TAG_DECIMAL);
            text(out, s);
        }
        Value::Uuid(u) => {
            head(out, MAJOR_TAG, TAG_UUID);
            head(out, MAJOR_BYTES, 16);
            out.extend_from_slice(u);
        }
        Value::Path(p) => {
            head(out, MAJOR_TAG, TAG_PATH);
            head(out, MAJOR_ARRAY, 2);
            int(out, path_kind_code(p.kind));
            text(out, &p.path);
        }
        Value::Custom { name, value } => {
            head(out, MAJOR_TAG, TAG_CUSTOM);
            head(out, MAJOR_ARRAY, 2);
            text(out, name);
            write::<KEY>(out, value);
        }
    }
}

/// The initial byte and argument, always in the shortest form (RFC 8949 §4.2.1).
fn head(out: &mut Vec<u8>, major: u8, n: u64) {
    let m = major << 5;
    if n < 24 {
        out.push(m | n as u8);
    } else if n <= 0xff {
        out.extend_from_slice(&[m | 24, n as u8]);
    } else if n <= 0xffff {
        out.push(m | 25);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else if n <= 0xffff_ffff {
        out.push(m | 26);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(m | 27);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn int(out: &mut Vec<u8>, i: i64) {
    if i >= 0 {
        head(out, MAJOR_UINT, i as u64);
    } else {
        // CBOR stores a negative n as -1 - n, which is !n in two's complement.
        head(out, MAJOR_NINT, !i as u64);
    }
}

/// Two's-complement big-endian bytes, normalised so that every integer has one encoding
/// whatever padding the caller left: major 0/1 when it fits 64 bits, else a minimal bignum.
fn bigint(out: &mut Vec<u8>, b: &[u8]) {
    let negative = b.first().is_some_and(|&x| x & 0x80 != 0);
    // Sign-extension bytes carry nothing; and for a negative n CBOR stores -1 - n, whose bytes are
    // those of n inverted, so XOR with the sign byte gives the magnitude either way.
    let sign = if negative { 0xff } else { 0x00 };
    let magnitude = &b[b.iter().take_while(|&&x| x == sign).count()..];
    if magnitude.len() <= 8 {
        let n = magnitude
            .iter()
            .fold(0u64, |n, &x| n << 8 | u64::from(x ^ sign));
        head(out, if negative { MAJOR_NINT } else { MAJOR_UINT }, n);
    } else {
        let tag = if negative {
            TAG_NEG_BIGNUM
        } else {
            TAG_POS_BIGNUM
        };
        head(out, MAJOR_TAG, tag);
        head(out, MAJOR_BYTES, magnitude.len() as u64);
        out.extend(magnitude.iter().map(|&x| x ^ sign));
    }
}

fn text(out: &mut Vec<u8>, s: &str) {
    head(out, MAJOR_TEXT, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

fn array<const KEY: bool>(out: &mut Vec<u8>, items: &[Value], sort: bool) {
    head(out, MAJOR_ARRAY, items.len() as u64);
    if !sort || items.len() < 2 {
        for v in items {
            write::<KEY>(out, v);
        }
        return;
    }
    // Sorting needs every element's bytes first: encode them side by side in one scratch buffer.
    let mut scratch = Vec::with_capacity(items.iter().map(|v| size_hint(v, false)).sum());
    let mut spans = Vec::with_capacity(items.len());
    for v in items {
        let start = scratch.len();
        write::<true>(&mut scratch, v);
        spans.push((start, scratch.len()));
    }
    spans.sort_unstable_by(|a, b| scratch[a.0..a.1].cmp(&scratch[b.0..b.1]));
    for (start, end) in spans {
        out.extend_from_slice(&scratch[start..end]);
    }
}

fn map<const KEY: bool>(out: &mut Vec<u8>, pairs: &[(Value, Value)]) {
    head(out, MAJOR_MAP, pairs.len() as u64);
    if !KEY || pairs.len() < 2 {
        for (k, v) in pairs {
            write::<KEY>(out, k);
            write::<KEY>(out, v);
        }
        return;
    }
    let mut scratch = Vec::with_capacity(
        pairs
            .iter()
            .map(|(k, v)| size_hint(k, false) + size_hint(v, false))
            .sum(),
    );
    // (key start, key end = value start, value end)
    let mut spans = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        let start = scratch.len();
        write::<true>(&mut scratch, k);
        let mid = scratch.len();
        write::<true>(&mut scratch, v);
        spans.push((start, mid, scratch.len()));
    }
    // Python keys are unique; the value only breaks ties for Rust callers that repeat a key.
    spans.sort_unstable_by(|a, b| {
        scratch[a.0..a.1]
            .cmp(&scratch[b.0..b.1])
            .then_with(|| scratch[a.1..a.2].cmp(&scratch[b.1..b.2]))
    });
    for (start, _, end) in spans {
        out.extend_from_slice(&scratch[start..end]);
    }
}

fn date_fields(out: &mut Vec<u8>, d: &Date) {
    int(out, d.year.into());
    int(out, d.month.into());
    int(out, d.day.into());
}

fn time_fields(out: &mut Vec<u8>, t: &Time) {
    int(out, t.hour.into());
    int(out, t.minute.into());
    int(out, t.second.into());
    int(out, t.microsecond.into());
    int(out, t.fold.into());
    match &t.tz {
        None => out.push(NULL),
        Some(TimeZone::Fixed { offset_us, name }) => {
            head(out, MAJOR_TAG, TAG_TIMEZONE);
            head(out, MAJOR_ARRAY, 2);
            int(out, *offset_us);
            match name {
                Some(n) => text(out, n),
                None => out.push(NULL),
            }
        }
        Some(TimeZone::Zone(key)) => {
            head(out, MAJOR_TAG, TAG_TIMEZONE);
            text(out, key);
        }
    }
}

fn path_kind_code(kind: PathKind) -> i64 {
    match kind {
        PathKind::Posix => 0,
        PathKind::Windows => 1,
        PathKind::PurePosix => 2,
        PathKind::PureWindows => 3,
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding

fn error(at: usize, what: impl fmt::Display) -> DecodeError {
    DecodeError {
        message: format!("{what} at byte {at}"),
    }
}

/// An item's initial byte and argument. `info` is kept because for major 7 it says
/// whether `arg` is a simple value or the bits of a float.
struct Head {
    major: u8,
    info: u8,
    arg: u64,
    at: usize,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` bytes; `n` is checked against the input before anything is allocated.
    fn take(&mut self, n: u64, at: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() as u64 {
            return Err(error(
                at,
                format_args!(
                    "{what} of {n} bytes runs past the end of the input ({} left)",
                    self.remaining()
                ),
            ));
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.buf[start..self.pos])
    }

    fn head(&mut self) -> Result<Head, DecodeError> {
        let at = self.pos;
        let Some(&initial) = self.buf.get(at) else {
            return Err(error(at, "unexpected end of input"));
        };
        self.pos += 1;
        let (major, info) = (initial >> 5, initial & 0x1f);
        let arg = match info {
            0..=23 => u64::from(info),
            24..=27 => {
                let bytes = self.take(1 << (info - 24), at, "item head")?;
                bytes.iter().fold(0u64, |n, &x| n << 8 | u64::from(x))
            }
            28..=30 => {
                return Err(error(
                    at,
                    format_args!("reserved additional information {info}"),
                ))
            }
            _ => {
                return Err(error(
                    at,
                    match major {
                        MAJOR_BYTES..=MAJOR_MAP => "indefinite-length item (not supported)",
                        MAJOR_SIMPLE => "unexpected break (0xff)",
                        _ => "invalid additional information 31",
                    },
                ))
            }
        };
        Ok(Head {
            major,
            info,
            arg,
            at,
        })
    }

    /// One item enclosed by `depth` arrays and maps.
    fn item(&mut self, depth: usize) -> Result<Value, DecodeError> {
        let h = self.head()?;
        match h.major {
            MAJOR_UINT => Ok(uint_value(h.arg)),
            MAJOR_NINT => Ok(nint_value(h.arg)),
            MAJOR_BYTES => Ok(Value::Bytes(
                self.take(h.arg, h.at, "byte string")?.to_vec(),
            )),
            MAJOR_TEXT => Ok(Value::Str(self.text_body(&h)?.to_owned())),
            MAJOR_ARRAY => Ok(Value::List(self.items(&h, depth)?)),
            MAJOR_MAP => self.map(&h, depth),
            MAJOR_TAG => self.tagged(&h, depth),
            _ => simple(&h),
        }
    }

    fn items(&mut self, h: &Head, depth: usize) -> Result<Vec<Value>, DecodeError> {
        if depth >= MAX_DEPTH {
            return Err(error(h.at, format_args!("nesting deeper than {MAX_DEPTH}")));
        }
        // Every item takes at least one byte, so the input bounds what a declared length can
        // cost; but an item in memory is dozens of bytes, so a large declared length gets at
        // most PREALLOCATE slots up front and grows as items actually arrive (D-035).
        let mut items =
            Vec::with_capacity(h.arg.min(self.remaining() as u64).min(PREALLOCATE) as usize);
        for _ in 0..h.arg {
            items.push(self.item(depth + 1)?);
        }
        Ok(items)
    }

    fn map(&mut self, h: &Head, depth: usize) -> Result<Value, DecodeError> {
        if depth >= MAX_DEPTH {
            return Err(error(h.at, format_args!("nesting deeper than {MAX_DEPTH}")));
        }
        let mut pairs =
            Vec::with_capacity(h.arg.min(self.remaining() as u64 / 2).min(PREALLOCATE) as usize);
        for _ in 0..h.arg {
            let k = self.item(depth + 1)?;
            let v = self.item(depth + 1)?;
            pairs.push((k, v));
        }
        Ok(Value::Dict(pairs))
    }

    /// Tag contents are read by shape, never as a generic item, so tags cannot nest by themselves.
    fn tagged(&mut self, h: &Head, depth: usize) -> Result<Value, DecodeError> {
        match h.arg {
            TAG_POS_BIGNUM | TAG_NEG_BIGNUM => {
                let c = self.expect(MAJOR_BYTES, "bignum: expected a byte string")?;
                let magnitude = self.take(c.arg, c.at, "byte string")?;
                Ok(bignum(h.arg == TAG_NEG_BIGNUM, magnitude))
            }
            TAG_UUID => {
                let c = self.expect(MAJOR_BYTES, "uuid: expected a byte string")?;
                let b = self.take(c.arg, c.at, "byte string")?;
                match <[u8; 16]>::try_from(b) {
                    Ok(u) => Ok(Value::Uuid(u)),
                    Err(_) => Err(error(
                        c.at,
                        format_args!("uuid of {} bytes, expected 16", b.len()),
                    )),
                }
            }
            TAG_SET => Ok(Value::Set(self.tagged_items("set", depth)?)),
            TAG_TUPLE => Ok(Value::Tuple(self.tagged_items("tuple", depth)?)),
            TAG_FROZENSET => Ok(Value::FrozenSet(self.tagged_items("frozenset", depth)?)),
            TAG_DATETIME => {
                self.fixed_array(9, "datetime")?;
                let date = self.date()?;
                let time = self.time()?;
                Ok(Value::DateTime(DateTime { date, time }))
            }
            TAG_DATE => {
                self.fixed_array(3, "date")?;
                Ok(Value::Date(self.date()?))
            }
            TAG_TIME => {
                self.fixed_array(6, "time")?;
                Ok(Value::Time(self.time()?))
            }
            TAG_TIMEDELTA => {
                self.fixed_array(3, "timedelta")?;
                let days =
                    self.int_in("timedelta days", -MAX_TIMEDELTA_DAYS, MAX_TIMEDELTA_DAYS)?;
                let seconds = self.int_in("timedelta seconds", 0, 86_399)?;
                let microseconds = self.int_in("timedelta microseconds", 0, 999_999)?;
                // In range by the checks above.
                Ok(Value::TimeDelta(TimeDelta {
                    days: days as i32,
                    seconds: seconds as i32,
                    microseconds: microseconds as i32,
                }))
            }
            TAG_DECIMAL => {
                let c = self.expect(MAJOR_TEXT, "decimal: expected a text string")?;
                let s = self.text_body(&c)?;
                if !decimal_is_valid(s) {
                    return Err(error(
                        c.at,
                        "decimal: not a number Python's Decimal accepts",
                    ));
                }
                Ok(Value::Decimal(s.to_owned()))
            }
            TAG_PATH => {
                self.fixed_array(2, "path")?;
                let kind = match self.int_in("path kind", 0, 3)? {
                    0 => PathKind::Posix,
                    1 => PathKind::Windows,
                    2 => PathKind::PurePosix,
                    _ => PathKind::PureWindows,
                };
                let c = self.expect(MAJOR_TEXT, "path: expected a text string")?;
                let path = self.text_body(&c)?.to_owned();
                Ok(Value::Path(PathValue { kind, path }))
            }
            TAG_CUSTOM => {
                if depth >= MAX_DEPTH {
                    return Err(error(h.at, format_args!("nesting deeper than {MAX_DEPTH}")));
                }
                self.fixed_array(2, "custom value")?;
                let c = self.expect(MAJOR_TEXT, "custom value: expected a type name")?;
                let name = self.text_body(&c)?.to_owned();
                let value = Box::new(self.item(depth + 1)?);
                Ok(Value::Custom { name, value })
            }
            TAG_TIMEZONE => Err(error(h.at, "time zone outside a time or datetime")),
            tag => Err(error(h.at, format_args!("unknown tag {tag}"))),
        }
    }

    fn expect(&mut self, major: u8, what: &str) -> Result<Head, DecodeError> {
        let h = self.head()?;
        if h.major != major {
            return Err(error(h.at, what));
        }
        Ok(h)
    }

    fn tagged_items(&mut self, what: &str, depth: usize) -> Result<Vec<Value>, DecodeError> {
        let h = self.head()?;
        if h.major != MAJOR_ARRAY {
            return Err(error(h.at, format_args!("{what}: expected an array")));
        }
        self.items(&h, depth)
    }

    fn fixed_array(&mut self, len: u64, what: &str) -> Result<(), DecodeError> {
        let h = self.head()?;
        if h.major != MAJOR_ARRAY || h.arg != len {
            return Err(error(
                h.at,
                format_args!("{what}: expected an array of {len} items"),
            ));
        }
        Ok(())
    }

    fn text_body(&mut self, h: &Head) -> Result<&'a str, DecodeError> {
        let bytes = self.take(h.arg, h.at, "text string")?;
        std::str::from_utf8(bytes).map_err(|e| {
            let at = self.pos - bytes.len() + e.valid_up_to();
            error(at, "invalid UTF-8 in a text string")
        })
    }

    /// An integer field of a fixed-shape tag, within `lo..=hi` so Python can construct the object.
    fn int_in(&mut self, what: &str, lo: i64, hi: i64) -> Result<i64, DecodeError> {
        let h = self.head()?;
        let n = match h.major {
            MAJOR_UINT => i128::from(h.arg),
            MAJOR_NINT => -1 - i128::from(h.arg),
            _ => return Err(error(h.at, format_args!("{what}: expected an integer"))),
        };
        if n < i128::from(lo) || n > i128::from(hi) {
            return Err(error(
                h.at,
                format_args!("{what} {n} out of range {lo}..={hi}"),
            ));
        }
        Ok(n as i64)
    }

    fn date(&mut self) -> Result<Date, DecodeError> {
        let year = self.int_in("year", 1, 9999)?;
        let month = self.int_in("month", 1, 12)?;
        let at = self.pos;
        let day = self.int_in("day", 1, 31)?;
        if day > days_in_month(year, month) {
            return Err(error(
                at,
                format_args!("day {day} out of range for {year}-{month:02}"),
            ));
        }
        Ok(Date {
            year: year as i32,
            month: month as u8,
            day: day as u8,
        })
    }

    fn time(&mut self) -> Result<Time, DecodeError> {
        let hour = self.int_in("hour", 0, 23)? as u8;
        let minute = self.int_in("minute", 0, 59)? as u8;
        let second = self.int_in("second", 0, 59)? as u8;
        let microsecond = self.int_in("microsecond", 0, 999_999)? as u32;
        let fold = self.int_in("fold", 0, 1)? as u8;
        let tz = self.timezone()?;
        Ok(Time {
            hour,
            minute,
            second,
            microsecond,
            tz,
            fold,
        })
    }

    fn timezone(&mut self) -> Result<Option<TimeZone>, DecodeError> {
        let h = self.head()?;
        if h.major == MAJOR_SIMPLE && h.info == 22 {
            return Ok(None);
        }
        if h.major != MAJOR_TAG || h.arg != TAG_TIMEZONE {
            return Err(error(
                h.at,
                format_args!("time zone: expected null or tag {TAG_TIMEZONE}"),
            ));
        }
        let c = self.head()?;
        match c.major {
            MAJOR_TEXT => Ok(Some(TimeZone::Zone(self.text_body(&c)?.to_owned()))),
            MAJOR_ARRAY if c.arg == 2 => {
                let offset_us = self.int_in("time zone offset", -MAX_OFFSET_US, MAX_OFFSET_US)?;
                let n = self.head()?;
                let name = match n.major {
                    MAJOR_SIMPLE if n.info == 22 => None,
                    MAJOR_TEXT => Some(self.text_body(&n)?.to_owned()),
                    _ => return Err(error(n.at, "time zone name: expected text or null")),
                };
                Ok(Some(TimeZone::Fixed { offset_us, name }))
            }
            _ => Err(error(
                c.at,
                "time zone: expected a zone key or [offset, name]",
            )),
        }
    }
}

fn simple(h: &Head) -> Result<Value, DecodeError> {
    match h.info {
        20 => Ok(Value::Bool(false)),
        21 => Ok(Value::Bool(true)),
        22 => Ok(Value::None),
        23 => Err(error(h.at, "undefined (not supported)")),
        // Other writers may shorten floats; this crate always writes 64 bits.
        25 => Ok(Value::Float(f16_to_f64(h.arg as u16))),
        26 => Ok(Value::Float(f64::from(f32::from_bits(h.arg as u32)))),
        27 => Ok(Value::Float(f64::from_bits(h.arg))),
        _ => Err(error(
            h.at,
            format_args!("unsupported simple value {}", h.arg),
        )),
    }
}

/// RFC 8949 Appendix D (the preview reads half floats with it too).
pub(crate) fn f16_to_f64(half: u16) -> f64 {
    let exponent = i32::from((half >> 10) & 0x1f);
    let mantissa = f64::from(half & 0x3ff);
    let magnitude = match exponent {
        0 => mantissa * 2f64.powi(-24),
        31 if mantissa == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (1024.0 + mantissa) * 2f64.powi(exponent - 25),
    };
    if half & 0x8000 != 0 {
        -magnitude
    } else {
        magnitude
    }
}

fn uint_value(n: u64) -> Value {
    match i64::try_from(n) {
        Ok(i) => Value::Int(i),
        // The top bit is set, so a zero byte keeps the two's complement positive.
        Err(_) => {
            let mut b = Vec::with_capacity(9);
            b.push(0);
            b.extend_from_slice(&n.to_be_bytes());
            Value::BigInt(b)
        }
    }
}

/// The integer -1 - n.
fn nint_value(n: u64) -> Value {
    match i64::try_from(n) {
        Ok(i) => Value::Int(!i),
        // !n has its top bit clear, so a 0xff byte keeps the two's complement negative.
        Err(_) => {
            let mut b = Vec::with_capacity(9);
            b.push(0xff);
            b.extend_from_slice(&(!n).to_be_bytes());
            Value::BigInt(b)
        }
    }
}

/// A tag 2/3 magnitude, possibly with leading zeros, as the one `Value` for its integer.
fn bignum(negative: bool, magnitude: &[u8]) -> Value {
    let skip = magnitude.iter().take_while(|&&x| x == 0).count();
    let m = &magnitude[skip..];
    if m.len() <= 8 {
        let n = m.iter().fold(0u64, |n, &x| n << 8 | u64::from(x));
        return if negative {
            nint_value(n)
        } else {
            uint_value(n)
        };
    }
    // -1 - m is !m in two's complement; add a sign byte where the first byte's top bit disagrees.
    let flip = if negative { 0xff } else { 0x00 };
    let mut b = Vec::with_capacity(m.len() + 1);
    if m[0] & 0x80 != 0 {
        b.push(flip);
    }
    b.extend(m.iter().map(|&x| x ^ flip));
    Value::BigInt(b)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => 31,
    }
}

/// Whether `Decimal(s)` succeeds in CPython: the syntax of the decimal module (ASCII only,
/// without the surrounding whitespace and underscores it also tolerates) and the exponent
/// limits of its exact conversion (adjusted exponent <= MAX_EMAX, exponent >= MIN_ETINY).
fn decimal_is_valid(s: &str) -> bool {
    const MAX_EMAX: i128 = 999_999_999_999_999_999;
    const MIN_ETINY: i128 = -999_999_999_999_999_999 - (999_999_999_999_999_999 - 1);
    let b = s.as_bytes();
    let b = match b.first() {
        Some(b'+' | b'-') => &b[1..],
        _ => b,
    };
    if b.eq_ignore_ascii_case(b"inf") || b.eq_ignore_ascii_case(b"infinity") {
        return true;
    }
    for nan in [&b"nan"[..], &b"snan"[..]] {
        if b.len() >= nan.len() && b[..nan.len()].eq_ignore_ascii_case(nan) {
            return b[nan.len()..].iter().all(u8::is_ascii_digit);
        }
    }
    let digits = |from: usize| b[from..].iter().take_while(|x| x.is_ascii_digit()).count();
    let int_digits = digits(0);
    let mut i = int_digits;
    let mut frac_digits = 0;
    if b.get(i) == Some(&b'.') {
        frac_digits = digits(i + 1);
        i += 1 + frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return false;
    }
    let mut exponent: i128 = 0;
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        let negative = match b.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let n = digits(i);
        if n == 0 {
            return false;
        }
        // Saturate: anything this large is out of range whatever the fraction subtracts.
        for &d in &b[i..i + n] {
            exponent = (exponent * 10 + i128::from(d - b'0')).min(1 << 100);
        }
        if negative {
            exponent = -exponent;
        }
        i += n;
    }
    if i != b.len() {
        return false;
    }
    let coefficient = b[..int_digits]
        .iter()
        .chain(b[int_digits..].iter().skip(1).take(frac_digits));
    let significant = coefficient.skip_while(|&&d| d == b'0').count().max(1);
    let exponent = exponent - frac_digits as i128;
    exponent + significant as i128 - 1 <= MAX_EMAX && exponent >= MIN_ETINY
}
