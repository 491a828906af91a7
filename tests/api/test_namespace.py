"""The package's namespace and what importing it loads (issue 33, point 5).

``dir(diskcache_oxide)`` lists what the package exports, not the names its own imports bind
(``annotations`` of a ``__future__`` import was among them). The tasks load on first use: a
user of the cache does not pay for them (nor for asyncio, which the tasks import).
Migration stays loaded with the package: ``migrate`` is both a function and its module."""

from __future__ import annotations

import subprocess
import sys

import diskcache_oxide


def test_dir_is_what_the_package_exports() -> None:
    names = dir(diskcache_oxide)
    assert "annotations" not in names
    assert set(diskcache_oxide.__all__) <= set(names)
    assert {"open", "DjangoCache", "__version__"} <= set(names)
    assert not [
        n
        for n in names
        if n not in diskcache_oxide.__all__ and n not in ("open", "DjangoCache", "__version__")
    ]


def test_every_exported_name_resolves() -> None:
    for name in diskcache_oxide.__all__:
        assert getattr(diskcache_oxide, name) is not None, name


def test_importing_the_package_loads_neither_the_tasks_nor_asyncio() -> None:
    probe = (
        "import sys, diskcache_oxide as d\n"
        "loaded = [m for m in ('diskcache_oxide.tasks', 'asyncio')"
        " if m in sys.modules]\n"
        "print(','.join(loaded))\n"
        "d.Task\n"
        "import diskcache_oxide.migrate._run\n"
        "print('diskcache_oxide.tasks' in sys.modules, d.migrate.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    first, second = done.stdout.splitlines()
    assert first == ""
    assert second == "True migrate"  # and the function stays the package's migrate


def test_a_lazy_name_is_the_same_object_as_its_module_s() -> None:
    from diskcache_oxide.migrate import migrate
    from diskcache_oxide.tasks import Tasks

    assert diskcache_oxide.Tasks is Tasks
    assert diskcache_oxide.migrate is migrate
