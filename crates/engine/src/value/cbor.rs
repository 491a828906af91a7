//! CBOR encoding and decoding of [`Value`]. (Implementation pending.)

use super::Value;
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

/// Encode a value (dict and set order preserved as given).
pub fn encode(value: &Value) -> Vec<u8> {
    let _ = value;
    todo!("value codec")
}

/// Encode a value as a cache key: deterministic, so equal keys give equal bytes
/// (set and frozenset elements and dict entries sorted by their encoded bytes).
pub fn encode_key(value: &Value) -> Vec<u8> {
    let _ = value;
    todo!("value codec")
}

/// Decode bytes produced by [`encode`] or [`encode_key`].
pub fn decode(bytes: &[u8]) -> Result<Value, DecodeError> {
    let _ = bytes;
    todo!("value codec")
}
