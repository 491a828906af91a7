"""pytest plugin: run python-diskcache 5.6.3's own tests (or diskcache-community 5.8.1's)
against diskcache_oxide.

Loaded with ``-p upstream_shim`` by ``tests/upstream/run.py`` (never a conftest.py, so the
repository's own test run does not pick it up). Before collection it puts shim modules
``diskcache``, ``diskcache.core``, ``diskcache.fanout``, ``diskcache.persistent`` and
``diskcache.recipes`` into ``sys.modules``, made from diskcache_oxide's, so the upstream
tests import diskcache_oxide instead of the python-diskcache wheel installed in .venv.

``--upstream-suite=community`` does the same under the name of diskcache-community's package
(``diskcache_community`` and its four submodules) for that fork's copies of the tests, and
reads its own deselect list; ``diskcache`` is then left alone. The default,
``--upstream-suite=python-diskcache``, is the behaviour described above.

``--upstream-mode=pickle`` makes every Cache the tests open (directly, or inside a
FanoutCache, Deque or Index) default to ``pickle=True``; ``--upstream-mode=safe`` runs
diskcache_oxide as it ships (the safe format, D-003).

The tests listed in the suite's deselect list (``deselected.txt``, or
``deselected-community.txt``) for the mode are deselected, each with its reason;
an entry that matches no collected test is an error, so the list cannot go stale silently.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any, NamedTuple

import diskcache_oxide
import diskcache_oxide._open
import diskcache_oxide.core
import diskcache_oxide.fanout
import diskcache_oxide.persistent
import diskcache_oxide.recipes
import pytest

MODES = ("pickle", "safe")
HERE = os.path.dirname(os.path.abspath(__file__))


class Suite(NamedTuple):
    """A test suite run against diskcache_oxide: whose it is and what the shim is named."""

    title: str  # for the report header
    package: str  # the package name the suite's tests import
    deselected: str  # the deselect list


SUITES = {
    "python-diskcache": Suite(
        "python-diskcache 5.6.3", "diskcache", os.path.join(HERE, "deselected.txt")
    ),
    "community": Suite(
        "diskcache-community 5.8.1",
        "diskcache_community",
        os.path.join(HERE, "deselected-community.txt"),
    ),
}


class PickleCache(diskcache_oxide.Cache):
    """diskcache_oxide's Cache with ``pickle=True`` unless told otherwise."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("pickle", True)
        super().__init__(*args, **kwargs)


class Disk:
    """Stands in for python-diskcache's ``Disk`` so the upstream test modules import.

    ``test_core.py`` and ``test_fanout.py`` subclass ``dc.Disk`` at module level; without
    a name to subclass neither module would collect. diskcache_oxide has no ``Disk``
    (D-011: passing ``disk=`` raises ValueError), and the tests that use one are deselected.
    """

    def __init__(self, directory: str, **kwargs: Any) -> None:
        self._directory = directory


class JSONDisk(Disk):
    """Stands in for python-diskcache's ``JSONDisk`` (see :class:`Disk`)."""


def _module(
    name: str, source: types.ModuleType, package: str, **overrides: Any
) -> types.ModuleType:
    module = types.ModuleType(name, source.__doc__)
    module.__dict__.update(
        (key, value)
        for key, value in vars(source).items()
        if key not in ("__name__", "__spec__", "__loader__", "__path__", "__package__")
    )
    module.__dict__.update(overrides)
    module.__package__ = package
    return module


def _pickling_open_directory(path: Any, **settings: Any) -> Any:
    """``_open.open_directory`` with ``pickle=True`` unless told otherwise (pickle mode)."""
    settings.setdefault("pickle", True)
    return _open_directory(path, **settings)


_open_directory = diskcache_oxide._open.open_directory


def install(mode: str, package_name: str = "diskcache") -> None:
    """Put the shim modules of ``package_name`` into ``sys.modules`` for ``mode``."""
    extra: dict[str, Any] = {"Disk": Disk, "JSONDisk": JSONDisk}
    if mode == "pickle":
        extra["Cache"] = PickleCache
        # diskcache_oxide opens the Caches under a FanoutCache (shards, cache(), deque(),
        # index()), a Deque and an Index through these modules' ``Cache``; in this test
        # process only, point those at the pickling default too.
        diskcache_oxide.fanout.Cache = PickleCache  # type: ignore[misc]
        # A Deque or Index opens its cache through _open.open_directory (by name in
        # persistent's namespace), which imports core's Cache when called.
        diskcache_oxide.persistent.open_directory = _pickling_open_directory  # type: ignore[attr-defined]
    for name in [
        name for name in sys.modules if name == package_name or name.startswith(f"{package_name}.")
    ]:
        del sys.modules[name]
    package = _module(package_name, diskcache_oxide, package_name, **extra)
    package.__path__ = []  # a package, so ``import diskcache.core`` looks in sys.modules
    sys.modules[package_name] = package
    for sub in ("core", "fanout", "persistent", "recipes"):
        source = getattr(diskcache_oxide, sub)
        module = _module(
            f"{package_name}.{sub}", source, package_name, **extra if sub == "core" else {}
        )
        if mode == "pickle" and sub != "core" and hasattr(module, "Cache"):
            module.Cache = PickleCache
        sys.modules[f"{package_name}.{sub}"] = module
        setattr(package, sub, module)


def read_deselected(mode: str, path: str = SUITES["python-diskcache"].deselected) -> dict[str, str]:
    """The ``file::test`` ids that the list at ``path`` deselects in ``mode``, with reasons."""
    entries: dict[str, str] = {}
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = [field.strip() for field in line.split("|")]
            if len(fields) != 3 or fields[1] not in ("both", *MODES) or not fields[2]:
                raise pytest.UsageError(
                    f"{path}:{number}: expected 'file::test | both|pickle|safe | reason'"
                )
            test_id, modes, reason = fields
            if modes in ("both", mode):
                entries[test_id] = reason
    return entries


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--upstream-mode",
        choices=MODES,
        required=True,
        help="pickle: every Cache defaults to pickle=True; safe: diskcache_oxide's default",
    )
    parser.addoption(
        "--upstream-suite",
        choices=tuple(SUITES),
        default="python-diskcache",
        help="whose tests run: python-diskcache's (as diskcache) or diskcache-community's",
    )


def _suite(config: pytest.Config) -> Suite:
    return SUITES[config.getoption("--upstream-suite")]


def pytest_configure(config: pytest.Config) -> None:
    install(config.getoption("--upstream-mode"), _suite(config).package)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    deselected = _suite(config).deselected
    entries = read_deselected(config.getoption("--upstream-mode"), deselected)
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    matched: set[str] = set()
    for item in items:
        test_id = f"{os.path.basename(item.path)}::{item.name.split('[')[0]}"
        if test_id in entries:
            matched.add(test_id)
            dropped.append(item)
        else:
            keep.append(item)
    unknown = sorted(set(entries) - matched)
    if unknown:
        raise pytest.UsageError(f"{deselected}: no such test: {', '.join(unknown)}")
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_report_header(config: pytest.Config) -> str:
    mode = config.getoption("--upstream-mode")
    return f"{_suite(config).title} tests against diskcache_oxide, mode: {mode}"
