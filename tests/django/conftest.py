"""Runs the DjangoCache tests under a real Django: the settings module beside this file,
``django.setup()``, an in-memory database with the test app's table, and every cache
cleared after each test. Skipped when Django is not installed.

With ``DCO_DJANGO_BACKEND=redis`` the same tests run with every alias's ``LOCATION`` a Redis
URL, on a server started here (and stopped at the session's end, by pid): ``make test`` runs
the suite both ways."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

django = pytest.importorskip("django")

BACKEND = os.environ.get("DCO_DJANGO_BACKEND", "directory")
_server = None
if BACKEND == "redis":
    import redis_servers

    _missing = redis_servers.redis_missing()
    if _missing:
        pytest.skip(_missing, allow_module_level=True)
    _server = redis_servers.RedisServer(name="redis-django")
    os.environ["DCO_DJANGO_REDIS_URL"] = _server.url
elif BACKEND != "directory":
    raise ValueError(f"DCO_DJANGO_BACKEND is 'directory' or 'redis', not {BACKEND!r}")

os.environ["DJANGO_SETTINGS_MODULE"] = "settings"
django.setup()

from django.conf import settings  # noqa: E402
from django.core.cache import caches  # noqa: E402
from django.db import connection  # noqa: E402


def _create_tables() -> None:
    from testapp.models import Poll

    with connection.schema_editor() as editor:
        editor.create_model(Poll)


_create_tables()


@pytest.fixture(autouse=True)
def _clear_caches() -> Iterator[None]:
    yield
    for alias in settings.CACHES:
        caches[alias].clear()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    caches.close_all()
    shutil.rmtree(settings.CACHE_ROOT, ignore_errors=True)
    if _server is not None:
        _server.close()
