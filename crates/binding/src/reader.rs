//! A `std::io::Read` over a Python binary file, for `set(..., read=True)`.
//!
//! The engine reads it with the GIL released; each refill re-attaches to Python just long
//! enough to call `file.read(CHUNK)`.

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};
use std::io;

/// Bytes asked of the Python file per call (python-diskcache reads 4 MiB at a time).
const CHUNK: usize = 1 << 22;

pub(crate) struct PyReader {
    file: Py<PyAny>,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    /// The Python exception that stopped the read, re-raised once the engine returns.
    pub(crate) error: Option<PyErr>,
}

impl PyReader {
    pub(crate) fn new(file: Py<PyAny>) -> Self {
        PyReader {
            file,
            buf: Vec::new(),
            pos: 0,
            eof: false,
            error: None,
        }
    }

    fn refill(&mut self) -> PyResult<()> {
        Python::attach(|py| {
            let chunk = self
                .file
                .bind(py)
                .call_method1(intern!(py, "read"), (CHUNK,))?;
            self.buf.clear();
            if let Ok(b) = chunk.cast::<PyBytes>() {
                self.buf.extend_from_slice(b.as_bytes());
            } else if let Ok(b) = chunk.cast::<PyByteArray>() {
                self.buf.extend_from_slice(&b.to_vec());
            } else {
                return Err(PyTypeError::new_err(format!(
                    "set(..., read=True) needs a file opened in binary mode whose read() \
                     returns bytes, but read() returned {}; open the file with 'rb'",
                    chunk.get_type().name()?
                )));
            }
            self.pos = 0;
            self.eof = self.buf.is_empty();
            Ok(())
        })
    }
}

impl io::Read for PyReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        if self.pos == self.buf.len() {
            if self.error.is_some() {
                // Never let a failed read look like the end of the file.
                return Err(io::Error::other("reading the Python file failed"));
            }
            if self.eof {
                return Ok(0);
            }
            if let Err(e) = self.refill() {
                self.error = Some(e);
                return Err(io::Error::other("reading the Python file failed"));
            }
            if self.eof {
                return Ok(0);
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}
