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


#: Set (by conftest.py, which starts the server) when the suite runs on Redis: each alias's
#: LOCATION is then this URL with the directory's name as its namespace, as a user who moves
#: the cache to Redis writes it. ``make test`` runs the suite on both.
REDIS_URL = os.environ.get("DCO_DJANGO_REDIS_URL", "")


def _backend(directory: str, **params: Any) -> dict[str, Any]:
    if REDIS_URL:
        # A directory's own parameters: a Redis namespace has no shards, lock wait or size
        # limit (DjangoCache refuses them there, saying so; test_django_extras checks it).
        params.pop("SHARDS", None)
        params.pop("DATABASE_TIMEOUT", None)
        options = dict(params.pop("OPTIONS", {}))
        options.pop("size_limit", None)
        if options:
            params["OPTIONS"] = options
        location = f"{REDIS_URL}?namespace=django-{directory}"
    else:
        location = os.path.join(CACHE_ROOT, directory)
    return {"BACKEND": "diskcache_oxide.DjangoCache", "LOCATION": location, **params}


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
