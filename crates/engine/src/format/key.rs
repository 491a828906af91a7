//! Keys and tags as they are stored in the `key` and `tag` columns.

use crate::format::value::{self, Value};
use crate::{Error, Result};

/// A value SQLite stores natively: what a tag can be, and what most keys are.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
}

/// How a key is stored. Native keys sort and compare as SQLite orders them
/// (numbers, then text, then blobs; `1` and `1.0` are one key). Other keys are
/// stored as the bytes of their encoding and are equal only when those bytes are.
#[derive(Debug, Clone, PartialEq)]
pub enum Key {
    Native(Scalar),
    /// Canonical safe-format encoding (see [`value::encode_key`]).
    Encoded(Vec<u8>),
    /// A pickle, written only by handles opened with `pickle=True`.
    Pickled(Vec<u8>),
}

/// The `raw` column: which of the three forms a stored key has.
pub(crate) const RAW_ENCODED: i64 = 0;
pub(crate) const RAW_NATIVE: i64 = 1;
pub(crate) const RAW_PICKLED: i64 = 2;

impl Key {
    /// The key for a safe-format value: native where SQLite can hold it, encoded otherwise.
    pub fn from_value(value: &Value) -> Result<Key> {
        Ok(match value {
            Value::Int(i) => Key::Native(Scalar::Int(*i)),
            Value::Float(f) => Key::Native(Scalar::Float(check_float_key(*f)?)),
            Value::Str(s) => Key::Native(Scalar::Str(s.clone())),
            Value::Bytes(b) => Key::Native(Scalar::Bytes(b.clone())),
            other => Key::Encoded(value::encode_key(other)),
        })
    }

    /// The key as a safe-format value. A pickled key yields `Error::Unsafe`.
    pub fn to_value(&self) -> Result<Value> {
        match self {
            Key::Native(Scalar::Int(i)) => Ok(Value::Int(*i)),
            Key::Native(Scalar::Float(f)) => Ok(Value::Float(*f)),
            Key::Native(Scalar::Str(s)) => Ok(Value::Str(s.clone())),
            Key::Native(Scalar::Bytes(b)) => Ok(Value::Bytes(b.clone())),
            Key::Encoded(b) => {
                value::decode(b).map_err(|e| Error::corrupt(format!("stored key: {e}")))
            }
            Key::Pickled(_) => Err(Error::Unsafe {
                what: crate::error::Pickled::Key,
            }),
        }
    }

    pub(crate) fn raw(&self) -> i64 {
        match self {
            Key::Native(_) => RAW_NATIVE,
            Key::Encoded(_) => RAW_ENCODED,
            Key::Pickled(_) => RAW_PICKLED,
        }
    }
}

/// SQLite stores NaN as NULL, so a NaN key could be written but never found again.
pub fn check_float_key(f: f64) -> Result<f64> {
    if f.is_nan() {
        return Err(Error::invalid(
            "key: NaN cannot be a cache key because it never equals itself; use another key",
        ));
    }
    Ok(f)
}

impl From<&str> for Key {
    fn from(s: &str) -> Key {
        Key::Native(Scalar::Str(s.to_owned()))
    }
}

impl From<String> for Key {
    fn from(s: String) -> Key {
        Key::Native(Scalar::Str(s))
    }
}

impl From<i64> for Key {
    fn from(i: i64) -> Key {
        Key::Native(Scalar::Int(i))
    }
}

impl From<&[u8]> for Key {
    fn from(b: &[u8]) -> Key {
        Key::Native(Scalar::Bytes(b.to_vec()))
    }
}

impl From<&str> for Scalar {
    fn from(s: &str) -> Scalar {
        Scalar::Str(s.to_owned())
    }
}

/// Which end of a queue a push or pull works at (D-054). It is part of how a queue key is
/// read, so it lives with the keys; `queue.rs` and the memo of recent reads both use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    Front,
    Back,
}

impl Side {
    pub fn parse(name: &str) -> Result<Side> {
        match name {
            "front" => Ok(Side::Front),
            "back" => Ok(Side::Back),
            other => Err(Error::invalid(format!(
                "side: expected 'front' or 'back', got {other:?}"
            ))),
        }
    }

    pub(crate) fn order(self) -> &'static str {
        match self {
            Side::Front => "ASC",
            Side::Back => "DESC",
        }
    }
}
