//! Shared helpers: bit-exact value equality, the order `encode_key` writes, set and dict
//! permutations, an independent integer encoding, hex literals, decode errors, dates and times.

use diskcache_oxide_engine::value::{decode, encode_key, Date, Time, TimeZone, Value};

/// Structural equality with floats compared by bits, so NaN equals itself and -0.0 differs from 0.0.
pub(crate) fn same(a: &Value, b: &Value) -> bool {
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
pub(crate) fn key_order(v: &Value) -> Value {
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
pub(crate) fn permute(v: &Value, seed: &mut u64) -> Value {
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
pub(crate) fn int_from_bytes(bytes: &[u8]) -> Value {
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

pub(crate) fn int128(n: i128) -> Value {
    int_from_bytes(&n.to_be_bytes())
}

/// An independent statement of the integer rule: major 0/1 within 64 bits, else tag 2/3.
pub(crate) fn reference_int_encoding(n: i128) -> Vec<u8> {
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

pub(crate) fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

pub(crate) fn decode_err(bytes: &[u8]) -> String {
    match decode(bytes) {
        Ok(v) => panic!("decoded {bytes:02x?} to {v:?}, expected an error"),
        Err(e) => e.to_string(),
    }
}

pub(crate) fn days_in_month(year: i32, month: u8) -> u8 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => 31,
    }
}

pub(crate) fn date(year: i32, month: u8, day: u8) -> Date {
    Date { year, month, day }
}

pub(crate) fn time(
    hour: u8,
    minute: u8,
    second: u8,
    microsecond: u32,
    tz: Option<TimeZone>,
) -> Time {
    Time {
        hour,
        minute,
        second,
        microsecond,
        tz,
        fold: 0,
    }
}
