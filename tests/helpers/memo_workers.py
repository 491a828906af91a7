"""Bodies of spawned processes for tests/durability/test_memo_reopen.py: writers that open the
cache, write once and close again, so that when the reader has closed too, theirs is the last
connection of all and SQLite deletes the WAL and the ``-shm`` behind it (issue 29)."""

from __future__ import annotations

import importlib
from typing import Any


def _opener(impl_name: str, kind: str, directory: str) -> Any:
    module = importlib.import_module(impl_name)
    if kind == "cache":
        return lambda: module.Cache(directory)
    if kind == "fanout":
        return lambda: module.FanoutCache(directory, shards=4)
    if kind == "django":
        import django
        from django.conf import settings

        if not settings.configured:
            settings.configure()
            django.setup()
        return lambda: module.DjangoCache(directory, {"SHARDS": 4})
    raise ValueError(kind)


def write_then_close_each_round(
    impl_name: str, kind: str, directory: str, rounds: int, conn: Any
) -> None:
    """Each round: open, set ``k`` to the round's number, close, tell the reader, wait for
    its ack. The reader reads and closes between two rounds."""
    open_ = _opener(impl_name, kind, directory)
    for i in range(rounds):
        cache = open_()
        cache.set("k", f"v{i}")
        cache.close()
        conn.send(i)
        assert conn.recv() == "ack"


def serve_writes(conn: Any) -> None:
    """Until told ``None``: for each ``(directory, how, key, value)`` received, write and
    answer ``"ok"``. ``how`` is ``"cache"`` (open a Cache, set the key or delete it for a
    value of ``None``, close) or ``"stock"`` (a stock SQLite connection deletes the key's
    row, then closes). Each write is a whole connection's life, so when the other side holds
    no connection, this close is the last one and SQLite deletes the WAL.

    The stock SQLite must write from a process of its own: Python's ``sqlite3`` is another
    copy of SQLite, and POSIX locks belong to the process, so closing its connection in a
    process where ours are open drops our locks too and lets it delete the WAL under them
    (SQLite's "multiple copies of SQLite in one process" corruption, not our memo's)."""
    import sqlite3
    from pathlib import Path

    import diskcache_oxide

    while (request := conn.recv()) is not None:
        directory, how, key, value = request
        if how == "stock":
            stock = sqlite3.connect(Path(directory) / "cache.db", isolation_level=None)
            stock.execute("DELETE FROM cache WHERE key = ? AND raw = 1", (key,))
            stock.close()
        else:
            cache = diskcache_oxide.Cache(directory)
            if value is None:
                cache.delete(key)
            else:
                cache.set(key, value)
            cache.close()
        conn.send("ok")
