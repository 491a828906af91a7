//! Python's repr, written into a preview's text: the plain kinds (an int or a float's eight
//! bytes, a str, bytes), and the pieces the reader of the safe format writes (str and bytes
//! literals, floats, bignums, timedeltas). Apart from the reader because none of it reads CBOR:
//! it turns values already read into the text Python would print.

use super::{Out, Step, Stop};
use crate::format::kind::Kind;
use std::fmt::Write as _;

pub(super) fn number(out: &mut Out, kind: Kind, prefix: &[u8], total: u64) -> Step {
    let Ok(bytes) = <[u8; 8]>::try_from(prefix) else {
        return Err(Stop::Damaged(format!("a number of {total} bytes, not 8")));
    };
    if kind == Kind::Int {
        out.push(&i64::from_le_bytes(bytes).to_string())
    } else {
        out.push(&float_repr(f64::from_le_bytes(bytes)))
    }
}

pub(super) fn text_payload(out: &mut Out, prefix: &[u8], whole: bool) -> Step {
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
pub(super) fn utf8_prefix(bytes: &[u8], at: usize) -> Result<(&str, &[u8]), Stop> {
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
pub(super) fn quote_for(bytes: &[u8]) -> char {
    if bytes.contains(&b'\'') && !bytes.contains(&b'"') {
        '"'
    } else {
        '\''
    }
}

pub(super) fn quote_str(quote: char) -> &'static str {
    if quote == '"' {
        "\""
    } else {
        "'"
    }
}

/// A str literal as Python's repr writes it.
pub(super) fn str_literal(out: &mut Out, s: &str) -> Step {
    let quote = quote_for(s.as_bytes());
    out.open(quote_str(quote), quote_str(quote))?;
    str_body(out, s, Some(quote))?;
    out.close()
}

/// A str's characters as Python's repr escapes them between `quote`s (None: no quotes).
pub(super) fn str_body(out: &mut Out, s: &str, quote: Option<char>) -> Step {
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
pub(super) fn bytes_literal(out: &mut Out, b: &[u8], whole: bool) -> Step {
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
pub(super) fn float_repr(f: f64) -> String {
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

pub(super) fn timedelta_repr(days: i128, seconds: i128, micro: i128) -> String {
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
pub(super) fn bignum_text(negative: bool, magnitude: &[u8]) -> String {
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
