"""Runs the DjangoCache tests under a real Django: the settings module beside this file,
``django.setup()``, an in-memory database with the test app's table, and every cache
cleared after each test. Skipped when Django is not installed."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

django = pytest.importorskip("django")

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
