"""The package's namespace and what importing it loads (issue 33, point 5).

``dir(diskcache_oxide)`` lists what the package exports, not the names its own imports bind
(``annotations`` of a ``__future__`` import was among them). The tasks load on first use: a
user of the cache does not pay for them (nor for asyncio, which the tasks import), nor for
the job queue, the recipes, Deque and Index, NullCache, Caches or migration, nor for the standard
modules only they need. ``migrate``, the function, is bound with the package from its package's
light ``__init__``: it is both a function and the name of its module."""

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


#: What ``import diskcache_oxide`` does not load (issue 33, D-071): the features a cache user
#: may never call, the optional backends and integrations (redis-py, Django), and the standard
#: modules only they or rare paths need, each imported where it is used.
NOT_AT_IMPORT = (
    "asyncio",
    "dataclasses",
    "datetime",
    "decimal",
    "inspect",
    "logging",
    "pathlib",
    "pickle",
    "random",
    "sqlite3",
    "tempfile",
    "textwrap",
    "urllib.parse",
    "uuid",
    "redis",
    "django",
    "diskcache_oxide._api",
    "diskcache_oxide.aio",
    "diskcache_oxide.caches",
    "diskcache_oxide.cli",
    "diskcache_oxide.dashboard",
    "diskcache_oxide.jobs",
    "diskcache_oxide.migrate._run",
    "diskcache_oxide.null",
    "diskcache_oxide.persistent",
    "diskcache_oxide.recipes",
    "diskcache_oxide.remote",
    "diskcache_oxide.tasks",
)


def test_importing_the_package_loads_no_feature_it_was_not_asked_for() -> None:
    probe = (
        "import sys\n"
        "import diskcache_oxide\n"
        f"print(','.join(m for m in {NOT_AT_IMPORT!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_the_lazy_names_load_their_modules_on_use() -> None:
    probe = (
        "import sys, diskcache_oxide as d\n"
        "assert 'diskcache_oxide.jobs' not in sys.modules\n"
        "assert d.JobQueue.__module__ == 'diskcache_oxide.jobs'\n"
        "assert d.Lock.__module__ == 'diskcache_oxide.recipes'\n"
        "assert d.Deque.__module__ == 'diskcache_oxide.persistent'\n"
        "assert d.MigrationReport.__module__ == 'diskcache_oxide.migrate'\n"
        "from diskcache_oxide import *\n"
        "print(NullCache.__name__, Caches.__name__, Index.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["NullCache", "Caches", "Index"]


def test_the_default_pickle_protocol_is_pickle_s_highest() -> None:
    # Written out in directory/settings.py so that pickle loads on use; held to pickle here.
    import pickle

    assert diskcache_oxide.DEFAULT_SETTINGS["disk_pickle_protocol"] == pickle.HIGHEST_PROTOCOL


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
