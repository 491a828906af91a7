"""Reading a python-diskcache 5.6.3 directory, never writing it: its database through a
read-only snapshot (checked against python-diskcache's schema), its value files through
descriptors that follow no links and are measured against what they have on disk, and every
row decoded and checked column by column into a :class:`_Row` or a reason to skip it."""

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
import shutil
import stat
import urllib.parse
import uuid
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

from ..errors import NotACacheError
from ._report import MigrationError, SkippedEntry, _brief, _cut, _said
from ._unpickler import safe_loads

if TYPE_CHECKING:
    import sqlite3


def _sqlite3() -> Any:
    """Python's sqlite3 module, imported on the first migration rather than with the package:
    diskcache_oxide bundles its own SQLite in the engine, and a Python built without
    ``_sqlite3`` (a minimal or musl build) must still import and use everything else. Only
    migrate reads python-diskcache's database through it."""
    try:
        import sqlite3
    except ImportError as error:
        raise MigrationError(
            "migrate reads python-diskcache's database with Python's sqlite3 module, and this "
            f"Python has none ({error}): run the migration with a Python built with sqlite3 "
            "(python.org's and most distributions' are); the new directory then opens anywhere"
        ) from None
    return sqlite3


#: python-diskcache's value modes (its ``Cache.mode`` column).
_MODE_RAW, _MODE_BINARY, _MODE_TEXT, _MODE_PICKLE = 1, 2, 3, 4


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


#: The sub-directories of a FanoutCache root that hold named caches (``cache(name)``,
#: ``deque(name)``, ``index(name)``), each a plain Cache directory.
_NAMED_KINDS = ("cache", "deque", "index")


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
    sqlite = _sqlite3()
    try:
        yield
    except sqlite.Error as error:
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
    sqlite = _sqlite3()
    db_path = os.path.join(directory, "cache.db")
    for path in (db_path, db_path + "-wal"):
        if os.path.islink(path):
            raise NotACacheError(f"{path} is a symbolic link; migrate reads only regular files")
    if os.path.lexists(db_path + "-wal"):
        os.makedirs(scratch, exist_ok=True)
        copy = os.path.join(scratch, "cache.db")
        _copy_bounded(db_path, copy)
        _copy_bounded(db_path + "-wal", copy + "-wal")
        db: sqlite3.Connection = sqlite.connect(_uri(copy, mode="ro"), uri=True)
    else:
        db = sqlite.connect(_uri(db_path, mode="ro", immutable="1"), uri=True)
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
    sqlite = _sqlite3()
    try:
        (app_id,) = db.execute("PRAGMA application_id").fetchone()
        objects = db.execute("SELECT name, type, sql FROM sqlite_master").fetchall()
    except sqlite.DatabaseError as error:
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
    sqlite = _sqlite3()
    if kind != "table":
        return f"{table} is a {kind}, not a table (a view computes its rows when read)"
    if not isinstance(sql, str) or re.match(r"\s*CREATE\s+VIRTUAL\b", sql, re.IGNORECASE):
        return f"{table} is a virtual table"
    try:
        columns = db.execute(f"PRAGMA table_xinfo({table})").fetchall()
    except sqlite.DatabaseError as error:
        return f"{table} cannot be read ({error})"
    try:
        tables = db.execute("PRAGMA table_list").fetchall()
    except sqlite.DatabaseError:  # SQLite before 3.37 has no table_list
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
