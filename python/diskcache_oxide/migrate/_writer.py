"""Writing the destination: rows stored in batches with their own times through the engine's
bulk import call (a value to stream through ``set(read=True)``), and the source's settings
applied before the entries (those that decide how an entry is stored) or after them."""

from __future__ import annotations

import datetime
import math
import pickle
import time
import zoneinfo
from collections.abc import Callable, Iterable
from typing import Any

from ..core import DEFAULT_SETTINGS, Cache
from ..errors import UnsupportedTypeError
from ..registry import _BY_TYPE
from ._report import MigrationReport, SkippedEntry, SkippedSetting, _said
from ._source import _DATA_TYPES, _BadText, _Decoder, _Row, _rows, _setting_name, _Source

#: The name of the engine call that stores rows with their own times (D-041): through it,
#: store_time, access_time and access_count are carried exactly.
IMPORT_CALL = "_import_many"


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


def _write_batch(
    cache: Cache, rows: list[_Row], cache_name: str, report: MigrationReport, pickled: bool
) -> None:
    """Store ``rows`` in ``cache``, in order; rows it refuses go to the report.

    The rows held in memory go in through the engine's bulk import call, one transaction each
    run; a value to stream is written on its own with ``set(read=True)``, which reads its file
    a piece at a time (the import call would read it whole).
    """
    try:
        held: list[_Row] = []
        for row in rows:
            if row.read:
                _import_rows(cache, held, cache_name, report, pickled)
                held = []
                if _set_row(cache, row, cache_name, report, pickled):
                    report.streamed += 1
            else:
                held.append(row)
        _import_rows(cache, held, cache_name, report, pickled)
    finally:
        for row in rows:
            if row.read:
                row.value.close()


def _import_rows(
    cache: Cache,
    rows: list[_Row],
    cache_name: str,
    report: MigrationReport,
    pickled: bool,
) -> None:
    """Store ``rows`` with their own times in one transaction (the engine's import call)."""
    if not rows:
        return
    failures = cache._import_many(
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
