//! Reading a prefix of the safe format (CBOR, D-002) for a preview: item heads, lengths, and
//! each major type and tag, walked item by item as far as the width needs. Running out of the
//! prefix is a cut (`…`), or damage when the prefix is the whole payload; bytes the format does
//! not allow are damage. Apart from the rendering (`repr.rs`) because this is the part that
//! knows the format's layout; what it writes, it writes through `repr.rs`.

use super::repr::{
    bignum_text, bytes_literal, float_repr, quote_for, quote_str, str_body, str_literal,
    timedelta_repr, utf8_prefix,
};
use super::{Out, Step, Stop};
use crate::format::value::cbor::{
    f16_to_f64, TAG_CUSTOM, TAG_DATE, TAG_DATETIME, TAG_DECIMAL, TAG_FROZENSET, TAG_NEG_BIGNUM,
    TAG_PATH, TAG_POS_BIGNUM, TAG_SET, TAG_TIME, TAG_TIMEDELTA, TAG_TIMEZONE, TAG_TUPLE, TAG_UUID,
};
use crate::format::value::MAX_DEPTH;
use std::fmt::Write as _;

struct Head {
    major: u8,
    info: u8,
    arg: u64,
    at: usize,
}

pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
    /// Whether `buf` is the whole payload: running out is then damage, not a cut.
    pub(super) whole: bool,
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

    pub(super) fn item(&mut self, out: &mut Out, depth: usize) -> Step {
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
