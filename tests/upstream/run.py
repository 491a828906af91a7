"""Run python-diskcache 5.6.3's own test suite, or diskcache-community 5.8.1's, against
diskcache_oxide (``make upstream-test`` runs both).

Usage: ``python tests/upstream/run.py [--suite python-diskcache|community] [pickle|safe ...]
[-- pytest args]``

``--suite python-diskcache`` (the default): the first run downloads the python-diskcache
5.6.3 sdist with pip into ``target/upstream/`` and extracts the five test modules used here
into ``target/upstream/tests/``; later runs reuse them. Nothing of python-diskcache is checked
into this repository. Each mode is a separate pytest process with the ``upstream_shim``
plugin (see its docstring), a config file of its own (the repository's pytest settings
do not apply) and the deselect list ``tests/upstream/deselected.txt``.

``--suite community``: the same for diskcache-community 5.8.1, python-diskcache's maintained
fork, whose sdist holds its tests (module ``diskcache_community``, which the shim then provides
from diskcache_oxide). Its sdist goes to ``target/upstream/`` too, its test modules to
``target/upstream/tests-community/``, and its deselect list is
``tests/upstream/deselected-community.txt``. Only the modules that test python-diskcache's API,
which is what diskcache_oxide promises, are run: ``test_core.py``, ``test_fanout.py``,
``test_deque.py``, ``test_index.py`` and ``test_recipes.py``, the fork's copies of
python-diskcache's (the fork's additions to them are deselected, each with its reason). The
sdist's other test modules test the fork's own additions, or need files its sdist lacks:

- ``test_safedisk.py``, ``test_safedisk_types.py``: the fork's ``SafeDisk`` (restricted
  unpickling, ``SafeUnpickler``), a ``Disk`` class (D-011: no ``disk=`` classes here);
  ``test_safedisk_types.py`` also imports ``tests.safedisk_models``, not in the sdist.
- ``test_default_disk.py``: the fork's ``configure()``, ``default_disk()`` and environment
  variables (``DISKCACHE_DISK``, ``DISKCACHE_SAFE_TYPES``, ``DISKCACHE_SAFE_MODULES``) choosing
  a ``Disk`` class for every container; imports ``tests.safedisk_models``.
- ``test_entry_errors.py``: the fork's ``Disk.with_options(on_error=...)``, turning an
  unreadable entry into a miss; imports ``tests.safedisk_models``.
- ``test_readonly.py``: the fork's ``Cache(read_only=True)`` and ``ReadOnlyError`` and its
  reopen-without-writes rules. diskcache_oxide has read-only handles of its own under the same
  names (D-019), tested in its own suite; neither is python-diskcache's API, and these tests
  look at the fork's database file directly (``dc.core.DBNAME``, its hash before and after,
  ``cache._sql``, ``sqlite3.OperationalError``).
- ``test_golden.py``: opens caches written by python-diskcache 5.6.3 from
  ``tests/golden/``, not in the sdist; diskcache_oxide refuses such a directory (D-011, the
  migration path is D-041).
- ``test_init.py``: the fork's package identity (``__title__ == 'diskcache-community'``) and
  its coexistence with the python-diskcache wheel.
- ``test_doctest.py``: doctests of the fork's module docstrings and ``docs/tutorial.rst`` (not
  in the sdist); python-diskcache's ``test_doctest.py`` is not run either.
- ``test_djangocache.py``: needs ``tests/settings.py`` and ``tests/models.py``, not in the
  sdist (python-diskcache's ``test_djangocache.py`` is not run either; diskcache_oxide's Django
  backend has its own tests, D-042).

Modes: ``pickle`` (every Cache defaults to ``pickle=True``) and ``safe`` (the default
format). With no mode given, both run; the exit status is non-zero if either fails.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
from typing import NamedTuple

FILES = ("test_core.py", "test_fanout.py", "test_deque.py", "test_index.py", "test_recipes.py")
MODES = ("pickle", "safe")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGET = os.path.join(ROOT, "target", "upstream")


class Suite(NamedTuple):
    """A test suite taken from a pinned sdist on PyPI."""

    title: str  # what the output calls it
    requirement: str  # what pip downloads, pinned
    sdist: str  # the file pip downloads into TARGET
    prefix: str  # the test modules' folder inside the sdist
    tests: str  # where the test modules are extracted
    files: tuple[str, ...]  # the test modules run


SUITES = {
    "python-diskcache": Suite(
        "python-diskcache 5.6.3",
        "diskcache==5.6.3",
        os.path.join(TARGET, "diskcache-5.6.3.tar.gz"),
        "diskcache-5.6.3/tests/",
        os.path.join(TARGET, "tests"),
        FILES,
    ),
    "community": Suite(
        "diskcache-community 5.8.1",
        "diskcache-community==5.8.1",
        os.path.join(TARGET, "diskcache_community-5.8.1.tar.gz"),
        "diskcache_community-5.8.1/tests/",
        os.path.join(TARGET, "tests-community"),
        FILES,
    ),
}


def fetch(suite: Suite) -> None:
    """Download the suite's sdist and extract its test modules, unless already done."""
    if all(os.path.isfile(os.path.join(suite.tests, name)) for name in suite.files):
        return
    os.makedirs(TARGET, exist_ok=True)
    if not os.path.isfile(suite.sdist):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                suite.requirement,
                "-d",
                TARGET,
            ],
            check=True,
        )
    os.makedirs(suite.tests, exist_ok=True)
    prefix = suite.prefix
    try:
        with tarfile.open(suite.sdist, "r:gz") as archive:
            members = {member.name: member for member in archive.getmembers()}
            missing = [name for name in suite.files if prefix + name not in members]
            if missing:
                sys.exit(f"{suite.sdist} has no {', '.join(prefix + name for name in missing)}")
            contents = {}
            for name in suite.files:
                source = archive.extractfile(members[prefix + name])
                assert source is not None
                contents[name] = source.read()
    except (tarfile.TarError, EOFError, OSError):
        os.remove(suite.sdist)  # cut short by an interrupted download: fetch it again next time
        raise
    for name, content in contents.items():
        # Whole files only, so an interrupted run does not leave a truncated module cached.
        partial = os.path.join(suite.tests, f".{name}.partial")
        with open(partial, "wb") as target:
            target.write(content)
        os.replace(partial, os.path.join(suite.tests, name))


def run(name: str, mode: str, extra: list[str]) -> int:
    """Run the tests of the suite ``name`` in ``mode``; pytest's exit status."""
    suite = SUITES[name]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [HERE, env.get("PYTHONPATH")]))
    env.pop("PYTEST_ADDOPTS", None)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        os.path.join(HERE, "pytest.ini"),
        "--rootdir",
        suite.tests,
        "--confcutdir",
        suite.tests,
        "-p",
        "upstream_shim",
        f"--upstream-mode={mode}",
        # The shim's default is python-diskcache; name the suite only when it is another, so
        # that suite's command line is what it always was.
        *([f"--upstream-suite={name}"] if name != "python-diskcache" else []),
        *extra,
        *[os.path.join(suite.tests, file) for file in suite.files],
    ]
    print(f"== {suite.title} tests, mode {mode}", flush=True)
    return subprocess.run(command, env=env, cwd=suite.tests).returncode


def main(argv: list[str]) -> int:
    extra: list[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    parser = argparse.ArgumentParser(
        description="Run python-diskcache's or diskcache-community's tests against us."
    )
    parser.add_argument("--suite", choices=tuple(SUITES), default="python-diskcache")
    parser.add_argument("modes", nargs="*", metavar="pickle|safe")
    args = parser.parse_args(argv)
    name: str = args.suite
    modes: list[str] = args.modes or list(MODES)
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown:
        sys.exit(f"unknown mode {unknown[0]!r}; choose from {', '.join(MODES)}")
    suite = SUITES[name]
    fetch(suite)
    results = {mode: run(name, mode, extra) for mode in modes}
    label = "upstream tests" if name == "python-diskcache" else f"{suite.title} tests"
    for mode, code in results.items():
        print(f"== {label}, mode {mode}: {'passed' if code == 0 else 'FAILED'}")
    return 0 if all(code == 0 for code in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
