"""A full disk, on a real small tmpfs: a write that finds no space raises an error naming the
full disk, reads keep working, and once space is freed writes succeed and integrity holds; the
calls that free space still work while the disk is full (D-039).

A full disk makes every SQLite write fail, deletes included. These tests fill a tmpfs to
the last block with a ballast file, then check that each removal succeeds, that a full
queue drains to the last item while the disk is kept full, and that the same holds for
`durable=True` handles (which would otherwise hide the failure behind a default). What a
``durable=True`` handle's other calls return on a full disk is in ``api/test_durable.py``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import diskcache_oxide as dco
import pytest
import support

pytestmark = pytest.mark.oxide

ITEM = 2000
FILE_ITEM = 60_000  # over disk_min_file_size: lives in a value file


def free_bytes(mount: str) -> int:
    st = os.statvfs(mount)
    return st.f_bavail * st.f_frsize


def payload(i: int) -> bytes:
    return os.urandom(FILE_ITEM if i % 50 == 49 else ITEM)


@pytest.fixture
def disk(tmpfs: Callable[[str], str]) -> str:
    return tmpfs("16m")


# ----------------------------------------------------------------------------- writes and reads


@pytest.fixture
def small_disk(tmpfs: Callable[[str], str]) -> str:
    return tmpfs("2m")


def test_full_disk_raises_clearly_keeps_reads_and_recovers(small_disk: str) -> None:
    directory = os.path.join(small_disk, "c")
    cache = dco.Cache(directory)
    acknowledged = {f"k{i}": os.urandom(100 + i) for i in range(50)}
    acknowledged["file"] = os.urandom(50_000)  # in a value file
    for key, value in acknowledged.items():
        assert cache.set(key, value) is True
    cache.push("queued")
    ballast = support.fill_disk(small_disk)

    failures: list[BaseException] = []
    for i in range(200):  # rows until the WAL cannot grow, then value files
        try:
            cache.set(f"new{i}", os.urandom(2000))
        except (OSError, dco.DatabaseError) as exc:
            failures.append(exc)
            break
    try:
        cache.set("big", os.urandom(100_000))
    except (OSError, dco.DatabaseError) as exc:
        failures.append(exc)
    assert failures, "nothing failed on a full disk"
    for exc in failures:
        message = str(exc)
        assert "full" in message or "No space left" in message, message
    with pytest.raises((OSError, dco.DatabaseError)):
        for _ in range(200):
            cache.push(os.urandom(2000))

    # reads keep working, on this handle and a new one
    reader = dco.Cache(directory)
    for key, value in acknowledged.items():
        assert cache.get(key) == value
        assert reader.get(key) == value
    assert cache.peek()[1] == "queued"

    os.remove(ballast)
    assert cache.set("after", "space freed") is True
    assert cache.set("big-after", b"x" * 100_000) is True
    assert cache.pull()[1] == "queued"
    assert support.integrity(directory) == "ok"
    assert all("unknown file" in str(w.message) for w in cache.check(fix=True))
    assert cache.check() == []
    for key, value in acknowledged.items():
        assert reader.get(key) == value


# ----------------------------------------------------------------------------- removals (D-039)


@pytest.mark.parametrize("durable", [False, True], ids=["plain", "durable"])
@pytest.mark.parametrize(("size", "at_least"), [("16m", 1000), ("2m", 100)])
def test_a_full_queue_drains_while_the_disk_stays_full(
    tmpfs: Callable[[str], str], size: str, at_least: int, durable: bool
) -> None:
    """Also on a disk of 2 MiB, where a new cache's pages once stayed in a WAL too long to
    checkpoint with the reserve's room, so not one item could be pulled (D-048)."""
    disk = tmpfs(size)
    cache = dco.Cache(os.path.join(disk, "q"), eviction_policy="none", durable=durable)
    pushed = []
    while True:
        value = payload(len(pushed))
        try:
            key = cache.push(value)
        except (OSError, dco.DatabaseError) as exc:  # the database's pages or a value file
            assert "full" in str(exc) or "No space left" in str(exc), exc
            break
        if key is None:  # durable: the failure is logged and the push returns None
            break
        pushed.append(value)
    assert len(pushed) > at_least
    support.fill_disk(disk)
    assert free_bytes(disk) == 0
    assert len(cache) == len(pushed)

    pulled = []
    while True:
        key, value = cache.pull()
        if key is None:
            break
        pulled.append(value)
        if len(pulled) % 100 == 0:
            support.fill_disk(disk)  # take back whatever the pulls freed: the disk stays full
    assert pulled == pushed
    assert len(cache) == 0
    cache.close()
    assert support.integrity(os.path.join(disk, "q")) == "ok"


def _prepared(disk: str, durable: bool) -> Any:
    """A cache of 300 small and 6 file-backed entries, on a disk with not one block free."""
    directory = os.path.join(disk, "c")
    cache = dco.Cache(
        directory, durable=durable, size_limit=100_000, cull_limit=0, eviction_policy="none"
    )
    for i in range(300):
        cache.set(f"k{i}", payload(i), tag="even" if i % 2 == 0 else "odd")
    for i in range(10):
        cache.set(f"old{i}", i, expire=0.01)
    for i in range(3):
        cache.push(f"item{i}")
    cache.close()
    cache = dco.Cache(directory, durable=durable, eviction_policy="least-recently-stored")
    support.fill_disk(disk)
    assert free_bytes(disk) == 0
    return cache


REMOVALS: dict[str, tuple[Callable[[Any], Any], Callable[[Any, Any], bool]]] = {
    "delete": (lambda c: c.delete("k1"), lambda c, r: r is True and "k1" not in c),
    "del": (lambda c: c.__delitem__("k3"), lambda c, r: "k3" not in c),
    "pop": (lambda c: c.pop("k5"), lambda c, r: isinstance(r, bytes) and "k5" not in c),
    "pull": (lambda c: c.pull(), lambda c, r: r[1] == "item0" and len(c) == 312),
    "evict": (lambda c: c.evict("even"), lambda c, r: r == 150 and "k0" not in c),
    "expire": (lambda c: c.expire(), lambda c, r: r == 10 and "old1" not in c),
    "cull": (lambda c: c.cull(), lambda c, r: r > 250 and c.volume() <= 100_000),
    "clear": (lambda c: c.clear(), lambda c, r: r == 313 and len(c) == 0),
    "delete_many": (
        lambda c: c.delete_many(["k7", "k9"]),
        lambda c, r: r == 2 and "k7" not in c,
    ),
}


@pytest.mark.parametrize("durable", [False, True], ids=["plain", "durable"])
@pytest.mark.parametrize("name", sorted(REMOVALS))
def test_removals_succeed_on_a_full_disk(disk: str, name: str, durable: bool) -> None:
    cache = _prepared(disk, durable)
    if name == "cull":
        cache.reset("size_limit", 100_000, update=False)  # this handle only: no write
    if name == "expire":
        time.sleep(0.05)
    call, holds = REMOVALS[name]
    result = call(cache)
    assert holds(cache, result), (name, result)
    # A write that adds still fails (or, durable, reports failure) while the disk is full.
    support.fill_disk(disk)
    try:
        added = cache.set("new", os.urandom(50_000))
    except (OSError, dco.DatabaseError):
        added = False
    assert added is False
    cache.close()
    assert support.integrity(os.path.join(disk, "c")) == "ok"


def test_the_reserve_is_given_up_then_taken_back_once_there_is_room(disk: str) -> None:
    """The reserve goes when a removal needs it, stays away while the disk is nearly full
    (taking it back would make the next removal fail), and returns once there is room."""
    directory = os.path.join(disk, "c")
    reserve = os.path.join(directory, "reserve")
    cache = _prepared(disk, durable=False)
    assert os.path.getsize(reserve) == 1 << 20
    assert cache.delete("k1") is True
    assert not os.path.exists(reserve)
    support.fill_disk(disk)
    assert cache.delete("k2") is True  # no reserve left: the WAL's own space is reused
    assert not os.path.exists(reserve)
    os.remove(os.path.join(disk, "ballast"))
    assert cache.delete("k3") is True
    assert os.path.getsize(reserve) == 1 << 20
    cache.close()


def test_a_link_in_place_of_the_reserve_is_never_followed(tmp_path: Any) -> None:
    """Someone who can write into the directory replaces `reserve` with links: opening and
    removing never create, grow or delete anything outside it."""
    directory = str(tmp_path / "c")
    dco.Cache(directory).close()
    reserve = os.path.join(directory, "reserve")
    outside = tmp_path / "outside"
    outside.write_bytes(b"keep me")
    dangling = tmp_path / "nowhere"
    for target in (outside, dangling):
        if os.path.lexists(reserve):
            os.remove(reserve)
        os.symlink(target, reserve)
        cache = dco.Cache(directory)
        cache.set("k", b"v")
        assert cache.delete("k") is True
        cache.close()
        assert outside.read_bytes() == b"keep me"
        assert not dangling.exists()
