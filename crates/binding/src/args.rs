//! Argument types: how the binding's calls read their Python arguments, and the one check of
//! "a number of seconds" (timeouts, leases, delays, expiries). A leaf module: it uses no other
//! module of the binding.
//!
//! Each error names the parameter and says what it accepts: `"<name> must be <what it
//! accepts>, not <what it got>"` (the type's name for a wrong type, the repr for a value out
//! of range).

use diskcache_oxide_engine::value::PREVIEW_MAX_WIDTH;
use diskcache_oxide_engine::Side;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString, PyTuple};
use std::time::Duration;

/// The name of `obj`'s type, for an error message.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "<unknown type>".to_owned())
}

// ---- seconds ---------------------------------------------------------------------------------

/// What a seconds argument accepts besides an int or a float.
#[derive(Clone, Copy)]
pub(crate) struct Seconds {
    /// None is accepted (and read as `None`).
    pub none: bool,
    /// A bool is accepted as the int it is (only `expire`, as python-diskcache takes it).
    pub bool: bool,
    /// Only a finite number >= 0; otherwise any number but NaN.
    pub span: bool,
    /// With `span`: also one a `Duration` can hold (under about 1.8e19), for a wait.
    pub duration: bool,
}

impl Seconds {
    /// A lease, a delay, a retry time: a finite number of seconds >= 0.
    pub(crate) const SPAN: Seconds = Seconds {
        none: false,
        bool: false,
        span: true,
        duration: false,
    };
    /// A handle's lock `timeout`: a finite number of seconds >= 0 that a `Duration` holds.
    pub(crate) const LOCK_WAIT: Seconds = Seconds {
        none: false,
        bool: false,
        span: true,
        duration: true,
    };
    /// A blocking `timeout`: None (do not wait) or a finite number of seconds >= 0 (that a
    /// `Duration` holds).
    pub(crate) const WAIT: Seconds = Seconds {
        none: true,
        bool: false,
        span: true,
        duration: true,
    };
    /// An `expire`: None (never) or a number of seconds from now. Negative means expired at
    /// once and infinity never; NaN is refused, as it would make the entry neither live nor
    /// expired.
    pub(crate) const EXPIRE: Seconds = Seconds {
        none: true,
        bool: true,
        span: false,
        duration: false,
    };

    /// What it accepts, as an error message says it: for a wrong type (`range: false`) or
    /// for a number out of range.
    fn accepted(self, range: bool) -> String {
        let number = match (range, self.span) {
            (false, _) => "a number of seconds",
            (true, true) => "a finite number of seconds >= 0",
            (true, false) => "a number of seconds other than NaN",
        };
        if self.none {
            format!("None or {number}")
        } else {
            number.to_owned()
        }
    }
}

/// The binding's one check of "a number of seconds": `obj` must be an int or a float (not a
/// bool, unless `accept.bool`), or None if `accept.none`, and in `accept`'s range. Returns
/// the seconds, `None` for an accepted None.
pub(crate) fn seconds(
    name: &str,
    obj: &Bound<'_, PyAny>,
    accept: Seconds,
) -> PyResult<Option<f64>> {
    if accept.none && obj.is_none() {
        return Ok(None);
    }
    let number = (accept.bool || !obj.is_instance_of::<PyBool>())
        && (obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyFloat>());
    if !number {
        return Err(PyTypeError::new_err(format!(
            "{name} must be {}, not {}",
            accept.accepted(false),
            type_name(obj)
        )));
    }
    let value: f64 = obj.extract()?;
    in_range(name, value, accept, || obj.repr()).map(Some)
}

/// [`seconds`] for a number already read as an f64 (an argument Python checked the type of).
pub(crate) fn seconds_f64(
    py: Python<'_>,
    name: &str,
    value: f64,
    accept: Seconds,
) -> PyResult<f64> {
    in_range(name, value, accept, || PyFloat::new(py, value).repr())
}

fn in_range<'py>(
    name: &str,
    value: f64,
    accept: Seconds,
    shown: impl FnOnce() -> PyResult<Bound<'py, PyString>>,
) -> PyResult<f64> {
    let ok = if accept.duration {
        Duration::try_from_secs_f64(value).is_ok()
    } else if accept.span {
        value.is_finite() && value >= 0.0
    } else {
        !value.is_nan()
    };
    if ok {
        return Ok(value);
    }
    Err(PyValueError::new_err(format!(
        "{name} must be {}, not {}",
        accept.accepted(true),
        shown()?
    )))
}

// ---- the other arguments ---------------------------------------------------------------------

/// A truthy/falsy flag argument (python-diskcache accepts any truthy value, e.g. `read=1`).
#[derive(Clone, Copy, Default)]
pub(crate) struct Flag(pub bool);

impl<'a, 'py> FromPyObject<'a, 'py> for Flag {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Flag(obj.is_truthy()?))
    }
}

/// `prefix`: a str or None.
pub(crate) struct PrefixArg(pub Option<String>);

impl<'a, 'py> FromPyObject<'a, 'py> for PrefixArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_none() {
            return Ok(PrefixArg(None));
        }
        match obj.cast::<PyString>() {
            Ok(s) => Ok(PrefixArg(Some(s.to_str()?.to_owned()))),
            Err(_) => Err(PyTypeError::new_err(format!(
                "prefix must be a str or None, not {}",
                type_name(&obj.to_owned())
            ))),
        }
    }
}

/// `side`: 'front' or 'back'.
pub(crate) struct SideArg(pub Side);

impl<'a, 'py> FromPyObject<'a, 'py> for SideArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(s) = obj.cast::<PyString>() {
            match s.to_str()? {
                "front" => return Ok(SideArg(Side::Front)),
                "back" => return Ok(SideArg(Side::Back)),
                _ => {}
            }
        }
        Err(PyValueError::new_err(format!(
            "side must be 'front' or 'back', not {}",
            obj.repr()?
        )))
    }
}

/// A blocking `timeout` ([`Seconds::WAIT`]).
pub(crate) struct WaitArg(pub Option<Duration>);

impl<'a, 'py> FromPyObject<'a, 'py> for WaitArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let found = seconds("timeout", &obj.to_owned(), Seconds::WAIT)?;
        // In range: `in_range` checked that it converts.
        Ok(WaitArg(found.map(Duration::from_secs_f64)))
    }
}

/// An `expire` ([`Seconds::EXPIRE`]).
pub(crate) struct ExpireArg(pub Option<f64>);

impl<'a, 'py> FromPyObject<'a, 'py> for ExpireArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        seconds("expire", &obj.to_owned(), Seconds::EXPIRE).map(ExpireArg)
    }
}

/// A count `n`: an int >= 0.
pub(crate) struct CountArg(pub usize);

impl<'a, 'py> FromPyObject<'a, 'py> for CountArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
            return Err(PyTypeError::new_err(format!(
                "n must be an int, not {}",
                type_name(&obj.to_owned())
            )));
        }
        let n: i64 = obj.extract().map_err(|_| {
            PyValueError::new_err(format!(
                "n must be an int >= 0 that fits in 64 bits, not {}",
                obj.to_owned()
            ))
        })?;
        usize::try_from(n)
            .map(CountArg)
            .map_err(|_| PyValueError::new_err(format!("n must be >= 0, not {n}")))
    }
}

/// A preview's width from Python: None, or 1 to the engine's widest.
pub(crate) fn preview_width(width: Option<i64>) -> PyResult<Option<usize>> {
    match width {
        None => Ok(None),
        Some(w) if (1..=PREVIEW_MAX_WIDTH as i64).contains(&w) => Ok(Some(w as usize)),
        Some(w) => Err(PyValueError::new_err(format!(
            "preview: a width of 1 to {PREVIEW_MAX_WIDTH} characters, or None, not {w}"
        ))),
    }
}

/// An int argument that is usually an i64 (delta and default of `incr`).
pub(crate) enum Num<'py> {
    Int(i64),
    Obj(Bound<'py, PyAny>),
}

impl<'a, 'py> FromPyObject<'a, 'py> for Num<'py> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_exact_instance_of::<PyInt>() {
            if let Ok(i) = obj.extract::<i64>() {
                return Ok(Num::Int(i));
            }
        }
        Ok(Num::Obj(obj.to_owned()))
    }
}

impl<'py> Num<'py> {
    /// `delta` of incr/decr: an int or a float, named in the error otherwise.
    pub(crate) fn check_delta(&self) -> PyResult<()> {
        match self {
            Num::Int(_) => Ok(()),
            Num::Obj(o) if o.is_instance_of::<PyInt>() || o.is_instance_of::<PyFloat>() => Ok(()),
            Num::Obj(o) => Err(PyTypeError::new_err(format!(
                "delta must be an int or a float, not {}",
                o.get_type().name()?
            ))),
        }
    }

    pub(crate) fn to_object(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self {
            Num::Int(i) => i.into_pyobject(py)?.into_any(),
            Num::Obj(o) => o.clone(),
        })
    }
}

/// `pull`'s and `peek`'s `default`: python-diskcache's `(None, None)` unless one is given
/// (an explicit `None` included).
pub(crate) enum PairDefault<'py> {
    Pair,
    Given(Bound<'py, PyAny>),
}

impl<'a, 'py> FromPyObject<'a, 'py> for PairDefault<'py> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(PairDefault::Given(obj.to_owned()))
    }
}

impl<'py> PairDefault<'py> {
    pub(crate) fn resolve(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            PairDefault::Given(obj) => Ok(obj),
            PairDefault::Pair => Ok(PyTuple::new(py, [py.None(), py.None()])?.into_any()),
        }
    }
}

/// [`seconds`] with [`Seconds::SPAN`] (which accepts no None): a lease, a delay.
pub(crate) fn span(name: &str, obj: &Bound<'_, PyAny>) -> PyResult<f64> {
    Ok(seconds(name, obj, Seconds::SPAN)?.unwrap_or_default())
}
