"""Bring a python-diskcache 5.6.3 directory over to diskcache_oxide: :func:`migrate`.

The source is read directly from its SQLite database and value files, never through
python-diskcache, and never written: the database is opened read-only (``immutable=1``
when no write-ahead log is present; a private copy of the database and its log when one
is, since even a read-only SQLite connection creates and updates ``-wal``/``-shm`` files).

Pickles are the danger this project exists to close (CVE-2025-69872, D-003). Unless the
caller says the source is trusted, a pickled key or value is decoded by
:class:`SafeUnpickler`, which can build only the data types the safe format stores and
refuses any other global a pickle names, so a hostile pickle is reported and skipped
without running anything. See docs/decisions/D-041-migrating-from-python-diskcache.md and
docs/guide-migrating.md.
"""

from __future__ import annotations

import datetime
import decimal
import io
import os
import os.path
import pathlib
import pickle
import shutil
import sqlite3
import stat
import tempfile
import time
import urllib.parse
import uuid
import zoneinfo
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Literal

from .core import DEFAULT_SETTINGS, Cache
from .errors import NotACacheError, UnsupportedTypeError
from .fanout import FanoutCache, shard_hash
from .registry import _BY_TYPE

__all__ = [
    "CARRIED_EXACTLY",
    "IMPORT_CALL",
    "MigrationReport",
    "SAFE_GLOBALS",
    "SafeUnpickler",
    "SkippedEntry",
    "SkippedSetting",
    "migrate",
    "safe_loads",
]

#: python-diskcache's value modes (its ``Cache.mode`` column).
_MODE_RAW, _MODE_BINARY, _MODE_TEXT, _MODE_PICKLE = 1, 2, 3, 4

#: The name of the engine call that stores rows with their own times (see D-041). When the
#: binding offers it, store_time, access_time and access_count are carried exactly.
IMPORT_CALL = "_import_many"

#: What every migration carries exactly, whichever write path it takes.
CARRIED_EXACTLY = ("key", "value", "tag", "insertion order")

#: Rows written per destination transaction, and between two progress calls.
_BATCH = 1000

#: Settings applied before the entries are written, because they decide how each entry is
#: stored (inline or in a value file, the pickle protocol) or how the database file is laid
#: out. The rest are applied afterwards (see ``_LATE_SETTINGS``).
_EARLY_SETTINGS = (
    "disk_min_file_size",
    "disk_pickle_protocol",
    "sqlite_auto_vacuum",
    "sqlite_cache_size",
    "sqlite_mmap_size",
    "sqlite_synchronous",
    "sqlite_journal_mode",
)

#: Settings applied once every entry is in: the eviction policy would otherwise cull the
#: destination while it fills (it is opened with ``eviction_policy='none'``), and an index
#: is cheaper built once than kept up to date row by row.
_LATE_SETTINGS = ("size_limit", "cull_limit", "statistics", "tag_index", "eviction_policy")

#: The sub-directories of a FanoutCache root that hold named caches (``cache(name)``,
#: ``deque(name)``, ``index(name)``), each a plain Cache directory.
_NAMED_KINDS = ("cache", "deque", "index")

Progress = Callable[[int, int], object]


# ----- restricted unpickling -----------------------------------------------------------------

#: The built-in types a pickle may name as they are. Each builds plain data the safe format
#: stores (D-002), and each is immutable, so a pickle cannot change it for the loads that
#: follow (``BUILD`` on a class sets its attributes when the class allows it).
_IMMUTABLE_GLOBALS: dict[tuple[str, str], type] = {
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("datetime", "datetime"): datetime.datetime,
    ("datetime", "date"): datetime.date,
    ("datetime", "time"): datetime.time,
    ("datetime", "timedelta"): datetime.timedelta,
    ("datetime", "timezone"): datetime.timezone,
    ("decimal", "Decimal"): decimal.Decimal,
}

#: The other globals pickles of the safe types name. Each gets a stand-in made afresh for
#: every load (so one pickle cannot tamper with what the next one gets) that accepts only
#: the arguments the pickler itself writes for that type.
_STAND_INS = frozenset(
    {
        ("_codecs", "encode"),  # bytes, protocols 0-2
        ("builtins", "getattr"),  # ZoneInfo._unpickle, every protocol
        ("builtins", "object"),  # with copyreg._reconstructor, protocols 0-1
        ("copyreg", "_reconstructor"),  # objects such as UUID, protocols 0-1
        ("uuid", "UUID"),
        ("zoneinfo", "ZoneInfo"),
        ("zoneinfo", "ZoneInfo._unpickle"),
        ("pathlib", "PurePosixPath"),
        ("pathlib", "PureWindowsPath"),
        ("pathlib", "PosixPath"),
        ("pathlib", "WindowsPath"),
    }
)

#: How pickles of protocols 0-2 spell the modules (Python 2 names).
_PYTHON2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}

#: Every global a pickle may name under :class:`SafeUnpickler`, as ``(module, name)``.
SAFE_GLOBALS = frozenset(_IMMUTABLE_GLOBALS) | _STAND_INS


def _refuse(what: str) -> pickle.UnpicklingError:
    return pickle.UnpicklingError(f"refused to unpickle: {what}")


class SafeUnpickler(pickle.Unpickler):
    """An unpickler that builds data and nothing else.

    A pickle is a small program: each global it names is looked up and may be called with
    arguments of the pickle's choosing, which is how loading one can run any code
    (CVE-2025-69872). This unpickler resolves only the globals of :data:`SAFE_GLOBALS`,
    those that pickles of the types the safe format stores name (the containers, the date
    and time types, ``Decimal``, ``UUID``, ``ZoneInfo`` and paths), and raises
    :class:`pickle.UnpicklingError` naming any other before anything is called. Mutable
    classes and helper functions are replaced by stand-ins made for this load alone, which
    accept only the arguments the pickler writes. Persistent ids are refused.

    One instance loads one pickle: make a new one (or call :func:`safe_loads`) for each.
    """

    def find_class(self, module: str, name: str) -> Any:
        """The object for global ``module.name``, if it is on the allow-list.

        :raises pickle.UnpicklingError: for any other global
        """
        module = _PYTHON2_MODULES.get(module, module)
        if module == "pathlib._local":  # where Python 3.13 defines the path classes
            module = "pathlib"
        found = _IMMUTABLE_GLOBALS.get((module, name))
        if found is not None:
            return found
        if (module, name) in _STAND_INS:
            return self._stand_in(module, name)
        raise _refuse(
            f"the pickle names {module}.{name}, which is not a data type the safe format stores"
        )

    def persistent_load(self, pid: Any) -> Any:
        """Refuse persistent ids: python-diskcache never writes them."""
        raise _refuse("the pickle uses a persistent id")

    def _stand_in(self, module: str, name: str) -> Any:
        made: dict[tuple[str, str], Any] = self.__dict__.setdefault("_made", {})
        if (module, name) not in made:
            made[(module, name)] = self._make(module, name)
        return made[(module, name)]

    def _make(self, module: str, name: str) -> Any:
        if (module, name) == ("_codecs", "encode"):

            def encode(text: object, encoding: object = "latin1") -> bytes:
                if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
                    raise _refuse("_codecs.encode with anything but (str, 'latin1')")
                return text.encode("latin-1")

            return encode
        if module == "zoneinfo":

            def zone(key: object, from_cache: object = True) -> zoneinfo.ZoneInfo:
                if not isinstance(key, str):
                    raise _refuse("a ZoneInfo whose key is not a str")
                return zoneinfo.ZoneInfo(key)

            return zone
        if (module, name) == ("builtins", "getattr"):
            zone_class = self._stand_in("zoneinfo", "ZoneInfo")

            def attribute(obj: object, attr: object) -> Any:
                # Pickle reaches ZoneInfo._unpickle through getattr; nothing else may use it.
                if obj is zone_class and attr == "_unpickle":
                    return self._stand_in("zoneinfo", "ZoneInfo._unpickle")
                raise _refuse("getattr on anything but ZoneInfo._unpickle")

            return attribute
        if (module, name) == ("builtins", "object"):
            return type("object_stand_in", (), {})
        if (module, name) == ("uuid", "UUID"):

            def new_uuid(cls: object, *args: object) -> uuid.UUID:
                # NEWOBJ calls cls.__new__(cls); the UUID's state follows (BUILD).
                if args:
                    raise _refuse("a UUID made with arguments")
                return object.__new__(uuid.UUID)

            return type("UUID_stand_in", (), {"__new__": new_uuid})
        if (module, name) == ("copyreg", "_reconstructor"):
            uuid_class = self._stand_in("uuid", "UUID")
            base = self._stand_in("builtins", "object")

            def reconstruct(cls: object, of: object, state: object) -> uuid.UUID:
                if cls is not uuid_class or of is not base or state is not None:
                    raise _refuse("copyreg._reconstructor for anything but a UUID")
                return object.__new__(uuid.UUID)

            return reconstruct
        path_class: type[pathlib.PurePath] = getattr(pathlib, name)

        def path(*parts: object) -> pathlib.PurePath:
            if not all(isinstance(part, str) for part in parts):
                raise _refuse(f"a {name} made of anything but str parts")
            return path_class(*parts)  # type: ignore[arg-type]

        return path


def safe_loads(data: bytes) -> Any:
    """Decode a pickle with :class:`SafeUnpickler`.

    :raises pickle.UnpicklingError: if it names a global that is not plain data
    """
    return SafeUnpickler(io.BytesIO(data)).load()


# ----- the report ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SkippedEntry:
    """An entry of the source that was not carried over, and why.

    ``key`` is the decoded key, or the key's stored bytes when the key itself could not be
    decoded (a refused pickle). ``cache`` is where it was: ``''`` for a plain cache, the
    shard (``'000'``) or the named cache (``'index/users'``) of a FanoutCache. ``rowid`` is
    its row in that source database.
    """

    key: Any
    reason: str
    cache: str = ""
    rowid: int = 0


@dataclass(frozen=True)
class SkippedSetting:
    """A row of the source's Settings table that the destination does not carry, and why."""

    name: str
    value: Any
    reason: str
    cache: str = ""


@dataclass
class MigrationReport:
    """What :func:`migrate` did.

    :ivar source: the python-diskcache directory read
    :ivar destination: the diskcache_oxide directory written
    :ivar layout: ``'cache'`` or ``'fanout'``
    :ivar shards: the shard count of a FanoutCache (None for a plain cache)
    :ivar total: entries found in the source, over every shard and named cache
    :ivar converted: entries written to the destination
    :ivar skipped: the entries not written, each with its reason
    :ivar bytes: payload bytes of the converted values as the source held them
    :ivar pickled: converted values stored as pickles (only with ``pickle=True``)
    :ivar settings: the destination's settings at the end (of the root, or of shard 000
        with ``size_limit`` for the whole FanoutCache)
    :ivar settings_skipped: source settings that were not carried
    :ivar carried: the fields carried exactly for every converted entry
    :ivar approximated: the fields carried only approximately, with how
    :ivar caches: the relative paths of the cache directories migrated
    :ivar seconds: how long the migration took
    """

    source: str
    destination: str
    layout: Literal["cache", "fanout"]
    shards: int | None = None
    total: int = 0
    converted: int = 0
    skipped: list[SkippedEntry] = field(default_factory=list)
    bytes: int = 0
    pickled: int = 0
    settings: dict[str, Any] = field(default_factory=dict)
    settings_skipped: list[SkippedSetting] = field(default_factory=list)
    carried: tuple[str, ...] = CARRIED_EXACTLY
    approximated: dict[str, str] = field(default_factory=dict)
    caches: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def entries_per_second(self) -> float:
        """Source entries processed per second of the whole migration."""
        return self.total / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        """The report as a few lines of text, each skipped entry with its reason."""
        shape = "Cache" if self.layout == "cache" else f"FanoutCache ({self.shards} shards)"
        lines = [
            f"migrated {self.source} -> {self.destination} ({shape})",
            f"converted {self.converted} of {self.total} entries, {self.bytes} bytes of values, "
            f"in {self.seconds:.2f} s",
        ]
        if self.pickled:
            lines.append(f"{self.pickled} values stored as pickles (open with pickle=True)")
        lines.append(f"skipped {len(self.skipped)} entries" + (":" if self.skipped else ""))
        for entry in self.skipped:
            where = f" [{entry.cache}]" if entry.cache else ""
            lines.append(f"  {entry.key!r}{where}: {entry.reason}")
        if self.settings_skipped:
            lines.append("settings not carried:")
        for setting in self.settings_skipped:
            where = f" [{setting.cache}]" if setting.cache else ""
            lines.append(f"  {setting.name}={setting.value!r}{where}: {setting.reason}")
        if self.approximated:
            lines.append("carried approximately:")
        for name, how in self.approximated.items():
            lines.append(f"  {name}: {how}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


# ----- reading the source --------------------------------------------------------------------


class _Skip(Exception):
    """An entry that cannot be carried; the message is the reason reported."""


@dataclass
class _Row:
    rowid: int
    key: Any
    value: Any  # the value, or for a file-backed binary value the open file
    read: bool
    store_time: float
    expire_time: float | None
    access_time: float
    access_count: int
    tag: Any
    size: int


@dataclass
class _Source:
    """One python-diskcache cache directory of the source (a plain cache, a shard or a named
    cache), its database snapshot and its settings."""

    name: str  # relative path inside the source ('' for the root)
    directory: str
    db: sqlite3.Connection
    settings: dict[str, Any]
    count: int


def _uri(path: str, **params: str) -> str:
    query = "&".join(f"{name}={value}" for name, value in params.items())
    return f"file:{urllib.parse.quote(os.path.abspath(path))}?{query}"


def _open_database(directory: str, scratch: str) -> sqlite3.Connection:
    """A read-only connection to the python-diskcache database in ``directory``.

    Without a ``-wal`` file the database is opened ``immutable=1``, which creates nothing.
    With one (a process has the cache open, or died with it open), SQLite would create or
    update the ``-shm`` file even for a read-only connection, so the database and its log
    are copied into ``scratch`` and the copy is read instead.
    """
    db_path = os.path.join(directory, "cache.db")
    for path in (db_path, db_path + "-wal"):
        if os.path.islink(path):
            raise NotACacheError(f"{path} is a symbolic link; migrate reads only regular files")
    if os.path.lexists(db_path + "-wal"):
        os.makedirs(scratch, exist_ok=True)
        copy = os.path.join(scratch, "cache.db")
        shutil.copyfile(db_path, copy)
        shutil.copyfile(db_path + "-wal", copy + "-wal")
        db = sqlite3.connect(_uri(copy, mode="ro"), uri=True)
    else:
        db = sqlite3.connect(_uri(db_path, mode="ro", immutable="1"), uri=True)
    try:
        _check_python_diskcache(db, db_path)
    except BaseException:
        db.close()
        raise
    return db


def _check_python_diskcache(db: sqlite3.Connection, path: str) -> None:
    try:
        (app_id,) = db.execute("PRAGMA application_id").fetchone()
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as error:
        raise NotACacheError(f"{path} is not an SQLite database ({error})") from None
    if app_id == 0x44434F58:
        raise NotACacheError(
            f"{path} is already a diskcache_oxide cache: open it with diskcache_oxide.Cache "
            "instead of migrating it"
        )
    if not {"Cache", "Settings"} <= tables:
        raise NotACacheError(
            f"{path} has no Cache and Settings tables, so it is not a python-diskcache "
            "cache; migrate reads only directories written by python-diskcache"
        )


def _read_settings(db: sqlite3.Connection) -> dict[str, Any]:
    return {str(name): value for name, value in db.execute("SELECT key, value FROM Settings")}


def _shard_names(root: str) -> list[str]:
    names = sorted(
        entry
        for entry in os.listdir(root)
        if len(entry) == 3
        and entry.isdigit()
        and os.path.isfile(os.path.join(root, entry, "cache.db"))
    )
    return names


def _named_caches(root: str) -> list[str]:
    """The relative paths of the named caches under a FanoutCache root (``cache/a/b``, ...)."""
    found: list[str] = []
    for kind in _NAMED_KINDS:
        top = os.path.join(root, kind)
        if not os.path.isdir(top) or os.path.islink(top):
            continue
        for here, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(here, d)))
            if "cache.db" in files:
                found.append(os.path.relpath(here, root).replace(os.sep, "/"))
    return sorted(found)


def _open_value_file(directory: str, filename: object, size: object) -> IO[bytes]:
    """Open the value file ``filename`` of the cache in ``directory`` for reading.

    The name comes from the source database, which whoever could write the directory may
    have forged, so it must be a relative path of plain names inside the directory, and no
    link on the way is followed (each step is opened relative to the last with
    ``O_NOFOLLOW``). A FIFO or device in its place is refused rather than read, and so is a
    file whose length is not the one python-diskcache recorded in the row: it was damaged or
    replaced, and reading it could mean reading a sparse file of any size.
    """
    if not isinstance(filename, str) or not filename or "\x00" in filename:
        raise _Skip(f"its row names no usable value file ({filename!r})")
    parts = filename.replace("\\", "/").split("/")
    if os.path.isabs(filename) or any(part in ("", ".", "..") for part in parts):
        raise _Skip(f"its value file {filename!r} is outside the cache directory; not read")
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    directory_flag = getattr(os, "O_DIRECTORY", 0)
    try:
        if os.open in os.supports_dir_fd:
            fd = os.open(directory, os.O_RDONLY | directory_flag)
            try:
                for part in parts[:-1]:
                    step = os.open(part, os.O_RDONLY | directory_flag | nofollow, dir_fd=fd)
                    os.close(fd)
                    fd = step
                flags = os.O_RDONLY | nofollow | getattr(os, "O_NONBLOCK", 0)
                file_fd = os.open(parts[-1], flags, dir_fd=fd)
            finally:
                os.close(fd)
        else:  # pragma: no cover - platforms without dir_fd (Windows)
            full = os.path.join(directory, *parts)
            if os.path.realpath(full) != os.path.join(os.path.realpath(directory), *parts):
                raise _Skip(f"its value file {filename!r} is reached through a link; not read")
            file_fd = os.open(full, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise _Skip(f"its value file {filename!r} is missing") from None
    except OSError as error:
        raise _Skip(f"its value file {filename!r} cannot be opened: {error.strerror}") from None
    info = os.fstat(file_fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(file_fd)
        raise _Skip(f"its value file {filename!r} is not a regular file; not read")
    if info.st_size != size:
        os.close(file_fd)
        raise _Skip(
            f"its value file {filename!r} is {info.st_size} bytes long, but its row says "
            f"{size!r}: damaged or replaced; not read"
        )
    return os.fdopen(file_fd, "rb")


class _Decoder:
    """Turns the columns of a source row into a key and a value, by the caller's trust."""

    def __init__(self, trusted: bool) -> None:
        self.trusted = trusted

    def unpickle(self, data: bytes, what: str) -> Any:
        try:
            if self.trusted:
                value = pickle.loads(data)  # noqa: S301 - the caller said the source is trusted
            else:
                value = safe_loads(data)
        except pickle.UnpicklingError as error:
            raise _Skip(f"{what}: {error}{'' if self.trusted else _TRUST_HINT}") from None
        except Exception as error:  # a damaged or truncated pickle fails in many ways
            kind = type(error).__name__
            raise _Skip(f"{what}: the pickle cannot be loaded ({kind}: {error})") from None
        _check_expanded_size(value, len(data), what)
        return value

    def key(self, stored: Any, raw: Any) -> Any:
        if raw:
            if stored is None:
                raise _Skip(
                    "its key is NULL (python-diskcache stores a NaN key that way, and can never "
                    "read it back)"
                )
            return stored
        if not isinstance(stored, bytes):
            raise _Skip(f"its key is marked pickled but is a {type(stored).__name__}")
        return self.unpickle(stored, "its key")

    def value(
        self, directory: str, mode: Any, filename: Any, stored: Any, size: Any
    ) -> tuple[Any, bool, int]:
        """The value, whether it is an open binary file to stream, and its payload size."""
        if mode == _MODE_RAW:
            if isinstance(stored, str):
                return stored, False, len(stored.encode("utf-8", "surrogatepass"))
            if isinstance(stored, bytes):
                return stored, False, len(stored)
            return stored, False, 0 if stored is None else 8
        if mode == _MODE_BINARY:
            return _open_value_file(directory, filename, size), True, int(size)
        if mode == _MODE_TEXT:
            with _open_value_file(directory, filename, size) as reader:
                data = reader.read()
            try:
                # As python-diskcache reads it: UTF-8 with universal newlines.
                text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read()
            except UnicodeDecodeError as error:
                raise _Skip(f"its text value file is not UTF-8 ({error})") from None
            return text, False, len(data)
        if mode == _MODE_PICKLE:
            if stored is None:
                with _open_value_file(directory, filename, size) as reader:
                    stored = reader.read()
            if not isinstance(stored, bytes):
                raise _Skip(f"its pickled value is a {type(stored).__name__}, not bytes")
            return self.unpickle(stored, "its value"), False, len(stored)
        raise _Skip(f"its value mode {mode!r} is not one python-diskcache 5.6.3 writes")


#: How many items a decoded pickle may expand to, per byte of the pickle (plus a floor).
#: A pickle can refer to one object many times, and the safe format writes a value as a tree,
#: so 40 nested lists that each hold the one below twice (257 bytes of pickle) would be 2**40
#: items to write: the engine would never finish. A pickle that does not share objects has
#: at most about one item per byte; this leaves room for ordinary sharing.
_ITEMS_PER_BYTE = 16
_ITEMS_FLOOR = 10_000


def _check_expanded_size(value: Any, length: int, what: str) -> None:
    """Refuse a decoded value whose tree would be far larger than its pickle."""
    budget = _ITEMS_PER_BYTE * length + _ITEMS_FLOOR
    pending = [value]
    while pending:
        item = pending.pop()
        budget -= 1
        if budget < 0:
            raise _Skip(
                f"{what}: the pickle refers to the same objects so many times that, written "
                f"out, it would be more than {_ITEMS_PER_BYTE} items per byte of the pickle; "
                "not carried (a source that means no harm does not do this)"
            )
        kind = type(item)
        if kind is list or kind is tuple or kind is set or kind is frozenset:
            pending.extend(item)
        elif kind is dict:
            pending.extend(item.keys())
            pending.extend(item.values())


_TRUST_HINT = (
    ". If every writer of the source directory is trusted, run migrate(..., trusted=True) "
    "(and register the type with diskcache_oxide.register_type, or pass pickle=True)"
)

_SELECT = (
    "SELECT rowid, key, raw, store_time, expire_time, access_time, access_count, tag, size, "
    "mode, filename, value FROM Cache ORDER BY rowid"
)


def _rows(
    source: _Source, decoder: _Decoder, now: float, skipped: list[SkippedEntry]
) -> Iterator[list[_Row]]:
    """The source's live rows in insertion order, decoded, in batches of up to ``_BATCH``;
    rows that cannot be decoded, and expired ones, go to ``skipped`` instead."""
    cursor = source.db.execute(_SELECT)
    while True:
        fetched = cursor.fetchmany(_BATCH)
        if not fetched:
            return
        batch: list[_Row] = []
        for row in fetched:
            rowid, key, raw, stored, expires, accessed, count, tag, size, mode, name, val = row
            try:
                decoded_key = decoder.key(key, raw)
            except _Skip as why:
                skipped.append(SkippedEntry(key, str(why), source.name, rowid))
                continue
            if expires is not None and expires <= now:
                skipped.append(SkippedEntry(decoded_key, "expired", source.name, rowid))
                continue
            try:
                value, read, length = decoder.value(source.directory, mode, name, val, size)
            except _Skip as why:
                skipped.append(SkippedEntry(decoded_key, str(why), source.name, rowid))
                continue
            batch.append(
                _Row(
                    rowid,
                    decoded_key,
                    value,
                    read,
                    float(stored) if stored is not None else now,
                    None if expires is None else float(expires),
                    float(accessed) if accessed is not None else now,
                    int(count or 0),
                    tag,
                    length,
                )
            )
        yield batch


# ----- writing the destination ---------------------------------------------------------------


def _write_batch(
    cache: Cache, rows: list[_Row], cache_name: str, report: MigrationReport, pickled: bool
) -> None:
    """Store ``rows`` in ``cache`` in one transaction; rows it refuses go to the report."""
    importer = getattr(cache, IMPORT_CALL, None)
    try:
        if importer is not None:
            failures: list[tuple[int, BaseException]] = list(
                importer(
                    [
                        (
                            row.key,
                            row.value,
                            row.read,
                            row.store_time,
                            row.expire_time,
                            row.access_time,
                            row.access_count,
                            row.tag,
                        )
                        for row in rows
                    ]
                )
            )
            refused = {index: error for index, error in failures}
            for index, row in enumerate(rows):
                error = refused.get(index)
                if error is None:
                    _converted(report, row, pickled)
                else:
                    report.skipped.append(
                        SkippedEntry(row.key, _refusal(error, pickled), cache_name, row.rowid)
                    )
            return
        with cache.transact():
            for row in rows:
                if row.expire_time is None:
                    expire = None
                else:
                    expire = row.expire_time - time.time()
                    if expire <= 0:
                        report.skipped.append(
                            SkippedEntry(row.key, "expired", cache_name, row.rowid)
                        )
                        continue
                try:
                    cache.set(row.key, row.value, expire, read=row.read, tag=row.tag)
                except (TypeError, ValueError, OverflowError) as error:
                    report.skipped.append(
                        SkippedEntry(row.key, _refusal(error, pickled), cache_name, row.rowid)
                    )
                    continue
                _converted(report, row, pickled)
    finally:
        for row in rows:
            if row.read:
                row.value.close()


def _converted(report: MigrationReport, row: _Row, pickled: bool) -> None:
    report.converted += 1
    report.bytes += row.size
    if pickled and not row.read and not _storable(row.value):
        report.pickled += 1


def _storable(value: Any, depth: int = 0) -> bool:
    """Whether the safe format stores ``value`` without a pickle (used only to count the
    values a ``pickle=True`` destination pickled)."""
    if value is None or type(value) in _SCALARS:
        return True
    if depth > 200:
        return False
    kind = type(value)
    if kind in (list, tuple, set, frozenset):
        return all(_storable(item, depth + 1) for item in value)
    if kind is dict:
        return all(_storable(k, depth + 1) and _storable(v, depth + 1) for k, v in value.items())
    return kind in _BY_TYPE


_SCALARS = frozenset(
    {
        bool,
        int,
        float,
        str,
        bytes,
        datetime.datetime,
        datetime.date,
        datetime.time,
        datetime.timedelta,
        decimal.Decimal,
        uuid.UUID,
        pathlib.PurePosixPath,
        pathlib.PureWindowsPath,
        pathlib.PosixPath,
        pathlib.WindowsPath,
    }
)


def _refusal(error: BaseException, pickled: bool) -> str:
    if isinstance(error, UnsupportedTypeError) and not pickled:
        return (
            f"the destination cannot store it: {error}. To keep such values, pass "
            "pickle=True to migrate (the destination must then be opened with pickle=True)"
        )
    return f"the destination cannot store it: {type(error).__name__}: {error}"


def _whole(value: Any) -> Any:
    """python-diskcache keeps whatever a setting was given; a FanoutCache shard's size limit
    is a float (the whole limit divided by the shard count). Whole floats become ints."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _skip_setting(report: MigrationReport, skipped: SkippedSetting) -> None:
    """Record a setting not carried, once: the shards of a FanoutCache normally share their
    settings, and one line says it for all of them."""
    for seen in report.settings_skipped:
        if (seen.name, seen.value, seen.reason) == (skipped.name, skipped.value, skipped.reason):
            return
    report.settings_skipped.append(skipped)


def _apply_settings(
    cache: Cache,
    settings: dict[str, Any],
    where: str,
    names: Iterable[str],
    report: MigrationReport,
) -> None:
    for name in names:
        if name not in settings:
            continue
        value = _whole(settings[name])
        try:
            if cache.reset(name) != value:
                cache.reset(name, value)
        except (ValueError, TypeError) as error:
            _skip_setting(report, SkippedSetting(name, value, str(error), where))


def _note_foreign_settings(source: _Source, report: MigrationReport) -> None:
    for name, value in source.settings.items():
        if name in DEFAULT_SETTINGS or name in ("count", "size"):
            continue
        if name in ("hits", "misses"):
            if value:
                reason = "the statistics counters start again at 0: no call sets them"
                _skip_setting(report, SkippedSetting(name, value, reason, source.name))
            continue
        reason = "not a setting diskcache_oxide has"
        if name.startswith("disk_"):
            reason += (
                "; a disk_* setting python-diskcache does not define suggests a custom Disk "
                "class, whose values come over as the raw bytes or text it stored"
            )
        _skip_setting(report, SkippedSetting(name, value, reason, source.name))


def _open_destination(
    directory: str, settings: dict[str, Any], where: str, pickled: bool, report: MigrationReport
) -> Cache:
    """A new cache in ``directory`` that culls nothing while it fills, with the settings that
    decide how entries are stored already applied."""
    cache = Cache(directory, pickle=pickled, eviction_policy="none")
    try:
        _apply_settings(cache, settings, where, _EARLY_SETTINGS, report)
        if cache.reset("sqlite_auto_vacuum") != DEFAULT_SETTINGS["sqlite_auto_vacuum"]:
            # A new auto_vacuum mode is applied by the next open (D-036): reopen now, while
            # the database is empty and that costs nothing.
            cache.close()
            cache = Cache(directory, pickle=pickled)
    except BaseException:
        cache.close()
        raise
    return cache


def _copy_cache(
    source: _Source,
    targets: list[Cache],
    route: Callable[[Any], int] | None,
    decoder: _Decoder,
    report: MigrationReport,
    pickled: bool,
    tick: Callable[[int], None],
) -> None:
    """Copy every live entry of ``source`` into ``targets`` (one cache, or the shards of a
    FanoutCache with ``route`` picking each key's shard)."""
    now = time.time()
    before = report.converted + len(report.skipped)
    for batch in _rows(source, decoder, now, report.skipped):
        if route is None:
            _write_batch(targets[0], batch, source.name, report, pickled)
        else:
            groups: dict[int, list[_Row]] = {}
            for row in batch:
                groups.setdefault(route(row.key), []).append(row)
            for index in sorted(groups):
                _write_batch(targets[index], groups[index], source.name, report, pickled)
        done = report.converted + len(report.skipped)
        tick(done - before)
        before = done
    tick(report.converted + len(report.skipped) - before)


# ----- the call ------------------------------------------------------------------------------


def migrate(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    trusted: bool = False,
    pickle: bool = False,
    progress: Progress | None = None,
) -> MigrationReport:
    """Copy a python-diskcache 5.6.3 ``Cache`` or ``FanoutCache`` directory into a new
    diskcache_oxide directory.

    Every live entry comes over with its key, value, tag and expiry time, in its insertion
    order; store and access times and access counts come over exactly when the engine has
    the bulk import call (:data:`IMPORT_CALL`), and are otherwise those of the copy (the
    report's ``approximated`` says so). The settings come over too (a FanoutCache keeps its
    shard count, and its named caches under ``cache/``, ``deque/`` and ``index/``). Expired
    entries are left behind and reported.

    ``src`` is only read: its database through a read-only snapshot, its value files through
    descriptors that follow no links. ``dst`` must not exist (or be an empty directory): the
    copy is built in a hidden sibling directory, ``.<name>.migrating-*``, and renamed to
    ``dst`` only when complete, so ``dst`` is never seen half-written. If the migration
    fails or is interrupted (``KeyboardInterrupt``, an exception from ``progress``), the
    sibling is removed; a killed process may leave it behind, and it may be deleted.

    :param src: the python-diskcache directory
    :param dst: where the diskcache_oxide cache is made
    :param trusted: fully unpickle pickled keys and values. Only for a source whose every
        writer you trust: loading a pickle can run any code (CVE-2025-69872). By default a
        restricted unpickler (:class:`SafeUnpickler`) builds only the data types the safe
        format stores, and every other pickle is skipped and reported, never run
    :param pickle: open the destination with ``pickle=True``, so that values the safe format
        cannot express (your own classes, loaded with ``trusted=True``) are stored as
        pickles instead of skipped. Every reader of ``dst`` must then open it with
        ``pickle=True``, and the directory is as exposed as the source was
    :param progress: called as ``progress(done, total)`` with the entries processed so far
        and the total, at the start, after every batch of 1,000 and at the end. An exception
        it raises aborts the migration and leaves no ``dst``
    :return: a :class:`MigrationReport`: counts, skipped entries with their reasons, bytes,
        settings carried and not carried
    :raises NotACacheError: if ``src`` holds no python-diskcache cache (or is already a
        diskcache_oxide one)
    :raises FileExistsError: if ``dst`` exists and is not an empty directory
    """
    started = time.perf_counter()
    source_dir = os.path.abspath(os.path.expandvars(os.path.expanduser(os.fspath(src))))
    target = os.path.abspath(os.path.expandvars(os.path.expanduser(os.fspath(dst))))
    if not os.path.isdir(source_dir):
        raise NotADirectoryError(f"{source_dir} is not a directory: pass the cache's directory")
    inside = os.path.commonpath([source_dir, target]) == source_dir
    if inside:
        raise ValueError(
            f"the destination {target} is inside the source {source_dir}; migrate into a "
            "directory of its own, so the source stays untouched"
        )
    if os.path.lexists(target) and not (
        os.path.isdir(target) and not os.path.islink(target) and not os.listdir(target)
    ):
        raise FileExistsError(
            f"{target} already exists; migrate into a new path, or remove it first"
        )
    if os.path.exists(os.path.join(source_dir, "fanout.json")):
        raise NotACacheError(
            f"{source_dir} is already a diskcache_oxide FanoutCache: open it with "
            "diskcache_oxide.FanoutCache instead of migrating it"
        )
    if os.path.isfile(os.path.join(source_dir, "cache.db")):
        layout: Literal["cache", "fanout"] = "cache"
        shard_names: list[str] = []
    else:
        shard_names = _shard_names(source_dir)
        if not shard_names:
            raise NotACacheError(
                f"{source_dir} holds neither cache.db (a python-diskcache Cache) nor shard "
                "directories 000/, 001/, ... with one each (a FanoutCache); pass the directory "
                "the cache was opened on"
            )
        layout = "fanout"

    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    building = tempfile.mkdtemp(prefix=f".{os.path.basename(target)}.migrating-", dir=parent)
    scratch = building + ".snapshot"
    report = MigrationReport(source=source_dir, destination=target, layout=layout)
    sources: list[_Source] = []
    opened: list[Cache] = []
    try:
        names = [""] if layout == "cache" else shard_names + _named_caches(source_dir)
        for number, name in enumerate(names):
            directory = os.path.join(source_dir, *name.split("/")) if name else source_dir
            db = _open_database(directory, os.path.join(scratch, str(number)))
            (count,) = db.execute("SELECT COUNT(*) FROM Cache").fetchone()
            sources.append(_Source(name, directory, db, _read_settings(db), int(count)))
        report.total = sum(source.count for source in sources)
        report.caches = [source.name for source in sources]
        done = 0

        def tick(step: int) -> None:
            nonlocal done
            done += step
            if progress is not None and step:
                progress(done, report.total)

        if progress is not None:
            progress(0, report.total)
        decoder = _Decoder(trusted)
        if layout == "cache":
            _migrate_plain(sources[0], building, decoder, report, pickle, tick, opened)
        else:
            shards = [s for s in sources if s.name in shard_names]
            named = [s for s in sources if s.name not in shard_names]
            _migrate_fanout(shards, named, building, decoder, report, pickle, tick, opened)
        if progress is not None and done != report.total:
            progress(report.total, report.total)
        for cache in opened:
            cache.close()
        opened.clear()
        for source in sources:
            source.db.close()
        sources.clear()
        os.rename(building, target)
    except BaseException:
        for cache in opened:
            try:
                cache.close()
            except Exception:  # noqa: S110 - the original error is the one to raise
                pass
        shutil.rmtree(building, ignore_errors=True)
        raise
    finally:
        for source in sources:
            source.db.close()
        shutil.rmtree(scratch, ignore_errors=True)
    if not hasattr(Cache, IMPORT_CALL):
        report.approximated = {
            "store_time": "the time of the copy (the engine has no call to set it yet)",
            "access_time": "the time of the copy (the engine has no call to set it yet)",
            "access_count": "0 (the engine has no call to set it yet)",
            "expire_time": "rebuilt from the time left when each entry was written; within "
            "a few milliseconds of the source's",
        }
    else:
        report.carried = CARRIED_EXACTLY + (
            "expire_time",
            "store_time",
            "access_time",
            "access_count",
        )
    report.seconds = time.perf_counter() - started
    return report


def _migrate_plain(
    source: _Source,
    building: str,
    decoder: _Decoder,
    report: MigrationReport,
    pickled: bool,
    tick: Callable[[int], None],
    opened: list[Cache],
) -> None:
    cache = _open_destination(building, source.settings, source.name, pickled, report)
    opened.append(cache)
    _note_foreign_settings(source, report)
    _copy_cache(source, [cache], None, decoder, report, pickled, tick)
    _apply_settings(cache, source.settings, source.name, _LATE_SETTINGS, report)
    report.settings = {name: cache.reset(name) for name in DEFAULT_SETTINGS}


def _migrate_fanout(
    shards: list[_Source],
    named: list[_Source],
    building: str,
    decoder: _Decoder,
    report: MigrationReport,
    pickled: bool,
    tick: Callable[[int], None],
    opened: list[Cache],
) -> None:
    count = int(shards[-1].name) + 1
    report.shards = count
    # The FanoutCache records its layout (fanout.json) and makes the shard directories; the
    # shards are then written as the plain caches they are, each key going to the shard
    # FanoutCache will look in: shard_hash(key) % shards (D-021).
    FanoutCache(building, shards=count, eviction_policy="none").close()
    # A shard missing from the source (python-diskcache makes them all, so only a damaged
    # directory lacks one) takes the settings of the first.
    by_name = {source.name: source for source in shards}
    settings = [by_name.get(f"{n:03d}", shards[0]).settings for n in range(count)]
    targets: list[Cache] = []
    for number in range(count):
        name = f"{number:03d}"
        directory = os.path.join(building, name)
        cache = _open_destination(directory, settings[number], name, pickled, report)
        opened.append(cache)
        targets.append(cache)
    for source in shards:
        _note_foreign_settings(source, report)

    def route(key: Any) -> int:
        return shard_hash(key) % count

    for source in shards:
        _copy_cache(source, targets, route, decoder, report, pickled, tick)
    for number, cache in enumerate(targets):
        _apply_settings(cache, settings[number], f"{number:03d}", _LATE_SETTINGS, report)
    report.settings = {name: targets[0].reset(name) for name in DEFAULT_SETTINGS}
    report.settings["size_limit"] = sum(cache.reset("size_limit") for cache in targets)
    for source in named:
        directory = os.path.join(building, *source.name.split("/"))
        cache = _open_destination(directory, source.settings, source.name, pickled, report)
        opened.append(cache)
        _note_foreign_settings(source, report)
        _copy_cache(source, [cache], None, decoder, report, pickled, tick)
        _apply_settings(cache, source.settings, source.name, _LATE_SETTINGS, report)
