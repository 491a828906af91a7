"""The command line on a Redis namespace (D-062): every reading command on a real server and on
a three-master cluster, what only a directory has said as absent or not applying, the writing
commands, the errors as one line, and ``copy``: a directory into Redis and back, its entries,
expiries, tags and queue order kept, its refusals and its report."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import diskcache_oxide
import pytest
from cli_support import (
    Filled,
    FilledRedis,
    Run,
    fill,
    fill_redis,
    namespace_url,
    redis_snapshot,
)
from diskcache_oxide import Cache, JobQueue, _core, admin, register_type, unregister_type
from diskcache_oxide.jobs import jobs_of

pytestmark = pytest.mark.oxide


class Point:
    """A registered type: a key of it cannot be decoded once it is unregistered."""

    def __init__(self, x: int) -> None:
        self.x = x


class Custom:
    """Stored as a pickle by a pickle=True handle: the tools never load it."""

    def __eq__(self, other: object) -> bool:
        return type(other) is Custom

    def __hash__(self) -> int:
        return 1


@pytest.fixture(params=["server", "cluster"])
def on_redis(request: pytest.FixtureRequest) -> FilledRedis:
    """A filled namespace on the session's server, then on its cluster."""
    if request.param == "server":
        url = namespace_url(request.getfixturevalue("redis_url"))
    else:
        url = namespace_url(request.getfixturevalue("redis_cluster_url"), cluster=True)
    return fill_redis(url)


@pytest.fixture
def server(redis_url: str) -> FilledRedis:
    """A filled namespace on the session's single server."""
    return fill_redis(namespace_url(redis_url))


# ---- reading ---------------------------------------------------------------------------------


def test_info_json(on_redis: FilledRedis, run_json: Any) -> None:
    data = run_json("info", on_redis.url)
    assert data["backend"] == "redis" and data["namespace"] == "ops"
    assert data["location"].endswith("namespace=ops")
    assert data["directory"] is None and data["volume"] is None
    assert data["count"] == 5 + 3 + 2
    assert data["settings"]["namespace"] == "ops"
    assert "size_limit" in data["not_applicable"] and "sqlite_*" in data["not_applicable"]
    assert {q["prefix"]: q["depth"] for q in data["queues"]} == {None: 3, "emails": 3}
    assert all(q["oldest_age"] is None for q in data["queues"])
    assert data["claims"] == 1
    assert (data["hits"], data["misses"]) == (0, 0)
    assert data["jobs"] == {
        "mail": {"ready": 1, "scheduled": 1, "leased": 1, "dead": 1},
        "reports": {"ready": 1, "scheduled": 0, "leased": 0, "dead": 0},
    }


def test_info_plain_says_what_does_not_apply(on_redis: FilledRedis, run: Run) -> None:
    result = run("info", on_redis.url)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "redis      redis://" in out and "namespace  ops" in out
    assert "volume -" in out and "live claims 1" in out
    assert "only in a directory (they do not apply on Redis)" in out
    assert "size_limit" in out and "the server's maxmemory" in out
    assert "emails" in out and "(int keys)" in out
    assert "job queues" in out and "mail" in out and "reports" in out


def test_info_of_an_empty_namespace_says_so(redis_url: str, run: Run) -> None:
    result = run("info", namespace_url(redis_url, "typo"))
    assert result.exit_code == 0, result.output
    assert "the namespace 'typo' holds nothing on this server" in result.stdout


def test_keys(on_redis: FilledRedis, run: Run, run_json: Any) -> None:
    out = run("keys", on_redis.url).stdout.splitlines()
    # Insertion order (D-058); the int key 7 is an item of the int keys' queue, listed as 7.
    assert out[:5] == ["'greeting'", "7", "('user', 1)", "b'raw'", "'tagged'"]
    assert len(out) == 10
    emails = run("keys", on_redis.url, "--prefix", "emails", "--limit", "2").stdout
    assert emails.splitlines() == ["'emails-500000000000000'", "'emails-500000000000001'"]
    listed = run_json("keys", on_redis.url, "--limit", "0")
    assert {"json": ["user", 1], "type": "tuple", "repr": "('user', 1)"} in listed


@pytest.mark.parametrize(
    ("args", "printed"),
    [
        (["greeting"], "hello\n"),
        (["--int", "7"], "{'seven': 7}\n"),
        (["--literal", "('user', 1)"], "['Ada', 1815]\n"),
        (["--literal", "b'raw'"], "b'\\x00\\x01'\n"),
    ],
)
def test_get(on_redis: FilledRedis, run: Run, args: list[str], printed: str) -> None:
    result = run("get", on_redis.url, *args)
    assert result.exit_code == 0, result.output
    assert result.stdout == printed


def test_get_json_has_tag_and_expiry(on_redis: FilledRedis, run: Run, run_json: Any) -> None:
    data = run_json("get", on_redis.url, "tagged")
    assert data["value"] == {"json": 1.5, "type": "float", "repr": "1.5"}
    assert data["tag"] == "t" and data["expire_time"] is None
    with diskcache_oxide.open(on_redis.url) as cache:
        cache.set("soon", "s", expire=3600)
    soon = run_json("get", on_redis.url, "soon")
    assert time.time() + 3000 < soon["expire_time"] <= time.time() + 3601
    missing = run("get", on_redis.url, "nothing")
    assert missing.exit_code == 1
    assert missing.stderr.startswith("Error: no key 'nothing' in redis://")


def test_queue_commands(on_redis: FilledRedis, run: Run, run_json: Any) -> None:
    listed = run_json("queue", on_redis.url, "emails", "ls")
    assert [item["value"]["json"]["to"] for item in listed] == [
        f"user{n}@example.org" for n in range(3)
    ]
    peek = run("queue", on_redis.url, "-", "peek").stdout
    assert peek == "7\t{'seven': 7}\n"
    assert run("queue", on_redis.url, "emails", "len").stdout == "3\n"
    assert run_json("queue", on_redis.url, "-", "len") == {
        "prefix": None,
        "depth": 3,
        "oldest_age": None,
    }
    empty = run("queue", on_redis.url, "nothing", "peek")
    assert empty.exit_code == 1 and "is empty" in empty.stderr


def test_claims_ls(on_redis: FilledRedis, run: Run, run_json: Any) -> None:
    (claim,) = run_json("claims", on_redis.url, "ls")
    assert claim["key"] == repr(on_redis.claim_key) and claim["namespace"] == "default"
    assert claim["token"] == on_redis.claim_token
    assert 500 < claim["lease_left"] <= 600
    assert run_json("claims", on_redis.url, "ls", "--namespace", "other") == []
    assert len(run_json("claims", on_redis.url, "ls", "--namespace", "default")) == 1


def _scans(client: Any) -> int:
    # How many SCANs the server has run (its command statistics).
    return int(client.info("commandstats").get("cmdstat_scan", {}).get("calls", 0))


def test_claims_namespaces_are_one_read_without_scan(on_redis: FilledRedis) -> None:
    # The claim scripts keep the set of claims namespaces in use (remote/_scripts.py, B..'K'):
    # a namespace is listed once a claim is taken in it, and dropped by the listing of its
    # claims once none is left; the tools read the set, never SCAN the server.
    from diskcache_oxide import Claims
    from diskcache_oxide.remote import _inspect

    with diskcache_oxide.open(on_redis.url) as cache:

        def listed() -> list[str]:
            return [name for name, _ in cache._link.run(_inspect.claim_sets(cache))]

        assert listed() == ["default"]
        builds = Claims(cache, namespace="builds")
        held = [builds.acquire(f"b{n}", lease=600) for n in range(2)]
        assert all(claim is not None for claim in held)
        odd = Claims(cache, namespace="ü:{odd}*")
        odd_claim = odd.acquire("x", lease=600)
        assert odd_claim is not None
        assert listed() == ["builds", "default", "ü:{odd}*"]
        single = not hasattr(cache.client, "get_nodes")
        scans = _scans(cache.client) if single else 0
        assert admin.claim_count(cache) == 4
        rows = admin.claims(cache)
        assert [(row.namespace, row.key) for row in rows] == [
            ("builds", "'b0'"),
            ("builds", "'b1'"),
            ("default", repr(on_redis.claim_key)),
            ("ü:{odd}*", "'x'"),
        ]
        if single:
            assert _scans(cache.client) == scans  # no SCAN of the server's keys
        for claim in held:
            assert claim is not None
            claim.release()
        assert listed() == ["default", "ü:{odd}*"]  # the release left the set empty
        odd.break_claim("x")
        assert listed() == ["default"]
        # A claim whose lease runs out leaves the set to the next listing of its claims.
        short = Claims(cache, namespace="short")
        assert short.acquire("s", lease=0.05) is not None
        assert "short" in listed()
        time.sleep(0.1)
        assert admin.claim_count(cache, "short") == 0  # the tools' read changes nothing
        assert "short" in listed()
        assert list(short.list()) == []
        assert listed() == ["default"]


def test_read_commands_change_nothing(server: FilledRedis, run: Run) -> None:
    url = server.url
    with diskcache_oxide.open(url) as cache:
        cache.stats(enable=True)  # so that a get through the cache's scripts would count
    before = redis_snapshot(url)
    for args in (
        ["info", url],
        ["keys", url],
        ["get", url, "greeting"],
        ["get", url, "absent"],
        ["queue", url, "emails", "ls"],
        ["queue", url, "emails", "peek"],
        ["queue", url, "-", "len"],
        ["claims", url, "ls"],
        ["jobs", url, "mail", "ls"],
        ["jobs", url, "mail", "show", str(server.dead)],
    ):
        run(*args)
        assert redis_snapshot(url) == before, args


def test_directory_only_commands_say_they_do_not_apply(server: FilledRedis, run: Run) -> None:
    for command in ("check", "vacuum"):
        result = run(command, server.url)
        assert result.exit_code == 1
        assert result.stderr.startswith(f"Error: {command} applies to a directory only")
        assert len(result.stderr.splitlines()) == 1
    migrate = run("migrate", "/nonexistent", server.url)
    assert migrate.exit_code == 1 and "diskcache-oxide copy DIR URL" in migrate.stderr


def test_an_unreadable_value_and_key_are_listed_never_loaded(redis_url: str, run: Run) -> None:
    url = namespace_url(redis_url, "pickles")
    with diskcache_oxide.open(url, pickle=True) as cache:
        cache["plain"] = 1
        register_type(Point, "test-point", lambda p: p.x, Point)
        try:
            cache[("p", Point(1))] = "a key of a type this process does not know"
        finally:
            unregister_type(Point)
        cache.push(Custom(), prefix="q")
    keys = run("keys", url).stdout.splitlines()
    assert keys[0] == "'plain'" and keys[1] == "<unreadable key: UnknownTypeError>"
    assert len(keys) == 3  # the listing went on
    listed = run("queue", url, "q", "ls").stdout
    assert "<unreadable: UnsafeValueError>" in listed
    got = run("get", url, "q-500000000000000")
    assert got.exit_code == 1 and "is a pickle" in got.stderr


def test_errors_are_one_line(run: Run) -> None:
    down = run("info", "redis://127.0.0.1:1/0?namespace=x")
    assert down.exit_code == 1
    assert down.stderr.startswith("Error: cannot reach the Redis server of redis://127.0.0.1:1/0")
    assert len(down.stderr.splitlines()) == 1
    secret = run("keys", "redis://:hunter2@127.0.0.1:1/0")
    assert "hunter2" not in secret.stderr and ":***@" in secret.stderr
    # redis-py reads a ?password= parameter too (issue 29: the CLI masked only user:PASS@)
    query = run("keys", "redis://127.0.0.1:1/0?password=hunter2&namespace=x")
    assert "hunter2" not in query.stderr and "password=***" in query.stderr
    tls = run("info", "rediss://127.0.0.1:1/0?namespace=x")
    assert tls.exit_code == 1
    assert tls.stderr.startswith("Error: cannot reach the Redis server of rediss://127.0.0.1:1")
    braces = run("info", "redis://127.0.0.1:1/0?namespace=a{b}")
    assert braces.exit_code == 1 and "braces" in braces.stderr


# ---- jobs ------------------------------------------------------------------------------------


def test_jobs_ls_and_show_on_redis(server: FilledRedis, run: Run, run_json: Any) -> None:
    rows = run_json("jobs", server.url, "mail", "ls")
    states = {row["id"]: row["state"] for row in rows}
    assert states == {
        server.dead: "dead",
        server.leased: "leased",
        server.ready: "ready",
        server.scheduled: "scheduled",
    }
    dead = run_json("jobs", server.url, "mail", "show", server.dead)
    assert "smtp said no" in dead["error"]
    info = run_json("info", server.url)
    assert info["jobs"]["mail"] == {"ready": 1, "scheduled": 1, "leased": 1, "dead": 1}


def test_jobs_retry_bury_purge_on_redis(server: FilledRedis, run: Run, run_json: Any) -> None:
    assert run("jobs", server.url, "mail", "retry", server.dead).exit_code == 0
    assert run_json("jobs", server.url, "mail", "ls", "--state", "dead") == []
    assert run("jobs", server.url, "mail", "bury", server.ready).exit_code == 0
    (buried,) = run_json("jobs", server.url, "mail", "ls", "--state", "dead")
    assert buried["id"] == server.ready
    purged = run_json("jobs", server.url, "mail", "purge", "--yes")
    assert purged == {"queue": "mail", "purged": 1}


# ---- writing ---------------------------------------------------------------------------------


def test_claims_release(on_redis: FilledRedis, run: Run, run_json: Any) -> None:
    released = run("claims", on_redis.url, "release", on_redis.claim_key)
    assert released.exit_code == 0, released.output
    assert "released the claim on 'report:2025'" in released.stdout
    assert run_json("claims", on_redis.url, "ls") == []
    again = run("claims", on_redis.url, "release", on_redis.claim_key)
    assert again.exit_code == 1 and "no live claim" in again.stderr


# ---- copy ------------------------------------------------------------------------------------


def _everything(cache: Any) -> dict[Any, tuple[Any, float | None, Any]]:
    # Every entry as (value, expire_time, tag), read without counting or removing anything.
    found = {}
    for key in admin.keys(cache, limit=None):
        entry = admin.entry(cache, key)
        if entry is not None:  # an expired entry a directory has not removed yet is none
            found[key] = entry
    return found


def _source(tmp_path: Path) -> tuple[Filled, Cache]:
    filled = fill(tmp_path / "src")
    cache = Cache(str(filled.directory))
    cache.set("session", {"user": 1}, expire=3600, tag="sessions")
    cache.set("forever", "f", tag=7)
    cache.push("urgent", prefix="emails", side="front")  # the queue's front, by its number
    cache.set("gone", "g", expire=0.001)
    time.sleep(0.01)  # "gone" has expired: it is not copied
    return filled, cache


def _same(a: dict[Any, Any], b: dict[Any, Any]) -> None:
    assert set(a) == set(b)
    for key, (value, expires, tag) in a.items():
        other = b[key]
        assert (other[0], other[2]) == (value, tag), key
        if expires is None or math.isinf(expires):
            assert other[1] is None or math.isinf(other[1]), key
        else:  # the time it expires, not its length: to the millisecond Redis keeps
            assert other[1] == pytest.approx(expires, abs=0.5), key


@pytest.mark.parametrize("where", ["server", "cluster"])
def test_copy_round_trip(
    tmp_path: Path, request: pytest.FixtureRequest, run: Run, where: str
) -> None:
    filled, source = _source(tmp_path)
    if where == "server":
        url = namespace_url(request.getfixturevalue("redis_url"), "moved")
    else:
        url = namespace_url(request.getfixturevalue("redis_cluster_url"), "moved", cluster=True)
    result = run("copy", filled.directory, url)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"copied {filled.directory} -> {url}" in out
    assert "entries  13 written (7 of them queue items" in out
    assert "expired  1 expired or removed" in out
    assert "claims   1 live claims not copied" in out
    with admin.open_cache(filled.directory) as src, admin.open_cache(url) as dst:
        before = _everything(src)
        assert "gone" not in before
        _same(before, _everything(dst))
        # Queue order: the front push is first, then the three in their order.
        assert [item.key for item in admin.queue_items(dst, "emails")] == [
            item.key for item in admin.queue_items(src, "emails")
        ]
        # The stored frames are the engine's encoding of the same values.
        for key in ("greeting", ("user", 1), b"raw"):
            assert _admin_frame(dst, key) == _core.encode_value(before[key][0])
    # Pulled from Redis in the directory's order, the directory's pull order.
    with diskcache_oxide.open(url) as dst:
        pulled = [dst.pull("emails")[1] for _ in range(4)]
    assert pulled[0] == "urgent" and [p["to"] for p in pulled[1:]] == [
        f"user{n}@example.org" for n in range(3)
    ]
    # Insertion order is kept too: the directory's iteration order.
    with diskcache_oxide.open(url) as dst:
        assert list(dst)[:3] == list(source)[:3]
    source.close()


def _admin_frame(cache: Any, key: Any) -> bytes | None:
    from diskcache_oxide.remote.inspector import RemoteInspector

    return RemoteInspector(cache).frame(key)


def test_copy_back_into_a_directory(tmp_path: Path, redis_url: str) -> None:
    filled, source = _source(tmp_path)
    url = namespace_url(redis_url, "moved")
    admin.copy(filled.directory, url)
    back = tmp_path / "back"
    report = admin.copy(url, back)
    assert report.entries == 13 and not report.skipped
    with admin.open_cache(filled.directory) as src, admin.open_cache(back) as dst:
        before = _everything(src)
        assert "gone" not in before
        _same(before, _everything(dst))
        assert admin.queue_items(dst, "emails")[0].value == "urgent"
    source.close()


def test_copy_refuses_a_namespace_that_is_not_empty_unless_merge(
    tmp_path: Path, redis_url: str, run: Run, run_json: Any
) -> None:
    filled, source = _source(tmp_path)
    source.close()
    url = namespace_url(redis_url, "taken")
    with diskcache_oxide.open(url) as dst:
        dst["greeting"] = "theirs"
        dst["mine"] = "stays"
    refused = run("copy", filled.directory, url)
    assert refused.exit_code == 1
    assert "is not empty (2 entries)" in refused.stderr and "--merge" in refused.stderr
    with diskcache_oxide.open(url) as dst:
        assert dst["greeting"] == "theirs"  # nothing was written
    first = run_json("copy", filled.directory, url, "--merge")
    assert first["entries"] == 13 and first["src"] == str(filled.directory)
    with diskcache_oxide.open(url) as dst:
        after_first = _everything(dst)
        assert dst["greeting"] == "hello" and dst["mine"] == "stays"
    second = run_json("copy", filled.directory, url, "--merge")
    assert second["entries"] == 13
    with diskcache_oxide.open(url) as dst:
        _same(after_first, _everything(dst))  # the same entries again: idempotent
    same = run("copy", url, url)
    assert same.exit_code == 1 and "are the same cache" in same.stderr


def test_copy_skips_pickles_and_says_why(tmp_path: Path, redis_url: str, run: Run) -> None:
    directory = tmp_path / "pickled"
    with Cache(str(directory), pickle=True) as cache:
        cache["plain"] = [1, 2]
        cache["opaque"] = Custom()  # stored as a pickle
    url = namespace_url(redis_url, "p")
    result = run("copy", directory, url, "--json")
    assert result.exit_code == 3, (result.output, result.stderr)  # skipped: incomplete (issue 29)
    report = json.loads(result.stdout)
    assert report["entries"] == 1
    (skipped,) = report["skipped"]
    assert skipped["key"] == "opaque" and skipped["what"] == "entry"
    assert "UnsafeValueError" in skipped["reason"] and "--pickle" in skipped["reason"]
    with diskcache_oxide.open(url) as dst:
        assert list(dst) == ["plain"]


def test_copy_with_pickle_copies_the_pickle_as_stored(tmp_path: Path, redis_url: str) -> None:
    directory = tmp_path / "pickled"
    with Cache(str(directory), pickle=True) as cache:
        cache["opaque"] = Custom()
    url = namespace_url(redis_url, "p")
    report = admin.copy(directory, url, pickle=True)
    assert report.entries == 1 and not report.skipped
    with diskcache_oxide.open(url, pickle=True) as dst:
        assert dst["opaque"] == Custom()


def test_copy_jobs_into_redis(tmp_path: Path, redis_url: str) -> None:
    filled = fill(tmp_path / "src")
    url = namespace_url(redis_url, "j")
    report = admin.copy(filled.directory, url)
    assert report.jobs == 5 and report.jobs_leased == 1 and report.jobs_note is None
    with admin.open_cache(url) as dst:
        counts = admin.job_counts(dst, "mail")
        assert (counts.ready, counts.scheduled, counts.dead) == (2, 1, 1)
        (dead,) = admin.jobs(dst, "mail", "dead")
        assert "smtp said no" in (dead.error or "")


@pytest.mark.parametrize("where", ["server", "cluster"])
def test_copy_jobs_into_redis_and_back(
    tmp_path: Path, request: pytest.FixtureRequest, where: str
) -> None:
    # directory -> Redis -> directory: every job arrives in its queue, with its value, unique
    # key, attempts allowed, delay and death, in both directions.
    filled = fill(tmp_path / "src")
    if where == "server":
        url = namespace_url(request.getfixturevalue("redis_url"), "jobs-trip")
    else:
        url = namespace_url(request.getfixturevalue("redis_cluster_url"), "jobs-trip", True)
    with Cache(str(filled.directory)) as cache:
        JobQueue(cache, "reports").put("weekly", unique="weekly-report", max_attempts=7)
    there = admin.copy(filled.directory, url)
    assert there.jobs == 6 and there.jobs_leased == 1 and there.jobs_note is None
    back = admin.copy(url, tmp_path / "back")
    assert back.jobs == 6 and back.jobs_leased == 0 and back.jobs_note is None
    with admin.open_cache(url) as redis_side, admin.open_cache(tmp_path / "back") as directory:
        for cache in (redis_side, directory):
            assert admin.job_queues(cache) == ["mail", "reports"]
            assert admin.job_counts(cache, "mail")._asdict() == {
                "ready": 2,  # the leased one comes back ready
                "scheduled": 1,
                "leased": 0,
                "dead": 1,
            }
            assert admin.job_counts(cache, "reports").ready == 2
            (dead,) = admin.jobs(cache, "mail", "dead")
            assert "smtp said no" in (dead.error or "")
            (scheduled,) = admin.jobs(cache, "mail", "scheduled")
            assert 3000 < (scheduled.due_in or 0) <= 3600
            (weekly,) = [row for row in admin.jobs(cache, "reports") if row.unique]
            assert weekly.unique == "weekly-report" and weekly.max_attempts == 7
            assert weekly.value == "'weekly'"
        values = [info.value for info in jobs_of(directory).list("mail", None, 0, 100)]
        assert sorted(v["send"] for v in values) == ["doomed", "later", "taken", "waiting"]
    # The unique key holds in the copy: a second put of it is the copied job.
    with Cache(str(tmp_path / "back")) as writable:
        assert JobQueue(writable, "reports").put("again", unique="weekly-report") == weekly.id
    # Into a namespace that already holds jobs, none is copied twice.
    again = admin.copy(filled.directory, url, merge=True)
    assert again.jobs == 0 and "already holds jobs" in (again.jobs_note or "")


def test_copy_jobs_between_directories(tmp_path: Path) -> None:
    filled = fill(tmp_path / "src")
    report = admin.copy(filled.directory, tmp_path / "dst")
    assert report.jobs == 5 and report.jobs_leased == 1 and report.jobs_note is None
    with admin.open_cache(tmp_path / "dst") as dst:
        assert admin.job_counts(dst, "mail")._asdict() == {
            "ready": 2,  # the leased one comes back ready
            "scheduled": 1,
            "leased": 0,
            "dead": 1,
        }
        (scheduled,) = admin.jobs(dst, "mail", "scheduled")
        assert 3000 < (scheduled.due_in or 0) <= 3600
        (dead,) = admin.jobs(dst, "mail", "dead")
        assert "smtp said no" in (dead.error or "")
        assert admin.job_counts(dst, "reports").ready == 1
    # A second copy into it adds no job twice.
    again = admin.copy(filled.directory, tmp_path / "dst", merge=True)
    assert again.jobs == 0 and "already holds jobs" in (again.jobs_note or "")


def test_copy_json_and_progress(tmp_path: Path, redis_url: str, run: Run) -> None:
    directory = tmp_path / "many"
    with Cache(str(directory)) as cache:
        cache.set_many({f"k{n}": n for n in range(450)})
    url = namespace_url(redis_url, "many")
    seen: list[tuple[int, int]] = []
    report = admin.copy(directory, url, progress=lambda done, total: seen.append((done, total)))
    assert report.entries == 450 and seen[-1] == (450, 450)
    with diskcache_oxide.open(url) as dst:
        assert len(dst) == 450 and dst["k449"] == 449
    data = json.loads(run("copy", directory, namespace_url(redis_url, "other"), "--json").stdout)
    assert data["entries"] == 450 and data["skipped"] == []


def test_a_unix_socket_url(redis_server: Any, redis_url: str, run: Run, run_json: Any) -> None:
    # unix:///path/redis.sock?db=0&namespace=NS names the same namespace as redis://.
    fill_redis(namespace_url(redis_url))
    url = f"{redis_server.unix_url}&namespace=ops"
    assert url.startswith("unix:///")
    data = run_json("info", url)
    assert data["count"] == 10 and data["location"] == url
    assert run("get", url, "greeting").stdout == "hello\n"


def test_open_a_unix_socket_url(redis_server: Any, redis_url: str) -> None:
    # unix:///path (no host part) reaches redis-py as written, on both faces: remote/cache.py's
    # URL splitting once wrote it unix:/path, which redis-py refuses.
    import asyncio

    from diskcache_oxide.remote import AsyncRedisCache

    url = f"{redis_server.unix_url}&namespace=sock"
    assert url.startswith("unix:///")
    with diskcache_oxide.open(url) as cache:
        assert cache.client.get_connection_kwargs()["path"] == redis_server.unix_path
        cache["over"] = "the socket"
    with diskcache_oxide.open(namespace_url(redis_url, "sock")) as same:
        assert same["over"] == "the socket"

    async def main() -> Any:
        async with AsyncRedisCache(redis_server.unix_url, namespace="sock") as acache:
            return await acache.get("over")

    assert asyncio.run(main()) == "the socket"


def test_without_redis_py_a_url_names_the_extra() -> None:
    # As in an environment without the redis extra: the import of redis fails.
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['redis'] = None\n"
        "from diskcache_oxide.cli import main\n"
        "main(['info', 'redis://127.0.0.1:1/0'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert result.stderr.startswith("Error: the Redis backend needs redis-py")
    assert "pip install 'diskcache_oxide[redis]'" in result.stderr
    assert len(result.stderr.splitlines()) == 1
