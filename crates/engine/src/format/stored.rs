//! Values as the engine stores them: a kind, a payload, and a CRC32C of the payload.

use crate::format::value::{self, Value};
use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use super::kind::Kind;

/// A value handed to the engine for writing. Borrowed, so large payloads are never copied.
#[derive(Debug, Clone, Copy)]
pub enum ValueRef<'a> {
    Int(i64),
    Float(f64),
    Str(&'a str),
    Bytes(&'a [u8]),
    Encoded(&'a [u8]),
    Pickled(&'a [u8]),
}

impl<'a> ValueRef<'a> {
    pub fn kind(&self) -> Kind {
        match self {
            ValueRef::Int(_) => Kind::Int,
            ValueRef::Float(_) => Kind::Float,
            ValueRef::Str(_) => Kind::Str,
            ValueRef::Bytes(_) => Kind::Bytes,
            ValueRef::Encoded(_) => Kind::Encoded,
            ValueRef::Pickled(_) => Kind::Pickled,
        }
    }

    /// The payload bytes that the checksum covers and that a value file holds.
    pub(crate) fn payload(&self) -> Payload<'a> {
        match *self {
            ValueRef::Int(i) => Payload::Fixed(i.to_le_bytes()),
            ValueRef::Float(f) => Payload::Fixed(f.to_le_bytes()),
            ValueRef::Str(s) => Payload::Slice(s.as_bytes()),
            ValueRef::Bytes(b) | ValueRef::Encoded(b) | ValueRef::Pickled(b) => Payload::Slice(b),
        }
    }
}

pub(crate) enum Payload<'a> {
    Fixed([u8; 8]),
    Slice(&'a [u8]),
}

impl Payload<'_> {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Payload::Fixed(b) => b,
            Payload::Slice(s) => s,
        }
    }
}

/// A value read back from the engine, its checksum already verified.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredValue {
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    Encoded(Vec<u8>),
    Pickled(Vec<u8>),
    /// Bytes kept in a value file, returned open when the caller asked for a handle
    /// (python-diskcache's `read=True`). Its checksum was verified through this very
    /// descriptor, so a concurrent delete or overwrite of the name cannot change what it reads.
    File(ValueHandle),
    /// Bytes kept in a value file, not read yet (from [`crate::Cache::get_deferred`]).
    Deferred(ValueFile),
}

/// A verified value file, open at its start, and the path it was opened by.
#[derive(Debug, Clone)]
pub struct ValueHandle {
    pub(crate) path: PathBuf,
    pub(crate) file: Arc<std::fs::File>,
    pub(crate) size: u64,
}

impl ValueHandle {
    /// The path the file was opened by (it may since have been unlinked or replaced).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its length in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The open file, positioned at its start (a duplicate descriptor if the handle was cloned).
    pub fn into_file(self) -> std::io::Result<std::fs::File> {
        match Arc::try_unwrap(self.file) {
            Ok(f) => Ok(f),
            Err(shared) => {
                let f = shared.try_clone()?;
                std::io::Seek::rewind(&mut &f)?;
                Ok(f)
            }
        }
    }

    /// All of its bytes, read from the verified descriptor.
    pub fn read_all(&self) -> Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let name = self.path.display().to_string();
        let mut data = Vec::new();
        crate::basics::reserve(&mut data, self.size, &name)?;
        data.resize(self.size as usize, 0);
        self.file
            .read_exact_at(&mut data, 0)
            .map_err(|e| Error::io("reading a value file", Some(self.path.clone()), e))?;
        Ok(data)
    }
}

impl PartialEq for ValueHandle {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path && self.size == other.size
    }
}

/// A value file a deferred read names; read it with [`crate::Cache::read_value_file`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueFile {
    pub(crate) name: String,
    pub(crate) crc: u32,
    /// Its length in bytes, as recorded when it was written.
    pub size: u64,
}

impl StoredValue {
    /// Decode into the safe format. Pickles are refused: a Rust reader never unpickles.
    pub fn into_value(self) -> Result<Value> {
        Ok(match self {
            StoredValue::Int(i) => Value::Int(i),
            StoredValue::Float(f) => Value::Float(f),
            StoredValue::Str(s) => Value::Str(s),
            StoredValue::Bytes(b) => Value::Bytes(b),
            StoredValue::Encoded(b) => {
                value::decode(&b).map_err(|e| Error::corrupt(e.to_string()))?
            }
            StoredValue::Pickled(_) => {
                return Err(Error::Unsafe {
                    what: crate::error::Pickled::Value,
                })
            }
            StoredValue::File(h) => Value::Bytes(h.read_all()?),
            StoredValue::Deferred(f) => {
                return Err(Error::invalid(format!(
                    "a deferred value ({} bytes) must be read with Cache::read_value_file",
                    f.size
                )))
            }
        })
    }
}

/// One entry as returned by a read: the value plus the metadata python-diskcache can return beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub value: StoredValue,
    pub expire_time: Option<f64>,
    pub tag: Option<crate::Scalar>,
}

/// The CRC32C (Castagnoli) stored with every value (D-002). `crc-fast` folds with carry-less
/// multiplication where the CPU has it: half the time of a `crc32` instruction loop on a 1 MB
/// value here, and the same result everywhere.
pub fn checksum(bytes: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

/// [`checksum`] of bytes that arrive in pieces (value files streamed in or out).
pub(crate) struct Checksum(crc_fast::Digest);

impl Checksum {
    pub(crate) fn new() -> Checksum {
        Checksum(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi))
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub(crate) fn value(&self) -> u32 {
        self.0.finalize() as u32
    }
}
