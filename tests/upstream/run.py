"""Run python-diskcache 5.6.3's own test suite against diskcache_oxide (``make upstream-test``).

Usage: ``python tests/upstream/run.py [pickle|safe ...] [-- pytest args]``

The first run downloads the python-diskcache 5.6.3 sdist with pip into
``target/upstream/`` and extracts the five test modules used here into
``target/upstream/tests/``; later runs reuse them. Nothing of python-diskcache is checked
into this repository. Each mode is a separate pytest process with the ``upstream_shim``
plugin (see its docstring), a config file of its own (the repository's pytest settings
do not apply) and the deselect list ``tests/upstream/deselected.txt``.

Modes: ``pickle`` (every Cache defaults to ``pickle=True``) and ``safe`` (the default
format). With no mode given, both run; the exit status is non-zero if either fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

VERSION = "5.6.3"
FILES = ("test_core.py", "test_fanout.py", "test_deque.py", "test_index.py", "test_recipes.py")
MODES = ("pickle", "safe")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGET = os.path.join(ROOT, "target", "upstream")
TESTS = os.path.join(TARGET, "tests")
SDIST = os.path.join(TARGET, f"diskcache-{VERSION}.tar.gz")


def fetch() -> None:
    """Download the sdist and extract the test modules, unless already done."""
    if all(os.path.isfile(os.path.join(TESTS, name)) for name in FILES):
        return
    os.makedirs(TARGET, exist_ok=True)
    if not os.path.isfile(SDIST):
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
                f"diskcache=={VERSION}",
                "-d",
                TARGET,
            ],
            check=True,
        )
    os.makedirs(TESTS, exist_ok=True)
    prefix = f"diskcache-{VERSION}/tests/"
    try:
        with tarfile.open(SDIST, "r:gz") as archive:
            members = {member.name: member for member in archive.getmembers()}
            missing = [name for name in FILES if prefix + name not in members]
            if missing:
                sys.exit(f"{SDIST} has no {', '.join(prefix + name for name in missing)}")
            contents = {}
            for name in FILES:
                source = archive.extractfile(members[prefix + name])
                assert source is not None
                contents[name] = source.read()
    except (tarfile.TarError, EOFError, OSError):
        os.remove(SDIST)  # cut short by an interrupted download: fetch it again next time
        raise
    for name, content in contents.items():
        # Whole files only, so an interrupted run does not leave a truncated module cached.
        partial = os.path.join(TESTS, f".{name}.partial")
        with open(partial, "wb") as target:
            target.write(content)
        os.replace(partial, os.path.join(TESTS, name))


def run(mode: str, extra: list[str]) -> int:
    """Run the upstream tests in ``mode``; pytest's exit status."""
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
        TESTS,
        "--confcutdir",
        TESTS,
        "-p",
        "upstream_shim",
        f"--upstream-mode={mode}",
        *extra,
        *[os.path.join(TESTS, name) for name in FILES],
    ]
    print(f"== python-diskcache {VERSION} tests, mode {mode}", flush=True)
    return subprocess.run(command, env=env, cwd=TESTS).returncode


def main(argv: list[str]) -> int:
    extra: list[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    modes = argv or list(MODES)
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown:
        sys.exit(f"unknown mode {unknown[0]!r}; choose from {', '.join(MODES)}")
    fetch()
    results = {mode: run(mode, extra) for mode in modes}
    for mode, code in results.items():
        print(f"== upstream tests, mode {mode}: {'passed' if code == 0 else 'FAILED'}")
    return 0 if all(code == 0 for code in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
