//! The `kind` column of a stored value (a leaf of the formats: [`crate::value`]'s preview and
//! [`super::stored`] both read it, and it imports neither).

use crate::{Error, Result};

/// The `kind` column: how the payload bytes are to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i64)]
pub enum Kind {
    Int = 1,
    Float = 2,
    Str = 3,
    Bytes = 4,
    /// The safe format (CBOR), see [`crate::value`].
    Encoded = 5,
    /// A pickle; written only with `pickle=True`, read only with `pickle=True`.
    Pickled = 6,
}

impl Kind {
    pub(crate) fn from_i64(k: i64) -> Result<Kind> {
        Ok(match k {
            1 => Kind::Int,
            2 => Kind::Float,
            3 => Kind::Str,
            4 => Kind::Bytes,
            5 => Kind::Encoded,
            6 => Kind::Pickled,
            other => {
                return Err(Error::corrupt(format!(
                    "unknown value kind {other} in a row"
                )))
            }
        })
    }
}
