"""The call, :func:`migrate`: checks the paths, reads each cache directory of the source,
builds the destination in a hidden sibling directory (a plain cache, or a FanoutCache with its
shards and named caches) and renames it into place only once it is complete."""

from __future__ import annotations

import os
import os.path
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any, Literal

from ..core import DEFAULT_SETTINGS, Cache
from ..errors import NotACacheError
from ..fanout import FanoutCache, shard_hash
from ._report import CARRIED_EXACTLY, MigrationError, MigrationReport
from ._source import (
    _Decoder,
    _named_caches,
    _open_database,
    _read_settings,
    _reading,
    _shard_names,
    _Source,
)
from ._writer import (
    _LATE_SETTINGS,
    _apply_settings,
    _copy_cache,
    _note_foreign_settings,
    _open_destination,
)

Progress = Callable[[int, int], object]


def run(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    *,
    trusted: bool = False,
    pickle: bool = False,
    progress: Progress | None = None,
) -> MigrationReport:
    """:func:`diskcache_oxide.migrate.migrate`, which documents it: imported on its first call."""
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
    if report.streamed:
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
