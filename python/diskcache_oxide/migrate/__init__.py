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

The package's modules, each private (import from ``diskcache_oxide.migrate``):

- ``_unpickler``: :class:`SafeUnpickler` and :func:`safe_loads`;
- ``_source``: reading and checking the source directory, row by row;
- ``_writer``: writing the rows and the settings into the destination;
- ``_report``: :class:`MigrationReport`, :class:`SkippedEntry`, :class:`SkippedSetting` and
  :class:`MigrationError`;
- ``_run``: the work of :func:`migrate`, which builds the destination from the other four.

:func:`migrate` (the function, defined here) and every other name load their modules on first
use: reading a python-diskcache directory needs ``sqlite3``, ``pickle``, ``pathlib`` and more,
and a user of the cache who never migrates should not pay for importing them (issue 33).

``diskcache_oxide.migrate`` the attribute of the package is the function (re-exported by
``diskcache_oxide``); this module is ``sys.modules["diskcache_oxide.migrate"]``, which
``from diskcache_oxide.migrate import MigrationError`` reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import os

    from ._report import (
        CARRIED_EXACTLY,
        MigrationError,
        MigrationReport,
        SkippedEntry,
        SkippedSetting,
    )
    from ._run import Progress
    from ._unpickler import SAFE_GLOBALS, SafeUnpickler, safe_loads
    from ._writer import IMPORT_CALL

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

#: The names loaded on first use (PEP 562), and the module of each.
_LAZY = {
    "CARRIED_EXACTLY": "_report",
    "MigrationError": "_report",
    "MigrationReport": "_report",
    "SkippedEntry": "_report",
    "SkippedSetting": "_report",
    "SAFE_GLOBALS": "_unpickler",
    "SafeUnpickler": "_unpickler",
    "safe_loads": "_unpickler",
    "IMPORT_CALL": "_writer",
}


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
    order, with its store and access times and its access count (through the engine's bulk
    import call, :data:`IMPORT_CALL`; a value over 32 MiB, streamed, gets the copy's times,
    and the report's ``approximated`` says so). The settings come over too (a FanoutCache keeps its
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
    from ._run import run

    return run(src, dst, trusted=trusted, pickle=pickle, progress=progress)


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
