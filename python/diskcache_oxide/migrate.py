"""Bring a python-diskcache 5.6.3 directory over to diskcache_oxide: :func:`migrate`.

The source is read directly from its SQLite database and value files, never through
python-diskcache, and never written: the database is opened read-only (``immutable=1``
when no write-ahead log is present; a private copy of the database and its log when one
is, since even a read-only SQLite connection creates and updates ``-wal``/``-shm`` files).

Pickles are the danger this project exists to close (CVE-2025-69872, D-003). Unless the
caller says the source is trusted, a pickled key or value is decoded by
:class:`SafeUnpickler`, which can build only the data types the safe format stores and
refuses any other global a pickle names, so a hostile pickle is reported and skipped
without running anything.

Pickles are not the only thing a writer of the source controls. Every row is checked against
what python-diskcache writes (types of columns, UTF-8, sound decoded objects), the tables
against its schema, and every file against what it really has on disk; what fails is skipped
and reported, or the source is refused in one line before anything is written. See
docs/decisions/D-041-migrating-from-python-diskcache.md ("A hostile source") and
docs/guide-migrating.md.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import io
import itertools
import math
import os
import os.path
import pathlib
import pickle
import re
import reprlib
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
from .errors import CacheError, NotACacheError, UnsupportedTypeError
from .fanout import FanoutCache, shard_hash
from .registry import _BY_TYPE

__all__ = [
    "CARRIED_EXACTLY",
    "IMPORT_CALL",
    "MigrationError",
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

#: The most bytes of values a batch holds in memory: a batch ends early once its values reach
#: it, so that 1,000 large values are never loaded at once.
_BATCH_BYTES = 64 << 20

#: Binary value files longer than this are streamed into the destination with
#: ``set(key, file, read=True)`` instead of being loaded (the bulk import call reads a file
#: whole). The price: the engine has no streaming call that takes times, so such an entry gets
#: the copy's store and access times and a count of 0 (the report says so).
_STREAM_ABOVE = 32 << 20

#: What a file may claim beyond what it has on disk (``st_blocks * 512``) before it is taken
#: for one with holes: 16 times its allocation, or its allocation plus 64 MiB, whichever is
#: more. Neither SQLite nor python-diskcache leaves holes, but a compressing filesystem (ZFS,
#: btrfs) allocates less than the length of what compresses well; this leaves room for that.
_HOLE_RATIO = 16
_HOLE_SLACK = 64 << 20

#: The deepest nesting of containers a decoded key or value may have: the engine writes no
#: deeper (and every recursive walk of it after that, a repr or a shard hash, stays shallow).
_MAX_DEPTH = 200

#: How much of the skipped entries and settings :meth:`MigrationReport.summary` lists, and
#: how long a reason, a key or a setting may be there (a reason is cut when it is recorded).
_SHOWN = 50
_REASON_LIMIT = 500
_KEY_LIMIT = 80
_WHERE_LIMIT = 40

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
            # The names come from the pickle: a hostile one can make them any length.
            f"the pickle names {_cut(module, 60)}.{_cut(name, 60)}, which is not a data type "
            "the safe format stores"
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


class MigrationError(CacheError, ValueError):
    """:func:`migrate` refused to run: the destination is (or resolves to) the source or a
    path inside it, or the source cannot be read as it stands (its database is damaged, or
    its database or log claims far more bytes than it has on disk). Nothing was written.

    A ``ValueError`` too, which is what a destination inside the source raised before.
    """


def _cut(text: str, limit: int = _REASON_LIMIT) -> str:
    """``text``, or its first ``limit`` characters and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def _brief(value: Any, limit: int = _KEY_LIMIT) -> str:
    """A repr of ``value`` for a person, at most about ``limit`` characters, that cannot fail:
    a key from a hostile source may be huge, nested deep, or an object whose repr raises."""
    shorter = reprlib.Repr()
    shorter.maxlevel = 3
    shorter.maxstring = shorter.maxother = shorter.maxlong = limit
    try:
        text = shorter.repr(value)
    except Exception as error:  # reprlib guards most objects; this is for the rest
        text = f"<a {type(value).__name__} whose repr fails: {type(error).__name__}>"
    return _cut(text, limit)


@dataclass(frozen=True)
class SkippedEntry:
    """An entry of the source that was not carried over, and why.

    ``key`` is the decoded key, or the key's stored bytes when the key itself could not be
    decoded (a refused or malformed pickle, text that is not UTF-8). ``cache`` is where it
    was: ``''`` for a plain cache, the shard (``'000'``) or the named cache
    (``'index/users'``) of a FanoutCache. ``rowid`` is its row in that source database.
    A reason longer than 500 characters is cut, saying how much was left out.
    """

    key: Any
    reason: str
    cache: str = ""
    rowid: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", _cut(self.reason))


@dataclass(frozen=True)
class SkippedSetting:
    """A row of the source's Settings table that the destination does not carry, and why.

    A name that is not valid UTF-8 is given with its bad bytes escaped (``'a\\xffb'``); a
    reason longer than 500 characters is cut.
    """

    name: str
    value: Any
    reason: str
    cache: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", _cut(self.reason))


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
    :ivar streamed: converted values over 32 MiB, streamed from their value files instead of
        loaded; their store and access times are the copy's (``approximated`` says so)
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
    streamed: int = 0
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
        """The report as a few lines of text: the counts, then the first 50 skipped entries
        and the first 50 settings not carried, each with its reason, and how many more there
        are (``skipped`` and ``settings_skipped`` hold them all). Keys, values and reasons
        are cut short, so a hostile source cannot make it print without end."""
        shape = "Cache" if self.layout == "cache" else f"FanoutCache ({self.shards} shards)"
        lines = [
            f"migrated {self.source} -> {self.destination} ({shape})",
            f"converted {self.converted} of {self.total} entries, {self.bytes} bytes of values, "
            f"in {self.seconds:.2f} s",
        ]
        if self.pickled:
            lines.append(f"{self.pickled} values stored as pickles (open with pickle=True)")
        if self.streamed:
            lines.append(f"{self.streamed} values over 32 MiB streamed from their value files")
        lines.append(f"skipped {len(self.skipped)} entries" + (":" if self.skipped else ""))
        for entry in self.skipped[:_SHOWN]:
            where = f" [{_cut(entry.cache, _WHERE_LIMIT)}]" if entry.cache else ""
            lines.append(f"  {_brief(entry.key)}{where}: {_cut(entry.reason)}")
        if len(self.skipped) > _SHOWN:
            lines.append(f"  ... and {len(self.skipped) - _SHOWN} more (listed in report.skipped)")
        if self.settings_skipped:
            lines.append("settings not carried:")
        for setting in self.settings_skipped[:_SHOWN]:
            where = f" [{_cut(setting.cache, _WHERE_LIMIT)}]" if setting.cache else ""
            name, value = _cut(setting.name, 60), _brief(setting.value, 60)
            lines.append(f"  {name}={value}{where}: {_cut(setting.reason)}")
        if len(self.settings_skipped) > _SHOWN:
            more = len(self.settings_skipped) - _SHOWN
            lines.append(f"  ... and {more} more (listed in report.settings_skipped)")
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
    value: Any  # the value, or for a value file to stream the open file
    read: bool  # stream ``value`` with set(read=True): a binary value file over _STREAM_ABOVE
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
    settings: dict[str | _BadText, Any]
    count: int


class _BadText:
    """A TEXT value of the source that is not valid UTF-8. python-diskcache cannot write one
    (Python's sqlite3 stores a str as UTF-8), so only a tampered database holds it; reading
    it as a str would fail the whole query, so it comes through as this and is reported."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BadText) and other.data == self.data

    def __hash__(self) -> int:
        return hash(self.data)

    def __repr__(self) -> str:
        return f"<text that is not UTF-8: {self.data!r}>"


def _text(data: bytes) -> str | _BadText:
    """The source connection's ``text_factory``: a TEXT value as a str, or a :class:`_BadText`."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _BadText(data)


def _uri(path: str, **params: str) -> str:
    query = "&".join(f"{name}={value}" for name, value in params.items())
    return f"file:{urllib.parse.quote(os.path.abspath(path))}?{query}"


@contextlib.contextmanager
def _reading(path: str) -> Iterator[None]:
    """Turn an SQLite error while reading the source database ``path`` into a one-line
    :class:`MigrationError`: the schema was checked, so what fails now is damage."""
    try:
        yield
    except sqlite3.Error as error:
        raise MigrationError(
            f"cannot read {path}: {error}. The database is damaged (or was changed while it "
            "was read); nothing was written. Repair it (sqlite3's .recover makes a readable "
            "copy) or restore it from a backup, then migrate again"
        ) from None


def _on_disk(info: os.stat_result) -> int | None:
    """The bytes a file has on disk (None where the platform does not say: Windows)."""
    blocks = getattr(info, "st_blocks", None)
    return None if blocks is None else int(blocks) * 512


def _holes(info: os.stat_result) -> int | None:
    """What the file has on disk, if its length claims far more than that (see
    ``_HOLE_RATIO``); None for a file that is backed by what it allocates."""
    allocated = _on_disk(info)
    if allocated is None:
        return None
    if info.st_size <= max(allocated * _HOLE_RATIO, allocated + _HOLE_SLACK):
        return None
    return allocated


def _copy_bounded(path: str, to: str) -> None:
    """Copy the source file ``path`` (the database or its log) to ``to``, refusing a link, a
    file that is not a regular one, or one whose length is mostly holes: copying a 1 TB hole
    would write 1 TB of zeros into the scratch directory."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    flags = os.O_RDONLY | nofollow | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if os.path.islink(path):
            raise NotACacheError(
                f"{path} is a symbolic link; migrate reads only regular files"
            ) from None
        raise NotACacheError(f"{path} cannot be opened: {error.strerror}") from None
    with os.fdopen(fd, "rb") as reader:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotACacheError(f"{path} is not a regular file; migrate reads only those")
        allocated = _holes(info)
        if allocated is not None:
            raise MigrationError(
                f"{path} is {info.st_size} bytes long but only {allocated} bytes of it are on "
                "disk: a file with holes, which SQLite never writes, so it was altered; it is "
                "not copied and nothing was written. If a python-diskcache process is still "
                "writing the cache, stop it and migrate again; otherwise check the directory"
            )
        with open(to, "wb") as writer:
            shutil.copyfileobj(reader, writer, 1 << 20)


def _open_database(directory: str, scratch: str) -> sqlite3.Connection:
    """A read-only connection to the python-diskcache database in ``directory``, its schema
    checked (:func:`_check_python_diskcache`).

    Without a ``-wal`` file the database is opened ``immutable=1``, which creates nothing.
    With one (a process has the cache open, or died with it open), SQLite would create or
    update the ``-shm`` file even for a read-only connection, so the database and its log
    are copied into ``scratch`` (each measured by what it has on disk first) and the copy is
    read instead. TEXT that is not UTF-8 reads as :class:`_BadText` instead of failing.
    """
    db_path = os.path.join(directory, "cache.db")
    for path in (db_path, db_path + "-wal"):
        if os.path.islink(path):
            raise NotACacheError(f"{path} is a symbolic link; migrate reads only regular files")
    if os.path.lexists(db_path + "-wal"):
        os.makedirs(scratch, exist_ok=True)
        copy = os.path.join(scratch, "cache.db")
        _copy_bounded(db_path, copy)
        _copy_bounded(db_path + "-wal", copy + "-wal")
        db = sqlite3.connect(_uri(copy, mode="ro"), uri=True)
    else:
        db = sqlite3.connect(_uri(db_path, mode="ro", immutable="1"), uri=True)
    db.text_factory = _text
    try:
        _check_python_diskcache(db, db_path)
    except BaseException:
        db.close()
        raise
    return db


#: python-diskcache 5.6.3's tables: each column's name and declared type, in order.
_SCHEMA: dict[str, tuple[tuple[str, str], ...]] = {
    "Cache": (
        ("rowid", "INTEGER"),
        ("key", "BLOB"),
        ("raw", "INTEGER"),
        ("store_time", "REAL"),
        ("expire_time", "REAL"),
        ("access_time", "REAL"),
        ("access_count", "INTEGER"),
        ("tag", "BLOB"),
        ("size", "INTEGER"),
        ("mode", "INTEGER"),
        ("filename", "TEXT"),
        ("value", "BLOB"),
    ),
    "Settings": (("key", "TEXT"), ("value", "")),
}


def _check_python_diskcache(db: sqlite3.Connection, path: str) -> None:
    """Refuse a database that is ours, or whose Cache and Settings are not python-diskcache
    5.6.3's tables.

    The names are not enough: a view (or a generated column) computes its rows when read,
    and one that recurses without end or builds gigabyte blobs would hang the migration or
    exhaust its memory. A real table with the expected columns holds only what is on disk.
    """
    try:
        (app_id,) = db.execute("PRAGMA application_id").fetchone()
        objects = db.execute("SELECT name, type, sql FROM sqlite_master").fetchall()
    except sqlite3.DatabaseError as error:
        raise NotACacheError(f"{path} is not an SQLite database ({error})") from None
    if app_id == 0x44434F58:
        raise NotACacheError(
            f"{path} is already a diskcache_oxide cache: open it with diskcache_oxide.Cache "
            "instead of migrating it"
        )
    # Tables and views share one namespace, which ignores case; a trigger or an index of the
    # same name is another object and does not stand in for the table.
    found = {
        name.lower(): (kind, sql)
        for name, kind, sql in objects
        if isinstance(name, str) and kind in ("table", "view")
    }
    if not {"cache", "settings"} <= found.keys():
        raise NotACacheError(
            f"{path} has no Cache and Settings tables, so it is not a python-diskcache "
            "cache; migrate reads only directories written by python-diskcache"
        )
    for table, expected in _SCHEMA.items():
        kind, sql = found[table.lower()]
        problem = _schema_problem(db, table, kind, sql, expected)
        if problem:
            raise NotACacheError(
                f"{path}: {problem}, where python-diskcache 5.6.3 has a table of its own; "
                "this is not a python-diskcache cache as it wrote it, and it is not read"
            )


def _schema_problem(
    db: sqlite3.Connection,
    table: str,
    kind: object,
    sql: object,
    expected: tuple[tuple[str, str], ...],
) -> str | None:
    """What is wrong with the source's ``table``, or None if it is python-diskcache's."""
    if kind != "table":
        return f"{table} is a {kind}, not a table (a view computes its rows when read)"
    if not isinstance(sql, str) or re.match(r"\s*CREATE\s+VIRTUAL\b", sql, re.IGNORECASE):
        return f"{table} is a virtual table"
    try:
        columns = db.execute(f"PRAGMA table_xinfo({table})").fetchall()
    except sqlite3.DatabaseError as error:
        return f"{table} cannot be read ({error})"
    try:
        tables = db.execute("PRAGMA table_list").fetchall()
    except sqlite3.DatabaseError:  # SQLite before 3.37 has no table_list
        tables = None
    generated = [str(row[1]) for row in columns if row[6]]
    if generated:
        return f"{table} has generated columns ({', '.join(generated)}), computed when read"
    have = [(str(row[1]), str(row[2]).upper()) for row in columns]
    if have != list(expected):
        names = [name for name, _ in expected]
        missing = [name for name in names if name not in {n for n, _ in have}]
        extra = [name for name, _ in have if name not in names]
        other = [f"{n} {t or 'untyped'}" for n, t in have if n in names and (n, t) not in expected]
        said = [
            f"missing {', '.join(missing)}" if missing else "",
            f"more columns: {', '.join(extra)}" if extra else "",
            f"columns of other types: {', '.join(other)}" if other else "",
        ]
        differences = "; ".join(part for part in said if part) or "its columns in another order"
        return f"{table} has other columns than python-diskcache's ({_cut(differences, 120)})"
    keys = [str(row[1]) for row in columns if row[5]]
    if table == "Cache" and keys != ["rowid"]:
        return "Cache's rowid column is not its INTEGER PRIMARY KEY"
    if tables is not None:
        without_rowid = any(
            row[0] == "main" and str(row[1]).lower() == table.lower() and row[4] for row in tables
        )
    else:
        without_rowid = bool(re.search(r"\bWITHOUT\s+ROWID\b", sql, re.IGNORECASE))
    if without_rowid:
        return f"{table} is a WITHOUT ROWID table"
    return None


def _setting_name(name: object) -> str:
    """A Settings key as a str: text that is not UTF-8 (or a blob) with its bad bytes escaped."""
    if isinstance(name, str):
        return name
    data = name.data if isinstance(name, _BadText) else name
    if isinstance(data, bytes):
        return data.decode("utf-8", "backslashreplace")
    return str(name)


def _read_settings(db: sqlite3.Connection) -> dict[str | _BadText, Any]:
    """The Settings rows by name; a name that is not UTF-8 stays a :class:`_BadText` (so the
    report can say why it is not carried), and any other that is not text becomes a str."""
    rows = db.execute("SELECT key, value FROM Settings")
    return {
        name if isinstance(name, (str, _BadText)) else _setting_name(name): value
        for name, value in rows
    }


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


def _open_value_file(directory: str, filename: object, size: int) -> IO[bytes]:
    """Open the value file ``filename`` of the cache in ``directory`` for reading.

    The name comes from the source database, which whoever could write the directory may
    have forged, so it must be a relative path of plain names inside the directory, and no
    link on the way is followed (each step is opened relative to the last with
    ``O_NOFOLLOW``). A FIFO or device in its place is refused rather than read, and so is a
    file whose length is not the one python-diskcache recorded in the row (it was damaged or
    replaced), or one whose length is mostly holes: python-diskcache writes every byte, and
    reading a sparse file means reading (and holding, or writing again) bytes that take no
    room in the source.
    """
    if isinstance(filename, _BadText):
        raise _Skip(
            f"its filename column is text that is not valid UTF-8 ({_brief(filename.data, 100)})"
        )
    if not isinstance(filename, str) or not filename or "\x00" in filename:
        raise _Skip(f"its row names no usable value file ({_brief(filename, 100)})")
    named = _brief(filename, 100)  # the database's text, quoted in the reasons
    parts = filename.replace("\\", "/").split("/")
    if os.path.isabs(filename) or any(part in ("", ".", "..") for part in parts):
        raise _Skip(f"its value file {named} is outside the cache directory; not read")
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
                raise _Skip(f"its value file {named} is reached through a link; not read")
            file_fd = os.open(full, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise _Skip(f"its value file {named} is missing") from None
    except OSError as error:
        raise _Skip(f"its value file {named} cannot be opened: {error.strerror}") from None
    info = os.fstat(file_fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(file_fd)
        raise _Skip(f"its value file {named} is not a regular file; not read")
    if info.st_size != size:
        os.close(file_fd)
        raise _Skip(
            f"its value file {named} is {info.st_size} bytes long, but its row says "
            f"{size!r}: damaged or replaced; not read"
        )
    allocated = _holes(info)
    if allocated is not None:
        os.close(file_fd)
        raise _Skip(
            f"its value file {named} is {info.st_size} bytes long but only {allocated} "
            "bytes of it are on disk (a file with holes, which python-diskcache never "
            "writes); not read"
        )
    return os.fdopen(file_fd, "rb")


def _shown(value: object) -> str:
    """A column's value in a reason: its brief repr and, for text and blobs, what it is."""
    if isinstance(value, _BadText):
        return f"text that is not valid UTF-8 ({_brief(value.data, 40)})"
    kind = {str: "text", bytes: "a blob", float: "a float"}.get(type(value))
    return _brief(value, 40) + (f" ({kind})" if kind else "")


def _time(value: object, column: str, now: float) -> float:
    """A store or access time: a finite number (NULL, which SQLite makes of NaN, is now)."""
    if value is None:
        return now
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    raise _Skip(f"its {column} column holds {_shown(value)}, not a time: altered; not carried")


def _whole_number(value: object, column: str, default: int) -> int:
    """A count or a size: a whole number from 0 to 2**63 - 1 (NULL is ``default``)."""
    if value is None:
        return default
    if type(value) is int and 0 <= value < 1 << 63:
        return value
    raise _Skip(
        f"its {column} column holds {_shown(value)}, not a count from 0 to 2**63 - 1: "
        "altered; not carried"
    )


def _read_whole(reader: IO[bytes], filename: object) -> bytes:
    """All of an opened value file (its length was checked against what is on disk), closed."""
    with reader:
        try:
            return reader.read()
        except OSError as error:
            raise _Skip(
                f"its value file {_brief(filename, 100)} cannot be read: {error.strerror}"
            ) from None


class _Decoder:
    """Turns the columns of a source row into a key and a value, by the caller's trust."""

    def __init__(self, trusted: bool) -> None:
        self.trusted = trusted

    def unpickle(self, data: bytes, what: str) -> Any:
        """The object the pickle ``data`` builds, checked by :func:`_check_decoded`.

        :raises _Skip: naming ``what``, if it cannot be loaded or is not sound
        """
        try:
            if self.trusted:
                value = pickle.loads(data)  # noqa: S301 - the caller said the source is trusted
            else:
                value = safe_loads(data)
        except pickle.UnpicklingError as error:
            raise _Skip(f"{what}: {_said(error)}{'' if self.trusted else _TRUST_HINT}") from None
        except Exception as error:  # a damaged or truncated pickle fails in many ways
            kind = type(error).__name__
            raise _Skip(f"{what}: the pickle cannot be loaded ({kind}: {_said(error)})") from None
        _check_decoded(value, len(data), what, restricted=not self.trusted)
        return value

    def key(self, stored: Any, raw: Any) -> Any:
        """The key of a row from its ``key`` and ``raw`` columns."""
        if raw == 1 and type(raw) is int:
            if stored is None:
                raise _Skip(
                    "its key is NULL (python-diskcache stores a NaN key that way, and can never "
                    "read it back)"
                )
            if isinstance(stored, _BadText):
                raise _Skip(f"its key is text that is not valid UTF-8 ({_brief(stored.data, 100)})")
            return stored
        if raw != 0 or type(raw) is not int:
            raise _Skip(f"its raw column holds {_shown(raw)}, not 0 or 1: altered; not carried")
        if not isinstance(stored, bytes):
            raise _Skip(f"its key is marked pickled but is {_shown(stored)}, not a blob")
        return self.unpickle(stored, "its key")

    def value(
        self, directory: str, mode: Any, filename: Any, stored: Any, size: int
    ) -> tuple[Any, bool, int]:
        """The value, whether it is an open binary file to stream, and its payload size."""
        if mode == _MODE_RAW and type(mode) is int:
            if isinstance(stored, _BadText):
                raise _Skip(f"its value is text that is not valid UTF-8 ({_brief(stored.data)})")
            if isinstance(stored, str):
                return stored, False, len(stored.encode("utf-8", "surrogatepass"))
            if isinstance(stored, bytes):
                return stored, False, len(stored)
            return stored, False, 0 if stored is None else 8
        if mode == _MODE_BINARY and type(mode) is int:
            reader = _open_value_file(directory, filename, size)
            if size > _STREAM_ABOVE:
                return reader, True, size
            data = _read_whole(reader, filename)
            return data, False, len(data)
        if mode == _MODE_TEXT and type(mode) is int:
            data = _read_whole(_open_value_file(directory, filename, size), filename)
            try:
                # As python-diskcache reads it: UTF-8 with universal newlines.
                text = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8").read()
            except UnicodeDecodeError as error:
                raise _Skip(f"its text value file is not UTF-8 ({error})") from None
            return text, False, len(data)
        if mode == _MODE_PICKLE and type(mode) is int:
            if stored is None:
                stored = _read_whole(_open_value_file(directory, filename, size), filename)
            if not isinstance(stored, bytes):
                raise _Skip(f"its pickled value is {_shown(stored)}, not a blob")
            return self.unpickle(stored, "its value"), False, len(stored)
        raise _Skip(f"its value mode {_shown(mode)} is not one python-diskcache 5.6.3 writes")


#: How many items a decoded pickle may expand to, per byte of the pickle (plus a floor).
#: A pickle can refer to one object many times, and the safe format writes a value as a tree,
#: so 40 nested lists that each hold the one below twice (257 bytes of pickle) would be 2**40
#: items to write: the engine would never finish. A pickle that does not share objects has
#: at most about one item per byte; this leaves room for ordinary sharing.
_ITEMS_PER_BYTE = 16
_ITEMS_FLOOR = 10_000

_CONTAINERS = (list, tuple, set, frozenset)
_PLAIN = frozenset({str, int, float, bytes, bool, type(None)})

#: The other types the restricted unpickler may build (see ``_IMMUTABLE_GLOBALS`` and
#: ``_STAND_INS``). Anything else it hands back is one of its own stand-ins, or a class or
#: function named by a pickle as a value: not data.
_DATA_TYPES = frozenset(
    {
        datetime.datetime,
        datetime.date,
        datetime.time,
        datetime.timedelta,
        datetime.timezone,
        zoneinfo.ZoneInfo,
        decimal.Decimal,
        uuid.UUID,
        pathlib.PurePosixPath,
        pathlib.PureWindowsPath,
        pathlib.PosixPath,
        pathlib.WindowsPath,
    }
)


def _check_decoded(value: Any, length: int, what: str, restricted: bool) -> None:
    """Refuse a decoded key or value that is not sound data.

    Three things a pickle can do while naming only allowed globals: share objects so that
    the tree written out is far larger than the pickle (at most ``_ITEMS_PER_BYTE`` items per
    byte); nest deeper than the engine writes (``_MAX_DEPTH``), which would also overflow
    every recursive walk of it afterwards (a repr in the report, a FanoutCache's shard
    hash); and ``BUILD`` state into the objects it makes, leaving a UUID whose number is
    text or a path whose cached fields are not its parts (:func:`_check_object`). From the
    restricted unpickler, anything but those data types (an instance of one of its
    stand-ins, a class named as a value) is refused too. The walk keeps a stack of
    iterators, so depth costs it nothing.
    """
    budget = _ITEMS_PER_BYTE * length + _ITEMS_FLOOR
    walking: list[Iterator[Any]] = [iter((value,))]
    while walking:
        for item in walking[-1]:
            budget -= 1
            if budget < 0:
                raise _Skip(
                    f"{what}: the pickle refers to the same objects so many times that, "
                    f"written out, it would be more than {_ITEMS_PER_BYTE} items per byte of "
                    "the pickle; not carried (a source that means no harm does not do this)"
                )
            kind = type(item)
            if kind in _PLAIN:
                continue
            if kind in _CONTAINERS or kind is dict:
                if len(walking) > _MAX_DEPTH:
                    raise _Skip(
                        f"{what}: it nests deeper than {_MAX_DEPTH} levels, deeper than the "
                        "destination stores; not carried"
                    )
                inner = itertools.chain.from_iterable(item.items()) if kind is dict else item
                walking.append(iter(inner))
                break
            if restricted and kind not in _DATA_TYPES:
                if isinstance(item, type):
                    built = f"the class {_cut(item.__qualname__, 60)} itself"
                else:  # a stand-in's own object, or a function
                    built = f"a bare {_cut(kind.__name__.removesuffix('_stand_in'), 60)}"
                raise _Skip(
                    f"{what}: the pickle yields {built}, which the safe format does not store"
                    + _TRUST_HINT
                )
            _check_object(item, what)
        else:
            walking.pop()


def _check_object(item: Any, what: str) -> None:
    """Refuse a UUID or a path that a pickle's ``BUILD`` left malformed."""
    if isinstance(item, uuid.UUID):
        try:
            number = item.int
        except Exception:  # a UUID made without BUILD has no number at all
            raise _Skip(f"{what}: a UUID without a number; the pickle was altered") from None
        if type(number) is not int or not 0 <= number < 1 << 128:
            raise _Skip(
                f"{what}: a UUID whose number is {_shown(number)}, not 128 bits; the pickle "
                "was altered"
            )
    elif isinstance(item, pathlib.PurePath):
        try:
            text = str(item)
            sound = type(item)(text) == item and hash(type(item)(text)) == hash(item)
        except Exception:
            sound = False
        if not sound:
            raise _Skip(
                f"{what}: a {type(item).__name__} whose fields do not make the path it "
                "claims; the pickle was altered"
            )


_TRUST_HINT = (
    ". If every writer of the source directory is trusted, run migrate(..., trusted=True) "
    "(and register the type with diskcache_oxide.register_type, or pass pickle=True)"
)

_SELECT = (
    "SELECT rowid, key, raw, store_time, expire_time, access_time, access_count, tag, size, "
    "mode, filename, value FROM Cache ORDER BY rowid"
)


def _stored_key(key: Any) -> Any:
    """A key as the report holds it when it could not be decoded: its stored form."""
    return key.data if isinstance(key, _BadText) else key


def _decode_row(
    source: _Source,
    decoder: _Decoder,
    now: float,
    skipped: list[SkippedEntry],
    row: tuple[Any, ...],
) -> _Row | None:
    """One source row as a :class:`_Row`, or None once it is recorded in ``skipped``.

    Every column is checked against what python-diskcache writes into it, since SQLite's
    column types do not stop anyone else from storing text in a time or a blob in a count.
    """
    rowid, key, raw, stored, expires, accessed, count, tag, size, mode, name, val = row
    try:
        decoded_key = decoder.key(key, raw)
    except _Skip as why:
        skipped.append(SkippedEntry(_stored_key(key), str(why), source.name, rowid))
        return None
    try:
        store_time = _time(stored, "store_time", now)
        access_time = _time(accessed, "access_time", now)
        if expires is not None and (type(expires) not in (int, float)):
            raise _Skip(
                f"its expire_time column holds {_shown(expires)}, not a time: altered; not carried"
            )
        access_count = _whole_number(count, "access_count", 0)
        length = _whole_number(size, "size", 0)
        if isinstance(tag, _BadText):
            raise _Skip(f"its tag is text that is not valid UTF-8 ({_brief(tag.data, 100)})")
        if expires is not None and expires <= now:
            raise _Skip("expired")
        value, read, length = decoder.value(source.directory, mode, name, val, length)
    except _Skip as why:
        skipped.append(SkippedEntry(decoded_key, str(why), source.name, rowid))
        return None
    return _Row(
        rowid,
        decoded_key,
        value,
        read,
        store_time,
        None if expires is None else float(expires),
        access_time,
        access_count,
        tag,
        length,
    )


def _rows(
    source: _Source, decoder: _Decoder, now: float, skipped: list[SkippedEntry]
) -> Iterator[list[_Row]]:
    """The source's live rows in insertion order, decoded, in batches; rows that cannot be
    decoded, and expired ones, go to ``skipped`` instead.

    A batch ends at ``_BATCH`` rows, once its values reach ``_BATCH_BYTES``, or after a value
    to stream (which is then its last row), so what it holds in memory stays bounded.
    """
    batch: list[_Row] = []
    held = 0
    with _reading(os.path.join(source.directory, "cache.db")):
        for fetched in source.db.execute(_SELECT):
            row = _decode_row(source, decoder, now, skipped, fetched)
            if row is None:
                continue
            batch.append(row)
            held += 0 if row.read else row.size
            if len(batch) >= _BATCH or held >= _BATCH_BYTES or row.read:
                yield batch
                batch, held = [], 0
    if batch:
        yield batch


# ----- writing the destination ---------------------------------------------------------------


def _write_batch(
    cache: Cache, rows: list[_Row], cache_name: str, report: MigrationReport, pickled: bool
) -> None:
    """Store ``rows`` in ``cache``, in order; rows it refuses go to the report.

    With the bulk import call, the rows held in memory go in one transaction each run; a
    value to stream is written on its own with ``set(read=True)``, which reads its file a
    piece at a time (the import call would read it whole).
    """
    importer = getattr(cache, IMPORT_CALL, None)
    try:
        if importer is None:
            with cache.transact():
                for row in rows:
                    _set_row(cache, row, cache_name, report, pickled)
            return
        held: list[_Row] = []
        for row in rows:
            if row.read:
                _import_rows(importer, held, cache_name, report, pickled)
                held = []
                if _set_row(cache, row, cache_name, report, pickled):
                    report.streamed += 1
            else:
                held.append(row)
        _import_rows(importer, held, cache_name, report, pickled)
    finally:
        for row in rows:
            if row.read:
                row.value.close()


def _import_rows(
    importer: Callable[[list[tuple[Any, ...]]], Iterable[tuple[int, BaseException]]],
    rows: list[_Row],
    cache_name: str,
    report: MigrationReport,
    pickled: bool,
) -> None:
    """Store ``rows`` with their own times in one transaction (the engine's import call)."""
    if not rows:
        return
    failures = importer(
        [
            (
                row.key,
                row.value,
                False,
                row.store_time,
                row.expire_time,
                row.access_time,
                row.access_count,
                row.tag,
            )
            for row in rows
        ]
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


def _set_row(
    cache: Cache, row: _Row, cache_name: str, report: MigrationReport, pickled: bool
) -> bool:
    """Store one row with the public ``set``: its expiry rebuilt from the time left, its
    store and access times those of the copy. Whether it was converted."""
    if row.expire_time is None or row.expire_time == math.inf:
        expire = None
    else:
        expire = row.expire_time - time.time()
        if expire <= 0:
            report.skipped.append(SkippedEntry(row.key, "expired", cache_name, row.rowid))
            return False
    try:
        cache.set(row.key, row.value, expire, read=row.read, tag=row.tag)
    except (TypeError, ValueError, OverflowError, AttributeError, pickle.PicklingError) as error:
        report.skipped.append(
            SkippedEntry(row.key, _refusal(error, pickled), cache_name, row.rowid)
        )
        return False
    _converted(report, row, pickled)
    return True


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


# The data types the safe format stores as a value of its own; a time zone is stored only
# inside the datetime or time that carries it.
_SCALARS = frozenset(
    {bool, int, float, str, bytes, *(_DATA_TYPES - {datetime.timezone, zoneinfo.ZoneInfo})}
)


def _said(error: BaseException) -> str:
    """``str(error)``, which cannot fail: an error about a malformed object may quote it."""
    try:
        return _cut(str(error), 200)
    except Exception:
        return "(its message cannot be shown)"


def _refusal(error: BaseException, pickled: bool) -> str:
    if isinstance(error, UnsupportedTypeError) and not pickled:
        return (
            f"the destination cannot store it: {_said(error)}. To keep such values, pass "
            "pickle=True to migrate (the destination must then be opened with pickle=True)"
        )
    return f"the destination cannot store it: {type(error).__name__}: {_said(error)}"


def _whole(value: Any) -> Any:
    """python-diskcache keeps whatever a setting was given; a FanoutCache shard's size limit
    is a float (the whole limit divided by the shard count). Whole floats become ints."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _skip_setting(report: MigrationReport, skipped: SkippedSetting) -> None:
    """Record a setting not carried, once: the shards of a FanoutCache normally share their
    settings, and one line says it for all of them. (A set, not a scan of the list: a
    Settings table can hold any number of rows.)"""
    seen: set[tuple[Any, ...]] = report.__dict__.setdefault("_settings_seen", set())
    try:
        mark: tuple[Any, ...] = (skipped.name, type(skipped.value), skipped.value, skipped.reason)
        hash(mark)
    except TypeError:  # not a value SQLite returns; keep it rather than fail
        mark = (skipped.name, id(skipped), skipped.reason)
    if mark not in seen:
        seen.add(mark)
        report.settings_skipped.append(skipped)


def _apply_settings(
    cache: Cache,
    settings: dict[str | _BadText, Any],
    where: str,
    names: Iterable[str],
    report: MigrationReport,
) -> None:
    for name in names:
        if name in settings and _apply_setting(cache, name, settings[name], where, report):
            continue
        # Missing or refused: our default, which the destination may not have yet (it was
        # opened with eviction_policy='none' to fill).
        if cache.reset(name) != DEFAULT_SETTINGS[name]:
            cache.reset(name, DEFAULT_SETTINGS[name])


def _apply_setting(
    cache: Cache, name: str, stored: Any, where: str, report: MigrationReport
) -> bool:
    """Set one setting of the source on ``cache``; whether it took (if not, it is reported)."""
    value = _whole(stored)
    if isinstance(value, _BadText):
        reason = "its value is text that is not valid UTF-8; our default is kept"
        _skip_setting(report, SkippedSetting(name, value.data, reason, where))
        return False
    if value is None:  # reset(name, None) would only read the setting, and change nothing
        reason = "its value is NULL, which python-diskcache never writes; our default is kept"
        _skip_setting(report, SkippedSetting(name, value, reason, where))
        return False
    try:
        if cache.reset(name) != value:
            cache.reset(name, value)
    except (ValueError, TypeError, OverflowError) as error:
        _skip_setting(report, SkippedSetting(name, value, _said(error), where))
        return False
    return True


def _note_foreign_settings(source: _Source, report: MigrationReport) -> None:
    for name, value in source.settings.items():
        if name in DEFAULT_SETTINGS or name in ("count", "size"):
            continue
        if isinstance(value, _BadText):
            value = value.data
        if isinstance(name, _BadText):
            reason = "its name is text that is not valid UTF-8, so not a setting of ours"
            _skip_setting(report, SkippedSetting(_setting_name(name), value, reason, source.name))
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
    directory: str,
    settings: dict[str | _BadText, Any],
    where: str,
    pickled: bool,
    report: MigrationReport,
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
                try:
                    shard = route(row.key)
                except Exception as error:  # a trusted key whose repr or encoder raises
                    reason = f"its key cannot be given a shard: {type(error).__name__}: "
                    report.skipped.append(
                        SkippedEntry(row.key, reason + _said(error), source.name, row.rowid)
                    )
                    if row.read:
                        row.value.close()
                    continue
                groups.setdefault(shard, []).append(row)
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

    Both paths are taken as given: relative to the working directory, with no ``~`` or
    ``$VARIABLE`` expanded (a shell does that before the command line sees them).

    A source that was tampered with cannot make it run code, write into the source, or
    read and hold far more than the directory has on disk: a row it cannot carry (text in a
    numeric column, text that is not UTF-8, a malformed pickle, a value file that is mostly
    holes) is skipped and reported, and a source that cannot be read as python-diskcache
    wrote it (a view or another shape in place of its tables, a damaged database, a log that
    is mostly holes) is refused before anything is written. Binary values over 32 MiB are
    streamed rather than loaded (their times are then the copy's; see ``report.streamed``).

    :param src: the python-diskcache directory
    :param dst: where the diskcache_oxide cache is made; neither it nor its parent may
        resolve (through links) into ``src``
    :param trusted: fully unpickle pickled keys and values. Only for a source whose every
        writer you trust: loading a pickle can run any code (CVE-2025-69872). By default a
        restricted unpickler (:class:`SafeUnpickler`) builds only the data types the safe
        format stores, and every other pickle is skipped and reported, never run
    :param pickle: open the destination with ``pickle=True``, so that values the safe format
        cannot express (your own classes, loaded with ``trusted=True``) are stored as
        pickles instead of skipped. Every reader of ``dst`` must then open it with
        ``pickle=True``, and the directory is as exposed as the source was
    :param progress: called as ``progress(done, total)`` with the entries processed so far
        and the total, at the start, after every batch (1,000 entries, fewer when their
        values are large) and at the end. An exception it raises aborts the migration and
        leaves no ``dst``
    :return: a :class:`MigrationReport`: counts, skipped entries with their reasons, bytes,
        settings carried and not carried
    :raises NotACacheError: if ``src`` holds no python-diskcache cache (or is already a
        diskcache_oxide one), or its tables are not python-diskcache 5.6.3's
    :raises MigrationError: if ``dst`` is ``src`` or inside it, or ``src`` cannot be read
        (a damaged database, a database or log that is mostly holes)
    :raises FileExistsError: if ``dst`` exists and is not an empty directory
    """
    started = time.perf_counter()
    source_dir = os.path.abspath(os.fspath(src))
    target = os.path.abspath(os.fspath(dst))
    if not os.path.isdir(source_dir):
        raise NotADirectoryError(f"{source_dir} is not a directory: pass the cache's directory")
    _refuse_inside(source_dir, target)
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

    os.makedirs(os.path.dirname(target), exist_ok=True)
    # Build and rename in the parent's real path, checked again now that it exists: the
    # links on the way to it are resolved once, here, and not again at the rename.
    parent = os.path.realpath(os.path.dirname(target))
    final = os.path.join(parent, os.path.basename(target))
    _refuse_inside(source_dir, final)
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
            try:
                with _reading(os.path.join(directory, "cache.db")):
                    (count,) = db.execute("SELECT COUNT(*) FROM Cache").fetchone()
                    settings = _read_settings(db)
            except BaseException:
                db.close()
                raise
            sources.append(_Source(name, directory, db, settings, int(count)))
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
        os.rename(building, final)
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
    elif report.streamed:
        streamed = (
            f"exact, except for the {report.streamed} values over 32 MiB streamed from their "
            "value files (the engine's call that sets times reads a value whole), which have"
        )
        report.approximated = {
            "store_time": f"{streamed} the time of the copy",
            "access_time": f"{streamed} the time of the copy",
            "access_count": f"{streamed} 0",
            "expire_time": f"{streamed} theirs rebuilt from the time left when written",
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


def _refuse_inside(source: str, target: str) -> None:
    """Refuse a destination that is the source or inside it, as written or once the links
    on the way are resolved (``ln -s SRC link; migrate SRC link/new`` would otherwise write
    into the source, which must stay untouched)."""
    real_source = os.path.realpath(source)
    for base, candidate in ((source, target), (real_source, os.path.realpath(target))):
        try:
            inside = os.path.commonpath([base, candidate]) == base
        except ValueError:  # on different drives (Windows)
            inside = False
        if not inside:
            continue
        if candidate == base:
            raise MigrationError(
                f"the destination {target} is the source {source} itself; migrate into a new "
                "directory outside the source, so the source stays untouched"
            )
        resolved = "" if candidate == target else f" (it resolves to {candidate})"
        raise MigrationError(
            f"the destination {target} is inside the source {source}{resolved}; migrate into "
            "a directory outside it, so the source stays untouched"
        )


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
