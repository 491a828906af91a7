"""The read-only commands (info, keys, get, queue, jobs ls/show, claims ls) on a filled
directory, in plain and --json output, and that none of them changes a byte of it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from cli_support import Filled, Run, digest
from diskcache_oxide import Cache, JobQueue, register_type, unregister_type


def test_info_json_counts_every_part(filled: Filled, run_json: Any) -> None:
    data = run_json("info", filled.directory)
    assert data["directory"] == str(filled.directory)
    assert data["count"] == 5 + 3 + 2  # entries, the emails queue, the int keys' queue
    assert data["settings"]["eviction_policy"] == "none"
    assert data["volume"] > 0
    queues = {q["prefix"]: q for q in data["queues"]}
    assert queues["emails"]["depth"] == 3
    assert queues[None]["depth"] == 3  # the int key 7 sorts into the int keys' queue
    assert queues["emails"]["oldest_age"] >= 0
    assert data["jobs"]["mail"] == {"ready": 1, "scheduled": 1, "leased": 1, "dead": 1}
    assert data["jobs"]["reports"] == {"ready": 1, "scheduled": 0, "leased": 0, "dead": 0}
    assert data["claims"] == 1


def test_info_plain_shows_tables(filled: Filled, run: Run) -> None:
    result = run("info", filled.directory)
    assert result.exit_code == 0, result.output
    out = result.stdout
    for text in (str(filled.directory), "eviction_policy", "emails", "(int keys)", "mail"):
        assert text in out
    assert "live claims 1" in out


def test_keys_prints_reprs_and_filters(filled: Filled, run: Run, run_json: Any) -> None:
    result = run("keys", filled.directory, "--limit", 0)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    for key in ("'greeting'", "7", "('user', 1)", "b'raw'", "'tagged'"):
        assert key in lines
    assert len(lines) == 10
    assert run("keys", filled.directory, "--limit", 2).stdout.count("\n") == 2
    prefixed = run("keys", filled.directory, "--prefix", "emails").stdout.splitlines()
    assert len(prefixed) == 3 and all(k.startswith("'emails-") for k in prefixed)
    described = run_json("keys", filled.directory, "--prefix", "gree")
    assert described == [{"json": "greeting", "type": "str", "repr": "'greeting'"}]


@pytest.mark.parametrize(
    ("args", "printed"),
    [
        (["greeting"], "hello"),
        (["--int", "7"], "{'seven': 7}"),
        (["--literal", "('user', 1)"], "['Ada', 1815]"),
        (["--literal", "b'raw'"], "b'\\x00\\x01'"),
        (["--literal", "'tagged'"], "1.5"),
    ],
)
def test_get_reads_each_key_type(filled: Filled, run: Run, args: list[str], printed: str) -> None:
    result = run("get", filled.directory, *args)
    assert result.exit_code == 0, result.output
    assert result.stdout == printed + "\n"


def test_get_json(filled: Filled, run_json: Any) -> None:
    data = run_json("get", filled.directory, "--literal", "'tagged'")
    assert data["value"] == {"json": 1.5, "type": "float", "repr": "1.5"}
    assert data["tag"] == "t" and data["expire_time"] is None
    data = run_json("get", filled.directory, "--literal", "('user', 1)")
    assert data["key"]["type"] == "tuple" and data["value"]["json"] == ["Ada", 1815]


def test_get_missing_or_mistyped_key(filled: Filled, run: Run) -> None:
    missing = run("get", filled.directory, "7")  # the str '7', not the int 7
    assert missing.exit_code == 1
    assert missing.stderr == f"Error: no key '7' in {filled.directory}\n"
    assert run("get", filled.directory, "--int", "seven").exit_code == 2
    assert run("get", filled.directory, "--literal", "user").exit_code == 2  # unquoted str
    assert run("get", filled.directory, "--int", "--literal", "7").exit_code == 2
    assert run("get", filled.directory).exit_code == 2  # click: missing KEY


def test_queue_ls_peek_len(filled: Filled, run: Run, run_json: Any) -> None:
    items = run_json("queue", filled.directory, "emails", "ls")
    assert [i["value"]["json"]["to"] for i in items] == [f"user{n}@example.org" for n in range(3)]
    assert items[0]["key"]["repr"].startswith("'emails-")
    peek = run_json("queue", filled.directory, "emails", "peek")
    assert peek["value"]["json"] == {"to": "user0@example.org"}
    assert run("queue", filled.directory, "emails", "len").stdout == "3\n"
    length = run_json("queue", filled.directory, "emails", "len")
    assert length["prefix"] == "emails" and length["depth"] == 3
    # "-" is the queue of int keys; the int key 7 is in its range, so it comes first.
    ints = run_json("queue", filled.directory, "-", "ls")
    assert [i["value"]["json"] for i in ints] == [{"seven": 7}, "first int item", "second int item"]
    assert run("queue", filled.directory, "emails", "ls", "--limit", 1).stdout.count("emails-") == 1


def test_queue_empty_or_unknown(filled: Filled, run: Run) -> None:
    result = run("queue", filled.directory, "nothing", "peek")
    assert result.exit_code == 1 and "empty" in result.stderr
    assert run("queue", filled.directory, "nothing", "len").stdout == "0\n"
    assert run("queue", filled.directory, "emails").exit_code == 2  # no subcommand
    assert run("queue", filled.directory, "emails", "pop").exit_code == 2


def test_jobs_ls_by_state(filled: Filled, run_json: Any) -> None:
    rows = run_json("jobs", filled.directory, "mail", "ls")
    states = {row["id"]: row["state"] for row in rows}
    assert states == {
        filled.dead: "dead",
        filled.leased: "leased",
        filled.ready: "ready",
        filled.scheduled: "scheduled",
    }
    by_id = {row["id"]: row for row in rows}
    dead = by_id[filled.dead]
    assert dead["error"] == "RuntimeError('smtp said no')" and dead["attempts"] == 1
    leased = by_id[filled.leased]
    assert leased["lease_age"] >= 0 and 0 < leased["due_in"] <= 600 and leased["attempts"] == 1
    assert 3500 < by_id[filled.scheduled]["due_in"] <= 3600
    assert by_id[filled.ready]["value"].endswith("…'}")  # a long value is cut in a listing
    for alias, state, job in (
        ("queued", "ready", filled.ready),
        ("delayed", "scheduled", filled.scheduled),
        ("leased", "leased", filled.leased),
        ("dead", "dead", filled.dead),
    ):
        listed = run_json("jobs", filled.directory, "mail", "ls", "--state", alias)
        assert [(r["id"], r["state"]) for r in listed] == [(job, state)]
    after = run_json("jobs", filled.directory, "mail", "ls", "--after", filled.leased)
    assert all(r["id"] > filled.leased for r in after) and len(after) == 2


def test_jobs_ls_plain(filled: Filled, run: Run) -> None:
    result = run("jobs", filled.directory, "mail", "ls")
    assert result.exit_code == 0
    for text in ("dead", "leased", "ready", "scheduled", "RuntimeError('smtp said no')", "now"):
        assert text in result.stdout


def test_jobs_show(filled: Filled, run: Run, run_json: Any) -> None:
    row = run_json("jobs", filled.directory, "mail", "show", filled.ready)
    assert row["value"] == repr({"send": "waiting", "body": "x" * 200})  # in full
    assert row["state"] == "ready" and row["queue"] == "mail"
    assert "smtp said no" in run("jobs", filled.directory, "mail", "show", filled.dead).stdout
    missing = run("jobs", filled.directory, "mail", "show", 999)
    assert missing.exit_code == 1 and "no job 999" in missing.stderr
    elsewhere = run("jobs", filled.directory, "mail", "show", filled.other)
    assert elsewhere.exit_code == 1 and "'reports', not 'mail'" in elsewhere.stderr
    assert run("jobs", filled.directory, "mail", "show", "x").exit_code == 2


def test_jobs_unknown_queue(filled: Filled, run: Run) -> None:
    result = run("jobs", filled.directory, "mial", "ls")
    assert result.exit_code == 1
    assert "no job queue 'mial'" in result.stderr and "'mail'" in result.stderr


def test_claims_ls(filled: Filled, run: Run, run_json: Any) -> None:
    (claim,) = run_json("claims", filled.directory, "ls")
    assert claim["key"] == repr(filled.claim_key) and claim["namespace"] == "default"
    assert claim["pid"] == os.getpid() and claim["token"] == filled.claim_token
    assert 590 < claim["lease_left"] <= 600
    assert run_json("claims", filled.directory, "ls", "--namespace", "other") == []
    out = run("claims", filled.directory, "ls").stdout
    assert f":{os.getpid()}" in out and "report:2025" in out


def test_read_commands_change_nothing(filled: Filled, run: Run) -> None:
    d = filled.directory
    before = digest(d)
    for args in (
        ["info", d],
        ["keys", d],
        ["get", d, "greeting"],
        ["queue", d, "emails", "ls"],
        ["queue", d, "emails", "peek"],
        ["queue", d, "-", "len"],
        ["jobs", d, "mail", "ls"],
        ["jobs", d, "mail", "show", filled.dead],
        ["claims", d, "ls"],
        ["check", d],
    ):
        result = run(*args)
        assert result.exit_code == 0, (args, result.output)
        assert digest(d) == before, args


def test_errors_are_one_line(tmp_path: Path, run: Run) -> None:
    missing = run("info", tmp_path / "nowhere")
    assert missing.exit_code == 1
    assert missing.stderr == f"Error: no directory '{tmp_path / 'nowhere'}'\n"
    empty = run("keys", tmp_path)
    assert empty.exit_code == 1 and "no cache.db there" in empty.stderr
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_python_diskcache_directory_names_migrate(tmp_path: Path, run: Run) -> None:
    diskcache = pytest.importorskip("diskcache")
    with diskcache.Cache(str(tmp_path / "old")) as old:
        old["k"] = 1
    result = run("info", tmp_path / "old")
    assert result.exit_code == 1
    assert "diskcache-oxide migrate" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.output
    with diskcache.FanoutCache(str(tmp_path / "fan"), shards=2) as fan:
        fan["k"] = 1
    fanout = run("info", tmp_path / "fan")
    assert fanout.exit_code == 1 and "FanoutCache" in fanout.stderr


def test_help_and_version(run: Run) -> None:
    result = run("--help")
    assert result.exit_code == 0
    for command in ("info", "keys", "get", "queue", "jobs", "claims", "check", "vacuum"):
        assert command in result.stdout
    assert "--literal" in run("get", "--help").stdout
    assert run("--version").exit_code == 0
    assert run("nosuch").exit_code == 2


class Custom:
    """Stored as a pickle by a pickle=True handle: a read-only look never loads it."""


def test_a_pickled_value_is_listed_never_loaded(tmp_path: Path, run: Run, run_json: Any) -> None:
    directory = tmp_path / "p"
    with Cache(str(directory), pickle=True) as cache:
        cache.push(Custom(), prefix="q")
        cache["obj"] = Custom()
    (item,) = run_json("queue", directory, "q", "ls")
    assert item["value"]["repr"] == "<unreadable: UnsafeValueError>"
    result = run("get", directory, "obj")
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1
    assert "pickle" in result.stderr


def _no_constants(name: str) -> Any:
    raise AssertionError(f"not JSON: {name}")


def test_json_is_strict_for_floats_json_cannot_hold(tmp_path: Path, run: Run) -> None:
    # inf, -inf and nan are written as the strings "inf", "-inf" and "nan" (never as
    # Infinity or NaN, which are not JSON): here an expire time of inf, a value and a tag.
    with Cache(str(tmp_path / "c")) as cache:
        cache.set("forever", 1, expire=float("inf"))
        cache.set("odd", [float("nan"), float("-inf")], tag=float("inf"))
    result = run("get", tmp_path / "c", "forever", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout, parse_constant=_no_constants)
    assert data["expire_time"] == "inf"
    result = run("get", tmp_path / "c", "odd", "--json")
    data = json.loads(result.stdout, parse_constant=_no_constants)
    assert data["value"]["json"] == ["nan", "-inf"] and data["tag"] == "inf"
    assert data["value"]["repr"] == "[nan, -inf]"


class Point:
    """A type registered with register_type for the tests of unreadable keys."""

    def __init__(self, x: int) -> None:
        self.x = x


def test_keys_lists_an_unreadable_key_and_goes_on(tmp_path: Path, run: Run, run_json: Any) -> None:
    # A key only pickle can store, in a directory the CLI opens in the safe mode, and a key
    # whose type this process has not registered: each is listed as unreadable, and the
    # keys after it are listed too.
    directory = tmp_path / "p"
    with Cache(str(directory), pickle=True, eviction_policy="none") as cache:
        cache["a"] = 1
        cache[Custom()] = 2
        cache.push("first int item")
        cache["z"] = 3
        register_type(Point, "test-point", lambda p: p.x, Point)
        try:
            cache[("p", Point(1))] = 4
        finally:
            unregister_type(Point)
    result = run("keys", directory, "--limit", 0)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert {"'a'", "'z'", "500000000000000"} <= set(lines)
    assert "<unreadable key: UnsafeValueError>" in lines
    assert "<unreadable key: UnknownTypeError>" in lines
    assert len(lines) == 5
    described = run_json("keys", directory, "--limit", 0)
    unreadable = [k for k in described if k.get("unreadable")]
    assert len(unreadable) == 2
    assert all(k["json"] is None and k["type"] is None for k in unreadable)
    assert any("pickle" in k["unreadable"] for k in unreadable)
    # The queue of int keys scans every key: it lists its item past the unreadable ones.
    (item,) = run_json("queue", directory, "-", "ls")
    assert item["value"]["json"] == "first int item"


def test_keys_lists_a_key_whose_decoder_raises(tmp_path: Path, run: Run) -> None:
    # A registered type whose decode raises (a bug in the app, or data it no longer reads).
    directory = tmp_path / "d"
    register_type(Point, "test-point", lambda p: p.x, Point)
    try:
        with Cache(str(directory)) as cache:
            cache["a"] = 1
            cache[("p", Point(1))] = 2
            cache["z"] = 3
    finally:
        unregister_type(Point)

    def refuse(x: int) -> Point:
        raise ValueError(f"no point {x}")

    register_type(Point, "test-point", lambda p: p.x, refuse)
    try:
        result = run("keys", directory)
    finally:
        unregister_type(Point)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["'a'", "'z'", "<unreadable key: ValueError>"]


def _squash(text: str) -> str:
    # A table's text without its folds, padding and rules, to find a long cell in it.
    return re.sub(r"[\s│┃━╇]+", "", text)


def test_jobs_ls_cuts_the_error_and_show_has_it_whole(tmp_path: Path, run: Run) -> None:
    # The error a worker records when it passes over a job it cannot decode (D-047): long,
    # so ls shows its start, cut, and show shows all of it.
    directory = tmp_path / "w"
    with Cache(str(directory), pickle=True) as cache:
        job_id = JobQueue(cache, "work").put(Custom())
    with Cache(str(directory)) as cache:
        assert JobQueue(cache, "work").take() is None
        info = JobQueue(cache, "work").get(job_id)
    assert info is not None
    error = info.error
    assert error is not None and "cannot decode" in error and len(error) > 100
    listed = run("jobs", directory, "work", "ls")
    assert listed.exit_code == 0, listed.output
    assert _squash(error[:60]) in _squash(listed.stdout)
    assert _squash(error) not in _squash(listed.stdout)
    assert "…" in listed.stdout
    shown = run("jobs", directory, "work", "show", job_id)
    assert shown.exit_code == 0, shown.output
    assert _squash(error) in _squash(shown.stdout)


def test_help_says_what_reading_writes(run: Run) -> None:
    # SQLite updates the -shm file of a database a writer has open, even for a reader.
    text = " ".join(run("--help").stdout.split())
    assert "-shm" in text and "a byte" not in text
