"""Fixtures for the diskcache_oxide test suite.

Runs against ``diskcache_oxide`` (build it first: ``make build``). With
``DCO_TEST_REFERENCE=1`` the API tests run against python-diskcache 5.6.3 instead,
which checks that they describe the reference's behaviour; tests marked ``oxide``
(the safe value format, batch calls, ...) are skipped then.

The folders name concerns: ``api`` (the Cache API, keys, values, value files, settings and
handles, differential and state-machine tests against python-diskcache, departures from it),
``queue`` (queue calls, leased jobs, delivery across processes, the Work queues page),
``durability`` (crashes, faults, a full disk, load, fork, many processes, the WAL, timeouts),
``safety`` (the safe format, damaged values, hostile files, permissions, bad input) and
``features`` (claims, compute-once, asyncio, Deque, Index, recipes, cross-language, benches,
the README). ``helpers`` holds the shared helpers and the bodies of spawned processes.
``upstream`` (python-diskcache's own suite, ``make upstream-test``) and ``wheel``
(``make wheel-check``) are not collected here. ``make check`` runs the tests not marked
``slow``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import settings

# The helper modules (support, the worker bodies of spawned processes) live in tests/helpers and
# are imported by name. multiprocessing's spawned children inherit this sys.path; a script run
# with subprocess that needs them sets PYTHONPATH to support.HELPERS.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers"))

import support  # noqa: E402

# `make test` (and so CI) tries the same generated examples on every run, so what it finds can be
# reproduced and a pass is not luck of the draw. `DCO_HYPOTHESIS=explore` draws new ones each run
# and keeps failures in .hypothesis/ for replay; `make soak` explores.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("DCO_HYPOTHESIS") == "explore" else "repeatable")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "oxide: uses what only diskcache_oxide has (skipped against the reference)"
    )
    config.addinivalue_line("markers", "slow: spawns processes or runs many examples")
    if not support.REFERENCE_MODE:
        try:
            import diskcache_oxide  # noqa: F401
        except ImportError as exc:
            raise pytest.UsageError(
                f"diskcache_oxide is not importable ({exc}); run `make build` first, or set "
                "DCO_TEST_REFERENCE=1 to run the API tests against python-diskcache"
            ) from None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
def make_cache(dc: Any, tmp_path: Any) -> Iterator[Callable[..., Any]]:
    """Factory: ``make_cache(name='c', **settings)`` opens a cache in a fresh sub-directory."""
    opened: list[Any] = []

    def factory(name: str = "cache", **kwargs: Any) -> Any:
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
