//! One value, or one key, as a self-describing byte string: what a store without the cache's
//! columns keeps (a Redis server, D-058), so that a directory, Redis and a Rust program read
//! the same bytes. The payload is exactly what a directory stores; the frame only carries
//! what the directory keeps in its `kind`, `raw` and checksum columns.
//!
//! A value frame, version 1:
//!
//! ```text
//! offset  0      3        4       5                 9
//!         +------+--------+-------+-----------------+-------------------------+
//!         | DCO  | 0x01   | kind  | CRC32C (LE u32) | payload                 |
//!         +------+--------+-------+-----------------+-------------------------+
//!          magic  version  1..=6   of the payload    as the directory stores it
//! ```
//!
//! The payload of an int or a float is its 8 little-endian bytes, of a str its UTF-8, of the
//! safe format its CBOR, of a pickle the pickle (see [`Kind`]).
//!
//! A key frame is one tag byte and the key's stored bytes, with no checksum: it names a
//! Redis key, so it is short, and equal keys give equal frames. `i` + 8 LE bytes (an int, or
//! a float with an integral value that fits, since the directory holds `1` and `1.0` as one
//! key), `f` + 8 LE bytes (another float), `s` + UTF-8, `b` + bytes, `e` + the canonical safe
//! encoding of any other key, `p` + a pickle.

use super::key::{Key, Scalar};
use super::stored::{checksum, Kind, StoredValue, ValueRef};
use crate::{Error, Result};

const MAGIC: &[u8; 3] = b"DCO";
const VERSION: u8 = 1;
const HEADER: usize = 9;

/// The frame of a value.
pub fn encode_value(value: ValueRef<'_>) -> Vec<u8> {
    let payload = value.payload();
    let bytes = payload.bytes();
    let mut out = Vec::with_capacity(HEADER + bytes.len());
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.push(value.kind() as i64 as u8);
    out.extend_from_slice(&checksum(bytes).to_le_bytes());
    out.extend_from_slice(bytes);
    out
}

/// The value a frame holds, its checksum verified. Damaged or foreign bytes are
/// [`Error::Corrupt`]; a pickle comes back as [`StoredValue::Pickled`], for the caller to
/// refuse or unpickle.
pub fn decode_value(frame: &[u8]) -> Result<StoredValue> {
    let bad = |why: &str| Error::corrupt(format!("a stored value frame {why}"));
    if frame.len() < HEADER || &frame[..3] != MAGIC {
        return Err(bad(
            "does not start with the DCO header; it was not written by this library",
        ));
    }
    if frame[3] != VERSION {
        return Err(bad(&format!(
            "has version {}, which this build does not read (it reads {VERSION}); upgrade",
            frame[3]
        )));
    }
    let kind = Kind::from_i64(i64::from(frame[4]))?;
    let crc = u32::from_le_bytes([frame[5], frame[6], frame[7], frame[8]]);
    let payload = &frame[HEADER..];
    if checksum(payload) != crc {
        return Err(bad("does not match its checksum; the bytes were damaged"));
    }
    let fixed = || -> Result<[u8; 8]> {
        payload
            .try_into()
            .map_err(|_| bad("holds a number that is not 8 bytes long"))
    };
    Ok(match kind {
        Kind::Int => StoredValue::Int(i64::from_le_bytes(fixed()?)),
        Kind::Float => StoredValue::Float(f64::from_le_bytes(fixed()?)),
        Kind::Str => StoredValue::Str(
            String::from_utf8(payload.to_vec()).map_err(|_| bad("holds text that is not UTF-8"))?,
        ),
        Kind::Bytes => StoredValue::Bytes(payload.to_vec()),
        Kind::Encoded => StoredValue::Encoded(payload.to_vec()),
        Kind::Pickled => StoredValue::Pickled(payload.to_vec()),
    })
}

/// The frame of a key: equal keys (as the directory compares them) give equal frames.
pub fn encode_key(key: &Key) -> Vec<u8> {
    let tagged = |tag: u8, bytes: &[u8]| {
        let mut out = Vec::with_capacity(1 + bytes.len());
        out.push(tag);
        out.extend_from_slice(bytes);
        out
    };
    match key {
        Key::Native(Scalar::Int(i)) => tagged(b'i', &i.to_le_bytes()),
        Key::Native(Scalar::Float(f)) => match integral(*f) {
            Some(i) => tagged(b'i', &i.to_le_bytes()),
            None => tagged(b'f', &f.to_le_bytes()),
        },
        Key::Native(Scalar::Str(s)) => tagged(b's', s.as_bytes()),
        Key::Native(Scalar::Bytes(b)) => tagged(b'b', b),
        Key::Encoded(b) => tagged(b'e', b),
        Key::Pickled(b) => tagged(b'p', b),
    }
}

/// The key a frame names.
pub fn decode_key(frame: &[u8]) -> Result<Key> {
    let bad = |why: &str| Error::corrupt(format!("a stored key frame {why}"));
    let Some((&tag, rest)) = frame.split_first() else {
        return Err(bad("is empty"));
    };
    let fixed = || -> Result<[u8; 8]> {
        rest.try_into()
            .map_err(|_| bad("holds a number that is not 8 bytes long"))
    };
    Ok(match tag {
        b'i' => Key::Native(Scalar::Int(i64::from_le_bytes(fixed()?))),
        b'f' => Key::Native(Scalar::Float(f64::from_le_bytes(fixed()?))),
        b's' => Key::Native(Scalar::Str(
            String::from_utf8(rest.to_vec()).map_err(|_| bad("holds text that is not UTF-8"))?,
        )),
        b'b' => Key::Native(Scalar::Bytes(rest.to_vec())),
        b'e' => Key::Encoded(rest.to_vec()),
        b'p' => Key::Pickled(rest.to_vec()),
        other => return Err(bad(&format!("has an unknown tag byte {other:#04x}"))),
    })
}

/// `f` as an i64 when it is one exactly (so that `1.0` and `1` name one key, as in SQLite).
fn integral(f: f64) -> Option<i64> {
    // -2^63 is exact as an f64; 2^63 is not an i64.
    let bound = -(i64::MIN as f64); // 2^63, exact
    (f.fract() == 0.0 && (-bound..bound).contains(&f)).then_some(f as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_back_as_they_went_in() {
        let cases = [
            ValueRef::Int(-7),
            ValueRef::Float(2.5),
            ValueRef::Str("héllo"),
            ValueRef::Bytes(b"\0\xff"),
            ValueRef::Encoded(&[0x82, 0x01, 0x02]),
            ValueRef::Pickled(b"\x80\x05N."),
        ];
        for v in cases {
            let frame = encode_value(v);
            assert_eq!(&frame[..4], b"DCO\x01");
            let back = decode_value(&frame).unwrap();
            let again = match &back {
                StoredValue::Int(i) => encode_value(ValueRef::Int(*i)),
                StoredValue::Float(f) => encode_value(ValueRef::Float(*f)),
                StoredValue::Str(s) => encode_value(ValueRef::Str(s)),
                StoredValue::Bytes(b) => encode_value(ValueRef::Bytes(b)),
                StoredValue::Encoded(b) => encode_value(ValueRef::Encoded(b)),
                StoredValue::Pickled(b) => encode_value(ValueRef::Pickled(b)),
                other => panic!("{other:?}"),
            };
            assert_eq!(again, frame);
        }
    }

    #[test]
    fn damaged_and_foreign_frames_are_corrupt_not_a_panic() {
        let good = encode_value(ValueRef::Str("value"));
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let mut short_int = encode_value(ValueRef::Int(1));
        short_int.pop();
        let mut future = good.clone();
        future[3] = 9;
        for frame in [
            &b""[..],
            b"DCO",
            b"pickle!!!!",
            &flipped,
            &short_int,
            &future,
        ] {
            assert!(
                matches!(decode_value(frame), Err(Error::Corrupt(_))),
                "{frame:?}"
            );
        }
        for frame in [&b""[..], b"x", b"i123", b"s\xff"] {
            assert!(
                matches!(decode_key(frame), Err(Error::Corrupt(_))),
                "{frame:?}"
            );
        }
    }

    #[test]
    fn keys_the_directory_holds_as_one_have_one_frame() {
        let one = encode_key(&Key::Native(Scalar::Int(1)));
        assert_eq!(encode_key(&Key::Native(Scalar::Float(1.0))), one);
        assert_eq!(
            encode_key(&Key::Native(Scalar::Float(-0.0))),
            encode_key(&Key::Native(Scalar::Int(0)))
        );
        assert_ne!(encode_key(&Key::Native(Scalar::Float(1.5))), one);
        assert_ne!(encode_key(&Key::Native(Scalar::Str("1".into()))), one);
        assert_eq!(encode_key(&Key::Native(Scalar::Float(1e300)))[0], b'f');
        for key in [
            Key::Native(Scalar::Int(i64::MIN)),
            Key::Native(Scalar::Float(0.25)),
            Key::Native(Scalar::Str("k".into())),
            Key::Native(Scalar::Bytes(vec![0, 1])),
            Key::Encoded(vec![0x82, 1, 2]),
            Key::Pickled(vec![0x80, 5]),
        ] {
            assert_eq!(decode_key(&encode_key(&key)).unwrap(), key);
        }
    }
}
