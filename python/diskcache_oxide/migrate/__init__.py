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
- ``_run``: :func:`migrate` itself, which builds the destination from the other four.

``diskcache_oxide.migrate`` the attribute of the package is the function (re-exported by
``diskcache_oxide``); this module is ``sys.modules["diskcache_oxide.migrate"]``, which
``from diskcache_oxide.migrate import MigrationError`` reads.
"""

from ._report import CARRIED_EXACTLY, MigrationError, MigrationReport, SkippedEntry, SkippedSetting
from ._run import migrate
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

# Named as before the split, in tracebacks, reprs and pickles: diskcache_oxide.migrate.X.
for _public in (MigrationError, MigrationReport, SafeUnpickler, SkippedEntry, SkippedSetting):
    _public.__module__ = __name__
del _public
