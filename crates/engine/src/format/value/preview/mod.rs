//! Previews: a short, repr-like text of a stored value for an operator (the dashboard, D-046),
//! built from the stored bytes without decoding the value.
//!
//! A preview reads at most [`PREVIEW_BYTES`] of the payload, so a 5 MB value costs what a
//! 4 KiB one does. It never runs code: a pickle is shown as `<pickle, N bytes>`, and a
//! registered type by its name and the value its encoder returned (`<Point: registered type,
//! (1, 2)>`), whether or not this process knows the type. The safe format (CBOR, D-002) is
//! walked item by item as far as the width needs, so a prefix cut anywhere renders what it
//! holds and ends with `…`; bytes that cannot be read as the format end the text with
//! `<damaged: …>`. A preview is not a check: it verifies the checksum only when it has the whole
//! payload, and it does not refuse every field `decode` would (a date's day, say). `get` and
//! `check()` do.
//!
//! ```
//! use diskcache_oxide_engine::value::{encode, preview, Value};
//! use diskcache_oxide_engine::Kind;
//!
//! let v = Value::Dict(vec![(Value::Str("a".into()), Value::Int(1))]);
//! assert_eq!(preview(Kind::Encoded, &encode(&v), 7, 60), "{'a': 1}");
//! assert_eq!(preview(Kind::Str, b"hello world", 5_000_000, 8), "'hello…'");
//! let long = Value::Dict(vec![(Value::Str("a".into()), Value::Int(1)), (Value::Str("b".into()), Value::Int(2))]);
//! assert_eq!(preview(Kind::Encoded, &encode(&long)[..4], 9, 60), "{'a': 1, …}");
//! assert_eq!(preview(Kind::Pickled, b"\x80\x05", 1234, 60), "<pickle, 1234 bytes>");
//! ```

use super::cbor::{
    TAG_CUSTOM, TAG_DATE, TAG_DATETIME, TAG_DECIMAL, TAG_FROZENSET, TAG_NEG_BIGNUM, TAG_PATH,
    TAG_POS_BIGNUM, TAG_SET, TAG_TIME, TAG_TIMEDELTA, TAG_TIMEZONE, TAG_TUPLE, TAG_UUID,
};
use super::MAX_DEPTH;
use crate::format::kind::Kind;
use std::fmt::Write as _;

/// The most bytes of a payload a preview looks at.
pub const PREVIEW_BYTES: usize = 4096;
/// The widest preview, in characters; a wider request gets this.
pub const PREVIEW_MAX_WIDTH: usize = 1000;

const ELLIPSIS: char = '…';

/// The preview of a payload of `kind` whose first bytes are `prefix` and whose whole length is
/// `total` bytes: at most `width` characters (1 to [`PREVIEW_MAX_WIDTH`]), ending with `…` when
/// the value goes on past them or past the prefix. Only the first [`PREVIEW_BYTES`] of
/// `prefix` are read. Any input gives a text; nothing panics.
pub fn preview(kind: Kind, prefix: &[u8], total: u64, width: usize) -> String {
    let width = width.clamp(1, PREVIEW_MAX_WIDTH);
    let prefix = &prefix[..prefix.len().min(PREVIEW_BYTES)];
    // A prefix as long as the payload is the whole payload (a caller's total may be short).
    let total = total.max(prefix.len() as u64);
    let whole = prefix.len() as u64 == total;
    let mut out = Out::new(width);
    let ended = match kind {
        Kind::Int | Kind::Float => number(&mut out, kind, prefix, total),
        Kind::Str => text_payload(&mut out, prefix, whole),
        Kind::Bytes => bytes_literal(&mut out, prefix, whole),
        Kind::Pickled => out.push(&format!("<pickle, {total} bytes>")),
        Kind::Encoded => {
            let mut r = Reader {
                buf: prefix,
                pos: 0,
                whole,
            };
            match r.item(&mut out, 0) {
                Ok(()) if whole && r.pos < prefix.len() => Err(Stop::Damaged(format!(
                    "trailing bytes after the value at byte {}",
                    r.pos
                ))),
                other => other,
            }
        }
    };
    out.finish(ended)
}

/// `text` in at most `width` characters, ending with `…` if it was cut: for what a preview
/// says instead of a value (a missing value file, say).
pub(crate) fn fit(text: &str, width: usize) -> String {
    let width = width.clamp(1, PREVIEW_MAX_WIDTH);
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut t: String = text.chars().take(width - 1).collect();
    t.push(ELLIPSIS);
    t
}

/// Why rendering stopped before the value's end.
enum Stop {
    /// The text reached its width.
    Full,
    /// The prefix ended; the payload goes on.
    Cut,
    /// The bytes cannot be read as what they claim to be.
    Damaged(String),
}

type Step = Result<(), Stop>;

/// The text so far, never more than `width` characters, and the containers (and quotes) open
/// at its end, so that a cut text can still close them: `{'a': 1, …}`, `'hello…'`.
struct Out {
    text: String,
    chars: usize,
    width: usize,
    /// Each open container: the length of the text just after its opening, and its closing.
    open: Vec<(usize, &'static str)>,
}

impl Out {
    fn new(width: usize) -> Out {
        Out {
            text: String::new(),
            chars: 0,
            width,
            open: Vec::new(),
        }
    }

    fn push(&mut self, s: &str) -> Step {
        for c in s.chars() {
            self.char(c)?;
        }
        Ok(())
    }

    fn char(&mut self, c: char) -> Step {
        if self.chars == self.width {
            return Err(Stop::Full);
        }
        self.text.push(c);
        self.chars += 1;
        Ok(())
    }

    /// Write `opening`; a cut text after it ends with `closing`.
    fn open(&mut self, opening: &str, closing: &'static str) -> Step {
        self.push(opening)?;
        self.open.push((self.chars, closing));
        Ok(())
    }

    /// Close the innermost open container.
    fn close(&mut self) -> Step {
        let closing = self.open.last().map_or("", |(_, c)| *c);
        self.push(closing)?;
        self.open.pop();
        Ok(())
    }

    /// The first `n` characters of the text.
    fn head(&self, n: usize) -> &str {
        match self.text.char_indices().nth(n) {
            Some((at, _)) => &self.text[..at],
            None => &self.text,
        }
    }

    fn finish(self, ended: Step) -> String {
        match ended {
            Ok(()) => self.text,
            Err(Stop::Full | Stop::Cut) => self.cut(),
            Err(Stop::Damaged(what)) => {
                // The damage is the news: it keeps its place at the end, the text before it
                // gives way.
                let marker = format!("<damaged: {what}>");
                let room = self.width.saturating_sub(marker.chars().count());
                if room == 0 {
                    let mut t: String = marker.chars().take(self.width - 1).collect();
                    t.push(ELLIPSIS);
                    return t;
                }
                if self.chars <= room {
                    return self.text + &marker;
                }
                let mut t: String = self.head(room - 1).to_owned();
                t.push(ELLIPSIS);
                t + &marker
            }
        }
    }

    /// The text as long as it can stay with `…` and the closings of what is open before the
    /// cut (a container opened after it is cut away with its closing).
    fn cut(&self) -> String {
        let closings = |keep: usize| -> usize {
            self.open
                .iter()
                .filter(|(at, _)| *at <= keep)
                .map(|(_, c)| c.chars().count())
                .sum()
        };
        let mut keep = self.chars.min(self.width);
        while keep > 0 && keep + 1 + closings(keep) > self.width {
            keep -= 1;
        }
        let mut t = self.head(keep).to_owned();
        t.push(ELLIPSIS);
        for (at, closing) in self.open.iter().rev() {
            if *at <= keep {
                t.push_str(closing);
            }
        }
        t
    }
}

// ---- the plain kinds -----------------------------------------------------------------------

fn number(out: &mut Out, kind: Kind, prefix: &[u8], total: u64) -> Step {
    let Ok(bytes) = <[u8; 8]>::try_from(prefix) else {
        return Err(Stop::Damaged(format!("a number of {total} bytes, not 8")));
    };
    if kind == Kind::Int {
        out.push(&i64::from_le_bytes(bytes).to_string())
    } else {
        out.push(&float_repr(f64::from_le_bytes(bytes)))
    }
}

fn text_payload(out: &mut Out, prefix: &[u8], whole: bool) -> Step {
    let (valid, rest) = utf8_prefix(prefix, 0)?;
    let quote = quote_for(valid.as_bytes());
    out.open(quote_str(quote), quote_str(quote))?;
    str_body(out, valid, Some(quote))?;
    if whole && !rest.is_empty() {
        return Err(Stop::Damaged(format!(
            "invalid UTF-8 at byte {}",
            valid.len()
        )));
    }
    if !whole {
        return Err(Stop::Cut);
    }
    out.close()
}

/// The valid UTF-8 at the start of `bytes` and what follows it: an error if the invalid bytes
/// are not just a character cut at the end (`at` places `bytes` in the payload, for the error).
fn utf8_prefix(bytes: &[u8], at: usize) -> Result<(&str, &[u8]), Stop> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok((s, &[])),
        Err(e) => {
            let n = e.valid_up_to();
            if e.error_len().is_some() {
                return Err(Stop::Damaged(format!("invalid UTF-8 at byte {}", at + n)));
            }
            // SAFETY-free: from_utf8 said the first n bytes are valid.
            let valid = std::str::from_utf8(&bytes[..n]).unwrap_or_default();
            Ok((valid, &bytes[n..]))
        }
    }
}

/// Python's choice of quote: `'` unless the text holds one and no `"`.
fn quote_for(bytes: &[u8]) -> char {
    if bytes.contains(&b'\'') && !bytes.contains(&b'"') {
        '"'
    } else {
        '\''
    }
}

fn quote_str(quote: char) -> &'static str {
    if quote == '"' {
        "\""
    } else {
        "'"
    }
}

/// A str literal as Python's repr writes it.
fn str_literal(out: &mut Out, s: &str) -> Step {
    let quote = quote_for(s.as_bytes());
    out.open(quote_str(quote), quote_str(quote))?;
    str_body(out, s, Some(quote))?;
    out.close()
}

/// A str's characters as Python's repr escapes them between `quote`s (None: no quotes).
fn str_body(out: &mut Out, s: &str, quote: Option<char>) -> Step {
    for c in s.chars() {
        match c {
            '\\' => out.push("\\\\")?,
            '\t' => out.push("\\t")?,
            '\n' => out.push("\\n")?,
            '\r' => out.push("\\r")?,
            c if Some(c) == quote => {
                out.char('\\')?;
                out.char(c)?;
            }
            c if !printable(c) => {
                let n = c as u32;
                let escaped = if n < 0x100 {
                    format!("\\x{n:02x}")
                } else if n < 0x10000 {
                    format!("\\u{n:04x}")
                } else {
                    format!("\\U{n:08x}")
                };
                out.push(&escaped)?;
            }
            c => out.char(c)?,
        }
    }
    Ok(())
}

/// Python's `str.isprintable`, near enough without Unicode's tables: control and format
/// characters, separators other than the space, surrogates, private use and noncharacters are
/// escaped (so that no bidirectional override or invisible character reaches a page as is).
fn printable(c: char) -> bool {
    let n = c as u32;
    !(c.is_control()
        || matches!(n,
            0xa0 | 0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x890..=0x891 | 0x8e2
            | 0x1680 | 0x180e | 0x2000..=0x200f | 0x2028..=0x202f | 0x205f..=0x2064
            | 0x2066..=0x206f | 0x3000 | 0xd800..=0xdfff | 0xe000..=0xf8ff | 0xfdd0..=0xfdef
            | 0xfeff | 0xfff9..=0xfffb | 0x110bd | 0x110cd | 0x13430..=0x1343f
            | 0x1bca0..=0x1bca3 | 0x1d173..=0x1d17a | 0xe0001 | 0xe0020..=0xe007f
            | 0xf0000..)
        || n & 0xfffe == 0xfffe)
}

/// A bytes literal as Python's repr writes it; closed only if `whole`.
fn bytes_literal(out: &mut Out, b: &[u8], whole: bool) -> Step {
    let quote = quote_for(b);
    out.open(if quote == '"' { "b\"" } else { "b'" }, quote_str(quote))?;
    for &x in b {
        match x {
            b'\\' => out.push("\\\\")?,
            b'\t' => out.push("\\t")?,
            b'\n' => out.push("\\n")?,
            b'\r' => out.push("\\r")?,
            x if x as char == quote => {
                out.char('\\')?;
                out.char(quote)?;
            }
            0x20..=0x7e => out.char(x as char)?,
            x => out.push(&format!("\\x{x:02x}"))?,
        }
    }
    if !whole {
        return Err(Stop::Cut);
    }
    out.close()
}

/// Python's `repr(float)`: the shortest digits that read back, fixed between 1e-4 and 1e16,
/// else in exponent form with at least two exponent digits.
fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: "-1.2345e6", "5e-324", "0e0".
    let sci = format!("{f:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..16).contains(&exponent) {
        let sign_e = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{mantissa}e{sign_e}{:02}", exponent.abs());
    }
    let n = digits.len() as i32;
    let body = if exponent < 0 {
        format!("0.{}{digits}", "0".repeat((-exponent - 1) as usize))
    } else if n - 1 <= exponent {
        format!("{digits}{}.0", "0".repeat((exponent - (n - 1)) as usize))
    } else {
        let point = (exponent + 1) as usize;
        format!("{}.{}", &digits[..point], &digits[point..])
    };
    format!("{sign}{body}")
}

// ---- the safe format -----------------------------------------------------------------------

struct Head {
    major: u8,
    info: u8,
    arg: u64,
    at: usize,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Whether `buf` is the whole payload: running out is then damage, not a cut.
    whole: bool,
}

fn damaged(at: usize, what: impl std::fmt::Display) -> Stop {
    Stop::Damaged(format!("{what} at byte {at}"))
}

impl<'a> Reader<'a> {
    fn out_of_input(&self, at: usize) -> Stop {
        if self.whole {
            damaged(at, "unexpected end of the value")
        } else {
            Stop::Cut
        }
    }

    fn head(&mut self) -> Result<Head, Stop> {
        let at = self.pos;
        let Some(&initial) = self.buf.get(at) else {
            return Err(self.out_of_input(at));
        };
        let (major, info) = (initial >> 5, initial & 0x1f);
        let arg = match info {
            0..=23 => {
                self.pos += 1;
                u64::from(info)
            }
            24..=27 => {
                let n = 1usize << (info - 24);
                let Some(bytes) = self.buf.get(at + 1..at + 1 + n) else {
                    return Err(self.out_of_input(at));
                };
                self.pos += 1 + n;
                bytes.iter().fold(0u64, |v, &x| v << 8 | u64::from(x))
            }
            _ => {
                return Err(damaged(
                    at,
                    format_args!("unreadable item head 0x{initial:02x}"),
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

    /// Up to `n` bytes: what the prefix has of them, and whether that is all of them.
    fn take(&mut self, n: u64) -> (&'a [u8], bool) {
        let left = (self.buf.len() - self.pos) as u64;
        let got = n.min(left) as usize;
        let bytes = &self.buf[self.pos..self.pos + got];
        self.pos += got;
        (bytes, got as u64 == n)
    }

    fn take_all(&mut self, n: u64, at: usize) -> Result<&'a [u8], Stop> {
        match self.take(n) {
            (bytes, true) => Ok(bytes),
            _ => Err(self.out_of_input(at)),
        }
    }

    fn item(&mut self, out: &mut Out, depth: usize) -> Step {
        let h = self.head()?;
        match h.major {
            0 => out.push(&h.arg.to_string()),
            1 => out.push(&(-1 - i128::from(h.arg)).to_string()),
            2 => {
                let (b, all) = self.take(h.arg);
                match bytes_literal(out, b, all) {
                    Err(Stop::Cut) => Err(self.out_of_input(h.at)),
                    other => other,
                }
            }
            3 => self.text(out, &h),
            4 => self.sequence(out, &h, depth, "[", "]", false),
            5 => self.map(out, &h, depth),
            6 => self.tagged(out, &h, depth),
            _ => match (h.info, h.arg) {
                (20, _) => out.push("False"),
                (21, _) => out.push("True"),
                (22, _) => out.push("None"),
                (25, half) => out.push(&float_repr(f16_to_f64(half as u16))),
                (26, single) => out.push(&float_repr(f64::from(f32::from_bits(single as u32)))),
                (27, double) => out.push(&float_repr(f64::from_bits(double))),
                (_, n) => Err(damaged(h.at, format_args!("unsupported simple value {n}"))),
            },
        }
    }

    fn text(&mut self, out: &mut Out, h: &Head) -> Step {
        let start = self.pos;
        let (b, all) = self.take(h.arg);
        let (s, rest) = utf8_prefix(b, start)?;
        if all && !rest.is_empty() {
            return Err(damaged(start + s.len(), "invalid UTF-8 in a text string"));
        }
        let quote = quote_for(s.as_bytes());
        out.open(quote_str(quote), quote_str(quote))?;
        str_body(out, s, Some(quote))?;
        if !all {
            return Err(self.out_of_input(h.at));
        }
        out.close()
    }

    fn nested(&self, h: &Head, depth: usize) -> Step {
        if depth >= MAX_DEPTH {
            return Err(damaged(
                h.at,
                format_args!("nesting deeper than {MAX_DEPTH}"),
            ));
        }
        Ok(())
    }

    fn array_head(&mut self, what: &str) -> Result<Head, Stop> {
        let h = self.head()?;
        if h.major != 4 {
            return Err(damaged(h.at, format_args!("{what}: expected an array")));
        }
        Ok(h)
    }

    /// An array's items between `open` and `close`; a one-item tuple gets its comma.
    fn sequence(
        &mut self,
        out: &mut Out,
        h: &Head,
        depth: usize,
        open: &str,
        close: &'static str,
        tuple: bool,
    ) -> Step {
        self.nested(h, depth)?;
        out.open(open, close)?;
        for i in 0..h.arg {
            if i > 0 {
                out.push(", ")?;
            }
            self.item(out, depth + 1)?;
        }
        if tuple && h.arg == 1 {
            out.push(",")?;
        }
        out.close()
    }

    fn map(&mut self, out: &mut Out, h: &Head, depth: usize) -> Step {
        self.nested(h, depth)?;
        out.open("{", "}")?;
        for i in 0..h.arg {
            if i > 0 {
                out.push(", ")?;
            }
            self.item(out, depth + 1)?;
            out.push(": ")?;
            self.item(out, depth + 1)?;
        }
        out.close()
    }

    fn set(&mut self, out: &mut Out, depth: usize, name: &str, frozen: bool) -> Step {
        let h = self.array_head(name)?;
        match (h.arg, frozen) {
            (0, false) => out.push("set()"),
            (0, true) => out.push("frozenset()"),
            (_, false) => self.sequence(out, &h, depth, "{", "}", false),
            (_, true) => self.sequence(out, &h, depth, "frozenset({", "})", false),
        }
    }

    fn int(&mut self, what: &str) -> Result<i128, Stop> {
        let h = self.head()?;
        match h.major {
            0 => Ok(i128::from(h.arg)),
            1 => Ok(-1 - i128::from(h.arg)),
            _ => Err(damaged(h.at, format_args!("{what}: expected an integer"))),
        }
    }

    fn fixed(&mut self, n: u64, what: &str) -> Result<(), Stop> {
        let h = self.array_head(what)?;
        if h.arg != n {
            return Err(damaged(
                h.at,
                format_args!("{what}: expected an array of {n} items"),
            ));
        }
        Ok(())
    }

    fn text_field(&mut self, what: &str) -> Result<&'a str, Stop> {
        let h = self.head()?;
        if h.major != 3 {
            return Err(damaged(
                h.at,
                format_args!("{what}: expected a text string"),
            ));
        }
        let start = self.pos;
        let b = self.take_all(h.arg, h.at)?;
        std::str::from_utf8(b).map_err(|e| damaged(start + e.valid_up_to(), "invalid UTF-8"))
    }

    /// `len` integers, written out as Python's `date`, `time` and `datetime` reprs do.
    fn ints(&mut self, len: usize, what: &str) -> Result<Vec<i128>, Stop> {
        (0..len).map(|_| self.int(what)).collect()
    }

    fn tagged(&mut self, out: &mut Out, h: &Head, depth: usize) -> Step {
        match h.arg {
            TAG_POS_BIGNUM | TAG_NEG_BIGNUM => {
                let c = self.head()?;
                if c.major != 2 {
                    return Err(damaged(c.at, "bignum: expected a byte string"));
                }
                match self.take(c.arg) {
                    (magnitude, true) => out.push(&bignum_text(h.arg == TAG_NEG_BIGNUM, magnitude)),
                    _ if self.whole => Err(damaged(c.at, "unexpected end of the value")),
                    // Its leading digits depend on bytes past the prefix.
                    _ => Err(Stop::Cut),
                }
            }
            TAG_UUID => {
                let c = self.head()?;
                let b = self.take_all(c.arg, c.at)?;
                let Ok(u) = <[u8; 16]>::try_from(b) else {
                    return Err(damaged(c.at, "uuid: expected 16 bytes"));
                };
                let mut hex = String::with_capacity(36);
                for (i, x) in u.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        hex.push('-');
                    }
                    let _ = write!(hex, "{x:02x}");
                }
                out.push(&format!("UUID('{hex}')"))
            }
            TAG_SET => self.set(out, depth, "set", false),
            TAG_FROZENSET => self.set(out, depth, "frozenset", true),
            TAG_TUPLE => {
                let a = self.array_head("tuple")?;
                self.sequence(out, &a, depth, "(", ")", true)
            }
            TAG_DATETIME => {
                self.fixed(9, "datetime")?;
                let f = self.ints(8, "datetime")?;
                out.open("datetime.datetime(", ")")?;
                out.push(&format!("{}, {}, {}, ", f[0], f[1], f[2]))?;
                self.clock(out, f[3], f[4], f[5], f[6], f[7])?;
                out.close()
            }
            TAG_DATE => {
                self.fixed(3, "date")?;
                let f = self.ints(3, "date")?;
                out.push(&format!("datetime.date({}, {}, {})", f[0], f[1], f[2]))
            }
            TAG_TIME => {
                self.fixed(6, "time")?;
                let f = self.ints(5, "time")?;
                out.open("datetime.time(", ")")?;
                self.clock(out, f[0], f[1], f[2], f[3], f[4])?;
                out.close()
            }
            TAG_TIMEDELTA => {
                self.fixed(3, "timedelta")?;
                let f = self.ints(3, "timedelta")?;
                out.push(&timedelta_repr(f[0], f[1], f[2]))
            }
            TAG_DECIMAL => {
                let s = self.text_field("decimal")?;
                out.open("Decimal(", ")")?;
                str_literal(out, s)?;
                out.close()
            }
            TAG_PATH => {
                self.fixed(2, "path")?;
                let class = match self.int("path kind")? {
                    0 => "PosixPath(",
                    1 => "WindowsPath(",
                    2 => "PurePosixPath(",
                    3 => "PureWindowsPath(",
                    k => return Err(damaged(h.at, format_args!("path kind {k}"))),
                };
                out.open(class, ")")?;
                let s = self.text_field("path")?;
                str_literal(out, s)?;
                out.close()
            }
            TAG_CUSTOM => {
                self.nested(h, depth)?;
                self.fixed(2, "registered type")?;
                let name = self.text_field("registered type name")?;
                out.open("<", ">")?;
                // A name is the application's text: escaped as a str's body is.
                str_body(out, name, None)?;
                out.push(": registered type, ")?;
                self.item(out, depth + 1)?;
                out.close()
            }
            TAG_TIMEZONE => Err(damaged(h.at, "time zone outside a time or datetime")),
            tag => Err(damaged(h.at, format_args!("unknown tag {tag}"))),
        }
    }

    /// The rest of a `time(` or `datetime(` repr but its `)`: hour, minute, then second and
    /// microsecond if not zero, fold if set, and the time zone.
    fn clock(
        &mut self,
        out: &mut Out,
        hour: i128,
        minute: i128,
        second: i128,
        micro: i128,
        fold: i128,
    ) -> Step {
        let mut parts = format!("{hour}, {minute}");
        if micro != 0 {
            let _ = write!(parts, ", {second}, {micro}");
        } else if second != 0 {
            let _ = write!(parts, ", {second}");
        }
        if fold != 0 {
            parts.push_str(", fold=1");
        }
        out.push(&parts)?;
        let h = self.head()?;
        if h.major == 7 && h.info == 22 {
            return Ok(());
        }
        if h.major != 6 || h.arg != TAG_TIMEZONE {
            return Err(damaged(h.at, "time zone: expected null or a time zone"));
        }
        out.push(", tzinfo=")?;
        let c = self.head()?;
        match c.major {
            3 => {
                let start = self.pos;
                let b = self.take_all(c.arg, c.at)?;
                let key = std::str::from_utf8(b)
                    .map_err(|e| damaged(start + e.valid_up_to(), "invalid UTF-8"))?;
                out.open("zoneinfo.ZoneInfo(key=", ")")?;
                str_literal(out, key)?;
                out.close()?;
            }
            4 if c.arg == 2 => {
                let offset = self.int("time zone offset")?;
                let n = self.head()?;
                let name = match n.major {
                    7 if n.info == 22 => None,
                    3 => {
                        let start = self.pos;
                        let b = self.take_all(n.arg, n.at)?;
                        Some(
                            std::str::from_utf8(b)
                                .map_err(|e| damaged(start + e.valid_up_to(), "invalid UTF-8"))?,
                        )
                    }
                    _ => return Err(damaged(n.at, "time zone name: expected text or null")),
                };
                if offset == 0 && name.is_none() {
                    out.push("datetime.timezone.utc")?;
                } else {
                    let us = 1_000_000i128;
                    let day = 86_400 * us;
                    let (days, rest) = (offset.div_euclid(day), offset.rem_euclid(day));
                    out.open("datetime.timezone(", ")")?;
                    out.push(&timedelta_repr(days, rest / us, rest % us))?;
                    if let Some(name) = name {
                        out.push(", ")?;
                        str_literal(out, name)?;
                    }
                    out.close()?;
                }
            }
            _ => {
                return Err(damaged(
                    c.at,
                    "time zone: expected a zone key or [offset, name]",
                ))
            }
        }
        Ok(())
    }
}

fn timedelta_repr(days: i128, seconds: i128, micro: i128) -> String {
    let mut parts = Vec::new();
    if days != 0 {
        parts.push(format!("days={days}"));
    }
    if seconds != 0 {
        parts.push(format!("seconds={seconds}"));
    }
    if micro != 0 {
        parts.push(format!("microseconds={micro}"));
    }
    if parts.is_empty() {
        parts.push("0".into());
    }
    format!("datetime.timedelta({})", parts.join(", "))
}

/// A bignum's decimal digits (tag 3 means -1 - n). The magnitude is at most the prefix, so
/// the schoolbook division costs little.
fn bignum_text(negative: bool, magnitude: &[u8]) -> String {
    let mut limbs: Vec<u32> = magnitude
        .rchunks(4)
        .rev()
        .map(|c| c.iter().fold(0u32, |v, &x| v << 8 | u32::from(x)))
        .collect();
    let mut groups = Vec::new();
    loop {
        while limbs.first() == Some(&0) {
            limbs.remove(0);
        }
        if limbs.is_empty() {
            break;
        }
        let mut rem = 0u64;
        for limb in &mut limbs {
            let cur = rem << 32 | u64::from(*limb);
            *limb = (cur / 1_000_000_000) as u32;
            rem = cur % 1_000_000_000;
        }
        groups.push(rem as u32);
    }
    // -1 - n: add one to the magnitude's digits before the sign.
    if negative {
        let mut carry = true;
        for g in &mut groups {
            if !carry {
                break;
            }
            *g += 1;
            carry = *g == 1_000_000_000;
            if carry {
                *g = 0;
            }
        }
        if carry {
            groups.push(1);
        }
    }
    let mut text = String::from(if negative { "-" } else { "" });
    match groups.split_last() {
        None => text.push('0'),
        Some((top, rest)) => {
            let _ = write!(text, "{top}");
            for g in rest.iter().rev() {
                let _ = write!(text, "{g:09}");
            }
        }
    }
    text
}

/// RFC 8949 Appendix D (as `decode` reads it).
fn f16_to_f64(half: u16) -> f64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_read_as_python_writes_them() {
        for (f, text) in [
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (-0.0, "-0.0"),
            (1e15, "1000000000000000.0"),
            (123.456, "123.456"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.1, "0.1"),
            (100.0, "100.0"),
            (2.5e-7, "2.5e-07"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ] {
            assert_eq!(float_repr(f), text, "{f:?}");
        }
    }

    #[test]
    fn bignums_in_decimal() {
        assert_eq!(
            bignum_text(false, &[1, 0, 0, 0, 0, 0, 0, 0, 0]),
            "18446744073709551616"
        );
        assert_eq!(
            bignum_text(true, &[1, 0, 0, 0, 0, 0, 0, 0, 0]),
            "-18446744073709551617"
        );
        assert_eq!(bignum_text(false, &[0, 0]), "0");
        assert_eq!(bignum_text(true, &[]), "-1");
        assert_eq!(bignum_text(true, &[0x3b, 0x9a, 0xc9, 0xff]), "-1000000000");
    }
}
