//! Python objects to engine keys, values, tags and settings, and back.
//!
//! Types are matched exactly (`type(x) is T`), as python-diskcache does for its native
//! types: a subclass of a supported type is not that type, and goes to the custom-type
//! registry, or to pickle when the handle allows it.

use crate::errors::Exc;
use crate::pyobj::{self, StdTypes};
use diskcache_oxide_engine::value::{
    self, Date, DateTime, PathKind, PathValue, Time, TimeDelta, TimeZone, Value,
};
use diskcache_oxide_engine::{Key, Scalar, SettingValue, StoredValue, ValueRef};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyBytes, PyDict, PyFloat, PyFrozenSet, PyInt, PyList, PySet, PyString, PyTuple, PyType,
};

/// Deepest nesting of containers (and custom types) a value may have when written.
pub(crate) const MAX_ENCODE_DEPTH: u32 = 200;
/// The most items one value may write out (each container, scalar and key counts one): far
/// past any value one would store whole, and reached in about a second by a value whose
/// shared references multiply (D-035).
pub(crate) const MAX_ENCODE_ITEMS: u64 = 10_000_000;
/// Deepest nesting accepted when reading; above the write limit so that anything written
/// by this build reads back.
const MAX_DECODE_DEPTH: u32 = 512;

/// Why a Python object has no safe-format form.
pub(crate) enum ConvError {
    Py(PyErr),
    /// No encoding for this type (fully qualified name).
    Unsupported(String),
    /// Nested deeper than [`MAX_ENCODE_DEPTH`] (or a reference cycle).
    TooDeep,
    /// More than [`MAX_ENCODE_ITEMS`] items written out: shared references repeated (each
    /// reference to a shared list is written as its own copy, so 40 levels of `[x, x]` are
    /// 2**40 items).
    TooLarge,
}

impl From<PyErr> for ConvError {
    fn from(e: PyErr) -> Self {
        ConvError::Py(e)
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    type_name_of(&obj.get_type())
}

fn type_name_of(ty: &Bound<'_, PyType>) -> String {
    ty.fully_qualified_name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "<unknown type>".to_owned())
}

/// The safe-format value of a Python object.
pub(crate) fn to_value(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    depth: u32,
) -> Result<Value, ConvError> {
    let mut budget = MAX_ENCODE_ITEMS;
    encode_value(py, obj, depth, &mut budget)
}

fn encode_value(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    depth: u32,
    budget: &mut u64,
) -> Result<Value, ConvError> {
    if depth > MAX_ENCODE_DEPTH {
        return Err(ConvError::TooDeep);
    }
    if *budget == 0 {
        return Err(ConvError::TooLarge);
    }
    *budget -= 1;
    if obj.is_none() {
        return Ok(Value::None);
    }
    if obj.is_exact_instance_of::<PyBool>() {
        return Ok(Value::Bool(obj.is_truthy()?));
    }
    if obj.is_exact_instance_of::<PyInt>() {
        return int_to_value(py, obj);
    }
    if obj.is_exact_instance_of::<PyFloat>() {
        return Ok(Value::Float(obj.extract::<f64>()?));
    }
    if let Ok(s) = obj.cast_exact::<PyString>() {
        return Ok(Value::Str(s.to_str()?.to_owned()));
    }
    if let Ok(b) = obj.cast_exact::<PyBytes>() {
        return Ok(Value::Bytes(b.as_bytes().to_vec()));
    }
    if let Ok(list) = obj.cast_exact::<PyList>() {
        let mut items = Vec::with_capacity(list.len());
        for item in list.iter() {
            items.push(encode_value(py, &item, depth + 1, budget)?);
        }
        return Ok(Value::List(items));
    }
    if let Ok(tuple) = obj.cast_exact::<PyTuple>() {
        let mut items = Vec::with_capacity(tuple.len());
        for item in tuple.iter() {
            items.push(encode_value(py, &item, depth + 1, budget)?);
        }
        return Ok(Value::Tuple(items));
    }
    if let Ok(dict) = obj.cast_exact::<PyDict>() {
        // A snapshot of the items: a custom encoder may mutate the dict while we convert.
        let items = dict.items();
        let mut pairs = Vec::with_capacity(items.len());
        for item in items.iter() {
            let pair = item.cast_into::<PyTuple>().map_err(PyErr::from)?;
            let k = encode_value(py, &pair.get_item(0)?, depth + 1, budget)?;
            let v = encode_value(py, &pair.get_item(1)?, depth + 1, budget)?;
            pairs.push((k, v));
        }
        return Ok(Value::Dict(pairs));
    }
    if obj.is_exact_instance_of::<PySet>() || obj.is_exact_instance_of::<PyFrozenSet>() {
        let mut items = Vec::new();
        // Python-level iteration: raises (never panics) if the set changes meanwhile.
        for item in obj.try_iter()? {
            items.push(encode_value(py, &item?, depth + 1, budget)?);
        }
        return Ok(if obj.is_exact_instance_of::<PySet>() {
            Value::Set(items)
        } else {
            Value::FrozenSet(items)
        });
    }
    let ty = obj.get_type();
    if let Some(registry) = pyobj::registry(py) {
        if let Some(entry) = registry.by_type.bind(py).get_item(&ty)? {
            let (name, encode): (String, Bound<'_, PyAny>) = entry.extract()?;
            let encoded = encode.call1((obj,))?;
            let inner = encode_value(py, &encoded, depth + 1, budget)?;
            return Ok(Value::Custom {
                name,
                value: Box::new(inner),
            });
        }
    }
    std_to_value(py, obj, &ty)
}

fn int_to_value(py: Python<'_>, obj: &Bound<'_, PyAny>) -> Result<Value, ConvError> {
    if let Ok(i) = obj.extract::<i64>() {
        return Ok(Value::Int(i));
    }
    // Outside i64: minimal two's-complement, big-endian.
    let negative = obj.lt(0)?;
    let magnitude = if negative {
        obj.call_method0(intern!(py, "__invert__"))?
    } else {
        obj.clone()
    };
    let bits: usize = magnitude
        .call_method0(intern!(py, "bit_length"))?
        .extract()?;
    let kwargs = PyDict::new(py);
    kwargs.set_item(intern!(py, "signed"), true)?;
    let bytes = obj.call_method(
        intern!(py, "to_bytes"),
        (bits / 8 + 1, intern!(py, "big")),
        Some(&kwargs),
    )?;
    Ok(Value::BigInt(
        bytes
            .cast::<PyBytes>()
            .map_err(PyErr::from)?
            .as_bytes()
            .to_vec(),
    ))
}

fn get_u8(obj: &Bound<'_, PyAny>, name: &Bound<'_, PyString>) -> PyResult<u8> {
    obj.getattr(name)?.extract()
}

fn std_to_value(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    ty: &Bound<'_, PyType>,
) -> Result<Value, ConvError> {
    let std = pyobj::std_types(py)?;
    let is = |t: &Py<PyType>| ty.is(t.bind(py));
    if is(&std.datetime) {
        return Ok(Value::DateTime(DateTime {
            date: date_fields(py, obj)?,
            time: time_fields(py, obj, std)?,
        }));
    }
    if is(&std.date) {
        return Ok(Value::Date(date_fields(py, obj)?));
    }
    if is(&std.time) {
        return Ok(Value::Time(time_fields(py, obj, std)?));
    }
    if is(&std.timedelta) {
        return Ok(Value::TimeDelta(TimeDelta {
            days: obj.getattr(intern!(py, "days"))?.extract()?,
            seconds: obj.getattr(intern!(py, "seconds"))?.extract()?,
            microseconds: obj.getattr(intern!(py, "microseconds"))?.extract()?,
        }));
    }
    if is(&std.decimal) {
        return Ok(Value::Decimal(obj.str()?.to_str()?.to_owned()));
    }
    if is(&std.uuid) {
        let bytes = obj.getattr(intern!(py, "bytes"))?;
        let bytes: [u8; 16] = bytes.extract()?;
        return Ok(Value::Uuid(bytes));
    }
    let path_kind = if is(&std.posix_path) {
        Some(PathKind::Posix)
    } else if is(&std.windows_path) {
        Some(PathKind::Windows)
    } else if is(&std.pure_posix_path) {
        Some(PathKind::PurePosix)
    } else if is(&std.pure_windows_path) {
        Some(PathKind::PureWindows)
    } else {
        None
    };
    if let Some(kind) = path_kind {
        return Ok(Value::Path(PathValue {
            kind,
            path: obj.str()?.to_str()?.to_owned(),
        }));
    }
    Err(ConvError::Unsupported(type_name_of(ty)))
}

fn date_fields(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Date> {
    Ok(Date {
        year: obj.getattr(intern!(py, "year"))?.extract()?,
        month: get_u8(obj, intern!(py, "month"))?,
        day: get_u8(obj, intern!(py, "day"))?,
    })
}

fn time_fields(py: Python<'_>, obj: &Bound<'_, PyAny>, std: &StdTypes) -> Result<Time, ConvError> {
    let tzinfo = obj.getattr(intern!(py, "tzinfo"))?;
    Ok(Time {
        hour: get_u8(obj, intern!(py, "hour"))?,
        minute: get_u8(obj, intern!(py, "minute"))?,
        second: get_u8(obj, intern!(py, "second"))?,
        microsecond: obj.getattr(intern!(py, "microsecond"))?.extract()?,
        tz: tz_to_value(py, &tzinfo, std)?,
        fold: get_u8(obj, intern!(py, "fold"))?,
    })
}

fn timedelta_us(py: Python<'_>, td: &Bound<'_, PyAny>) -> PyResult<i64> {
    let days: i64 = td.getattr(intern!(py, "days"))?.extract()?;
    let seconds: i64 = td.getattr(intern!(py, "seconds"))?.extract()?;
    let micros: i64 = td.getattr(intern!(py, "microseconds"))?.extract()?;
    Ok(days * 86_400_000_000 + seconds * 1_000_000 + micros)
}

fn tz_to_value(
    py: Python<'_>,
    tz: &Bound<'_, PyAny>,
    std: &StdTypes,
) -> Result<Option<TimeZone>, ConvError> {
    if tz.is_none() {
        return Ok(None);
    }
    let ty = tz.get_type();
    if ty.is(std.timezone.bind(py)) {
        // (offset,) or (offset, name): tells an explicit name from the generated one.
        let args = tz.call_method0(intern!(py, "__getinitargs__"))?;
        let args = args.cast_into::<PyTuple>().map_err(PyErr::from)?;
        let offset_us = timedelta_us(py, &args.get_item(0)?)?;
        let name = if args.len() > 1 {
            Some(args.get_item(1)?.extract::<String>()?)
        } else {
            None
        };
        return Ok(Some(TimeZone::Fixed { offset_us, name }));
    }
    if let Some(zoneinfo) = &std.zoneinfo {
        if ty.is(zoneinfo.bind(py)) {
            let key = tz.getattr(intern!(py, "key"))?;
            if key.is_none() {
                return Err(ConvError::Unsupported(
                    "zoneinfo.ZoneInfo loaded from a file (it has no key)".to_owned(),
                ));
            }
            return Ok(Some(TimeZone::Zone(key.extract()?)));
        }
    }
    Err(ConvError::Unsupported(format!(
        "tzinfo {}",
        type_name_of(&ty)
    )))
}

/// Rebuild a Python object from a safe-format value.
pub(crate) fn from_value<'py>(
    py: Python<'py>,
    v: Value,
    depth: u32,
) -> PyResult<Bound<'py, PyAny>> {
    if depth > MAX_DECODE_DEPTH {
        return Err(Exc::CorruptValue.err(
            py,
            format!(
                "stored value nests deeper than {MAX_DECODE_DEPTH} levels, more than this build \
                 reads; delete the key and store a flatter value"
            ),
        ));
    }
    Ok(match v {
        Value::None => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, b).to_owned().into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::BigInt(bytes) => {
            let kwargs = PyDict::new(py);
            kwargs.set_item(intern!(py, "signed"), true)?;
            py.get_type::<PyInt>().call_method(
                intern!(py, "from_bytes"),
                (PyBytes::new(py, &bytes), intern!(py, "big")),
                Some(&kwargs),
            )?
        }
        Value::Float(f) => PyFloat::new(py, f).into_any(),
        Value::Str(s) => PyString::new(py, &s).into_any(),
        Value::Bytes(b) => PyBytes::new(py, &b).into_any(),
        Value::List(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(from_value(py, item, depth + 1)?)?;
            }
            list.into_any()
        }
        Value::Tuple(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(from_value(py, item, depth + 1)?);
            }
            PyTuple::new(py, out)?.into_any()
        }
        Value::Dict(pairs) => {
            let dict = PyDict::new(py);
            for (k, v) in pairs {
                let k = from_value(py, k, depth + 1)?;
                let v = from_value(py, v, depth + 1)?;
                dict.set_item(k, v)
                    .map_err(|e| rebuild_failed(py, "dict", e))?;
            }
            dict.into_any()
        }
        Value::Set(items) => {
            let set = PySet::empty(py)?;
            for item in items {
                set.add(from_value(py, item, depth + 1)?)
                    .map_err(|e| rebuild_failed(py, "set", e))?;
            }
            set.into_any()
        }
        Value::FrozenSet(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(from_value(py, item, depth + 1)?);
            }
            PyFrozenSet::new(py, &out)
                .map_err(|e| rebuild_failed(py, "frozenset", e))?
                .into_any()
        }
        Value::DateTime(dt) => {
            let std = pyobj::std_types(py)?;
            let t = dt.time;
            let tz = tz_from_value(py, t.tz, std)?;
            let kwargs = fold_kwargs(py, t.fold)?;
            std.datetime
                .bind(py)
                .call(
                    (
                        dt.date.year,
                        dt.date.month,
                        dt.date.day,
                        t.hour,
                        t.minute,
                        t.second,
                        t.microsecond,
                        tz,
                    ),
                    kwargs.as_ref(),
                )
                .map_err(|e| rebuild_failed(py, "datetime.datetime", e))?
        }
        Value::Date(d) => {
            let std = pyobj::std_types(py)?;
            std.date
                .bind(py)
                .call1((d.year, d.month, d.day))
                .map_err(|e| rebuild_failed(py, "datetime.date", e))?
        }
        Value::Time(t) => {
            let std = pyobj::std_types(py)?;
            let tz = tz_from_value(py, t.tz, std)?;
            let kwargs = fold_kwargs(py, t.fold)?;
            std.time
                .bind(py)
                .call(
                    (t.hour, t.minute, t.second, t.microsecond, tz),
                    kwargs.as_ref(),
                )
                .map_err(|e| rebuild_failed(py, "datetime.time", e))?
        }
        Value::TimeDelta(td) => {
            let std = pyobj::std_types(py)?;
            std.timedelta
                .bind(py)
                .call1((td.days, td.seconds, td.microseconds))
                .map_err(|e| rebuild_failed(py, "datetime.timedelta", e))?
        }
        Value::Decimal(s) => {
            let std = pyobj::std_types(py)?;
            std.decimal
                .bind(py)
                .call1((s,))
                .map_err(|e| rebuild_failed(py, "decimal.Decimal", e))?
        }
        Value::Uuid(bytes) => {
            let std = pyobj::std_types(py)?;
            let kwargs = PyDict::new(py);
            kwargs.set_item(intern!(py, "bytes"), PyBytes::new(py, &bytes))?;
            std.uuid
                .bind(py)
                .call((), Some(&kwargs))
                .map_err(|e| rebuild_failed(py, "uuid.UUID", e))?
        }
        Value::Path(p) => {
            let std = pyobj::std_types(py)?;
            let (class, pure) = match p.kind {
                PathKind::Posix => (&std.posix_path, &std.pure_posix_path),
                PathKind::Windows => (&std.windows_path, &std.pure_windows_path),
                PathKind::PurePosix => (&std.pure_posix_path, &std.pure_posix_path),
                PathKind::PureWindows => (&std.pure_windows_path, &std.pure_windows_path),
            };
            // A concrete path of the other operating system cannot be instantiated here
            // (NotImplementedError): fall back to its pure flavour (D-009).
            match class.bind(py).call1((p.path.as_str(),)) {
                Ok(obj) => obj,
                Err(_) => pure
                    .bind(py)
                    .call1((p.path.as_str(),))
                    .map_err(|e| rebuild_failed(py, "pathlib path", e))?,
            }
        }
        Value::Custom { name, value } => {
            let decode = pyobj::registry(py)
                .map(|r| r.by_name.bind(py).get_item(&name))
                .transpose()?
                .flatten();
            let Some(entry) = decode else {
                return Err(Exc::UnknownType.err(
                    py,
                    format!(
                        "the stored value has the custom type {name:?}, which this process has \
                         not registered; call diskcache_oxide.register_type(cls, {name:?}, \
                         encode, decode) before reading it"
                    ),
                ));
            };
            let (_class, decode): (Bound<'_, PyAny>, Bound<'_, PyAny>) = entry.extract()?;
            let inner = from_value(py, *value, depth + 1)?;
            // The application's decoder: its exceptions propagate unchanged.
            decode.call1((inner,))?
        }
    })
}

fn fold_kwargs(py: Python<'_>, fold: u8) -> PyResult<Option<Bound<'_, PyDict>>> {
    if fold == 0 {
        return Ok(None);
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item(intern!(py, "fold"), fold)?;
    Ok(Some(kwargs))
}

fn tz_from_value<'py>(
    py: Python<'py>,
    tz: Option<TimeZone>,
    std: &StdTypes,
) -> PyResult<Bound<'py, PyAny>> {
    match tz {
        None => Ok(py.None().into_bound(py)),
        Some(TimeZone::Fixed { offset_us, name }) => {
            let kwargs = PyDict::new(py);
            kwargs.set_item(intern!(py, "microseconds"), offset_us)?;
            let offset = std
                .timedelta
                .bind(py)
                .call((), Some(&kwargs))
                .map_err(|e| rebuild_failed(py, "datetime.timezone", e))?;
            let tz = match name {
                Some(name) => std.timezone.bind(py).call1((offset, name)),
                None => std.timezone.bind(py).call1((offset,)),
            };
            tz.map_err(|e| rebuild_failed(py, "datetime.timezone", e))
        }
        Some(TimeZone::Zone(key)) => {
            let Some(zoneinfo) = &std.zoneinfo else {
                return Err(Exc::UnknownType.err(
                    py,
                    format!(
                        "the stored value uses the time zone {key:?}, but this Python has no \
                         zoneinfo module; read it with Python 3.9 or later"
                    ),
                ));
            };
            zoneinfo.bind(py).call1((key.as_str(),)).map_err(|e| {
                let err = Exc::UnknownType.err(
                    py,
                    format!(
                        "the stored value uses the time zone {key:?}, which this system's time \
                         zone database lacks; install the tzdata package"
                    ),
                );
                err.set_cause(py, Some(e));
                err
            })
        }
    }
}

/// A Python constructor refused decoded fields: the stored bytes cannot be this type.
fn rebuild_failed(py: Python<'_>, what: &str, cause: PyErr) -> PyErr {
    let err = Exc::CorruptValue.err(
        py,
        format!(
            "corrupt value: the stored {what} could not be rebuilt ({cause}); delete the key \
             and store it again, or open the cache with on_decode_error='miss'"
        ),
    );
    err.set_cause(py, Some(cause));
    err
}

/// Decode the safe format (runs without the GIL); a failure is a corrupt value.
pub(crate) fn decode_bytes(bytes: &[u8]) -> Result<Value, String> {
    value::decode(bytes).map_err(|e| e.to_string())
}

pub(crate) fn corrupt(py: Python<'_>, what: &str, message: &str) -> PyErr {
    Exc::CorruptValue.err(
        py,
        format!(
            "corrupt value: the stored {what} could not be decoded ({message}); delete the key \
             and store it again, or open the cache with on_decode_error='miss'"
        ),
    )
}

// ---- what a handle needs to know to convert ----------------------------------------------

/// Per-handle conversion settings.
pub(crate) struct Ctx<'c> {
    pub pickle: bool,
    /// The directory whose `disk_pickle_protocol` a pickle is written with; None for the
    /// codec on its own (`_core.encode_value`), which uses python-diskcache's default.
    pub cache: Option<&'c diskcache_oxide_engine::Cache>,
}

/// python-diskcache's default `disk_pickle_protocol`, `pickle.HIGHEST_PROTOCOL` on the
/// Pythons we support.
const DEFAULT_PICKLE_PROTOCOL: i64 = 5;

impl Ctx<'_> {
    fn pickle_protocol(&self, py: Python<'_>) -> i64 {
        match self.cache {
            Some(cache) => py.detach(|| cache.settings().disk_pickle_protocol),
            None => DEFAULT_PICKLE_PROTOCOL,
        }
    }

    fn dumps<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let protocol = self.pickle_protocol(py);
        let kwargs = PyDict::new(py);
        kwargs.set_item(intern!(py, "protocol"), protocol)?;
        let data = pyobj::pickle_dumps(py)?.call((obj,), Some(&kwargs))?;
        data.cast_into::<PyBytes>().map_err(PyErr::from)
    }
}

fn unsupported(py: Python<'_>, role: &str, error: ConvError) -> PyErr {
    match error {
        ConvError::Py(e) => e,
        ConvError::Unsupported(name) => Exc::UnsupportedType.err(
            py,
            format!(
                "cannot store a {role} of type {name}: the safe format has no encoding for it; \
                 register the type with diskcache_oxide.register_type(cls, name, encode, \
                 decode), or open the cache with pickle=True if you trust every writer of \
                 this directory"
            ),
        ),
        ConvError::TooLarge => PyValueError::new_err(format!(
            "cannot store this {role}: written out it has more than {MAX_ENCODE_ITEMS} items. \
             The safe format stores each reference to a shared list, dict or set as a copy of \
             its own, so a value that nests shared references multiplies; store a smaller \
             value, or open the cache with pickle=True, which keeps shared references once"
        )),
        ConvError::TooDeep => PyValueError::new_err(format!(
            "cannot store this {role}: it nests deeper than {MAX_ENCODE_DEPTH} levels or \
             contains a reference cycle; flatten it, or open the cache with pickle=True to \
             pickle such values"
        )),
    }
}

// ---- keys ----------------------------------------------------------------------------------

pub(crate) fn key_from_py(py: Python<'_>, key: &Bound<'_, PyAny>, ctx: &Ctx<'_>) -> PyResult<Key> {
    if let Ok(s) = key.cast_exact::<PyString>() {
        return Ok(Key::Native(Scalar::Str(s.to_str()?.to_owned())));
    }
    if key.is_exact_instance_of::<PyInt>() {
        if let Ok(i) = key.extract::<i64>() {
            return Ok(Key::Native(Scalar::Int(i)));
        }
    } else if key.is_exact_instance_of::<PyFloat>() {
        let f: f64 = key.extract()?;
        if f.is_nan() {
            return Err(PyValueError::new_err(
                "key nan: NaN cannot be a cache key because it never equals itself; use \
                 another key (for example the string 'nan')",
            ));
        }
        return Ok(Key::Native(Scalar::Float(f)));
    } else if let Ok(b) = key.cast_exact::<PyBytes>() {
        return Ok(Key::Native(Scalar::Bytes(b.as_bytes().to_vec())));
    }
    match to_value(py, key, 0) {
        Ok(v) => Ok(Key::Encoded(value::encode_key(&v))),
        Err(ConvError::Py(e)) => Err(e),
        Err(e) if !ctx.pickle => Err(unsupported(py, "key", e)),
        Err(_) => {
            // Optimised so that equal keys give equal bytes, as python-diskcache does.
            let data = ctx.dumps(py, key)?;
            let data = pyobj::pickletools_optimize(py)?.call1((data,))?;
            Ok(Key::Pickled(
                data.cast::<PyBytes>()
                    .map_err(PyErr::from)?
                    .as_bytes()
                    .to_vec(),
            ))
        }
    }
}

pub(crate) fn scalar_to_py(py: Python<'_>, s: Scalar) -> PyResult<Bound<'_, PyAny>> {
    Ok(match s {
        Scalar::Int(i) => i.into_pyobject(py)?.into_any(),
        Scalar::Float(f) => PyFloat::new(py, f).into_any(),
        Scalar::Str(s) => PyString::new(py, &s).into_any(),
        Scalar::Bytes(b) => PyBytes::new(py, &b).into_any(),
    })
}

pub(crate) fn key_to_py(py: Python<'_>, key: Key, pickle: bool) -> PyResult<Bound<'_, PyAny>> {
    match key {
        Key::Native(s) => scalar_to_py(py, s),
        Key::Encoded(bytes) => {
            let v = decode_bytes(&bytes).map_err(|m| corrupt(py, "key", &m))?;
            from_value(py, v, 0)
        }
        Key::Pickled(bytes) => {
            if pickle {
                pyobj::pickle_loads(py)?.call1((PyBytes::new(py, &bytes),))
            } else {
                Err(Exc::UnsafeValue.err(
                    py,
                    "this key is a pickle and the cache was opened with pickle=False, so it was \
                     not unpickled (unpickling runs code chosen by whoever wrote it); open the \
                     cache with pickle=True only if you trust every writer of this directory",
                ))
            }
        }
    }
}

// ---- values --------------------------------------------------------------------------------

/// A value ready to hand to the engine; borrows str and bytes payloads from Python.
pub(crate) enum Prepared<'a, 'py> {
    Ref(ValueRef<'a>),
    Encoded(Vec<u8>),
    Pickled(Bound<'py, PyBytes>),
}

impl Prepared<'_, '_> {
    pub(crate) fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Prepared::Ref(v) => *v,
            Prepared::Encoded(b) => ValueRef::Encoded(b),
            Prepared::Pickled(b) => ValueRef::Pickled(b.as_bytes()),
        }
    }
}

pub(crate) fn prepare_value<'a, 'py>(
    py: Python<'py>,
    value: &'a Bound<'py, PyAny>,
    ctx: &Ctx<'_>,
) -> PyResult<Prepared<'a, 'py>> {
    if let Ok(s) = value.cast_exact::<PyString>() {
        return Ok(Prepared::Ref(ValueRef::Str(s.to_str()?)));
    }
    if let Ok(b) = value.cast_exact::<PyBytes>() {
        return Ok(Prepared::Ref(ValueRef::Bytes(b.as_bytes())));
    }
    if value.is_exact_instance_of::<PyInt>() {
        if let Ok(i) = value.extract::<i64>() {
            return Ok(Prepared::Ref(ValueRef::Int(i)));
        }
    } else if value.is_exact_instance_of::<PyFloat>() {
        let f: f64 = value.extract()?;
        // SQLite turns a NaN REAL into NULL; the safe format keeps NaN bit for bit.
        if f.is_nan() {
            return Ok(Prepared::Encoded(value::encode(&Value::Float(f))));
        }
        return Ok(Prepared::Ref(ValueRef::Float(f)));
    }
    match to_value(py, value, 0) {
        Ok(v) => Ok(Prepared::Encoded(value::encode(&v))),
        Err(ConvError::Py(e)) => Err(e),
        Err(e) if !ctx.pickle => Err(unsupported(py, "value", e)),
        Err(_) => Ok(Prepared::Pickled(ctx.dumps(py, value)?)),
    }
}

/// A stored value after the GIL-free part of reading (safe-format bytes already decoded).
pub(crate) enum Fetched {
    Int(i64),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    Value(Result<Value, String>),
    Pickled(Vec<u8>),
    /// A verified value file, open (python-diskcache's `read=True`).
    File(diskcache_oxide_engine::ValueHandle),
    /// Bytes left in their value file, read straight into a `bytes` by the caller.
    Deferred(diskcache_oxide_engine::ValueFile),
}

impl From<StoredValue> for Fetched {
    /// Runs without the GIL: decoding the safe format happens here.
    fn from(v: StoredValue) -> Fetched {
        match v {
            StoredValue::Int(i) => Fetched::Int(i),
            StoredValue::Float(f) => Fetched::Float(f),
            StoredValue::Str(s) => Fetched::Str(s),
            StoredValue::Bytes(b) => Fetched::Bytes(b),
            StoredValue::Encoded(b) => Fetched::Value(decode_bytes(&b)),
            StoredValue::Pickled(b) => Fetched::Pickled(b),
            StoredValue::File(p) => Fetched::File(p),
            StoredValue::Deferred(f) => Fetched::Deferred(f),
        }
    }
}

pub(crate) fn fetched_to_py(
    py: Python<'_>,
    v: Fetched,
    pickle: bool,
) -> PyResult<Bound<'_, PyAny>> {
    Ok(match v {
        Fetched::Int(i) => i.into_pyobject(py)?.into_any(),
        Fetched::Float(f) => PyFloat::new(py, f).into_any(),
        Fetched::Str(s) => PyString::new(py, &s).into_any(),
        Fetched::Bytes(b) => PyBytes::new(py, &b).into_any(),
        Fetched::Value(Ok(v)) => from_value(py, v, 0)?,
        Fetched::Value(Err(m)) => return Err(corrupt(py, "value", &m)),
        Fetched::Pickled(b) => unpickle(py, &b, pickle)?,
        Fetched::File(handle) => {
            let path = handle.path().to_path_buf();
            let file = handle.into_file().map_err(|e| {
                pyo3::exceptions::PyOSError::new_err(format!("opening a value file: {e}"))
            })?;
            let fd = std::os::fd::IntoRawFd::into_raw_fd(file);
            // The Python file object owns the descriptor from here.
            pyobj::open_value_file(py)?.call1((fd, path))?
        }
        Fetched::Deferred(_) => {
            return Err(corrupt(
                py,
                "value",
                "a deferred value reached the generic conversion",
            ))
        }
    })
}

/// A pickled value: loaded only on a `pickle=True` handle, `UnsafeValueError` otherwise.
pub(crate) fn unpickle<'py>(
    py: Python<'py>,
    bytes: &[u8],
    pickle: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if !pickle {
        return Err(Exc::UnsafeValue.err(py, UNSAFE_VALUE));
    }
    pyobj::pickle_loads(py)?.call1((PyBytes::new(py, bytes),))
}

const UNSAFE_VALUE: &str = "this value is a pickle and the cache was opened with pickle=False, so \
     it was not unpickled (unpickling runs code chosen by whoever wrote it, CVE-2025-69872); \
     open the cache with pickle=True only if you trust every writer of this directory";

// ---- tags ----------------------------------------------------------------------------------

pub(crate) fn tag_from_py(tag: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Scalar>> {
    let Some(tag) = tag else { return Ok(None) };
    if tag.is_none() {
        return Ok(None);
    }
    if let Ok(s) = tag.cast::<PyString>() {
        return Ok(Some(Scalar::Str(s.to_str()?.to_owned())));
    }
    if tag.is_instance_of::<PyInt>() {
        return Ok(Some(Scalar::Int(tag.extract()?)));
    }
    if tag.is_instance_of::<PyFloat>() {
        return Ok(Some(Scalar::Float(tag.extract()?)));
    }
    if let Ok(b) = tag.cast::<PyBytes>() {
        return Ok(Some(Scalar::Bytes(b.as_bytes().to_vec())));
    }
    Err(PyTypeError::new_err(format!(
        "tag must be None, int, float, str or bytes, not {}; convert it, for example with str()",
        type_name(tag)
    )))
}

pub(crate) fn opt_scalar_to_py(py: Python<'_>, s: Option<Scalar>) -> PyResult<Bound<'_, PyAny>> {
    match s {
        Some(s) => scalar_to_py(py, s),
        None => Ok(py.None().into_bound(py)),
    }
}

// ---- settings ------------------------------------------------------------------------------

pub(crate) fn setting_from_py(name: &str, value: &Bound<'_, PyAny>) -> PyResult<SettingValue> {
    if value.is_instance_of::<PyBool>() {
        return Ok(SettingValue::Int(i64::from(value.is_truthy()?)));
    }
    if value.is_instance_of::<PyInt>() {
        return value.extract::<i64>().map(SettingValue::Int).map_err(|_| {
            PyValueError::new_err(format!(
                "{name}: {value} is too large; use a value that fits in 64 bits"
            ))
        });
    }
    if value.is_instance_of::<PyFloat>() {
        let f: f64 = value.extract()?;
        if f.fract() == 0.0 && f.abs() < 9.2e18 {
            return Ok(SettingValue::Int(f as i64));
        }
        return Err(PyValueError::new_err(format!(
            "{name}: expected a whole number, got {f}"
        )));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(SettingValue::Str(s.to_str()?.to_owned()));
    }
    Err(PyValueError::new_err(format!(
        "{name}: expected an int or a str, got {}",
        type_name(value)
    )))
}

pub(crate) fn setting_to_py(py: Python<'_>, v: SettingValue) -> PyResult<Bound<'_, PyAny>> {
    Ok(match v {
        SettingValue::Int(i) => i.into_pyobject(py)?.into_any(),
        SettingValue::Str(s) => PyString::new(py, &s).into_any(),
    })
}
