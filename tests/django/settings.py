"""The Django settings module the DjangoCache tests run under (see conftest.py).

Several aliases share one directory, as Django's own cache tests share one store between
them, so that key prefixes, versions and key functions are seen to keep entries apart.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

#: Every cache directory of the test run lives under this; conftest.py removes it.
CACHE_ROOT = tempfile.mkdtemp(prefix="dco-django-tests-")


def custom_key_func(key: str, key_prefix: str, version: int) -> str:
    """A KEY_FUNCTION of our own: another layout of the same parts."""
    return "CUSTOM-" + "-".join([key_prefix, str(version), key])


def _backend(directory: str, **params: Any) -> dict[str, Any]:
    return {
        "BACKEND": "diskcache_oxide.DjangoCache",
        "LOCATION": os.path.join(CACHE_ROOT, directory),
        **params,
    }


CACHES = {
    "default": _backend("shared"),
    "prefix": _backend("shared", KEY_PREFIX="cacheprefix"),
    "v2": _backend("shared", VERSION=2),
    "custom_key": _backend("shared", KEY_FUNCTION=custom_key_func),
    "custom_key2": _backend("shared", KEY_FUNCTION="settings.custom_key_func"),
    "forever": _backend("forever", TIMEOUT=None),
    "short": _backend("short", TIMEOUT=1),
    "pickled": _backend("pickled", OPTIONS={"pickle": True}),
    "two_shards": _backend(
        "two_shards", SHARDS=2, DATABASE_TIMEOUT=0.5, OPTIONS={"size_limit": 2**24}
    ),
}

SECRET_KEY = "only-for-the-diskcache-oxide-tests"
ALLOWED_HOSTS = ["testserver"]
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.sessions", "testapp"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
SESSION_ENGINE = "django.contrib.sessions.backends.cache"
SESSION_CACHE_ALIAS = "default"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
CACHE_MIDDLEWARE_ALIAS = "pickled"
