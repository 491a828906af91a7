"""A URL given where a directory belongs is refused (issue 33, point 4).

``Cache("redis://localhost:6379/0")`` used to create a directory ``redis:/localhost:6379/0``
under the working directory, silently, so that every process had a cache of its own. Every
directory opener now raises ValueError naming ``diskcache_oxide.open(url)``, and creates
nothing."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import diskcache_oxide as dc
import pytest

URLS = [
    "redis://localhost:6379/0",
    "rediss://user:secret@cache.example:6380/1?namespace=app",
    "unix:///run/redis.sock",
    "REDIS://LOCALHOST/0",
    "file:///var/tmp/cache",
    "s3://bucket/cache",
]

OPENERS: dict[str, Callable[[str], Any]] = {
    "Cache": lambda where: dc.Cache(where),
    "Cache(directory=)": lambda where: dc.Cache(directory=where),
    "FanoutCache": lambda where: dc.FanoutCache(where, shards=2),
    "Deque": lambda where: dc.Deque(directory=where),
    "Deque.fromcache path": lambda where: dc.Deque([], where),
    "Index": lambda where: dc.Index(where),
    "JobQueue": lambda where: dc.JobQueue(where),
}


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("opener", sorted(OPENERS))
def test_a_url_is_refused_and_nothing_is_created(
    opener: str, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"not a URL") as raised:
        OPENERS[opener](url)
    message = str(raised.value)
    assert "diskcache_oxide.open" in message or "the path itself" in message
    assert "secret" not in message  # a password in the URL is never repeated
    assert os.listdir(tmp_path) == []


def test_the_message_names_the_class_called(tmp_path: Path) -> None:
    for name, call in [
        ("FanoutCache", lambda: dc.FanoutCache("redis://h/0")),
        ("Deque", lambda: dc.Deque(directory="redis://h/0")),
        ("Index", lambda: dc.Index("redis://h/0")),
        ("JobQueue", lambda: dc.JobQueue("redis://h/0")),
        ("Cache", lambda: dc.Cache("redis://h/0")),
    ]:
        with pytest.raises(ValueError, match=rf"^{name} takes a directory path"):
            call()


@pytest.mark.parametrize(
    "name", ["a:b", "redis:", "redis:/not-a-url", "x//y", "1redis://digit-first", "-a://b"]
)
def test_paths_that_only_look_like_urls_still_open(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with dc.Cache(name) as cache:
        cache["k"] = 1
        assert cache["k"] == 1
        assert os.path.isdir(cache.directory)


def test_a_path_object_and_bytes_are_paths(tmp_path: Path) -> None:
    with dc.Cache(tmp_path / "p") as cache:
        assert cache.directory == str(tmp_path / "p")
    with dc.Cache(os.fsencode(tmp_path / "b")) as cache:
        assert cache.directory == str(tmp_path / "b")


def test_open_still_opens_a_file_url_and_a_path(tmp_path: Path) -> None:
    with dc.open(f"file://{tmp_path / 'f'}") as cache:
        cache["k"] = 1
    with dc.open(str(tmp_path / "f")) as cache:
        assert cache["k"] == 1


def test_a_cache_object_where_a_path_belongs_is_refused(tmp_path: Path) -> None:
    class Opaque:
        pass

    with dc.Cache(tmp_path / "c") as cache:
        for wrong in (Opaque(), object()):
            with pytest.raises(TypeError, match="directory must be a path"):
                dc.Cache(wrong)
            with pytest.raises(TypeError, match="directory must be a path"):
                dc.FanoutCache(wrong)
        assert cache.directory
